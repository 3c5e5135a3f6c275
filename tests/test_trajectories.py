"""Prefix trees, filtering and training samples on synthetic captures (see test_trajectories_gen)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv.proxy.capture import CapturedCall
from coworkenv.proxy.messages import ChatRequest, Message
from coworkenv.trajectories.filters import FilterConfig, filter_tree
from coworkenv.trajectories.sample import TrainingSample
from coworkenv.trajectories.samples import rollout_samples
from coworkenv.trajectories.tree import build_tree
from tests.test_trajectories_gen import record_for, scenario

scenarios = st.builds(
    dict,
    seed=st.integers(0, 10_000),
    turns=st.integers(1, 8),
    retry_p=st.sampled_from([0.0, 0.3, 0.7]),
    rewrite_p=st.sampled_from([0.0, 0.5, 1.0]),
    title=st.booleans(),
    subagent=st.booleans(),
    compact_at=st.one_of(st.none(), st.integers(1, 6)),
)


def check_samples(calls: list[CapturedCall], samples: list[TrainingSample]) -> None:
    """Mask == 1 exactly on spans that are some call's own output ids with its own logprobs."""
    by_seq = {c.seq: c for c in calls}
    for s in samples:
        assert len(s.token_ids) == len(s.loss_mask) == len(s.logprobs) == len(s.weights)
        mask = np.zeros(len(s.token_ids), dtype=int)
        for seg in s.segments:
            c = by_seq[seg.call_seq]
            assert s.token_ids[seg.start : seg.end] == c.output_ids
            assert s.logprobs[seg.start : seg.end] == c.logprobs
            assert s.token_ids[: seg.start] == c.prompt_ids
            assert seg.state_hash == c.state_hash
            mask[seg.start : seg.end] = 1
        assert tuple(mask.tolist()) == s.loss_mask
        for m, lp, w in zip(s.loss_mask, s.logprobs, s.weights, strict=True):
            if not m:
                assert lp == 0.0
                assert w == 0.0
            else:
                assert 0.0 < w <= 1.0


@settings(max_examples=60, deadline=None)
@given(params=scenarios)
def test_path_tokens_are_prompt_plus_output(params: dict[str, object]) -> None:
    h = scenario("r1", **params)  # type: ignore[arg-type]
    shuffled = list(h.calls)
    random.Random(0).shuffle(shuffled)
    tree = build_tree(shuffled, "r1")
    assert tree.rejected is None
    assert len(tree.calls) == len(h.calls)
    for node in tree.calls:
        assert node.call is not None
        assert tree.tokens(node.index).tolist() == list(node.call.prompt_ids + node.call.output_ids)
        parent = tree.nodes[node.parent]
        assert node.call.prompt_ids[: parent.hist_len] == tuple(tree.tokens(parent.index).tolist())
        # no longer earlier history is a prefix of this prompt (longest-prefix attachment)
        for other in tree.calls:
            if other.seq < node.seq and other.hist_len > parent.hist_len:
                assert node.call.prompt_ids[: other.hist_len] != tuple(tree.tokens(other.index).tolist())


@settings(max_examples=60, deadline=None)
@given(params=scenarios)
def test_filters_match_ground_truth_and_samples_align(params: dict[str, object]) -> None:
    h = scenario("r1", **params)  # type: ignore[arg-type]
    tree = build_tree(h.calls, "r1")
    filt = filter_tree(tree, FilterConfig(max_leaves=1000))
    aux_found: dict[str, int] = {}
    for reason in filt.aux.values():
        aux_found[reason] = aux_found.get(reason, 0) + 1
    assert aux_found == h.truth.aux
    assert filt.counters["dead_leaves"] == h.truth.retries
    assert filt.segments == h.truth.segments
    samples, why = rollout_samples(record_for(h), tree, filt)
    assert why is None
    check_samples(h.calls, samples)
    trained = {seg.call_seq for s in samples for seg in s.segments}
    main_ok = {c.seq for c in h.calls if not c.malformed} - {tree.nodes[i].seq for i in filt.aux}
    assert trained == main_ok  # every kept main call trained, no retry, no auxiliary call
    # each generated token counts once per rollout
    total_weight = sum(sum(s.weights) for s in samples)
    generated = sum(len(c.output_ids) for c in h.calls if c.seq in trained)
    assert abs(total_weight - generated) < 1e-6
    assert {s.reward for s in samples} == {0.75}


def test_linear_chain_is_one_branch() -> None:
    h = scenario("r1", 3, turns=6)
    tree = build_tree(h.calls, "r1")
    assert [n.parent for n in tree.calls] == [0, 1, 2, 3, 4, 5]
    assert all(n.env_len > 0 for n in tree.calls)
    filt = filter_tree(tree)
    assert filt.branches == [6]
    assert filt.counters["dead_leaves"] == 0
    samples, _ = rollout_samples(record_for(h), tree, filt)
    assert len(samples) == 1
    assert set(samples[0].weights) == {0.0, 1.0}


def test_retry_is_a_dead_leaf_and_regenerated_turn_is_kept() -> None:
    h = scenario("r1", 4, turns=3, retry_p=1.0)
    tree = build_tree(h.calls, "r1")
    filt = filter_tree(tree)
    malformed = [n.index for n in tree.calls if n.call is not None and n.call.malformed]
    assert sorted(filt.dead) == malformed
    assert len(malformed) == 3
    assert not set(filt.dead) & filt.kept


def test_rewrite_forks_never_train_rewritten_tokens() -> None:
    h = scenario("r1", 5, turns=5, rewrite_p=1.0)
    tree = build_tree(h.calls, "r1")
    assert [n.parent for n in tree.calls] == [0] * 5  # no prompt extends an earlier history
    assert [n.logical_parent for n in tree.calls] == [0, 1, 2, 3, 4]
    assert sum(n.rewrite_fork for n in tree.calls) == 4
    filt = filter_tree(tree)
    assert filt.counters["dead_leaves"] == 0
    assert len(filt.branches) == 5
    samples, _ = rollout_samples(record_for(h), tree, filt)
    check_samples(h.calls, samples)
    assert all(len(s.segments) == 1 for s in samples)


def test_over_branching_rollout_is_discarded() -> None:
    h = scenario("r1", 6, turns=8, retry_p=1.0)
    tree = build_tree(h.calls, "r1")
    filt = filter_tree(tree, FilterConfig(max_leaves=4))
    assert filt.discarded
    assert filt.counters["discarded_over_branching"] == 1
    samples, why = rollout_samples(record_for(h), tree, filt)
    assert samples == []
    assert why == "over_branching"


def test_shared_prefix_weights_count_once() -> None:
    # turn 2 is echoed rewritten: call 3 attaches (token-exactly) to call 1 and continues call 2 by
    # messages, so branches ...-2 and ...-3-4 share calls 0 and 1
    h = scenario("r1", 7, turns=5, rewrite_at=(2,))
    tree = build_tree(h.calls, "r1")
    assert [n.parent for n in tree.calls] == [0, 1, 2, 2, 4]
    assert tree.nodes[4].rewrite_fork
    assert tree.nodes[4].logical_parent == 3
    filt = filter_tree(tree)
    assert filt.branches == [3, 5]
    assert filt.counters["dead_leaves"] == 0
    samples, _ = rollout_samples(record_for(h), tree, filt)
    check_samples(h.calls, samples)
    first = samples[0].segments[0]
    assert set(samples[0].weights[first.start : first.end]) == {0.5}
    last = samples[1].segments[-1]
    assert set(samples[1].weights[last.start : last.end]) == {1.0}


def test_infra_failure_produces_no_samples() -> None:
    h = scenario("r1", 8, turns=2)
    tree = build_tree(h.calls, "r1")
    filt = filter_tree(tree)
    samples, why = rollout_samples(record_for(h, status="infra_failure"), tree, filt)
    assert samples == []
    assert why == "infra_failure"


def raw_call(seq: int, prompt: list[int], out: list[int]) -> CapturedCall:
    return CapturedCall(
        rollout_id="r1",
        seq=seq,
        call_id=str(seq),
        dialect="openai_chat",
        request=ChatRequest(messages=(Message(role="user", content="x"),)),
        prompt_ids=tuple(prompt),
        output_ids=tuple(out),
        logprobs=tuple([-0.1] * len(out)),
    )


def test_near_miss_candidates_fall_back_to_prefix_hashes() -> None:
    base = list(range(10, 110))
    c0 = raw_call(0, base, [7, 8])
    hist0 = [*base, 7, 8]
    gap = [500, 501, 502]
    near1 = [hist0[0], 9999, *hist0[2:], *gap]  # differs from hist0 at position 1 only
    near2 = [hist0[0], hist0[1], 9998, *hist0[3:], *gap]  # ... at position 2 only
    c1 = raw_call(1, near1, [40, 41])
    c2 = raw_call(2, near2, [40, 41])
    x = raw_call(3, [*hist0, *gap, 40, 41, 600], [9])
    tree = build_tree([c0, c1, c2, x], "r1")
    assert [n.parent for n in tree.calls] == [0, 0, 0, 1]
    assert tree.nodes[4].env.tolist() == [*gap, 40, 41, 600]
