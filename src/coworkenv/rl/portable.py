"""Checkpoints small enough for a git commit, so a run longer than one machine's life resumes on the next.

A trainer checkpoint (the :func:`coworkenv.rl.common.save_checkpoint` layout) lives in a cache
directory that a fresh machine does not have. :func:`pack` copies the newest one into a directory
that the run commits; :func:`unpack` turns it back into a checkpoint the trainer resumes from.

Contract:

* :func:`pack` writes ``dest/``: ``trainable.pt`` (the trainable parameters exactly as saved),
  ``optimizer.pt``, ``rng.pt``, ``state.json``, the caller's small ``files`` (metrics, curves)
  under ``files/``, and ``portable.json`` (step, bytes, the moments' dtype). The optimizer's
  floating state (Adam's moments) is kept in float32 when the whole pack fits ``limit_bytes``,
  else in bfloat16 (relative rounding ≤ 2⁻⁹ per element; the parameters themselves are never
  rounded). Over the limit even then, nothing is written and :class:`Packed` says how large it would
  have been. The directory is written under a ``.tmp`` name and renamed: a kill at any instant
  leaves the previous pack or the new one, never a torn one.
* :func:`unpack` recreates ``<out_dir>/checkpoints/step-<n>/`` and its ``latest`` marker from a
  pack (moments cast back to float32) and restores the ``files``; it does nothing when
  ``out_dir`` already holds a checkpoint at or past the pack's step (the cache is newer).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from coworkenv.rl.common import checkpoint_draft, latest_checkpoint, publish_checkpoint

__all__ = ["Packed", "pack", "unpack"]


@dataclass(frozen=True)
class Packed:
    step: int
    bytes: int
    moments: str  # "float32" | "bfloat16"
    written: bool


def _is_moment(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 1


def _cast_moments(opt: dict[str, Any], dtype: torch.dtype) -> dict[str, Any]:
    state = {
        k: {n: (t.to(dtype) if _is_moment(t) else t) for n, t in s.items()} for k, s in opt["state"].items()
    }
    return {**opt, "state": state}


def _tensor_bytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, Mapping):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def pack(ck: Path, dest: Path, *, limit_bytes: int, files: Mapping[str, Path] | None = None) -> Packed:
    """The checkpoint directory ``ck`` as a committable pack at ``dest`` (see the module contract)."""
    state = json.loads((ck / "state.json").read_text())
    step = int(state["step"])
    trainable = torch.load(ck / "trainable.pt", weights_only=False)
    opt = torch.load(ck / "optimizer.pt", weights_only=False)
    extra = sum(p.stat().st_size for p in (files or {}).values() if p.exists())
    base = _tensor_bytes(trainable) + extra + (ck / "rng.pt").stat().st_size
    moments = "float32"
    size = base + _tensor_bytes(opt)
    if size > limit_bytes:
        opt = _cast_moments(opt, torch.bfloat16)
        moments, size = "bfloat16", base + _tensor_bytes(opt)
    if size > limit_bytes:
        return Packed(step, size, moments, written=False)
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "files").mkdir(parents=True)
    torch.save(trainable, tmp / "trainable.pt")
    torch.save(opt, tmp / "optimizer.pt")
    shutil.copy(ck / "rng.pt", tmp / "rng.pt")
    shutil.copy(ck / "state.json", tmp / "state.json")
    for name, p in (files or {}).items():
        if p.exists():
            shutil.copy(p, tmp / "files" / name)
    info = {"step": step, "bytes": size, "moments": moments, "source": str(ck)}
    (tmp / "portable.json").write_text(json.dumps(info, indent=1) + "\n")
    old = dest.with_name(dest.name + ".old")
    if dest.exists():
        dest.replace(old)
    tmp.replace(dest)
    shutil.rmtree(old, ignore_errors=True)
    return Packed(step, size, moments, written=True)


def unpack(src: Path, out_dir: Path) -> int | None:
    """A pack at ``src`` as ``out_dir``'s newest checkpoint; the step restored, or None (see contract)."""
    if not (src / "portable.json").exists():
        return None
    step = int(json.loads((src / "portable.json").read_text())["step"])
    have = latest_checkpoint(out_dir)
    if have is not None and int(json.loads((have / "state.json").read_text())["step"]) >= step:
        return None
    tmp = checkpoint_draft(out_dir, step)
    shutil.copy(src / "trainable.pt", tmp / "trainable.pt")
    opt = torch.load(src / "optimizer.pt", weights_only=False)
    torch.save(_cast_moments(opt, torch.float32), tmp / "optimizer.pt")
    shutil.copy(src / "rng.pt", tmp / "rng.pt")
    shutil.copy(src / "state.json", tmp / "state.json")
    publish_checkpoint(tmp)
    for p in sorted((src / "files").glob("*")) if (src / "files").is_dir() else []:
        shutil.copy(p, out_dir / p.name)
    return step
