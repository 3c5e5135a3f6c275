"""Task spec: schema, loading, and mutated specs rejected with errors naming the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv.errors import SpecError
from coworkenv.spec import CHECK_KINDS, TaskSpec, task_json_schema
from coworkenv.tasks.load import load_spec, spec_from_data
from tests.conftest import base_spec


def _write(tmp_path: Path, data: Any, name: str = "task.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def test_valid_spec_loads_and_round_trips(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, base_spec()))
    again = load_spec(_write(tmp_path, json.loads(spec.model_dump_json()), "again.json"))
    assert again == spec
    assert spec.forbidden_tools == {"helpdesk_close_ticket"}


def test_schema_is_published_and_covers_check_kinds() -> None:
    schema = task_json_schema()
    text = json.dumps(schema)
    assert len(CHECK_KINDS) == 12
    for kind in CHECK_KINDS:
        assert f'"{kind}"' in text
    assert schema["title"] == "coworkenv TaskSpec"


def test_spec_is_frozen() -> None:
    spec = TaskSpec.model_validate(base_spec())
    with pytest.raises(Exception, match="frozen"):
        spec.request = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d.pop("request"), "request", "Field required"),
        (lambda d: d["completion_checks"][0].update(weight=0.5), "", "sum to 1"),
        (lambda d: d["services"].update(nosuch={}), "services.nosuch", "unknown service"),
        (lambda d: d["tools"].append("helpdesk_fly"), "tools[4]", "unknown tool"),
        (lambda d: d.update(mock_today="yesterday"), "mock_today", "date"),
        (lambda d: d["completion_checks"][0].update(kind="telepathy"), "completion_checks.0", "tag"),
        (
            lambda d: d["completion_checks"][1].update(action_key="deleted"),
            "completion_checks[1].action_key",
            "audit key",
        ),
        (lambda d: d.update(colour="blue"), "colour", "Extra inputs"),
        (lambda d: d["completion_checks"][0].update(weight="heavy"), "completion_checks.0.weight", "number"),
        (
            lambda d: d["forbidden"].append({"tool": "helpdesk_list_tickets"}),
            "",
            "required by a check and forbidden",
        ),
        (
            lambda d: d["services"]["helpdesk"]["tickets"][0].pop("ticket_id"),
            "services.helpdesk.tickets[0].ticket_id",
            "Field required",
        ),
    ],
)
def test_mutated_spec_names_the_field(tmp_path: Path, mutate: Any, field: str, words: str) -> None:
    data = copy.deepcopy(base_spec())
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    msg = str(exc.value)
    assert str(path) in msg
    assert field in msg
    assert words in msg


def test_syntax_errors_name_the_position(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text('{"id": "x",\n  "name": }')
    with pytest.raises(SpecError, match=r"(?s)bad.json.*line 2 column"):
        load_spec(p)
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "missing.json")
    y = tmp_path / "t.yaml"
    y.write_text("id: [unclosed")
    with pytest.raises(SpecError, match="invalid YAML"):
        load_spec(y)


_TOP_FIELDS = sorted(base_spec())


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(_TOP_FIELDS),
    st.one_of(st.none(), st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2)),
)
def test_random_field_corruption_never_half_loads(field: str, value: Any) -> None:
    """Replacing any top-level field with junk either still validates fully or raises SpecError
    naming that field — never another exception type."""
    data = copy.deepcopy(base_spec())
    data[field] = value
    outcome: TaskSpec | SpecError
    try:
        outcome = spec_from_data(data, "fuzz.json")
    except SpecError as e:
        outcome = e
    if isinstance(outcome, SpecError):
        assert outcome.issues
        assert all(i.message for i in outcome.issues)
    else:
        assert isinstance(outcome, TaskSpec)
