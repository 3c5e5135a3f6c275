"""Before → after on the held-out evaluation tasks: the job's comparison of the update.

Contract: :func:`compare` takes the evaluation summaries of the same held-out tasks before and
after the update and returns plain data — which tasks trained and which evaluated (disjoint, or a
:class:`~coworkenv.errors.CoworkError`), and for the overall score, pass rate, Pass@k and Pass^k
and for each (task, harness)'s mean reward: ``before``, ``after`` and ``delta`` (``after −
before``; None where either side has no scored trial). :func:`comparison_html` renders it as the
report's first section; :func:`comparison_line` as one console line.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from coworkenv.errors import CoworkError
from coworkenv.eval.metrics import EvalSummary

OVERALL = ("score", "pass_rate", "pass_at_k", "pass_hat_k")


def _row(before: float | None, after: float | None) -> dict[str, float | None]:
    delta = None if before is None or after is None else after - before
    return {"before": before, "after": after, "delta": delta}


def compare(
    before: EvalSummary,
    after: EvalSummary | None,
    *,
    train_tasks: Sequence[str],
    eval_tasks: Sequence[str],
) -> dict[str, Any]:
    leaked = sorted(set(train_tasks) & set(eval_tasks))
    if leaked:
        raise CoworkError(
            f"evaluation tasks {leaked} were also trained on; the comparison would be dishonest"
        )
    overall = {
        m: _row(getattr(before.overall, m), None if after is None else getattr(after.overall, m))
        for m in OVERALL
    }
    after_tasks = {(t.task_id, t.harness): t for t in (after.tasks if after else [])}
    tasks = []
    for t in before.tasks:
        a = after_tasks.get((t.task_id, t.harness))
        tasks.append(
            {
                "task_id": t.task_id,
                "harness": t.harness,
                **_row(t.mean_reward, None if a is None else a.mean_reward),
            }
        )
    return {
        "train_tasks": list(train_tasks),
        "eval_tasks": list(eval_tasks),
        "k": before.k,
        "overall": overall,
        "tasks": tasks,
    }


def _num(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def comparison_line(cmp: dict[str, Any]) -> str:
    o = cmp["overall"]["score"]
    n = len(cmp["eval_tasks"])
    return (
        f"held-out evaluation ({n} task(s) the update never saw): score {_num(o['before'])} → "
        f"{_num(o['after'])} (Δ {_num(o['delta'], signed=True)})"
    )


def comparison_html(cmp: dict[str, Any]) -> str:
    k = cmp["k"]
    names = {
        "score": "score (0–100)",
        "pass_rate": "pass rate",
        "pass_at_k": f"Pass@{k}",
        "pass_hat_k": f"Pass^{k}",
    }
    head = "<tr><th></th><th>before</th><th>after</th><th>Δ</th></tr>"
    overall = "".join(
        f"<tr><td>{names[m]}</td><td>{_num(r['before'])}</td><td>{_num(r['after'])}</td>"
        f"<td>{_num(r['delta'], signed=True)}</td></tr>"
        for m, r in cmp["overall"].items()
    )
    tasks = "".join(
        f"<tr><td>{escape(t['task_id'])} · {escape(t['harness'])}</td><td>{_num(t['before'])}</td>"
        f"<td>{_num(t['after'])}</td><td>{_num(t['delta'], signed=True)}</td></tr>"
        for t in cmp["tasks"]
    )
    trained = ", ".join(escape(t) for t in cmp["train_tasks"]) or "–"
    evaluated = ", ".join(escape(t) for t in cmp["eval_tasks"]) or "–"
    return (
        '<section id="before-after"><h2>Before → after the update (held-out tasks)</h2>'
        f"<p>Trained on: {trained}</p><p>Evaluated on (never trained on): {evaluated}</p>"
        f"<table>{head}{overall}</table><h3>Mean reward per held-out task</h3>"
        f"<table>{head}{tasks}</table></section>"
    )
