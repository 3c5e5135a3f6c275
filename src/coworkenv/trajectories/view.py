"""A rollout's prefix tree as the report draws it (:class:`coworkenv.eval.trees.PrefixTree`).

Contract: every tree node with tokens becomes up to two view nodes — its environment tokens
(``env``: prompt text, tool results) then its generated tokens (``generated``) — linked along the
token tree, so the view has the same shape and token counts as the tree. A node's status is
``auxiliary`` when the filter set it aside as a side call, ``retained`` when a kept branch runs
through it (it is trained on), ``dead`` otherwise (a retry or regenerated turn that was pruned).
"""

from __future__ import annotations

from coworkenv.eval.trees import PrefixTree as TreeView
from coworkenv.eval.trees import TreeNode
from coworkenv.trajectories.filters import FilterResult
from coworkenv.trajectories.tree import PrefixTree


def tree_view(tree: PrefixTree, filt: FilterResult) -> TreeView:
    nodes: list[TreeNode] = []
    tail: dict[int, str | None] = {}  # tree node index -> id of its last view node
    for node in tree.nodes:  # parents come before children
        parent = tail.get(node.parent) if node.parent >= 0 else None
        if node.index in filt.aux:
            status = "auxiliary"
        elif node.index in filt.kept:
            status = "retained"
        else:
            status = "dead"
        label = "" if node.call is None else f"call {node.call.seq}"
        if node.index in filt.aux:
            label = f"{label} ({filt.aux[node.index]})".strip()
        if node.rewrite_fork:
            label = f"{label} [history rewritten: forked]".strip()
        last = parent
        if len(node.env):
            nid = f"n{node.index}e"
            nodes.append(
                TreeNode(id=nid, parent=last, kind="env", tokens=len(node.env), status=status, label=label)
            )
            last = nid
        if len(node.out):
            nid = f"n{node.index}g"
            nodes.append(
                TreeNode(
                    id=nid, parent=last, kind="generated", tokens=len(node.out), status=status, label=label
                )
            )
            last = nid
        tail[node.index] = last
    return TreeView(rollout_id=tree.rollout_id, nodes=tuple(nodes))
