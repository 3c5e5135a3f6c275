"""Training samples from a filtered prefix tree (see :mod:`coworkenv.trajectories.sample`).

Contract: one :class:`TrainingSample` per retained branch of an ``ok`` rollout with rewards. Its
``token_ids`` are the branch leaf's ``prompt_ids + output_ids`` (== the token path, by the tree
invariant); for every call node on the path its generated span gets ``loss_mask`` 1, the call's own
logprobs, weight ``1/n`` where ``n`` is the number of retained branches of this rollout through that
node, and a :class:`Segment` with the call's ``seq`` and ``state_hash``. Everything else is 0. All
branches carry the rollout's terminal reward. ``infra_failure`` rollouts, rollouts without rewards,
rejected and discarded rollouts produce no samples; :func:`rollout_samples` says why.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from coworkenv.rollout.record import RolloutRecord
from coworkenv.trajectories.filters import FilterResult
from coworkenv.trajectories.sample import Segment, TrainingSample
from coworkenv.trajectories.tree import PrefixTree


def no_samples_reason(record: RolloutRecord, tree: PrefixTree, filt: FilterResult) -> str | None:
    if record.status != "ok":
        return "infra_failure"
    if record.rewards is None:
        return "no_rewards"
    if tree.rejected:
        return "rejected"
    if filt.discarded:
        return "over_branching"
    if not filt.branches:
        return "no_trainable_calls"
    return None


def branch_counts(tree: PrefixTree, branches: list[int]) -> Counter[int]:
    """Node index -> number of retained branches whose token path contains it."""
    through: Counter[int] = Counter()
    for leaf in branches:
        i = leaf
        while i > 0:
            through[i] += 1
            i = tree.nodes[i].parent
    return through


def rollout_samples(
    record: RolloutRecord, tree: PrefixTree, filt: FilterResult
) -> tuple[list[TrainingSample], str | None]:
    """(samples, reason there are none)."""
    why = no_samples_reason(record, tree, filt)
    if why is not None:
        return [], why
    assert record.rewards is not None
    through = branch_counts(tree, filt.branches)
    parts = record.rewards.model_dump()
    out: list[TrainingSample] = []
    for b, leaf in enumerate(filt.branches):
        tokens = tree.tokens(leaf)
        n_tok = len(tokens)
        mask = np.zeros(n_tok, dtype=np.int64)
        logprobs = np.zeros(n_tok, dtype=np.float64)
        weights = np.zeros(n_tok, dtype=np.float64)
        segments: list[Segment] = []
        for node in tree.path(leaf):
            s, e = node.prompt_len, node.hist_len
            mask[s:e] = 1
            logprobs[s:e] = node.logprobs
            weights[s:e] = 1.0 / through[node.index]
            assert node.call is not None
            segments.append(Segment(start=s, end=e, call_seq=node.call.seq, state_hash=node.call.state_hash))
        first = tree.path(leaf)[0].call
        out.append(
            TrainingSample(
                rollout_id=record.rollout_id,
                task_id=record.task_id,
                harness=record.harness,
                group_key=f"{record.task_id}|{record.harness}",
                branch_id=b,
                policy_version=record.policy_version or (first.policy_version if first else "0"),
                token_ids=tuple(tokens.tolist()),
                loss_mask=tuple(mask.tolist()),
                logprobs=tuple(logprobs.tolist()),
                weights=tuple(weights.tolist()),
                segments=tuple(segments),
                reward=record.rewards.reward,
                reward_parts={k: float(v) for k, v in parts.items()},
            )
        )
    return out, None
