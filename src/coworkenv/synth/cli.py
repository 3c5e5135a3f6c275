"""CLI commands of the synth stage, added to the main app by :func:`register`.

``coworkenv plan report PLAN`` prints a plan's coverage, and what of each scenario the offline generator
would build, before anything is generated.
``coworkenv synth PLAN --generator procedural|llm|scripted --out DIR`` runs the synthesis loop
(``--compose auto|compose|templates`` picks between the procedural templates and the
compositional generator, which handles any slot of registered services)
with a progress bar, saves the accepted tasks and ``run.json``, and prints the summary table
(accepted, repaired, discarded by stage). Heavy modules are imported inside the commands.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from coworkenv.errors import CoworkError

if TYPE_CHECKING:
    from coworkenv.synth.base import Generator
    from coworkenv.synth.pipeline import RunResult
    from coworkenv.synth.plan import Plan
    from coworkenv.synth.procedural import ProceduralGenerator

out = Console()
plan_app = typer.Typer(no_args_is_help=True, help="Coverage plans for task synthesis.")


class ComposeMode(StrEnum):
    auto = "auto"
    compose = "compose"
    templates = "templates"


class GeneratorKind(StrEnum):
    procedural = "procedural"
    llm = "llm"
    scripted = "scripted"


def _matrix(title: str, rows: list[str], cols: list[str], cells: dict[tuple[str, str], int]) -> Table:
    t = Table(title=title)
    if len(cols) > 6:  # too wide for a grid: one line per service
        t.add_column("service")
        t.add_column("slots (value×count)")
        t.add_column("total", justify="right", style="bold")
        for r in rows:
            counts = {c: cells[(r, c)] for c in cols if cells.get((r, c))}
            t.add_row(r, ", ".join(f"{c}×{n}" for c, n in counts.items()), str(sum(counts.values())))
        return t
    t.add_column("service")
    for c in cols:
        t.add_column(c, justify="right")
    t.add_column("total", justify="right", style="bold")
    for r in rows:
        vals = [cells.get((r, c), 0) for c in cols]
        t.add_row(r, *(str(v) if v else "·" for v in vals), str(sum(vals)))
    return t


def print_plan_report(plan: Plan, console: Console) -> None:
    from coworkenv.synth.plan import coverage

    cov = coverage(plan)
    services = list(cov.by_service)
    console.print(
        f"[bold]{plan.source}[/]: {cov.slots} slots, {len(services)} services, languages {cov.by_language}"
    )
    console.print(
        _matrix("slots: services × categories", services, list(cov.by_category), cov.service_category)
    )
    console.print(
        _matrix("slots: services × difficulties", services, list(cov.by_difficulty), cov.service_difficulty)
    )
    safety = Table(title=f"safety scenarios ({len(cov.safety_slots)})")
    for col in ("task_id", "services", "difficulty", "scenario"):
        safety.add_column(col)
    for s in cov.safety_slots:
        scen = s.scenario if len(s.scenario) <= 90 else s.scenario[:87] + "..."
        safety.add_row(s.task_id, ", ".join(s.services), s.difficulty, scen)
    console.print(safety)
    console.print(f"multi-turn slots: {len(cov.multi_turn_slots)}")
    if cov.unused_tools:
        unused = Table(
            title=f"registered tools no slot exercises ({cov.unused_tool_count}): "
            "their services are in no slot"
        )
        unused.add_column("service")
        unused.add_column("tools")
        for svc, tools in cov.unused_tools.items():
            unused.add_row(svc, ", ".join(tools))
        console.print(unused)
    else:
        console.print("every registered service (and so every tool) is in some slot")


def print_scenario_report(plan: Plan, gen: ProceduralGenerator, console: Console) -> None:
    """Per slot: the builder it gets and each scenario part's verdict (ignored parts in red)."""
    from coworkenv.errors import SpecError

    t = Table(title="scenarios: what the offline generator reads, and what the task it builds honours")
    for col in ("task_id", "builder", "honoured", "approximated", "ignored (why)"):
        t.add_column(col)
    for slot in plan.slots:
        try:
            rep = gen.scenario_report(slot)
        except SpecError as e:
            t.add_row(slot.task_id, "[red]cannot build[/]", "", "", str(e.issues[0]))
            continue
        parts = rep["parts"]

        def cell(status: str, parts: list[dict[str, object]] = parts) -> str:
            rows = [p for p in parts if p["status"] == status]
            if status == "ignored":
                return "\n".join(f"[red]{p['kind']} {p['value']}[/]: {p['why']}" for p in rows)
            return ", ".join(f"{p['kind']} {p['value']}" for p in rows)

        t.add_row(slot.task_id, str(rep["builder"]), cell("honoured"), cell("approximated"), cell("ignored"))
    console.print(t)


def scenario_warnings(run: RunResult) -> list[str]:
    """One line per valid slot whose task ignores part of its scenario (naming the parts)."""
    lines = []
    for r in run.results:
        if r.spec is None or not r.scenario or not r.scenario.get("ignored"):
            continue
        parts = [p for p in r.scenario["parts"] if p["status"] == "ignored"]
        ignored = [f"{p['kind']} {p['value']} ({p['why']})" for p in parts]
        lines.append(f"{r.task_id}: {r.scenario['builder']} ignores {'; '.join(ignored)}")
    return lines


def print_summary(run: RunResult, console: Console) -> None:
    from coworkenv.synth.base import STAGES

    st = run.stats
    t = Table(title=f"synthesis: {run.generator}, {st.slots} slots, budget {run.attempts} attempts")
    t.add_column("outcome")
    t.add_column("slots", justify="right")
    t.add_row("accepted (first draft)", str(st.accepted))
    t.add_row("repaired (after feedback)", str(st.repaired))
    t.add_row("discarded", str(st.discarded))
    t.add_row("[bold]valid[/]", f"[bold]{st.valid}[/]")
    console.print(t)
    s = Table(title=f"per stage ({st.drafts} drafts)")
    for col in ("stage", "rejected drafts", "discarded at", "seconds"):
        s.add_column(col, justify="left" if col == "stage" else "right")
    for stage in STAGES:
        s.add_row(
            stage,
            str(st.rejected_by_stage[stage]),
            str(st.discarded_by_stage[stage]),
            f"{st.stage_seconds[stage]:.3f}",
        )
    console.print(s)
    rate = st.valid / st.seconds * 60 if st.seconds > 0 else 0.0
    console.print(
        f"{st.seconds:.2f} s total ({st.generate_seconds:.2f} s generating); {rate:,.0f} valid tasks/min"
    )


def make_generator(
    kind: GeneratorKind,
    *,
    seed: int,
    out_dir: Path,
    llm_base_url: str | None,
    llm_model: str | None,
    cache_dir: Path | None,
    discriminator: bool,
    faults: list[str],
    compose: ComposeMode = ComposeMode.auto,
) -> Generator:
    if kind is GeneratorKind.procedural:
        try:
            from coworkenv.synth.procedural import ProceduralGenerator
        except ImportError as e:
            raise CoworkError(f"the procedural generator is not available ({e})") from None
        gen: Generator = ProceduralGenerator(seed, mode=compose.value)
        return gen
    if kind is GeneratorKind.llm:
        from coworkenv.synth.llm import ChatClient, LlmConfig, LlmGenerator

        config = LlmConfig.resolve(llm_base_url, llm_model)
        client = ChatClient(config, cache_dir=cache_dir, log_path=out_dir / "llm_calls.jsonl")
        return LlmGenerator(client, discriminator=discriminator)
    from coworkenv.synth.scripted import ScriptedGenerator

    parsed: dict[str, list[str]] = {}
    for f in faults:
        tid, sep, stage = f.partition("=")
        if not sep:
            raise CoworkError(f"--fault {f!r}: expected TASK_ID=STAGE")
        parsed.setdefault(tid, []).append(stage)
    return ScriptedGenerator(parsed)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to app."""
    app.add_typer(plan_app, name="plan")

    @plan_app.command("report")
    def plan_report(
        plan: Annotated[Path, typer.Argument(help="Coverage plan (YAML).")],
        seed: Annotated[int, typer.Option(help="Seed of the procedural generator.")] = 0,
        compose: Annotated[
            ComposeMode, typer.Option(help="procedural mode whose scenario reading is shown.")
        ] = ComposeMode.auto,
    ) -> None:
        """Print a plan's coverage (services × categories × difficulties, safety slots, unused tools)
        and, per slot, what the offline generator reads from its scenario and which parts the task it
        would build honours, approximates or ignores."""
        from coworkenv.synth.plan import load_plan
        from coworkenv.synth.procedural import ProceduralGenerator

        p = load_plan(plan)
        print_plan_report(p, out)
        print_scenario_report(p, ProceduralGenerator(seed, mode=compose.value), out)

    @app.command("synth")
    def synth(  # noqa: PLR0917 - typer options
        plan: Annotated[Path, typer.Argument(help="Coverage plan (YAML).")],
        out_dir: Annotated[Path, typer.Option("--out", help="Output directory (tasks/ and run.json).")],
        generator: Annotated[GeneratorKind, typer.Option(help="Which generator drafts the specs.")] = (
            GeneratorKind.procedural
        ),
        seed: Annotated[int, typer.Option(help="Seed of the procedural generator.")] = 0,
        compose: Annotated[
            ComposeMode,
            typer.Option(
                help="procedural: auto = a fitting template, else compose from the services; "
                "compose = always compose (scenario text steers it); templates = templates only."
            ),
        ] = ComposeMode.auto,
        attempts: Annotated[int, typer.Option(min=1, help="Drafts per slot (initial + retries).")] = 2,
        llm_base_url: Annotated[
            str | None, typer.Option(help="OpenAI-compatible base URL (else $COWORKENV_LLM_BASE_URL).")
        ] = None,
        llm_model: Annotated[str | None, typer.Option(help="Model name (else $COWORKENV_LLM_MODEL).")] = None,
        cache_dir: Annotated[
            Path | None, typer.Option(help="LLM response cache (default ~/.cache/coworkenv/llm).")
        ] = None,
        discriminator: Annotated[
            bool, typer.Option(help="Generator–Discriminator for safety slots (llm).")
        ] = True,
        fault: Annotated[
            list[str] | None, typer.Option(help="scripted: TASK_ID=STAGE, a broken first draft (repeatable).")
        ] = None,
    ) -> None:
        """Generate, validate and repair tasks for every slot of a coverage plan."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from coworkenv.synth.pipeline import SlotResult, synthesize
        from coworkenv.synth.plan import load_plan

        p = load_plan(plan)
        gen = make_generator(
            generator,
            seed=seed,
            out_dir=out_dir,
            llm_base_url=llm_base_url,
            llm_model=llm_model,
            cache_dir=cache_dir,
            discriminator=discriminator,
            faults=fault or [],
            compose=compose,
        )
        with Progress(
            TextColumn("[bold]synth[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=out,
            transient=True,
        ) as bar:
            task = bar.add_task("", total=len(p.slots))

            def step(res: SlotResult) -> None:
                bar.update(task, advance=1, description=f"{res.task_id}: {res.status}")

            run = synthesize(
                p,
                gen,
                attempts=attempts,
                out=out_dir,
                on_slot=step,
                meta={"seed": seed, "generator_kind": generator.value, "compose": compose.value},
            )
        print_summary(run, out)
        warnings = scenario_warnings(run)
        for line in warnings:
            out.print(f"[yellow]scenario part not built[/]: {line}")
        if warnings:
            out.print(
                f"{len(warnings)} slot(s) ignore part of their scenario (run.json slots[].scenario); "
                "reword the scenario, or use --generator llm for what the blocks cannot express"
            )
        out.print(f"{run.stats.valid} task(s) in {out_dir / 'tasks'}; stats in {out_dir / 'run.json'}")
