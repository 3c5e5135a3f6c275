"""What every benchmark reports about the machine it ran on (imported by the scripts beside it):
the library's own :mod:`coworkenv.machine`, so benchmarks and the main job describe a CPU alike."""

from __future__ import annotations

from coworkenv.machine import cpu_flags, cpu_model, machine_info, native_bf16

__all__ = ["cpu_flags", "cpu_model", "machine_info", "native_bf16"]
