"""CLI: ``coworkenv parity TASKS [--checkout DIR] [--scores] [--profile P] [--json]``.

Measures the Claw-Eval profile against a Claw-Eval checkout on any task directory: the service
differential (every declared tool with valid, edge and invalid arguments, then the audits) and,
with ``--scores``, the trajectory-score differential (correct / partial / unsafe runs graded by
each task's own grader on both sides). Prints the summary and every difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the parity command to app."""

    @app.command()
    def parity(
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
    ) -> None:
        """Compare our services (and grading) with Claw-Eval's own on the same requests."""
        from coworkenv.claweval import differential, trajectories
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
