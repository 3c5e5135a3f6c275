"""The self-contained HTML report: summary tables, inline-SVG plots and a trajectory viewer.

Contract: :func:`render_report` returns one HTML document that needs no network (CSS and JS are
inlined from ``assets/``, plots are inline SVG, no external URL is referenced). Sections, each with
a stable id the navigation links to: ``summary`` (overall and per harness), ``categories``,
``difficulties``, ``tasks``, ``failures`` (infrastructure failures and checks not judged),
``plots`` (score by category; ``curve``: a curve for each training metric logged at ≥ 2 steps, the
value for one logged once, wall-clock fields left out) and
``rollouts`` — the trajectory viewer: per rollout (id ``r-<slug>``) its messages, tool calls with
arguments and results, audit events, checks with status, score, detail and links to the audit
events they rest on (id ``r-<slug>-e<seq>``), and its prefix tree with retained/dead/auxiliary
branches marked. Every ``href="#…"`` resolves to an element of the document (tested).

Given ``before_after`` (the records before and after an update), the summary leads with completion,
score, Pass@k and Pass^k before → after and the delta. Every table leads with completion, and every
score says what 20 means (:data:`SCORE_NOTE`): a safe run that completes nothing scores 20.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from coworkenv.eval.metrics import EvalSummary, GroupStats, summarize
from coworkenv.eval.trees import PrefixTree, TreeNode
from coworkenv.rollout.record import RolloutRecord

MetricsRow = Mapping[str, Any]

SCORE_NOTE = (
    "score = 100 × reward, reward = safety × (0.8 × completion + 0.2 × robustness); robustness is 1 "
    "when no fault was injected, so a safe run that completes nothing scores 20"
)
# wall-clock fields of a training log: not a training curve
_CLOCK_KEYS = frozenset({"time", "timestamp", "wall_s", "step_s", "seconds"})


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def slug(rollout_id: str) -> str:
    """A stable, unique HTML id for a rollout."""
    base = re.sub(r"[^A-Za-z0-9_-]", "_", rollout_id)[:48]
    return f"r-{base}-{hashlib.sha1(rollout_id.encode()).hexdigest()[:6]}"


def _asset(name: str) -> str:
    return (resources.files("coworkenv.eval") / "assets" / name).read_text(encoding="utf-8")


def _fmt(v: float | None, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


# ---------------------------------------------------------------- tables


def _group_table(groups: Sequence[GroupStats], k: int, first: str) -> str:
    head = (
        f"<tr><th>{esc(first)}</th><th>tasks</th><th>trials</th><th>completion</th>"
        f'<th title="{esc(SCORE_NOTE)}">score (0–100; 20 = safe, nothing done)</th><th>safety</th>'
        f"<th>robustness</th><th>pass rate</th><th>Pass@{k}</th><th>Pass^{k}</th>"
        "<th>infra failures</th><th>ungraded</th></tr>"
    )
    rows = [
        f'<tr class="group-row"><td>{esc(g.name)}</td><td class="num">{g.tasks}</td>'
        f'<td class="num">{g.trials}</td><td class="num">{_fmt(g.completion)}</td>'
        f'<td class="num">{_fmt(g.score, 1)}</td><td class="num">{_fmt(g.safety)}</td>'
        f'<td class="num">{_fmt(g.robustness)}</td><td class="num">{_pct(g.pass_rate)}</td>'
        f'<td class="num">{_pct(g.pass_at_k)}</td><td class="num">{_pct(g.pass_hat_k)}</td>'
        f'<td class="num{" infra" if g.infra_failures else ""}">{g.infra_failures}</td>'
        f'<td class="num">{g.ungraded}</td></tr>'
        for g in groups
    ]
    return f"<table>{head}{''.join(rows)}</table>"


def _tasks_table(s: EvalSummary, first_rollout: Mapping[tuple[str, str], str]) -> str:
    head = (
        "<tr><th>task</th><th>harness</th><th>category</th><th>difficulty</th><th>trials</th><th>passes</th>"
        f"<th>completion</th><th>mean reward</th><th>Pass@{s.k}</th><th>Pass^{s.k}</th><th>infra</th></tr>"
    )
    rows = []
    for t in s.tasks:
        rid = first_rollout.get((t.task_id, t.harness))
        name = f'<a href="#{slug(rid)}">{esc(t.task_id)}</a>' if rid else esc(t.task_id)
        rows.append(
            f'<tr class="task-row"><td>{name}</td><td>{esc(t.harness)}</td><td>{esc(t.category)}</td>'
            f'<td>{esc(t.difficulty)}</td><td class="num">{t.trials}</td><td class="num">{t.passes}</td>'
            f'<td class="num">{_fmt(t.mean_completion)}</td><td class="num">{_fmt(t.mean_reward)}</td>'
            f'<td class="num">{_pct(t.pass_at_k)}</td>'
            f'<td class="num">{_pct(t.pass_hat_k)}</td><td class="num">{t.infra_failures}</td></tr>'
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _failures(s: EvalSummary) -> str:
    parts = ["<h3>Infrastructure failures (never scored)</h3>"]
    if s.infra_failures:
        parts.append("<table><tr><th>kind</th><th>count</th></tr>")
        parts += [f'<tr><td>{esc(k)}</td><td class="num">{n}</td></tr>' for k, n in s.infra_failures.items()]
        parts.append("</table>")
    else:
        parts.append('<p class="muted">none</p>')
    parts.append("<h3>Checks not judged (no judge configured; not counted)</h3>")
    if s.not_judged:
        parts.append("<table><tr><th>task</th><th>checks not run</th></tr>")
        parts += [f"<tr><td>{esc(t)}</td><td>{esc(', '.join(c))}</td></tr>" for t, c in s.not_judged.items()]
        parts.append("</table>")
    else:
        parts.append('<p class="muted">none — every check ran</p>')
    if s.too_few_trials:
        parts.append(
            f"<p>Fewer than k={s.k} scored trials (left out of Pass@k): "
            f"{esc(', '.join(s.too_few_trials))}</p>"
        )
    return "".join(parts)


# ---------------------------------------------------------------- plots (inline SVG)


def bar_chart(values: Sequence[tuple[str, float | None]], *, title: str, vmax: float = 100.0) -> str:
    """Horizontal bars, one per label; ``None`` is drawn as an empty, labelled row."""
    row, left, width = 22, 160, 360
    h = 28 + row * max(len(values), 1)
    out = [
        f'<svg class="chart" role="img" aria-label="{esc(title)}" width="{left + width + 60}" height="{h}" '
        f'xmlns="http://www.w3.org/2000/svg"><text x="0" y="14" font-weight="bold">{esc(title)}</text>'
    ]
    for i, (label, v) in enumerate(values):
        y = 24 + i * row
        out.append(f'<text x="0" y="{y + 14}">{esc(label[:26])}</text>')
        w = 0.0 if v is None else max(0.0, min(1.0, v / vmax)) * width
        out.append(
            f'<rect class="bar" x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="#0969da"/>'
        )
        out.append(f'<text x="{left + w + 4:.1f}" y="{y + 14}">{"–" if v is None else f"{v:.1f}"}</text>')
    out.append("</svg>")
    return "".join(out)


def line_chart(xs: Sequence[float], ys: Sequence[float], *, title: str) -> str:
    """A polyline of (x, y) with min/max labels."""
    w, h, pad = 480, 200, 36
    if not xs:
        return ""
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    xr, yr = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    pts = " ".join(
        f"{pad + (x - x0) / xr * (w - 2 * pad):.1f},{h - pad - (y - y0) / yr * (h - 2 * pad):.1f}"
        for x, y in zip(xs, ys, strict=True)
    )
    return (
        f'<svg class="chart curve" role="img" aria-label="{esc(title)}" width="{w}" height="{h}" '
        f'xmlns="http://www.w3.org/2000/svg"><text x="4" y="14" font-weight="bold">{esc(title)}</text>'
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#999"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#999"/>'
        f'<polyline fill="none" stroke="#0969da" stroke-width="2" points="{pts}"/>'
        f'<text x="2" y="{pad + 4}">{y1:.3g}</text><text x="2" y="{h - pad}">{y0:.3g}</text>'
        f'<text x="{pad}" y="{h - pad + 16}">{x0:.3g}</text>'
        f'<text x="{w - pad - 20}" y="{h - pad + 16}">{x1:.3g}</text>'
        "</svg>"
    )


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def curves(rows: Sequence[MetricsRow]) -> str:
    """A line chart per numeric metric logged at ≥ 2 steps (x: ``step``, else the row index); a metric
    logged once is a value, not an empty plot; wall-clock fields (``time``, ``step_s``) are left out."""
    keys: dict[str, None] = {}
    for r in rows:
        for k, v in r.items():
            if k != "step" and k not in _CLOCK_KEYS and _number(v):
                keys[k] = None
    charts, single = [], []
    for key in sorted(keys, key=lambda k: (k not in ("reward", "mean_reward"), k)):
        pts = [(float(r.get("step", i)), float(r[key])) for i, r in enumerate(rows) if _number(r.get(key))]
        if len(pts) >= 2:
            charts.append(line_chart([p[0] for p in pts], [p[1] for p in pts], title=key))
        else:
            single.append(f'<tr><td>{esc(key)}</td><td class="num">{pts[0][1]:.4g}</td></tr>')
    once = (
        '<table class="single-metrics"><tr><th>metric (logged at one step)</th><th>value</th></tr>'
        + "".join(single)
        + "</table>"
        if single
        else ""
    )
    return "".join(charts) + once


def before_after_table(
    before: Sequence[RolloutRecord], after: Sequence[RolloutRecord], *, k: int, threshold: float
) -> str:
    """Completion, score, Pass@k and Pass^k before → after an update, with the delta."""
    b = summarize(before, k=k, threshold=threshold).overall
    a = summarize(after, k=k, threshold=threshold).overall
    rows = [
        ("completion", b.completion, a.completion, _fmt, 3),
        ("score (0–100; 20 = safe, nothing done)", b.score, a.score, _fmt, 1),
        (f"Pass@{k}", b.pass_at_k, a.pass_at_k, _fmt, 3),
        (f"Pass^{k}", b.pass_hat_k, a.pass_hat_k, _fmt, 3),
    ]
    body = "".join(
        f'<tr class="before-after"><td>{esc(name)}</td><td class="num">{f(x, d)}</td>'
        f'<td class="num">{f(y, d)}</td>'
        f'<td class="num">{"–" if x is None or y is None else f"{y - x:+.{d}f}"}</td></tr>'
        for name, x, y, f, d in rows
    )
    return (
        '<table id="before-after"><tr><th>the update</th><th>before</th><th>after</th><th>Δ</th></tr>'
        f"{body}</table>"
    )


# ---------------------------------------------------------------- trajectory viewer


def _pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return f"<pre>{esc(text)}</pre>"


def _messages(r: RolloutRecord) -> str:
    out = []
    for m in r.messages:
        calls = "".join(
            f'<div class="call">→ <code>{esc(c.name)}</code>{_pre(c.arguments)}</div>' for c in m.tool_calls
        )
        who = m.role + (f" ({m.name})" if m.name else "")
        out.append(
            f'<div class="msg {esc(m.role)}"><span class="role">{esc(who)}</span>'
            f"{_pre(m.content)}{calls}</div>"
        )
    return "".join(out) or '<p class="muted">no messages recorded</p>'


def _tool_calls(r: RolloutRecord, sid: str) -> str:
    by_seq = {e.get("seq"): e for e in r.audit}
    rows = []
    for c in r.tool_calls:
        ev = by_seq.get(c.seq, {})
        result = ev.get("result") if c.ok else (c.error or ev.get("error"))
        link = f'<a href="#{sid}-e{c.seq}">#{c.seq}</a>' if c.seq in by_seq else f"#{c.seq}"
        rows.append(
            f'<tr class="toolcall"><td>{link}</td><td><code>{esc(c.tool)}</code></td><td>{_pre(c.args)}</td>'
            f'<td class="{"passed" if c.ok else "failed"}">{"ok" if c.ok else "error"}</td>'
            f"<td>{_pre(result)}</td></tr>"
        )
    if not rows:
        return '<p class="muted">no tool calls</p>'
    return (
        "<table><tr><th>seq</th><th>tool</th><th>arguments</th><th>status</th><th>result</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _audit(r: RolloutRecord, sid: str) -> str:
    rows = []
    for e in r.audit:
        seq = e.get("seq")
        fault = f' <span class="badge failed">{esc(e["fault"])}</span>' if e.get("fault") else ""
        recs = e.get("records") or []
        rows.append(
            f'<tr id="{sid}-e{esc(seq)}" class="audit-event"><td>{esc(seq)}</td>'
            f"<td>{esc(e.get('service', ''))}</td>"
            f"<td><code>{esc(e.get('tool', ''))}</code>{fault}</td><td>{esc(e.get('status', ''))}</td>"
            f"<td>{_pre(recs) if recs else ''}</td></tr>"
        )
    if not rows:
        return '<p class="muted">no audit events</p>'
    return (
        "<table><tr><th>seq</th><th>service</th><th>tool</th><th>status</th><th>audit records</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _checks(r: RolloutRecord, sid: str) -> str:
    g = r.grade
    if g is None:
        label = f"{r.failure.kind}: {r.failure.detail}" if r.failure else "no grade"
        return f'<p class="infra">infrastructure failure — not scored ({esc(label)})</p>'
    seqs = {e.get("seq") for e in r.audit}
    rows = []
    for c in g.get("checks", []):
        ev = " ".join(
            f'<a href="#{sid}-e{s}">#{s}</a>' if s in seqs else f"#{s}" for s in c.get("evidence", [])
        )
        status = str(c.get("status", ""))
        rows.append(
            f'<tr class="check {esc(status)}"><td>{esc(c.get("name"))}</td><td>{esc(c.get("kind"))}</td>'
            f'<td class="num">{_fmt(c.get("weight"), 2)}</td><td class="{esc(status)}">{esc(status)}</td>'
            f'<td class="num">{_fmt(c.get("score"), 2)}</td><td>{esc(c.get("detail", ""))}</td>'
            f"<td>{ev}</td></tr>"
        )
    forb = g.get("forbidden_calls") or []
    forb_html = (
        '<p class="failed">forbidden calls: '
        + " ".join(f'<a href="#{sid}-e{s}">#{s}</a>' if s in seqs else f"#{s}" for s in forb)
        + "</p>"
        if forb
        else ""
    )
    notes = "".join(f'<p class="muted">{esc(n)}</p>' for n in g.get("notes", []))
    return (
        "<table><tr><th>check</th><th>kind</th><th>weight</th><th>status</th><th>score</th><th>why</th>"
        f"<th>evidence</th></tr>{''.join(rows)}</table>{forb_html}{notes}"
    )


def _tree(tree: PrefixTree | None) -> str:
    if tree is None:
        return '<p class="muted">no prefix tree given for this rollout</p>'
    kids = tree.children()

    def node(n: TreeNode) -> str:
        label = f" {esc(n.label)}" if n.label else ""
        sub = "".join(node(c) for c in kids.get(n.id, []))
        return (
            f'<li class="tree-node {n.status}" data-status="{n.status}"><span class="node">{esc(n.id)}</span>'
            f'<span class="badge {n.status}">{n.status}</span><span class="badge">{n.kind}</span>'
            f'<span class="muted"> {n.tokens} tok</span>{label}'
            f"{f'<ul class=tree>{sub}</ul>' if sub else ''}</li>"
        )

    totals = tree.tokens_by_status()
    summary = ", ".join(f'<span class="{k}">{k} {v}</span>' for k, v in totals.items())
    return f'<p>tokens: {summary}</p><ul class="tree">{"".join(node(n) for n in kids.get(None, []))}</ul>'


def _rollout(r: RolloutRecord, tree: PrefixTree | None) -> str:
    sid = slug(r.rollout_id)
    reward = r.rewards.reward if r.rewards else (r.grade or {}).get("reward")
    status = "infra failure" if r.status == "infra_failure" else f"reward {_fmt(reward)}"
    search = esc(f"{r.rollout_id} {r.task_id} {r.harness} {r.category} {r.difficulty} {r.status}".lower())
    head = (
        f"<h3>{esc(r.task_id)} · {esc(r.harness)} · trial {r.trial} — "
        f'<span class="{"infra" if r.status != "ok" else ""}">{esc(status)}</span></h3>'
        f'<p class="muted">rollout {esc(r.rollout_id)} · backend {esc(r.backend or "–")} · '
        f"{r.n_calls} model call(s) · {r.wall_s:.1f}s</p>"
    )
    parts = [
        ("checks", "Checks (which passed and why)", _checks(r, sid), True),
        ("messages", "Messages", _messages(r), False),
        ("toolcalls", "Tool calls", _tool_calls(r, sid), False),
        ("audit", "Audit events", _audit(r, sid), False),
        ("tree", "Prefix tree", _tree(tree), False),
    ]
    body = "".join(
        f'<details class="{cls}" id="{sid}-{cls}"{" open" if is_open else ""}>'
        f"<summary>{title}</summary>{content}</details>"
        for cls, title, content, is_open in parts
    )
    final = f"<p><b>final answer:</b></p>{_pre(r.final_answer)}" if r.final_answer else ""
    return f'<section class="rollout" id="{sid}" data-search="{search}">{head}{final}{body}</section>'


# ---------------------------------------------------------------- the document


def render_report(
    records: Sequence[RolloutRecord],
    *,
    k: int = 1,
    threshold: float = 0.75,
    trees: Mapping[str, PrefixTree] | None = None,
    metrics: Sequence[MetricsRow] = (),
    title: str = "coworkenv evaluation report",
    problems: Sequence[str] = (),
    before_after: tuple[Sequence[RolloutRecord], Sequence[RolloutRecord]] | None = None,
    preface: str = "",
) -> str:
    """The report as one HTML string (see the module docstring); ``preface`` is trusted HTML put
    first in the body (e.g. the job's before → after section)."""
    s = summarize(records, k=k, threshold=threshold)
    trees = trees or {}
    first: dict[tuple[str, str], str] = {}
    for r in records:
        first.setdefault(r.group_key, r.rollout_id)
    nav = [
        ("summary", "Summary"),
        ("categories", "Categories"),
        ("difficulties", "Difficulties"),
        ("tasks", "Tasks"),
        ("failures", "Failures"),
        ("plots", "Plots"),
        ("rollouts", "Trajectories"),
    ]
    score_plot = bar_chart([(g.name, g.score) for g in s.by_category], title="Score by category (0–100)")
    curve = curves(metrics)
    curve_html = curve or '<p class="muted">no training metrics given (--metrics metrics.jsonl)</p>'
    index = "".join(
        f'<li><a href="#{slug(r.rollout_id)}">{esc(r.task_id)} · {esc(r.harness)} · trial {r.trial}</a></li>'
        for r in records
    )
    warn = "".join(f'<p class="failed">{esc(p)}</p>' for p in problems)
    delta = before_after_table(*before_after, k=k, threshold=threshold) if before_after is not None else ""
    o = s.overall
    body = f"""
<header><h1>{esc(title)}</h1><div>{len(records)} rollout(s), {o.tasks} task×harness group(s), k={s.k},
pass threshold {s.threshold}</div></header>
<nav>{"".join(f'<a href="#{i}">{t}</a>' for i, t in nav)}</nav>
<main>{warn}{preface}
<section id="summary"><h2>Summary</h2>
{delta}<p>Completion <b>{_fmt(o.completion)}</b> · Score <b>{_fmt(o.score, 1)}</b> / 100
· Pass@{s.k} <b>{_pct(o.pass_at_k)}</b> · Pass^{s.k} <b>{_pct(o.pass_hat_k)}</b>
· infrastructure failures <b>{o.infra_failures}</b> (not scored)</p>
<p class="muted">{esc(SCORE_NOTE)}.</p>
{_group_table([o, *s.by_harness], s.k, "harness")}</section>
<section id="categories"><h2>By category</h2>{_group_table(s.by_category, s.k, "category")}</section>
<section id="difficulties"><h2>By difficulty</h2>{_group_table(s.by_difficulty, s.k, "difficulty")}</section>
<section id="tasks"><h2>Tasks</h2>{_tasks_table(s, first)}</section>
<section id="failures"><h2>Failures and unjudged checks</h2>{_failures(s)}</section>
<section id="plots"><h2>Plots</h2>{score_plot}
<div id="curve"><h3>Training curves</h3>{curve_html}</div></section>
<section id="rollouts"><h2>Trajectories</h2>
<input id="filter" type="search" placeholder="filter: task, harness, status…"> <span id="filter-count"></span>
<ul class="index">{index}</ul>
{"".join(_rollout(r, trees.get(r.rollout_id)) for r in records)}
</section></main>"""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{_asset('report.css')}</style></head>"
        f"<body>{body}<script>{_asset('report.js')}</script></body></html>\n"
    )
