"""FSDP2 sharded training (``distributed = "fsdp"``) under torchrun with 2 CPU processes (gloo):
the same loss, gradients and optimizer update as 1 process (each weight within what Adam's step
allows between the two runs' gradients), with each process holding about half the parameter and
optimizer-state bytes — for full fine-tuning and for LoRA. fp32 throughout (the RL trainer does not
autocast), so the tolerances hold on either CPU family."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from coworkenv.rl.synthetic import branched_group
from coworkenv.rl.tiny import save_tiny_checkpoint
from tests.numerics import adam_first_step_gap, rounding

VENV_BIN = Path(sys.executable).parent

WORKER = r"""
import json, sys
from pathlib import Path
import torch
from coworkenv.rl.common import save_merged, shutdown_distributed
from coworkenv.rl.config import RLConfig
from coworkenv.rl.fsdp import full_tensor, local_bytes
from coworkenv.rl.rl import RLTrainer
from coworkenv.trajectories.sample import TrainingSample

ck, samples_path, out, lora = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "lora"
cfg = RLConfig.model_validate({
    "model": {"name_or_path": str(ck), "lora": {"r": 4, "alpha": 8, "dropout": 0.0} if lora else None,
              "gradient_checkpointing": False},
    "optim": {"lr": 1e-2}, "group_size": 4, "batch_size": 8, "distributed": "fsdp",
    "micro_batch_tokens": 64,
    "run": {"out_dir": str(out), "resume": False, "progress": False},
})
samples = [TrainingSample.model_validate_json(x) for x in samples_path.read_text().splitlines()]
trainer = RLTrainer(cfg, log_metrics=False)
grads = {}
step = trainer.optimizer.step
def capture(*a, **k):
    for n, p in trainer.model.named_parameters():
        if p.grad is not None:
            grads[n.replace("_fsdp_wrapped_module.", "")] = full_tensor(p.grad).detach().clone()
    return step(*a, **k)
trainer.optimizer.step = capture
m = trainer.step(samples)
params = {n.replace("_fsdp_wrapped_module.", ""): full_tensor(p.detach()).clone()
          for n, p in trainer.model.named_parameters() if p.requires_grad}
mem = local_bytes(list(trainer.model.parameters()), trainer.optimizer)
model = trainer.export_model()
out.mkdir(parents=True, exist_ok=True)
(out / f"mem-{trainer.rank}.json").write_text(json.dumps(mem))
if trainer.rank == 0:
    torch.save(grads, out / "grads.pt")
    torch.save(params, out / "params.pt")
    (out / "optim.json").write_text(json.dumps(
        {k: trainer.optimizer.defaults[k] for k in ("lr", "eps", "weight_decay")}))
    (out / "metrics.json").write_text(json.dumps({k: v for k, v in m.items() if isinstance(v, (int, float))}))
    save_merged(model, trainer.tokenizer, out / "final")
shutdown_distributed()
"""


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COWORKENV_CACHE": "/nonexistent"}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert res.returncode == 0, res.stderr[-4000:]


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_fsdp_two_processes_match_one_with_half_the_memory(tmp_path: Path, mode: str) -> None:
    if shutil.which("torchrun", path=str(VENV_BIN)) is None:
        pytest.skip("torchrun not installed")
    from safetensors.torch import load_file

    ck = save_tiny_checkpoint(tmp_path / "tiny", 256, layers=4, hidden=64)
    rows = branched_group(
        task="a", group_size=4, vocab=255, prefix_len=20, branch_len=8, seed=1, rewards=[1, 0, 1, 0]
    )
    rows += branched_group(
        task="b", group_size=4, vocab=255, prefix_len=16, branch_len=8, seed=2, rewards=[0, 0, 1, 1]
    )
    data = tmp_path / "samples.jsonl"
    data.write_text("".join(s.model_dump_json() + "\n" for s in rows))
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    args = [str(ck), str(data)]
    _run([sys.executable, str(worker), *args, str(tmp_path / "one"), mode])
    torchrun = [str(VENV_BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", str(worker)]
    _run([*torchrun, *args, str(tmp_path / "two"), mode])

    one, two = tmp_path / "one", tmp_path / "two"
    m1, m2 = (json.loads((d / "metrics.json").read_text()) for d in (one, two))
    assert m1["updates"] == m2["updates"] == 1
    assert m2["loss"] == pytest.approx(m1["loss"], rel=1e-4, abs=1e-6)
    assert m2["grad_norm"] == pytest.approx(m1["grad_norm"], rel=1e-4)
    g1, g2 = torch.load(one / "grads.pt"), torch.load(two / "grads.pt")
    assert g1.keys() == g2.keys()
    assert g1, "some parameter got a gradient"
    for k in g1:
        torch.testing.assert_close(g2[k], g1[k], rtol=1e-4, atol=1e-6, msg=k)
    # The update (tests/numerics.py): what FSDP must preserve is Adam's update of the gradients
    # it computed — each weight within the gap Adam's first step allows between the two runs'
    # gradients, plus fp32 rounding of w and of the step; equal weights cannot be asked for.
    optim = json.loads((one / "optim.json").read_text())
    assert optim == json.loads((two / "optim.json").read_text())
    p1, p2 = torch.load(one / "params.pt"), torch.load(two / "params.pt")
    assert p1.keys() == p2.keys() == g1.keys()
    for k in p1:
        bound = adam_first_step_gap(g1[k], g2[k], lr=optim["lr"], eps=optim["eps"])
        gap = (p2[k] - p1[k]).abs()
        worst = float((gap - bound - rounding(p1[k], optim["lr"])).max())
        assert worst <= 0, (k, worst)
    # the exported (merged) weights are the trained ones: equal to the trainer's own in each run
    w1, w2 = load_file(one / "final" / "model.safetensors"), load_file(two / "final" / "model.safetensors")
    assert w1.keys() == w2.keys()
    if mode == "full":
        for w, p in ((w1, p1), (w2, p2)):
            for k in p:
                torch.testing.assert_close(w[k], p[k], rtol=0, atol=0, msg=k)
    single = json.loads((one / "mem-0.json").read_text())
    for rank in (0, 1):
        mem = json.loads((two / f"mem-{rank}.json").read_text())
        for key in ("param_bytes", "optimizer_bytes"):
            assert mem[key] == pytest.approx(single[key] / 2, rel=0.15), (key, rank, mem, single)
