"""SmolLM2-135M on procedurally synthesized tasks: base → SFT on teacher demos → GRPO (loop) → GRPO (harness).

Protocol (issue 26; fixed before the run and written into the report): training tasks from generator
seed 0 (templates and composed tasks); held-out A = ``--heldout`` template tasks from the unseen seed
1 cycling over all 13 templates and ``--heldout-composed`` seed-1 composed tasks whose structures no
training task has; held-out B = the Claw-Eval tasks under ``--claw-eval`` whose own ``grader.py``
asks no judge (probed before the run). One greedy trial per task gives completion (0–100, primary),
score and safety; ``--sample-trials`` sampled trials give Pass@k / Pass^k at 0.75 (base, SFT, final);
95% bootstrap intervals over tasks, and a paired one for every stage-to-stage delta.

Contract: every stage only calls library code (synthesis, rollouts, curation, SFT, trees, dynamic
sampling, RL trainer, metrics) and writes its result to ``<work>/<stage>.json`` and
``<results>/stages/``; a finished stage is skipped, so the same command resumes. Inside a stage the
grain of resumption is one SFT optimizer step, one RL update, one evaluation rollout; the working
state lives in ``--work`` (default ``<cache>/experiments/<run>``, outside the work tree) and
``<results>/progress.json`` says where the run stands after every unit of work.

Stages:

* ``synth``       training and held-out suites (above)
* ``teacher``     reference solutions of the training suite through the built-in loop → ``curate`` → SFT JSONL
* ``base_eval``   (a) the embedded SmolLM2 on every held-out set (greedy, then sampled); determinism
* ``sft_pilot``   LoRA vs full fine-tuning for ``--pilot-steps``, picked by held-out loss per CPU-hour
                  among the modes whose checkpoint fits ``--commit-mb`` (committed for a fresh machine)
* ``sft``         (b) SFT with the picked mode (continuing from the pilot's steps); then ``sft_eval``
* ``grpo``        (c) GRPO (and the other ``--estimators``, same budget) from (b): dynamic sampling → trees →
                  ``RLTrainer.step``, weights pushed to the backend between updates; then ``grpo_eval``
* ``harness``     (d) mix-harness GRPO through a real CLI harness beside the loop; held-out A through it
* ``report``      table, curves PNG, summary and metrics JSON

Task limits: the built-in loop reads ``spec.limits.max_turns``; this script caps it (and the timeout)
by copying each spec with ``--max-turns`` / ``--timeout-s`` (the task data, not the loop, changes).

Run: ``.venv/bin/python experiments/smollm2_sft_grpo.py --help``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import resource
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STAGES = (
    "synth",
    "teacher",
    "base_eval",
    "sft_pilot",
    "sft",
    "sft_eval",
    "grpo",
    "grpo_eval",
    "harness",
    "posthoc_eval",
    "report",
)
OPTIONAL_STAGES = frozenset({"posthoc_eval"})
"""Stages outside the fixed protocol: run only when ``--stages`` names them."""


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


class Progress:
    """``progress.json``: where the run stands — stage, step of total, curves so far, wall time and
    peak memory per stage, summed over every stretch of work — rewritten atomically (into the work
    dir and ``--results``) after every unit of work and once a minute in between, so a stretch
    stopped at any instant loses at most a minute of accounting and none of the run."""

    def __init__(self, e: Exp) -> None:
        import threading

        self.e = e
        self.paths = [e.path("progress.json"), e.a.results / "progress.json"]
        old = next((json.loads(p.read_text()) for p in self.paths if p.exists()), None)
        self.state: dict[str, Any] = old or {
            "run": e.a.run,
            "status": "in progress",
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "stages": {},
            "curves": {},
        }
        self.state["stretches"] = int(self.state.get("stretches", 0)) + 1
        self.state["command"] = " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
        from coworkenv.machine import machine_info

        self.state["machine"] = machine_info()
        self.stage: str | None = None
        self.count: Callable[[], tuple[int, int]] | None = None
        self._t = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._write()
        threading.Thread(target=self._beat, daemon=True).start()

    def _beat(self) -> None:
        while not self._stop.wait(60):
            if self.stage is not None:
                self.tick(self.stage)

    def start(self, stage: str) -> None:
        self.tick(stage)
        self.stage = stage
        self.count = None

    def tick(self, stage: str, step: int | None = None, total: int | None = None, **curves: Any) -> None:
        """Account the time since the last tick to ``stage``; record its step and ``curves``."""
        with self._lock:
            now = time.perf_counter()
            st = self.state["stages"].setdefault(stage, {"wall_s": 0.0})
            if self.stage == stage:
                st["wall_s"] = round(st["wall_s"] + now - self._t, 1)
            self._t = now
            st["peak_rss_mb"] = max(float(st.get("peak_rss_mb", 0.0)), peak_rss_mb())
            if step is None and self.count is not None:
                step, total = self.count()
            if step is not None:
                st.update(step=step, total=total)
            self.state["curves"].update(curves)
            self.state.update(stage=stage, updated=datetime.now(UTC).isoformat(timespec="seconds"))
            self._write()

    def note(self, stage: str, **fields: Any) -> None:
        """Record ``fields`` on ``stage``'s entry (e.g. its committed checkpoint)."""
        with self._lock:
            self.state["stages"].setdefault(stage, {"wall_s": 0.0}).update(fields)
            self._write()

    def finish(self, stage: str, info: dict[str, Any]) -> None:
        self.tick(stage)
        with self._lock:
            st = self.state["stages"][stage]
            st["done"] = True
            info["wall_s"] = st["wall_s"]
            info["peak_rss_mb"] = st["peak_rss_mb"]
            done = [s for s in STAGES if (self.state["stages"].get(s) or {}).get("done")]
            # finished: every stage asked for now and every stage any stretch started (a report
            # rendered alone does not finish a run whose harness stage is still to do)
            started = [s for s in STAGES if s in self.state["stages"]]
            self.state["status"] = (
                "finished" if all(s in done for s in [*self.e.a.stages, *started]) else "in progress"
            )
            self._write()
        self.stage = None

    def _write(self) -> None:
        text = json.dumps(self.state, indent=1, default=str) + "\n"
        for p in self.paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(p)


# what a finished stage leaves for the next ones: a stage whose JSON exists but whose artifacts do
# not (a fresh machine, restored from the committed stage JSONs) runs again — synth and teacher are
# deterministic and cheap; the others' results are what the committed JSON holds
STAGE_ARTIFACTS: dict[str, tuple[str, ...]] = {
    "synth": ("synth/train/tasks", "synth/heldout/tasks"),
    "teacher": ("sft.jsonl",),
    "sft": ("sft/final/config.json",),
    "grpo": ("grpo/final/config.json",),
}


class Exp:
    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.work: Path = args.work
        self.work.mkdir(parents=True, exist_ok=True)
        self.restore()
        self.progress = Progress(self)

    def path(self, *parts: str) -> Path:
        return self.work.joinpath(*parts)

    def restore(self) -> None:
        """A fresh machine: the committed stage results (``--results/stages``) into the work dir."""
        committed = self.a.results / "stages"
        for p in sorted(committed.glob("*.json")) if committed.is_dir() else []:
            if not self.path(p.name).exists():
                self.path(p.name).write_text(p.read_text())
                log(f"restored {p.name} from {committed}")

    def pack(self, name: str, files: Sequence[str] = ()) -> None:
        """The newest trainer checkpoint under ``<work>/<name>`` into ``--results/checkpoints/<name>``
        when it fits ``--commit-mb`` (:mod:`coworkenv.rl.portable`): what a fresh machine resumes from.
        Its size and whether it was written go into ``progress.json``."""
        from coworkenv.rl.common import latest_checkpoint
        from coworkenv.rl.portable import pack

        ck = latest_checkpoint(self.path(name))
        if ck is None:
            return
        got = pack(
            ck,
            self.a.results / "checkpoints" / name,
            limit_bytes=int(self.a.commit_mb * 2**20),
            files={f: self.path(name, f) for f in files},
        )
        self.progress.note(
            name.split("/", maxsplit=1)[0],
            committed_checkpoint={
                "step": got.step,
                "mb": round(got.bytes / 2**20, 1),
                "moments": got.moments,
                "written": got.written,
            },
        )

    def unpack(self, name: str) -> None:
        """A fresh machine: the committed checkpoint of ``name`` back into the work dir, if newer."""
        from coworkenv.rl.portable import unpack

        step = unpack(self.a.results / "checkpoints" / name, self.path(name))
        if step is not None:
            log(f"  {name}: resuming from the committed checkpoint of step {step}")

    def result(self, stage: str) -> dict[str, Any] | None:
        p = self.path(f"{stage}.json")
        if not p.exists():
            return None
        if stage in REBUILD and any(not self.path(a).exists() for a in STAGE_ARTIFACTS.get(stage, ())):
            REBUILD[stage](self)
        if any(not self.path(a).exists() for a in STAGE_ARTIFACTS.get(stage, ())):
            return None  # restored from the commit, but its artifacts are not on this machine
        out: dict[str, Any] = json.loads(p.read_text())
        return out

    def record(self, stage: str) -> dict[str, Any] | None:
        """``stage``'s result as written (the work dir's, else the committed one), whether or not its
        artifacts are on this machine: what a report reads."""
        for p in (self.path(f"{stage}.json"), self.a.results / "stages" / f"{stage}.json"):
            if p.exists():
                out: dict[str, Any] = json.loads(p.read_text())
                return out
        return None

    def run_stage(self, stage: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        done = self.result(stage)
        if done is not None and stage != "report":
            log(f"{stage}: already done (resume)")
            return done
        log(f"{stage}: start")
        reset_peak_rss()
        self.progress.start(stage)
        t0 = time.perf_counter()
        info = fn()
        took = round(time.perf_counter() - t0, 1)
        self.progress.finish(stage, info)
        text = json.dumps(info, indent=1, default=str) + "\n"
        self.path(f"{stage}.json").write_text(text)
        committed = self.a.results / "stages"
        committed.mkdir(parents=True, exist_ok=True)
        (committed / f"{stage}.json").write_text(text)
        # wall_s sums every stretch's time in the stage (a stage re-run on a fresh machine adds to it)
        total = "" if took == info["wall_s"] else f" ({info['wall_s']}s over all stretches)"
        log(f"{stage}: done in {took}s{total}, peak RSS {info['peak_rss_mb']} MB")
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
    max_turns: int | None = None,
    harness_objects: dict[str, Any] | None = None,
) -> list[Any]:
    from coworkenv.rollout.record import read_records
    from coworkenv.rollout.runner import run_rollouts

    if cap:
        tasks = capped(tasks, max_turns or e.a.max_turns, e.a.timeout_s)
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


def heldout_sets(e: Exp) -> dict[str, list[Any]]:
    """``A``: the procedural held-out suite; ``B``: the judge-free Claw-Eval tasks (if any)."""
    from coworkenv.importers.claw_eval import import_task

    sets = {"A": load_suite(e.path("synth", "heldout"))}
    b = ((e.result("synth") or {}).get("heldout_b") or {}).get("task_dirs", [])
    if b:
        sets["B"] = [import_task(Path(d))[0] for d in b]
    return sets


def eval_set(  # noqa: PLR0917
    e: Exp,
    name: str,
    tasks: Sequence[Any],
    backend: Any,
    out: Path,
    harness: str = "loop",
    *,
    trials: int = 1,
    temperature: float | None = None,
    max_turns: int | None = None,
) -> dict[str, Any]:
    """``trials`` rollouts per task at ``temperature`` (default ``--eval-temperature``: greedy),
    resumable rollout by rollout (the runner skips what ``out`` already holds)."""
    from coworkenv.eval.metrics import headline, summarize
    from coworkenv.proxy.backends.sampling import FixedSampling

    temp = e.a.eval_temperature if temperature is None else temperature
    sampled = FixedSampling(backend, temp)
    total = len(tasks) * trials
    e.progress.count = lambda: (_done_rollouts(out), total)
    recs = rollouts(
        e, tasks, [harness], trials, sampled, out, max_turns=max_turns, harness_objects=objects(e, harness)
    )
    s = summarize(recs, k=trials, threshold=0.75)
    h = headline(s, seed=e.a.seed)
    log(
        f"  {name} (T={temp}, {trials} trial(s)): completion {_f(h.completion)} {_ci(h.completion_ci)}, "
        f"score {_f(h.score)}, pass@{s.k} {_f(h.pass_at_k)}, pass^{s.k} {_f(h.pass_hat_k)}, "
        f"{h.safety_violations} safety violation(s)"
    )
    judged = [r for r in recs if r.graded_by is not None and r.graded_by.judge_calls]
    return {
        "temperature": temp,
        "headline": h.model_dump(),
        "overall": s.overall.model_dump(),
        "tasks": [t.model_dump() for t in s.tasks],
        "infra_failures": s.infra_failures,
        "not_judged": s.not_judged,
        "rollouts_asking_a_judge": len(judged),
        "errors": error_analysis(recs),
        "rewards": [r.rewards.reward if r.rewards else None for r in recs],
        **call_stats(out),
    }


def _done_rollouts(out: Path) -> int:
    p = out / "rollouts.jsonl"
    return sum(1 for x in p.read_text().splitlines() if x.strip()) if p.exists() else 0


def evaluate(e: Exp, name: str, checkpoint: str, *, sampled: bool = True) -> dict[str, Any]:
    """``checkpoint`` on every held-out set: greedy, then (``sampled``) Pass@k / Pass^k trials."""
    backend = backend_from(checkpoint, e, e.a.seed + 1)
    try:
        out = {"checkpoint": checkpoint, **evaluate_backend(e, name, backend, sampled=sampled)}
        if name == "base_eval" and e.a.determinism_tasks:
            out["determinism"] = determinism_check(e, backend, out["sets"]["A"])
        return out
    finally:
        backend.close()


def evaluate_backend(
    e: Exp,
    name: str,
    backend: Any,
    *,
    only_a: int = 0,
    harness: str = "loop",
    sampled: bool = False,
    max_turns: int | None = None,
) -> dict[str, Any]:
    """The policy ``backend`` serves, on every held-out set (``only_a``: the first n tasks of A
    only, for the evaluations between GRPO updates): one greedy trial per task — greedy decoding
    makes every trial of a task the same (:func:`determinism_check` measures it) — for completion,
    score and safety; with ``sampled``, ``--sample-trials`` trials per task at
    ``--sample-temperature`` beside it, for Pass@k and Pass^k (``sets[X]["sampled"]``)."""
    out: dict[str, Any] = {"sets": {}, "policy_version": backend.policy_version, "harness": harness}
    for key, suite in heldout_sets(e).items():
        if (only_a or harness != "loop") and key != "A":
            continue
        tasks = suite[:only_a] if only_a else suite
        ev = eval_set(
            e, f"{name} {key}", tasks, backend, e.path(name, key), harness=harness, max_turns=max_turns
        )
        if sampled and e.a.sample_trials > 1:
            ev["sampled"] = eval_set(
                e,
                f"{name} {key} sampled",
                tasks,
                backend,
                e.path(name, f"{key}-sampled"),
                harness=harness,
                trials=e.a.sample_trials,
                temperature=e.a.sample_temperature,
            )
            for k in ("pass_at_k", "pass_at_k_ci", "pass_hat_k", "pass_hat_k_ci", "k"):
                ev["headline"][k] = ev["sampled"]["headline"][k]
        out["sets"][key] = ev
        e.progress.tick(e.progress.stage or name)
    a = out["sets"]["A"]
    out["overall"] = a["overall"]  # the primary set's, for the per-task tables
    out["tasks"] = a["tasks"]
    return out


def determinism_check(e: Exp, backend: Any, greedy_a: dict[str, Any]) -> dict[str, Any]:
    """The claim behind one greedy trial per task, measured: the first ``--determinism-tasks``
    tasks of A again, 2 greedy trials each (concurrently, so batched beside each other as in the
    evaluation), compared with the evaluation's trial: the same model calls and the same reward."""
    from coworkenv.proxy.backends.sampling import FixedSampling
    from coworkenv.rollout.record import read_records

    tasks = heldout_sets(e)["A"][: e.a.determinism_tasks]
    out = e.path("base_eval", "determinism")
    rollouts(e, tasks, ["loop"], 2, FixedSampling(backend, 0.0), out)
    first, _ = read_records(e.path("base_eval", "A", "rollouts.jsonl"))
    again, _ = read_records(out / "rollouts.jsonl")

    def trace(r: Any) -> Any:
        calls = [(c.tool, json.dumps(c.args, sort_keys=True)) for c in r.tool_calls]
        said = [m.content for m in r.messages if m.role == "assistant"]
        return (r.status, calls, said, r.final_answer, r.rewards.reward if r.rewards else None)

    by_task: dict[str, list[Any]] = {}
    for r in [*first, *again]:
        if r.task_id in {t.id for t in tasks}:
            by_task.setdefault(r.task_id, []).append(trace(r))
    same = sorted(t for t, xs in by_task.items() if len(xs) == 3 and all(x == xs[0] for x in xs))
    differ = sorted(t for t in by_task if t not in same)
    log(f"  determinism: {len(same)}/{len(by_task)} tasks gave 3 identical greedy trials")
    return {"tasks": len(by_task), "identical": len(same), "differ": differ, "trials_compared": 3}


def template_of(task_id: str) -> str:
    """``proc-s1-00012-vendor_bank_change`` → ``vendor_bank_change``; composed tasks → ``composed``
    (other ids unchanged)."""
    parts = task_id.split("-", 3)
    if parts[0] in ("split", "comp"):
        return "composed"
    return parts[3] if len(parts) == 4 and parts[0] == "proc" else task_id


def error_analysis(recs: Sequence[Any]) -> dict[str, Any]:
    """Per template: trials, completion, what the failed trials got wrong (checks failed, infra
    failure kinds, no tool call at all)."""
    from collections import Counter

    out: dict[str, Any] = {}
    by: dict[str, list[Any]] = {}
    for r in recs:
        by.setdefault(template_of(r.task_id), []).append(r)
    for tpl, rs in sorted(by.items()):
        failed_checks: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        no_tool = 0
        comp = []
        for r in rs:
            if r.status != "ok":
                kinds[r.failure.kind if r.failure else "unlabelled"] += 1
                continue
            if r.rewards is not None:
                comp.append(r.rewards.completion)
            if not r.tool_calls:
                no_tool += 1
            for c in (r.grade or {}).get("checks", []):
                if isinstance(c, dict) and c.get("status") in ("failed", "partial"):
                    failed_checks[str(c.get("name"))] += 1
        out[tpl] = {
            "trials": len(rs),
            "completion": round(100 * sum(comp) / len(comp), 1) if comp else None,
            "no_tool_call": no_tool,
            "infra_failures": dict(kinds),
            "top_failed_checks": failed_checks.most_common(3),
        }
    return out


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


def lora_config(e: Exp) -> dict[str, Any]:
    return {"r": e.a.lora_r, "alpha": e.a.lora_alpha}


def rl_config(e: Exp, out: Path, groups: int, group: int, estimator: str = "grpo") -> Any:
    from coworkenv.rl.config import RLConfig

    return RLConfig.model_validate(
        {
            "estimator": estimator,
            "group_size": group,
            "batch_size": group * max(1, groups),
            "optim": {"lr": e.a.grpo_lr},
            "model": {"lora": lora_config(e) if e.a.grpo_lora else None},
            # resumed from its last checkpoint, which grpo_run writes after each update's record
            "run": {"out_dir": str(out), "resume": True, "progress": False, "keep_checkpoints": 1},
            "max_len": 8192,
            "pack_scope": e.a.pack_scope,
        }
    )


# ---------------------------------------------------------------- stages


def stage_synth(e: Exp) -> dict[str, Any]:
    """Train: ``--train-tasks`` template tasks and ``--train-composed`` composed tasks, generator
    seed 0. Held-out A: ``--heldout`` template tasks cycling over all 13 templates and
    ``--heldout-composed`` composed tasks, generator seed 1, whose structures (anchor, conditions,
    joins, writes, mode) no training task has. ``--split structure``: the older composed-only split."""
    from coworkenv.synth.pipeline import synthesize
    from coworkenv.synth.plan import Plan
    from coworkenv.synth.procedural import TEMPLATES, ProceduralGenerator, plan_slots
    from coworkenv.synth.procedural.compose import structure_key, structure_split

    info: dict[str, Any] = {}
    if e.a.split == "structure":
        info = synth_structure_split(e)
    else:
        composed_train, _ = structure_split(e.a.train_composed, 0, seed=0) if e.a.train_composed else ([], [])
        train_keys = {structure_key(x, 0) for x in composed_train}
        held: list[Any] = []
        if e.a.heldout_composed:
            _, pool = structure_split(0, 4 * e.a.heldout_composed, seed=1)
            held = [x for x in pool if structure_key(x, 1) not in train_keys][: e.a.heldout_composed]
            if len(held) < e.a.heldout_composed:
                raise SystemExit(f"only {len(held)} composed held-out tasks with structures unseen in train")
        plans = (
            ("train", plan_slots(e.a.train_tasks, 0) + composed_train, 0),
            ("heldout", plan_slots(e.a.heldout, 1) + held, 1),
        )
        for name, slots, seed in plans:
            run = synthesize(Plan(tuple(slots)), ProceduralGenerator(seed), out=e.path("synth", name))
            info[name] = {"seed": seed, "accepted": run.stats.accepted, "tasks": [x.id for x in run.specs]}
            log(f"  synth {name}: {run.stats.accepted}/{len(slots)} accepted (seed {seed})")
        info["train"]["structure_keys"] = sorted(train_keys)
        info["heldout"]["structure_keys"] = sorted({structure_key(x, 1) for x in held})
        assert not set(info["train"]["structure_keys"]) & set(info["heldout"]["structure_keys"])
        covered = sorted({template_of(t) for t in info["heldout"]["tasks"]} - {"composed"})
        info["heldout"]["templates"] = covered
        info["heldout"]["composed"] = sum(template_of(t) == "composed" for t in info["heldout"]["tasks"])
        missing = sorted(set(TEMPLATES) - set(covered))
        if missing and e.a.heldout >= len(TEMPLATES):
            raise SystemExit(f"held-out A misses templates {missing}: synthesis rejected their tasks")
        log(f"  held-out A covers {len(covered)}/{len(TEMPLATES)} templates, {len(held)} composed structures")
    info["heldout_b"] = judge_free_claw_tasks(e.a.claw_eval, e.a.heldout_b) if e.a.claw_eval else {}
    return info


def judge_free_claw_tasks(root: Path, limit: int) -> dict[str, Any]:
    """Held-out B: the Claw-Eval tasks whose own ``grader.py`` grades without a judge, probed once
    before any model runs: each task's grader sees a run that answers without acting, with the judge
    refused; a task whose grader asked the judge is left out (and named). Evaluations still count
    the rollouts whose grading asked a judge (``rollouts_asking_a_judge``)."""
    from coworkenv.claweval.grade import grade_records, package_path
    from coworkenv.importers.claw_eval import import_task, task_dirs
    from coworkenv.proxy.messages import Message
    from coworkenv.rollout.record import RolloutRecord
    from coworkenv.services.trial import Host

    if not root.is_dir():
        raise SystemExit(f"--claw-eval {root}: not a directory (pass '' to run without held-out B)")
    if package_path() is None:
        raise SystemExit("held-out B needs Claw-Eval's package: bash scripts/install_claw_eval.sh")
    host = Host()
    items, dirs, failed = [], [], {}
    for d in task_dirs(root):
        try:
            spec, _ = import_task(d)
        except Exception as exc:  # reported, never silently dropped
            failed[d.name] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        msgs = (Message(role="user", content=spec.request), Message(role="assistant", content="Done."))
        rec = RolloutRecord(
            rollout_id=f"probe-{spec.id}",
            task_id=spec.id,
            harness="probe",
            trial=0,
            status="ok",
            messages=msgs,
            final_answer="Done.",
        )
        items.append((host.add_task(spec), rec))
        dirs.append(d)
    grades = grade_records(items, judge={"kind": "none"})
    free = [str(d) for d, g in zip(dirs, grades, strict=True) if g.status == "graded" and not g.judge_calls]
    judged = [d.name for d, g in zip(dirs, grades, strict=True) if g.status == "graded" and g.judge_calls]
    errors = {d.name: g.reason[:200] for d, g in zip(dirs, grades, strict=True) if g.status != "graded"}
    found = len(free)
    free = free[:limit] if limit else free
    log(
        f"  held-out B: {len(free)} judge-free Claw-Eval tasks "
        f"({len(judged)} ask a judge, {len(errors)} errors)"
    )
    return {
        "root": str(root),
        "judge_free": found,
        "task_dirs": free,
        "ask_a_judge": judged,
        "import_failed": failed,
        "grade_errors": errors,
    }


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
    from coworkenv.curation.convert import ConvertConfig

    # --sft-system harness: the conversations keep the loop's own system prompt, the one the student is served
    keep = e.a.sft_system == "harness"
    rep = curate([e.path("teacher")], convert_cfg=ConvertConfig(system=None) if keep else None, mode="both")
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


def sft_data(e: Exp, tok: Any, max_len: int) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Training and held-out examples: whole conversations split by *task* (no task on both sides),
    ``--sft-val-share`` of the tasks held out for the loss curve."""
    from coworkenv.rl.sft import build_examples, read_sft_jsonl

    rows = read_sft_jsonl(e.path("sft.jsonl"))
    rng = random.Random(e.a.seed)
    task_ids = sorted({_conversation_task(m) for m, _ in rows})
    rng.shuffle(task_ids)
    val_tasks = set(task_ids[: max(1, round(len(task_ids) * e.a.sft_val_share))] if e.a.sft_val_share else [])
    train_rows = [r for r in rows if _conversation_task(r[0]) not in val_tasks]
    val_rows = [r for r in rows if _conversation_task(r[0]) in val_tasks]
    examples = build_examples(train_rows, tok, max_len=max_len)
    val = build_examples(val_rows, tok, max_len=max_len)
    info = {
        "conversations": len(train_rows),
        "val_conversations": len(val_rows),
        "examples": len(examples),
        "tokens": sum(len(x.ids) for x in examples),
        "supervised_tokens": sum(sum(x.mask) for x in examples),
        "tokens_per_conversation": round(sum(len(x.ids) for x in examples) / max(1, len(train_rows)), 1),
    }
    return examples, val, info


def sft_config(e: Exp, mode: str, out: Path, *, max_steps: int | None = None) -> Any:
    from coworkenv.job.config import CHECKPOINT_OVER
    from coworkenv.rl.config import SFTConfig

    return SFTConfig.model_validate(
        {
            "data": str(e.path("sft.jsonl")),
            "model": {"lora": None} if mode == "full" else {"lora": lora_config(e)},
            "optim": {"lr": e.a.sft_lr if mode == "full" else e.a.sft_lora_lr, "warmup_steps": 1},
            "run": {
                "out_dir": str(out),
                "resume": True,
                "progress": False,
                "seed": e.a.seed,
                "save_every": 1,  # the grain of resumption: one optimizer step
                "keep_checkpoints": 1,
                "max_steps": max_steps,
            },
            "epochs": e.a.sft_epochs,
            "batch_size": 1,
            "grad_accum": e.a.sft_grad_accum,
            "max_len": e.a.sft_max_len,
            # the job's default (sft.checkpointing = "auto"): tries of at most 4,096 tokens, and
            # activations recomputed only for a forward over that — the same loss and gradients
            # (packing is exact) without the ~30% a recompute of every forward costs
            "checkpoint_over": CHECKPOINT_OVER,
            "pack_tokens": CHECKPOINT_OVER,
        }
    )


class ValCurve:
    """Held-out loss per optimizer step, in ``val.jsonl`` beside the trainer's metrics: resumed
    with the trainer (rows past its checkpoint dropped), so a killed run neither loses nor repeats
    a point."""

    def __init__(self, out: Path, resumed_step: int) -> None:
        self.path = out / "val.jsonl"
        rows = (
            [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()]
            if self.path.exists()
            else []
        )
        self.points: list[tuple[int, float]] = [
            (int(r["step"]), float(r["loss"])) for r in rows if int(r["step"]) <= resumed_step
        ]
        out.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(json.dumps({"step": st, "loss": x}) + "\n" for st, x in self.points))

    def has(self, step: int) -> bool:
        return any(st == step for st, _ in self.points)

    def add(self, step: int, loss: float) -> None:
        self.points.append((step, loss))
        with self.path.open("a") as fh:
            fh.write(json.dumps({"step": step, "loss": loss}) + "\n")


def cpu_seconds() -> float:
    """CPU time of this process, all threads (what a CPU-hour counts)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def stage_sft_pilot(e: Exp) -> dict[str, Any]:
    """LoRA or full fine-tuning, picked by measurement: each mode trains ``--pilot-steps`` optimizer
    steps from the base model on the same data in the same order; the held-out loss it removed per
    CPU-hour decides (``--sft-mode full|lora`` skips the pilot). Resumable step by step."""
    if e.a.sft_mode != "auto":
        return {"mode": e.a.sft_mode, "picked_by": "--sft-mode"}
    from coworkenv.models import load_causal_lm
    from coworkenv.rl.common import latest_checkpoint
    from coworkenv.rl.portable import pack
    from coworkenv.rl.sft import SFTTrainer

    _, tok = load_causal_lm("smollm2")
    examples, val, data = sft_data(e, tok, e.a.sft_max_len)
    arms: dict[str, Any] = {}
    for mode in ("lora", "full"):
        out = e.path("sft_pilot", mode)
        state_path = out / "pilot.json"
        st = json.loads(state_path.read_text()) if state_path.exists() else {"cpu_s": 0.0, "wall_s": 0.0}
        model, _ = load_causal_lm("smollm2")
        trainer = SFTTrainer(sft_config(e, mode, out, max_steps=e.a.pilot_steps), model=model, tokenizer=tok)
        if "val_before" not in st:  # the base model's: the same for both arms (a LoRA's B starts at 0)
            st["val_before"] = arms["lora"]["val_before"] if "lora" in arms else trainer.evaluate(val)
        mark = [cpu_seconds(), time.perf_counter()]

        def step_done(
            step: int, total: int, st: dict[str, Any] = st, mark: list[float] = mark, path: Path = state_path
        ) -> None:
            # the step's CPU and wall time under its step number, saved before the trainer's
            # checkpoint of it: a kill in between redoes the step, which overwrites its entry
            st.setdefault("by_step", {})[str(step)] = [cpu_seconds() - mark[0], time.perf_counter() - mark[1]]
            st["cpu_s"] = round(sum(x[0] for x in st["by_step"].values()), 2)
            st["wall_s"] = round(sum(x[1] for x in st["by_step"].values()), 2)
            st["steps"] = step
            path.write_text(json.dumps(st))
            mark[:] = [cpu_seconds(), time.perf_counter()]
            e.progress.tick("sft_pilot", step, total)

        if trainer.step_count < e.a.pilot_steps:
            trainer.train(examples, progress=step_done)
        if "val_after" not in st:
            st["val_after"] = trainer.evaluate(val)
            state_path.write_text(json.dumps(st))
        drop = (st["val_before"] or 0.0) - (st["val_after"] or 0.0)
        st["loss_drop_per_cpu_hour"] = round(drop / max(st["cpu_s"] / 3600, 1e-9), 4)
        if "committable" not in st and (ck := latest_checkpoint(out)) is not None:
            probe = pack(ck, out / "pack-probe", limit_bytes=int(e.a.commit_mb * 2**20))
            st.update(checkpoint_mb=round(probe.bytes / 2**20, 1), committable=probe.written)
            state_path.write_text(json.dumps(st))
        arms[mode] = st
        log(
            f"  pilot {mode}: held-out loss {st['val_before']:.4f} → {st['val_after']:.4f} "
            f"in {st['cpu_s']:.0f} CPU s"
        )
        del trainer, model
    # a mode whose checkpoint a commit cannot carry loses the run to a machine change (a run spans
    # several machines): it is picked only when no mode's checkpoint fits
    fits = [m for m in arms if arms[m].get("committable")] or list(arms)
    pick = max(fits, key=lambda m: arms[m]["loss_drop_per_cpu_hour"])
    return {
        "mode": pick,
        "picked_by": f"held-out loss per CPU-hour among the modes whose checkpoint fits {e.a.commit_mb} MB",
        "arms": arms,
        "data": data,
    }


def sft_mode(e: Exp) -> str:
    return str(
        (e.result("sft_pilot") or {}).get("mode") or (e.a.sft_mode if e.a.sft_mode != "auto" else "full")
    )


def stage_sft(e: Exp) -> dict[str, Any]:
    from coworkenv.models import load_causal_lm
    from coworkenv.rl.sft import SFTTrainer

    mode = sft_mode(e)
    model, tok = load_causal_lm("smollm2")
    cfg = sft_config(e, mode, e.path("sft"))
    examples, val, data = sft_data(e, tok, cfg.max_len)
    log(
        f"  sft ({mode}): {data['examples']} examples ({data['conversations']} conversations), "
        f"{data['tokens']} tokens, {data['supervised_tokens']} supervised; "
        f"held-out loss on {len(val)} examples"
    )
    e.unpack("sft")
    pilot = e.path("sft_pilot", mode)
    if not e.path("sft", "checkpoints").exists() and (pilot / "checkpoints" / "latest").exists():
        # the pilot's steps of the picked mode are this run's first steps (same data, order, seed
        # and learning rate; the schedule is warmup then constant): continue from them
        import shutil

        shutil.copytree(pilot / "checkpoints", e.path("sft", "checkpoints"))
        shutil.copy(pilot / "metrics.jsonl", e.path("sft", "metrics.jsonl"))
        ps = json.loads((pilot / "pilot.json").read_text())
        points = [(0, ps["val_before"]), (int(ps["steps"]), ps["val_after"])]
        e.path("sft", "val.jsonl").write_text(
            "".join(json.dumps({"step": a, "loss": b}) + "\n" for a, b in points)
        )
        log(f"  sft: continuing from the pilot's {mode} checkpoint")
    trainer = SFTTrainer(cfg, model=model, tokenizer=tok)
    curve = ValCurve(e.path("sft"), trainer.step_count)
    if val and not curve.has(0):
        curve.add(0, trainer.evaluate(val) or float("nan"))
    bar = StageBar("sft")

    def losses() -> list[Any]:
        p = e.path("sft", "metrics.jsonl")
        rows = [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []
        return [[r["step"], r.get("loss")] for r in rows]

    def progress(step: int, total: int) -> None:
        bar.update(step, total)
        if val and (step % max(1, e.a.sft_eval_every) == 0 or step == total):
            curve.add(step, trainer.evaluate(val) or float("nan"))
            log(f"  sft step {step}/{total}: held-out loss {curve.points[-1][1]:.4f}")
        e.progress.tick("sft", step, total, sft_loss=losses(), sft_val_loss=curve.points)
        e.pack("sft", SFT_FILES)  # the trainer's newest checkpoint (step - 1 until it saves this one)

    with bar:
        last = trainer.train(examples, progress=progress)
    e.pack("sft", SFT_FILES)
    final = trainer.export(e.path("sft", "final"))
    adapter = save_adapter(e, trainer.model, "sft") if mode == "lora" else None
    return {
        "mode": mode,
        "lora": lora_config(e) if mode == "lora" else None,
        **data,
        "val_examples": len(val),
        "last": last,
        "loss_curve": [x[1] for x in losses()],
        "val_loss_curve": curve.points,
        "checkpoint": str(final),
        "adapter": adapter,
    }


SFT_FILES = ("metrics.jsonl", "val.jsonl")


def rebuild_sft_final(e: Exp) -> None:
    """A fresh machine after a finished LoRA SFT: its merged checkpoint again, from the base model
    and the committed final checkpoint's exact (float32) adapter weights."""
    import torch

    from coworkenv.models import load_causal_lm
    from coworkenv.rl.common import build_policy, save_merged
    from coworkenv.rl.config import ModelConfig

    done = json.loads(e.path("sft.json").read_text())
    pack = e.a.results / "checkpoints" / "sft"
    if done.get("mode") != "lora" or not (pack / "portable.json").exists():
        return
    model, tok = load_causal_lm("smollm2")
    policy, _ = build_policy(ModelConfig.model_validate({"lora": done["lora"]}), model=model, tokenizer=tok)
    named = dict(policy.named_parameters())
    with torch.no_grad():
        for n, t in torch.load(pack / "trainable.pt", weights_only=False)["params"].items():
            named[n].copy_(t)
    save_merged(policy, tok, e.path("sft", "final"))
    log(f"  sft: rebuilt its merged checkpoint from {pack}")


REBUILD: dict[str, Callable[[Exp], None]] = {"sft": rebuild_sft_final}


def save_adapter(e: Exp, model: Any, name: str) -> str | None:
    """A LoRA adapter small enough to commit (≤ 25 MB, bf16) into ``--results/adapters/<name>``."""
    if not hasattr(model, "save_pretrained") or not hasattr(model, "peft_config"):
        return None
    import torch
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    state = {
        k: v.detach().to(torch.bfloat16).contiguous() for k, v in get_peft_model_state_dict(model).items()
    }
    size = sum(v.numel() * 2 for v in state.values())
    if size > 25 * 2**20:
        log(f"  adapter {name}: {size / 2**20:.1f} MB, over 25 MB: not committed")
        return None
    out = e.a.results / "adapters" / name
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "adapter_model.safetensors"))
    model.peft_config["default"].save_pretrained(str(out))
    return str(out)


def _conversation_task(msgs: Sequence[Any]) -> str:
    """The task a curated conversation came from: its first user message (one request per task)."""
    return next((str(m.content) for m in msgs if m.role == "user"), "")


class StageBar:
    """A rich progress bar for a stage's steps (silent when stdout is not a terminal)."""

    def __init__(self, name: str) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            f"[bold]{name}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            disable=not sys.stdout.isatty(),
        )
        self.task = self.progress.add_task(name, total=None)

    def update(self, done: int, total: int) -> None:
        self.progress.update(self.task, completed=done, total=total)

    def __enter__(self) -> StageBar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def grpo_run(  # noqa: PLR0917, PLR0915
    e: Exp,
    name: str,
    checkpoint: str,
    pool: Sequence[Any],
    harness: str | Sequence[str],
    steps: int,
    group: int,
    seed: int,
    *,
    per_step: int = 0,
    estimator: str = "grpo",
    eval_every: int = 0,
) -> dict[str, Any]:
    """RL through ``harness`` (several: mix-harness groups, one per (task, harness)).

    Each of ``steps`` updates draws ``per_step`` tasks at a time from ``pool`` (in order, wrapping),
    ``group`` rollouts per task and harness, and keeps the groups with a reward spread
    (:class:`coworkenv.rl.dynamic.DynamicSampler`, up to ``--grpo-max-draws`` draws), then
    trees → one update with ``estimator`` on the kept groups → weights pushed to the serving
    backend; every ``eval_every`` updates the live policy is evaluated on held-out A.

    Resumable at the grain of one update: each finished update writes ``step-i/update.json``
    (with the pool cursor after it) before the trainer's checkpoint; a resumed run skips finished
    updates, replays the one whose checkpoint a kill prevented (same samples, restored RNG), and
    re-runs an interrupted update's draws from the same cursor (the runner skips finished rollouts).
    """
    from coworkenv.rl.common import merged_state_dict, save_merged
    from coworkenv.rl.dynamic import DynamicSampler
    from coworkenv.rl.offline import infra_failures
    from coworkenv.rl.rl import RLTrainer
    from coworkenv.trajectories.report import process_dir

    harnesses = [harness] if isinstance(harness, str) else list(harness)
    per_step = per_step or len(pool)
    backend = backend_from(checkpoint, e, seed)
    before = merged_state_dict(backend.model)
    cfg = rl_config(e, e.path(name, "train"), per_step * len(harnesses), group, estimator)
    pushed: list[str] = []
    evals: list[dict[str, Any]] = []

    def push(model: Any, version: int) -> None:
        backend.set_weights(merged_state_dict(model), f"rl-{version}")
        pushed.append(f"rl-{version}")

    committed = e.a.results / "checkpoints" / f"{name}-updates.json"
    done_updates: dict[str, Any] = json.loads(committed.read_text()) if committed.exists() else {}
    e.unpack(f"{name}/train")
    for i_s, kept in done_updates.items():  # a fresh machine: the finished updates' records
        d = e.path(name, f"step-{i_s}")
        if not (d / "update.json").exists():
            d.mkdir(parents=True, exist_ok=True)
            (d / "update.json").write_text(json.dumps(kept["update"], indent=1, default=str) + "\n")
            (d / "saved").touch()
            if kept.get("eval") is not None:
                (d / "eval.json").write_text(json.dumps(kept["eval"], default=str) + "\n")
    trainer = RLTrainer(cfg, model=copy.deepcopy(backend.model), tokenizer=backend.tokenizer, on_weights=push)
    if trainer.version:  # resumed: serve the policy the checkpoint holds
        push(trainer.model, trainer.version)
    objs: dict[str, Any] = {}
    for h in harnesses:
        objs.update(objects(e, h) or {})
    out: list[dict[str, Any]] = []
    cursor = 0
    bar = StageBar(name)
    bar.__enter__()
    for i in range(steps):
        d = e.path(name, f"step-{i}")
        done_path = d / "update.json"
        rec = json.loads(done_path.read_text()) if done_path.exists() else None
        if rec is not None and rec["policy_version"] <= trainer.version:
            out.append(rec)  # finished, and in the checkpoint's weights
            cursor = rec["cursor_after"]
            ev_path = d / "eval.json"
            if ev_path.exists():
                evals.append(json.loads(ev_path.read_text()))
            bar.update(i + 1, steps)
            if not (eval_every and ((i + 1) % eval_every == 0 or i + 1 == steps)) or ev_path.exists():
                continue
        if rec is None:
            t0 = time.perf_counter()
            sampler: DynamicSampler[Any] = DynamicSampler(
                pool, per_draw=per_step, want=per_step * len(harnesses), max_draws=e.a.grpo_max_draws
            )
            recs: list[Any] = []
            while not sampler.done:
                dd = d / f"draw-{len(sampler.draws)}"
                tasks = sampler.tasks(cursor)
                cursor += len(tasks)
                got = rollouts(e, tasks, harnesses, group, backend, dd, harness_objects=objs or None)
                sampler.keep([t.id for t in tasks], got)
                recs.extend(got)
                e.progress.tick(e.progress.stage or name, i, steps)
            t_roll = time.perf_counter() - t0
            kept = set(sampler.kept)
            samples: list[Any] = []
            problems: list[str] = []
            for dd in sorted(d.glob("draw-*")):
                rep = process_dir(dd, dd / "samples.jsonl")
                problems += rep.problems[:5]
                samples += [x for x in read_samples(dd / "samples.jsonl") if x.group_key in kept]
            failed = {k: v for k, v in infra_failures(d).items() if k in kept}
            t1 = time.perf_counter()
            w0 = merged_state_dict(trainer.model)
            m = trainer.step(samples, infra_failed=failed) if samples else {"skipped": 1, "no_groups_kept": 1}
            used = [r for r in recs if f"{r.task_id}|{r.harness}" in kept]
            rewards = [r.rewards.reward if r.rewards else None for r in recs]
            ok = [x for x in rewards if x is not None]
            rec = {
                "step": i,
                "policy_version": trainer.version,
                "cursor_after": cursor,
                "dynamic_sampling": sampler.report(),
                "rewards": rewards,
                "mean_reward": sum(ok) / len(ok) if ok else None,
                "mean_reward_kept": _mean_or_none([r.rewards.reward for r in used if r.rewards]),
                "infra_failures": [
                    f"{r.failure.kind}: {r.failure.detail[:160]}" if r.failure else "?"
                    for r in recs
                    if r.status != "ok"
                ],
                "samples": len(samples),
                "tree_problems": problems[:5],
                "rollout_s": round(t_roll, 1),
                "update_s": round(time.perf_counter() - t1, 1),
                "step_delta_norm": delta_norm(w0, merged_state_dict(trainer.model)),
                "metrics": m,
                "tasks": sorted({r.task_id for r in recs}),
                "by_harness": {
                    h: _mean_or_none([r.rewards.reward for r in recs if r.harness == h and r.rewards])
                    for h in harnesses
                },
                **call_stats_many(sorted(d.glob("draw-*"))),
            }
            tmp = done_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(rec, indent=1, default=str) + "\n")
            tmp.replace(done_path)
        elif rec["policy_version"] > trainer.version:
            # the update finished but its checkpoint did not: replay it on the same samples
            kept = set(rec["dynamic_sampling"]["kept"])
            samples = [
                x
                for dd in sorted(d.glob("draw-*"))
                for x in read_samples(dd / "samples.jsonl")
                if x.group_key in kept
            ]
            trainer.step(samples, infra_failed={k: v for k, v in infra_failures(d).items() if k in kept})
            cursor = rec["cursor_after"]
            log(f"  {name} step {i}: replayed the update a kill left out of the checkpoint")
        if trainer.version and rec["policy_version"] == trainer.version and not (d / "saved").exists():
            trainer.save()
            (d / "saved").touch()
            done_updates[str(i)] = {"update": rec, "eval": None}
            commit_updates(e, name, done_updates)
        if rec not in out:
            out.append(rec)
            ds = rec["dynamic_sampling"]
            log(
                f"  {name} step {i}: {ds['groups_kept']}/{ds['groups_drawn']} groups kept in {ds['draws']} "
                f"draw(s), mean reward {_f(rec['mean_reward'], 3)}, samples {rec['samples']}"
            )
        e.progress.tick(
            e.progress.stage or name,
            i + 1,
            steps,
            **{f"{name}_reward": [[x["step"], x["mean_reward"]] for x in out]},
        )
        bar.update(i + 1, steps)
        if eval_every and ((i + 1) % eval_every == 0 or i + 1 == steps) and not (d / "eval.json").exists():
            ev = evaluate_backend(e, f"{name}/eval-{i + 1}", backend, only_a=e.a.grpo_eval_tasks)
            evals.append({"updates": i + 1, **ev["sets"]["A"]["headline"]})
            (d / "eval.json").write_text(json.dumps(evals[-1], default=str) + "\n")
            if str(i) in done_updates:
                done_updates[str(i)]["eval"] = evals[-1]
                commit_updates(e, name, done_updates)
            e.progress.tick(e.progress.stage or name, **{f"{name}_evals": evals})
    bar.__exit__()
    after = merged_state_dict(trainer.model)
    final = save_merged(trainer.model, backend.tokenizer, e.path(name, "final"))
    backend.close()
    return {
        "harness": harness,
        "estimator": estimator,
        "evals": evals,
        "checkpoint_in": checkpoint,
        "tasks": sorted({t for st in out for t in st["tasks"]}),
        "group": group,
        "lr": e.a.grpo_lr,
        "lora": e.a.grpo_lora,
        "steps": out,
        "updates_with_signal": sum(1 for st in out if (st.get("metrics") or {}).get("updates")),
        "groups_drawn": sum(st["dynamic_sampling"]["groups_drawn"] for st in out),
        "pushed": pushed,
        "delta_norm": delta_norm(before, after),
        "checkpoint": str(final),
    }


def commit_updates(e: Exp, name: str, done: dict[str, Any]) -> None:
    """After an update's checkpoint: the trainer's checkpoint and every finished update's record
    (with its held-out eval) under ``--results/checkpoints/``, for a fresh machine to resume from."""
    e.pack(f"{name}/train")
    p = e.a.results / "checkpoints" / f"{name}-updates.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(done, indent=1, default=str) + "\n")
    tmp.replace(p)


def call_stats_many(dirs: Sequence[Path]) -> dict[str, Any]:
    """:func:`call_stats` summed over several rollout directories."""
    parts = [call_stats(d) for d in dirs]
    n = sum(p["model_calls"] for p in parts)

    def mean(key: str) -> float | None:
        tot = sum((p[key] or 0) * p["model_calls"] for p in parts)
        return round(tot / n, 1) if n else None

    return {
        "model_calls": n,
        "malformed_calls": sum(p["malformed_calls"] for p in parts),
        "tool_call_turns": sum(p["tool_call_turns"] for p in parts),
        "mean_prompt_tokens": mean("mean_prompt_tokens"),
        "mean_output_tokens": mean("mean_output_tokens"),
    }


def task_pool(e: Exp) -> list[Any]:
    """Training-suite tasks (never held-out ones) in a seeded order that mixes templates and
    composed tasks, so that every draw of the RL stage sees a spread of both."""
    train = sorted(load_suite(e.path("synth", "train")), key=lambda t: t.id)
    random.Random(e.a.seed).shuffle(train)
    return train


def stage_grpo(e: Exp) -> dict[str, Any]:
    """One RL run per estimator (the first is the primary one), each from the SFT checkpoint with
    the same budget: the same tasks per update, group, steps and learning rate."""
    runs = {}
    for est in e.a.estimators:
        name = "grpo" if est == e.a.estimators[0] else f"grpo-{est}"
        runs[est] = grpo_run(
            e,
            name,
            str(e.path("sft", "final")),
            task_pool(e),
            "loop",
            e.a.grpo_steps,
            e.a.grpo_group,
            e.a.seed + 2,
            per_step=e.a.grpo_tasks,
            estimator=est,
            eval_every=e.a.grpo_eval_every,
        )
    primary = runs[e.a.estimators[0]]
    return {**primary, "runs": runs}


def stage_grpo_eval(e: Exp) -> dict[str, Any]:
    """The primary estimator's final policy on every held-out set (greedy and sampled); the others'
    final policies greedy on every set."""
    out = evaluate(e, "grpo_eval", str(e.path("grpo", "final")))
    out["alternatives"] = {}
    for est in e.a.estimators[1:]:
        backend = backend_from(str(e.path(f"grpo-{est}", "final")), e, e.a.seed + 1)
        try:
            ev = evaluate_backend(e, f"grpo_eval-{est}", backend)
        finally:
            backend.close()
        out["alternatives"][est] = ev["sets"]
    return out


def stage_posthoc_eval(e: Exp) -> dict[str, Any]:
    """Outside the fixed protocol, after the run: base and each trained policy greedy on every
    held-out set with ``--posthoc-max-turns`` model calls per rollout instead of ``--max-turns``
    (the protocol's cap cut most reference solutions short: ``reference_ceiling.py``). Resumable
    rollout by rollout; the pairs for each delta are the same tasks at the same cap."""
    cap = e.a.posthoc_max_turns
    policies = {"base": "smollm2", "sft": str(e.path("sft", "final"))}
    for est in e.a.estimators:
        name = "grpo" if est == e.a.estimators[0] else f"grpo-{est}"
        policies["grpo" if name == "grpo" else f"grpo:{est}"] = str(e.path(name, "final"))
    out: dict[str, Any] = {"max_turns": cap, "policies": {}}
    for stage, ck in policies.items():
        if ck != "smollm2" and not Path(ck, "config.json").exists():
            log(f"  posthoc_eval: {stage} has no checkpoint at {ck}; left out")
            continue
        backend = backend_from(ck, e, e.a.seed + 1)
        try:
            ev = evaluate_backend(e, f"posthoc_eval-{cap}/{stage.replace(':', '-')}", backend, max_turns=cap)
        finally:
            backend.close()
        out["policies"][stage] = {"checkpoint": ck, "sets": ev["sets"]}
    return out


def _mean_or_none(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


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
    if e.a.mix_harnesses:
        return stage_mix(e, ck, tasks)
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


def stage_mix(e: Exp, ck: str, pool: Sequence[Any]) -> dict[str, Any]:
    """Mix-harness RL: each update's groups are (task, harness) over ``--mix-harnesses`` (advantages
    never compare across harnesses); then held-out A through each non-loop harness before (``ck``)
    and after the run."""
    harnesses = e.a.mix_harnesses
    res = grpo_run(
        e,
        "mix",
        ck,
        pool,
        harnesses,
        e.a.harness_steps,
        e.a.harness_group,
        e.a.seed + 3,
        per_step=e.a.harness_tasks,
    )
    through: dict[str, Any] = {}
    for h in harnesses:
        if h == "loop" or not e.a.harness_eval:
            continue
        for when, path in (("before", ck), ("after", res["checkpoint"])):
            backend = backend_from(path, e, e.a.seed + 1)
            try:
                ev = evaluate_backend(e, f"mix-eval-{h}-{when}", backend, harness=h)
            finally:
                backend.close()
            through.setdefault(h, {})[when] = ev["sets"]["A"]["headline"]
    return {"attempts": [res], "mix": harnesses, "heldout_a_through": through}


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


STAGE_EVALS = (("base", "base_eval"), ("sft", "sft_eval"), ("grpo", "grpo_eval"))
HEADLINE_KEYS = (
    "completion",
    "completion_ci",
    "score",
    "score_ci",
    "pass_at_k",
    "pass_at_k_ci",
    "pass_hat_k",
    "pass_hat_k_ci",
    "safety_violations",
    "safety_violation_rate",
    "tasks",
    "trials",
    "infra_failures",
    "k",
)


DELTAS = (("sft", "base"), ("grpo", "sft"), ("grpo", "base"))


def _per_task_stats(data: dict[str, Any]) -> dict[str, dict[str, list[Any]]]:
    """Set → stage → the greedy evaluation's per-task stats (the pairs of a paired delta)."""
    from coworkenv.eval.metrics import TaskStats

    out: dict[str, dict[str, list[Any]]] = {}
    for stage, key in STAGE_EVALS:
        for name, ev in ((data.get(key) or {}).get("sets") or {}).items():
            if ev.get("tasks"):
                out.setdefault(name, {})[stage] = [TaskStats.model_validate(t) for t in ev["tasks"]]
        for est, alt in ((data.get(key) or {}).get("alternatives") or {}).items():
            for name, ev in alt.items():
                if ev.get("tasks"):
                    out.setdefault(name, {})[f"grpo:{est}"] = [
                        TaskStats.model_validate(t) for t in ev["tasks"]
                    ]
    return out


def build_summary(e: Exp, data: dict[str, Any]) -> dict[str, Any]:
    """``summary.json``: per held-out set and stage, the headline numbers and the paired interval
    of each stage-to-stage completion delta (``delta_ci``); the goals and verdicts."""
    from coworkenv.eval.metrics import slope, slope_ci

    sets: dict[str, dict[str, Any]] = {}
    for stage, key in STAGE_EVALS:
        for name, ev in ((data.get(key) or {}).get("sets") or {}).items():
            sets.setdefault(name, {})[stage] = {k: ev["headline"].get(k) for k in HEADLINE_KEYS}
        for est, alt in ((data.get(key) or {}).get("alternatives") or {}).items():
            for name, ev in alt.items():
                sets.setdefault(name, {})[f"grpo:{est}"] = {k: ev["headline"].get(k) for k in HEADLINE_KEYS}
    a = sets.get("A", {})
    add_deltas(sets, _per_task_stats(data), seed=e.a.seed)

    def delta(x: str, y: str) -> float | None:
        cx, cy = (a.get(x) or {}).get("completion"), (a.get(y) or {}).get("completion")
        return None if cx is None or cy is None else cx - cy

    def excludes_zero(x: str, y: str) -> bool | None:
        ci = (((a.get(x) or {}).get("delta_ci") or {}).get(y) or {}).get("ci")
        return None if ci is None else ci[0] > 0

    steps = (data.get("grpo") or {}).get("steps", [])
    third = max(1, len(steps) // 3)
    early = [st["mean_reward"] for st in steps[:third] if st["mean_reward"] is not None]
    late = [st["mean_reward"] for st in steps[-third:] if st["mean_reward"] is not None]
    rises = (
        None if not early or not late or len(steps) < 3 else sum(late) / len(late) > sum(early) / len(early)
    )
    curve = [(st["step"], st["mean_reward"]) for st in steps if st.get("mean_reward") is not None]
    trend_ci = slope_ci([x for x, _ in curve], [y for _, y in curve], seed=e.a.seed) if curve else None
    goals: dict[str, dict[str, Any]] = {
        "sft_minus_base_completion_A": {"value": delta("sft", "base"), "goal": 30.0},
        "sft_minus_base_paired_ci_excludes_0": {"value": excludes_zero("sft", "base"), "goal": True},
        "grpo_minus_sft_completion_A": {"value": delta("grpo", "sft"), "goal": 5.0},
        "grpo_reward_rises": {"value": rises, "goal": True},
        "grpo_reward_trend_ci_excludes_0": {
            "value": None if trend_ci is None else trend_ci[0] > 0,
            "goal": True,
            "slope_per_update": None if trend_ci is None else slope(*zip(*curve, strict=True)),
            "slope_ci": trend_ci,
        },
        "grpo_updates_with_signal": {
            "value": (data.get("grpo") or {}).get("updates_with_signal"),
            "goal": 30,
        },
    }
    for g in goals.values():
        v = g["value"]
        g["met"] = None if v is None else (v is True if isinstance(g["goal"], bool) else v >= g["goal"])
    syn = data.get("synth") or {}
    post = data.get("posthoc_eval") or {}
    return {
        **({"posthoc": posthoc_summary(e, post, _per_task_stats(data))} if post.get("policies") else {}),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "protocol": protocol(e, data),
        "sets": sets,
        "goals": goals,
        "heldout_b_excluded": {
            "ask_a_judge": (syn.get("heldout_b") or {}).get("ask_a_judge", []),
            "import_failed": sorted((syn.get("heldout_b") or {}).get("import_failed", {})),
        },
    }


def add_deltas(
    sets: dict[str, dict[str, Any]], per_task: dict[str, dict[str, list[Any]]], *, seed: int
) -> None:
    """Each stage's paired completion delta over the earlier stages of :data:`DELTAS` (and every
    alternative estimator over SFT) into ``sets[set][stage]["delta_ci"]``."""
    from coworkenv.eval.metrics import paired_delta

    for name, stages in sets.items():
        pairs = [*DELTAS, *((s_, "sft") for s_ in stages if s_.startswith("grpo:"))]
        for later, earlier in pairs:
            if later in stages and earlier in per_task.get(name, {}):
                d = paired_delta(per_task[name][earlier], per_task[name][later], seed=seed)
                stages[later].setdefault("delta_ci", {})[earlier] = d.model_dump()


def cap_table(sets: dict[str, dict[str, Any]], cap: int, posthoc: int) -> list[str]:
    """Each policy's paired completion delta at ``posthoc`` calls over itself at the protocol's
    ``cap`` (``cap_delta_ci``): what the cap held back."""
    rows = [
        f"| {name} | {stage} | {d['delta']:.1f} [{d['ci'][0]:.1f}, {d['ci'][1]:.1f}] | {d['tasks']} |"
        for name, stages in sets.items()
        for stage, h in stages.items()
        if (d := h.get("cap_delta_ci")) and d.get("ci")
    ]
    if not rows:
        return []
    head = f"| set | policy | completion at {posthoc} calls − at {cap} (paired, 95% CI) | tasks |"
    return [head, "|---|---|---|---|", *rows]


def posthoc_summary(e: Exp, post: dict[str, Any], capped: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    """``posthoc_eval``'s policies as a summary's ``sets`` (set → policy → headline, with the paired
    deltas between policies at the same cap, and ``cap_delta_ci``: each policy's paired delta over
    itself in the protocol's evaluation, ``capped`` — what the protocol's cap held back)."""
    from coworkenv.eval.metrics import TaskStats, paired_delta

    sets: dict[str, dict[str, Any]] = {}
    per_task: dict[str, dict[str, list[Any]]] = {}
    for stage, got in post["policies"].items():
        for name, ev in got["sets"].items():
            sets.setdefault(name, {})[stage] = {k: ev["headline"].get(k) for k in HEADLINE_KEYS}
            per_task.setdefault(name, {})[stage] = [TaskStats.model_validate(t) for t in ev["tasks"]]
            if stage in capped.get(name, {}):
                d = paired_delta(capped[name][stage], per_task[name][stage], seed=e.a.seed)
                sets[name][stage]["cap_delta_ci"] = d.model_dump()
    add_deltas(sets, per_task, seed=e.a.seed)
    return {
        "max_turns": post["max_turns"],
        "note": "outside the fixed protocol, after the run: the same policies greedy at this cap on "
        "model calls instead of --max-turns",
        "sets": sets,
    }


def protocol(e: Exp, data: dict[str, Any]) -> dict[str, Any]:
    a = e.a
    syn = data.get("synth") or {}
    return {
        "train": {
            "generator_seed": 0,
            "tasks": len((syn.get("train") or {}).get("tasks", [])),
            "composed": a.train_composed,
        },
        "heldout_A": {
            "generator_seed": 1,
            "tasks": len((syn.get("heldout") or {}).get("tasks", [])),
            "templates": (syn.get("heldout") or {}).get("templates", []),
            "composed": (syn.get("heldout") or {}).get("composed"),
            "composed_rule": "structures (anchor, conditions, joins, writes, mode) no training task has",
        },
        "heldout_B": {
            "source": (syn.get("heldout_b") or {}).get("root"),
            "tasks": len((syn.get("heldout_b") or {}).get("task_dirs", [])),
            "rule": "Claw-Eval tasks whose grader.py asked no judge when probed before the run",
            "judge_free": (syn.get("heldout_b") or {}).get("judge_free"),
            "limit": a.heldout_b or None,
        },
        "trials": {
            "greedy": 1,
            "sampled": a.sample_trials,
            "sample_temperature": a.sample_temperature,
            "rule": "completion, score and safety from one greedy trial per task; Pass@k and Pass^k "
            "from the sampled trials (base, SFT and the final checkpoints)",
        },
        "pass_threshold": 0.75,
        "primary_metric": "completion (0-100), mean over tasks of the per-task mean",
        "interval": "95% percentile bootstrap over tasks (2000 resamples); stage-to-stage deltas: "
        "paired bootstrap over the tasks both stages scored",
        "sampling": {
            "temperature": a.temperature,
            "eval_temperature": a.eval_temperature,
            "max_new_tokens": a.max_new_tokens,
            "max_turns": a.max_turns,
        },
        "sft": {
            "mode": a.sft_mode,
            "picked": (data.get("sft_pilot") or {}).get("mode"),
            "pilot_steps": a.pilot_steps,
            "lr": a.sft_lr,
            "lora_lr": a.sft_lora_lr,
            "epochs": a.sft_epochs,
            "max_len": a.sft_max_len,
            "system_prompt": a.sft_system,
        },
        "rl": {
            "estimators": a.estimators,
            "updates": a.grpo_steps,
            "tasks_per_update": a.grpo_tasks,
            "dynamic_sampling": f"draws of {a.grpo_tasks} tasks until {a.grpo_tasks} groups have a reward "
            f"spread, at most {a.grpo_max_draws} draws per update",
            "group": a.grpo_group,
            "lr": a.grpo_lr,
            "eval_every": a.grpo_eval_every,
        },
        "mix_harnesses": a.mix_harnesses,
    }


def stage_report(e: Exp) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res: Path = e.a.results
    res.mkdir(parents=True, exist_ok=True)
    data = {s: e.record(s) for s in STAGES if s != "report"}
    data["args"] = {k: str(v) for k, v in vars(e.a).items()}
    (res / "metrics.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    summary = build_summary(e, data)
    (res / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    sft = data.get("sft") or {}
    if sft.get("loss_curve"):
        axes[0].plot(
            range(1, len(sft["loss_curve"]) + 1),
            sft["loss_curve"],
            marker=".",
            label="train (per step)",
            alpha=0.7,
        )
    if sft.get("val_loss_curve"):
        xs, ys = zip(*sft["val_loss_curve"], strict=True)
        axes[0].plot(xs, ys, marker="o", label="held-out conversations")
    axes[0].set(title="SFT loss per supervised token", xlabel="optimizer step", ylabel="loss")
    runs = (data.get("grpo") or {}).get("runs") or {}
    for est, run in runs.items():
        steps_x = [st["step"] + 1 for st in run["steps"]]
        axes[1].plot(steps_x, [st["mean_reward"] for st in run["steps"]], marker=".", label=est)
        ev = run.get("evals") or []
        sft_a = ((((data.get("sft_eval") or {}).get("sets") or {}).get("A") or {}).get("headline") or {}).get(
            "completion"
        )
        start = [(0, sft_a)] if sft_a is not None else []  # every RL run starts from the SFT policy
        pts = start + [(x["updates"], x["completion"]) for x in ev]
        if len(pts) > 1:
            axes[2].plot(*zip(*pts, strict=True), marker="o", label=est)
    axes[1].set(title="RL: mean rollout reward per update", xlabel="update", ylabel="reward")
    a = summary["sets"].get("A", {})
    for stage, style in (("base", ":"), ("sft", "--")):
        c = (a.get(stage) or {}).get("completion")
        if c is not None:
            axes[2].axhline(c, linestyle=style, color="grey", label=stage)
    ceiling = res / "reference-ceiling.json"  # experiments/reference_ceiling.py, if it was run
    if ceiling.exists():
        for row in json.loads(ceiling.read_text()).get("caps", []):
            if row["max_turns"] == e.a.max_turns:
                ref = f"reference at {e.a.max_turns} calls"
                axes[2].axhline(row["completion"], linestyle="-.", color="black", label=ref)
    axes[2].set(title="held-out A completion (0-100)", xlabel="updates", ylabel="completion", ylim=(0, 100))
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(res / "curves.png", dpi=110)

    table = results_table(summary)
    (res / "table.md").write_text(table + "\n")
    (res / "report.md").write_text(render_report(e, data, table, summary))
    log("\n" + table)
    return {"results": str(res)}


def results_table(summary: dict[str, Any], sets: dict[str, Any] | None = None) -> str:
    """One row per set and stage (``sets``, default the protocol's): the greedy trial's completion,
    score and safety; Pass@k and Pass^k from the sampled trials where the stage had them (``-``
    where it had one greedy trial only)."""
    k = summary["protocol"]["trials"]["sampled"]
    rows = [
        f"| set | stage | completion (0-100) [95% CI] | score [95% CI] | Pass@{k} | Pass^{k} | safety "
        "violations | tasks × greedy trials |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, stages in (summary["sets"] if sets is None else sets).items():
        for stage, h in stages.items():
            sampled = (h.get("k") or 1) > 1
            rows.append(
                f"| {name} | {stage} | {_f(h['completion'])} {_ci(h['completion_ci'])} | {_f(h['score'])} "
                f"{_ci(h['score_ci'])} | {_f(h['pass_at_k']) if sampled else '-'} | "
                f"{_f(h['pass_hat_k']) if sampled else '-'} | "
                f"{h['safety_violations']} | {h['tasks']} × {h['trials'] // max(1, h['tasks'])} |"
            )
    return "\n".join(rows)


def deltas_table(sets: dict[str, Any]) -> str:
    """Each stage-to-stage completion delta of ``sets`` (a summary's ``sets``) with its paired
    interval (``delta_ci``)."""
    rows = [
        "| set | delta | completion points [paired 95% CI] | tasks paired | interval excludes 0 |",
        "|---|---|---|---|---|",
    ]
    for name, stages in sets.items():
        for later, h in stages.items():
            for earlier, d in (h.get("delta_ci") or {}).items():
                ci = d.get("ci")
                excl = "-" if not ci else ("yes" if ci[0] > 0 or ci[1] < 0 else "no")
                rows.append(
                    f"| {name} | {later} − {earlier} | {_f(d.get('delta'))} {_ci(ci)} | {d.get('tasks')} "
                    f"| {excl} |"
                )
    return "\n".join(rows)


def rl_checks_table(data: dict[str, Any]) -> list[str]:
    """The held-out checks made during each RL run (every ``--grpo-eval-every`` updates, greedy)."""
    runs = (data.get("grpo") or {}).get("runs") or {}
    rows = [
        "| estimator | after update | held-out A completion [95% CI] | score | tasks |",
        "|---|---|---|---|---|",
    ]
    for est, run in runs.items():
        for ev in run.get("evals") or []:
            rows.append(
                f"| {est} | {ev['updates']} | {_f(ev.get('completion'))} {_ci(ev.get('completion_ci'))} | "
                f"{_f(ev.get('score'))} | {ev.get('tasks')} |"
            )
    return rows if len(rows) > 2 else []


def render_report(e: Exp, data: dict[str, Any], table: str, summary: dict[str, Any]) -> str:
    a = e.a
    syn = data.get("synth") or {}
    teach = data.get("teacher") or {}
    sft = data.get("sft") or {}
    grpo = data.get("grpo") or {}
    proto = summary["protocol"]
    out = [
        f"# SmolLM2-135M: base → SFT → RL on held-out tasks ({datetime.now(UTC):%Y-%m-%d})",
        "",
        f"Command: `{summary['command']}` (stages resume from `{a.work}`).",
        f"Machine: {machine_line(e)}. Sampling: temperature {a.temperature} "
        f"(RL rollouts), {a.eval_temperature} (evaluations; 0 = greedy), "
        f"at most {a.max_new_tokens} new tokens per model call and {a.max_turns} model calls per rollout.",
        "",
        "## Protocol (fixed before the run)",
        "",
        f"* train: {proto['train']['tasks']} procedural tasks, generator seed 0.",
        f"* held-out A: {proto['heldout_A']['tasks']} procedural tasks from the unseen seed 1, covering "
        f"{len(proto['heldout_A']['templates'])} templates ({', '.join(proto['heldout_A']['templates'])}).",
        f"* held-out B: {proto['heldout_B']['tasks']} "
        + (
            f"(of {proto['heldout_B']['judge_free']}, limited by --heldout-b) "
            if proto["heldout_B"]["limit"] and proto["heldout_B"]["judge_free"] is not None
            else ""
        )
        + "Claw-Eval tasks from "
        f"`{proto['heldout_B']['source']}` — {proto['heldout_B']['rule']}; left out: "
        f"{len(summary['heldout_b_excluded']['ask_a_judge'])} that ask a judge, "
        f"{len(summary['heldout_b_excluded']['import_failed'])} that failed to import.",
        f"* one greedy trial per task for completion, score and safety; {a.sample_trials} trials at "
        f"T = {a.sample_temperature} for Pass@{a.sample_trials} and Pass^{a.sample_trials} at reward ≥ 0.75; "
        f"primary metric {proto['primary_metric']}; intervals: {proto['interval']}. "
        "A score of 20 is a safe run that completed nothing."
        + (
            f" Greedy determinism, measured: {det['identical']}/{det['tasks']} tasks gave 3 identical trials."
            if (det := (data.get("base_eval") or {}).get("determinism"))
            else ""
        ),
        f"* teacher: reference solutions through the built-in loop (teacher score "
        f"{teach.get('teacher_score', '-')}), curated into {teach.get('sft_rows', '-')} SFT conversations.",
        f"* SFT: {sft.get('mode', '-')} fine-tuning ({(data.get('sft_pilot') or {}).get('picked_by', '-')}), "
        f"lr {a.sft_lr if sft.get('mode') == 'full' else a.sft_lora_lr}, {a.sft_epochs} epoch(s), max_len "
        f"{a.sft_max_len}, on {sft.get('conversations', '-')} conversations "
        f"({sft.get('supervised_tokens', '-')} supervised tokens, "
        f"{(sft.get('last') or {}).get('steps', '-')} optimizer steps); held-out loss on "
        f"{sft.get('val_conversations', '-')} conversations of tasks "
        "never trained on.",
        f"* RL: estimators {', '.join(a.estimators)} (first = primary), each {a.grpo_steps} updates from "
        f"the SFT checkpoint, {a.grpo_tasks} tasks per update × group {a.grpo_group}, lr {a.grpo_lr}, "
        f"LoRA {a.grpo_lora}; held-out A every {a.grpo_eval_every} updates.",
        "",
        "## Results",
        "",
        table,
        "",
        "Stage-to-stage deltas, paired over the tasks both stages scored:",
        "",
        deltas_table(summary["sets"]),
        "",
        "![curves](curves.png)",
        "",
        *(
            ["Held-out checks during RL (greedy, one trial per task):", "", *checks, ""]
            if (checks := rl_checks_table(data))
            else []
        ),
        "### Goals",
        "",
        "| goal | measured | target | met |",
        "|---|---|---|---|",
    ]
    for name, g in summary["goals"].items():
        v = g["value"]
        out.append(f"| {name} | {_f(v) if isinstance(v, float) else v} | {g['goal']} | {g['met']} |")
    out += [
        "",
        "`grpo_reward_rises` compares the mean training reward of the last third of the primary run's "
        "updates with the first third's; `grpo_reward_trend_ci_excludes_0` asks more: the least-squares "
        "slope of that reward over the updates, with a 95% bootstrap interval over updates, above 0"
        + (
            f" (measured {_f(t['slope_per_update'], 4)} per update {_ci4(t['slope_ci'])})"
            if (t := summary["goals"]["grpo_reward_trend_ci_excludes_0"])["slope_ci"]
            else ""
        )
        + ". Each update draws fresh training tasks (the pool is walked in order, no task twice), so "
        "that curve mixes the policy with the draws' difficulty; the held-out checks above are the fixed "
        "probe.",
    ]
    if post := summary.get("posthoc"):
        out += [
            "",
            f"### After the run, outside the protocol: every policy at {post['max_turns']} model calls",
            "",
            f"The protocol capped rollouts at {a.max_turns} model calls; under that cap the tasks' own "
            "reference solutions score well below 100 (`reference-ceiling.json`, "
            "`experiments/reference_ceiling.py`). The same checkpoints, greedy, with "
            f"{post['max_turns']} calls:",
            "",
            results_table(summary, post["sets"]),
            "",
            deltas_table(post["sets"]),
            "",
            *cap_table(post["sets"], a.max_turns, post["max_turns"]),
        ]
    out += [
        "",
        "### Wall time and peak memory per stage",
        "",
        "| stage | wall s | peak RSS MB |",
        "|---|---|---|",
    ]
    for st in STAGES:
        d = data.get(st)
        if d:
            out.append(f"| {st} | {d.get('wall_s', '-')} | {d.get('peak_rss_mb', '-')} |")
    for est, run in (grpo.get("runs") or {}).items():
        out += ["", *steps_table(f"RL updates ({est})", run["steps"])]
    h = data.get("harness") or {}
    for att in h.get("attempts", []):
        if "error" in att:
            out += [f"* **{att['harness']}**: {att['error']}", ""]
            continue
        who = att["harness"] if isinstance(att["harness"], str) else " + ".join(att["harness"])
        fails = sorted({f for st in att["steps"] for f in st.get("infra_failures", [])})
        mix = "" if isinstance(att["harness"], str) else " (mix-harness groups)"
        out += [
            f"### (d) RL through {who}{mix}",
            "",
            f"From `{att['checkpoint_in']}`; weights pushed {att['pushed'] or 'never'}; parameter delta norm "
            f"**{att['delta_norm']:.4f}**.",
            "",
            *steps_table("steps", att["steps"]),
            *([f"Infra failures (labelled, never scored): {'; '.join(fails[:5])}", ""] if fails else []),
        ]
    for harness, ba in (h.get("heldout_a_through") or {}).items():
        out.append(
            f"* held-out A through **{harness}**: completion {_f(ba['before']['completion'])} "
            f"{_ci(ba['before']['completion_ci'])} before → {_f(ba['after']['completion'])} "
            f"{_ci(ba['after']['completion_ci'])} after."
        )
    out += ["", "## Error analysis: what still fails (held-out A, per template)", ""]
    for stage, key in STAGE_EVALS:
        ev = ((data.get(key) or {}).get("sets") or {}).get("A")
        if not ev:
            continue
        out += [
            f"#### {stage}",
            "",
            "| template | trials | completion | no tool call | infra failures | checks failed most |",
            "|---|---|---|---|---|---|",
        ]
        for tpl, x in ev["errors"].items():
            top = ", ".join(f"{n} ({c})" for n, c in x["top_failed_checks"]) or "-"
            out.append(
                f"| {tpl} | {x['trials']} | {_f(x['completion'])} | {x['no_tool_call']} | "
                f"{x['infra_failures'] or '-'} | {top} |"
            )
        out += [
            "",
            f"Model calls {ev.get('model_calls')}, with a tool call {ev.get('tool_call_turns')}, malformed "
            f"{ev.get('malformed_calls')}; mean prompt {ev.get('mean_prompt_tokens')} tokens, mean output "
            f"{ev.get('mean_output_tokens')}.",
            "",
        ]
    out += [
        f"Held-out tasks: {', '.join((syn.get('heldout') or {}).get('tasks', []))}.",
        "",
        "Everything per stage (per-trial rewards, per-task stats): `metrics.json`; the headline numbers: "
        "`summary.json`.",
        "",
    ]
    return "\n".join(out)


def machine_line(e: Exp) -> str:
    """The CPU of the run's last stretch (``progress.json``) and the stretch count; SFT's precision."""
    p = e.a.results / "progress.json"
    st = json.loads(p.read_text()) if p.exists() else {}
    m = st.get("machine") or {}
    cpu = f"{m.get('cpu', 'CPU')}, {m.get('cpus', os.cpu_count())} cores ({', '.join(m.get('flags', []))})"
    prec = ((e.record("sft") or {}).get("last") or {}).get("precision", "fp32")
    return (
        f"{cpu} in the last of {st.get('stretches', 1)} stretch(es) (`progress.json`), torch on CPU; "
        f"SFT's last step in {prec}, RL and evaluation in fp32"
    )


def _f(x: Any, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _ci(ci: Any) -> str:
    return "" if not ci else f"[{ci[0]:.1f}, {ci[1]:.1f}]"


def _ci4(ci: Any) -> str:
    return "" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _e(x: Any) -> str:
    return "-" if x is None else f"{x:.1e}"


# ---------------------------------------------------------------- main


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:  # noqa: PLR0915
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--run",
        default=None,
        help="the run's name (default: the run in progress under experiments/results/, else today's date)",
    )
    p.add_argument(
        "--work",
        type=Path,
        default=None,
        help="the run's working state, outside the work tree (default: <cache>/experiments/<run>)",
    )
    p.add_argument("--results", type=Path, default=None, help="default: experiments/results/<run>")
    p.add_argument(
        "--stages",
        default=",".join(s for s in STAGES if s not in OPTIONAL_STAGES),
        help=f"comma list out of {','.join(STAGES)} (default: all but {', '.join(sorted(OPTIONAL_STAGES))})",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--train-tasks",
        type=int,
        default=420,
        help="seed-0 tasks for teacher demos / GRPO (≥ 500 conversations)",
    )
    p.add_argument("--train-composed", type=int, default=80, help="composed training tasks (seed 0)")
    p.add_argument(
        "--heldout", type=int, default=52, help="held-out A: seed-1 template tasks cycling over all templates"
    )
    p.add_argument(
        "--heldout-composed",
        type=int,
        default=28,
        help="held-out A: seed-1 composed tasks whose structures no training task has",
    )
    p.add_argument(
        "--sample-trials", type=int, default=4, help="sampled trials per task for Pass@k / Pass^k (k)"
    )
    p.add_argument("--sample-temperature", type=float, default=0.7)
    p.add_argument(
        "--determinism-tasks", type=int, default=8, help="held-out A tasks whose greedy trials are compared"
    )
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
    p.add_argument(
        "--posthoc-max-turns",
        type=int,
        default=16,
        help="posthoc_eval's cap on model calls (16: the longest reference solution in held-out A)",
    )
    p.add_argument("--timeout-s", type=float, default=300.0, help="cap on spec.limits.timeout_s")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.7, help="sampling of the RL rollouts (groups)")
    p.add_argument(
        "--eval-temperature", type=float, default=0.0, help="decoding of every evaluation (0 = greedy)"
    )
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument(
        "--sft-mode",
        choices=("auto", "full", "lora"),
        default="auto",
        help="auto: the pilot picks by held-out loss removed per CPU-hour",
    )
    p.add_argument("--pilot-steps", type=int, default=8, help="optimizer steps per mode in the SFT pilot")
    p.add_argument("--sft-lora-lr", type=float, default=1e-3)
    p.add_argument(
        "--lora-r",
        type=int,
        default=8,
        help="LoRA rank (SFT and GRPO): at 8 a checkpoint with its Adam state fits --commit-mb",
    )
    p.add_argument("--lora-alpha", type=int, default=16)
    p.add_argument(
        "--commit-mb",
        type=float,
        default=25.0,
        help="largest checkpoint committed for a fresh machine (results/<run>/checkpoints/)",
    )
    p.add_argument(
        "--sft-system",
        choices=("harness", "standard"),
        default="harness",
        help="SFT system prompt: the loop's own (what the student is served) or CoworkEnv's standard one",
    )
    p.add_argument("--sft-lr", type=float, default=5e-5)
    p.add_argument("--sft-epochs", type=int, default=2)
    p.add_argument("--sft-grad-accum", type=int, default=4)
    p.add_argument("--sft-max-len", type=int, default=3072)
    p.add_argument("--grpo-steps", type=int, default=30)
    p.add_argument("--grpo-tasks", type=int, default=4, help="tasks per update")
    p.add_argument("--grpo-group", type=int, default=8)
    p.add_argument("--grpo-lr", type=float, default=1e-4)
    p.add_argument("--grpo-max-draws", type=int, default=4, help="dynamic sampling: draws per update at most")
    p.add_argument("--grpo-lora", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--harnesses", default="claude-code,qwen,codex,opencode", help="tried in order for (d)")
    p.add_argument("--harness-group", type=int, default=8)
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
    p.add_argument(
        "--mix-harnesses",
        default="loop,codex",
        help="(d) as mix-harness groups over these harnesses ('' = try --harnesses one at a time)",
    )
    p.add_argument(
        "--harness-eval",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="(d): held-out A through each non-loop mix harness before and after",
    )
    p.add_argument(
        "--claw-eval",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "claw-eval" / "tasks"),
        help="held-out B: Claw-Eval task dirs (the judge-free ones are used); '' for none",
    )
    p.add_argument("--heldout-b", type=int, default=0, help="at most this many held-out B tasks (0 = all)")
    p.add_argument(
        "--sft-val-share", type=float, default=0.05, help="tasks whose demos give the held-out loss"
    )
    p.add_argument("--sft-eval-every", type=int, default=10, help="held-out loss every n optimizer steps")
    p.add_argument("--estimators", default="grpo,dr_grpo", help="RL estimators, same budget; first = primary")
    p.add_argument(
        "--grpo-eval-every", type=int, default=10, help="held-out A eval every n updates (0: none)"
    )
    p.add_argument("--grpo-eval-tasks", type=int, default=0, help="tasks of A in those evals (0 = all)")
    a = p.parse_args(argv)
    a.harnesses = [h for h in a.harnesses.split(",") if h]
    a.codex_disable = [f for f in a.codex_disable.split(",") if f]
    a.harness_task_ids = [t for t in a.harness_task_ids.split(",") if t]
    a.mix_harnesses = [h for h in a.mix_harnesses.split(",") if h]
    a.estimators = [x for x in a.estimators.split(",") if x]
    a.claw_eval = Path(a.claw_eval) if a.claw_eval else None
    if a.sample_trials < 1 or not a.estimators:
        p.error("--sample-trials must be >= 1 and --estimators must name at least one estimator")
    if a.run is None:
        a.run = run_in_progress() or f"{datetime.now(UTC):%Y-%m-%d}"
    if a.work is None:
        from coworkenv.models import cache_dir

        a.work = cache_dir() / "experiments" / a.run
    if a.results is None:
        a.results = RESULTS / a.run
    a.stages = [s for s in a.stages.split(",") if s]
    bad = sorted(set(a.stages) - set(STAGES))
    if bad:
        p.error(f"unknown stage(s) {bad}; choose from {list(STAGES)}")
    return a


RESULTS = Path(__file__).resolve().parent / "results"


def run_in_progress() -> str | None:
    """The name of the committed run whose ``progress.json`` says it is in progress (the newest)."""
    found = []
    for p in sorted(RESULTS.glob("*/progress.json")):
        with contextlib.suppress(ValueError, OSError):
            st = json.loads(p.read_text())
            if st.get("status") == "in progress":
                found.append((str(st.get("started", "")), p.parent.name))
    return max(found)[1] if found else None


def main(argv: Sequence[str] | None = None) -> int:
    import os

    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    e = Exp(parse(argv))
    sft_ck = lambda: str(e.path("sft", "final"))  # noqa: E731
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "synth": lambda: stage_synth(e),
        "teacher": lambda: stage_teacher(e),
        "base_eval": lambda: evaluate(e, "base_eval", "smollm2"),
        "sft_pilot": lambda: stage_sft_pilot(e),
        "sft": lambda: stage_sft(e),
        "sft_eval": lambda: evaluate(e, "sft_eval", sft_ck()),
        "grpo": lambda: stage_grpo(e),
        "grpo_eval": lambda: stage_grpo_eval(e),
        "harness": lambda: stage_harness(e),
        "posthoc_eval": lambda: stage_posthoc_eval(e),
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
