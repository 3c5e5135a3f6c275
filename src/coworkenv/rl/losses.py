"""Token-level policy losses: PPO-clip with masks, k3 KL, truncated IS correction, aggregation.

Contract: every function takes flat (or equally shaped) float tensors aligned per token.

* :func:`loss_coefficients` turns ``mask × tree weight`` into per-token coefficients ``c`` so that
  the aggregated loss of the whole step is ``Σ c · ℓ`` — additive over micro-batches and ranks
  (the denominators are computed once over the full step). Modes: ``token_mean``
  (Σ m w ℓ / Σ m w), ``seq_mean`` (mean over rollouts of each rollout's weighted token mean) and
  ``fixed`` (Σ m w ℓ / (normalizer × n_rollouts), Dr.GRPO's constant normalizer per rollout).
  Tree weights (1/n on a prefix shared by n branches) make shared tokens count once per rollout.
* :func:`truncated_is_weights`: ``w_t = min(exp(logπ_old − logπ_rollout), c̄)`` (detached), with
  mismatch statistics (mean/max |Δlogp|, fraction clipped) over masked tokens.
* :func:`ppo_clip_terms`: per-token ``−w_t · min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A) + β·k3`` where
  ``k3 = exp(ref − logπ) − (ref − logπ) − 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

Aggregation = Literal["token_mean", "seq_mean", "fixed"]


def loss_coefficients(
    masks: Sequence[torch.Tensor],
    weights: Sequence[torch.Tensor],
    rollout_of: Sequence[str],
    mode: Aggregation,
    *,
    normalizer: float = 1536.0,
) -> list[torch.Tensor]:
    """Per-sequence coefficient tensors for the whole step (see module docstring)."""
    mw = [m.float() * w.float() for m, w in zip(masks, weights, strict=True)]
    rollouts = sorted(set(rollout_of))
    n_roll = max(len(rollouts), 1)
    if mode == "token_mean":
        total = sum(float(x.sum()) for x in mw)
        return [x / total if total > 0 else x * 0.0 for x in mw]
    if mode == "fixed":
        return [x / (normalizer * n_roll) for x in mw]
    if mode == "seq_mean":
        per_roll: dict[str, float] = dict.fromkeys(rollouts, 0.0)
        for x, r in zip(mw, rollout_of, strict=True):
            per_roll[r] += float(x.sum())
        nonempty = max(sum(1 for v in per_roll.values() if v > 0), 1)
        return [
            x / (per_roll[r] * nonempty) if per_roll[r] > 0 else x * 0.0
            for x, r in zip(mw, rollout_of, strict=True)
        ]
    raise ValueError(f"unknown aggregation {mode!r}; use token_mean, seq_mean or fixed")


@dataclass(frozen=True)
class MismatchStats:
    mean_abs_dlogp: float
    max_abs_dlogp: float
    frac_clipped: float
    mean_weight: float
    n_tokens: int

    def as_dict(self, prefix: str = "is/") -> dict[str, float]:
        return {
            f"{prefix}mean_abs_dlogp": self.mean_abs_dlogp,
            f"{prefix}max_abs_dlogp": self.max_abs_dlogp,
            f"{prefix}frac_clipped": self.frac_clipped,
            f"{prefix}mean_weight": self.mean_weight,
        }


def truncated_is_weights(
    logp_old: torch.Tensor, logp_rollout: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, MismatchStats]:
    """Token-level truncated importance weights and mismatch statistics (masked tokens only)."""
    delta = (logp_old - logp_rollout).detach()
    raw = torch.exp(delta)
    w = torch.clamp(raw, max=cap)
    sel = mask.bool()
    n = int(sel.sum())
    if n == 0:
        return w, MismatchStats(0.0, 0.0, 0.0, 1.0, 0)
    d = delta[sel].abs()
    stats = MismatchStats(
        mean_abs_dlogp=float(d.mean()),
        max_abs_dlogp=float(d.max()),
        frac_clipped=float((raw[sel] > cap).float().mean()),
        mean_weight=float(w[sel].mean()),
        n_tokens=n,
    )
    return w, stats


def k3_kl(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π ‖ π_ref): exp(r) − r − 1 with r = logπ_ref − logπ."""
    r = logp_ref - logp
    return torch.exp(r) - r - 1.0


def ppo_clip_terms(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    is_weights: torch.Tensor | None = None,
    logp_ref: torch.Tensor | None = None,
    kl_beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token PPO-clip loss (to be multiplied by :func:`loss_coefficients` and summed)."""
    ratio = torch.exp(logp - logp_old)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    pg = -torch.minimum(unclipped, clipped)
    if is_weights is not None:
        pg = pg * is_weights.detach()
    aux: dict[str, torch.Tensor] = {
        "ratio": ratio.detach(),
        "clipped": (unclipped > clipped).detach().float(),
    }
    loss = pg
    if logp_ref is not None and kl_beta > 0:
        kl = k3_kl(logp, logp_ref.detach())
        loss = loss + kl_beta * kl
        aux["kl"] = kl.detach()
    return loss, aux


def value_terms(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """Per-token squared error of the value head (masked and aggregated by coefficients)."""
    return (values - returns) ** 2
