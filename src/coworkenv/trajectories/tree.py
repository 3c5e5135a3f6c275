"""Token-level prefix tree of one rollout's captured model calls.

Contract (the invariant, property-tested): for every call node ``v``, concatenating the token spans
along the path root → ``v`` (for each node on the path: its environment tokens, then its generated
tokens; :meth:`PrefixTree.tokens`) gives exactly ``hist(v) = prompt_ids(v) + output_ids(v)`` — the
input the engine saw followed by the tokens it generated. A call attaches to the node (earlier in ``seq``
order) whose ``hist`` is the **longest token-exact prefix** of its ``prompt_ids`` (ties: the latest
call); the virtual root (empty history) matches every prompt. The gap
``prompt_ids[len(hist(parent)):]`` is the node's environment span (tool outputs, harness text);
``output_ids`` is its generated span, always the engine's own ids with their logprobs.

When a harness rewrites history (re-serialized tool arguments, renamed call ids, ``null`` → ``""``)
the new prompt no longer extends the earlier call token-exactly, so the token rule attaches it
higher up (often at the root): the rewritten assistant text lands in its environment span and is
never trained as generated. The call it continues is then found by messages
(:mod:`coworkenv.trajectories.rewrite`) and recorded as ``logical_parent`` with ``rewrite_fork``
set; filtering uses the logical links, samples use the token paths.

Bad input never reaches the tree: :func:`validate_calls` skips foreign, errored, non-token-exact,
misaligned or corrupted records with a reason, drops exact duplicates, sorts by ``seq`` (noting a
reordering) and rejects the rollout when two different records claim the same ``seq``.

Construction touches each prompt token O(1) times: candidates are tried by decreasing history
length, each first screened at a few sampled positions, then confirmed by one exact comparison of the
prompt prefix (C-level tuple comparison; only the new spans are converted to numpy). After two
screened-but-wrong candidates the remaining ones are checked against vectorized prefix hashes of the
prompt (position-weighted polynomial mod 2**64, one numpy pass), so a call never costs more than a
constant number of passes over its prompt. Nodes store only their own spans (environment, output),
so memory is proportional to the distinct tokens of the tree.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from coworkenv.proxy.capture import CapturedCall
from coworkenv.trajectories.rewrite import MessageIndex

IntArray = npt.NDArray[np.int64]
_BASE = np.uint64(0x9E3779B97F4A7C15 | 1)  # odd multiplier: B**t mod 2**64 never vanishes
_MAX_TOKEN_ID = 2**31 - 1
_ZERO = np.uint64(0)


class _Powers:
    """B**t mod 2**64 for t < n, grown by doubling."""

    def __init__(self) -> None:
        self.table = self._make(1 << 12)

    @staticmethod
    def _make(n: int) -> npt.NDArray[np.uint64]:
        pw = np.full(n, _BASE, dtype=np.uint64)
        pw[0] = 1
        with np.errstate(over="ignore"):
            np.cumprod(pw, out=pw)
        return pw

    def upto(self, n: int) -> npt.NDArray[np.uint64]:
        if n > len(self.table):
            size = len(self.table)
            while size < n:
                size *= 2
            self.table = self._make(size)
        return self.table[:n]


_POW = _Powers()


def prefix_hashes(ids: IntArray) -> npt.NDArray[np.uint64]:
    """``h[k-1]`` = hash of ``ids[:k]``: sum of (id+1) * B**t mod 2**64 (a cumulative sum)."""
    with np.errstate(over="ignore"):
        return np.cumsum((ids.astype(np.uint64) + np.uint64(1)) * _POW.upto(len(ids)), dtype=np.uint64)


def _extend_hash(h: np.uint64, start: int, ids: IntArray) -> np.uint64:
    if len(ids) == 0:
        return h
    pw = _POW.upto(start + len(ids))[start:]
    with np.errstate(over="ignore"):
        return np.uint64(h + np.sum((ids.astype(np.uint64) + np.uint64(1)) * pw, dtype=np.uint64))


@dataclass(eq=False)
class Node:
    """A call in the tree (``index`` 0 is the virtual root, ``call`` None).

    Only the node's own spans are stored: ``env`` (prompt tokens after the parent's history) and
    ``out`` (generated ids); :meth:`PrefixTree.tokens` concatenates them along the path."""

    index: int
    call: CapturedCall | None
    parent: int  # token parent; -1 for the root
    env: IntArray
    out: IntArray
    prompt_len: int
    logprobs: npt.NDArray[np.float64]
    hist_hash: np.uint64 = _ZERO  # prefix hash of prompt_ids + output_ids
    children: list[int] = field(default_factory=list)
    logical_parent: int = -1  # == parent unless rewrite_fork
    rewrite_fork: bool = False

    @property
    def env_len(self) -> int:
        return len(self.env)

    @property
    def out_len(self) -> int:
        return len(self.out)

    @property
    def hist_len(self) -> int:
        return self.prompt_len + len(self.out)

    @property
    def seq(self) -> int:
        return -1 if self.call is None else self.call.seq


@dataclass
class PrefixTree:
    rollout_id: str
    nodes: list[Node]
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> calls left out of the tree
    notes: list[str] = field(default_factory=list)  # one line per problem, for the report
    rejected: str | None = None  # the whole rollout is unusable (reason)

    @property
    def calls(self) -> list[Node]:
        return self.nodes[1:]

    def path(self, index: int) -> list[Node]:
        """Nodes root-exclusive from the top down to ``index``."""
        out: list[Node] = []
        while index > 0:
            out.append(self.nodes[index])
            index = self.nodes[index].parent
        out.reverse()
        return out

    def tokens(self, index: int) -> IntArray:
        """Concatenation of environment + generated spans along the path (== prompt + output)."""
        parts: list[IntArray] = []
        for n in self.path(index):
            parts += [n.env, n.out]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _problem(call: CapturedCall, rollout_id: str) -> str | None:
    """Why this record cannot be a node (None when it can)."""
    if call.rollout_id != rollout_id:
        return "foreign_rollout_id"
    if call.error is not None:
        return "error_call"
    if not call.token_exact:
        return "not_token_exact"
    if not call.prompt_ids:
        return "empty_prompt"
    if not call.output_ids:
        return "empty_output"
    if len(call.logprobs) != len(call.output_ids):
        return "logprobs_misaligned"
    if any(not math.isfinite(lp) or lp > 1e-6 for lp in call.logprobs):
        return "invalid_logprobs"
    return None


def _bad_ids(*spans: IntArray) -> str | None:
    for a in spans:
        if len(a) and int(a.min()) < 0:
            return "negative_token_id"
        if len(a) and int(a.max()) > _MAX_TOKEN_ID:
            return "token_id_out_of_range"
    return None


def validate_calls(
    calls: Sequence[CapturedCall], rollout_id: str
) -> tuple[list[CapturedCall], Counter[str], list[str], str | None]:
    """(usable calls in seq order, skipped counts by reason, notes, reject reason)."""
    skipped: Counter[str] = Counter()
    notes: list[str] = []
    by_seq: dict[int, CapturedCall] = {}
    for c in calls:
        prev = by_seq.get(c.seq)
        if prev is None:
            by_seq[c.seq] = c
        elif prev == c:
            skipped["duplicate_record"] += 1
            notes.append(f"seq {c.seq}: exact duplicate record dropped")
        else:
            return [], skipped, notes, f"two different records claim seq {c.seq}"
    seqs = [c.seq for c in calls]
    if seqs != sorted(seqs):
        notes.append("reordered: records were out of seq order; sorted by seq")
    ordered = [by_seq[s] for s in sorted(by_seq)]
    if ordered:
        missing = set(range(ordered[-1].seq + 1)) - set(by_seq)
        if missing:
            skipped["missing_seq"] += len(missing)
            notes.append(f"missing seq {sorted(missing)[:10]} (torn or lost records)")
    usable: list[CapturedCall] = []
    for c in ordered:
        why = _problem(c, rollout_id)
        if why is None:
            usable.append(c)
        else:
            skipped[why] += 1
            if why != "error_call":
                notes.append(f"seq {c.seq}: skipped ({why})")
    return usable, skipped, notes, None


_PROBES = 6  # sampled positions compared before an exact prefix comparison
_MAX_EXACT_MISSES = 2  # then fall back to prefix hashes over the whole prompt


def _extends(prompt: tuple[int, ...], node: Node) -> bool:
    """Exact: ``node``'s prompt + output is a prefix of ``prompt``."""
    c = node.call
    assert c is not None
    lp, lh = node.prompt_len, node.hist_len
    return prompt[:lp] == c.prompt_ids and prompt[lp:lh] == c.output_ids


def _probe(prompt: tuple[int, ...], node: Node) -> bool:
    """Cheap screen: ``prompt`` agrees with ``node``'s history at a few spread positions."""
    c = node.call
    assert c is not None
    lp, lh = node.prompt_len, node.hist_len
    if prompt[lh - 1] != c.output_ids[-1] or prompt[lp] != c.output_ids[0]:
        return False
    step = max(1, lp // _PROBES)
    return all(prompt[k] == c.prompt_ids[k] for k in range(lp - 1, -1, -step)[:_PROBES])


class _Index:
    """Calls by history length (ascending, ties by index) with their history hashes."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, int]] = []

    def add(self, node: Node) -> None:
        bisect.insort(self.keys, (node.hist_len, node.index))

    def parent_of(self, prompt: tuple[int, ...], nodes: list[Node]) -> int:
        """The node whose history is the longest prefix of ``prompt`` (latest on ties), else 0."""
        pos = bisect.bisect_right(self.keys, (len(prompt), len(nodes)))
        misses = 0
        for k in range(pos - 1, -1, -1):
            node = nodes[self.keys[k][1]]
            if not _probe(prompt, node):
                continue
            if _extends(prompt, node):
                return node.index
            misses += 1
            if misses >= _MAX_EXACT_MISSES:
                return self._by_hash(prompt, nodes, k)
        return 0

    def _by_hash(self, prompt: tuple[int, ...], nodes: list[Node], below: int) -> int:
        """Remaining candidates (positions < ``below``) screened by prefix hashes in one pass."""
        ph = prefix_hashes(np.asarray(prompt, dtype=np.int64))
        for k in range(below - 1, -1, -1):
            length, idx = self.keys[k]
            node = nodes[idx]
            if ph[length - 1] == node.hist_hash and _extends(prompt, node):
                return idx
        return 0


def build_tree(calls: Sequence[CapturedCall], rollout_id: str) -> PrefixTree:
    """The prefix tree of one rollout's calls (any order; bad records skipped with a reason)."""
    usable, skipped, notes, rejected = validate_calls(calls, rollout_id)
    empty = np.zeros(0, dtype=np.int64)
    root = Node(0, None, -1, empty, empty, 0, np.zeros(0))
    tree = PrefixTree(rollout_id, [root], skipped, notes, rejected)
    if rejected:
        return tree
    index = _Index()
    messages = MessageIndex()
    for call in usable:
        prompt = call.prompt_ids
        parent = tree.nodes[index.parent_of(prompt, tree.nodes)]
        env = np.asarray(prompt[parent.hist_len :], dtype=np.int64)
        out = np.asarray(call.output_ids, dtype=np.int64)
        bad = _bad_ids(env, out)
        if bad is not None:
            skipped[bad] += 1
            notes.append(f"seq {call.seq}: skipped ({bad})")
            continue
        h = _extend_hash(parent.hist_hash, parent.hist_len, env)
        node = Node(
            index=len(tree.nodes),
            call=call,
            parent=parent.index,
            env=env,
            out=out,
            prompt_len=len(prompt),
            logprobs=np.asarray(call.logprobs, dtype=np.float64),
            hist_hash=_extend_hash(h, len(prompt), out),
            logical_parent=parent.index,
        )
        continued = messages.continued_call(call, parent.call)
        if continued is not None and continued != parent.index:
            node.logical_parent = continued
            node.rewrite_fork = True
        tree.nodes.append(node)
        parent.children.append(node.index)
        messages.add(node.index, call)
        index.add(node)
    return tree
