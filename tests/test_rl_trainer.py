"""RLTrainer on a tiny random Llama: parameters move, IS clips, NaN aborts, packing is exact,
configs fail early, checkpoints resume."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from coworkenv.errors import SpecError
from coworkenv.rl.advantages import NonFiniteError
from coworkenv.rl.config import RLConfig, load_config, parse_config
from coworkenv.rl.rl import RLTrainer
from coworkenv.rl.synthetic import branched_group
from coworkenv.rl.tiny import tiny_llama

VOCAB = 256


def cfg(tmp: Path, **kw: Any) -> RLConfig:
    base: dict[str, Any] = {
        "model": {"lora": None},
        "run": {"out_dir": str(tmp), "resume": False},
        "group_size": 4,
        "batch_size": 4,
        "optim": {"lr": 1e-2},
    }
    base.update(kw)
    return parse_config(RLConfig, base)


def group(seed: int = 0, **kw: Any) -> list[Any]:
    return branched_group(
        group_size=4, vocab=VOCAB, prefix_len=24, branch_len=12, seed=seed, rewards=[1, 0, 0, 1], **kw
    )


def test_step_moves_every_trainable_param_and_pushes_weights(tmp_path: Path) -> None:
    seen: list[int] = []
    tr = RLTrainer(cfg(tmp_path), model=tiny_llama(VOCAB), on_weights=lambda m, v: seen.append(v))
    before = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    m = tr.step(group())
    assert m["updates"] == 1
    assert seen == [1]
    assert tr.version == 1
    for n, p in tr.model.named_parameters():
        if n == "model.embed_tokens.weight":
            continue  # rows of unused tokens get no gradient; checked below on used rows
        assert not torch.equal(p, before[n]), f"{n} did not move"
    used = sorted({t for s in group() for t in s.token_ids})
    assert not torch.equal(
        tr.model.model.embed_tokens.weight[used], before["model.embed_tokens.weight"][used]
    )
    assert (tmp_path / "metrics.jsonl").exists()


def test_lora_step_trains_adapters_only(tmp_path: Path) -> None:
    c = cfg(tmp_path, model={"lora": {"r": 4, "alpha": 8, "dropout": 0.0}}, kl_beta=0.05)
    tr = RLTrainer(c, model=tiny_llama(VOCAB))
    named = dict(tr.model.named_parameters())
    before = {n: p.detach().clone() for n, p in named.items()}
    m = tr.step(group())
    assert m["updates"] == 1
    assert "kl" in m
    for n, p in named.items():
        moved = not torch.equal(p, before[n])
        if "lora_B" in n:
            assert moved, n
        if "lora_" not in n:
            assert not moved, f"frozen {n} moved"


@pytest.mark.parametrize("epochs", [1, 2])  # 1: π_old fused into the update forward; 2: separate pass
def test_is_weights_clip(tmp_path: Path, epochs: int) -> None:
    tr = RLTrainer(cfg(tmp_path, is_cap=1.0, ppo_epochs=epochs), model=tiny_llama(VOCAB))
    # rollout logprobs far below the trainer's: exp(old - rollout) > 1 everywhere -> all clipped
    samples = [s.model_copy(update={"logprobs": tuple(-30.0 * m for m in s.loss_mask)}) for s in group()]
    m = tr.step(samples)
    assert m["updates"] == epochs
    assert m["is/frac_clipped"] == pytest.approx(1.0)
    assert m["is/mean_weight"] == pytest.approx(1.0)
    assert m["is/max_abs_dlogp"] > 20
    assert 0 < m["is/mean_abs_dlogp"] <= m["is/max_abs_dlogp"]  # a mean over tokens, not a sum


def test_nan_reward_raises_before_any_update(tmp_path: Path) -> None:
    tr = RLTrainer(cfg(tmp_path), model=tiny_llama(VOCAB))
    before = [p.detach().clone() for p in tr.model.parameters()]
    bad = group()
    bad[0] = bad[0].model_copy(update={"reward": math.nan})
    with pytest.raises(NonFiniteError, match="reward is nan"):
        tr.step(bad)
    assert all(torch.equal(a, b) for a, b in zip(before, tr.model.parameters(), strict=True))
    assert tr.version == 0


def test_incomplete_group_is_skipped(tmp_path: Path) -> None:
    tr = RLTrainer(cfg(tmp_path), model=tiny_llama(VOCAB))
    m = tr.step(group()[:4])  # 2 of 4 rollouts
    assert m["skipped"] == 1
    assert m["rejected_incomplete"] == 1
    assert tr.version == 0


def _step_capturing_grads(
    tr: RLTrainer, samples: list[Any]
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """One step with the optimizer's update disabled; returns its metrics and the gradients."""
    grads: dict[str, torch.Tensor] = {}
    tr.optimizer.step = lambda *a, **k: None  # type: ignore[method-assign]
    zero = tr.optimizer.zero_grad

    def snap(*a: Any, **k: Any) -> None:
        grads.update({n: p.grad.clone() for n, p in tr.model.named_parameters() if p.grad is not None})
        zero(*a, **k)

    tr.optimizer.zero_grad = snap  # type: ignore[method-assign]
    return tr.step(samples), grads


def _assert_same_step(
    a: tuple[dict[str, Any], dict[str, torch.Tensor]], b: Any, rtol: float = 1e-3, atol: float = 1e-6
) -> None:
    """Same loss and gradients (the loss to 10× the gradients' relative tolerance)."""
    (ma, ga), (mb, gb) = a, b
    assert ma["loss"] == pytest.approx(mb["loss"], rel=rtol / 10, abs=atol)
    assert ga.keys() == gb.keys()
    for n in ga:
        torch.testing.assert_close(ga[n], gb[n], rtol=rtol, atol=atol, msg=n)


@pytest.mark.parametrize("estimator", ["grpo", "gigpo", "ppo"])
def test_packed_gradients_equal_branchwise(tmp_path: Path, estimator: str) -> None:
    runs = {
        packing: _step_capturing_grads(
            RLTrainer(
                cfg(tmp_path / str(packing), packing=packing, estimator=estimator, kl_beta=0.1),
                model=tiny_llama(VOCAB),
                log_metrics=False,
            ),
            group(),
        )
        for packing in (True, False)
    }
    assert runs[True][0]["tokens_forwarded"] < runs[False][0]["tokens_forwarded"]
    _assert_same_step(runs[True], runs[False])


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean"])
def test_group_packing_shares_the_prompt_and_keeps_gradients(tmp_path: Path, agg: str) -> None:
    """pack_scope="group": the prompt every rollout starts from is forwarded once per group, and
    loss and gradients equal one-sequence-per-branch training (per-rollout aggregation kept)."""
    samples = branched_group(
        group_size=4,
        vocab=VOCAB,
        prefix_len=24,
        branch_len=12,
        seed=3,
        rewards=[1, 0, 0, 1],
        shared_prompt=40,
    )
    runs = {
        name: _step_capturing_grads(
            RLTrainer(
                cfg(tmp_path / name, aggregation=agg, **kw), model=tiny_llama(VOCAB), log_metrics=False
            ),
            samples,
        )
        for name, kw in {
            "linear": {"packing": False},
            "rollout": {"pack_scope": "rollout"},
            "group": {"pack_scope": "group"},
        }.items()
    }
    n = {k: v[0]["tokens_forwarded"] for k, v in runs.items()}
    # 4 rollouts × 2 branches; the 40 prompt tokens once per group instead of once per rollout
    assert n["linear"] == 8 * (40 + 24 + 12)
    assert n["rollout"] == 4 * (40 + 24 + 2 * 12)
    assert n["group"] == 40 + 4 * (24 + 2 * 12)
    _assert_same_step(runs["rollout"], runs["linear"])
    _assert_same_step(runs["group"], runs["linear"])


def test_groups_without_signal_are_not_forwarded_and_change_nothing(tmp_path: Path) -> None:
    varied = branched_group(
        group_size=4, vocab=VOCAB, prefix_len=24, branch_len=12, seed=1, rewards=[1, 0, 0, 1]
    )
    flat = branched_group(
        task="u", group_size=4, vocab=VOCAB, prefix_len=24, branch_len=12, seed=2, rewards=[1, 1, 1, 1]
    )
    runs = {}
    for name in ("skip", "keep"):
        tr = RLTrainer(cfg(tmp_path / name, batch_size=8), model=tiny_llama(VOCAB), log_metrics=False)
        if name == "keep":
            tr._with_signal = lambda units, coefs, metrics: (units, coefs)  # type: ignore[method-assign]
        runs[name] = _step_capturing_grads(tr, varied + flat)
    assert runs["skip"][0]["units_without_signal"] == 4  # the flat group's 4 rollouts
    assert runs["skip"][0]["tokens_forwarded"] * 2 == runs["keep"][0]["tokens_forwarded"]
    _assert_same_step(runs["skip"], runs["keep"], rtol=1e-4, atol=1e-7)


def test_update_runs_in_training_mode_so_activation_checkpointing_is_active(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers checkpoints layers only while ``model.training``; the update forward must run
    in it (dropout stays off), and the model is back in eval mode afterwards."""
    import coworkenv.rl.rl as rl_mod

    tr = RLTrainer(cfg(tmp_path), model=tiny_llama(VOCAB), log_metrics=False)
    assert tr.model.is_activation_checkpointing
    seen: list[tuple[bool, bool]] = []
    real = rl_mod.forward_logprobs

    def spy(model: Any, *a: Any, **k: Any) -> Any:
        drop = [m.training for m in model.modules() if isinstance(m, torch.nn.Dropout)]
        seen.append((model.training, any(drop)))
        return real(model, *a, **k)

    monkeypatch.setattr(rl_mod, "forward_logprobs", spy)
    tr.step(group())
    assert seen
    assert all(training and not dropout for training, dropout in seen)
    assert not tr.model.training


def test_config_errors_name_the_values(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"batch_size=12 is not a multiple of group_size=8"):
        parse_config(RLConfig, {"batch_size": 12, "group_size": 8})
    with pytest.raises(SpecError, match=r"clip_low.*-0\.1"):
        parse_config(RLConfig, {"clip_low": -0.1})
    with pytest.raises(SpecError, match=r"estimator.*unknown estimator 'ppg'"):
        parse_config(RLConfig, {"estimator": "ppg"})
    p = tmp_path / "c.yaml"
    p.write_text("estimator: grpo\nbatch_size: 3\ngroup_size: 2\n")
    with pytest.raises(SpecError, match=r"c\.yaml"):
        load_config(p, RLConfig)


def test_checkpoint_resume(tmp_path: Path) -> None:
    c = cfg(tmp_path, run={"out_dir": str(tmp_path), "resume": True, "save_every": 1})
    tr = RLTrainer(c, model=tiny_llama(VOCAB))
    tr.step(group())
    state = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    after_two = None
    tr.step(group(seed=1))
    after_two = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    # a fresh trainer resumes from step 2 with the same weights and optimizer
    tr2 = RLTrainer(c, model=tiny_llama(VOCAB))
    assert (tr2.step_count, tr2.version) == (2, 2)
    for n, p in tr2.model.named_parameters():
        assert torch.equal(p, after_two[n])
        assert not torch.equal(p, state[n]) or n == "model.embed_tokens.weight"
    assert tr2.optimizer.state_dict()["state"].keys() == tr.optimizer.state_dict()["state"].keys()


def test_equal_rewards_in_every_group_skip_the_update_without_touching_weights(tmp_path: Path) -> None:
    """GRPO with no learning signal: no forward/backward, no version bump, weights unchanged."""
    from coworkenv.rl.config import RLConfig, RunConfig
    from coworkenv.rl.rl import RLTrainer
    from coworkenv.rl.synthetic import branched_group
    from coworkenv.rl.tiny import tiny_llama

    model = tiny_llama(64, hidden=32, layers=1, heads=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    samples = branched_group(
        group_size=2, branches=2, vocab=64, prefix_len=16, branch_len=8, rewards=[0.2, 0.2]
    )
    cfg = RLConfig.model_validate(
        {
            "group_size": 2,
            "batch_size": 2,
            "model": {"lora": None},
            "run": RunConfig(out_dir=tmp_path).model_dump(),
        }
    )
    pushed: list[int] = []
    trainer = RLTrainer(cfg, model=model, on_weights=lambda _m, v: pushed.append(v))
    t0 = time.perf_counter()
    out = trainer.step(samples)
    assert 0 <= out["step_s"] <= time.perf_counter() - t0
    assert out["skipped_no_signal"] == 1
    assert pushed == []
    assert trainer.version == 0
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())


@pytest.mark.parametrize("epochs", [1, 2])  # 1: IS weights from the fused forward; 2: from the old pass
def test_update_gradient_is_scaled_by_the_is_weights(tmp_path: Path, epochs: int) -> None:
    """The truncated IS weights multiply the policy gradient, not just the logged metric: with every
    raw weight far above the cap, the weight is the cap on every token, so the gradient at cap 0.25
    is exactly a quarter of the gradient at cap 1 (an update that dropped the weights gives equal
    gradients)."""
    samples = [s.model_copy(update={"logprobs": tuple(-30.0 * m for m in s.loss_mask)}) for s in group()]
    runs = {
        cap: _step_capturing_grads(
            RLTrainer(
                cfg(tmp_path / str(cap), is_cap=cap, ppo_epochs=epochs, optim={"lr": 1e-2, "grad_clip": 1e9}),
                model=tiny_llama(VOCAB),
                log_metrics=False,
            ),
            samples,
        )
        for cap in (1.0, 0.25)
    }
    (m_full, g_full), (m_quarter, g_quarter) = runs[1.0], runs[0.25]
    assert m_quarter["is/mean_weight"] == pytest.approx(0.25)
    assert m_quarter["loss"] == pytest.approx(0.25 * m_full["loss"], rel=1e-4, abs=1e-9)
    assert g_full.keys() == g_quarter.keys()
    assert any(float(g.abs().max()) > 0 for g in g_full.values())
    for n in g_full:
        torch.testing.assert_close(g_quarter[n], 0.25 * g_full[n], rtol=1e-4, atol=1e-9, msg=n)


def test_ppo_advantage_subtracts_the_value_baseline(tmp_path: Path) -> None:
    """PPO's advantage is ``R − V(s_t)``: with the value head set to a constant V = b (a zero head,
    as at init, would hide a missing baseline) and the value loss off, the policy gradient equals
    the one from a zero head on rewards shifted by −b. Without the baseline the two differ."""
    b = 0.5

    def run(name: str, bias: float, rewards: list[float]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        tr = RLTrainer(
            cfg(tmp_path / name, estimator="ppo", value_coef=0.0, optim={"lr": 1e-2, "grad_clip": 1e9}),
            model=tiny_llama(VOCAB),
            log_metrics=False,
        )
        head = tr.extra["value_head"]
        assert isinstance(head, torch.nn.Linear)
        with torch.no_grad():
            head.bias.fill_(bias)
        samples = branched_group(
            group_size=4, vocab=VOCAB, prefix_len=24, branch_len=12, seed=0, rewards=rewards
        )
        return _step_capturing_grads(tr, samples)

    with_baseline = run("baseline", b, [1, 0, 0, 1])
    shifted = run("shifted", 0.0, [1 - b, -b, -b, 1 - b])
    assert with_baseline[0]["adv_abs_mean"] == pytest.approx(b, abs=1e-6)  # every A_t = ±0.5
    _assert_same_step(with_baseline, shifted, rtol=1e-4, atol=1e-8)
    no_baseline = run("none", 0.0, [1, 0, 0, 1])
    assert no_baseline[0]["adv_mean"] == pytest.approx(with_baseline[0]["adv_mean"] + b, abs=1e-6)


def test_clip_fraction_is_a_share_of_tokens(tmp_path: Path) -> None:
    """A large first update moves the ratios past the clip range in the second PPO epoch: the logged
    clip fraction is then a share in (0, 1] (the mutation pass found it could go negative unseen)."""
    tr = RLTrainer(cfg(tmp_path, ppo_epochs=2, optim={"lr": 0.5, "grad_clip": 1e9}), model=tiny_llama(VOCAB))
    m = tr.step(group())
    assert m["updates"] == 2
    assert 0.0 < m["clip_frac"] <= 1.0


@pytest.mark.parametrize("lora", [False, True])
def test_kl_is_measured_against_the_reference_not_the_current_policy(tmp_path: Path, lora: bool) -> None:
    """Step 1 starts at the reference (KL 0); once the policy moved, step 2's KL is positive. A KL
    term computed from the current policy instead (the mutation pass's survivor) stays 0."""
    model_cfg: dict[str, Any] = {"lora": {"r": 4, "alpha": 8, "dropout": 0.0}} if lora else {"lora": None}
    tr = RLTrainer(
        cfg(tmp_path, kl_beta=0.1, model=model_cfg, optim={"lr": 0.05, "grad_clip": 1e9}),
        model=tiny_llama(VOCAB),
        log_metrics=False,
    )
    first = tr.step(group())
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)
    second = tr.step(group(seed=1))
    assert second["kl"] > 1e-6


def test_step_time_and_the_length_limit(tmp_path: Path) -> None:
    """``step_s`` is the step's own wall time; a rollout exactly ``max_len`` tokens long is kept."""
    samples = group()
    longest = max(len(s.token_ids) for s in samples)
    tr = RLTrainer(cfg(tmp_path, max_len=longest), model=tiny_llama(VOCAB), log_metrics=False)
    t0 = time.perf_counter()
    m = tr.step(samples)
    wall = time.perf_counter() - t0
    assert 0 < m["step_s"] <= wall
    assert "rollouts_too_long" not in m
    assert m["updates"] == 1
    short = RLTrainer(cfg(tmp_path / "s", max_len=longest - 1), model=tiny_llama(VOCAB), log_metrics=False)
    assert short.step(samples)["rollouts_too_long"] >= 1


def test_set_overrides_a_config_key_before_validation(tmp_path: Path) -> None:
    """``coworkenv train sft CONFIG --set run.max_steps=2``: the value read as YAML, nested keys
    created, a malformed or invalid override an error naming it."""
    from coworkenv.rl.config import SFTConfig

    path = tmp_path / "sft.yaml"
    path.write_text("kind: sft\ndata: runs/sft.jsonl\nrun: {out_dir: runs/sft}\n")
    assert load_config(path, SFTConfig).model.lora is not None
    cfg = load_config(path, SFTConfig, ["run.max_steps=2", "optim.lr=1e-4", "model.lora=null"])
    assert (cfg.run.max_steps, cfg.optim.lr, cfg.model.lora) == (2, 1e-4, None)
    with pytest.raises(SpecError, match="KEY=VALUE"):
        load_config(path, SFTConfig, ["run.max_steps"])
    with pytest.raises(SpecError, match=r"run\.max_steps"):
        load_config(path, SFTConfig, ["run.max_steps=many"])
