"""What this machine computes with: CPU model, the ISA flags that decide speed and precision, and
whether bf16 is native.

Contract: :func:`native_bf16` is oneDNN's own answer (AVX512-BF16 or AMX present and enabled;
``ONEDNN_MAX_CPU_ISA=AVX2`` turns it off, as on an AVX2-only CPU). :func:`machine_info` is the dict
every benchmark and the main job record beside their figures, so a number always says which CPU
family it holds on: ``cpu`` (model name), ``cpus``, ``flags`` (those of :data:`FLAGS` the CPU has),
``native_bf16``, and ``torch_cpu_capability`` (the kernels ATen dispatches to: ``AVX2`` /
``AVX512``). Torch is imported only when asked for the last two.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any

FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni")
"""The /proc/cpuinfo flags that matter here: AVX2 vs AVX-512 kernels, and native bf16."""


def _cpuinfo() -> list[str]:
    with contextlib.suppress(OSError):
        return Path("/proc/cpuinfo").read_text().splitlines()
    return []


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what platform knows, else "unknown"."""
    for line in _cpuinfo():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cpu_flags() -> list[str]:
    """The flags of :data:`FLAGS` this CPU reports (first processor's ``flags`` line)."""
    for line in _cpuinfo():
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            return [f for f in FLAGS if f in have]
    return []


def native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX, as oneDNN reports it)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def machine_info() -> dict[str, Any]:
    """CPU model, core count, ISA flags, native bf16 and torch's CPU kernels (see the module doc)."""
    import torch

    return {
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "flags": cpu_flags(),
        "native_bf16": native_bf16(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
