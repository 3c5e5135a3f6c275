"""Committed checkpoints (coworkenv.rl.portable): a fresh machine resumes from the pack a commit carries."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from coworkenv.rl.common import latest_checkpoint, load_checkpoint, save_checkpoint
from coworkenv.rl.portable import pack, unpack


def _trained(seed: int = 0, steps: int = 3) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 8))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(16, 256)).square().mean().backward()
        opt.step()
    return model, opt


def _continue(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int = 2) -> list[torch.Tensor]:
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(16, 256)).square().mean().backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _fresh() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 8))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def test_pack_fits_in_fp32_and_resumes_exactly(tmp_path: Path) -> None:
    model, opt = _trained()
    ck = save_checkpoint(tmp_path / "cache", 3, model, opt, {"note": "x"})
    (tmp_path / "metrics.jsonl").write_text('{"step": 3}\n')
    got = pack(
        ck,
        tmp_path / "commit" / "sft",
        limit_bytes=10 * 2**20,
        files={"metrics.jsonl": tmp_path / "metrics.jsonl"},
    )
    assert got.written
    assert got.moments == "float32"
    assert got.step == 3
    # the original run goes on from its cache; a fresh machine from the pack: the same weights
    want = _continue(*_reload(ck))
    fresh = tmp_path / "fresh"
    assert unpack(tmp_path / "commit" / "sft", fresh) == 3
    assert (fresh / "metrics.jsonl").read_text() == '{"step": 3}\n'
    ck2 = latest_checkpoint(fresh)
    assert ck2 is not None
    got_w = _continue(*_reload(ck2))
    assert all(torch.equal(a, b) for a, b in zip(want, got_w, strict=True))


def _reload(ck: Path) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model, opt = _fresh()
    load_checkpoint(ck, model, opt)
    return model, opt


def test_over_the_limit_moments_go_bf16_and_params_stay_exact(tmp_path: Path) -> None:
    model, opt = _trained()
    ck = save_checkpoint(tmp_path / "cache", 3, model, opt, {})
    n = sum(p.numel() for p in model.parameters())
    limit = (
        n * 4 + n * 2 * 2 + 64 * 1024
    )  # fp32 params + bf16 moments + rng and slack; fp32 moments do not fit
    got = pack(ck, tmp_path / "commit", limit_bytes=limit)
    assert got.written
    assert got.moments == "bfloat16"
    fresh = tmp_path / "fresh"
    unpack(tmp_path / "commit", fresh)
    ck2 = latest_checkpoint(fresh)
    assert ck2 is not None
    m1, o1 = _reload(ck)
    m2, o2 = _reload(ck2)
    assert all(torch.equal(a, b) for a, b in zip(m1.parameters(), m2.parameters(), strict=True))
    for s1, s2 in zip(o1.state.values(), o2.state.values(), strict=True):
        for k in ("exp_avg", "exp_avg_sq"):
            assert s2[k].dtype == torch.float32
            # bf16 keeps 8 significant bits: relative error at most 2^-9 per element
            assert torch.all((s1[k] - s2[k]).abs() <= s1[k].abs() * 2**-8 + 1e-30)
            assert not torch.equal(s1[k], s2[k])  # it did round


def test_too_large_writes_nothing_and_keeps_the_previous_pack(tmp_path: Path) -> None:
    model, opt = _trained()
    ck = save_checkpoint(tmp_path / "cache", 3, model, opt, {})
    assert pack(ck, tmp_path / "commit", limit_bytes=10 * 2**20).written
    ck4 = save_checkpoint(tmp_path / "cache", 4, model, opt, {})
    got = pack(ck4, tmp_path / "commit", limit_bytes=1000)
    assert not got.written
    assert got.bytes > 1000
    assert json.loads((tmp_path / "commit" / "portable.json").read_text())["step"] == 3


def test_unpack_leaves_a_newer_cache_alone(tmp_path: Path) -> None:
    model, opt = _trained()
    ck = save_checkpoint(tmp_path / "cache", 3, model, opt, {})
    pack(ck, tmp_path / "commit", limit_bytes=10 * 2**20)
    save_checkpoint(tmp_path / "cache", 5, model, opt, {})
    assert unpack(tmp_path / "commit", tmp_path / "cache") is None
    newest = latest_checkpoint(tmp_path / "cache")
    assert newest is not None
    assert newest.name == "step-000005"
    assert unpack(tmp_path / "nothing-committed", tmp_path / "x") is None
