"""A seccomp filter for jails run as root: no new user namespaces.

As root the jail drops to a per-rollout uid with no capabilities, but the kernel still lets any
uid create a user namespace (``unshare -Ur``), inside which it is "root" again — of nothing of
ours, yet a larger kernel surface than an agent needs. (Without root, bubblewrap's own
``--disable-userns`` does this.) The filter, a classic BPF program as Docker's default profile
writes one:

* ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` in their flags → ``EPERM``;
* ``clone3`` → ``ENOSYS`` (its flags sit in a struct a filter cannot read; the C library then
  falls back to ``clone``, as under Docker);
* any other architecture than the one it was built for → ``EPERM`` for everything (no 32-bit
  syscall table to slip through);
* everything else allowed.

Contract: :func:`program` returns the filter (bytes for bubblewrap's ``--seccomp FD``) for this
machine's architecture, or None where it has none (then the jail runs without it, and says so).
"""

from __future__ import annotations

import platform
import struct

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_JSET_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_X32 = 0x40000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
CLONE_NEWUSER = 0x10000000
_ARCHES = {  # machine -> (AUDIT_ARCH_*, unshare, clone, clone3)
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or None for an architecture we lack."""
    spec = _ARCHES.get(machine or platform.machine())
    if spec is None:
        return None
    arch, unshare, clone, clone3 = spec
    deny, nosys, allow = _RET_ERRNO | _EPERM, _RET_ERRNO | _ENOSYS, _RET_ALLOW
    prog = [
        _ins(_BPF_LD_W_ABS, 0, 0, _ARCH),  # 0
        _ins(_BPF_JEQ_K, 1, 0, arch),  # 1: our architecture: go on (3); else deny all (2)
        _ins(_BPF_RET_K, 0, 0, deny),  # 2
        _ins(_BPF_LD_W_ABS, 0, 0, _NR),  # 3
        _ins(_BPF_JGE_K, 7, 0, _X32),  # 4: the x32 ABI's numbers (same arch): deny (12)
        _ins(_BPF_JEQ_K, 3, 0, unshare),  # 5: -> flags (9)
        _ins(_BPF_JEQ_K, 2, 0, clone),  # 6: -> flags (9)
        _ins(_BPF_JEQ_K, 5, 0, clone3),  # 7: -> ENOSYS (13)
        _ins(_BPF_RET_K, 0, 0, allow),  # 8
        _ins(_BPF_LD_W_ABS, 0, 0, _ARG0_LOW),  # 9: flags (unshare's and clone's first argument)
        _ins(_BPF_JSET_K, 1, 0, CLONE_NEWUSER),  # 10: set: deny (12); else allow (11)
        _ins(_BPF_RET_K, 0, 0, allow),  # 11
        _ins(_BPF_RET_K, 0, 0, deny),  # 12
        _ins(_BPF_RET_K, 0, 0, nosys),  # 13
    ]
    return b"".join(prog)
