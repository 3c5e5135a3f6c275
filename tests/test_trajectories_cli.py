"""`coworkenv trees DIR`: per-harness report and samples.jsonl over a synthetic rollouts directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coworkenv.cli import main
from coworkenv.trajectories.report import process_dir
from coworkenv.trajectories.sample import TrainingSample
from tests.test_trajectories_gen import record_for, scenario, write_dir


def make_dir(tmp_path: Path) -> Path:
    a = scenario("a1", 1, turns=5, retry_p=0.5, title=True)
    b = scenario("b1", 2, turns=6, rewrite_p=1.0, subagent=True, compact_at=3)
    c = scenario("c1", 3, turns=2)
    root = write_dir(
        tmp_path / "rollouts",
        [
            (a, record_for(a, harness="claude_code")),
            (b, record_for(b, harness="codex")),
            (c, record_for(c, harness="codex", status="infra_failure")),
        ],
    )
    with (root / "a1.calls.jsonl").open("a") as fh:
        fh.write('{"rollout_id": "a1", "seq": 99, "torn')  # a torn last line
    (root / "zz.calls.jsonl").write_text("")
    return root


def test_process_dir_counts_and_samples(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    out = tmp_path / "samples.jsonl"
    rep = process_dir(root, out)
    cc, cx = rep.harness["claude_code"], rep.harness["codex"]
    assert cc["aux_side_call"] == 1
    assert cc["torn_or_unreadable_lines"] == 1
    assert cx["aux_subagent"] == 1
    assert cx["aux_compaction"] == 1
    assert cx["rewrite_forks"] > 0
    assert cx["no_samples_infra_failure"] == 1
    assert cc["tokens_tree"] < cc["tokens_per_call"]
    assert any("zz.calls.jsonl" in p for p in rep.problems)
    lines = out.read_text().splitlines()
    assert len(lines) == rep.samples_written == cc["samples"] + cx["samples"]
    samples = [TrainingSample.model_validate_json(x) for x in lines]
    assert {s.group_key for s in samples} == {"T1_synth|claude_code", "T1_synth|codex"}


def test_trees_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_dir(tmp_path)
    out = tmp_path / "s.jsonl"
    main(["trees", str(root), "--out", str(out), "--json"])
    data = json.loads(capsys.readouterr().out)
    rows = {r["harness"]: r for r in data["harness"]}
    assert rows["codex"]["infra"] == 1
    assert rows["claude_code"]["calls"] > 0
    assert out.exists()
    assert data["samples"] == len(out.read_text().splitlines())
    main(["trees", str(root)])
    assert "claude_code" in capsys.readouterr().out


def test_trees_cli_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(["trees", str(tmp_path / "nope")])
    assert e.value.code == 2


def test_tree_views_for_the_report_mark_retained_dead_and_auxiliary(tmp_path: Path) -> None:
    from coworkenv.eval.trees import read_trees

    root = make_dir(tmp_path)
    rep = process_dir(root, tmp_path / "samples.jsonl", trees_out=tmp_path / "trees.jsonl")
    trees, problems = read_trees(tmp_path / "trees.jsonl")
    assert not problems
    assert {"a1", "b1"} <= set(trees)
    statuses = {n.status for t in trees.values() for n in t.nodes}
    assert statuses == {"retained", "dead", "auxiliary"}
    a1 = trees["a1"]
    # same token counts as the tree: generated tokens in the view = tokens the calls generated
    from coworkenv.proxy.capture import read_calls
    from coworkenv.trajectories.tree import build_tree

    tree = build_tree(read_calls(root / "a1.calls.jsonl")[0], "a1")
    assert sum(n.tokens for n in a1.nodes if n.kind == "generated") == sum(len(n.out) for n in tree.nodes)
    assert sum(n.tokens for n in a1.nodes) == sum(len(n.env) + len(n.out) for n in tree.nodes)
    assert rep.rollouts
    assert any("side_call" in n.label or "title" in n.label for n in a1.nodes if n.status == "auxiliary")


def test_trees_table_has_a_column_per_harness_for_all_nine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from coworkenv.rollout.harnesses import HARNESS_NAMES

    runs = [scenario(f"r{i}", i, turns=3) for i in range(len(HARNESS_NAMES))]
    pairs = [(s, record_for(s, harness=h)) for s, h in zip(runs, HARNESS_NAMES, strict=True)]
    root = write_dir(tmp_path / "rollouts", pairs)
    main(["trees", str(root), "--json"])
    rows = {r["harness"]: r for r in json.loads(capsys.readouterr().out)["harness"]}
    assert set(rows) == set(HARNESS_NAMES)
    for row in rows.values():
        assert row["tok/call"] >= row["tok tree"] > 0
