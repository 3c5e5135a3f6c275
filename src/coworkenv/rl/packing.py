"""Training units: one sequence per branch, or one tree-packed sequence per rollout.

Contract: a :class:`Unit` is a token sequence the model forwards once. Each node ``i`` has a
``parent[i]`` (−1 for a root) and is predicted by the logits at ``parent[i]``; ``pos[i]`` is its
depth. :func:`linear_units` makes one unit per :class:`TrainingSample` (parent = i − 1, causal).
:func:`packed_units` merges all branches of a rollout into a prefix trie — a shared prefix is one
run of nodes, forwarded once — attended through a tree mask (each node sees its ancestors and
itself) with depth position ids. A node's tree weight is the *sum* of the branch weights that pass
through it (1/n × n = 1 for a prefix shared by n branches), so the packed loss equals the per-branch
loss exactly and gradients match. Nodes merge only when token and loss mask agree, and for trained
nodes the advantage too.

``scope="group"`` goes one level up: all rollouts of a GRPO group (same ``group_key``) share one
trie, so the prompt they all start from — a CLI harness's 7–20k-token system prompt and tools — is
forwarded once per group instead of once per rollout. Only untrained nodes (loss mask 0) merge
across rollouts; every trained node keeps its rollout in ``owner``, so per-rollout loss
aggregation is unchanged and the gradient equals the per-rollout one (each trained token's loss
back-propagates through the same shared-prefix activations either way).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from coworkenv.rl.advantages import sample_key
from coworkenv.rl.attention import IMPL, trunk_length
from coworkenv.trajectories.sample import TrainingSample


@dataclass
class Unit:
    rollout_id: str
    tokens: list[int]
    parent: list[int]
    pos: list[int]
    mask: list[float]
    weight: list[float]
    logp_rollout: list[float]
    adv: list[float]
    tree: bool = False
    # per node, the rollout it came from (group-packed units span several rollouts; else empty)
    owner: list[str] = field(default_factory=list)
    # indices of trainable nodes (mask > 0, has a parent) and of the nodes predicting them
    train_idx: list[int] = field(default_factory=list)

    def finalize(self) -> Unit:
        self.train_idx = [
            i for i, (m, p) in enumerate(zip(self.mask, self.parent, strict=True)) if m and p >= 0
        ]
        return self

    def __len__(self) -> int:
        return len(self.tokens)

    def rollout_of(self, node: int) -> str:
        return self.owner[node] if self.owner else self.rollout_id


def linear_units(samples: Iterable[TrainingSample], adv: Mapping[str, Sequence[float]]) -> list[Unit]:
    out = []
    for s in samples:
        n = len(s.token_ids)
        out.append(
            Unit(
                rollout_id=s.rollout_id,
                tokens=list(s.token_ids),
                parent=list(range(-1, n - 1)),
                pos=list(range(n)),
                mask=[float(m) for m in s.loss_mask],
                weight=list(s.weights),
                logp_rollout=list(s.logprobs),
                adv=list(adv[sample_key(s)]),
            ).finalize()
        )
    return out


PackScope = Literal["rollout", "group"]


def packed_units(
    samples: Iterable[TrainingSample],
    adv: Mapping[str, Sequence[float]],
    *,
    scope: PackScope = "rollout",
) -> list[Unit]:
    buckets: dict[str, list[TrainingSample]] = {}
    for s in samples:
        buckets.setdefault(s.rollout_id if scope == "rollout" else f"group:{s.group_key}", []).append(s)
    units = []
    for uid, branches in buckets.items():
        u = Unit(uid, [], [], [], [], [], [], [], tree=True)
        index: dict[tuple[int, int, int, float, str], int] = {}
        for s in sorted(branches, key=lambda b: (b.rollout_id, b.branch_id)):
            a = adv[sample_key(s)]
            cur = -1
            for t, tok in enumerate(s.token_ids):
                trained = s.loss_mask[t]
                # an untrained node's advantage is never used; trained nodes never merge across
                # rollouts (each keeps its rollout's loss aggregation)
                key = (cur, tok, trained, round(a[t], 9) if trained else 0.0, s.rollout_id if trained else "")
                node = index.get(key)
                if node is None:
                    node = len(u.tokens)
                    index[key] = node
                    u.tokens.append(tok)
                    u.parent.append(cur)
                    u.pos.append(0 if cur < 0 else u.pos[cur] + 1)
                    u.mask.append(float(trained))
                    u.weight.append(0.0)
                    u.logp_rollout.append(s.logprobs[t])
                    u.adv.append(a[t])
                    u.owner.append(s.rollout_id)
                u.weight[node] += s.weights[t]
                cur = node
        u.tree = len(branches) > 1  # a single branch is a plain causal sequence
        if scope == "rollout":
            u.owner = []
        units.append(u.finalize())
    return units


def tokens_forwarded(units: Sequence[Unit]) -> int:
    return sum(len(u) for u in units)


def micro_batches(units: Sequence[Unit], max_tokens: int) -> list[list[Unit]]:
    """Greedy batches whose padded size (n × longest) stays within ``max_tokens`` (≥ 1 unit each)."""
    order = sorted(units, key=len, reverse=True)
    batches: list[list[Unit]] = []
    cur: list[Unit] = []
    for u in order:
        longest = max([len(x) for x in cur] + [len(u)])
        if cur and longest * (len(cur) + 1) > max_tokens:
            batches.append(cur)
            cur = []
        cur.append(u)
    if cur:
        batches.append(cur)
    return batches


def _tree_mask(u: Unit, length: int) -> torch.Tensor:
    """Boolean [length, length]: row i may attend to its ancestors and itself; padding rows see self."""
    allowed = torch.zeros(length, length, dtype=torch.bool)
    for i, p in enumerate(u.parent):
        if p >= 0:
            allowed[i] = allowed[p]
        allowed[i, i] = True
    for i in range(len(u), length):
        allowed[i, i] = True
    return allowed


def collate(units: Sequence[Unit], dtype: torch.dtype, *, bool_mask: bool = True) -> dict[str, Any]:
    """Model inputs for a micro-batch (right padding). Linear-only batches use the causal fast path;
    tree batches pass a 4D mask — boolean (True = attend, SDPA) or additive float (eager)."""
    length = max(len(u) for u in units)
    ids = torch.zeros(len(units), length, dtype=torch.long)
    pos = torch.zeros(len(units), length, dtype=torch.long)
    for b, u in enumerate(units):
        ids[b, : len(u)] = torch.tensor(u.tokens)
        pos[b, : len(u)] = torch.tensor(u.pos)
    if not any(u.tree for u in units):
        att = torch.zeros(len(units), length, dtype=torch.long)
        for b, u in enumerate(units):
            att[b, : len(u)] = 1
        return {"input_ids": ids, "position_ids": pos, "attention_mask": att}
    allowed = torch.stack([_tree_mask(u, length) for u in units])[:, None]
    if bool_mask:
        return {"input_ids": ids, "position_ids": pos, "attention_mask": allowed}
    bias = torch.zeros(allowed.shape, dtype=dtype)
    bias.masked_fill_(~allowed, torch.finfo(dtype).min)
    return {"input_ids": ids, "position_ids": pos, "attention_mask": bias}


def forward_logprobs(
    model: Any, units: Sequence[Unit], *, want_hidden: bool = False
) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """For each unit: logprobs of its trainable nodes (and the hidden states predicting them).

    The decoder runs once; the LM head is applied only to the rows that predict trainable nodes
    (the vocabulary projection is a large share of a small model's compute).
    """
    dtype = next(model.parameters()).dtype
    impl = getattr(getattr(model, "config", None), "_attn_implementation", "sdpa")
    batch = collate(units, dtype, bool_mask=impl in ("sdpa", "flex_attention", IMPL))
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    extra: dict[str, Any] = {}
    if impl == IMPL and batch["attention_mask"].ndim == 4:
        # tree batch: causal kernel for the shared trunk, chunked mask rows for the branches
        extra["tree_trunk"] = trunk_length(units)
    hidden = base.get_decoder()(**batch, use_cache=False, **extra).last_hidden_state
    head = base.get_output_embeddings()
    results: list[tuple[torch.Tensor, torch.Tensor | None]] = []
    for b, u in enumerate(units):
        tgt = torch.tensor(u.train_idx, dtype=torch.long)
        src = torch.tensor([u.parent[i] for i in u.train_idx], dtype=torch.long)
        rows = hidden[b].index_select(0, src)
        logp = torch.log_softmax(head(rows).float(), dim=-1).gather(1, batch["input_ids"][b, tgt][:, None])[
            :, 0
        ]
        results.append((logp, rows if want_hidden else None))
    return results
