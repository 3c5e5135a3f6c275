"""Fuzz every registered tool with random arguments (hypothesis).

Properties: no exception escapes ``Trial.call``; every call records exactly one audit event; a
rejected call leaves the trial's state hash unchanged; an accepted read call changes nothing.
Arguments mix schema-shaped values, ids that exist in the fixtures, wrong types, missing required
keys and unknown keys.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coworkenv.services import Host
from coworkenv.services.registry import SERVICES, TOOLS
from coworkenv.spec import TaskSpec
from coworkenv.tasks.builtin import builtin_tasks


def _records_for(service: str) -> dict[str, list[dict[str, Any]]]:
    for spec in builtin_tasks():
        if service in spec.services and any(spec.services[service].values()):
            return spec.services[service]
    return {}


def _ids(records: dict[str, list[dict[str, Any]]], service: str) -> list[str]:
    out: list[str] = []
    for tname, rows in records.items():
        key = SERVICES[service].tables[tname].key if tname in SERVICES[service].tables else None
        out += [str(r[key]) for r in rows if key and key in r]
    return out or ["X-1"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=6,
)


def _value(schema: dict[str, Any], ids: list[str]) -> st.SearchStrategy[Any]:
    t = schema.get("type")
    typed: st.SearchStrategy[Any]
    if t == "string":
        typed = (
            st.sampled_from(ids)
            | st.text(max_size=20)
            | st.sampled_from(["open", "all", "high", "2026-03-01", ""])
        )
    elif t == "integer":
        typed = st.integers(-3, 200)
    elif t == "number":
        typed = st.floats(allow_nan=True, allow_infinity=True)
    elif t == "boolean":
        typed = st.booleans()
    elif t == "array":
        typed = st.lists(st.sampled_from(ids) | st.text(max_size=8), max_size=3)
    else:
        typed = _json
    return st.one_of(typed, typed, typed, _json)


def _args(tool: str, ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    schema = TOOLS[tool].input_schema()
    props = schema.get("properties", {})
    return st.fixed_dictionaries(
        {}, optional={k: _value(v, ids) for k, v in props.items()} | {"unexpected": _json}
    )


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_fuzz_every_tool_of(service: str) -> None:
    records = _records_for(service)
    ids = _ids(records, service)
    tools = sorted(t for t, d in TOOLS.items() if d.service == service)
    spec = TaskSpec(
        id=f"fuzz-{service}",
        name="fuzz",
        category="fuzz",
        difficulty="easy",
        mock_today="2026-03-10",
        request="fuzz",
        services={service: records},
        tools=tuple(tools),
    )
    host = Host()
    host.add_task(spec)
    trial = host.open_trial(spec.id, "fuzz")

    @settings(max_examples=40 * len(tools), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(tools).flatmap(lambda t: st.tuples(st.just(t), _args(t, ids))))
    def run(call: tuple[str, dict[str, Any]]) -> None:
        tool, args = call
        before = trial.state_hash()
        n = len(trial.audit)
        result = trial.call(tool, args)
        assert len(trial.audit) == n + 1
        assert result.event is trial.audit[-1]
        if not result.ok:
            assert trial.state_hash() == before, (tool, args, result.body)
            assert isinstance(result.body, dict)
            assert isinstance(result.body.get("error"), str)
            assert result.status >= 400
        elif TOOLS[tool].kind == "read":
            assert trial.state_hash() == before, f"read tool {tool} changed state"

    run()
    trial.reset()
    assert trial.audit == []


def test_unknown_and_unexposed_tools_are_structured_errors() -> None:
    from tests.conftest import base_spec

    host = Host()
    host.add_task(TaskSpec.model_validate(base_spec()))
    trial = host.open_trial("t1")
    r = trial.call("helpdesk_teleport", {})
    assert (r.ok, r.status, r.body["code"]) == (False, 404, "unknown_tool")
    exposed_elsewhere = next(t for t, d in TOOLS.items() if d.service != "helpdesk")
    r = trial.call(exposed_elsewhere, {})
    assert r.body["code"] == "tool_not_available"
    r = trial.call("helpdesk_get_ticket", ["not", "a", "dict"])  # type: ignore[arg-type]
    assert r.body["code"] == "invalid_arguments"
