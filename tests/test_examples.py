"""The example plan and training configs under examples/ run as documented (paths redirected to tmp)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coworkenv.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )


def _ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    return res.stdout + res.stderr


def _redirect(src: Path, dst: Path, **paths: object) -> Path:
    cfg = yaml.safe_load(src.read_text())
    for key, value in paths.items():
        if key == "out_dir":
            cfg["run"]["out_dir"] = str(value)
        elif key == "max_steps":
            cfg["run"]["max_steps"] = value
        else:
            cfg[key] = str(value)
    dst.write_text(yaml.safe_dump(cfg))
    return dst


def test_demo_plan_report_and_synthesis(tmp_path: Path) -> None:
    plan = ROOT / "examples" / "plans" / "demo.yaml"
    assert "safety scenarios" in _ok(_cli("plan", "report", plan))
    _ok(_cli("synth", plan, "--generator", "scripted", "--out", tmp_path / "synth"))
    assert len(list((tmp_path / "synth" / "tasks").glob("*.json"))) == 12


def test_training_examples_run_on_curated_data_and_samples(tmp_path: Path) -> None:
    """The tour: teacher rollouts → curate → `train sft`; rollouts → trees → `train rl`."""
    synth = tmp_path / "synth"
    _ok(_cli("synth", ROOT / "examples" / "plans" / "demo.yaml", "--generator", "scripted", "--out", synth))
    tasks = sorted((synth / "tasks").glob("*.json"))[:2]
    runs = tmp_path / "runs"
    _ok(
        _cli(
            "rollout",
            *tasks,
            "--harness",
            "loop",
            "--backend",
            "reference",
            "--trials",
            "4",
            "--out",
            runs,
            "--concurrency",
            "4",
        )
    )
    _ok(_cli("curate", runs, "--export", tmp_path / "sft.jsonl"))
    assert (tmp_path / "sft.jsonl").read_text().strip()
    sft = _redirect(
        ROOT / "examples" / "train" / "sft.yaml",
        tmp_path / "sft.yaml",
        data=tmp_path / "sft.jsonl",
        out_dir=tmp_path / "sft",
        max_steps=1,
    )
    _ok(_cli("train", "sft", sft))
    _ok(_cli("trees", runs, "--out", tmp_path / "samples.jsonl"))
    rl = _redirect(
        ROOT / "examples" / "train" / "rl.yaml",
        tmp_path / "rl.yaml",
        samples=tmp_path / "samples.jsonl",
        out_dir=tmp_path / "rl",
        max_steps=1,
    )
    _ok(_cli("train", "rl", rl))
    assert (tmp_path / "rl" / "metrics.jsonl").read_text().strip()
