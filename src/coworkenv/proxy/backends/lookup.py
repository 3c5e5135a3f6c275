"""Prompt-lookup drafts: the tokens that followed the latest earlier occurrence of a sequence's end.

An agent's turns copy much of their context — tool names from the tool block, ids, addresses and
values from earlier tool results, the JSON of a tool call — so the next few tokens of a generation
often already stand in its own prompt or output. Speculative decoding by prompt lookup (as in
vLLM's n-gram proposer and transformers' ``prompt_lookup_num_tokens``) proposes them as a draft;
the model then checks the draft in one forward and keeps the tokens it would have produced.

Contract of :class:`PromptLookup`: built on a sequence's token ids and told every token appended
(:meth:`extend`), :meth:`propose` returns at most ``k`` draft tokens — those that followed the most
recent earlier occurrence of the sequence's last ``n`` tokens, for the largest ``n`` from ``max_n``
down to ``min_n`` that occurred before — or ``()`` when none did. The draft is a guess only: it
never changes what is sampled or its logprob (the verifier decides). Each token costs O(max_n) to
index; the index keys are plain ints (the n-gram's ids packed), so it holds no object Python's
cyclic collector has to walk.

:func:`acceptance` replays captured calls through it: how many tokens per model forward a
verifier would emit, the figure that sizes the lever (``benchmarks/lookup_acceptance.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BITS = 20  # token ids below 2**20 (SmolLM2: 49,152; Qwen: 151,936); 3 packed fit an int64
MASK = (1 << BITS) - 1
BULK = 64  # tokens appended at once from which the index is built with numpy


class PromptLookup:
    """An incremental n-gram index over one token sequence (see the module docstring)."""

    def __init__(self, ids: Iterable[int] = (), *, max_n: int = 3, min_n: int = 2) -> None:
        if not 1 <= min_n <= max_n <= 3:
            raise ValueError(f"prompt lookup: need 1 <= min_n <= max_n <= 3, got {min_n}, {max_n}")
        self.max_n, self.min_n = max_n, min_n
        self.ids: list[int] = []
        # per n: the packed n-gram ending just before position p -> p (its latest occurrence that a
        # token follows); the sequence's own last n-gram is entered only once a token follows it
        self._index: list[dict[int, int]] = [{} for _ in range(max_n + 1)]
        self.extend(ids)

    def _key(self, end: int, n: int) -> int:
        key = 0
        for t in self.ids[end - n : end]:
            key = (key << BITS) | t
        return key

    def extend(self, ids: Iterable[int]) -> None:
        """Append ``ids`` to the sequence (many at once — a prompt — are indexed in bulk)."""
        new = [int(t) for t in ids]
        bad = next((t for t in new if not 0 <= t <= MASK), None)
        if bad is not None:
            raise ValueError(f"prompt lookup: token id {bad} does not fit {BITS} bits")
        if len(new) < BULK:
            for t in new:
                end = len(self.ids)
                for n in range(self.min_n, self.max_n + 1):
                    if end >= n:
                        self._index[n][self._key(end, n)] = end
                self.ids.append(t)
            return
        import numpy as np

        first = len(self.ids)  # the first end position the loop above would have entered
        self.ids += new
        ids = np.asarray(self.ids, dtype=np.int64)
        last = len(self.ids)  # ends first .. last - 1: every n-gram that a token now follows
        for n in range(self.min_n, self.max_n + 1):
            ends = np.arange(max(first, n), last)
            if not len(ends):
                continue
            keys = np.zeros(len(ends), dtype=np.int64)
            for j in range(n):  # the n-gram ending just before `end`, oldest token in the high bits
                keys = (keys << BITS) | ids[ends - n + j]
            # later ends overwrite earlier ones: the latest occurrence wins, as one by one
            self._index[n].update(zip(keys.tolist(), ends.tolist(), strict=True))

    def propose(self, k: int) -> tuple[int, ...]:
        """Up to ``k`` draft tokens for what follows the sequence (``()``: no earlier occurrence)."""
        end = len(self.ids)
        if k <= 0:
            return ()
        for n in range(self.max_n, self.min_n - 1, -1):
            if end < n:
                continue
            at = self._index[n].get(self._key(end, n))
            if at is not None:
                return tuple(self.ids[at : at + k])
        return ()


@dataclass(frozen=True)
class Acceptance:
    """A replay's totals: generated tokens, the forwards that made them one token at a time
    (``plain_steps`` = ``tokens``) and with drafts of up to ``k`` (``spec_steps``), draft tokens
    proposed and accepted, and the steps that had a draft."""

    k: int
    calls: int
    tokens: int
    spec_steps: int
    proposed: int
    accepted: int
    drafted_steps: int

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / self.spec_steps if self.spec_steps else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


def acceptance(
    calls: Iterable[tuple[Sequence[int], Sequence[int]]], k: int, *, max_n: int = 3, min_n: int = 2
) -> Acceptance:
    """Replay (prompt ids, output ids) pairs: at each step propose up to ``k`` tokens, accept the
    leading ones equal to what was generated, emit those plus one. A draft token matches the token
    sampled at its place with the probability the verifier would accept it (speculative sampling
    accepts a deterministic draft token x with probability p(x)), so the replay's acceptance is the
    expected acceptance of the real verifier on the same distribution."""
    n_calls = tokens = steps = proposed = accepted = drafted = 0
    for prompt, out in calls:
        if not out:
            continue
        n_calls += 1
        look = PromptLookup(prompt, max_n=max_n, min_n=min_n)
        t = 0
        while t < len(out):
            draft = look.propose(min(k, len(out) - t - 1))
            ok = 0
            while ok < len(draft) and draft[ok] == out[t + ok]:
                ok += 1
            proposed += len(draft)
            accepted += ok
            drafted += bool(draft)
            look.extend(out[t : t + ok + 1])
            t += ok + 1
            steps += 1
        tokens += len(out)
    return Acceptance(k, n_calls, tokens, steps, proposed, accepted, drafted)
