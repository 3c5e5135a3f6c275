"""Prompt-lookup drafts (proxy/backends/lookup.py): what they propose and the replay's counts."""

from __future__ import annotations

import math
import random

import pytest
import torch

from coworkenv.proxy.backends.embedded import accept_draft
from coworkenv.proxy.backends.lookup import PromptLookup, acceptance


def brute(ids: list[int], k: int, max_n: int = 3, min_n: int = 2) -> tuple[int, ...]:
    """The definition: the latest earlier occurrence of the longest suffix n-gram, and what followed."""
    end = len(ids)
    for n in range(max_n, min_n - 1, -1):
        if end < n:
            continue
        suffix = ids[end - n :]
        for start in range(end - n - 1, -1, -1):  # an occurrence that some token follows
            if ids[start : start + n] == suffix:
                return tuple(ids[start + n : start + n + k])
    return ()


def test_it_proposes_what_followed_the_latest_occurrence_of_the_longest_suffix() -> None:
    look = PromptLookup([5, 6, 7, 1, 5, 6, 8, 2, 6, 7, 9, 5, 6])
    # suffix (5, 6): latest earlier occurrence at 4..5, followed by 8, 2, 6
    assert look.propose(3) == (8, 2, 6)
    look.extend([7])
    # suffix (5, 6, 7) occurs at 0..2 only (followed by 1, 5); the 2-gram (6, 7) later, at 8..9, loses to it
    assert look.propose(2) == (1, 5)
    assert look.propose(0) == ()
    assert PromptLookup([1, 2, 3, 4]).propose(4) == ()  # nothing repeats
    assert PromptLookup([]).propose(2) == ()


def test_the_sequences_own_end_is_never_its_own_match() -> None:
    look = PromptLookup([3, 3])
    assert look.propose(2) == ()  # (3, 3) has occurred only as the end itself
    look.extend([3])
    assert look.propose(2) == (3,)  # (3, 3) at 0..1, followed by the last 3


def test_incremental_and_brute_force_agree_on_random_sequences() -> None:
    rng = random.Random(0)
    for _ in range(200):
        vocab = rng.choice([3, 6, 20])
        ids = [rng.randrange(vocab) for _ in range(rng.randrange(0, 60))]
        look = PromptLookup(ids[:10])
        for i in range(10, len(ids) + 1):
            assert look.propose(4) == brute(ids[:i], 4), ids[:i]
            if i < len(ids):
                look.extend([ids[i]])


def test_acceptance_counts_a_copy_and_a_generation_with_nothing_to_copy() -> None:
    prompt = list(range(100, 140))
    copied = acceptance([([*prompt, 100, 101], list(range(102, 122)))], 4)
    # each step drafts 4 tokens of the prompt's run and they are all right: 5 tokens per forward
    assert copied.tokens == 20
    assert copied.spec_steps == 4
    assert copied.tokens_per_step == 5.0
    assert copied.acceptance_rate == 1.0
    fresh = acceptance([(prompt, list(range(500, 520)))], 4)
    assert fresh.spec_steps == 20
    assert fresh.tokens_per_step == 1.0
    assert fresh.proposed == 0


def test_a_wrong_draft_costs_no_token() -> None:
    # after 7, 8 the draft is 9 (what followed 7, 8 before) but the generation goes on with 1: that
    # forward still makes its one token, as without a draft
    got = acceptance([([7, 8, 9, 9, 7], [8, 1, 5])], 2)
    assert (got.tokens, got.spec_steps, got.proposed, got.accepted, got.drafted_steps) == (3, 3, 1, 0, 1)


def test_bad_settings_and_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="min_n"):
        PromptLookup([1], max_n=4)
    with pytest.raises(ValueError, match="20 bits"):
        PromptLookup([1, 2, 1 << 21])


# ---------------------------------------------------------------- verifying a draft


def _rows(*probs: list[float]) -> torch.Tensor:
    return torch.tensor(probs, dtype=torch.float32).log()


def test_an_accepted_or_corrected_draft_token_is_distributed_as_the_model_says() -> None:
    """Whatever the draft, the first emitted token follows row 0 (speculative sampling is exact)."""
    p0 = [0.5, 0.2, 0.15, 0.1, 0.05]
    logp = _rows(p0, [0.1, 0.1, 0.1, 0.1, 0.6])
    n = 40_000
    for draft_token in (0, 1, 4):
        gen = torch.Generator().manual_seed(draft_token)
        counts = [0] * 5
        second = [0] * 5
        for _ in range(n):
            got = accept_draft(logp, [draft_token], 1.0, gen)
            counts[got[0][0]] += 1
            assert got[0][1] == pytest.approx(math.log(p0[got[0][0]]), abs=1e-6)
            if got[0][0] == draft_token:  # accepted: a second token, from row 1
                assert len(got) == 2
                second[got[1][0]] += 1
            else:
                assert len(got) == 1
        for p, c in zip(p0, counts, strict=True):
            assert abs(c / n - p) < 4 * math.sqrt(p * (1 - p) / n), (draft_token, counts)
        kept = sum(second)
        assert abs(second[4] / kept - 0.6) < 4 * math.sqrt(0.24 / kept)


def test_a_draft_outside_top_p_is_never_accepted_and_greedy_keeps_the_argmax_run() -> None:
    logp = torch.tensor([[0.0, float("-inf"), float("-inf")], [math.log(0.5), math.log(0.5), float("-inf")]])
    gen = torch.Generator().manual_seed(0)
    assert all(accept_draft(logp, [2], 1.0, gen)[0][0] == 0 for _ in range(200))
    greedy = _rows([0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8])
    assert [t for t, _ in accept_draft(greedy, [0, 1], 0.0, gen)] == [0, 1, 2]  # both right, then a bonus
    assert [t for t, _ in accept_draft(greedy, [0, 2], 0.0, gen)] == [0, 1]  # the second corrected
    assert [t for t, _ in accept_draft(greedy, [1, 1], 0.0, gen)] == [0]


def test_a_prompt_indexed_in_bulk_equals_one_token_at_a_time() -> None:
    rng = random.Random(1)
    for vocab in (4, 50, 49_152):
        ids = [rng.randrange(vocab) for _ in range(700)]
        bulk = PromptLookup(ids[:300])  # bulk, then one by one, then bulk again
        bulk.extend(ids[300:310])
        bulk.extend(ids[310:])
        one = PromptLookup()
        for t in ids:
            one.extend([t])
        for n in (2, 3):
            assert bulk._index[n] == one._index[n]
        assert bulk.propose(4) == one.propose(4) == brute(ids, 4)
