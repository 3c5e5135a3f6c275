"""The main job's configuration: a TOML file validated into frozen pydantic models.

Contract: :func:`load_config` returns the embedded defaults when no file is given; a file is read
whole and every problem is reported at once, naming the file, the ``section.field`` and what was
expected (unknown keys are errors, so a typo never silently falls back to a default).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from coworkenv.errors import SpecError, SpecIssue


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


JOB_TEMPLATES = ("failing_job_triage", "news_digest", "subscription_advice_mt", "customer_data_export")
"""The main job's default suite: the 4 of the 13 procedural templates that the learning proof's SFT
student learned best (held-out completion 65, 50, 49 and 45 after its full SFT,
``experiments/results/2026-12-03-lora/stages/sft_eval.json``), so that the minutes of SFT a 2-core
CPU allows show learning. ``templates = "all"`` covers all 13 (the full protocol does:
``experiments/smollm2_sft_grpo.py``)."""


class SynthSection(_Section):
    generator: Literal["procedural", "scripted", "llm"] = "procedural"
    """Which generator drafts the suite (``llm`` needs COWORKENV_LLM_* or [synth] endpoint)."""
    plan: Path | None = None
    """A coverage plan (YAML); without one, ``tasks`` slots are planned across every template."""
    tasks: int = Field(default=64, ge=1)
    templates: tuple[str, ...] | Literal["all"] = JOB_TEMPLATES
    """The procedural templates the planned slots cycle over (``"all"``: all 13; ignored when
    ``plan`` is given). Unknown names are errors that list the known ones."""
    seed: int = 0
    attempts: int = Field(default=2, ge=1)

    @field_validator("templates")
    @classmethod
    def _known(cls, v: tuple[str, ...] | Literal["all"]) -> tuple[str, ...] | Literal["all"]:
        if v == "all":
            return v
        from coworkenv.synth.procedural import TEMPLATES

        unknown = sorted(set(v) - set(TEMPLATES))
        if unknown or not v:
            raise ValueError(f"unknown templates {unknown or '(none given)'}; known: {sorted(TEMPLATES)}")
        return v


class TeacherSection(_Section):
    backend: str = "reference"
    """``reference`` replays each task's reference solution as the teacher policy."""
    harness: str = "loop"
    trials: int = Field(default=1, ge=1)


class StudentSection(_Section):
    backend: str = "embedded"
    """``embedded`` (SmolLM2-135M on CPU), ``openai:URL``, ``vllm:URL`` ... (see make_backend)."""
    harnesses: tuple[str, ...] = ("loop",)
    tasks: int = Field(default=8, ge=1)
    """How many synthesized tasks the student trains on (held out from the teacher's SFT data)."""
    eval_tasks: int = Field(default=12, ge=1)
    """How many further tasks evaluate the student before and after the update: held out from the
    teacher and from the update alike (the update never sees them)."""
    trials: int = Field(default=4, ge=1)
    """Trials per training task and harness: the GRPO group size."""
    eval_trials: int = Field(default=1, ge=1)
    """Trials per held-out task and harness (base, before, after), and the k of their Pass@k /
    Pass^k. Greedy decoding (``eval_temperature = 0``) makes every trial of a task the same, so 1;
    raise it with a sampled evaluation."""
    scripted_trials: int = Field(default=0, ge=0)
    """Of the k trials, how many play the task's reference solution in the student's own tokens
    (a scripted student) instead of sampling the model: every group then has mixed outcomes, so a
    CI run is guaranteed a real update, push and after-evaluation. 0 (default) for real runs."""
    max_turns: int = Field(default=5, ge=1)
    max_new_tokens: int = Field(default=96, ge=1)
    temperature: float = Field(default=1.0, gt=0)
    """Sampling temperature of the training rollouts (the GRPO groups need diverse trials)."""
    eval_temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature of the held-out evaluations (base, before, after), whatever the
    harness asks for; 0 is greedy decoding (the k trials of a task then mostly agree)."""
    concurrency: int = Field(default=32, ge=1)
    """Rollouts at once; the embedded engine decodes all of them in one batch."""
    matmul: Literal["fp32", "bf16", "auto"] = "auto"
    """The embedded engine's linear layers: ``auto`` runs them on bf16 weight copies where the CPU
    computes bf16 natively (AVX512-BF16, AMX) and in fp32 elsewhere; the trainer stays fp32 and
    the update's importance weights correct the difference (``is/*`` in its metrics)."""
    eval_base: bool = True
    """Also evaluate the base model (before SFT) on the held-out tasks, so the job shows what the
    whole of training bought: base → SFT → after the RL update. Only when the job ran SFT."""


CHECKPOINT_OVER = 4096
"""Tokens per SFT forward above which ``checkpointing = "auto"`` recomputes activations."""


class SFTSection(_Section):
    steps: int = Field(default=24, ge=0)
    """Optimizer steps of SFT on the curated teacher conversations before the student runs
    (embedded backend only); 0 skips SFT and the student starts from the base model."""
    batch: int = Field(default=1, ge=1)
    """Conversations per optimizer step, packed into prefix tries (a shared prompt forwarded once)."""
    lr: float = Field(default=1e-3, gt=0)
    lora: bool = True
    grad_accum: int = Field(default=1, ge=1)
    checkpointing: bool | Literal["auto"] = "auto"
    """Activation checkpointing (~30% more time per forward it covers). ``auto``: prefix tries are
    capped at ``CHECKPOINT_OVER`` tokens and only a longer forward (one conversation over it) is
    checkpointed; without it a forward keeps ~3 MB of activations per token (a step of ≤ 4,096-token
    forwards peaked at 14.77 GB in ``benchmarks/results/sft-2026-12-01-auto.json``)."""
    system_prompt: Literal["harness", "standard"] = "harness"
    """The system message of the SFT conversations: ``harness`` keeps the one the teacher's harness
    sent (the student served through the same harness then trains on the prompt it is served
    with); ``standard`` replaces it with CoworkEnv's harness-neutral one (for data meant for
    several harnesses)."""
    max_len: int = Field(default=8192, gt=8)
    """Tokens per SFT example, SmolLM2's context: a longer conversation is cut there, losing its
    later turns (the job says how many were cut; the default suite's run 1.4k–2.5k tokens)."""

    def checkpoint_settings(self) -> dict[str, int]:
        """The :class:`~coworkenv.rl.config.SFTConfig` fields ``checkpointing`` implies beyond the
        model's switch: with ``auto``, tries capped at ``CHECKPOINT_OVER`` tokens and only a longer
        forward checkpointed (splitting a trie loses less than recomputing it)."""
        if self.checkpointing != "auto":
            return {}
        return {"checkpoint_over": CHECKPOINT_OVER, "pack_tokens": CHECKPOINT_OVER}


class TrainSection(_Section):
    estimator: str = "grpo"
    updates: int = Field(default=1, ge=0)
    draw_tasks: int = Field(default=4, ge=0)
    """Dynamic sampling (as in DAPO): each update draws this many training tasks at a time (a group
    of ``student.trials`` rollouts per task and harness) until ``groups`` groups have a reward
    spread or the training tasks are spent, and trains on those groups only; a group whose trials
    all scored alike carries no signal and never costs an update. 0: one draw of every training
    task, every group trained on."""
    groups: int = Field(default=2, ge=1)
    """Groups with a reward spread each update wants (with ``draw_tasks`` > 0)."""
    lr: float = Field(default=5e-4, gt=0)
    lora: bool = True
    pack_scope: Literal["rollout", "group"] = "group"
    """'group': a group's shared prompt is forwarded once per update, not once per trial."""
    eval_after: bool = True
    """Run the held-out evaluation tasks again with the updated weights (same k) and report
    before → after."""


class ReportSection(_Section):
    html: str = "report.html"
    pass_threshold: float = Field(default=0.75, ge=0, le=1)


class JobConfig(_Section):
    out: Path = Path("runs/main")
    seed: int = 0
    synth: SynthSection = SynthSection()
    teacher: TeacherSection = TeacherSection()
    sft: SFTSection = SFTSection()
    student: StudentSection = StudentSection()
    train: TrainSection = TrainSection()
    report: ReportSection = ReportSection()

    @model_validator(mode="after")
    def _fits(self) -> JobConfig:
        s = self.student
        if s.scripted_trials >= s.trials:
            raise ValueError(
                f"student.scripted_trials ({s.scripted_trials}) must be below student.trials "
                f"({s.trials}): at least one trial per group samples the model"
            )
        if self.synth.plan is None and s.tasks + s.eval_tasks >= self.synth.tasks:
            raise ValueError(
                f"student.tasks + student.eval_tasks ({s.tasks} + {s.eval_tasks}) must be below "
                f"synth.tasks ({self.synth.tasks}): the student's tasks are held out from the teacher's"
            )
        return self


def load_config(path: Path | None) -> JobConfig:
    if path is None:
        return JobConfig()
    if not path.exists():
        raise SpecError.single(path, "", "config file not found")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError.single(path, "", f"not valid TOML: {exc}") from None
    try:
        cfg = JobConfig.model_validate(data)
    except ValidationError as exc:
        issues = [
            SpecIssue(".".join(str(p) for p in e["loc"]) or "(top level)", e["msg"]) for e in exc.errors()
        ]
        raise SpecError(path, issues) from None
    if cfg.synth.plan is not None and not cfg.synth.plan.is_absolute():
        cfg = cfg.model_copy(
            update={"synth": cfg.synth.model_copy(update={"plan": path.parent / cfg.synth.plan})}
        )
    return cfg
