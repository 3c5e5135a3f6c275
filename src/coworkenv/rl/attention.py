"""Trunk-split attention for tree-packed units: causal kernel for the shared trunk, mask for the rest.

Contract: :func:`tree_attention` computes exactly what SDPA computes with the unit's dense boolean
tree mask, in less memory and time when the unit starts with a long linear *trunk* (rows
``0..trunk-1`` whose parent is the previous row — the prompt every branch or, with group packing,
every rollout starts from). Trunk rows attend causally among themselves, so they go through SDPA
with ``is_causal=True`` (the fused CPU/GPU kernels, O(L) memory); the remaining rows attend through
their mask rows, in chunks of :data:`TAIL_CHUNK` queries, each against only the keys some row of
the chunk attends to (the trunk and its own branch, not the other rollouts') and recomputed in
backward rather than stored. The score matrix held at once is ``heads × chunk × keys`` instead of
``heads × L × L`` (dense, a 22k-node group of six codex rollouts would need ~17 GB per layer).

:func:`trunk_length` finds the trunk of a micro-batch; :func:`use_tree_attention` switches an SDPA
model to this implementation (registered with transformers' ``AttentionInterface`` under
:data:`IMPL`; plain SDPA whenever no trunk is given); the decoder passes ``tree_trunk`` through.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch.utils.checkpoint import checkpoint

IMPL = "coworkenv_tree"
TAIL_CHUNK = 1024


class _HasParent(Protocol):
    parent: list[int]

    def __len__(self) -> int: ...


def trunk_length(units: Sequence[_HasParent]) -> int:
    """Rows ``0..n-1`` that are a plain causal chain in every unit of the batch."""
    n = min(len(u) for u in units)
    for u in units:
        i = 1
        while i < n and u.parent[i] == i - 1:
            i += 1
        n = min(n, i)
    return n


def tree_attention(  # noqa: PLR0917 (transformers' attention-function signature)
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    tree_trunk: int = 0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    length = query.shape[2]
    if attention_mask is None or attention_mask.ndim != 4 or tree_trunk <= 1 or length != key.shape[2]:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    p = min(tree_trunk, length)
    parts = [
        sdpa_attention_forward(
            module,
            query[:, :, :p],
            key[:, :, :p],
            value[:, :, :p],
            None,
            dropout=dropout,
            scaling=scaling,
            is_causal=True,
        )[0]
    ]

    def rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return sdpa_attention_forward(module, q, k, v, m, dropout=dropout, scaling=scaling, is_causal=False)[
            0
        ]

    for a in range(p, length, TAIL_CHUNK):
        b = min(a + TAIL_CHUNK, length)
        q, m = query[:, :, a:b], attention_mask[:, :, a:b]
        k, v = key, value
        if m.dtype == torch.bool:
            # keys no row of the chunk attends to (other rollouts' and branches' nodes) are dropped
            cols = m.any(dim=2).any(dim=0).any(dim=0).nonzero().squeeze(1)
            if len(cols) < key.shape[2]:
                k, v, m = key.index_select(2, cols), value.index_select(2, cols), m.index_select(3, cols)
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
            # keep only the chunk's inputs for backward, not its heads × chunk × keys probabilities
            out = checkpoint(rows, q, k, v, m, use_reentrant=False)
        else:
            out = rows(q, k, v, m)
        assert isinstance(out, torch.Tensor)
        parts.append(out)
    return torch.cat(parts, dim=1), None  # [batch, seq, heads, dim], as transformers expects


def use_tree_attention(model: Any) -> bool:
    """Switch an SDPA model to :func:`tree_attention` (registered as :data:`IMPL`) for good.

    Without ``tree_trunk`` it is plain SDPA, so generation and linear batches are unchanged; the
    switch is permanent because activation checkpointing re-runs each layer's forward during
    backward, which must take the same path. Returns whether the model now uses it.
    """
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(IMPL, tree_attention)
    AttentionMaskInterface.register(IMPL, sdpa_mask)
    configs = [m.config for m in model.modules() if hasattr(m, "config")]
    if hasattr(model, "config"):
        configs.append(model.config)
    if any(c._attn_implementation not in ("sdpa", IMPL) for c in configs):
        return False
    for c in configs:
        c._attn_implementation = IMPL
    return True
