"""Bad capture input: truncated, reordered, duplicated or corrupted records never misalign a sample."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv.proxy.capture import CapturedCall
from coworkenv.trajectories.filters import FilterConfig, filter_tree
from coworkenv.trajectories.samples import rollout_samples
from coworkenv.trajectories.tree import build_tree
from tests.test_trajectories import check_samples
from tests.test_trajectories_gen import record_for, scenario

CORRUPTIONS = (
    "drop",
    "shuffle",
    "duplicate",
    "short_logprobs",
    "long_output",
    "negative_id",
    "error",
    "foreign",
    "flip_prompt_token",
    "nan_logprob",
    "not_token_exact",
    "conflict",
)


def corrupt(calls: list[CapturedCall], ops: list[tuple[str, int]]) -> list[CapturedCall]:
    out = list(calls)
    for op, k in ops:
        if not out:
            break
        i = k % len(out)
        c = out[i]
        if op == "drop":
            out.pop(i)
        elif op == "shuffle":
            random.Random(k).shuffle(out)
        elif op == "duplicate":
            out.insert(k % (len(out) + 1), c)
        elif op == "short_logprobs":
            out[i] = c.model_copy(update={"logprobs": c.logprobs[:-1]})
        elif op == "long_output":
            out[i] = c.model_copy(update={"output_ids": (*c.output_ids, 7)})
        elif op == "negative_id":
            out[i] = c.model_copy(update={"prompt_ids": (-1, *c.prompt_ids[1:])})
        elif op == "error":
            out[i] = c.model_copy(update={"error": "upstream_error: 502"})
        elif op == "foreign":
            out[i] = c.model_copy(update={"rollout_id": "someone-else"})
        elif op == "flip_prompt_token":
            p = list(c.prompt_ids)
            p[k % len(p)] += 1
            out[i] = c.model_copy(update={"prompt_ids": tuple(p)})
        elif op == "nan_logprob":
            out[i] = c.model_copy(update={"logprobs": (float("nan"), *c.logprobs[1:])})
        elif op == "not_token_exact":
            out[i] = c.model_copy(update={"token_exact": False})
        elif op == "conflict":
            out.append(c.model_copy(update={"text": c.text + " (other)"}))
    return out


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 1000),
    turns=st.integers(1, 6),
    retry_p=st.sampled_from([0.0, 0.5]),
    rewrite_p=st.sampled_from([0.0, 0.5]),
    ops=st.lists(st.tuples(st.sampled_from(CORRUPTIONS), st.integers(0, 10_000)), max_size=4),
)
def test_corrupted_captures_never_misalign(
    seed: int, turns: int, retry_p: float, rewrite_p: float, ops: list[tuple[str, int]]
) -> None:
    h = scenario("r1", seed, turns=turns, retry_p=retry_p, rewrite_p=rewrite_p, title=True, compact_at=2)
    bad = corrupt(h.calls, ops)
    tree = build_tree(bad, "r1")
    by_seq: dict[int, CapturedCall] = {}
    conflict = False
    for c in bad:
        conflict |= by_seq.setdefault(c.seq, c) != c
    assert bool(tree.rejected) == conflict
    if tree.rejected:
        assert conflict
        assert "seq" in tree.rejected
        return
    filt = filter_tree(tree, FilterConfig(max_leaves=1000))
    samples, why = rollout_samples(record_for(h), tree, filt)
    used = [n.call for n in tree.calls if n.call is not None]
    assert len({c.seq for c in used}) == len(used)
    check_samples(used, samples)
    for c in used:
        assert c.error is None
        assert c.token_exact
        assert len(c.logprobs) == len(c.output_ids)
        assert c.rollout_id == "r1"
        assert min(c.prompt_ids) >= 0
    if why is None:
        assert samples


def test_each_skip_has_a_reason() -> None:
    h = scenario("r1", 3, turns=5)
    ops = [("drop", 2), ("short_logprobs", 1), ("error", 2), ("foreign", 3), ("duplicate", 0)]
    tree = build_tree(corrupt(h.calls, ops), "r1")
    assert tree.skipped == {
        "logprobs_misaligned": 1,
        "error_call": 1,
        "foreign_rollout_id": 1,
        "duplicate_record": 1,
        "missing_seq": 1,
    }
    assert any("logprobs_misaligned" in n for n in tree.notes)


def test_conflicting_records_reject_the_rollout() -> None:
    h = scenario("r1", 3, turns=3)
    tree = build_tree(corrupt(h.calls, [("conflict", 1)]), "r1")
    assert tree.rejected == "two different records claim seq 1"
    filt = filter_tree(tree)
    samples, why = rollout_samples(record_for(h), tree, filt)
    assert samples == []
    assert why == "rejected"


def test_errored_middle_call_keeps_alignment() -> None:
    # the harness retried after an upstream error: the errored call is no node, the retry is
    h = scenario("r1", 9, turns=4)
    c1 = h.calls[1]
    errored = c1.model_copy(update={"seq": 1, "error": "timeout", "output_ids": (), "logprobs": ()})
    calls = [h.calls[0], errored] + [c.model_copy(update={"seq": c.seq + 1}) for c in h.calls[1:]]
    tree = build_tree(calls, "r1")
    assert tree.skipped == {"error_call": 1}
    filt = filter_tree(tree)
    samples, _ = rollout_samples(record_for(h), tree, filt)
    assert len(samples) == 1
    assert len(samples[0].segments) == 4
    check_samples([n.call for n in tree.calls if n.call is not None], samples)
