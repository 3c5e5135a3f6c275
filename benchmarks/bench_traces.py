"""Benchmark: prefix trees of real harness traces — calls, leaves, auxiliary/dead leaves, token savings.

Issue 5, item 4 and the second half of its benchmark (issue 17: all eight real harnesses): rollouts
of the real, unmodified harnesses (Claude Code, Codex, Qwen Code, opencode, Gemini CLI, OpenClaw,
mini-swe-agent, the OpenHands SDK) and of the built-in loop, through the capturing proxy with
the ``reference`` backend (the task's reference solution played by :class:`ScriptedBackend`;
byte-level token ids), then a prefix tree per rollout (:mod:`coworkenv.trajectories`).

Contract:

* Rollouts: CLI harnesses run ``--tasks`` (default: two long D2.5 tasks and two multi-turn ones), the
  loop runs ``--loop-tasks`` (default: every D2.5 task M1115–M1124 and MT01–MT03), each ``--trials``
  times, into ``--out`` (resumes a partial directory) or a fresh temporary directory. ``--reuse DIR``
  runs nothing and analyses ``DIR`` (``rollouts.jsonl`` + ``calls/``). A harness whose CLI is not
  installed is skipped with a note (``scripts/install_harnesses.sh`` installs them).
* Per harness, two views of the same captured calls:
  ``as captured`` — the ids the proxy recorded;
  ``eot as one token`` — every ``<|im_end|>`` byte run in a prompt replaced by the end-of-turn id
  (256) the scripted backend emits as the last generated token, i.e. what a tokenizer whose
  end-of-turn marker is one special token (every real chat tokenizer) gives. The scripted backend's
  ``ByteTokenizer`` spells the marker as 10 bytes in prompts but ends each output with id 256, so as
  captured no prompt extends the previous call token-exactly (see the notes in the results). When
  the two agree the backend has been fixed and the second view is a no-op.
* Counted per harness and view: rollouts, calls, (logical) leaves, auxiliary calls by reason, dead
  leaves, rewrite forks (message-matched continuations), segments, retained branches, tokens trained
  per call (sum of prompt+output over the calls on retained branches) vs once in the tree (distinct
  tree tokens), their ratio, a token-level trie over the retained branches (shares partial
  prefixes too: the bound for a tree that attaches only at whole call histories), generated
  tokens; the tree invariant (path tokens == prompt + output) is checked on every retained branch.
* ``--faults RATE`` gives every rollout a reference backend that injects seeded faults (default
  kinds 5xx, timeout, truncated) to show how each harness retries; results get a ``-faults<RATE>``
  suffix.
* History diagnostics (message level, view-independent): for each call, against the call it
  continues (its logical parent, else the previous main call), whether the harness sent back the
  earlier messages and the assistant turn unchanged, renamed tool-call ids, re-serialized arguments,
  changed assistant text, changed an earlier message (which role), changed the system prompt or the
  tool list, or started a shorter context.
* Writes ``benchmarks/results/traces-<date>[-quick][-faults<RATE>].{json,md}``: the command, machine, load
  average (start, end, peak sampled every 2 s), rollout wall time, per-harness rows, per-rollout
  counters and the notes.

Run:  .venv/bin/python benchmarks/bench_traces.py [--trials 2] [--concurrency 2] [--out DIR]
      .venv/bin/python benchmarks/bench_traces.py --reuse DIR        # analyse existing rollouts
      .venv/bin/python benchmarks/bench_traces.py --quick            # smoke: 1 short task, 1 trial
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _machine import cpu_model  # benchmarks/_machine.py

from coworkenv.proxy.backends.scripted import EOS_ID
from coworkenv.proxy.capture import CapturedCall, read_calls
from coworkenv.proxy.codecs.chatml import END
from coworkenv.proxy.messages import Message
from coworkenv.rollout.harnesses import HARNESS_NAMES
from coworkenv.rollout.record import RolloutRecord, calls_path, read_records
from coworkenv.trajectories.filters import FilterConfig, filter_tree
from coworkenv.trajectories.report import token_counts
from coworkenv.trajectories.rewrite import canonical_arguments, response_message
from coworkenv.trajectories.samples import rollout_samples
from coworkenv.trajectories.tree import PrefixTree, build_tree

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
HARNESSES = HARNESS_NAMES
CLI_HARNESSES = tuple(h for h in HARNESS_NAMES if h != "loop")
DEFAULT_TASKS = (
    "M1115_enterprise_sla_escalation",
    "M1124_churn_risk_outreach",
    "MT01_meeting_slot_booking",
    "MT03_chair_restock_order",
)
DEFAULT_LOOP_TASKS = (
    "M1115_enterprise_sla_escalation",
    "M1116_overdue_invoice_collections",
    "M1117_jobs_failing_since_deploy",
    "M1118_launch_deadline_meeting_cleanup",
    "M1119_premium_sla_service_credits",
    "M1120_stockout_risk_reorder",
    "M1121_contract_renewal_prep",
    "M1122_stale_integration_credentials",
    "M1123_overdue_action_items_followup",
    "M1124_churn_risk_outreach",
    "MT01_meeting_slot_booking",
    "MT02_expense_report_cost_center",
    "MT03_chair_restock_order",
)
QUICK_TASKS = ("M1003_ticket_kb_resolution",)
VIEWS = ("captured", "eot")
VIEW_TITLES = {"captured": "as captured", "eot": "eot as one token"}
EOT_BYTES = np.frombuffer(END.encode("utf-8"), dtype=np.uint8).astype(np.int64)


# ---------------------------------------------------------------- the eot view


def eot_as_one_token(ids: Sequence[int]) -> tuple[int, ...]:
    """``ids`` with every byte run spelling the end-of-turn marker replaced by :data:`EOS_ID`."""
    arr = np.asarray(ids, dtype=np.int64)
    n, k = len(arr), len(EOT_BYTES)
    if n < k:
        return tuple(ids)
    hit = np.ones(n - k + 1, dtype=bool)
    for j in range(k):
        hit &= arr[j : n - k + 1 + j] == EOT_BYTES[j]
    starts = np.flatnonzero(hit)
    if len(starts) == 0:
        return tuple(ids)
    keep = np.ones(n, dtype=bool)
    for j in range(1, k):  # the marker bytes cannot overlap themselves, so runs are disjoint
        keep[starts + j] = False
    arr = arr.copy()
    arr[starts] = EOS_ID
    return tuple(arr[keep].tolist())


def eot_view(calls: list[CapturedCall]) -> list[CapturedCall]:
    return [c.model_copy(update={"prompt_ids": eot_as_one_token(c.prompt_ids)}) for c in calls]


# ---------------------------------------------------------------- history diagnostics


def _args_equal_canonically(a: str, b: str) -> bool:
    return canonical_arguments(a) == canonical_arguments(b)


def history_diagnostics(tree: PrefixTree, aux: dict[int, str]) -> Counter[str]:
    """What the harness sent back, per call, compared with the call it continues (message level)."""
    c: Counter[str] = Counter()
    prev_main: int | None = None
    for node in tree.calls:
        if node.call is None:
            continue
        if node.index in aux:
            continue
        pred_index = node.logical_parent if node.logical_parent > 0 else prev_main
        prev_main = node.index
        if pred_index is None:
            continue
        pred = tree.nodes[pred_index].call
        assert pred is not None
        c["continuations"] += 1
        before: tuple[Message, ...] = pred.request.messages
        now: tuple[Message, ...] = node.call.request.messages
        if [t.name for t in pred.request.tools] != [t.name for t in node.call.request.tools]:
            c["tools_changed"] += 1
        if (
            before
            and now
            and before[0].role == now[0].role == "system"
            and before[0].content != now[0].content
        ):
            c["system_changed"] += 1
        if len(now) <= len(before):
            c["shorter_context"] += 1
            continue
        changed = [k for k in range(len(before)) if before[k] != now[k]]
        for k in changed:
            c[f"earlier_{before[k].role}_changed"] += 1
        sent = now[len(before)]
        got = response_message(pred)
        clean = not changed
        if sent.role != "assistant":
            c["assistant_turn_missing"] += 1
            clean = False
        else:
            if len(sent.tool_calls) != len(got.tool_calls):
                c["tool_calls_dropped_or_added"] += 1
                clean = False
            for s, g in zip(sent.tool_calls, got.tool_calls, strict=False):
                if s.id != g.id:
                    c["ids_renamed"] += 1
                    clean = False
                if s.name != g.name:
                    c["tool_renamed"] += 1
                    clean = False
                if s.arguments != g.arguments:
                    clean = False
                    c[
                        "args_reserialized"
                        if _args_equal_canonically(s.arguments, g.arguments)
                        else "args_changed"
                    ] += 1
            if sent.content != got.content:
                clean = False
                c[
                    "assistant_text_trimmed"
                    if sent.content.strip() in got.content
                    else "assistant_text_changed"
                ] += 1
        if clean:
            c["history_unchanged"] += 1
    return c


# ---------------------------------------------------------------- analysis


def trie_tokens(leaves: Sequence[CapturedCall]) -> int:
    """Distinct tokens of a token-level trie over the branches' ``prompt + output`` (shares partial
    prefixes too, not only whole earlier histories): each branch adds its length minus its longest
    common prefix with an earlier branch."""
    seen: list[npt.NDArray[np.int64]] = []
    total = 0
    for call in leaves:
        seq = np.asarray((*call.prompt_ids, *call.output_ids), dtype=np.int64)
        best = 0
        for other in seen:
            n = min(len(seq), len(other))
            diff = np.flatnonzero(seq[:n] != other[:n])
            best = max(best, int(diff[0]) if len(diff) else n)
        total += len(seq) - best
        seen.append(seq)
    return total


def analyse_rollout(record: RolloutRecord, calls: list[CapturedCall], cfg: FilterConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"rollout_id": record.rollout_id, "task": record.task_id, "harness": record.harness}
    out["status"] = record.status
    out["reward"] = None if record.rewards is None else record.rewards.reward
    for view in VIEWS:
        cs = calls if view == "captured" else eot_view(calls)
        tree = build_tree(cs, record.rollout_id)
        filt = filter_tree(tree, cfg)
        samples, why = rollout_samples(record, tree, filt)
        cnt: Counter[str] = Counter({k: v for k, v in filt.counters.items() if v})
        cnt["rollouts"] = 1
        for reason, k in tree.skipped.items():
            cnt[f"skipped_{reason}"] += k
        if why is None:
            cnt.update(token_counts(tree, filt))
            cnt["samples"] = len(samples)
            bad = 0
            for leaf in filt.branches:
                n = tree.nodes[leaf]
                assert n.call is not None
                want = np.asarray((*n.call.prompt_ids, *n.call.output_ids), dtype=np.int64)
                bad += int(not np.array_equal(tree.tokens(leaf), want))
            cnt["invariant_violations"] = bad
            cnt["tokens_trie"] = trie_tokens(
                [tree.nodes[b].call for b in filt.branches]  # type: ignore[misc]
            )
        else:
            cnt[f"no_samples_{why}"] = 1
        if view == "eot":
            out["history"] = dict(history_diagnostics(tree, filt.aux))
            out["token_parents"] = [n.parent for n in tree.calls]
        out[view] = dict(cnt)
    return out


def harness_rows(per_rollout: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for r in per_rollout:
        row = rows.setdefault(
            r["harness"], {"tasks": set(), "history": Counter(), **{v: Counter() for v in VIEWS}}
        )
        row["tasks"].add(r["task"])
        row["history"].update(r.get("history", {}))
        for v in VIEWS:
            row[v].update(r[v])
    out: dict[str, dict[str, Any]] = {}
    for h, row in sorted(rows.items(), key=lambda kv: HARNESSES.index(kv[0]) if kv[0] in HARNESSES else 99):
        d: dict[str, Any] = {"tasks": len(row["tasks"]), "history": dict(row["history"])}
        for v in VIEWS:
            c = row[v]
            tree = c.get("tokens_tree", 0)
            d[v] = dict(c) | {"ratio": round(c.get("tokens_per_call", 0) / tree, 2) if tree else None}
        out[h] = d
    return out


TABLE = (
    ("rollouts", "rollouts", False),
    ("calls", "calls", False),
    ("leaves", "leaves", True),
    ("auxiliary calls", "aux_calls", True),
    ("dead leaves", "dead_leaves", True),
    ("rewrite forks", "rewrite_forks", True),
    ("segments", "segments", True),
    ("retained branches", "branches", True),
    ("tokens, each call trained", "tokens_per_call", True),
    ("tokens, tree (prefixes once)", "tokens_tree", True),
    ("ratio per-call / tree", "ratio", True),
    ("tokens, token-level trie over branches", "tokens_trie", True),
    ("generated tokens", "generated", False),
)
HISTORY_ROWS = (
    "continuations",
    "history_unchanged",
    "ids_renamed",
    "args_reserialized",
    "args_changed",
    "assistant_text_trimmed",
    "assistant_text_changed",
    "tool_calls_dropped_or_added",
    "earlier_user_changed",
    "earlier_system_changed",
    "earlier_tool_changed",
    "earlier_assistant_changed",
    "system_changed",
    "tools_changed",
    "shorter_context",
)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.2f}"
    if isinstance(x, int) and x >= 10_000:
        return f"{x:,}"
    return str(x)


def table_md(rows: dict[str, dict[str, Any]]) -> str:
    hs = list(rows)
    lines = ["| | " + " | ".join(hs) + " |", "|---|" + "---:|" * len(hs)]
    lines.append("| tasks | " + " | ".join(str(rows[h]["tasks"]) for h in hs) + " |")
    for label, key, both in TABLE:
        if both:
            for v in VIEWS:
                vals = [_fmt(rows[h][v].get(key, 0 if key != "ratio" else None)) for h in hs]
                lines.append(f"| {label} ({VIEW_TITLES[v]}) | " + " | ".join(vals) + " |")
        else:
            lines.append(f"| {label} | " + " | ".join(_fmt(rows[h]["eot"].get(key, 0)) for h in hs) + " |")
    aux_keys = sorted({k for h in hs for k in rows[h]["eot"] if k.startswith("aux_") and k != "aux_calls"})
    for k in aux_keys:
        lines.append(f"| {k} (eot) | " + " | ".join(_fmt(rows[h]["eot"].get(k, 0)) for h in hs) + " |")
    skipped = sorted({k for h in hs for k in rows[h]["eot"] if k.startswith("skipped_")})
    for k in skipped:
        lines.append(f"| calls {k} | " + " | ".join(_fmt(rows[h]["eot"].get(k, 0)) for h in hs) + " |")
    inv = [_fmt(sum(rows[h][v].get("invariant_violations", 0) for v in VIEWS)) for h in hs]
    lines.append("| tree invariant violations | " + " | ".join(inv) + " |")
    lines.append("| **history (message level)** | " + " | ".join("" for _ in hs) + " |")
    extra = sorted({k for h in hs for k in rows[h]["history"]} - set(HISTORY_ROWS))
    for k in (*HISTORY_ROWS, *extra):
        if any(rows[h]["history"].get(k) for h in hs) or k in ("continuations", "history_unchanged"):
            lines.append(f"| {k} | " + " | ".join(_fmt(rows[h]["history"].get(k, 0)) for h in hs) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- running


class LoadSampler:
    """The 1-minute load average, sampled every ``period`` seconds in a daemon thread."""

    def __init__(self, period: float = 2.0) -> None:
        self.period = period
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.period)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def installed(harnesses: Sequence[str]) -> tuple[list[str], list[str]]:
    from coworkenv.rollout.harnesses import get_harness

    ok: list[str] = []
    notes: list[str] = []
    for name in harnesses:
        try:
            get_harness(name).check_installed()
            ok.append(name)
        except Exception as exc:  # any reason to skip is reported
            notes.append(f"{name}: skipped ({exc}); run scripts/install_harnesses.sh")
    return ok, notes


def run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from coworkenv.rollout.runner import run_rollouts
    from coworkenv.tasks.builtin import builtin_task

    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    wanted = [h.strip() for h in args.harness.split(",") if h.strip()]
    bad = sorted(set(wanted) - set(HARNESSES))
    if bad:
        sys.exit(f"bench_traces: unknown harness {bad}; choose from {', '.join(HARNESSES)}")
    harnesses, notes = installed(wanted)
    plan: list[tuple[list[str], list[str]]] = []
    cli = [h for h in harnesses if h != "loop"]
    if cli:
        plan.append((cli, args.tasks.split(",")))
    if "loop" in harnesses:
        plan.append((["loop"], args.loop_tasks.split(",")))
    info: dict[str, Any] = {"notes": notes, "batches": []}
    backend: Any = "reference"
    if args.faults > 0:
        from coworkenv.proxy.backends.scripted import Faults, ScriptedBackend
        from coworkenv.spec import TaskSpec

        kinds = tuple(k.strip() for k in args.fault_kinds.split(",") if k.strip())
        faults = Faults(rate=args.faults, seed=args.fault_seed, kinds=kinds)

        def backend(spec: TaskSpec) -> ScriptedBackend:
            return ScriptedBackend.from_reference(spec, faults=faults)

    for names, task_ids in plan:
        specs = [builtin_task(t) for t in task_ids]
        t0 = time.monotonic()
        summary = run_rollouts(
            specs, names, args.trials, backend, out, args.concurrency, timeout_cap_s=args.timeout
        )
        wall = time.monotonic() - t0
        print(f"  {','.join(names)}: {summary.line()}", flush=True)
        info["batches"].append(
            {"harnesses": names, "tasks": task_ids, "wall_s": round(wall, 1), "summary": summary.line()}
        )
    return info


def analyse_dir(root: Path, cfg: FilterConfig) -> tuple[list[dict[str, Any]], list[str]]:
    records, problems = read_records(root / "rollouts.jsonl")
    if not records and not (root / "rollouts.jsonl").exists():
        sys.exit(f"bench_traces: {root}/rollouts.jsonl not found: pass a rollouts directory to --reuse")
    per: list[dict[str, Any]] = []
    for rec in records:
        path = calls_path(root, rec.rollout_id)
        calls, bad = read_calls(path) if path.exists() else ([], [f"{path.name}: missing"])
        problems += [f"{rec.rollout_id}: {p}" for p in bad]
        per.append(analyse_rollout(rec, calls, cfg))
    return per, problems


def analysis_notes(rows: dict[str, dict[str, Any]], per: list[dict[str, Any]]) -> list[str]:
    """One line per finding worth reading next to the table."""
    notes: list[str] = []
    captured_forks = sum(r["captured"].get("rewrite_forks", 0) for r in rows.values())
    eot_forks = sum(r["eot"].get("rewrite_forks", 0) for r in rows.values())
    if captured_forks > eot_forks:
        notes.append(
            f"as captured, {captured_forks} calls are rewrite forks (vs {eot_forks} with the end-of-turn "
            "marker as one token): the scripted backend ends each output with id 256 while the next "
            "prompt spells `<|im_end|>` as 10 bytes, so hist(previous call) is never a token prefix "
            "of the next prompt and the tree degenerates to one root branch per call"
        )
    for h, row in rows.items():
        extra = row["eot"].get("tokens_tree", 0) - row["eot"].get("tokens_trie", 0)
        changed = {k: v for k, v in row["history"].items() if k.startswith("earlier_")}
        if extra > 0:
            notes.append(
                f"{h}: the tree holds {extra:,} tokens more than a token-level trie over the same branches "
                f"(a call whose prompt extends no earlier history restarts at the root; history changes "
                f"seen: {changed or 'none'})"
            )
        infra = sum(1 for r in per if r["harness"] == h and r["status"] != "ok")
        if infra:
            notes.append(f"{h}: {infra} rollout(s) are infra failures (no samples)")
    return notes


def machine() -> dict[str, Any]:
    model = cpu_model()
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def render(s: dict[str, Any]) -> str:
    load = s["load"]
    md = [
        f"# Real traces: prefix trees per harness ({s['date']})",
        "",
        f"Command: `{s['command']}`  ",
        f"Rollouts: `{s['rollouts_dir']}`; rollout wall time "
        f"{'- (reused)' if s['rollout_wall_s'] is None else str(s['rollout_wall_s']) + ' s'}; "
        f"analysis {s['analysis_s']} s  ",
        f"Machine: {s['machine']['cpus']} CPU(s), {s['machine']['cpu']}; load average (1 min) start "
        f"{load['start']:.2f}, peak {load['peak']:.2f}, end {load['end']:.2f}",
        "",
        (
            f"**Fault injection:** {s['faults']:g} of calls ({s['fault_kinds']}), seed {s['fault_seed']}.\n"
            if s.get("faults")
            else ""
        )
        + "Backend `reference` (the task's reference solution, byte-level ids). Two views of the same "
        "calls: *as captured*, and *eot as one token* (the `<|im_end|>` bytes in prompts read as the "
        "end-of-turn id the backend generates, as a real chat tokenizer does). Token counts are over "
        "the calls on retained branches.",
        "",
        table_md(s["harness"]),
    ]
    if s["notes"]:
        md += ["## Notes", "", *(f"- {n}" for n in s["notes"]), ""]
    return "\n".join(md)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reuse", type=Path, help="analyse this rollouts directory; run nothing")
    ap.add_argument("--out", type=Path, help="rollouts directory (resumed if partial); default: a temp dir")
    ap.add_argument("--harness", default=",".join(HARNESSES))
    ap.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="tasks of the CLI harnesses")
    ap.add_argument("--loop-tasks", default=",".join(DEFAULT_LOOP_TASKS), help="tasks of the built-in loop")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0, help="cap on each rollout's wall clock (s)")
    ap.add_argument("--max-leaves", type=int, default=32)
    ap.add_argument(
        "--faults",
        type=float,
        default=0.0,
        help="inject backend faults (timeout, 5xx, truncated, garbage turn) into this share of calls",
    )
    ap.add_argument("--fault-seed", type=int, default=0)
    ap.add_argument(
        "--fault-kinds",
        default="http_5xx,timeout,truncated",
        help="comma-separated: timeout, http_5xx, truncated, garbage (a garbage turn usually ends a CLI run)",
    )
    ap.add_argument("--quick", action="store_true", help="smoke test: one short task, one trial")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    if args.quick:
        args.tasks = args.loop_tasks = ",".join(QUICK_TASKS)
        args.trials = 1
    command = "python benchmarks/bench_traces.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    load_start = os.getloadavg()[0]
    info: dict[str, Any] = {"notes": [], "batches": []}
    t0 = time.monotonic()
    with LoadSampler() as sampler:
        if args.reuse is not None:
            root = args.reuse
        else:
            root = args.out or Path(tempfile.mkdtemp(prefix="bench-traces-"))
            print(f"rollouts -> {root}", flush=True)
            info = run(args, root)
        rollout_wall = time.monotonic() - t0
        t1 = time.monotonic()
        per, problems = analyse_dir(root, FilterConfig(max_leaves=args.max_leaves))
        analysis_s = time.monotonic() - t1
    rows = harness_rows(per)
    notes = list(info["notes"]) + problems + analysis_notes(rows, per)
    summary: dict[str, Any] = {
        "benchmark": "traces",
        "date": date.today().isoformat(),
        "time_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "quick": args.quick,
        "faults": args.faults,
        "fault_kinds": args.fault_kinds,
        "fault_seed": args.fault_seed,
        "rollouts_dir": str(root),
        "rollout_wall_s": round(rollout_wall, 1) if args.reuse is None else None,
        "analysis_s": round(analysis_s, 2),
        "batches": info["batches"],
        "machine": machine(),
        "load": {
            "start": load_start,
            "end": os.getloadavg()[0],
            "peak": max([load_start, *sampler.samples]),
        },
        "harness": rows,
        "notes": notes,
        "rollouts": per,
    }
    print(render(summary))
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        tag = ("-quick" if args.quick else "") + (f"-faults{args.faults:g}" if args.faults > 0 else "")
        stem = RESULTS / f"traces-{summary['date']}{tag}"
        json_path, md_path = Path(f"{stem}.json"), Path(f"{stem}.md")  # no with_suffix: "0.1"
        json_path.write_text(json.dumps(summary, indent=1, default=list) + "\n")
        md_path.write_text(render(summary))
        print(f"wrote {stem}.json and {stem}.md")


if __name__ == "__main__":
    main()
