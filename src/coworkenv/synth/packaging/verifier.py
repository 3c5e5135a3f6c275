"""The Harbor verifier: grade the episode from the services' audit endpoints, write the reward JSON.

Contract: :func:`verify` reads the evidence only from the services container (``GET
<services>/events`` and ``/state`` with the verifier token), the final answer from the answer file
and workspace checks from the workspace, grades against the spec shipped in ``tests/`` (uploaded
after the agent finished), and writes ``{reward, completion, safety, robustness}`` (numbers; a
component that could not run counts 0 in ``reward`` only when nothing ran) to ``out`` plus the
full grade beside it (``grade.json``) and the audit events it graded (``events.json``).
Unreachable services raise :class:`VerifierError` and no reward is written (an infrastructure
failure, not a score of 0).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from coworkenv.errors import CoworkError
from coworkenv.synth.packaging.sandbox import TOKEN_HEADER


class VerifierError(CoworkError):
    """The services could not be read: no reward is written."""


def _get(client: httpx.Client, url: str, token: str) -> Any:
    try:
        resp = client.get(url, headers={TOKEN_HEADER: token})
    except httpx.HTTPError as e:
        raise VerifierError(f"cannot reach the services at {url}: {e}") from None
    if resp.status_code != 200:
        raise VerifierError(f"GET {url} answered {resp.status_code}: {resp.text[:200]}")
    return resp.json()


def verify(
    spec_path: Path, services_url: str, token: str, *, answer: Path, workspace: Path | None, out: Path
) -> dict[str, float]:
    from coworkenv.grading.grader import Episode, grade
    from coworkenv.services.trial import AuditEvent
    from coworkenv.tasks.load import load_spec

    spec = load_spec(spec_path)
    base = services_url.rstrip("/")
    with httpx.Client(timeout=30) as client:
        events = [AuditEvent.from_dict(e) for e in _get(client, f"{base}/events", token)]
        state = _get(client, f"{base}/state", token).get("tables")
    final = answer.read_text(encoding="utf-8", errors="replace") if answer.is_file() else ""
    ws = workspace if workspace is not None and workspace.is_dir() else None
    initial = None
    if spec.forbidden_effects:  # the state the services opened with: the task's fixtures
        from coworkenv.services.trial import initial_snapshot, load_task

        initial = initial_snapshot(load_task(spec))
    episode = Episode(
        events=events, final_answer=final, state=state, workspace=ws, transcript=final, initial_state=initial
    )
    g = grade(spec, episode)
    reward = {
        "reward": g.reward if g.reward is not None else 0.0,
        "completion": g.completion if g.completion is not None else 0.0,
        "safety": g.safety,
        "robustness": g.robustness,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(reward) + "\n", encoding="utf-8")
    (out.parent / "grade.json").write_text(g.model_dump_json(indent=2) + "\n", encoding="utf-8")
    events_json = json.dumps([e.to_dict() for e in events], ensure_ascii=False)
    (out.parent / "events.json").write_text(events_json + "\n", encoding="utf-8")
    return reward


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m coworkenv.synth.packaging.verifier", description=__doc__)
    ap.add_argument("--spec", type=Path, required=True)
    ap.add_argument("--services", required=True, help="base URL of the trial, e.g. http://svc:8765/t/default")
    ap.add_argument("--token-file", type=Path, required=True)
    ap.add_argument("--answer", type=Path, default=Path("/app/answer.md"))
    ap.add_argument("--workspace", type=Path, default=Path("/app"))
    ap.add_argument("--out", type=Path, default=Path("/logs/verifier/reward.json"))
    a = ap.parse_args(argv)
    try:
        r = verify(
            a.spec,
            a.services,
            a.token_file.read_text().strip(),
            answer=a.answer,
            workspace=a.workspace,
            out=a.out,
        )
    except (CoworkError, OSError) as e:
        raise SystemExit(f"verifier: {e}") from None
    print(json.dumps(r))


if __name__ == "__main__":
    main()
