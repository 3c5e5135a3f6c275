"""Reading JSON Lines: records end at "\\n" and nowhere else.

Contract of :func:`jsonl_lines`: the file's text (UTF-8) split on "\\n" only — the same lines, in the
same numbering, as a JSONL writer wrote them (a final empty string when the file ends with "\\n";
callers skip blank lines). ``str.splitlines`` also splits at U+2028, U+2029, U+0085 and the
\\x1c-\\x1e separators, and JSON encoders (orjson, pydantic, ``json.dumps(ensure_ascii=False)``)
write the first three raw inside strings: a record whose text held one — a web page in a tool
result, a model's output — was cut in two and reported unreadable, its call lost to training.
"""

from __future__ import annotations

from pathlib import Path


def jsonl_lines(path: Path) -> list[str]:
    """The lines of a JSONL file (see the module docstring)."""
    return path.read_text(encoding="utf-8").split("\n")
