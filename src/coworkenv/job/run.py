"""The main job, stage by stage; every stage reads and writes plain files under ``cfg.out``.

Stages (each skipped when its outputs are already complete, so an interrupted job resumes):

1. ``synth``    procedural (or scripted/LLM) synthesis with full validation → ``synth/tasks/*.json``
2. ``teacher``  the teacher policy (reference solutions) through the built-in loop and the proxy
3. ``curate``   teacher rollouts → SFT conversations (``sft.jsonl`` + stats)
4. ``sft``      a few SFT steps of the embedded student on them (merged checkpoint ``sft/final``)
5. ``student``  the student, k trials per harness, through the proxy: on its training tasks
                (``student/``) and on the held-out evaluation tasks (``before/``)
6. ``trees``    student captures → prefix trees → tree-weighted training samples
7. ``train``    GRPO advantages and real RL update(s) (online loop) on the training tasks; weights
                pushed to the backend (embedded: in process; vLLM/SGLang: through the engine's API)
8. ``eval``     score, Pass@k, Pass^k of the student on held-out tasks (never trained on) before and
                after the update, with before → after deltas
9. ``report``   self-contained HTML reports + ``summary.json``

Rollouts resume at trial granularity (the runner skips trials already recorded).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape as html_escape
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from coworkenv.errors import CoworkError
from coworkenv.job.config import JobConfig
from coworkenv.job.progress import StageProgress
from coworkenv.jsonl import jsonl_lines
from coworkenv.machine import machine_info
from coworkenv.rollout.record import RolloutRecord, read_records
from coworkenv.spec import TaskSpec

# A safe run that does nothing scores 20: reward = safety × (0.8 × completion + 0.2 × robustness) and
# robustness is 1 when no fault was injected. Said wherever a score is shown.
SCORE_FLOOR_NOTE = "20 = a safe run that completed nothing"
# policy version of the scripted student trials (student.scripted_trials): training signal for CI,
# never counted as the model's score
SCRIPTED_STUDENT = "scripted-student"


def _model_trials(records: Sequence[RolloutRecord]) -> list[RolloutRecord]:
    return [r for r in records if r.policy_version != SCRIPTED_STUDENT]


STAGES = ("synth", "teacher", "curate", "sft", "student", "trees", "train", "eval", "report")


@dataclass
class JobState:
    cfg: JobConfig
    console: Console
    timings: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    backend: Any = None

    @property
    def out(self) -> Path:
        return self.cfg.out

    def done(self, stage: str) -> bool:
        return (self.out / stage / ".done").exists()

    def mark(self, stage: str, info: dict[str, Any]) -> None:
        d = self.out / stage
        d.mkdir(parents=True, exist_ok=True)
        (d / ".done").write_text(json.dumps(info, indent=1, default=str) + "\n", encoding="utf-8")

    def info(self, stage: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.out / stage / ".done").read_text(encoding="utf-8"))
        return data


# ---------------------------------------------------------------- stages


def _bar(st: JobState, label: str, unit: str = "step") -> StageProgress:
    """The job's progress for one stage: a bar on a terminal, a line per step otherwise."""
    return StageProgress(st.console, label, unit=unit)


def stage_synth(st: JobState) -> dict[str, Any]:

    from coworkenv.synth.cli import GeneratorKind, make_generator
    from coworkenv.synth.pipeline import synthesize
    from coworkenv.synth.plan import Plan, load_plan

    c = st.cfg.synth
    if c.plan is not None:
        plan = load_plan(c.plan)
    elif c.generator == "procedural":
        from coworkenv.synth.procedural import plan_slots

        templates = None if c.templates == "all" else c.templates
        which = "" if templates is None else ":" + ",".join(templates)
        slots = tuple(plan_slots(c.tasks, c.seed, templates))
        plan = Plan(slots, source=f"procedural:{c.tasks}:seed{c.seed}{which}")
    else:
        raise CoworkError(f"synth.generator = {c.generator!r} needs synth.plan (a coverage plan YAML)")
    gen = make_generator(
        GeneratorKind(c.generator),
        seed=c.seed,
        out_dir=st.out / "synth",
        llm_base_url=None,
        llm_model=None,
        cache_dir=None,
        discriminator=True,
        faults=[],
    )
    with _bar(st, "synth", unit="slot") as bar:
        bar.start(len(plan.slots))
        run = synthesize(
            plan,
            gen,
            attempts=c.attempts,
            out=st.out / "synth",
            on_slot=lambda _r: bar.advance(),
            meta={"seed": c.seed},
        )
    s = run.stats
    rejected = {k: v for k, v in s.rejected_by_stage.items() if v}
    st.console.print(
        f"synth: {s.slots} slots → {s.accepted} accepted, {s.repaired} repaired, {s.discarded} discarded"
        f" (rejections by stage: {rejected or 'none'}) in {s.seconds:.1f}s"
    )
    if not run.specs:
        raise CoworkError("synthesis produced no valid task; see synth/run.json")
    return {"accepted": s.accepted, "repaired": s.repaired, "discarded": s.discarded, "rejected": rejected}


def load_tasks(st: JobState) -> list[TaskSpec]:
    from coworkenv.tasks.load import load_spec

    return [load_spec(p) for p in sorted((st.out / "synth" / "tasks").glob("*.json"))]


def _held_out(st: JobState, tasks: Sequence[TaskSpec]) -> list[TaskSpec]:
    """The student's tasks in pick order: the last ``student.tasks + student.eval_tasks`` of the
    suite, one per template where possible, with turns capped at ``student.max_turns``."""
    want = st.cfg.student.tasks + st.cfg.student.eval_tasks
    picked: list[TaskSpec] = []
    seen: set[str] = set()
    for t in reversed(tasks):
        fam = t.id.rsplit("-", 1)[-1]
        if fam not in seen:
            picked.append(t)
            seen.add(fam)
        if len(picked) == want:
            break
    for t in reversed(tasks):  # fewer templates than tasks asked for: fill with the rest
        if len(picked) >= want:
            break
        if t not in picked:
            picked.append(t)
    cap = st.cfg.student.max_turns
    return [
        t.model_copy(
            update={"limits": t.limits.model_copy(update={"max_turns": min(cap, t.limits.max_turns)})}
        )
        for t in picked
    ]


def split_student(st: JobState, tasks: Sequence[TaskSpec]) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """``(train, eval)``: the tasks the student's update trains on, and the held-out tasks that
    evaluate it before and after. Disjoint; neither is ever shown to the teacher (SFT data)."""
    picked = _held_out(st, tasks)
    n = st.cfg.student.tasks
    return sorted(picked[:n], key=_task_id), sorted(picked[n:], key=_task_id)


def _task_id(t: TaskSpec) -> str:
    return t.id


def student_tasks(st: JobState, tasks: Sequence[TaskSpec]) -> list[TaskSpec]:
    """Every task the student runs (train and eval), sorted by id."""
    train, evals = split_student(st, tasks)
    return sorted([*train, *evals], key=_task_id)


def teacher_tasks(st: JobState, tasks: Sequence[TaskSpec]) -> list[TaskSpec]:
    held_out = {t.id for t in student_tasks(st, tasks)}
    return [t for t in tasks if t.id not in held_out]


def _rollouts(
    st: JobState, name: str, tasks: Sequence[TaskSpec], harnesses: Sequence[str], *, trials: int, backend: Any
) -> list[RolloutRecord]:
    from coworkenv.rollout.runner import run_rollouts

    summary = run_rollouts(tasks, list(harnesses), trials, backend, st.out / name, st.cfg.student.concurrency)
    st.console.print(f"{name}: {summary.line()}")
    records, problems = read_records(st.out / name / "rollouts.jsonl")
    for p in problems:
        st.console.print(f"[yellow]warning:[/] {p}")
    return records


def _embedded(st: JobState) -> bool:
    b = st.cfg.student.backend
    return b == "embedded" or b.startswith("embedded:") or b.startswith("embedded?")


def _student_backend(st: JobState) -> Any:
    """The student's backend; an embedded one starts from the SFT checkpoint when the job made one."""
    if st.backend is None:
        from coworkenv.proxy.backends import make_backend

        c = st.cfg.student
        spec = c.backend
        if _embedded(st):
            ckpt = st.out / "sft" / "final"
            version = ""
            name, _, query = spec.partition("?")
            if name == "embedded" and (ckpt / "config.json").exists():
                spec = f"embedded:{ckpt}" + (f"?{query}" if query else "")
                version = f"&version=sft-{st.cfg.sft.steps}"
            sep = "&" if "?" in spec else "?"
            spec = f"{spec}{sep}{_embedded_options(st)}{version}"
        elif spec.startswith(("vllm:", "sglang:", "openai:")):
            # the student section's sampling applies to a remote engine too, unless the spec says
            from coworkenv.proxy.backends import parse_spec

            given = parse_spec(spec)[2]
            extra = {"temperature": c.temperature, "max_tokens": c.max_new_tokens}
            extra = {k: v for k, v in extra.items() if k not in given}
            if extra:
                sep = "&" if "?" in spec else "?"
                spec += sep + "&".join(f"{k}={v}" for k, v in extra.items())
        st.backend = make_backend(spec)
    return st.backend


def stage_sft(st: JobState) -> dict[str, Any]:
    import shutil

    import torch

    from coworkenv.models import load_causal_lm
    from coworkenv.rl.config import SFTConfig
    from coworkenv.rl.sft import SFTTrainer, build_examples, read_sft_jsonl

    c = st.cfg.sft
    if c.steps == 0 or not _embedded(st):
        why = (
            "sft.steps = 0" if c.steps == 0 else f"student backend {st.cfg.student.backend!r} is not embedded"
        )
        st.console.print(f"sft: skipped ({why})")
        return {"steps": 0, "skipped": why}
    shutil.rmtree(st.out / "sft", ignore_errors=True)
    rows = len(read_sft_jsonl(st.out / "curate" / "sft.jsonl"))
    cfg = SFTConfig.model_validate(
        {
            "data": str(st.out / "curate" / "sft.jsonl"),
            "model": {"gradient_checkpointing": bool(c.checkpointing), **({} if c.lora else {"lora": None})},
            **c.checkpoint_settings(),
            "optim": {"lr": c.lr},
            "epochs": max(1, -(-c.steps * c.batch * c.grad_accum // max(1, rows))),
            "batch_size": c.batch,
            "grad_accum": c.grad_accum,
            "max_len": c.max_len,
            "run": {
                "out_dir": str(st.out / "sft"),
                "max_steps": c.steps,
                "seed": st.cfg.seed,
                "resume": False,
            },
        }
    )
    base = (
        st.cfg.student.backend.split("?", 1)[0].split(":", 1)[1]
        if ":" in st.cfg.student.backend
        else "smollm2"
    )
    model, tok = load_causal_lm(base or "smollm2")
    torch.manual_seed(st.cfg.seed)
    examples = build_examples(read_sft_jsonl(cfg.data), tok, max_len=cfg.max_len)
    cut = sum(1 for e in examples if len(e.ids) >= cfg.max_len)
    if cut:
        st.console.print(
            f"[yellow]warning:[/] {cut} of {len(examples)} SFT examples reach sft.max_len = {cfg.max_len} "
            "tokens and lose their later turns; raise sft.max_len"
        )
    trainer = SFTTrainer(cfg, model=model, tokenizer=tok)
    with _bar(st, "sft") as bar:
        bar.start(c.steps)
        res = trainer.train(examples, progress=lambda done, _total: bar.set(done))
    final = trainer.export()
    st.console.print(
        f"sft: {res.get('steps')} step(s) on {len(examples)} examples in {res.get('precision')}, "
        f"last loss {res.get('loss', 0):.3f}; checkpoint {final}"
    )
    return {
        "steps": res.get("steps"),
        "examples": len(examples),
        "cut_at_max_len": cut,
        "loss": res.get("loss"),
        "precision": res.get("precision"),
        "checkpoint": str(final),
    }


def stage_teacher(st: JobState) -> dict[str, Any]:
    c = st.cfg.teacher
    recs = _rollouts(
        st, "teacher", teacher_tasks(st, load_tasks(st)), [c.harness], trials=c.trials, backend=c.backend
    )
    return _reward_info(recs)


def stage_student(st: JobState) -> dict[str, Any]:
    """The student on its training tasks (``student/``: what the update learns from) and on the
    held-out evaluation tasks (``before/``: the "before" of before → after)."""
    c = st.cfg.student
    suite = load_tasks(st)
    train, evals = split_student(st, suite)
    backend = _student_backend(st)
    if c.scripted_trials:
        # the first trials of each training group: the whole reference solution (turns not capped:
        # the cap bounds model time, and a cut reference could score like the model) in the
        # student's own tokens; the next call resumes the same directory and samples the model
        full = {t.id: t for t in suite}
        scripted = _scripted_student(backend)
        uncapped = [full.get(t.id, t) for t in train]
        _rollouts(st, "student", uncapped, c.harnesses, trials=c.scripted_trials, backend=scripted)
    n = c.eval_trials
    recs, sampling = _draw(st, "student", train, backend, cursor=0)
    before = _rollouts(st, "before", evals, c.harnesses, trials=n, backend=_for_eval(st, backend))
    info = {
        **_reward_info(recs),
        "train_tasks": [t.id for t in train],
        "eval_tasks": [t.id for t in evals],
        "scripted_trials": c.scripted_trials,
        "before": _reward_info(before),
    }
    if sampling is not None:
        info["dynamic_sampling"] = _sampling_brief(sampling)
    if c.eval_base and _embedded(st) and (st.out / "sft" / "final" / "config.json").exists():
        base = _base_backend(st)
        try:
            info["base"] = _reward_info(
                _rollouts(st, "base", evals, c.harnesses, trials=n, backend=_for_eval(st, base))
            )
        finally:
            close = getattr(base, "close", None)
            if close is not None:
                close()
    return info


SAMPLING_FILE = "dynamic_sampling.json"


def _draw(
    st: JobState, name: str, pool: Sequence[TaskSpec], backend: Any, *, cursor: int
) -> tuple[list[RolloutRecord], dict[str, Any] | None]:
    """One update's training groups, in ``name/``: with ``train.draw_tasks`` > 0, dynamic sampling
    (draws of that many tasks from ``pool`` at ``cursor``, wrapping, until ``train.groups`` groups
    have a reward spread or ``len(pool) // draw_tasks`` draws are spent; the report, with the kept
    groups and ``cursor_after``, is written to ``name/dynamic_sampling.json``), else one draw of
    the whole pool (report ``None``: every group trains). Returns every record in ``name/``.

    Deterministic in ``cursor``, so an interrupted stage redraws the same tasks and the runner
    skips the trials that finished."""
    from coworkenv.rl.dynamic import DynamicSampler

    c = st.cfg.student
    per = st.cfg.train.draw_tasks
    if per == 0:
        return _rollouts(st, name, pool, c.harnesses, trials=c.trials, backend=backend), None
    per = min(per, len(pool))
    sampler: DynamicSampler[TaskSpec] = DynamicSampler(
        pool, per_draw=per, want=st.cfg.train.groups, max_draws=max(1, len(pool) // per)
    )
    recs: list[RolloutRecord] = []
    while not sampler.done:
        tasks = sampler.tasks(cursor)
        cursor += len(tasks)
        recs = _rollouts(st, name, tasks, c.harnesses, trials=c.trials, backend=backend)
        ids = {t.id for t in tasks}
        draw = sampler.keep([t.id for t in tasks], [r for r in recs if r.task_id in ids])
        st.console.print(
            f"{name}: draw {draw.index + 1}: {len(draw.kept)} of {len(draw.spreads)} group(s) with a "
            f"reward spread kept ({len(sampler.kept)} of {sampler.want} wanted)"
        )
    report = {**sampler.report(), "cursor_after": cursor}
    path = st.out / name / SAMPLING_FILE
    path.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    return recs, report


def _sampling_brief(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k != "detail"}


def _for_eval(st: JobState, backend: Any) -> Any:
    """The backend the held-out evaluations sample from: ``backend`` decoded at
    ``student.eval_temperature`` (same weights, pushes included)."""
    from coworkenv.proxy.backends.sampling import FixedSampling

    return FixedSampling(backend, st.cfg.student.eval_temperature)


def _base_backend(st: JobState) -> Any:
    """The student's model before SFT, sampled the same way (the base of base → SFT → RL)."""
    from coworkenv.proxy.backends import make_backend

    c = st.cfg.student
    spec = c.backend
    sep = "&" if "?" in spec else "?"
    return make_backend(f"{spec}{sep}{_embedded_options(st)}&version=base")


def _embedded_options(st: JobState) -> str:
    """The student section's sampling and engine options, as an embedded backend spec's query."""
    c = st.cfg.student
    return f"seed={st.cfg.seed}&temperature={c.temperature}&max_tokens={c.max_new_tokens}&matmul={c.matmul}"


def _scripted_student(backend: Any) -> Callable[[TaskSpec], Any]:
    """A per-task factory: the task's reference solution, tokenized by the student's tokenizer."""
    from coworkenv.proxy.backends.scripted import ScriptedBackend

    tokenizer = getattr(backend, "tokenizer", None)

    def make(spec: TaskSpec) -> Any:
        return ScriptedBackend.from_reference(spec, tokenizer=tokenizer, version=SCRIPTED_STUDENT)

    return make


def _reward_info(recs: Sequence[RolloutRecord]) -> dict[str, Any]:
    rewards = [r.rewards.reward for r in recs if r.rewards is not None]
    return {
        "rollouts": len(recs),
        "infra_failures": sum(r.status == "infra_failure" for r in recs),
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
    }


def stage_curate(st: JobState) -> dict[str, Any]:
    from coworkenv.curation.convert import ConvertConfig
    from coworkenv.curation.export import curate, write_jsonl

    keep = st.cfg.sft.system_prompt == "harness"
    rep = curate([st.out / "teacher"], convert_cfg=ConvertConfig(system=None) if keep else None, mode="both")
    write_jsonl(rep.rows, st.out / "curate" / "sft.jsonl")
    stats = rep.stats()
    (st.out / "curate" / "sft.stats.json").write_text(json.dumps(stats, indent=1, default=str) + "\n")
    st.console.print(f"curate: {len(rep.rows)} SFT conversations from {rep.records_read} teacher rollouts")
    return {"rows": len(rep.rows), "records": rep.records_read}


def stage_trees(st: JobState) -> dict[str, Any]:
    from coworkenv.trajectories.report import harness_rows, process_dir

    out = st.out / "trees"
    out.mkdir(parents=True, exist_ok=True)
    rep = process_dir(st.out / "student", out / "samples.jsonl", trees_out=out / "trees.jsonl")
    rows = harness_rows(rep)
    (out / "trees.json").write_text(json.dumps(rows, indent=1, default=str) + "\n", encoding="utf-8")
    st.console.print(f"trees: {rep.samples_written} training samples from {len(rep.rollouts)} rollouts")
    return {"samples": rep.samples_written, "rollouts": len(rep.rollouts), "harness": rows}


def stage_train(st: JobState) -> dict[str, Any]:
    from coworkenv.rl.config import RLConfig, RunConfig
    from coworkenv.rl.rl import RLTrainer

    c = st.cfg.train
    trees = st.out / "trees" / "samples.jsonl"
    drawn = sum(1 for x in jsonl_lines(trees) if x.strip())
    if c.updates == 0 or not drawn:
        st.console.print("train: skipped (no samples)" if not drawn else "train: skipped (updates = 0)")
        return {"updates": 0, "samples": drawn}
    samples, failed = _training_groups(trees, st.out / "student")
    backend = _student_backend(st)
    k = st.cfg.student.trials
    n_groups = max(len({s.group_key for s in samples}), c.groups if c.draw_tasks else 1)
    cfg = RLConfig.model_validate(
        {
            "estimator": c.estimator,
            "group_size": k,
            "batch_size": k * max(1, n_groups),
            "optim": {"lr": c.lr},
            "model": {} if c.lora else {"lora": None},
            "pack_scope": c.pack_scope,
            "run": RunConfig(out_dir=st.out / "train").model_dump(),
        }
    )
    pushed: list[str] = []
    pushes: list[dict[str, Any]] = []
    push, model, tokenizer = _weights_channel(st, backend, c.lora, pushed, pushes)
    trainer = RLTrainer(cfg, model=model, tokenizer=tokenizer, on_weights=push)
    metrics: list[dict[str, Any]] = []
    # The online loop: rollout → trees → advantages → update → push. The first update uses the
    # student stage's rollouts; each later one collects fresh rollouts with the pushed weights, on
    # the training tasks only (the evaluation tasks stay unseen).
    train_tasks, eval_tasks = split_student(st, load_tasks(st))
    first = _read_sampling(st.out / "student")
    sampling = [] if first is None else [_sampling_brief(first)]
    cursor = 0 if first is None else int(first["cursor_after"])
    for it in range(c.updates):
        if it:
            samples, failed, report = _next_groups(st, it, train_tasks, backend, cursor)
            if report is not None:
                cursor = report["cursor_after"]
                sampling.append(_sampling_brief(report))
        if samples:
            m = trainer.step(samples, infra_failed=failed)
        else:  # dynamic sampling found no group with a reward spread: nothing to learn from
            m = {"skipped_no_signal": 1, "no_groups_kept": 1}
        rewards = [s.reward for s in samples]
        m["mean_reward"] = sum(rewards) / len(rewards) if rewards else None
        metrics.append(m)
    no_signal = sum(1 for m in metrics if m.get("skipped_no_signal"))
    st.console.print(
        f"train: {len(pushed)} {c.estimator} update(s) pushed ({pushed or 'policy unchanged'})"
        + (
            f"; {no_signal} step(s) had no learning signal (every group's trials scored alike)"
            if no_signal
            else ""
        )
    )
    info: dict[str, Any] = {
        "updates": c.updates,
        "samples": len(samples),
        "metrics": metrics,
        "pushed": pushed,
        "pushes": pushes,
        "train_tasks": [t.id for t in train_tasks],
    }
    if sampling:
        info["dynamic_sampling"] = sampling
    if c.eval_after and pushed:
        # the held-out tasks, same k, served by the updated weights (a rerun of this stage redoes
        # update and evaluation)
        import shutil

        shutil.rmtree(st.out / "after", ignore_errors=True)
        recs = _rollouts(
            st,
            "after",
            eval_tasks,
            st.cfg.student.harnesses,
            trials=st.cfg.student.eval_trials,
            backend=_for_eval(st, backend),
        )
        info["after"] = _reward_info(recs)
        info["eval_tasks"] = [t.id for t in eval_tasks]
    return info


def _training_groups(samples_path: Path, draw_dir: Path) -> tuple[list[Any], dict[str, int]]:
    """``(samples, infra_failed)`` of the groups that train from ``draw_dir``'s rollouts: those
    dynamic sampling kept there (every group when it did not sample). Each group knows its
    infra-failed rollouts (rejected, unless an unsafe sibling must still be penalised: see
    :func:`coworkenv.rl.advantages.build_groups`)."""
    from coworkenv.rl.offline import infra_failures
    from coworkenv.trajectories.sample import TrainingSample

    samples = [TrainingSample.model_validate_json(x) for x in jsonl_lines(samples_path) if x.strip()]
    failed = infra_failures(draw_dir)
    report = _read_sampling(draw_dir)
    if report is None:
        return samples, failed
    kept = set(report["kept"])
    return [s for s in samples if s.group_key in kept], {k: v for k, v in failed.items() if k in kept}


def _next_groups(
    st: JobState, it: int, pool: Sequence[TaskSpec], backend: Any, cursor: int
) -> tuple[list[Any], dict[str, int], dict[str, Any] | None]:
    """Update ``it`` (≥ 1) of the online loop: fresh groups with the pushed weights, drawn into
    ``train/iter-<it>`` from ``cursor`` (the training tasks only; the evaluation tasks stay unseen)
    → trees → ``(samples, infra_failed, sampling report)`` of the groups that train."""
    import shutil

    from coworkenv.trajectories.report import process_dir

    d = st.out / "train" / f"iter-{it}"
    shutil.rmtree(d, ignore_errors=True)
    _, report = _draw(st, f"train/iter-{it}", pool, backend, cursor=cursor)
    process_dir(d, d / "samples.jsonl")
    return *_training_groups(d / "samples.jsonl", d), report


def _read_sampling(d: Path) -> dict[str, Any] | None:
    """The dynamic-sampling report of a draw directory (``None``: no sampling there)."""
    path = d / SAMPLING_FILE
    if not path.exists():
        return None
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return report


def _weights_channel(
    st: JobState, backend: Any, lora: bool, pushed: list[str], pushes: list[dict[str, Any]]
) -> tuple[Callable[[Any, int], None], Any, Any]:
    """``(push, model, tokenizer)`` for the trainer: the policy it starts from is the one the backend
    serves, and ``push`` hands each update back to it.

    * embedded: a copy of the backend's own model (LoRA wraps modules in place; the backend keeps
      plain weights), pushed with ``set_weights``;
    * a remote engine (vLLM, SGLang): the model the backend spec names, loaded from its local
      checkpoint, pushed through the engine's API (a hot-loaded LoRA adapter with ``train.lora``,
      else full weights reloaded in place; :mod:`coworkenv.proxy.backends.engine_sync`).
    """
    from coworkenv.proxy.backends.upstream import UpstreamBackend
    from coworkenv.rl.common import merged_state_dict

    if isinstance(backend, UpstreamBackend):
        from coworkenv.models import load_causal_lm
        from coworkenv.proxy.backends.engine_sync import EngineSync

        if not backend.model:
            raise CoworkError(
                f"student.backend = {st.cfg.student.backend!r}: name the model the engine serves "
                "(?model=...) so the trainer can load the same weights"
            )
        model, tokenizer = load_causal_lm(backend.model)
        sync = EngineSync(backend, st.out / "train" / "weights", mode="lora" if lora else "full")

        def push_engine(m: Any, version: int) -> None:
            p = sync.push(m, f"rl-{version}", tokenizer=tokenizer)
            pushed.append(p.version)
            pushes.append(
                {
                    "version": p.version,
                    "mode": p.mode,
                    "save_s": round(p.save_s, 3),
                    "load_s": round(p.load_s, 3),
                }
            )

        return push_engine, model, tokenizer

    def push_local(m: Any, version: int) -> None:
        if hasattr(backend, "set_weights"):
            backend.set_weights(merged_state_dict(m), f"rl-{version}")
            pushed.append(f"rl-{version}")

    base = getattr(backend, "model", None)
    return push_local, None if base is None else copy.deepcopy(base), getattr(backend, "tokenizer", None)


def stage_eval(st: JobState) -> dict[str, Any]:
    """Score, Pass@k, Pass^k of the student on the held-out tasks before and after the update, and
    the comparison (which tasks trained, which evaluated, before → after with deltas)."""
    from coworkenv.eval.metrics import summarize
    from coworkenv.job.compare import compare, comparison_line, stage_deltas, stage_deltas_lines

    k = st.cfg.student.eval_trials
    thr = st.cfg.report.pass_threshold
    # held-out tasks only, and the model's own trials (scripted trials run on training tasks only)
    before_recs, _ = read_records(st.out / "before" / "rollouts.jsonl")
    before = summarize(_model_trials(before_recs), k=k, threshold=thr)
    info: dict[str, Any] = {"before": before.model_dump()}
    base_recs, _ = read_records(st.out / "base" / "rollouts.jsonl")
    base = summarize(base_recs, k=k, threshold=thr) if base_recs else None
    if base is not None:
        info["base"] = base.model_dump()
    teacher, _ = read_records(st.out / "teacher" / "rollouts.jsonl")
    info["teacher"] = summarize(teacher, k=1, threshold=thr).model_dump()
    after_recs, _ = read_records(st.out / "after" / "rollouts.jsonl")
    after = summarize(after_recs, k=k, threshold=thr) if after_recs else None
    if after is not None:
        info["after"] = after.model_dump()
    train, evals = split_student(st, load_tasks(st))
    info["comparison"] = compare(
        before, after, train_tasks=[t.id for t in train], eval_tasks=[t.id for t in evals]
    )
    for name, summary in (("base", base), ("before", before), ("after", after)):
        if summary is not None:
            o = summary.overall
            when = "base model, before SFT" if name == "base" else f"{name} the update"
            when += f", held-out tasks, temperature {st.cfg.student.eval_temperature:g}"
            st.console.print(
                f"eval ({when}): completion {_num(o.completion, 3)}, "
                f"score {_num(o.score, 1)} (0-100; {SCORE_FLOOR_NOTE}), "
                f"Pass@{k} {_num(o.pass_at_k, 2)}, Pass^{k} {_num(o.pass_hat_k, 2)}",
                highlight=False,
            )
    st.console.print(comparison_line(info["comparison"]))
    info["stages"] = stage_deltas({"base": base, "sft": before, "after": after})
    for line in stage_deltas_lines(info["stages"]):
        st.console.print(line, highlight=False)
    return info


def _num(x: Any, digits: int) -> str:
    """A score for a person: ``21.0`` not ``21.000000000000004``; ``-`` when absent."""
    return "-" if x is None else f"{float(x):.{digits}f}"


def stage_report(st: JobState) -> dict[str, Any]:
    from coworkenv.eval.cli import read_metrics
    from coworkenv.eval.report import render_report
    from coworkenv.eval.trees import read_trees
    from coworkenv.job.compare import comparison_html, stage_deltas_html

    k = st.cfg.student.trials
    recs, problems = read_records(st.out / "student" / "rollouts.jsonl")
    before, p1 = read_records(st.out / "before" / "rollouts.jsonl")
    teacher, p2 = read_records(st.out / "teacher" / "rollouts.jsonl")
    after, p3 = read_records(st.out / "after" / "rollouts.jsonl")
    # the updated policy's trials get their own group (harness@version), never pooled with the base's
    after = [r.model_copy(update={"harness": f"{r.harness}@{r.policy_version}"}) for r in after]
    base, p5 = read_records(st.out / "base" / "rollouts.jsonl")
    base = [r.model_copy(update={"harness": f"{r.harness}@base"}) for r in base]
    before_after = (_model_trials(before), after) if after else None
    metrics_path = st.out / "train" / "metrics.jsonl"
    metrics = read_metrics(metrics_path) if metrics_path.exists() else []
    trees_path = st.out / "trees" / "trees.jsonl"
    trees, p4 = read_trees(trees_path) if trees_path.exists() else ({}, [])
    cmp = st.summary.get("eval", {}).get("comparison")
    preface = comparison_html(cmp) if cmp else ""
    stages = st.summary.get("eval", {}).get("stages")
    if stages:
        preface = stage_deltas_html(stages) + preface
    if base:
        line = html_escape(_describe("eval", st.summary.get("eval", {})))
        preface = f"<p><b>{line}</b></p>\n{preface}"
    html = render_report(
        [*recs, *base, *before, *after],
        trees=trees,
        k=k,
        threshold=st.cfg.report.pass_threshold,
        metrics=metrics,
        problems=[*problems, *p1, *p3, *p4, *p5],
        title="coworkenv main job: the student before and after the update",
        before_after=before_after,
        preface=preface,
    )
    path = st.out / st.cfg.report.html
    path.write_text(html, encoding="utf-8")
    teacher_html = render_report(
        teacher,
        k=1,
        threshold=st.cfg.report.pass_threshold,
        problems=p2,
        title="coworkenv main job: the teacher",
    )
    (st.out / f"teacher-{st.cfg.report.html}").write_text(teacher_html, encoding="utf-8")
    return {"html": str(path)}


RUNNERS: dict[str, Callable[[JobState], dict[str, Any]]] = {
    "synth": stage_synth,
    "teacher": stage_teacher,
    "sft": stage_sft,
    "student": stage_student,
    "curate": stage_curate,
    "trees": stage_trees,
    "train": stage_train,
    "eval": stage_eval,
    "report": stage_report,
}


def run_job(cfg: JobConfig, console: Console | None = None, *, fresh: bool = False) -> dict[str, Any]:
    """Run (or resume) every stage; returns the summary also written to ``summary.json``."""
    st = JobState(cfg, console or Console())
    if fresh and cfg.out.exists():
        import shutil

        shutil.rmtree(cfg.out)
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "config.json").write_text(cfg.model_dump_json(indent=1) + "\n", encoding="utf-8")
    t_job = time.perf_counter()
    for stage in STAGES:
        if st.done(stage) and stage not in ("report",):
            st.console.print(f"[dim]{stage}: already done (resume)[/]")
            st.summary[stage] = st.info(stage)
            continue
        t0 = time.perf_counter()
        info = RUNNERS[stage](st)
        info["seconds"] = round(time.perf_counter() - t0, 2)
        st.mark(stage, info)
        st.summary[stage] = info
    st.summary["wall_s"] = round(time.perf_counter() - t_job, 1)
    st.summary["machine"] = machine_info()  # which CPU family the figures hold on
    (cfg.out / "summary.json").write_text(json.dumps(st.summary, indent=1, default=str) + "\n")
    st.console.print(summary_table(st.summary))
    return st.summary


def summary_table(summary: dict[str, Any]) -> Table:
    t = Table(title="coworkenv main job")
    t.add_column("stage")
    t.add_column("result")
    t.add_column("s", justify="right")
    for stage in STAGES:
        info = summary.get(stage, {})
        t.add_row(stage, _describe(stage, info), _secs(info.get("seconds")))
    t.add_row("total", "", _secs(summary.get("wall_s")))
    return t


def _secs(x: Any) -> str:
    return "" if not isinstance(x, int | float) else f"{x:.1f}"


def _describe(stage: str, info: dict[str, Any]) -> str:
    if stage == "synth":
        return (
            f"{info.get('accepted', 0)} accepted, {info.get('repaired', 0)} repaired, "
            f"{info.get('discarded', 0)} discarded"
        )
    if stage in ("teacher", "student"):
        m = info.get("mean_reward")
        return (
            f"{info.get('rollouts', 0)} rollouts, mean reward {'-' if m is None else f'{m:.3f}'}, "
            f"{info.get('infra_failures', 0)} infra failures"
        )
    if stage == "curate":
        return f"{info.get('rows', 0)} SFT conversations"
    if stage == "sft":
        if info.get("skipped"):
            return f"skipped ({info['skipped']})"
        loss = info.get("loss")
        return f"{info.get('steps', 0)} step(s), last loss {'-' if loss is None else f'{loss:.3f}'}"
    if stage == "trees":
        return f"{info.get('samples', 0)} samples from {info.get('rollouts', 0)} rollouts"
    if stage == "train":
        steps = info.get("metrics", [])
        quiet = sum(1 for m in steps if m.get("skipped_no_signal"))
        text = f"{len(info.get('pushed', []))} update(s) pushed {info.get('pushed', [])}"
        return text + (f"; {quiet} step(s) without signal (equal rewards)" if quiet else "")
    if stage == "eval":
        cmp = info.get("comparison", {})
        o = cmp.get("overall", {}).get("score", {})

        def part(name: str, key: str, digits: int) -> str:
            return _num(info.get(name, {}).get("overall", {}).get(key), digits)

        base = f"base {part('base', 'completion', 3)} → SFT " if info.get("base") else ""
        return (
            f"held-out completion {base}{part('before', 'completion', 3)} → "
            f"{part('after', 'completion', 3)}, "
            f"score {part('before', 'score', 1)} → {part('after', 'score', 1)} "
            f"(Δ {_num(o.get('delta'), 1)}) on {len(cmp.get('eval_tasks', []))} task(s); {SCORE_FLOOR_NOTE}"
        )
    if stage == "report":
        return str(info.get("html", ""))
    return ""
