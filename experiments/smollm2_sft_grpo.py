"""SmolLM2-135M on procedurally synthesized tasks: base → SFT on teacher demos → GRPO (loop) → GRPO (harness).

Contract: every stage only calls library code (synthesis, rollouts, curation, SFT, trees, RL trainer,
metrics) and writes its result to ``<work>/<stage>.json`` (wall seconds and peak RSS included); a
stage whose JSON exists is skipped, so an interrupted run resumes. Big artifacts (rollouts,
checkpoints) stay under ``--work``; the commit-worthy outputs (``metrics.json``, ``report.md``,
``reward_curve.png``) go to ``--results``.

Stages:

* ``synth``       training suite (generator seed 0) and held-out suite (unseen seed 1, distinct templates);
                  ``--split structure``: both from the compositional generator, held-out tasks drawn
                  from structures (anchor, conditions, joins, writes, mode) no training task has
* ``teacher``     reference solutions of the training suite through the built-in loop → ``curate`` → SFT JSONL
* ``base_eval``   (a) the embedded SmolLM2 on the held-out suite, ``--trials`` each
* ``sft``         (b) SFT (full or LoRA) on the curated demos; merged checkpoint exported; then ``sft_eval``
* ``grpo``        (c) GRPO continued from (b): rollouts (group ``--grpo-group``) → trees → ``RLTrainer.step``,
                  weights pushed to the backend between steps; merged checkpoint exported; then ``grpo_eval``
* ``harness``     (d) ``--harness-steps`` GRPO steps through a real CLI harness (the first of ``--harnesses``
                  that runs) on ``--harness-task-ids`` (training-suite ids or Claw-Eval task dirs),
                  weights pushed to the serving backend between steps; reports per-step parameter deltas
* ``report``      table, reward curve PNG, metrics JSON

Task limits: the built-in loop reads ``spec.limits.max_turns``; this script caps it (and the timeout)
by copying each spec with ``--max-turns`` / ``--timeout-s`` (the task data, not the loop, changes).

Run: ``.venv/bin/python experiments/smollm2_sft_grpo.py --help``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import resource
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STAGES = ("synth", "teacher", "base_eval", "sft", "sft_eval", "grpo", "grpo_eval", "harness", "report")


# ---------------------------------------------------------------- bookkeeping


def reset_peak_rss() -> None:
    """Linux: writing 5 to clear_refs resets VmHWM, so each stage reports its own peak."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mb() -> float:
    with contextlib.suppress(OSError):  # not Linux: fall back to getrusage
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC).strftime('%H:%M:%S')}] {msg}", flush=True)


class Exp:
    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.work: Path = args.work
        self.work.mkdir(parents=True, exist_ok=True)

    def path(self, *parts: str) -> Path:
        return self.work.joinpath(*parts)

    def result(self, stage: str) -> dict[str, Any] | None:
        p = self.path(f"{stage}.json")
        return json.loads(p.read_text()) if p.exists() else None

    def run_stage(self, stage: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        done = self.result(stage)
        if done is not None and stage != "report":
            log(f"{stage}: already done (resume)")
            return done
        log(f"{stage}: start")
        reset_peak_rss()
        t0 = time.perf_counter()
        info = fn()
        info["wall_s"] = round(time.perf_counter() - t0, 1)
        info["peak_rss_mb"] = peak_rss_mb()
        self.path(f"{stage}.json").write_text(json.dumps(info, indent=1, default=str) + "\n")
        log(f"{stage}: done in {info['wall_s']}s, peak RSS {info['peak_rss_mb']} MB")
        return info


# ---------------------------------------------------------------- helpers (library calls only)


def capped(specs: Sequence[Any], max_turns: int, timeout_s: float) -> list[Any]:
    out = []
    for s in specs:
        lim = s.limits.model_copy(
            update={
                "max_turns": min(s.limits.max_turns, max_turns),
                "timeout_s": min(s.limits.timeout_s, timeout_s),
            }
        )
        out.append(s.model_copy(update={"limits": lim}))
    return out


def load_suite(d: Path) -> list[Any]:
    from coworkenv.tasks.load import load_spec

    return [load_spec(p) for p in sorted((d / "tasks").glob("*.json"))]


def rollouts(  # noqa: PLR0917
    e: Exp,
    tasks: Sequence[Any],
    harnesses: Sequence[str],
    trials: int,
    backend: Any,
    out: Path,
    *,
    cap: bool = True,
    harness_objects: dict[str, Any] | None = None,
) -> list[Any]:
    from coworkenv.rollout.record import read_records
    from coworkenv.rollout.runner import run_rollouts

    if cap:
        tasks = capped(tasks, e.a.max_turns, e.a.timeout_s)
    summary = run_rollouts(
        tasks,
        list(harnesses),
        trials,
        backend,
        out,
        e.a.concurrency,
        progress=False,
        harness_objects=harness_objects,
    )
    log(f"  rollouts: {summary.line()}")
    recs, problems = read_records(out / "rollouts.jsonl")
    for p in problems:
        log(f"  warning: {p}")
    return list(recs)


def backend_from(path: str, e: Exp, seed: int) -> Any:
    from coworkenv.proxy.backends.embedded import EmbeddedBackend

    return EmbeddedBackend.from_checkpoint(
        path, max_new_tokens=e.a.max_new_tokens, temperature=e.a.temperature, seed=seed
    )


def evaluate(e: Exp, name: str, checkpoint: str) -> dict[str, Any]:
    from coworkenv.eval.metrics import summarize

    heldout = load_suite(e.path("synth", "heldout"))
    backend = backend_from(checkpoint, e, e.a.seed + 1)
    recs = rollouts(e, heldout, ["loop"], e.a.trials, backend, e.path(name))
    s = summarize(recs, k=e.a.trials, threshold=0.75)
    o = s.overall
    calls = call_stats(e.path(name))
    log(f"  {name}: score {o.score} pass@{s.k} {o.pass_at_k} pass^{s.k} {o.pass_hat_k}")
    return {
        "checkpoint": checkpoint,
        "overall": o.model_dump(),
        "tasks": [t.model_dump() for t in s.tasks],
        "infra_failures": s.infra_failures,
        "rewards": [r.rewards.reward if r.rewards else None for r in recs],
        **calls,
    }


def call_stats(rollout_dir: Path) -> dict[str, Any]:
    """Model calls captured by the proxy: count, malformed share, mean prompt/output tokens."""
    n = malformed = tool_turns = 0
    p_tok = o_tok = 0
    for f in sorted((rollout_dir / "calls").glob("*.calls.jsonl")):
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            c = json.loads(line)
            n += 1
            malformed += bool(c.get("malformed"))
            p_tok += len(c.get("prompt_ids") or [])
            o_tok += len(c.get("output_ids") or [])
            resp = c.get("response") or {}
            tool_turns += bool(isinstance(resp, dict) and resp.get("tool_calls"))
    return {
        "model_calls": n,
        "malformed_calls": malformed,
        "tool_call_turns": tool_turns,
        "mean_prompt_tokens": round(p_tok / n, 1) if n else None,
        "mean_output_tokens": round(o_tok / n, 1) if n else None,
    }


def read_samples(path: Path) -> list[Any]:
    from coworkenv.trajectories.sample import TrainingSample

    return [TrainingSample.model_validate_json(x) for x in path.read_text().splitlines() if x.strip()]


def delta_norm(before: dict[str, Any], after: dict[str, Any]) -> float:
    import torch

    tot = 0.0
    for k, v in before.items():
        if k in after and torch.is_floating_point(v):
            tot += float((after[k].float() - v.float()).pow(2).sum())
    return tot**0.5


def rl_config(e: Exp, out: Path, groups: int, group: int) -> Any:
    from coworkenv.rl.config import RLConfig

    return RLConfig.model_validate(
        {
            "estimator": "grpo",
            "group_size": group,
            "batch_size": group * max(1, groups),
            "optim": {"lr": e.a.grpo_lr},
            "model": {} if e.a.grpo_lora else {"lora": None},
            "run": {"out_dir": str(out), "resume": False, "progress": False},
            "max_len": 8192,
            "pack_scope": e.a.pack_scope,
        }
    )


# ---------------------------------------------------------------- stages


def stage_synth(e: Exp) -> dict[str, Any]:
    from coworkenv.synth.pipeline import synthesize
    from coworkenv.synth.plan import Plan
    from coworkenv.synth.procedural import ProceduralGenerator, plan_slots

    if e.a.split == "structure":
        return synth_structure_split(e)
    info: dict[str, Any] = {}
    for name, n, seed in (("train", e.a.train_tasks, 0), ("heldout", e.a.heldout, 1)):
        run = synthesize(
            Plan(tuple(plan_slots(n, seed))), ProceduralGenerator(seed), out=e.path("synth", name)
        )
        info[name] = {"seed": seed, "accepted": run.stats.accepted, "tasks": [s.id for s in run.specs]}
        log(f"  synth {name}: {run.stats.accepted}/{n} accepted (seed {seed})")
    return info


def synth_structure_split(e: Exp) -> dict[str, Any]:
    """Train and held-out suites from the compositional generator with disjoint structure keys."""
    from coworkenv.synth.pipeline import synthesize
    from coworkenv.synth.plan import Plan
    from coworkenv.synth.procedural import ProceduralGenerator
    from coworkenv.synth.procedural.compose import structure_key, structure_split

    services = [s for s in e.a.split_services.split(",") if s] or None
    seed = e.a.seed
    by = e.a.split_by
    train, held = structure_split(e.a.train_tasks, e.a.heldout, seed=seed, services=services, by=by)
    info: dict[str, Any] = {"split": "structure", "split_by": by}
    for name, slots in (("train", train), ("heldout", held)):
        run = synthesize(Plan(tuple(slots)), ProceduralGenerator(seed), out=e.path("synth", name))
        keys = sorted({structure_key(s, seed, by) for s in slots})
        info[name] = {
            "seed": seed,
            "accepted": run.stats.accepted,
            "tasks": [s.id for s in run.specs],
            "structure_keys": keys,
        }
        log(f"  synth {name}: {run.stats.accepted}/{len(slots)} accepted, {len(keys)} structures")
    assert not set(info["train"]["structure_keys"]) & set(info["heldout"]["structure_keys"])
    return info


def stage_teacher(e: Exp) -> dict[str, Any]:
    from coworkenv.curation.export import curate, write_jsonl
    from coworkenv.eval.metrics import summarize

    recs = rollouts(
        e, load_suite(e.path("synth", "train")), ["loop"], 1, "reference", e.path("teacher"), cap=False
    )
    rep = curate([e.path("teacher")], mode="both")
    write_jsonl(rep.rows, e.path("sft.curated.jsonl"))
    # curation writes ``tools`` as a JSON string (TRL's format); coworkenv.rl.sft.read_sft_jsonl wants a list.
    rows = [
        {**r, "tools": json.loads(r["tools"]) if isinstance(r.get("tools"), str) else r.get("tools")}
        for r in rep.rows
    ]
    write_jsonl(rows, e.path("sft.jsonl"))
    log(f"  curate: {len(rep.rows)} SFT conversations from {rep.records_read} teacher rollouts")
    return {
        "teacher_score": summarize(recs, k=1).overall.score,
        "rollouts": len(recs),
        "sft_rows": len(rep.rows),
        "curation": rep.stats(),
    }


def stage_sft(e: Exp) -> dict[str, Any]:
    from coworkenv.models import load_causal_lm
    from coworkenv.rl.config import SFTConfig
    from coworkenv.rl.sft import SFTTrainer, build_examples, read_sft_jsonl

    model, tok = load_causal_lm("smollm2")
    cfg = SFTConfig.model_validate(
        {
            "data": str(e.path("sft.jsonl")),
            "model": {"lora": None} if e.a.sft_mode == "full" else {},
            "optim": {"lr": e.a.sft_lr, "warmup_steps": 1},
            "run": {"out_dir": str(e.path("sft")), "resume": True, "progress": False, "seed": e.a.seed},
            "epochs": e.a.sft_epochs,
            "batch_size": 1,
            "grad_accum": e.a.sft_grad_accum,
            "max_len": e.a.sft_max_len,
        }
    )
    examples = build_examples(read_sft_jsonl(cfg.data), tok, max_len=cfg.max_len)
    sup = sum(sum(x.mask) for x in examples)
    log(f"  sft: {len(examples)} examples, {sum(len(x.ids) for x in examples)} tokens, {sup} supervised")
    trainer = SFTTrainer(cfg, model=model, tokenizer=tok)
    last = trainer.train(examples, progress=lambda s, t: log(f"  sft step {s}/{t}"))
    final = trainer.export(e.path("sft", "final"))
    losses = [json.loads(x) for x in e.path("sft", "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {
        "mode": e.a.sft_mode,
        "examples": len(examples),
        "supervised_tokens": sup,
        "last": last,
        "loss_curve": [m.get("loss") for m in losses],
        "checkpoint": str(final),
    }


def grpo_run(  # noqa: PLR0917
    e: Exp,
    name: str,
    checkpoint: str,
    tasks: Sequence[Any],
    harness: str,
    steps: int,
    group: int,
    seed: int,
) -> dict[str, Any]:
    """GRPO through ``harness``: per step, rollouts (``group`` per task) → trees → one update,
    weights pushed to the serving backend (policy version in every later captured call)."""
    from coworkenv.rl.common import merged_state_dict, save_merged
    from coworkenv.rl.rl import RLTrainer
    from coworkenv.trajectories.report import process_dir

    backend = backend_from(checkpoint, e, seed)
    before = merged_state_dict(backend.model)
    cfg = rl_config(e, e.path(name, "train"), len(tasks), group)
    pushed: list[str] = []

    def push(model: Any, version: int) -> None:
        backend.set_weights(merged_state_dict(model), f"rl-{version}")
        pushed.append(f"rl-{version}")

    trainer = RLTrainer(cfg, model=copy.deepcopy(backend.model), tokenizer=backend.tokenizer, on_weights=push)
    out: list[dict[str, Any]] = []
    for i in range(steps):
        d = e.path(name, f"step-{i}")
        t0 = time.perf_counter()
        recs = rollouts(e, tasks, [harness], group, backend, d, harness_objects=objects(e, harness))
        t_roll = time.perf_counter() - t0
        rep = process_dir(d, d / "samples.jsonl")
        samples = read_samples(d / "samples.jsonl")
        t1 = time.perf_counter()
        w0 = merged_state_dict(trainer.model)
        m = trainer.step(samples)
        rewards = [r.rewards.reward if r.rewards else None for r in recs]
        ok = [x for x in rewards if x is not None]
        out.append(
            {
                "step": i,
                "policy_version": backend.policy_version,
                "rewards": rewards,
                "mean_reward": sum(ok) / len(ok) if ok else None,
                "infra_failures": [
                    f"{r.failure.kind}: {r.failure.detail[:160]}" if r.failure else "?"
                    for r in recs
                    if r.status != "ok"
                ],
                "samples": rep.samples_written,
                "tree_problems": rep.problems[:5],
                "rollout_s": round(t_roll, 1),
                "update_s": round(time.perf_counter() - t1, 1),
                "step_delta_norm": delta_norm(w0, merged_state_dict(trainer.model)),
                "metrics": m,
                **call_stats(d),
            }
        )
        log(f"  {name} step {i}: mean reward {out[-1]['mean_reward']}, samples {len(samples)}, metrics {m}")
    after = merged_state_dict(trainer.model)
    final = save_merged(trainer.model, backend.tokenizer, e.path(name, "final"))
    return {
        "harness": harness,
        "checkpoint_in": checkpoint,
        "tasks": [t.id for t in tasks],
        "group": group,
        "lr": e.a.grpo_lr,
        "lora": e.a.grpo_lora,
        "steps": out,
        "pushed": pushed,
        "delta_norm": delta_norm(before, after),
        "checkpoint": str(final),
    }


def task_pool(e: Exp) -> list[Any]:
    """Training-suite tasks (never held-out ones), templates of the held-out suite first."""
    train = load_suite(e.path("synth", "train"))
    heldout_tpl = {t.id.split("-", 3)[-1] for t in load_suite(e.path("synth", "heldout"))}
    return sorted(train, key=lambda t: (t.id.split("-", 3)[-1] not in heldout_tpl, t.id))


def stage_grpo(e: Exp) -> dict[str, Any]:
    tasks = task_pool(e)[: e.a.grpo_tasks]
    return grpo_run(
        e, "grpo", str(e.path("sft", "final")), tasks, "loop", e.a.grpo_steps, e.a.grpo_group, e.a.seed + 2
    )


def objects(e: Exp, harness: str) -> dict[str, Any] | None:
    """Adapter settings for (d): codex feature flags from ``--codex-disable``."""
    if harness != "codex" or not e.a.codex_disable:
        return None
    from coworkenv.rollout.harnesses.codex import Codex

    return {"codex": Codex(disable=e.a.codex_disable)}


def stage_harness(e: Exp) -> dict[str, Any]:
    """(d): GRPO through the first of ``--harnesses`` that runs (an uninstalled or broken CLI is
    recorded and the next one tried)."""
    if e.a.harness_checkpoint:
        ck = str(e.a.harness_checkpoint)
    elif e.path("grpo", "final").exists():
        ck = str(e.path("grpo", "final"))
    else:
        ck = str(e.path("sft", "final")) if e.path("sft", "final").exists() else "smollm2"
    pool = task_pool(e)
    if e.a.harness_task_ids:
        from coworkenv.importers.claw_eval import import_task

        by_id = {t.id: t for t in pool}
        tasks = []
        for ref in e.a.harness_task_ids:
            if (Path(ref) / "task.yaml").is_file():  # a Claw-Eval task directory
                tasks.append(import_task(Path(ref))[0])
            elif ref in by_id:
                tasks.append(by_id[ref])
            else:
                raise SystemExit(
                    f"--harness-task-ids: {ref!r} is neither a Claw-Eval task dir nor in {sorted(by_id)}"
                )
    else:
        tasks = pool[: e.a.harness_tasks]
    attempts: list[dict[str, Any]] = []
    for harness in e.a.harnesses:
        try:
            res = grpo_run(
                e,
                f"harness-{harness}",
                ck,
                tasks,
                harness,
                e.a.harness_steps,
                e.a.harness_group,
                e.a.seed + 3,
            )
        except Exception as exc:  # an uninstalled/broken CLI is a result to report
            attempts.append({"harness": harness, "error": f"{type(exc).__name__}: {exc}"[:500]})
            log(f"  harness {harness}: {attempts[-1]['error']}")
            continue
        res["codex_disable"] = e.a.codex_disable if harness == "codex" else []
        attempts.append(res)
        if res["delta_norm"]:
            break
    return {"attempts": attempts}


def steps_table(title: str, steps: Sequence[dict[str, Any]]) -> list[str]:
    out = [
        f"#### {title}",
        "",
        "| step | policy after | rewards (- = infra failure) | mean | mean abs adv | grad norm | step Δθ "
        "norm "
        "| tokens forwarded | IS mean abs dlogp | model calls (malformed) | rollout s | update s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for st in steps:
        m = st.get("metrics") or {}
        rw = ", ".join("-" if r is None else f"{r:.2f}" for r in st["rewards"])
        out.append(
            f"| {st['step']} | {st['policy_version']} | {rw} | {_f(st['mean_reward'], 3)} | "
            f"{_f(m.get('adv_abs_mean'), 3)} | {_f(m.get('grad_norm'), 3)} | "
            f"{_f(st.get('step_delta_norm'), 4)} | {m.get('tokens_forwarded', '-')} | "
            f"{_e(m.get('is/mean_abs_dlogp'))} | {st.get('model_calls', '-')} "
            f"({st.get('malformed_calls', '-')}) | {st['rollout_s']} | {st['update_s']} |"
        )
    return [*out, ""]


def stage_report(e: Exp) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res: Path = e.a.results
    res.mkdir(parents=True, exist_ok=True)
    data = {s: e.result(s) for s in STAGES if s != "report"}
    data["args"] = {k: str(v) for k, v in vars(e.a).items()}
    (res / "metrics.json").write_text(json.dumps(data, indent=1, default=str) + "\n")

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    sft = data.get("sft") or {}
    if sft.get("loss_curve"):
        axes[0].plot(range(1, len(sft["loss_curve"]) + 1), sft["loss_curve"], marker="o")
    axes[0].set(title="SFT loss (assistant tokens)", xlabel="optimizer step", ylabel="loss")
    grpo = data.get("grpo") or {}
    for st in grpo.get("steps", []):
        ys = [r for r in st["rewards"] if r is not None]
        axes[1].scatter([st["step"]] * len(ys), ys, alpha=0.4, color="grey")
    if grpo.get("steps"):
        xs = [s["step"] for s in grpo["steps"]]
        axes[1].plot(xs, [s["mean_reward"] for s in grpo["steps"]], marker="o", label="mean rollout reward")
        axes[1].legend()
    axes[1].set(
        title="GRPO (loop): reward per step", xlabel="GRPO step (rollouts before update)", ylabel="reward"
    )
    names = [("base_eval", "base"), ("sft_eval", "SFT"), ("grpo_eval", "SFT+GRPO")]
    scores = [((data.get(k) or {}).get("overall") or {}).get("score") for k, _ in names]
    axes[2].bar([n for _, n in names], [s or 0 for s in scores])
    for i, s in enumerate(scores):
        axes[2].text(i, (s or 0) + 1, "-" if s is None else f"{s:.1f}", ha="center")
    axes[2].set(title="held-out mean score (0-100)", ylim=(0, 100))
    fig.tight_layout()
    fig.savefig(res / "reward_curve.png", dpi=110)

    rows = []
    for key, label in [
        ("base_eval", "(a) base SmolLM2-135M"),
        ("sft_eval", "(b) + SFT"),
        ("grpo_eval", "(c) + GRPO (loop)"),
    ]:
        d = data.get(key)
        if not d:
            rows.append(f"| {label} | not run | | | | | | |")  # same 8 columns
            continue
        o = d["overall"]
        train_key = {"sft_eval": "sft", "grpo_eval": "grpo"}.get(key)
        tr = data.get(train_key) or {} if train_key else {}
        wall = f"{d['wall_s']:.0f} s eval" + (f" + {tr['wall_s']:.0f} s train" if tr else "")
        rss = max(d["peak_rss_mb"], tr.get("peak_rss_mb", 0))
        rows.append(
            f"| {label} | {_f(o['completion'], 3)} | {_f(o['score'])} | {_f(o['pass_at_k'], 3)} | "
            f"{_f(o['pass_hat_k'], 3)} | {_f(o['safety'], 3)} | {wall} | {rss:.0f} MB |"
        )
    table = "\n".join(
        [
            "| stage | completion | mean score (0-100; 20 = safe, nothing done) | Pass@3 | Pass^3 | safety "
            "| wall | peak RSS |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    (res / "table.md").write_text(table + "\n")
    (res / "report.md").write_text(render_report(e, data, table))
    log("\n" + table)
    return {"results": str(res)}


def render_report(e: Exp, data: dict[str, Any], table: str) -> str:
    a = e.a
    syn = data.get("synth") or {}
    teach = data.get("teacher") or {}
    sft = data.get("sft") or {}
    grpo = data.get("grpo") or {}
    cmd = " ".join(sys.argv) if sys.argv else ""
    held = (syn.get("heldout") or {}).get("tasks", [])
    n_structures = len((syn.get("heldout") or {}).get("structure_keys", []))
    out = [
        f"# SmolLM2-135M: base → SFT → GRPO on synthesized tasks ({datetime.now(UTC):%Y-%m-%d})",
        "",
        f"Script: `experiments/smollm2_sft_grpo.py`; last invocation: `{cmd}`.",
        f"Machine: 2 CPU cores (shared with other jobs), torch CPU, fp32. Temperature {a.temperature}, "
        f"max {a.max_new_tokens} new tokens per model call, at most {a.max_turns} model calls per rollout.",
        "",
        "## Setup",
        "",
        (
            f"* held-out: {len(held)} compositional tasks whose structures (anchor, conditions, joins, "
            f"writes, mode) no training task has ({n_structures} structures); "
            if syn.get("split") == "structure"
            else f"* held-out: {len(held)} tasks of the procedural generator "
            f"with seed 1 (unseen), distinct templates: {', '.join(held)}; "
        )
        + f"{a.trials} trials each (Pass@{a.trials}, Pass^{a.trials} at reward ≥ 0.75).",
        f"* teacher: reference solutions of {teach.get('rollouts', '-')} seed-0 tasks through the built-in "
        f"loop (teacher score {teach.get('teacher_score', '-')}), curated (`mode=both`) into "
        f"{teach.get('sft_rows', '-')} SFT conversations.",
        f"* SFT: {sft.get('mode', '-')} fine-tuning, lr {a.sft_lr}, {a.sft_epochs} epoch(s), grad accum "
        f"{a.sft_grad_accum}, max_len {a.sft_max_len}: {sft.get('examples', '-')} examples, "
        f"{sft.get('supervised_tokens', '-')} supervised tokens, {(sft.get('last') or {}).get('steps', '-')} "
        f"optimizer steps.",
        f"* GRPO (loop): {len(grpo.get('steps', []))} step(s) on {grpo.get('tasks', '-')} × group "
        f"{grpo.get('group', '-')}, lr {grpo.get('lr', '-')}, LoRA {grpo.get('lora', '-')}; weights pushed "
        f"to the backend after each step ({grpo.get('pushed', [])}); parameter delta norm "
        f"{_f(grpo.get('delta_norm'), 4)}.",
        "",
        "## Results",
        "",
        table,
        "",
        "![reward curve](reward_curve.png)",
        "",
    ]
    if grpo.get("steps"):
        out += steps_table("GRPO steps (loop)", grpo["steps"])
    h = data.get("harness") or {}
    if h.get("attempts"):
        out += ["### (d) GRPO through a real harness", ""]
        for att in h["attempts"]:
            if "error" in att:
                out += [f"* **{att['harness']}**: {att['error']}", ""]
                continue
            flags = (
                f", codex `--disable {','.join(att['codex_disable'])}`" if att.get("codex_disable") else ""
            )
            out += [
                f"**{att['harness']}**{flags}: tasks {att['tasks']} × group {att['group']}, from "
                f"`{att['checkpoint_in']}`, LoRA {att['lora']}, lr {att['lr']}; weights pushed "
                f"{att['pushed'] or 'never'}; parameter delta norm over the run **{att['delta_norm']:.4f}**.",
                "",
                *steps_table(f"{att['harness']} steps", att["steps"]),
            ]
    out += [
        "### Model-call statistics (held-out evals)",
        "",
        "| stage | model calls | tool-call turns | malformed | mean prompt tok | mean output tok |",
        "|---|---|---|---|---|---|",
    ]
    for key in ("base_eval", "sft_eval", "grpo_eval"):
        d = data.get(key)
        if d:
            out.append(
                f"| {key} | {d.get('model_calls')} | {d.get('tool_call_turns')} | {d.get('malformed_calls')} "
                f"| {d.get('mean_prompt_tokens')} | {d.get('mean_output_tokens')} |"
            )
    per: dict[str, dict[str, float]] = {}
    for key in ("base_eval", "sft_eval", "grpo_eval"):
        for t in (data.get(key) or {}).get("tasks", []):
            per.setdefault(t["task_id"], {})[key] = t["mean_reward"]
    if per:
        out += ["", "### Mean reward per held-out task", ""]
        out += ["| task | base | SFT | SFT+GRPO |", "|---|---|---|---|"]
        for tid, v in sorted(per.items()):
            cells = " | ".join(_f(v.get(k), 3) for k in ("base_eval", "sft_eval", "grpo_eval"))
            out.append(f"| {tid} | {cells} |")
    out += ["", "Per-stage wall time, peak RSS and per-trial rewards: `metrics.json`.", ""]
    return "\n".join(out)


def _f(x: Any, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _e(x: Any) -> str:
    return "-" if x is None else f"{x:.1e}"


# ---------------------------------------------------------------- main


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--work", type=Path, default=Path("/tmp/exp/smollm2"), help="big artifacts (rollouts, checkpoints)"
    )
    p.add_argument("--results", type=Path, default=Path(f"experiments/results/{datetime.now(UTC):%Y-%m-%d}"))
    p.add_argument("--stages", default=",".join(STAGES), help=f"comma list out of {','.join(STAGES)}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-tasks", type=int, default=39, help="seed-0 tasks for teacher demos / GRPO")
    p.add_argument("--heldout", type=int, default=6, help="seed-1 tasks (distinct templates) for evaluation")
    p.add_argument("--trials", type=int, default=3, help="trials per held-out task (k of Pass@k / Pass^k)")
    p.add_argument(
        "--split",
        choices=("seed", "structure"),
        default="seed",
        help="held-out tasks: 'seed' = the templates with an unseen seed; 'structure' = compositional "
        "tasks whose structure (anchor, conditions, joins, writes, mode) no training task has",
    )
    p.add_argument(
        "--split-services", default="", help="--split structure: comma list of services (default: all)"
    )
    p.add_argument(
        "--split-by",
        choices=("full", "selection"),
        default="full",
        help="--split structure: disjoint full structures, or disjoint (anchor, conditions) selections",
    )
    p.add_argument("--max-turns", type=int, default=5, help="cap on spec.limits.max_turns")
    p.add_argument("--timeout-s", type=float, default=300.0, help="cap on spec.limits.timeout_s")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--sft-mode", choices=("full", "lora"), default="full")
    p.add_argument("--sft-lr", type=float, default=5e-5)
    p.add_argument("--sft-epochs", type=int, default=2)
    p.add_argument("--sft-grad-accum", type=int, default=4)
    p.add_argument("--sft-max-len", type=int, default=3072)
    p.add_argument("--grpo-steps", type=int, default=2)
    p.add_argument("--grpo-tasks", type=int, default=3)
    p.add_argument("--grpo-group", type=int, default=4)
    p.add_argument("--grpo-lr", type=float, default=1e-4)
    p.add_argument("--grpo-lora", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--harnesses", default="claude-code,qwen,codex,opencode", help="tried in order for (d)")
    p.add_argument("--harness-group", type=int, default=4)
    p.add_argument("--harness-steps", type=int, default=3, help="GRPO steps through the harness")
    p.add_argument("--harness-tasks", type=int, default=2, help="tasks per harness GRPO step")
    p.add_argument(
        "--harness-task-ids",
        default="",
        help="comma list for (d): training-suite task ids or Claw-Eval task dirs",
    )
    p.add_argument("--pack-scope", choices=("rollout", "group"), default="group", help="RL tree packing")
    p.add_argument("--codex-disable", default="", help="extra codex features to turn off, e.g. shell_tool")
    p.add_argument("--harness-checkpoint", default=None, help="default: grpo/sft final, else smollm2")
    a = p.parse_args(argv)
    a.harnesses = [h for h in a.harnesses.split(",") if h]
    a.codex_disable = [f for f in a.codex_disable.split(",") if f]
    a.harness_task_ids = [t for t in a.harness_task_ids.split(",") if t]
    a.stages = [s for s in a.stages.split(",") if s]
    bad = sorted(set(a.stages) - set(STAGES))
    if bad:
        p.error(f"unknown stage(s) {bad}; choose from {list(STAGES)}")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    import os

    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    e = Exp(parse(argv))
    sft_ck = lambda: str(e.path("sft", "final"))  # noqa: E731
    grpo_ck = lambda: str(e.path("grpo", "final"))  # noqa: E731
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "synth": lambda: stage_synth(e),
        "teacher": lambda: stage_teacher(e),
        "base_eval": lambda: evaluate(e, "base_eval", "smollm2"),
        "sft": lambda: stage_sft(e),
        "sft_eval": lambda: evaluate(e, "sft_eval", sft_ck()),
        "grpo": lambda: stage_grpo(e),
        "grpo_eval": lambda: evaluate(e, "grpo_eval", grpo_ck()),
        "harness": lambda: stage_harness(e),
        "report": lambda: stage_report(e),
    }
    t0 = time.perf_counter()
    for stage in STAGES:
        if stage in e.a.stages:
            e.run_stage(stage, runners[stage])
    log(f"total {time.perf_counter() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
