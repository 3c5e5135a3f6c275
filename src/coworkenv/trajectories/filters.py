"""Filtering a prefix tree: auxiliary calls, dead leaves, over-branching rollouts.

Contract (every decision is counted in :attr:`FilterResult.counters`):

* **Auxiliary calls** are identified, excluded from training and kept in the tree/record:
  ``compaction`` — the call continues an earlier context, its last request message asks to
  summarize/compact the conversation and the reply calls no tool, or the reply text is
  re-injected into a later call that starts a new context;
  ``side_call`` — a call offering no tools in a rollout whose other calls do (titles, routers,
  classifiers); ``subagent`` — a call whose system prompt differs from the main agent's (the system
  prompt of the first call that offers tools, else of the first call). An auxiliary call that a main
  call extends token-exactly is main after all (``aux_overridden``).
* **Segments**: main calls form a logical forest (token parent, or the message-matched call for a
  rewrite fork); each root of it starts a segment — the first context, and each new context after a
  compaction — except that roots with identical prompts (a retried first turn) share one.
  **Dead leaves**: within each segment only the leaf with the longest valid continuation is kept
  — ranked by (not malformed, calls on the logical path, history tokens, later seq); every other
  logical leaf (a retried or regenerated turn) is dead.
* **Over-branching**: a rollout whose main logical leaves (dead ones included) exceed
  ``max_leaves`` is discarded whole (``discarded`` set, no retained branches).

The retained branches are the token leaves of the kept set: kept calls no other kept call extends
token-exactly. With a harness that rewrites history every call is its own token leaf, and each is
retained when it lies on a kept logical path.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from coworkenv.proxy.capture import CapturedCall
from coworkenv.trajectories.tree import Node, PrefixTree

DEFAULT_MAX_LEAVES = 32
_COMPACTION = re.compile(
    r"summari[sz]e\b.{0,120}\b(conversation|context|session|history|transcript|so far)"
    r"|context (checkpoint|compaction)|\bcompact(ing|ion)?\b.{0,40}\b(conversation|context|history)",
    re.IGNORECASE | re.DOTALL,
)
_MIN_REINJECTED = 40


@dataclass(frozen=True)
class FilterConfig:
    max_leaves: int = DEFAULT_MAX_LEAVES


@dataclass
class FilterResult:
    aux: dict[int, str] = field(default_factory=dict)  # node index -> reason
    dead: list[int] = field(default_factory=list)
    kept: set[int] = field(default_factory=set)
    branches: list[int] = field(default_factory=list)  # retained token leaves (sample ends)
    segments: int = 0
    discarded: str | None = None
    counters: Counter[str] = field(default_factory=Counter)


def system_prompt(call: CapturedCall) -> str:
    parts = []
    for m in call.request.messages:
        if m.role != "system":
            break
        parts.append(m.content)
    return "\n".join(parts)


def _asks_compaction(call: CapturedCall) -> bool:
    msgs = call.request.messages
    if not msgs or msgs[-1].role not in ("user", "system") or call.response.get("tool_calls"):
        return False
    return bool(_COMPACTION.search(msgs[-1].content[-4000:]))


def _reinjected(node: Node, tree: PrefixTree) -> bool:
    assert node.call is not None
    text = str(node.call.response.get("content") or "").strip()
    if len(text) < _MIN_REINJECTED:
        return False
    for later in tree.calls:
        if later.seq <= node.seq or later.logical_parent != 0 or later.call is None:
            continue
        if any(text in m.content for m in later.call.request.messages if m.role != "assistant"):
            return True
    return False


def classify_aux(tree: PrefixTree) -> tuple[dict[int, str], int]:
    """Auxiliary calls (index -> reason) and how many candidates a main descendant overrode."""
    calls = [n for n in tree.calls if n.call is not None]
    if not calls:
        return {}, 0
    with_tools = [n for n in calls if n.call is not None and n.call.request.tools]
    main_first = with_tools[0] if with_tools else calls[0]
    assert main_first.call is not None
    main_system = system_prompt(main_first.call)
    aux: dict[int, str] = {}
    for n in calls:
        c = n.call
        assert c is not None
        if (n.logical_parent != 0 and _asks_compaction(c)) or _reinjected(n, tree):
            aux[n.index] = "compaction"
        elif with_tools and not c.request.tools:
            aux[n.index] = "side_call"
        elif system_prompt(c) != main_system:
            aux[n.index] = "subagent"
    overridden = 0
    for n in calls:
        if n.index in aux:
            continue
        p = n.parent
        while p > 0:
            if aux.pop(p, None) is not None:
                overridden += 1
            p = tree.nodes[p].parent
    return aux, overridden


def filter_tree(tree: PrefixTree, config: FilterConfig | None = None) -> FilterResult:
    cfg = config or FilterConfig()
    res = FilterResult()
    cnt = res.counters
    cnt["calls"] = len(tree.calls)
    if tree.rejected:
        res.discarded = f"rejected: {tree.rejected}"
        cnt["rejected"] = 1
        return res
    res.aux, cnt["aux_overridden"] = classify_aux(tree)
    for reason in res.aux.values():
        cnt[f"aux_{reason}"] += 1
    cnt["aux_calls"] = len(res.aux)
    cnt["rewrite_forks"] = sum(n.rewrite_fork for n in tree.calls)
    cnt["token_leaves"] = sum(1 for n in tree.calls if not n.children)
    main = [n for n in tree.calls if n.index not in res.aux]

    def lparent(n: Node) -> int:
        p = n.logical_parent
        return 0 if p in res.aux else p

    kids: dict[int, list[int]] = {n.index: [] for n in main}
    kids[0] = []
    for n in main:
        kids[lparent(n)].append(n.index)
    depth: dict[int, int] = {0: 0}
    for n in main:  # seq order: a logical parent always precedes its child
        depth[n.index] = depth[lparent(n)] + 1
    leaves = [n for n in main if not kids[n.index]]
    cnt["leaves"] = len(leaves)
    if len(leaves) > cfg.max_leaves:
        res.discarded = f"over-branching: {len(leaves)} leaves > {cfg.max_leaves}"
        cnt["discarded_over_branching"] = 1
        cnt["dead_leaves"] = 0
        return res
    segment_of: dict[int, int] = {}
    root_by_prompt: dict[tuple[int, ...], int] = {}  # retries of a first turn share its segment
    for n in main:
        p = lparent(n)
        if p == 0:
            key = n.call.prompt_ids if n.call is not None else ()
            segment_of[n.index] = root_by_prompt.setdefault(key, n.index)
        else:
            segment_of[n.index] = segment_of[p]
    by_segment: dict[int, list[Node]] = {}
    for leaf in leaves:
        by_segment.setdefault(segment_of[leaf.index], []).append(leaf)
    res.segments = cnt["segments"] = len(by_segment)
    for seg_leaves in by_segment.values():
        best = max(
            seg_leaves,
            key=lambda n: (not (n.call is not None and n.call.malformed), depth[n.index], n.hist_len, n.seq),
        )
        res.dead.extend(n.index for n in seg_leaves if n is not best)
        i = best.index
        while i > 0:
            res.kept.add(i)
            i = lparent(tree.nodes[i])
    cnt["dead_leaves"] = len(res.dead)
    res.branches = sorted(i for i in res.kept if not any(c in res.kept for c in tree.nodes[i].children))
    cnt["branches"] = len(res.branches)
    return res
