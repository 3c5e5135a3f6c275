"""Trunk-split tree attention equals dense-mask SDPA, forward and backward, and is what tree
batches use."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from coworkenv.rl import attention
from coworkenv.rl.attention import trunk_length, use_tree_attention
from coworkenv.rl.packing import forward_logprobs, packed_units
from coworkenv.rl.synthetic import branched_group
from coworkenv.rl.tiny import tiny_llama

VOCAB = 256


def _units(scope: Any) -> list[Any]:
    samples = branched_group(
        group_size=3, vocab=VOCAB, prefix_len=20, branch_len=10, seed=5, rewards=[1, 0, 1], shared_prompt=30
    )
    adv = {f"{s.rollout_id}#{s.branch_id}": [0.5] * len(s.token_ids) for s in samples}
    return packed_units(samples, adv, scope=scope)


def _logprobs_and_grads(units: list[Any], split: bool) -> Any:
    torch.manual_seed(0)
    model = tiny_llama(VOCAB)
    calls: list[int] = []
    real = attention.tree_attention

    def spy(*a: Any, tree_trunk: int = 0, **k: Any) -> Any:
        calls.append(tree_trunk)
        return real(*a, tree_trunk=tree_trunk if split else 0, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(attention, "tree_attention", spy)
        mp.setattr(attention, "TAIL_CHUNK", 7)  # several tail chunks
        assert use_tree_attention(model)  # registers the spy
        res = forward_logprobs(model, units)
        loss = sum(lp.sum() for lp, _ in res)
        assert isinstance(loss, torch.Tensor)
        loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return [lp.detach() for lp, _ in res], grads, calls


@pytest.mark.parametrize("scope", ["rollout", "group"])
def test_trunk_split_equals_dense_mask(scope: str) -> None:
    units = _units(scope)
    trunk = trunk_length(units[:1])
    assert trunk >= 30  # at least the shared prompt
    lp_split, g_split, calls = _logprobs_and_grads(units[:1], True)
    lp_dense, g_dense, _ = _logprobs_and_grads(units[:1], False)
    assert calls
    assert set(calls) == {trunk}  # every layer got the trunk through the decoder
    for a, b in zip(lp_split, lp_dense, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert g_split.keys() == g_dense.keys()
    for n in g_split:
        torch.testing.assert_close(g_split[n], g_dense[n], rtol=1e-4, atol=1e-6, msg=n)


def test_trunk_length_of_a_batch_is_the_shortest_chain() -> None:
    units = _units("rollout")
    assert len(units) == 3
    each = [trunk_length([u]) for u in units]
    assert trunk_length(units) == min(each)
    # group packing: one unit, the trunk is the shared prompt plus whatever the rollouts share
    (g,) = _units("group")
    assert 30 <= trunk_length([g]) < len(g)


@pytest.mark.parametrize("scope", ["rollout", "group"])
def test_tree_attention_matches_masked_sdpa_on_unit_scale_inputs(
    scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Function level, random unit-scale q/k/v (differences are not hidden by a tiny model's
    near-uniform attention): every row equals SDPA with the dense tree mask."""
    from coworkenv.rl.packing import collate

    (u,) = _units(scope)[:1]
    mask = collate([u], torch.float32)["attention_mask"]
    n = len(u)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, n, 16, generator=g, requires_grad=True) for _ in range(3))
    module = torch.nn.Module()
    module.num_key_value_groups = 1  # type: ignore[assignment]
    monkeypatch.setattr(attention, "TAIL_CHUNK", 7)
    trunk = trunk_length([u])
    out, _ = attention.tree_attention(module, q, k, v, mask, scaling=0.25, tree_trunk=trunk)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.25).transpose(
        1, 2
    )
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    # a wrong trunk (rows of the next branch taken as causal) is caught at this scale
    bad, _ = attention.tree_attention(module, q, k, v, mask, scaling=0.25, tree_trunk=trunk + 3)
    assert not torch.allclose(bad, ref, rtol=1e-5, atol=1e-6)
    gq = torch.autograd.grad(out.square().sum(), (q, k, v))
    gr = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for a, b in zip(gq, gr, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
