"""A training run killed with SIGKILL at random instants and resumed by the same command ends
exactly where an uninterrupted run ends: the same weights, bit for bit, and one metrics row per
optimizer step (none lost, none repeated). SFT and RL, one checkpoint per step, only the newest kept."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

WORKER = r"""
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from coworkenv.rl.tiny import tiny_llama

kind, out = sys.argv[1], Path(sys.argv[2])
run = {"out_dir": str(out), "resume": True, "save_every": 1, "keep_checkpoints": 1, "seed": 3}


class ByteTok:
    def encode(self, text, add_special_tokens=False):
        return list(text.encode("utf-8"))

    def decode(self, ids, skip_special_tokens=False):
        return bytes(ids).decode("utf-8", errors="replace")


if kind == "sft":
    from coworkenv.rl.config import SFTConfig
    from coworkenv.rl.sft import SFTTrainer, build_examples
    from coworkenv.proxy.messages import Message

    rows = [
        ((Message(role="user", content=f"Close ticket {i}."),
          Message(role="assistant", content=f"Ticket {i} is closed, as asked {i * 7}.")), ())
        for i in range(8)
    ]
    cfg = SFTConfig.model_validate({
        "data": str(out / "unused.jsonl"), "model": {"lora": None}, "optim": {"lr": 3e-3},
        "epochs": 2, "batch_size": 1, "grad_accum": 2, "max_len": 512, "autocast": "off",
        "run": run,
    })
    tr = SFTTrainer(cfg, model=tiny_llama(256), tokenizer=ByteTok())
    tr.train(build_examples(rows, ByteTok(), max_len=512))
    model = tr.model
else:
    from coworkenv.rl.config import RLConfig
    from coworkenv.rl.rl import RLTrainer
    from coworkenv.rl.synthetic import branched_group

    cfg = RLConfig.model_validate({
        "group_size": 2, "batch_size": 2, "model": {"lora": None}, "optim": {"lr": 1e-3},
        "run": run,
    })
    tr = RLTrainer(cfg, model=tiny_llama(64, hidden=32, layers=1, heads=2))
    for step in range(tr.step_count, 8):  # the caller's loop: one update per step, resumed by count
        m = tr.step(branched_group(group_size=2, branches=2, vocab=64, prefix_len=24, branch_len=12,
                                   rewards=[0.0, 1.0], seed=step))
        assert m.get("updates") == 1, m  # every step updates, so the trainer's count is the cursor
    model = tr.model
torch.save({k: v.clone() for k, v in model.state_dict().items()}, out / "final.pt")
"""


def _launch(kind: str, out: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COWORKENV_NO_PROGRESS": "1"}
    out.mkdir(parents=True, exist_ok=True)
    with (out.parent / f"{out.name}.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-c", WORKER, kind, str(out)], env=env, stdout=subprocess.DEVNULL, stderr=log
        )


def _checkpoints(out: Path) -> int:
    marker = out / "checkpoints" / "latest"
    return int(marker.read_text().split("-")[1]) if marker.exists() and marker.read_text() else 0


def _finish(kind: str, out: Path) -> dict[str, torch.Tensor]:
    proc = _launch(kind, out)
    proc.wait(timeout=300)
    assert proc.returncode == 0, (out.parent / f"{out.name}.log").read_text()[-3000:]
    return torch.load(out / "final.pt")


@pytest.mark.parametrize("kind", ["sft", "rl"])
def test_killed_at_random_instants_resumes_to_the_same_end(tmp_path: Path, kind: str) -> None:
    reference = _finish(kind, tmp_path / "ref")
    out = tmp_path / "killed"
    rng = random.Random(kind)
    kills = 0
    while kills < 3:
        proc = _launch(kind, out)
        start = _checkpoints(out)
        deadline = time.monotonic() + 240
        while _checkpoints(out) <= start and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))  # somewhere inside the next step, or its checkpoint write
        if proc.poll() is not None:
            break  # finished before the kill: the rest of the run has nothing left to interrupt
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    assert kills >= 1, "the run finished before any kill: the test interrupted nothing"
    resumed = _finish(kind, out)
    assert resumed.keys() == reference.keys()
    for k, v in reference.items():
        assert torch.equal(resumed[k], v), k
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 9))
    kept = sorted(p.name for p in (out / "checkpoints").iterdir() if p.name.startswith("step-"))
    assert kept == ["step-000008"]
