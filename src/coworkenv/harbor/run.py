"""``harbor run`` on exported tasks, and its trials read back.

Contract: :func:`run_job` runs one Harbor job (every task directory under ``tasks``, one agent) with
the Docker environment and returns one :class:`TrialOutcome` per trial, read from Harbor's
``<jobs>/<job>/<trial>/result.json``: the verifier's rewards, or the failed step and Harbor's
exception. A trial that failed names its task and the step (``environment_setup`` — building and
starting the containers —, ``agent_setup``, ``agent_execution`` or ``verifier``):
:meth:`TrialOutcome.describe`. Every run adds the compose overlay :data:`OVERLAY` (an init process
in ``main``: shutdown in 0.5 s instead of 10) and sets ``LITELLM_LOCAL_MODEL_COST_MAP`` (no fetch
of litellm's price list). Harbor lives in its own venv (:func:`harbor_bin`); the images come from
:func:`coworkenv.harbor.images.ensure_runtime_image`, which callers run first.

Agents: Harbor's own by name (``oracle``, ``nop``, …) or an import path; coworkenv's
(:mod:`coworkenv.harbor.agents`) are written beside the run and put on Harbor's ``PYTHONPATH``;
``agent_script`` is the host script :data:`~coworkenv.harbor.agents.SHELL_AGENT` runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from coworkenv.harbor import HarborError
from coworkenv.harbor.agents import SCRIPT_ENV, write_agents
from coworkenv.harbor.images import tail

STEPS = ("environment_setup", "agent_setup", "agent_execution", "verifier")
OVERLAY: dict[str, Any] = {"services": {"main": {"init": True}}}


def harbor_venv() -> Path:
    return Path(os.environ.get("COWORKENV_HARBOR_VENV", Path.home() / ".cache/coworkenv/harbor-venv"))


def harbor_bin() -> Path:
    """The ``harbor`` CLI installed by ``scripts/install_harbor.sh``."""
    return harbor_venv() / "bin" / "harbor"


def harbor_missing() -> str | None:
    """Why Harbor cannot run here, or ``None``."""
    from coworkenv.harbor.images import BASE_IMAGE, docker_ready, image_label

    if not harbor_bin().is_file():
        return f"Harbor is not installed at {harbor_bin()} (run scripts/install_harbor.sh)"
    why = docker_ready()
    if why is None and image_label(BASE_IMAGE) is None:
        why = f"the base image {BASE_IMAGE} is missing (run scripts/install_harbor.sh)"
    return why


@dataclass(frozen=True)
class TrialOutcome:
    """One Harbor trial: its task, the rewards the verifier wrote, or where it failed."""

    task: str
    trial_dir: Path
    rewards: dict[str, float] = field(default_factory=dict)
    failed_step: str | None = None
    exception: str = ""
    seconds: float = 0.0

    @property
    def reward(self) -> float | None:
        return self.rewards.get("reward")

    def describe(self) -> str:
        if self.failed_step is None:
            return f"{self.task}: " + ", ".join(f"{k} {v:g}" for k, v in self.rewards.items())
        return f"{self.task}: Harbor step {self.failed_step} failed: {self.exception}"


def _seconds(span: dict[str, Any] | None) -> float:
    from datetime import datetime

    if not span or not span.get("started_at") or not span.get("finished_at"):
        return 0.0
    a = datetime.fromisoformat(span["started_at"].replace("Z", "+00:00"))
    b = datetime.fromisoformat(span["finished_at"].replace("Z", "+00:00"))
    return (b - a).total_seconds()


def read_trial(result_json: Path) -> TrialOutcome:
    """A trial's outcome from its ``result.json``."""
    d = json.loads(result_json.read_text(encoding="utf-8"))
    task = str(d.get("task_name") or result_json.parent.name.split("__")[0])
    rewards = {k: float(v) for k, v in ((d.get("verifier_result") or {}).get("rewards") or {}).items()}
    exc = d.get("exception_info")
    failed: str | None = None
    message = ""
    if exc:
        # the step that failed is the last one that started (Harbor stamps its end even on failure)
        started = [s for s in STEPS if (d.get(s) or {}).get("started_at")]
        failed = started[-1] if started else STEPS[0]
        message = f"{exc.get('exception_type', 'error')}: {tail(str(exc.get('exception_message', '')), 8)}"
        if failed == "verifier":
            out = result_json.parent / "verifier" / "test-stdout.txt"
            if out.is_file():
                message += "\n" + tail(out.read_text(encoding="utf-8", errors="replace"), 8)
    return TrialOutcome(
        task=task,
        trial_dir=result_json.parent,
        rewards=rewards,
        failed_step=failed,
        exception=message,
        seconds=_seconds(d),
    )


def run_job(
    tasks: Path,
    agent: str,
    jobs_dir: Path,
    *,
    job_name: str,
    concurrency: int = 2,
    agent_kwargs: dict[str, str] | None = None,
    agent_env: dict[str, str] | None = None,
    overlay: dict[str, Any] | None = None,
    agent_script: Path | None = None,
    timeout_s: float = 3600,
) -> list[TrialOutcome]:
    """Run ``agent`` on every task under ``tasks`` (a task dir or a dir of them) under Harbor."""
    harbor = harbor_bin()
    if not harbor.is_file():
        raise HarborError(f"Harbor is not installed at {harbor} (run scripts/install_harbor.sh)")
    jobs_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="coworkenv-harbor-") as tmp:
        compose = Path(tmp) / "overlay.yaml"
        merged = json.loads(json.dumps(OVERLAY))
        for name, body in ((overlay or {}).get("services") or {}).items():
            merged["services"].setdefault(name, {}).update(body)
        compose.write_text(yaml.safe_dump(merged), encoding="utf-8")
        cmd = [
            str(harbor), "run", "-p", str(tasks), "-a", agent, "-e", "docker",
            "--extra-docker-compose", str(compose), "-o", str(jobs_dir), "--job-name", job_name,
            "-n", str(concurrency), "-y", "-q",
        ]  # fmt: skip
        for k, v in (agent_kwargs or {}).items():
            cmd += ["--ak", f"{k}={v}"]
        for k, v in (agent_env or {}).items():
            cmd += ["--ae", f"{k}={v}"]
        write_agents(Path(tmp))
        env = {
            **os.environ,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONPATH": tmp,
            "COLUMNS": "200",
        }
        if agent_script is not None:
            env[SCRIPT_ENV] = str(Path(agent_script).resolve())
        try:
            r = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=tmp, check=False
            )
        except subprocess.TimeoutExpired:
            raise HarborError(f"harbor run ({job_name}) timed out after {timeout_s:.0f} s") from None
    job = jobs_dir / job_name
    trials = sorted(job.glob("*/result.json"))
    if r.returncode != 0 or not trials:
        raise HarborError(
            f"harbor run ({job_name}) exited {r.returncode} with {len(trials)} trial result(s):\n"
            + tail(r.stdout + "\n" + r.stderr)
        )
    return [read_trial(p) for p in trials]


__all__ = [
    "OVERLAY",
    "STEPS",
    "TrialOutcome",
    "harbor_bin",
    "harbor_missing",
    "read_trial",
    "run_job",
]
