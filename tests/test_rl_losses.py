"""PPO-clip terms, k3 KL, truncated IS weights and loss aggregation coefficients."""

from __future__ import annotations

import math

import pytest
import torch

from coworkenv.rl.losses import k3_kl, loss_coefficients, ppo_clip_terms, truncated_is_weights


def test_is_weights_truncate_and_report() -> None:
    old = torch.tensor([0.0, -1.0, -1.0, -5.0])
    roll = torch.tensor([0.0, -1.5, -3.0, -5.0])
    mask = torch.tensor([1.0, 1.0, 1.0, 0.0])
    w, st = truncated_is_weights(old, roll, mask, cap=2.0)
    assert w.tolist() == pytest.approx([1.0, math.exp(0.5), 2.0, 1.0])
    assert st.frac_clipped == pytest.approx(1 / 3)
    assert st.max_abs_dlogp == pytest.approx(2.0)
    assert st.mean_abs_dlogp == pytest.approx(2.5 / 3)


def test_ppo_clip_terms() -> None:
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1]))  # ratios vs old = 0
    old = torch.zeros(3)
    adv = torch.tensor([1.0, -1.0, 1.0])
    terms, aux = ppo_clip_terms(logp, old, adv, clip_low=0.2, clip_high=0.28)
    # A>0, ρ=1.5 -> clipped at 1.28; A<0, ρ=0.5 -> clipped at 0.8 -> -(-0.8)=0.8; ρ=1.1 unclipped
    assert terms.tolist() == pytest.approx([-1.28, 0.8, -1.1])
    assert aux["clipped"].tolist() == [1.0, 1.0, 0.0]
    w = torch.tensor([0.5, 1.0, 2.0])
    terms_w, _ = ppo_clip_terms(logp, old, adv, clip_low=0.2, clip_high=0.28, is_weights=w)
    assert terms_w.tolist() == pytest.approx([-0.64, 0.8, -2.2])


def test_k3_and_kl_term() -> None:
    logp = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-1.0, -1.0])
    assert k3_kl(logp, ref).tolist() == pytest.approx([0.0, math.e - 2.0])
    terms, aux = ppo_clip_terms(
        logp, logp.detach(), torch.zeros(2), clip_low=0.2, clip_high=0.2, logp_ref=ref, kl_beta=0.1
    )
    assert terms.tolist() == pytest.approx([0.0, 0.1 * (math.e - 2.0)])
    assert "kl" in aux


def test_aggregation_modes_with_tree_weights() -> None:
    # rollout r: two branches sharing 2 tokens (w 0.5) + 1 own token each; rollout s: 1 branch of 2
    masks = [torch.ones(3), torch.ones(3), torch.ones(2)]
    weights = [torch.tensor([0.5, 0.5, 1.0]), torch.tensor([0.5, 0.5, 1.0]), torch.ones(2)]
    rolls = ["r", "r", "s"]
    tm = loss_coefficients(masks, weights, rolls, "token_mean")
    assert float(sum(c.sum() for c in tm)) == pytest.approx(1.0)
    assert tm[0].tolist() == pytest.approx([0.5 / 6, 0.5 / 6, 1 / 6])  # 6 unique tokens
    sm = loss_coefficients(masks, weights, rolls, "seq_mean")
    assert float(sm[0].sum() + sm[1].sum()) == pytest.approx(0.5)  # each rollout weighs 1/2
    assert float(sm[2].sum()) == pytest.approx(0.5)
    fx = loss_coefficients(masks, weights, rolls, "fixed", normalizer=10)
    assert fx[2].tolist() == pytest.approx([1 / 20, 1 / 20])
    with pytest.raises(ValueError, match="unknown aggregation"):
        loss_coefficients(masks, weights, rolls, "bogus")  # type: ignore[arg-type]
