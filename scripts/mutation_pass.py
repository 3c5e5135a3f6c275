"""A small, fast mutation pass over ``rl/`` and ``grading/``: do the tests fail when the code is wrong?

Contract: parse each target module, list every *site* where a simple operator mutation applies
(comparison flipped or loosened, ``+``/``-`` and ``*``/``/`` swapped, ``and``/``or`` swapped, ``not``
dropped, ``min``/``max`` swapped, a numeric constant changed, ``True``/``False`` flipped, ``+=``/``-=``
swapped), draw a seeded sample of ``--n`` mutants, and for each one: copy ``src/`` to a scratch
folder, write the mutated module there (``ast.unparse``), and run the target's test files with
``pytest -x`` and ``PYTHONPATH`` set to the scratch copy, under a per-mutant timeout. A mutant is
*killed* when pytest fails (exit 1) or times out (listed as ``timeout``, counted killed: rerun
them with ``--sites`` and a longer ``--timeout`` on a busy machine), *survived* when it passes (exit
0), *invalid* when
the mutated module does not import (collection error, exit 2-4). The working tree is never
modified. Output: one JSON file with the date, the machine's load average at start and end, the
exact command, per-module counts, the share killed and every survivor (file, line, mutation), to be
triaged by hand: an equivalent mutant is no gap, a real survivor needs a test.

    nice -n 10 .venv/bin/python scripts/mutation_pass.py --n 80 --out benchmarks/results/mutation-DATE.json
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# target module (relative to src/coworkenv) -> the fast test files that should catch its bugs
TARGETS: dict[str, tuple[str, ...]] = {
    "rl/losses.py": ("tests/test_rl_losses.py", "tests/test_rl_trainer.py"),
    "rl/advantages.py": ("tests/test_rl_advantages.py", "tests/test_rl_trainer.py"),
    "rl/rl.py": ("tests/test_rl_trainer.py",),
    "rl/packing.py": ("tests/test_rl_trainer.py", "tests/test_rl_attention.py"),
    "rl/attention.py": ("tests/test_rl_attention.py", "tests/test_rl_trainer.py"),
    "grading/grader.py": ("tests/test_grader.py", "tests/test_library_d15.py"),
    "grading/gate.py": ("tests/test_grader.py", "tests/test_library_d15.py"),
    "grading/match.py": ("tests/test_grader.py", "tests/test_library_d15.py"),
    "grading/replay.py": ("tests/test_grader.py", "tests/test_library_d15.py"),
}

_CMP_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BIN_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Pow: ast.Mult,
}


@dataclass(frozen=True)
class Site:
    module: str
    index: int  # position of the node in ast.walk order (stable for one source text)
    kind: str
    line: int
    detail: str


def _annotation_ids(tree: ast.AST) -> set[int]:
    """Nodes inside annotations: mutating a type hint is not a behaviour change."""
    out: set[int] = set()
    for node in ast.walk(tree):
        anns: list[ast.AST | None] = []
        if isinstance(node, ast.AnnAssign | ast.arg):
            anns.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            anns.append(node.returns)
        for a in anns:
            if a is not None:
                out.update(id(n) for n in ast.walk(a))
    return out


def _kinds(node: ast.AST) -> list[tuple[str, str]]:
    """The mutations that apply at ``node``: (kind, human-readable detail)."""
    if isinstance(node, ast.Compare) and type(node.ops[0]) in _CMP_SWAP:
        a, b = type(node.ops[0]), _CMP_SWAP[type(node.ops[0])]
        return [("cmp", f"{a.__name__} -> {b.__name__}")]
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAP:
        return [("binop", f"{type(node.op).__name__} -> {_BIN_SWAP[type(node.op)].__name__}")]
    if isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
        return [("augassign", f"{type(node.op).__name__}= flipped")]
    if isinstance(node, ast.BoolOp):
        return [("boolop", "and -> or" if isinstance(node.op, ast.And) else "or -> and")]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return [("not", "drop not")]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        return [("minmax", f"{node.func.id} -> {'max' if node.func.id == 'min' else 'min'}")]
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        return [("bool", f"{node.value} -> {not node.value}")]
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return [("const", f"{node.value!r} -> {_new_const(node.value)!r}")]
    return []


def _new_const(v: float) -> float:
    if isinstance(v, int):
        return v + 1
    return 1.0 if v == 0 else v * 0.5


def _apply(node: ast.AST, kind: str) -> None:
    if kind == "cmp" and isinstance(node, ast.Compare):
        node.ops[0] = _CMP_SWAP[type(node.ops[0])]()
    elif kind == "binop" and isinstance(node, ast.BinOp):
        node.op = _BIN_SWAP[type(node.op)]()
    elif kind == "augassign" and isinstance(node, ast.AugAssign):
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
    elif kind == "boolop" and isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "minmax" and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        node.func.id = "max" if node.func.id == "min" else "min"
    elif kind == "bool" and isinstance(node, ast.Constant):
        node.value = not node.value
    elif kind == "const" and isinstance(node, ast.Constant):
        node.value = _new_const(node.value)
    else:
        raise ValueError(f"cannot apply {kind} to {type(node).__name__}")


class _DropNot(ast.NodeTransformer):
    def __init__(self, target: ast.AST) -> None:
        self.target = target

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        return node.operand if node is self.target else node


def sites(module: str) -> list[Site]:
    text = (SRC / "coworkenv" / module).read_text()
    tree = ast.parse(text)
    skip = _annotation_ids(tree)
    out: list[Site] = []
    for i, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        for kind, detail in _kinds(node):
            out.append(Site(module, i, kind, getattr(node, "lineno", 0), detail))
    return out


def mutate(site: Site) -> str:
    tree = ast.parse((SRC / "coworkenv" / site.module).read_text())
    node = list(ast.walk(tree))[site.index]
    if site.kind == "not":
        tree = _DropNot(node).visit(tree)
    else:
        _apply(node, site.kind)
    return ast.unparse(ast.fix_missing_locations(tree))


def run_mutant(site: Site, scratch: Path, timeout: float, python: str) -> tuple[str, float]:
    """Write the mutant into the scratch src copy, run its tests, restore the module."""
    target = scratch / "coworkenv" / site.module
    original = target.read_text()
    target.write_text(mutate(site))
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TARGETS[site.module]]
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(
            cmd, cwd=ROOT, env=env, timeout=timeout, capture_output=True, check=False
        ).returncode
        status = {0: "survived", 1: "killed"}.get(rc, "invalid")
    except subprocess.TimeoutExpired:
        status = "timeout"  # a hang is detected, but so is a slow machine: counted killed, listed apart
    finally:
        target.write_text(original)
    return status, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=80, help="mutants to sample (over all targets)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    ap.add_argument("--only", default="", help="comma-separated target modules, e.g. rl/losses.py")
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default: print only)")
    ap.add_argument(
        "--sites", default="", help="rerun exactly these mutants: module:index,... (e.g. rl/rl.py:812)"
    )
    args = ap.parse_args(argv)
    modules = [m for m in TARGETS if not args.only or m in args.only.split(",")]
    every = [s for m in modules for s in sites(m)]
    rng = random.Random(args.seed)
    sample = sorted(rng.sample(every, min(args.n, len(every))), key=lambda s: (s.module, s.index))
    if args.sites:
        wanted = {tuple(x.rsplit(":", 1)) for x in args.sites.split(",")}
        sample = [s for s in every if (s.module, str(s.index)) in wanted]
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        scratch = Path(tmp) / "src"
        shutil.copytree(SRC, scratch, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        for k, site in enumerate(sample, 1):
            status, secs = run_mutant(site, scratch, args.timeout, sys.executable)
            results.append({**asdict(site), "status": status, "seconds": round(secs, 1)})
            print(f"[{k}/{len(sample)}] {status:8} {site.module}:{site.line} {site.detail} ({secs:.0f}s)")
            sys.stdout.flush()
    per_module: dict[str, dict[str, int]] = {}
    for r in results:
        c = per_module.setdefault(
            str(r["module"]), {"killed": 0, "timeout": 0, "survived": 0, "invalid": 0, "sites": 0}
        )
        c[str(r["status"])] += 1
    for m, counts in per_module.items():
        counts["sites"] = sum(1 for s in every if s.module == m)
    valid = [r for r in results if r["status"] != "invalid"]
    killed = sum(1 for r in valid if r["status"] in ("killed", "timeout"))
    summary = {
        "date": started.isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "node": platform.node()},
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "wall_s": round((dt.datetime.now(dt.UTC) - started).total_seconds(), 1),
        "sites_total": len(every),
        "sampled": len(sample),
        "seed": args.seed,
        "killed": killed,
        "of_which_timeouts": sum(1 for r in valid if r["status"] == "timeout"),
        "survived": len(valid) - killed,
        "invalid": len(results) - len(valid),
        "killed_share": round(killed / len(valid), 3) if valid else None,
        "per_module": per_module,
        "survivors": [r for r in results if r["status"] == "survived"],
        "mutants": results,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "mutants"}, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
