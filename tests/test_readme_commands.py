"""Every command in the README's shell blocks names a command, flags and files that exist.

The README (and ``experiments/README.md``) is where a new user starts; a command, flag or file it
names that no longer exists is a broken promise. This test reads every fenced shell block, joins
continued lines, and checks each command line:

* ``coworkenv …``: the subcommand path resolves in the CLI, and every ``--flag`` is one of that
  command's options;
* ``python|.venv/bin/python SCRIPT …`` and ``bash SCRIPT``: the script exists, and every ``--flag``
  appears in its ``--help`` (scripts with an argparse parser);
* a token that names a path under the repo's own folders (``examples/``, ``scripts/``,
  ``benchmarks/``, ``experiments/`` except ``results/``-to-be, ``src/``, ``tests/``) exists;
* no bare placeholder (``PLAN``, ``TASKS``): a line that needs what a fresh machine lacks (an API
  key, a GPU, a server, a placeholder the user fills in) says so with a ``# needs:`` comment.
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", ROOT / "experiments" / "README.md")
FENCE = re.compile(r"^```(bash|sh|shell|console)?\s*$")
COMMANDS = ("coworkenv", ".venv/", "python", "bash", "source", "pip", "git", "docker", "cd ", "export ")
REPO_DIRS = ("examples/", "scripts/", "benchmarks/", "experiments/", "src/", "tests/")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]{2,}$")
OUTPUTS = ("experiments/results/", "benchmarks/results/")  # written by the commands themselves


def shell_lines(doc: Path) -> list[tuple[int, str]]:
    """(line number, command) of every command in the doc's shell blocks, continuations joined."""
    out: list[tuple[int, str]] = []
    inside, other, labeled, pending, start = False, False, False, "", 0
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line.strip())
        if line.strip().startswith("```"):
            if inside or other:  # a closing fence, of a shell block or another language's
                inside = other = False
            elif fence is not None:
                inside, labeled = True, bool(fence.group(1))
            else:  # ```python, ```toml, ...: not commands, up to its closing fence
                other = True
            continue
        if not inside:
            continue
        if not pending:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        if text and not text.startswith("#") and (labeled or text.startswith(COMMANDS)):
            out.append((start, text))
    return out


def all_lines() -> list[tuple[str, int, str]]:
    return [(doc.name if doc.parent == ROOT else f"{doc.parent.name}/{doc.name}", n, t)
            for doc in DOCS for n, t in shell_lines(doc)]  # fmt: skip


@functools.cache
def cli() -> click.Command:
    from coworkenv.cli import app

    return typer.main.get_command(app)


def _options(cmd: click.Command) -> set[str]:
    names: set[str] = {"--help"}
    for p in cmd.params:  # typer's own click types: read the option names, whatever the class
        names |= {*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())}
    return {n for n in names if n.startswith("-")}


def check_coworkenv(tokens: list[str]) -> list[str]:
    cmd, path = cli(), ["coworkenv"]
    rest = tokens[1:]
    while hasattr(cmd, "get_command") and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(click.Context(cmd), rest[0])
        if sub is None:
            return [f"`{' '.join([*path, rest[0]])}`: no such command"]
        cmd, path, rest = sub, [*path, rest[0]], rest[1:]
    known = _options(cmd)
    return [
        f"`{' '.join(path)}` has no option {flag}"
        for flag in (t.split("=", 1)[0] for t in rest if t.startswith("--"))
        if flag not in known
    ]


@functools.cache
def script_help(script: str) -> str:
    argv = [sys.executable, str(ROOT / script), "--help"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    return proc.stdout + proc.stderr


def check_line(text: str) -> list[str]:
    needs = "# needs:" in text
    body = text.split(" # ", 1)[0] if " # " in text else text
    try:
        tokens = shlex.split(body, comments=True)
    except ValueError as exc:
        return [f"does not parse as a shell line: {exc}"]
    problems: list[str] = []
    for seg in _segments(tokens):
        if not seg:
            continue
        head = seg[0]
        if head in ("coworkenv", ".venv/bin/coworkenv"):
            problems += check_coworkenv(["coworkenv", *seg[1:]])
        elif head in ("python", "python3", ".venv/bin/python") and len(seg) > 1 and seg[1].endswith(".py"):
            script = seg[1]
            if not (ROOT / script).is_file():
                problems.append(f"{script}: no such script")
            elif any(t.startswith("--") for t in seg[2:]):
                shown = script_help(script)
                problems += [
                    f"{script} has no option {flag}"
                    for flag in (t.split("=", 1)[0] for t in seg[2:] if t.startswith("--"))
                    if flag not in shown
                ]
        elif head == "bash" and len(seg) > 1 and not (ROOT / seg[1]).is_file():
            problems.append(f"{seg[1]}: no such script")
        for tok in seg:
            path = tok.split("=", 1)[-1]
            if re.fullmatch(r"\S+\.py@\w+", path):  # Inspect's FILE.py@TASK
                path = path.rsplit("@", 1)[0]
            repo_path = path.startswith(REPO_DIRS) and not path.startswith(OUTPUTS) and "*" not in path
            if repo_path and not (ROOT / path).exists() and not _written_by_an_earlier_line(path):
                problems.append(f"{path}: no such file in the repository")
            if PLACEHOLDER.match(tok) and not needs:
                problems.append(f"placeholder {tok} in a line without a '# needs:' note")
    return problems


def _segments(tokens: list[str]) -> list[list[str]]:
    """The commands of a line split at ``&&``, ``;``, ``|`` (env assignments dropped)."""
    out: list[list[str]] = [[]]
    for t in tokens:
        if t in ("&&", "||", ";", "|"):
            out.append([])
        elif not out[-1] and re.match(r"^[A-Z_][A-Z0-9_]*=", t):
            continue
        else:
            out[-1].append(t)
    return out


def _written_by_an_earlier_line(path: str) -> bool:
    """Paths a documented command writes (``--out``): a later line may read them."""
    return any(f"--out {path}" in text or f"--results {path}" in text for _doc, _n, text in all_lines())


LINES = all_lines()


def test_the_docs_have_shell_lines_to_check() -> None:
    assert len(LINES) >= 30
    assert any(t.startswith("coworkenv ") for _d, _n, t in LINES)


@pytest.mark.parametrize(("doc", "line", "text"), LINES, ids=[f"{d}:{n}" for d, n, _ in LINES])
def test_every_documented_command_exists(doc: str, line: int, text: str) -> None:
    problems = check_line(text)
    assert problems == [], f"{doc}:{line}: {text}\n  " + "\n  ".join(problems)


def test_the_checker_fails_on_what_it_should() -> None:
    assert check_line("coworkenv rollout runs/x --no-such-flag 1")
    assert check_line("coworkenv no-such-command")
    assert check_line("coworkenv synth PLAN --out runs/synth")
    assert not check_line("coworkenv synth PLAN --out runs/synth  # needs: your plan file")
    assert check_line("bash scripts/no_such_script.sh")
    assert check_line("coworkenv train sft examples/train/missing.yaml")
    assert not check_line("coworkenv plan report examples/plans/demo.yaml")
