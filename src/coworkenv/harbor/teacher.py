"""The teacher path: a real harness CLI inside the Harbor task image, its model calls through our proxy.

Contract of :func:`harbor_rollouts` (``coworkenv rollout --sandbox harbor``): for each task it
exports the Harbor package, builds the harness image (:func:`ensure_harness_image`: the runtime
image plus Node.js and the harness's pinned npm installation from ``scripts/install_harnesses.sh``,
at ``/opt/harness``), and runs the task under Harbor with
:data:`~coworkenv.harbor.agents.SHELL_AGENT` driving the unmodified CLI headless in ``main``: its
tools are the task's services over MCP (``$COWORKENV_SERVICES_URL/mcp`` in the services container),
its model endpoint this process's capturing proxy. The proxy listens on the Docker bridge's gateway
address (:func:`bridge_gateway`), which a container reaches through its own network's gateway —
not on ``network_mode: host``, which would also open the host's loopback (the operator routes of
any ``coworkenv serve`` there) to the agent; the agent's URL carries only its rollout's secret
prefix. Harbor's verifier grades the episode from the services' audit (the same grader as every
rollout) and the record (:class:`~coworkenv.rollout.record.RolloutRecord`, written to
``<out>/rollouts.jsonl``) carries those rewards, the grade, the audit events and the captured calls'
count; the calls are in ``<out>/calls/<rollout>.calls.jsonl`` like any run's. A failed Harbor step
or a harness that never reached the proxy is an ``infra_failure`` with the step or the CLI's
output tail, never a score.

Harnesses: ``claude-code`` and ``codex`` (their command lines mirror
:mod:`coworkenv.rollout.harnesses.claude_code` / ``codex``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coworkenv.harbor import HarborError
from coworkenv.harbor.images import HASH_LABEL, ensure_runtime_image, image_label, tail
from coworkenv.rollout.record import FailureLabel, RewardParts, RolloutRecord, ToolCallRecord
from coworkenv.spec import TaskSpec

HARNESSES = ("claude-code", "codex")
HARNESS_HOME = "/opt/harness"


def bridge_gateway(docker: str = "docker") -> str:
    """The host's address on Docker's default bridge (``docker0``), reachable from containers."""
    r = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True, check=False
    )
    for word in r.stdout.split():
        if "/" in word and word.count(".") == 3:
            return word.split("/")[0]
    raise HarborError("the teacher path: docker0 has no IPv4 address (is dockerd running?)")


def _node() -> Path:
    node = shutil.which("node")
    if node is None:
        raise HarborError("the harness image: node is not installed on this host")
    return Path(os.path.realpath(node))


def ensure_harness_image(name: str, docker: str = "docker") -> str:
    """``local/coworkenv-harness:<name>-<version>``: the runtime image + Node.js + the harness."""
    from coworkenv.rollout.harnesses import get_harness
    from coworkenv.rollout.harnesses.npm import NpmCliHarness

    h = get_harness(name)
    if not isinstance(h, NpmCliHarness):
        raise HarborError(f"the harness image: {name} is not an npm CLI harness")
    h.check_installed()
    runtime = ensure_runtime_image()
    tag = f"local/coworkenv-harness:{h.name}-{h.version}"
    digest = f"{image_label(runtime)}-{h.name}-{h.version}"
    if image_label(tag) == digest:
        return tag
    ctx = Path.home() / ".cache" / "coworkenv" / "harbor-context" / h.name
    if ctx.exists():
        shutil.rmtree(ctx)
    ctx.mkdir(parents=True)
    try:
        shutil.copytree(h.install_dir(), ctx / "harness", symlinks=True, copy_function=os.link)
    except OSError:  # another filesystem: a plain copy
        shutil.rmtree(ctx / "harness", ignore_errors=True)
        shutil.copytree(h.install_dir(), ctx / "harness", symlinks=True)
    shutil.copyfile(_node(), ctx / "node")
    (ctx / "node").chmod(0o755)
    (ctx / "Dockerfile").write_text(
        "\n".join(
            [
                f"FROM {runtime}",
                "COPY node /usr/local/bin/node",
                f"COPY harness {HARNESS_HOME}",
                f"ENV PATH={HARNESS_HOME}/node_modules/.bin:$PATH",
                f'LABEL {HASH_LABEL}="{digest}"',
                "",
            ]
        ),
        encoding="utf-8",
    )
    try:
        r = subprocess.run(
            [docker, "build", "-q", "-t", tag, str(ctx)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    if r.returncode != 0:
        raise HarborError(f"building the harness image {tag} failed:\n{tail(r.stderr or r.stdout)}")
    return tag


def _prompt(spec: TaskSpec) -> str:
    from coworkenv.rollout.harnesses.npm import MCP_SERVER_NAME

    return (
        f"{spec.request}\n\n(Today is {spec.mock_today.isoformat()}. Use the `{MCP_SERVER_NAME}` MCP "
        "tools for the company's systems. When you are done, reply with a short final answer.)"
    )


def agent_script(harness: str, spec: TaskSpec, proxy_url: str) -> str:
    """The bash script the shell agent runs in ``main``: the harness CLI, headless, answer to /app."""
    from coworkenv.rollout.harnesses.claude_code import claude_env
    from coworkenv.rollout.harnesses.npm import MCP_SERVER_NAME

    prompt = shlex.quote(_prompt(spec))
    turns = str(spec.limits.max_turns)
    if harness == "claude-code":
        setup = (
            "cat > /tmp/mcp.json <<EOF\n"
            + json.dumps(
                {"mcpServers": {MCP_SERVER_NAME: {"type": "http", "url": "$COWORKENV_SERVICES_URL/mcp"}}}
            )
            + "\n"
            "EOF\n"
        )
        env = claude_env(proxy_url)
        cmd = (
            f"claude -p {prompt} --output-format json --dangerously-skip-permissions --model policy "
            f"--max-turns {turns} --mcp-config /tmp/mcp.json --strict-mcp-config"
        )
        extract = "d = json.loads(out.strip().splitlines()[-1]); answer = d.get('result', '')"
    elif harness == "codex":
        from coworkenv.rollout.harnesses.codex import DISABLED_FEATURES

        setup = (
            'export CODEX_HOME="$HOME/.codex"\nmkdir -p "$CODEX_HOME"\n'
            'cat > "$CODEX_HOME/config.toml" <<EOF\n'
            'model = "policy"\nmodel_provider = "coworkenv"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n\n'
            "[model_providers.coworkenv]\n"
            f'name = "coworkenv"\nbase_url = {json.dumps(proxy_url + "/v1")}\n'
            'env_key = "COWORKENV_API_KEY"\nwire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n\n[analytics]\nenabled = false\n\n"
            f"[mcp_servers.{MCP_SERVER_NAME}]\n"
            'url = "$COWORKENV_SERVICES_URL/mcp"\n'
            "EOF\n"
        )
        env = {"COWORKENV_API_KEY": "coworkenv"}
        disable = "".join(f" --disable {f}" for f in DISABLED_FEATURES)
        cmd = (
            "codex exec --skip-git-repo-check --json --output-last-message /tmp/last.txt"
            f"{disable} -c web_search=disabled {prompt}"
        )
        extract = "answer = open('/tmp/last.txt').read() if os.path.exists('/tmp/last.txt') else ''"
    else:
        raise HarborError(f"the teacher path supports {', '.join(HARNESSES)}, not {harness!r}")
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    return (
        "#!/usr/bin/env bash\n"
        "set -u\ncd /app\n"
        f"{setup}{exports}"
        f"{cmd} </dev/null >/tmp/harness.out 2>/tmp/harness.err\n"
        "rc=$?\n"
        "python3 - <<'PY'\n"
        "import json, os\n"
        "out = open('/tmp/harness.out', encoding='utf-8', errors='replace').read()\n"
        "answer = ''\n"
        f"try:\n    {extract}\nexcept Exception:\n    answer = ''\n"
        "open('/app/answer.md', 'w', encoding='utf-8').write(answer or '')\n"
        "print('FINAL_ANSWER', json.dumps(answer))\n"
        "PY\n"
        'echo "HARNESS_EXIT $rc"\n'
        "tail -c 1500 /tmp/harness.err\n"
    )


def _record(
    spec: TaskSpec,
    harness: str,
    rid: str,
    *,
    trial: int = 0,
    outcome: Any,
    calls: Sequence[Any],
    wall: float,
    backend: str,
) -> RolloutRecord:
    script = outcome.trial_dir / "agent" / "script.txt"
    log = script.read_text(encoding="utf-8", errors="replace") if script.is_file() else ""
    final = ""
    exit_code: int | None = None
    for line in log.splitlines():
        if line.startswith("FINAL_ANSWER "):
            final = json.loads(line.removeprefix("FINAL_ANSWER "))
        elif line.startswith("HARNESS_EXIT "):
            exit_code = int(line.split()[1])
    verifier = outcome.trial_dir / "verifier"
    events_file, grade_file = verifier / "events.json", verifier / "grade.json"
    events = json.loads(events_file.read_text()) if events_file.is_file() else []
    grade = json.loads(grade_file.read_text()) if grade_file.is_file() else None
    common: dict[str, Any] = {
        "rollout_id": rid,
        "task_id": spec.id,
        "harness": harness,
        "trial": trial,
        "seed": trial,
        "category": spec.category,
        "difficulty": spec.difficulty,
        "backend": backend,
        "started_at": time.time() - wall,
        "wall_s": wall,
        "n_calls": len(calls),
        "policy_version": calls[-1].policy_version if calls else "0",
        "final_answer": final,
        "tool_calls": tuple(
            ToolCallRecord(
                seq=e["seq"],
                tool=e["tool"],
                args=e.get("args", {}),
                ok=e.get("ok", True),
                error=(e.get("error") or {}).get("error") if e.get("error") else None,
            )
            for e in events
        ),
        "audit": tuple(events),
        "meta": {"sandbox": "harbor", "harbor_trial": str(outcome.trial_dir), "exit_code": exit_code},
    }
    failure: FailureLabel | None = None
    if outcome.failed_step is not None:
        failure = FailureLabel(kind="start_failure", detail=outcome.describe())
    elif not calls:
        detail = "the harness ended without any model call reaching the proxy:\n" + log[-1500:]
        failure = FailureLabel(kind="http_error", detail=detail)
    if failure is not None:
        return RolloutRecord(**common, status="infra_failure", failure=failure)
    r = outcome.rewards
    return RolloutRecord(
        **common,
        status="ok",
        grade=grade,
        rewards=RewardParts(
            reward=r["reward"], completion=r["completion"], safety=r["safety"], robustness=r["robustness"]
        ),
    )


async def harbor_rollouts(
    specs: Sequence[TaskSpec],
    harness: str,
    backend: str,
    out: Path,
    *,
    trials: int = 1,
    concurrency: int = 2,
) -> list[RolloutRecord]:
    """Run ``harness`` on each task inside Harbor through our proxy (see the module docstring)."""
    from coworkenv.harbor.agents import SHELL_AGENT
    from coworkenv.harbor.run import run_job
    from coworkenv.proxy.capture import CaptureStore
    from coworkenv.rollout.runner import default_proxy_factory, resolve_backend, serve_app
    from coworkenv.synth.packaging import export_task

    if harness not in HARNESSES:
        raise HarborError(f"the teacher path supports {', '.join(HARNESSES)}, not {harness!r}")
    image = await asyncio.to_thread(ensure_harness_image, harness)
    default, per_task, name = resolve_backend(backend)
    out.mkdir(parents=True, exist_ok=True)
    store = CaptureStore(out / "calls")
    proxy = default_proxy_factory(default, store)
    records: list[RolloutRecord] = []
    gateway = bridge_gateway()
    overlay = {"services": {"main": {"build": {"args": {"COWORKENV_IMAGE": image}}}}}
    sem = asyncio.Semaphore(concurrency)
    try:
        async with serve_app(proxy.app, host=gateway) as proxy_base:

            async def one(spec: TaskSpec, trial: int) -> RolloutRecord:
                async with sem:
                    rid = f"{spec.id}__{harness}__harbor{trial}"
                    prefix = proxy.open_rollout(
                        rid, task_id=spec.id, harness=harness, backend=per_task(spec) if per_task else None
                    )
                    t0 = time.monotonic()
                    try:
                        work = out / "harbor" / rid
                        shutil.rmtree(work, ignore_errors=True)
                        export_task(spec, work / "tasks", "harbor")
                        script = work / "agent.sh"
                        script.write_text(agent_script(harness, spec, proxy_base + prefix), encoding="utf-8")
                        try:
                            (outcome,) = await asyncio.to_thread(
                                run_job,
                                work / "tasks",
                                SHELL_AGENT,
                                work / "jobs",
                                job_name="teacher",
                                overlay=overlay,
                                agent_script=script,
                                concurrency=1,
                            )
                        except HarborError as exc:  # Harbor itself failed: labelled, never scored
                            return RolloutRecord(
                                rollout_id=rid,
                                task_id=spec.id,
                                harness=harness,
                                trial=trial,
                                backend=name,
                                status="infra_failure",
                                failure=FailureLabel(kind="start_failure", detail=f"{spec.id}: {exc}"[:2000]),
                                wall_s=time.monotonic() - t0,
                                meta={"sandbox": "harbor"},
                            )
                        await proxy.settle(rid, timeout_s=5.0)
                        calls, _problems = store.read(rid)
                        return _record(
                            spec,
                            harness,
                            rid,
                            trial=trial,
                            outcome=outcome,
                            calls=calls,
                            wall=time.monotonic() - t0,
                            backend=name,
                        )
                    finally:
                        proxy.close_rollout(rid)

            records = list(await asyncio.gather(*(one(s, k) for s in specs for k in range(trials))))
    finally:
        shutdown = getattr(proxy, "shutdown", None)
        if callable(shutdown):
            await asyncio.to_thread(shutdown)
    with (out / "rollouts.jsonl").open("a", encoding="utf-8") as f:
        for rec in records:
            f.write(rec.model_dump_json() + "\n")
    return records


__all__ = ["HARNESSES", "agent_script", "bridge_gateway", "ensure_harness_image", "harbor_rollouts"]
