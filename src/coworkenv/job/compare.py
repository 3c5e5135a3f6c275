"""Before → after on the held-out evaluation tasks: the job's comparison of the update.

Contract: :func:`compare` takes the evaluation summaries of the same held-out tasks before and
after the update and returns plain data — which tasks trained and which evaluated (disjoint, or a
:class:`~coworkenv.errors.CoworkError`), and for the overall score, pass rate, Pass@k and Pass^k
and for each (task, harness)'s mean reward: ``before``, ``after`` and ``delta`` (``after −
before``; None where either side has no scored trial). :func:`comparison_html` renders it as the
report's first section; :func:`comparison_line` as one console line.

:func:`stage_deltas` is the whole of training on the same held-out tasks: completion (0–100) of each
stage (``base`` → ``sft`` → ``after`` the RL update, whichever exist) and each stage-to-stage delta
with a paired bootstrap interval over tasks; :func:`stage_deltas_lines` and
:func:`stage_deltas_html` render it for the terminal and the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from coworkenv.errors import CoworkError
from coworkenv.eval.metrics import EvalSummary, headline, paired_delta

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


STAGE_NAMES = {"base": "base model", "sft": "after SFT", "after": "after the RL update"}


def stage_deltas(stages: dict[str, EvalSummary | None]) -> dict[str, Any]:
    """Completion (0–100, mean over held-out tasks, 95% bootstrap interval) per stage present in
    ``stages`` (in the order given), and the paired delta of every later stage over every earlier
    one (``sft − base``, ``after − sft``, ``after − base``)."""
    present = [(n, s) for n, s in stages.items() if s is not None]
    rows = []
    for name, s in present:
        h = headline(s)
        rows.append(
            {
                "stage": name,
                "completion": h.completion,
                "completion_ci": h.completion_ci,
                "tasks": h.scored_tasks,
                "trials": h.trials,
            }
        )
    deltas = []
    for i, (a, sa) in enumerate(present):
        for b, sb in present[i + 1 :]:
            d = paired_delta(sa.tasks, sb.tasks)
            deltas.append({"from": a, "to": b, "delta": d.delta, "ci": d.ci, "tasks": d.tasks})
    return {"metric": "completion (0-100)", "stages": rows, "deltas": deltas}


def _pts(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.1f}" if signed else f"{x:.1f}"


def _ci(ci: Any) -> str:
    return "" if not ci else f" [{ci[0]:.1f}, {ci[1]:.1f}]"


def stage_deltas_lines(sd: dict[str, Any]) -> list[str]:
    rows = sd["stages"]
    if not rows:
        return []
    n = rows[0]["tasks"]
    head = " → ".join(f"{STAGE_NAMES.get(r['stage'], r['stage'])} {_pts(r['completion'])}" for r in rows)
    lines = [f"held-out completion (0-100, {n} task(s)): {head}"]
    lines += [
        f"  {d['to']} − {d['from']}: {_pts(d['delta'], signed=True)} points{_ci(d['ci'])} "
        f"(paired 95% interval over {d['tasks']} task(s))"
        for d in sd["deltas"]
    ]
    return lines


def stage_deltas_html(sd: dict[str, Any]) -> str:
    stages = "".join(
        f"<tr><td>{escape(STAGE_NAMES.get(r['stage'], r['stage']))}</td><td>{_pts(r['completion'])}"
        f"{_ci(r['completion_ci'])}</td><td>{r['tasks']}</td><td>{r['trials']}</td></tr>"
        for r in sd["stages"]
    )
    deltas = "".join(
        f"<tr><td>{escape(d['to'])} − {escape(d['from'])}</td><td>{_pts(d['delta'], signed=True)}"
        f"{_ci(d['ci'])}</td><td>{d['tasks']}</td></tr>"
        for d in sd["deltas"]
    )
    return (
        '<section id="stages"><h2>What training bought (held-out completion, 0–100)</h2>'
        "<table><tr><th>stage</th><th>completion [95% interval]</th><th>tasks</th><th>trials</th></tr>"
        f"{stages}</table><table><tr><th>delta</th><th>points [paired 95% interval]</th><th>tasks</th></tr>"
        f"{deltas}</table></section>"
    )
