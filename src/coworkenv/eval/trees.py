"""The report's input model for prefix trees: one small JSON-able tree description per rollout.

Contract: a :class:`PrefixTree` is ``{rollout_id, nodes: [{id, parent, kind, tokens, status,
label}]}``; ``kind`` is ``generated`` (policy tokens) or ``env`` (prompt/tool-result tokens),
``status`` is ``retained`` (on the kept path, trained on), ``dead`` (a pruned branch) or
``auxiliary`` (kept for context, e.g. a summarisation side call). Node ids are unique, every parent
exists, and the parent links form a forest (no cycles). :func:`read_trees` reads a JSONL file (one
tree per line) or a JSON list, keyed by rollout id; bad lines are reported, not fatal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class TreeNode(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    parent: str | None = None
    kind: Literal["generated", "env"]
    tokens: int = Field(ge=0)
    status: Literal["retained", "dead", "auxiliary"]
    label: str = ""


class PrefixTree(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rollout_id: str = Field(min_length=1)
    nodes: tuple[TreeNode, ...] = ()

    @model_validator(mode="after")
    def _forest(self) -> PrefixTree:
        ids = [n.id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"node ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
        parent = {n.id: n.parent for n in self.nodes}
        for n in self.nodes:
            if n.parent is not None and n.parent not in parent:
                raise ValueError(f"node {n.id!r}: parent {n.parent!r} is not a node")
            seen: set[str] = set()
            cur: str | None = n.id
            while cur is not None:
                if cur in seen:
                    raise ValueError(f"node {n.id!r}: parent links form a cycle")
                seen.add(cur)
                cur = parent[cur]
        return self

    def children(self) -> dict[str | None, list[TreeNode]]:
        out: dict[str | None, list[TreeNode]] = {}
        for n in self.nodes:
            out.setdefault(n.parent, []).append(n)
        return out

    def tokens_by_status(self) -> dict[str, int]:
        out = {"retained": 0, "dead": 0, "auxiliary": 0}
        for n in self.nodes:
            out[n.status] += n.tokens
        return out


def read_trees(path: Path) -> tuple[dict[str, PrefixTree], list[str]]:
    """Trees by rollout id from a JSONL file or a JSON list; (trees, problems)."""
    text = Path(path).read_text(encoding="utf-8")
    problems: list[str] = []
    items: list[tuple[int, object]] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = list(enumerate(json.loads(text), start=1))
        except json.JSONDecodeError as e:
            return {}, [f"{path}: invalid JSON: {e}"]
    else:
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append((n, json.loads(line)))
                except json.JSONDecodeError as e:
                    problems.append(f"{path}:{n}: invalid JSON: {e.msg}")
    trees: dict[str, PrefixTree] = {}
    for n, item in items:
        try:
            t = PrefixTree.model_validate(item)
        except ValidationError as e:
            first = e.errors()[0]
            problems.append(f"{path}:{n}: {'.'.join(map(str, first['loc'])) or 'tree'}: {first['msg']}")
            continue
        trees[t.rollout_id] = t
    return trees, problems
