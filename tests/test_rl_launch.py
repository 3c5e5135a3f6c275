"""The CLI path: `coworkenv train rl` offline on samples, single process and under torchrun with 2
CPU processes (gloo) — the two must produce the same update (gradients are summed across ranks):
each weight within what Adam's first step allows between gradients that agree to fp32 reduction
order (tests/numerics.py), in fp32 on either CPU family (the RL trainer does not autocast)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from coworkenv.rl.synthetic import branched_group
from coworkenv.rl.tiny import save_tiny_checkpoint
from tests.numerics import adam_first_step_gap_from_updates, rounding

VENV_BIN = Path(sys.executable).parent


def _setup(tmp: Path) -> tuple[Path, Path]:
    ck = save_tiny_checkpoint(tmp / "tiny", 256)
    data = tmp / "samples"
    data.mkdir()
    rows = branched_group(
        task="a", group_size=4, vocab=255, prefix_len=20, branch_len=8, seed=1, rewards=[1, 0, 1, 0]
    )
    rows += branched_group(
        task="b", group_size=4, vocab=255, prefix_len=16, branch_len=8, seed=2, rewards=[0, 0, 1, 1]
    )
    (data / "samples.jsonl").write_text("".join(s.model_dump_json() + "\n" for s in rows))
    return ck, data


def _config(tmp: Path, ck: Path, data: Path, name: str) -> Path:
    cfg = {
        "samples": str(data),
        "model": {"name_or_path": str(ck), "lora": None},
        "optim": {"lr": 1e-2},
        "run": {"out_dir": str(tmp / name), "resume": False, "progress": False},
        "group_size": 4,
        "batch_size": 8,
    }
    p = tmp / f"{name}.json"
    p.write_text(json.dumps(cfg))
    return p


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COWORKENV_CACHE": "/nonexistent"}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, check=False)
    assert res.returncode == 0, res.stderr[-3000:]


def test_single_and_torchrun_two_processes_agree(tmp_path: Path) -> None:
    if shutil.which("torchrun", path=str(VENV_BIN)) is None:
        pytest.skip("torchrun not installed")
    ck, data = _setup(tmp_path)
    one = _config(tmp_path, ck, data, "one")
    two = _config(tmp_path, ck, data, "two")
    from coworkenv.cli import main

    main(["train", "rl", str(one)])  # single process, in this interpreter
    _run(
        [
            str(VENV_BIN / "torchrun"),
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "coworkenv.cli",
            "train",
            "rl",
            str(two),
        ]
    )
    a = load_file(tmp_path / "one" / "final" / "model.safetensors")
    b = load_file(tmp_path / "two" / "final" / "model.safetensors")
    base = load_file(ck / "model.safetensors")
    assert a.keys() == b.keys()
    lr, eps = 1e-2, 1e-8  # the config's lr; AdamW's default ε
    for k in a:
        bound = adam_first_step_gap_from_updates(
            a[k] - base[k], b[k] - base[k], lr=lr, eps=eps, grad_rtol=1e-4, grad_atol=1e-6
        )
        worst = float(((a[k] - b[k]).abs() - bound - rounding(base[k], lr)).max())
        assert worst <= 0, (k, worst)
    assert not torch.equal(a["lm_head.weight"], base["lm_head.weight"])
    rows = [json.loads(x) for x in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    single = [json.loads(x) for x in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    # Adam's first step cannot see a gradient's scale: the norm before clipping must agree too
    # (fp32 sums over the same tokens in another order: a few ulps per term, well inside 1e-4)
    assert rows[-1]["grad_norm"] == pytest.approx(single[-1]["grad_norm"], rel=1e-4)
    assert rows[-1]["loss"] == pytest.approx(single[-1]["loss"], rel=1e-4, abs=1e-6)
    assert rows[-1]["policy_version"] == 1
    assert rows[-1]["groups_accepted"] == 2
