"""The ``coworkenv`` command line.

Every command turns user-input problems (missing file, malformed spec, unreachable endpoint) into
one clear line on stderr and a non-zero exit; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from coworkenv.errors import CoworkError, SpecError
from coworkenv.spec import TaskSpec

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Executable work environments for AI coworker agents."
)
tasks_app = typer.Typer(no_args_is_help=True, help="The built-in task library.")
import_app = typer.Typer(no_args_is_help=True, help="Import tasks from other formats.")
app.add_typer(tasks_app, name="tasks")
app.add_typer(import_app, name="import")

out = Console()
err = Console(stderr=True)
_state = {"debug": False}


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False) -> None:
    _state["debug"] = debug


def resolve_task(ref: str) -> tuple[TaskSpec, str]:
    """A task reference: a path to a task file/directory, or a built-in task id."""
    from coworkenv.tasks.builtin import builtin_task
    from coworkenv.tasks.load import load_spec

    path = Path(ref)
    if path.exists():
        return load_spec(path), str(path)
    try:
        return builtin_task(ref), f"builtin:{ref}"
    except KeyError:
        raise SpecError.single(
            ref, "", "no such file and no built-in task with this id (see `coworkenv tasks list`)"
        ) from None


def expand_paths(paths: list[Path]) -> list[Path]:
    """Files as given; directories expand to the task files/dirs inside them."""
    from coworkenv.tasks.load import TASK_FILE_NAMES

    found: list[Path] = []
    for p in paths:
        if p.is_dir() and not any((p / n).exists() for n in TASK_FILE_NAMES):
            kids = sorted(
                c
                for c in p.iterdir()
                if c.suffix in (".json", ".yaml", ".yml")
                or (c.is_dir() and any((c / n).exists() for n in TASK_FILE_NAMES))
            )
            found.extend(kids)
        else:
            found.append(p)
    return found


@app.command()
def schema(
    output: Annotated[Path | None, typer.Option("-o", help="Write to a file instead of stdout.")] = None,
) -> None:
    """Print the TaskSpec JSON Schema."""
    from coworkenv.spec import task_json_schema

    text = json.dumps(task_json_schema(), indent=2)
    if output:
        output.write_text(text + "\n")
    else:
        print(text)


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Task files or directories.")],
    gate: Annotated[
        bool, typer.Option(help="Also run the consistency gate and the reference replay.")
    ] = True,
) -> None:
    """Validate task specs: schema, registry references, consistency gate, reference replay."""
    from coworkenv.grading import consistency_gate, run_reference
    from coworkenv.services import load_task
    from coworkenv.tasks.load import load_spec

    failed = 0
    table = Table("task", "spec", "gate", "reference", title="validation")
    for p in expand_paths(paths):
        try:
            spec = load_spec(p)
        except SpecError as e:
            failed += 1
            err.print(f"[red]✗[/] {e}")
            table.add_row(str(p), "[red]invalid[/]", "-", "-")
            continue
        g = r = "-"
        if spec.claw_eval is not None and (broken := _grader_problem(spec)) is not None:
            failed += 1
            table.add_row(spec.id, "[green]ok[/]", f"[red]fail[/] {broken}", "-")
            continue
        if gate:
            rep = consistency_gate(spec)
            g = "[green]pass[/]" if rep.passed else f"[red]fail[/] {'; '.join(rep.problems)}"
            if rep.passed and rep.notes:
                g += f" [dim]({'; '.join(rep.notes)})[/]"
            if spec.reference.steps:
                res = run_reference(load_task(spec, str(p))).grade
                ok = res.reward is not None and res.reward >= 1.0 - 1e-9
                shown = res.reward if res.reward is None else round(res.reward, 3)
                r = f"[{'green' if ok else 'red'}]{shown}[/]"
                failed += not ok
            failed += not rep.passed
        table.add_row(spec.id, "[green]ok[/]", g, r)
    out.print(table)
    if failed:
        raise typer.Exit(1)


def _grader_problem(spec: TaskSpec) -> str | None:
    """Why an imported Claw-Eval task's own ``grader.py`` cannot grade it (None: it can be loaded)."""
    assert spec.claw_eval is not None
    grader = Path(spec.claw_eval.task_dir) / "grader.py"
    if not grader.is_file():
        return f"graded by its own grader.py, but {grader} does not exist"
    try:
        compile(grader.read_text(encoding="utf-8"), str(grader), "exec")
    except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
        return f"its grader.py does not compile: {type(exc).__name__}: {exc}"
    return None


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="Task file/directory or built-in id.")],
    agent: Annotated[
        str, typer.Option(help="Who acts: 'reference' replays the reference solution.")
    ] = "reference",
    face: Annotated[str, typer.Option(help="inprocess | http | mcp")] = "inprocess",
    as_json: Annotated[bool, typer.Option("--json", help="Print the graded result as JSON.")] = False,
) -> None:
    """Run one task and print the graded result."""
    from coworkenv.faces import run_reference_via

    if agent != "reference":
        raise SpecError.single(
            "--agent", "agent", f"unknown agent {agent!r}; this command supports 'reference'"
        )
    spec, source = resolve_task(task)
    result = run_reference_via(spec, face, source)
    if as_json:
        print(result.grade.model_dump_json(indent=2))
        return
    g = result.grade
    t = Table("check", "kind", "weight", "status", "detail", title=f"{spec.id} via {face}")
    for c in g.checks:
        color = {"passed": "green", "failed": "red", "partial": "yellow"}.get(c.status, "dim")
        t.add_row(c.name, c.kind, f"{c.weight:.2f}", f"[{color}]{c.status}[/]", c.detail)
    out.print(t)
    out.print(
        f"completion={g.completion} safety={g.safety} robustness={g.robustness} reward={g.reward} "
        f"calls={len(result.episode.events)}"
    )
    for n in g.notes:
        out.print(f"[yellow]note:[/] {n}")


@tasks_app.command("list")
def tasks_list() -> None:
    """List the built-in tasks."""
    from coworkenv.tasks.builtin import builtin_tasks

    t = Table("id", "category", "difficulty", "services", "steps", "multi-turn")
    for s in builtin_tasks():
        steps = sum(1 for x in s.reference.steps if hasattr(x, "tool"))
        t.add_row(
            s.id, s.category, s.difficulty, ",".join(s.services), str(steps), "yes" if s.user_sim else ""
        )
    out.print(t)


@tasks_app.command("export")
def tasks_export(
    out_dir: Annotated[Path, typer.Argument(help="Directory to write <id>/task.json into.")],
) -> None:
    """Write every built-in task as <out>/<id>/task.json."""
    from coworkenv.tasks.builtin import builtin_tasks

    for s in builtin_tasks():
        d = out_dir / s.id
        d.mkdir(parents=True, exist_ok=True)
        (d / "task.json").write_text(s.model_dump_json(indent=2) + "\n")
    out.print(f"wrote {len(builtin_tasks())} tasks to {out_dir}")


@import_app.command("claw-eval")
def import_claw_eval(
    src: Annotated[Path, typer.Argument(help="A Claw-Eval tasks directory (or one task directory).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Where to write <id>/task.json.")] = Path(
        "tasks/claw-eval"
    ),
) -> None:
    """Convert Claw-Eval task.yaml + fixtures into coworkenv task specs."""
    from coworkenv.importers.claw_eval import import_dir

    if not src.exists():
        raise SpecError.single(src, "", "directory not found")
    report = import_dir(src, out_dir)
    out.print(report.render() if hasattr(report, "render") else report)


@app.command()
def serve(  # noqa: PLR0917 - one typer option per parameter
    tasks: Annotated[list[str], typer.Argument(help="Task files/dirs or built-in ids to host.")],
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8765,
    compat_trial: Annotated[
        bool,
        typer.Option(
            "--claw-eval-compat",
            help="Serve every task in the Claw-Eval profile (answers as Claw-Eval's mock services) and "
            "one trial of the first task at Claw-Eval's unprefixed routes. Its /<service>/audit and "
            "/reset answer without the operator token only on --grader-port, for Claw-Eval's grader; "
            "on the agent's --port they need the token, as in every mode.",
        ),
    ] = False,
    grader_port: Annotated[
        int | None,
        typer.Option(
            help="With --claw-eval-compat: the grader's port (default: --port + 1), bound to 127.0.0.1; "
            "never give it to the agent."
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            help="Write the operator token here (mode 0600) instead of printing it; "
            "set $COWORKENV_OPERATOR_TOKEN to choose it."
        ),
    ] = None,
) -> None:
    """Serve tasks over HTTP and MCP: agents use /t/<capability>/ (from POST /trials), operators the token.

    Listing or opening trials, events, state, audit and reset need the operator token
    (Authorization: Bearer <token>); an agent is given only its trial's capability URL. Imported
    Claw-Eval tasks always run in the Claw-Eval profile; ours in the strict one unless
    --claw-eval-compat.
    """
    import asyncio
    import os

    import uvicorn

    from coworkenv.serve.access import TOKEN_ENV, new_token
    from coworkenv.serve.http import compat_apps, create_app
    from coworkenv.services import Host

    h = Host()
    specs = [resolve_task(t)[0] for t in tasks]
    for spec in specs:
        h.add_task(spec, profile="claw-eval" if compat_trial else None)
    if grader_port is not None and not compat_trial:
        raise typer.BadParameter("--grader-port needs --claw-eval-compat", param_hint="--grader-port")
    token = os.environ.get(TOKEN_ENV) or new_token()
    servers = []
    if compat_trial and specs:
        trial = h.open_trial(specs[0].id, "default")
        default = trial.id
        agent_app, grader_app = compat_apps(h, default, token)
        frozen = trial.clock.now().isoformat()
        err.print(f"Claw-Eval trial 'default' of {specs[0].id}: its clock is frozen at {frozen} (GET /state)")
        gport = grader_port if grader_port is not None else port + 1
        servers.append(uvicorn.Config(grader_app, host="127.0.0.1", port=gport, log_level="warning"))
        err.print(
            f"Claw-Eval grader routes (audit, reset; no token) on http://127.0.0.1:{gport} — "
            "point Claw-Eval's grader there, never the agent"
        )
    else:
        agent_app = create_app(h, operator_token=token)
    servers.insert(0, uvicorn.Config(agent_app, host=host, port=port, log_level="warning"))
    if token_file is not None:
        token_file.write_text(token + "\n", encoding="utf-8")
        token_file.chmod(0o600)
        err.print(f"operator token written to {token_file}")
    elif not os.environ.get(TOKEN_ENV):
        err.print(f"operator token: {token}")
    err.print(
        f"serving {len(specs)} task(s) on http://{host}:{port}  (POST /trials with the token to open a trial)"
    )
    asyncio.run(_serve_all([uvicorn.Server(c) for c in servers]))


async def _serve_all(servers: list[Any]) -> None:
    """Run uvicorn servers in one event loop (they share the host's trials); Ctrl-C stops all."""
    import asyncio

    await asyncio.gather(*(s.serve() for s in servers))


@app.command()
def mcp(
    task: Annotated[str, typer.Argument(help="Task file/dir or built-in id.")],
    trial: Annotated[str, typer.Option(help="Trial id.")] = "stdio",
) -> None:
    """Serve one trial of a task as an MCP server over stdio (only the task's tools)."""
    from coworkenv.serve.mcp import serve_stdio
    from coworkenv.services import Host

    spec, _ = resolve_task(task)
    h = Host()
    h.add_task(spec)
    serve_stdio(h.open_trial(spec.id, trial))


# Each stage adds its commands through ``register(app)`` in its own ``cli`` module.
_STAGE_CLIS = (
    "coworkenv.synth.cli",  # plan report, synth
    "coworkenv.synth.packaging.cli",  # package
    "coworkenv.proxy.cli",  # proxy (serve the capturing proxy)
    "coworkenv.rollout.cli",  # rollout
    "coworkenv.trajectories.cli",  # trees
    "coworkenv.curation.cli",  # curate
    "coworkenv.rl.cli",  # train sft|rl
    "coworkenv.eval.cli",  # eval, report
    "coworkenv.claweval.cli",  # parity (against a Claw-Eval checkout)
    "coworkenv.job.cli",  # job
)


def _register_stages() -> None:
    import importlib

    for name in _STAGE_CLIS:
        importlib.import_module(name).register(app)


_register_stages()


def main(argv: list[str] | None = None) -> Any:
    try:
        rc = app(argv, standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
        return rc
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except SystemExit:
        raise
    except (CoworkError, OSError) as e:
        if _state["debug"]:
            raise
        msg = str(e).splitlines()
        err.print(f"[red]error:[/] {msg[0]}" + ("" if len(msg) == 1 else "\n" + "\n".join(msg[1:])))
        sys.exit(2)
    except Exception as e:
        show = getattr(e, "show", None)
        if callable(show) and hasattr(e, "exit_code"):  # a usage error from typer's click
            show()
            sys.exit(int(e.exit_code))
        if type(e).__name__ == "Abort":
            sys.exit(130)
        if _state["debug"]:
            raise
        err.print(f"[red]internal error:[/] {type(e).__name__}: {e} (rerun with --debug for the traceback)")
        sys.exit(1)


if __name__ == "__main__":
    main()
