"""The load rig's parts: the latency-simulating backend and the dialect agents (benchmarks/bench_scale.py)."""

from __future__ import annotations

import asyncio
import gc
import os
import time
from pathlib import Path

import pytest

from coworkenv.errors import CoworkError
from coworkenv.proxy.backends import make_backend
from coworkenv.proxy.backends.scripted import ScriptedBackend
from coworkenv.proxy.backends.simulated import SimulatedBackend, simulated_logprob
from coworkenv.proxy.capture import read_calls
from coworkenv.proxy.messages import ChatRequest, Message
from coworkenv.rollout.harnesses import get_harness
from coworkenv.rollout.harnesses.dialect_agent import DialectAgent
from coworkenv.rollout.runner import run_rollouts
from coworkenv.tasks.builtin import builtin_task

M1003 = "M1003_ticket_kb_resolution"
MT01 = "MT01_meeting_slot_booking"
DIALECT = {"agent-chat": "openai_chat", "agent-responses": "openai_responses", "agent-messages": "anthropic"}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COWORKENV_NO_PROGRESS", "1")


def test_simulated_backend_paces_the_inner_turn_and_gives_deterministic_logprobs() -> None:
    spec = builtin_task(M1003)
    backend = SimulatedBackend(ScriptedBackend.from_reference(spec), ttft_s=0.05, tpot_s=0.001)
    request = ChatRequest(messages=(Message(role="user", content=spec.request),))
    t0 = time.perf_counter()
    made = asyncio.run(backend.complete(request))
    took = time.perf_counter() - t0
    expected = 0.05 + 0.001 * len(made.output_ids)
    assert took >= expected * 0.99
    assert backend.timings[-1][1] == pytest.approx(expected)
    plain = asyncio.run(ScriptedBackend.from_reference(spec).complete(request))
    assert made.output_ids == plain.output_ids
    assert made.prompt_ids == plain.prompt_ids
    assert type(made.prompt_ids) is tuple
    assert made.turn == plain.turn
    assert made.logprobs == tuple(simulated_logprob(t, i) for i, t in enumerate(made.output_ids))
    assert all(-2.0 <= lp < 0.0 for lp in made.logprobs)
    assert len(set(made.logprobs)) > 1


def _is_copy_of(o: object, prompt: tuple[int, ...]) -> bool:
    """Whether ``o`` is another tuple of the prompt's ids. Only int tuples are compared: a tuple of
    another library's objects (gradio's fonts) may define ``__eq__`` that raises against an int."""
    return (
        type(o) is tuple
        and o is not prompt
        and len(o) == len(prompt)
        and all(type(x) is int for x in o)
        and o == prompt
    )


def test_simulated_backend_holds_no_prompt_tuple_while_it_generates() -> None:
    """A call in flight keeps its prompt's ids out of the cyclic collector's reach (an ``array``): a
    young collection at 1,000 live calls walked thousands of ints per call otherwise."""
    spec = builtin_task(M1003)
    request = ChatRequest(messages=(Message(role="user", content=spec.request),))
    prompt = asyncio.run(ScriptedBackend.from_reference(spec).complete(request)).prompt_ids
    assert len(prompt) > 50

    async def probe() -> list[int]:
        backend = SimulatedBackend(ScriptedBackend.from_reference(spec), ttft_s=0.3, tpot_s=0.0)
        call = asyncio.ensure_future(backend.complete(request))
        await asyncio.sleep(0.15)  # the call is generating
        tracked = [len(o) for o in gc.get_objects() if _is_copy_of(o, prompt)]
        assert (await call).prompt_ids == prompt
        return tracked

    assert asyncio.run(probe()) == []


def test_simulated_specs_are_checked() -> None:
    with pytest.raises(CoworkError, match="unknown option"):
        make_backend(f"simulated:{M1003}?ttft=5")
    with pytest.raises(CoworkError, match="name the tasks"):
        make_backend("simulated?ttft_ms=5")
    with pytest.raises(CoworkError, match="milliseconds"):
        make_backend(f"simulated:{M1003}?ttft_ms=soon")
    made = make_backend(f"simulated:{M1003}?ttft_ms=7&tpot_ms=0.5")
    assert isinstance(made, SimulatedBackend)
    assert (made.ttft_s, made.tpot_s) == (0.007, 0.0005)


@pytest.mark.parametrize("harness", ["agent-chat", "agent-responses", "agent-messages"])
def test_each_dialect_agent_completes_tasks_through_proxy_and_services(tmp_path: Path, harness: str) -> None:
    specs = [builtin_task(M1003), builtin_task(MT01)]
    summary = run_rollouts(specs, [harness], 2, "simulated?ttft_ms=20&tpot_ms=0.05", tmp_path, 4)
    assert summary.ok == 4, [r.failure for r in summary.records]
    for rec in summary.records:
        assert rec.harness == harness
        assert rec.rewards is not None
        assert rec.rewards.reward == pytest.approx(1.0), rec.grade
        calls, problems = read_calls(tmp_path / "calls" / f"{rec.rollout_id}.calls.jsonl")
        assert not problems
        assert len(calls) == rec.n_calls == rec.meta["model_calls"]
        assert {c.dialect for c in calls} == {DIALECT[harness]}
        assert all(c.logprobs and min(c.logprobs) < 0 for c in calls)
        # every model call took at least the engine's time to first token, as its client saw it
        assert all(s >= 0.02 for s in rec.meta["model_call_s"])
        # the tools went over HTTP to the services, and the trial audited each one
        assert len(rec.meta["tool_call_s"]) == len(rec.audit) > 0
    mt = next(r for r in summary.records if r.task_id == MT01)
    assert any("2:30 pm" in m.content for m in mt.messages if m.role == "user"), "the simulated user answered"


def test_dialect_agent_names_resolve() -> None:
    assert get_harness("agent-responses").name == "agent-responses"
    with pytest.raises(ValueError, match="dialect"):
        DialectAgent("grpc")  # type: ignore[arg-type]


def test_the_proxy_keeps_only_the_newest_closed_rollouts(tmp_path: Path) -> None:
    from coworkenv.proxy.capture import CaptureStore
    from coworkenv.proxy.server import CLOSED_KEPT, ProxyServer

    proxy = ProxyServer(ScriptedBackend.from_reference(builtin_task(M1003)), CaptureStore(tmp_path))
    for i in range(CLOSED_KEPT + 10):
        proxy.open_rollout(f"r{i}")
        proxy.close_rollout(f"r{i}")
    assert len(proxy._closed) == CLOSED_KEPT
    assert proxy.stats(f"r{CLOSED_KEPT + 9}") == {"calls": 0, "errors": 0, "pending": 0}
    with pytest.raises(KeyError):
        proxy.stats("r0")
    assert proxy.open_rollout("r0").startswith("/r/r0/")  # an evicted id reopens, its seq from the store


def test_bench_scale_writes_a_level_with_every_figure(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "scale.json"
    cmd = [
        sys.executable,
        "bench_scale.py",
        "--rollouts",
        "25",
        "--warmup",
        "0",
        "--ttft-ms",
        "5",
        "--out",
        str(out),
    ]
    subprocess.run(cmd, cwd=root / "benchmarks", check=True, capture_output=True, timeout=300)
    doc = json.loads(out.read_text())
    (level,) = doc["levels"]
    assert level["recorded"] == level["graded"] == 25
    assert level["infra_failures"] == {}
    assert level["mean_reward"] == 1.0
    assert level["model_calls"] > 25
    assert level["live_rollouts_peak"] > 1
    assert level["added_ms"]["p50"] >= 0
    assert level["capture_unreadable"] == 0
    assert level["exactly_once"]
    assert level["records_on_file"] == 25
    assert {"date", "commit", "command", "machine", "setup"} <= set(doc)


def test_bench_scale_splits_a_level_over_processes(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "scale.json"
    cmd = [sys.executable, "bench_scale.py", "--rollouts", "50", "--procs", "2", "--warmup", "0", "--pin"]
    cmd += ["--ttft-ms", "5", "--out", str(out)]
    subprocess.run(cmd, cwd=root / "benchmarks", check=True, capture_output=True, timeout=300)
    (level,) = json.loads(out.read_text())["levels"]
    assert level["mode"] == "procs"
    assert level["pinned"]
    assert len(level["per_process"]) == 2
    first_two = sorted(os.sched_getaffinity(0))[:2]
    assert sorted(row["cpus"] for row in level["per_process"]) == [[c] for c in first_two]  # a core each
    assert [row["rollouts"] for row in level["per_process"]] == [25, 25]
    assert level["graded"] == 50
    assert level["exactly_once"]


def test_bench_proxy_load_measures_each_server_under_the_same_load(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "proxy-load.json"
    cmd = [sys.executable, "bench_proxy_load.py", "--rollouts", "25", "--rate", "250", "--pin", "both"]
    bench = root / "benchmarks"
    subprocess.run([*cmd, "--out", str(out)], cwd=bench, check=True, capture_output=True, timeout=300)
    doc = json.loads(out.read_text())
    assert [row["pinned"] for row in doc["levels"]] == [False, True] * 3  # each server unpinned, then pinned
    pinned = next(row for row in doc["levels"] if row["mode"] == "proxy" and row["pinned"])
    assert 0 <= pinned["capture_switched_share"] <= 1
    assert pinned["capture_ms_unswitched"]["p50"] > 0
    rows = {row["mode"]: row for row in doc["levels"] if not row["pinned"]}
    assert set(rows) == {"direct", "nocapture", "proxy"}
    assert len({row["calls"] for row in rows.values()}) == 1  # the identical load on every server
    assert rows["direct"]["calls"] > 25
    assert rows["proxy"]["capture_ms"]["p50"] > 0  # the capture was timed inside the proxy
    assert rows["nocapture"]["capture_ms"] is None
    for row in rows.values():
        assert row["added_ms"]["p50"] >= 0
        assert row["server_cpu_ms_per_call"] > 0
        assert row["rss_peak_mb"] >= row["rss_serving_mb"]
    assert {"date", "commit", "command", "machine", "setup"} <= set(doc)


def test_cpu_scaling_measures_k_processes_against_one(tmp_path: Path) -> None:
    """The machine's own multi-process ceiling: each round's one-alone and K-together rates and
    their ratio, with the machine it ran on."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "cpu-scaling.json"
    cmd = [sys.executable, "cpu_scaling.py", "--procs", "2", "--seconds", "0.3", "--repeats", "2"]
    subprocess.run(
        [*cmd, "--out", str(out)], cwd=root / "benchmarks", check=True, capture_output=True, timeout=120
    )
    doc = json.loads(out.read_text())
    assert len(doc["rounds"]) == 2
    for r in doc["rounds"]:
        assert r["alone_per_s"] > 0
        assert len(r["together_per_s"]) == 2
        assert abs(r["ratio"] - sum(r["together_per_s"]) / r["alone_per_s"]) < 0.01  # rates are rounded
    assert doc["ratio"]["min"] <= doc["ratio"]["median"] <= doc["ratio"]["max"]
    assert {"date", "commit", "command", "machine"} <= set(doc)
