"""Synthetic branched rollouts for tests and benchmarks (no environment needed).

Contract: :func:`branched_group` returns ``group_size`` rollouts of one (task, harness) group, each
with ``branches`` root-to-leaf samples that share a prefix of ``prefix_len`` tokens (generated
tokens in it carry tree weight ``1/branches``) followed by ``branch_len`` own tokens; alternating
prompt/generated segments give realistic loss masks. ``shared_prompt`` tokens (loss mask 0, the
same for every rollout of the group, like a harness's system prompt) go before each rollout's own
tokens. Deterministic for a seed.
"""

from __future__ import annotations

import random

from coworkenv.trajectories.sample import Segment, TrainingSample


def _segments(start: int, length: int, rng: random.Random, seq0: int) -> tuple[list[int], list[Segment]]:
    """Mask for ``length`` tokens starting at ``start``: 1/3 environment, 2/3 generated, in chunks."""
    mask: list[int] = []
    segs: list[Segment] = []
    seq = seq0
    while len(mask) < length:
        env = min(max(1, rng.randint(4, 12)), length - len(mask))
        mask += [0] * env
        gen = min(rng.randint(8, 24), length - len(mask))
        if gen > 0:
            a = start + len(mask)
            segs.append(Segment(start=a, end=a + gen, call_seq=seq, state_hash=f"s{seq}-{rng.randint(0, 1)}"))
            seq += 1
            mask += [1] * gen
    return mask, segs


def branched_group(
    *,
    task: str = "t",
    harness: str = "h",
    group_size: int = 4,
    branches: int = 2,
    prefix_len: int = 96,
    branch_len: int = 32,
    vocab: int = 512,
    seed: int = 0,
    rewards: list[float] | None = None,
    shared_prompt: int = 0,
) -> list[TrainingSample]:
    rng = random.Random(seed)
    out: list[TrainingSample] = []
    head = [rng.randrange(vocab) for _ in range(shared_prompt)]
    for g in range(group_size):
        rid = f"{task}-{harness}-{seed}-{g}"
        reward = rewards[g] if rewards else float(rng.random() > 0.5)
        prefix = [rng.randrange(vocab) for _ in range(prefix_len)]
        pmask, psegs = _segments(shared_prompt, prefix_len, rng, 0)
        pmask[0] = 0
        prefix = head + prefix
        pmask = [0] * shared_prompt + pmask
        plen = shared_prompt + prefix_len
        for b in range(branches):
            tail = [rng.randrange(vocab) for _ in range(branch_len)]
            tmask, tsegs = _segments(plen, branch_len, rng, 100 * (b + 1))
            toks = prefix + tail
            mask = pmask + tmask
            w = [(1.0 / branches if i < plen else 1.0) * m for i, m in enumerate(mask)]
            lps = [-rng.uniform(0.5, 6.0) * m for m in mask]
            if b > 0:  # shared prefix: same rollout logprobs as branch 0
                lps[:plen] = out[-b].logprobs[:plen]
            out.append(
                TrainingSample(
                    rollout_id=rid,
                    task_id=task,
                    harness=harness,
                    group_key=f"{task}|{harness}",
                    branch_id=b,
                    token_ids=tuple(toks),
                    loss_mask=tuple(mask),
                    logprobs=tuple(lps),
                    weights=tuple(w),
                    segments=tuple(psegs + tsegs),
                    reward=reward,
                    reward_parts={"completion": reward, "safety": 1.0, "robustness": 1.0},
                )
            )
    return out
