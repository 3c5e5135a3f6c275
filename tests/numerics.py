"""Tolerances for comparing two training runs that did the same math in a different order (one
process vs several, packed vs unpacked): how far Adam's first step lets their weights drift apart.

Adam(W)'s first step moves each weight by ``lr·f(g)`` with ``f(g) = g/(|g|+ε)`` (``m̂ = g``,
``√v̂ = |g|``): a function whose slope ``ε/(|g|+ε)²`` is ``1/ε`` at ``g = 0``, so last-bit differences of
near-zero gradients become lr-sized weight differences and equal weights cannot be asked for.
What two such runs must agree on is the update of the gradients they computed; these bounds say
how far apart that allows each weight to be. Weight decay scales both runs' weights alike and adds
nothing.
"""

from __future__ import annotations

import torch

FP32_EPS = torch.finfo(torch.float32).eps


def adam_first_step_gap(g1: torch.Tensor, g2: torch.Tensor, *, lr: float, eps: float) -> torch.Tensor:
    """Per element, the most two first Adam steps can differ for gradients ``g1`` and ``g2``: by the
    mean value theorem ``|f(g1) − f(g2)| ≤ |g1 − g2| · max f'`` over the segment between them, and
    ``f'`` is largest where ``|g|`` is smallest — at the segment's end nearest 0, or at 0 when the
    signs differ; never more than 2 (``|f| < 1``)."""
    nearest = torch.where(torch.sign(g1) * torch.sign(g2) > 0, torch.minimum(g1.abs(), g2.abs()), 0.0)
    slope = eps / (nearest + eps) ** 2
    return lr * torch.clamp((g1 - g2).abs() * slope, max=2.0)


def adam_first_step_gap_from_updates(
    d1: torch.Tensor, d2: torch.Tensor, *, lr: float, eps: float, grad_rtol: float, grad_atol: float
) -> torch.Tensor:
    """The same bound when only the two runs' first-step updates ``d = w_after − w_before`` are
    known: each run's ``|g|`` follows from its update (``|f| = |d|/lr`` ⇒ ``|g| = ε|f|/(1−|f|)``;
    the smaller of the two is taken, which only widens the bound), and the gradients are taken to
    agree within ``grad_rtol·|g| + grad_atol`` — what the FSDP test asserts of gradients directly."""
    f = torch.clamp(torch.minimum(d1.abs(), d2.abs()) / lr, max=1 - 1e-6)
    g = eps * f / (1 - f)
    slope = eps / (g + eps) ** 2
    return lr * torch.clamp((grad_rtol * g + grad_atol) * slope, max=2.0)


def rounding(w: torch.Tensor, lr: float) -> torch.Tensor:
    """fp32 rounding of ``w − lr·f`` and of the step itself, a few ulps."""
    return 4 * FP32_EPS * (w.abs() + lr)
