"""Harbor's layout: ``instruction.md``, ``task.toml``, ``environment/``, ``solution/``, ``tests/``.

Contract (who sees what):

* ``instruction.md`` — the request verbatim, then (after :data:`MARKER`) how to reach the services
  (``$COWORKENV_SERVICES_URL``) and where to put the final answer (``/app/answer.md``).
* ``task.toml`` — Harbor's config (agent/verifier timeouts, resources) and ``[metadata]`` with the
  spec's identity fields (id, name, category, difficulty, language, mock_today, tags, source, max_turns).
* ``environment/`` — ``docker-compose.yaml`` with two containers: ``main`` (the agent's, built from
  ``Dockerfile``: ``FROM ${COWORKENV_IMAGE}``, default ``local/coworkenv:runtime`` — see
  :mod:`coworkenv.harbor.images`; nothing is pulled — plus the initial ``workspace/`` in ``/app``)
  and ``coworkenv-services`` (``services.Dockerfile``: the locked server of
  :mod:`~coworkenv.synth.packaging.sandbox` on ``services/task.json``, the spec without checks,
  reference or hidden answers; ``main`` starts once it answers). The agent's image holds neither
  the spec nor the verifier token.
* ``solution/`` — ``solve.sh`` runs ``replay.py`` (standard library only) on ``reference.json``:
  each reference step POSTed to its route, workspace steps applied in ``/app``, the final message
  written to ``/app/answer.md``.
* ``tests/`` — ``test.sh`` runs :mod:`~coworkenv.synth.packaging.verifier` with ``task.json`` (the
  full spec) and ``token``; it reads the evidence only from the services' audit endpoints and
  writes ``/logs/verifier/reward.json`` = ``{reward, completion, safety, robustness}``. Harbor
  uploads ``tests/`` after the agent finished, so the agent can neither read the checks nor forge
  the evidence (the services refuse ``events``/``state``/``audit``/``reset`` without the token).
  The verifier runs in the agent's container (``[verifier] environment_mode = "shared"``; Harbor's
  separate mode would start fresh services without the episode's audit), so ``test.sh`` first
  kills every process the agent left behind and removes any reward file it wrote; the agent runs
  as the unprivileged user ``agent`` (``[agent] user``), so it cannot rewrite the verifier's
  interpreter or package, nor outlive the sweep.

:func:`coworkenv.importers.harbor.import_task` reassembles the spec from these files.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from coworkenv.spec import ReferenceSolution, TaskSpec, ToolCall

MARKER = "<!-- coworkenv:environment -->"
ANSWER_PATH = "/app/answer.md"
SERVICES_HOST = "coworkenv-services"
SERVICES_PORT = 8765
SERVICES_URL = f"http://{SERVICES_HOST}:{SERVICES_PORT}/t/default"
IMAGE_ARG = "COWORKENV_IMAGE"
VERIFIER_PYTHON = "/opt/coworkenv/venv/bin/python"

SOLVE_SH = """#!/usr/bin/env bash
# Oracle: replay coworkenv's reference solution against the task's services.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python3 "$here/replay.py" "$here/reference.json"
"""

TEST_SH = f"""#!/usr/bin/env bash
# Verifier: grade the episode from the services' audit endpoints and write the reward JSON.
set -euo pipefail
# The verifier shares the agent's container: first end whatever the agent left running — every
# process but PID 1, its oldest child (the container's keep-alive) with that child's descendants,
# and this script's ancestry; an agent's process is started by `exec` (parent 0) or orphaned onto
# PID 1 later — then drop any reward the agent wrote (Harbor reads reward.json, else reward.txt).
ppid() {{ sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2 || true; }}  # "" once gone
pids() {{ ls /proc | grep -E '^[0-9]+$' | sort -n || true; }}
first=""
for pid in $(pids); do
  if [ "$(ppid "$pid")" = 1 ]; then first="$pid"; break; fi
done
for pid in $(pids); do
  p="$pid"
  while [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != 1 ] && [ "$p" != "$first" ] && [ "$p" != $$ ]; do
    p="$(ppid "$p")"
  done
  if [ "$pid" = 1 ] || [ -z "$p" ]; then continue; fi  # PID 1, or gone meanwhile
  if [ "$p" = 0 ] || [ "$p" = 1 ]; then
    # not under the keep-alive or this script: the agent's, unless it is this script's ancestor
    a=$$
    while [ -n "$a" ] && [ "$a" != 0 ] && [ "$a" != "$pid" ]; do a="$(ppid "$a")"; done
    if [ "$a" != "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
done
mkdir -p /logs/verifier
cd /logs/verifier && rm -f reward.txt reward.json grade.json events.json && cd /
{VERIFIER_PYTHON} -m coworkenv.synth.packaging.verifier \\
  --spec /tests/task.json --token-file /tests/token \\
  --services "${{COWORKENV_SERVICES_URL:-{SERVICES_URL}}}" \\
  --answer {ANSWER_PATH} --workspace /app --out /logs/verifier/reward.json
"""

REPLAY_PY = f'''"""Replay coworkenv's reference solution (standard library only).

usage: replay.py reference.json   (env: COWORKENV_SERVICES_URL, COWORKENV_WORKSPACE=/app)
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def call(base, route, args):
    data = json.dumps(args).encode()
    for attempt in range(60):  # the services may still be starting: retry for about 30 s
        req = urllib.request.Request(base + route, data=data, method="POST",
                                     headers={{"content-type": "application/json"}})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status
        except urllib.error.HTTPError as e:
            if e.code not in (429, 500, 502, 503) or attempt == 59:
                return e.code
        except urllib.error.URLError:
            if attempt == 59:
                raise
        time.sleep(0.5)
    return 0


def main():
    ref = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    base = os.environ.get("COWORKENV_SERVICES_URL", "{SERVICES_URL}").rstrip("/")
    ws = Path(os.environ.get("COWORKENV_WORKSPACE", "/app")).resolve()
    for step in ref["steps"]:
        if "tool" not in step:
            continue  # a user turn: the oracle needs no reply
        if step["tool"] == "workspace.write_file":
            path = (ws / step["args"]["path"]).resolve()
            if not path.is_relative_to(ws):
                raise SystemExit(f"path escapes the workspace: {{step['args']['path']}}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(step["args"].get("content", "")), encoding="utf-8")
        elif step["tool"] == "workspace.run":
            subprocess.run(step["args"]["command"], shell=True, cwd=ws, check=False, timeout=60)
        else:
            call(base, step["route"], step["args"])
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "answer.md").write_text(ref.get("final_message", ""), encoding="utf-8")


if __name__ == "__main__":
    main()
'''


def verifier_token(spec: TaskSpec) -> str:
    """Deterministic per task, unguessable without the spec (which the agent never sees)."""
    return hashlib.sha256(b"coworkenv-harbor-verifier\0" + spec.model_dump_json().encode()).hexdigest()[:40]


def serving_spec(spec: TaskSpec) -> TaskSpec:
    """What the services container needs: records, tools, workspace — no checks or hidden answers."""
    return spec.model_copy(
        update={
            "completion_checks": (),
            "forbidden": (),
            "expected_actions": (),
            "reference": ReferenceSolution(),
            "judge_rubric": "",
            "answer_ids": (),
            "distractor_ids": (),
            "safety_note": "",
        }
    )


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)  # JSON string escapes are valid TOML basic strings


def _toml(sections: dict[str, dict[str, Any]], top: dict[str, Any]) -> str:
    lines = [f"{k} = {_toml_value(v)}" for k, v in top.items()]
    for name, body in sections.items():
        lines += ["", f"[{name}]", *(f"{k} = {_toml_value(v)}" for k, v in body.items())]
    return "\n".join(lines) + "\n"


def task_toml(spec: TaskSpec) -> str:
    meta = {
        "task_id": spec.id,
        "name": spec.name,
        "category": spec.category,
        "difficulty": spec.difficulty,
        "language": spec.language,
        "mock_today": spec.mock_today.isoformat(),
        "tags": list(spec.tags),
        "source": spec.source,
        "max_turns": spec.limits.max_turns,
        "services": sorted(spec.services),
        "multi_turn": spec.user_sim is not None,
        "author_name": "coworkenv",
    }
    return _toml(
        {
            "metadata": meta,
            # shared: the verifier runs in the agent's container after it (test.sh ends the agent's
            # leftovers first); Harbor's separate mode would start a fresh copy without the services
            "verifier": {"timeout_sec": 120.0, "environment_mode": "shared"},
            # the agent runs unprivileged: it cannot touch the verifier's files or processes
            "agent": {"timeout_sec": float(spec.limits.timeout_s), "user": "agent"},
            "environment": {"build_timeout_sec": 600.0, "cpus": 1, "memory_mb": 2048, "storage_mb": 4096},
        },
        {"version": "1.0"},
    )


def instruction_md(spec: TaskSpec) -> str:
    from coworkenv.services.registry import TOOLS

    rows = [
        f"| `{t}` | `POST $COWORKENV_SERVICES_URL{TOOLS[t].route}` | {TOOLS[t].description} |"
        for t in spec.tools
        if t in TOOLS
    ]
    env = [
        MARKER,
        "## How to work",
        "",
        "The services for this task answer at `$COWORKENV_SERVICES_URL` (HTTP, JSON bodies). "
        "`GET $COWORKENV_SERVICES_URL/tools` lists the tools with their argument schemas; an MCP "
        "endpoint is at `$COWORKENV_SERVICES_URL/mcp`.",
        "",
        "| tool | route | description |",
        "|---|---|---|",
        *rows,
        "",
        f"Work in `/app`. When you are done, write your final answer to `{ANSWER_PATH}`.",
    ]
    return spec.request + "\n\n" + "\n".join(env) + "\n"


def reference_json(spec: TaskSpec) -> dict[str, Any]:
    from coworkenv.services.registry import TOOLS

    steps: list[dict[str, Any]] = []
    for s in spec.reference.steps:
        if isinstance(s, ToolCall):
            step: dict[str, Any] = {"tool": s.tool, "args": s.args}
            if s.tool in TOOLS:
                step["route"] = TOOLS[s.tool].route
            steps.append(step)
        else:
            steps.append({"user": s.text})
    return {"steps": steps, "final_message": spec.reference.final_message, "text": spec.reference.text}


def compose_yaml(token: str) -> str:
    import yaml

    data = {
        "services": {
            "main": {
                "build": {"context": ".", "dockerfile": "Dockerfile"},
                "environment": {"COWORKENV_SERVICES_URL": SERVICES_URL},
                "depends_on": {SERVICES_HOST: {"condition": "service_healthy"}},
            },
            SERVICES_HOST: {
                "build": {"context": ".", "dockerfile": "services.Dockerfile"},
                "environment": {"COWORKENV_VERIFIER_TOKEN": token},
                "healthcheck": {
                    "test": [
                        "CMD",
                        "python",
                        "-c",
                        f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{SERVICES_PORT}"
                        "/t/default/tools', timeout=2)",
                    ],
                    "interval": "1s",
                    "timeout": "3s",
                    "retries": 60,
                    "start_period": "1s",
                },
                "command": [
                    "python",
                    "-m",
                    "coworkenv.synth.packaging.sandbox",
                    "/srv/task.json",
                    "--host",
                    "0.0.0.0",
                    "--port",
                    str(SERVICES_PORT),
                ],
            },
        }
    }
    return yaml.safe_dump(data, sort_keys=False)


def _dockerfile(extra: list[str]) -> str:
    from coworkenv.harbor.images import RUNTIME_IMAGE

    return "\n".join([f"ARG {IMAGE_ARG}={RUNTIME_IMAGE}", f"FROM ${{{IMAGE_ARG}}}", *extra]) + "\n"


def _write(path: Path, text: str, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(0o755)


def export_task(spec: TaskSpec, out: Path) -> Path:
    from coworkenv.synth.packaging.coworkenv import write_files

    d = Path(out) / spec.id
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    token = verifier_token(spec)
    _write(d / "instruction.md", instruction_md(spec))
    _write(d / "task.toml", task_toml(spec))
    env = d / "environment"
    _write(
        env / "Dockerfile",
        _dockerfile(["WORKDIR /app", "COPY workspace/ /app/", "RUN chown -R agent:agent /app"]),
    )
    _write(env / "services.Dockerfile", _dockerfile(["COPY services/task.json /srv/task.json"]))
    _write(env / "docker-compose.yaml", compose_yaml(token))
    _write(env / "services" / "task.json", serving_spec(spec).model_dump_json(indent=2) + "\n")
    (env / "workspace").mkdir()
    write_files(env / "workspace", dict(spec.workspace))
    _write(d / "solution" / "solve.sh", SOLVE_SH, executable=True)
    _write(d / "solution" / "replay.py", REPLAY_PY)
    _write(
        d / "solution" / "reference.json",
        json.dumps(reference_json(spec), indent=2, ensure_ascii=False) + "\n",
    )
    _write(d / "tests" / "test.sh", TEST_SH, executable=True)
    _write(d / "tests" / "task.json", spec.model_dump_json(indent=2) + "\n")
    _write(d / "tests" / "token", token + "\n")
    return d
