"""CLI: ``coworkenv parity TASKS [--checkout DIR] [--mode M] [--scores] [--profile P] [--json]``.

Measures the Claw-Eval profile against a Claw-Eval checkout on any task directory: the service
differential (every declared tool with valid, edge and invalid arguments, then the audits) and,
with ``--scores``, the trajectory-score differential (correct / partial / unsafe runs graded by
each task's own grader on both sides). Prints the summary and every difference.

``--mode equivalent`` (default) compares answers by :func:`coworkenv.claweval.differential.compare`'s
rules (clock tolerance, 422s by their failing fields); ``--mode identical`` compares status, media
type and body bytes with the clocks aligned, over more request kinds
(:mod:`coworkenv.claweval.identical`), and exits 1 when any pair is different (deliberate
differences are counted and listed, not failed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the parity command to app."""

    @app.command()
    def parity(  # noqa: PLR0917 - one typer option per parameter
        tasks: Annotated[Path, typer.Argument(help="A directory of Claw-Eval tasks (task.yaml + fixtures).")],
        checkout: Annotated[
            Path | None,
            typer.Option(
                help="Claw-Eval checkout (mock_services/, src/); default ../shared/claw-eval/upstream."
            ),
        ] = None,
        scores: Annotated[bool, typer.Option("--scores", help="Also compare grader scores.")] = False,
        profile: Annotated[
            str, typer.Option(help="Our profile to measure: claw-eval or strict.")
        ] = "claw-eval",
        as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
        mode: Annotated[
            str,
            typer.Option(
                help="equivalent (the comparison's rules) or identical (byte for byte, clocks aligned)."
            ),
        ] = "equivalent",
    ) -> None:
        """Compare our services (and grading) with Claw-Eval's own on the same requests."""
        from coworkenv.claweval import differential, identical, trajectories
        from coworkenv.claweval.upstream import find_checkout
        from coworkenv.errors import SpecError
        from coworkenv.spec import ServiceProfile

        root = find_checkout(checkout)
        if root is None:
            raise SpecError.single(
                checkout or "../shared/claw-eval/upstream", "", "no Claw-Eval checkout here"
            )
        if profile not in ("claw-eval", "strict"):
            raise SpecError.single("--profile", "", "expected claw-eval or strict")
        prof: ServiceProfile = "claw-eval" if profile == "claw-eval" else "strict"
        if mode not in ("equivalent", "identical"):
            raise SpecError.single("--mode", "", "expected equivalent or identical")
        if mode == "identical":
            if profile != "claw-eval":
                raise SpecError.single("--mode", "", "identical measures the claw-eval profile only")
            same = identical.run(tasks, root)
            if as_json:
                print(json.dumps({"services": same.as_dict()}, indent=2, ensure_ascii=False))
            else:
                print(f"services (byte for byte): {same.summary()}")
                for name, why in same.failed_tasks.items():
                    print(f"  task {name} not run: {why}")
                verdicts: tuple[identical.Verdict, ...] = ("different", "deliberate")
                for verdict in verdicts:
                    listed = same.differences(limit=40, verdict=verdict)
                    if listed:
                        print(f"{verdict} (first {min(40, same.count(verdict))} of {same.count(verdict)}):")
                        print(listed)
            if same.count("different") or same.failed_tasks:
                raise typer.Exit(1)
            return
        service = differential.run(tasks, root, profile=prof)
        score = trajectories.run(tasks, root, profile=prof) if scores else None
        if as_json:
            out = {
                "services": {
                    "rate": service.rate,
                    "summary": service.summary(),
                    "failed": service.failed_tasks,
                }
            }
            if score is not None:
                out["scores"] = {
                    "agreement": score.agreement,
                    "summary": score.summary(),
                    "failed": score.failed_tasks,
                }
            print(json.dumps(out, indent=2))
            return
        print(f"services: {service.summary()}")
        for name, why in service.failed_tasks.items():
            print(f"  task {name} not run: {why}")
        if service.differences():
            print(service.differences(limit=200))
        if score is not None:
            print(f"scores: {score.summary()}")
            if score.differences():
                print(score.differences())
