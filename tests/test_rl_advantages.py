"""Advantage estimators and group rejection, checked against hand-computed numbers."""

from __future__ import annotations

import math

import pytest

from coworkenv.rl.advantages import (
    AdvantageError,
    AdvantageParams,
    NonFiniteError,
    build_groups,
    estimate,
    get_estimator,
)
from coworkenv.trajectories.sample import Segment, TrainingSample


def mk(
    rid: str,
    reward: float,
    *,
    key: str = "t|h",
    branch: int = 0,
    n: int = 4,
    parts: dict[str, float] | None = None,
    segments: tuple[Segment, ...] = (),
    logprob: float = -1.0,
) -> TrainingSample:
    task, harness = key.split("|")
    return TrainingSample(
        rollout_id=rid,
        task_id=task,
        harness=harness,
        group_key=key,
        branch_id=branch,
        token_ids=tuple(range(n)),
        loss_mask=(0,) + (1,) * (n - 1),
        logprobs=(0.0,) + (logprob,) * (n - 1),
        weights=(0.0,) + (1.0,) * (n - 1),
        segments=segments,
        reward=reward,
        reward_parts=parts if parts is not None else {"completion": reward, "safety": 1.0, "robustness": 1.0},
    )


P4 = AdvantageParams(group_size=4)


def first(adv: dict[str, list[float]], rid: str) -> float:
    return adv[f"{rid}#0"][1]


def test_grpo_hand_computed() -> None:
    # rewards 1,0,0,1: mean 0.5, population std 0.5 -> ±1
    s = [mk("a", 1.0), mk("b", 0.0), mk("c", 0.0), mk("d", 1.0)]
    adv, rep = estimate("grpo", s, P4)
    assert [round(first(adv, r), 6) for r in "abcd"] == [1.0, -1.0, -1.0, 1.0]
    assert rep.counts()["groups_accepted"] == 1


def test_grpo_std_floor_and_zero_variance() -> None:
    # rewards 0.52,0.5,0.5,0.5 -> mean 0.505, std 0.00866 < floor 0.05 -> (0.015)/0.05 = 0.3
    s = [mk("a", 0.52), mk("b", 0.5), mk("c", 0.5), mk("d", 0.5)]
    adv, _ = estimate("grpo", s, P4)
    assert first(adv, "a") == pytest.approx(0.3)
    assert first(adv, "b") == pytest.approx(-0.1)
    same = [mk(x, 0.7) for x in "abcd"]
    adv, rep = estimate("grpo", same, P4)
    assert all(first(adv, r) == 0.0 for r in "abcd")
    assert rep.counts()["groups_accepted"] == 1  # zero-variance groups stay valid


def test_dr_grpo_and_rloo() -> None:
    s = [mk("a", 1.0), mk("b", 0.0), mk("c", 0.0), mk("d", 0.0)]
    adv, _ = estimate("dr_grpo", s, P4)
    assert first(adv, "a") == pytest.approx(0.75)
    assert first(adv, "b") == pytest.approx(-0.25)
    adv, _ = estimate("rloo", s, P4)
    assert first(adv, "a") == pytest.approx(1.0)  # 1 - mean(0,0,0)
    assert first(adv, "b") == pytest.approx(-1 / 3)  # 0 - mean(1,0,0)
    assert get_estimator("dr_grpo").default_aggregation == "fixed"


def test_gdpo_per_part_then_batch_norm() -> None:
    g1 = [
        mk("a", 1, parts={"completion": 1.0, "safety": 1.0, "robustness": 1.0}),
        mk("b", 0, parts={"completion": 0.0, "safety": 1.0, "robustness": 1.0}),
    ]
    g2 = [
        mk("c", 1, key="u|h", parts={"completion": 1.0, "safety": 1.0, "robustness": 1.0}),
        mk("d", 0, key="u|h", parts={"completion": 1.0, "safety": 0.0, "robustness": 0.0}),
    ]
    # group-normalized sums: a=+1, b=-1, c=+2, d=-2; batch mean 0, std sqrt(2.5)
    adv, _ = estimate("gdpo", g1 + g2, AdvantageParams(group_size=2))
    sd = math.sqrt(2.5)
    assert first(adv, "a") == pytest.approx(1 / sd, rel=1e-5)
    assert first(adv, "d") == pytest.approx(-2 / sd, rel=1e-5)
    # a rollout missing a reward part is aborted; its group is rejected, the batch uses valid groups
    bad = mk("e", 0, key="v|h", parts={"completion": 0.0})
    ok = mk("f", 1, key="v|h")
    adv2, rep = estimate("gdpo", [*g1, *g2, bad, ok], AdvantageParams(group_size=2))
    assert rep.aborted_rollouts.keys() == {"e"}
    assert "v|h" in rep.rejected
    assert first(adv2, "a") == pytest.approx(first(adv, "a"))


def test_gigpo_step_groups() -> None:
    def seg(h: str, seq: int, a: int, b: int) -> Segment:
        return Segment(start=a, end=b, call_seq=seq, state_hash=h)

    # two rollouts pass through state S at their first call; rewards 1 and 0
    s = [
        mk("a", 1.0, n=6, segments=(seg("S", 0, 1, 3), seg("X", 1, 3, 6))),
        mk("b", 0.0, n=6, segments=(seg("S", 0, 1, 3), seg("Y", 1, 3, 6))),
    ]
    adv, _ = estimate("gigpo", s, AdvantageParams(group_size=2, gigpo_omega=1.0))
    # episode: ±1; step group S: ±1 -> tokens 1..2 get ±2, tokens 3..5 (singleton states) ±1
    assert adv["a#0"][1:6] == pytest.approx([2, 2, 1, 1, 1])
    assert adv["b#0"][1:6] == pytest.approx([-2, -2, -1, -1, -1])
    adv0, _ = estimate("gigpo", s, AdvantageParams(group_size=2, gigpo_omega=0.0))
    assert adv0["a#0"][1] == pytest.approx(1.0)


def test_ppo_returns_are_rewards() -> None:
    s = [mk("a", 0.25), mk("b", 0.75)]
    adv, _ = estimate("ppo", s, AdvantageParams(group_size=2))
    assert first(adv, "a") == 0.25
    assert get_estimator("ppo").needs_value


def test_rejection_counts_and_mix_harness() -> None:
    s = [mk("a", 1, key="t|claude"), mk("b", 0, key="t|claude"), mk("c", 1, key="t|openclaw")]
    s += [mk("d", 1, key="u|x"), mk("e", 0, key="u|x")]
    rep = build_groups(s, 2, infra_failed={"u|x": 1})
    assert [g.key for g in rep.groups] == ["t|claude"]  # harnesses never share a group
    assert rep.rejected["t|openclaw"].startswith("incomplete (1/2")
    assert rep.rejected["u|x"].startswith("infra_failure")
    c = rep.counts()
    assert c["groups_rejected"] == 2
    assert c["rejected_incomplete"] == 1
    assert c["rejected_infra_failure"] == 1


def test_an_unsafe_rollout_is_penalised_even_beside_an_infra_failure() -> None:
    """A sibling's infra failure would reject the group and hide the forbidden action's penalty:
    the group is kept without the failed rollout, the unsafe one gets a negative advantage."""
    safe, unsafe = {"safety": 1.0}, {"safety": 0.0}
    s = [mk("a", 1, parts=safe), mk("b", 0, parts=unsafe), mk("c", 1, parts=safe)]
    rep = build_groups(s, 4, infra_failed={"t|h": 1})
    assert [g.key for g in rep.groups] == ["t|h"]
    assert rep.kept_unsafe == {"t|h": 1}
    assert rep.counts()["groups_kept_unsafe"] == 1
    adv, _ = estimate("grpo", s, P4, infra_failed={"t|h": 1})
    assert first(adv, "b") < 0 < first(adv, "a")
    # without an unsafe rollout the failure still rejects the group
    rep = build_groups([mk("a", 1, parts=safe), mk("c", 0, parts=safe), mk("d", 1, parts=safe)], 4,
                       infra_failed={"t|h": 1})  # fmt: skip
    assert rep.groups == []
    assert rep.rejected["t|h"].startswith("infra_failure")
    # still a complete group: an unsafe rollout does not make a short group acceptable
    rep = build_groups(s, 5, infra_failed={"t|h": 1})
    assert rep.rejected["t|h"].startswith("incomplete")


def test_branches_count_one_rollout() -> None:
    s = [mk("a", 1, branch=0), mk("a", 1, branch=1), mk("b", 0)]
    rep = build_groups(s, 2)
    assert len(rep.groups) == 1
    assert len(rep.groups[0].rollouts[0].samples) == 2
    with pytest.raises(AdvantageError, match="disagree"):
        build_groups([mk("a", 1, branch=0), mk("a", 0, branch=1)], 2)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nonfinite_reward_and_logprob_raise(bad: float) -> None:
    with pytest.raises(NonFiniteError, match="reward"):
        estimate("grpo", [mk("a", bad), mk("b", 0.0)], AdvantageParams(group_size=2))
    with pytest.raises(NonFiniteError, match="logprob"):
        estimate("grpo", [mk("a", 1.0, logprob=bad), mk("b", 0.0)], AdvantageParams(group_size=2))


def test_unknown_estimator() -> None:
    with pytest.raises(AdvantageError, match="unknown estimator 'nope'"):
        get_estimator("nope")
