"""Advantage estimators over rollout groups: pure functions, selected by name from :data:`ESTIMATORS`.

Contract:

* Input is :class:`TrainingSample` s. Branches of one rollout (same ``rollout_id``) form a
  :class:`Rollout`; rollouts with the same ``group_key`` (``"<task>|<harness>"``) form a
  :class:`Group` — harnesses never share a baseline (mix-harness).
* :func:`build_groups` rejects, before any estimation and with counts, groups that are incomplete
  (fewer/more rollouts than ``group_size``) or that contain an infrastructure failure — unless the
  group holds an unsafe rollout (``safety`` < 1): then the failed rollouts are left out and the rest
  (≥ 2) is estimated, so a forbidden action is always penalised, never hidden by a sibling's
  failure (``kept_unsafe`` says which groups, and how many were left out). A non-finite
  reward, reward part or rollout logprob raises :class:`NonFiniteError` naming the rollout; a reward
  part an estimator needs that is missing aborts that rollout (its group is then incomplete).
* Every estimator maps ``(groups, AdvantageParams) -> {sample_key: per-token advantages}`` where
  ``sample_key(s) == f"{rollout_id}#{branch_id}"`` and the list is aligned with ``token_ids``
  (values at ``loss_mask == 0`` positions are meaningless and masked later). Estimators whose
  :attr:`Estimator.needs_value` is true return the per-token *return* ``R``; the trainer subtracts
  ``V(s_t)`` (PPO over trees, γ = λ = 1: ``A_t = R − V(s_t)``).
* Statistics use the population standard deviation (1/G). A group (or GiGPO step group) whose
  spread is within ``zero_tol`` gets zero advantages and stays valid.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from coworkenv.errors import CoworkError
from coworkenv.trajectories.sample import TrainingSample

REWARD_PARTS = ("completion", "safety", "robustness")


class NonFiniteError(CoworkError):
    """A reward, reward part or logprob is NaN/inf; nothing was trained on it."""


class AdvantageError(CoworkError):
    """Samples that cannot be grouped consistently (e.g. branches of a rollout disagree on reward)."""


@dataclass(frozen=True)
class AdvantageParams:
    group_size: int | None = 8
    std_floor: float = 0.05
    zero_tol: float = 1e-6
    gigpo_omega: float = 1.0
    gdpo_weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
    batch_eps: float = 1e-6


@dataclass(frozen=True)
class Rollout:
    rollout_id: str
    group_key: str
    reward: float
    parts: Mapping[str, float]
    samples: tuple[TrainingSample, ...]


@dataclass(frozen=True)
class Group:
    key: str
    rollouts: tuple[Rollout, ...]


@dataclass
class GroupReport:
    """Groups accepted for estimation, and what was rejected and why (counts by reason)."""

    groups: list[Group] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    aborted_rollouts: dict[str, str] = field(default_factory=dict)
    kept_unsafe: dict[str, int] = field(default_factory=dict)
    """Groups kept despite infra failures because they hold an unsafe rollout: key → #left out."""

    def counts(self) -> dict[str, int]:
        by_reason: dict[str, int] = defaultdict(int)
        for reason in self.rejected.values():
            by_reason[reason.split(" (")[0]] += 1
        return {
            "groups_accepted": len(self.groups),
            "groups_rejected": len(self.rejected),
            "rollouts_aborted": len(self.aborted_rollouts),
            "groups_kept_unsafe": len(self.kept_unsafe),
            **{f"rejected_{k}": v for k, v in sorted(by_reason.items())},
        }


def sample_key(s: TrainingSample) -> str:
    return f"{s.rollout_id}#{s.branch_id}"


def _finite(x: float) -> bool:
    return math.isfinite(x)


def check_finite(s: TrainingSample) -> None:
    """Raise :class:`NonFiniteError` if the sample's reward, parts or masked logprobs are not finite."""
    if not _finite(s.reward):
        raise NonFiniteError(f"rollout {s.rollout_id} (task {s.task_id}): reward is {s.reward}")
    for k, v in s.reward_parts.items():
        if not _finite(v):
            raise NonFiniteError(f"rollout {s.rollout_id} (task {s.task_id}): reward_parts.{k} is {v}")
    for i, (m, lp) in enumerate(zip(s.loss_mask, s.logprobs, strict=True)):
        if m and not _finite(lp):
            raise NonFiniteError(
                f"rollout {s.rollout_id} branch {s.branch_id}: rollout logprob at token {i} is {lp}"
            )


def build_groups(
    samples: Iterable[TrainingSample],
    group_size: int | None,
    *,
    infra_failed: Mapping[str, int] | None = None,
    required_parts: Sequence[str] = (),
) -> GroupReport:
    """Group samples into rollouts and rollouts into (task, harness) groups, rejecting bad groups.

    ``infra_failed`` maps a group key to its number of infrastructure-failed rollouts (from the
    rollout records); such a group is rejected unless it holds an unsafe rollout (see the module
    docstring). ``group_size=None`` accepts any size ≥ 2.
    """
    by_rollout: dict[str, list[TrainingSample]] = defaultdict(list)
    for s in samples:
        check_finite(s)
        by_rollout[s.rollout_id].append(s)
    report = GroupReport()
    by_group: dict[str, list[Rollout]] = defaultdict(list)
    for rid, branches in by_rollout.items():
        first = branches[0]
        for b in branches[1:]:
            if b.group_key != first.group_key or abs(b.reward - first.reward) > 1e-9:
                raise AdvantageError(
                    f"rollout {rid}: branches disagree on group_key/reward "
                    f"({first.group_key}={first.reward} vs {b.group_key}={b.reward})"
                )
        missing = [p for p in required_parts if p not in first.reward_parts]
        if missing:
            report.aborted_rollouts[rid] = f"missing reward part(s) {missing}"
            by_group.setdefault(first.group_key, [])
            continue
        branches.sort(key=lambda x: x.branch_id)
        by_group[first.group_key].append(
            Rollout(rid, first.group_key, first.reward, dict(first.reward_parts), tuple(branches))
        )
    failed = infra_failed or {}
    aborted_in: dict[str, int] = defaultdict(int)
    for rid in report.aborted_rollouts:
        aborted_in[by_rollout[rid][0].group_key] += 1
    for key in sorted(by_group):
        rollouts = by_group[key]
        n, n_failed = len(rollouts), failed.get(key, 0)
        unsafe = any(r.parts.get("safety", 1.0) < 1.0 for r in rollouts)
        if n_failed > 0 and not unsafe:
            report.rejected[key] = f"infra_failure ({n_failed} failed rollout(s))"
        elif aborted_in.get(key, 0) > 0:
            report.rejected[key] = f"aborted_sample ({aborted_in[key]} rollout(s) missing rewards)"
        elif group_size is not None and n + n_failed != group_size:
            report.rejected[key] = f"incomplete ({n}/{group_size} rollouts)"
        elif n < 2:
            report.rejected[key] = f"incomplete ({n} rollout, need ≥ 2)"
        else:
            if n_failed:
                report.kept_unsafe[key] = n_failed
            rollouts.sort(key=lambda r: r.rollout_id)
            report.groups.append(Group(key, tuple(rollouts)))
    return report


# ---------------------------------------------------------------- scalar helpers


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def normalize(xs: Sequence[float], *, floor: float, zero_tol: float, divide: bool = True) -> list[float]:
    """Centre ``xs``; divide by ``max(std, floor)`` if ``divide``. Zero spread → all zeros."""
    m = _mean(xs)
    sd = _std(xs)
    if sd <= zero_tol:
        return [0.0] * len(xs)
    denom = max(sd, floor) if divide else 1.0
    return [(x - m) / denom for x in xs]


TokenAdvantages = dict[str, list[float]]


def _broadcast(groups: Sequence[Group], per_rollout: Mapping[str, float]) -> TokenAdvantages:
    out: TokenAdvantages = {}
    for g in groups:
        for r in g.rollouts:
            a = per_rollout[r.rollout_id]
            for s in r.samples:
                out[sample_key(s)] = [a] * len(s.token_ids)
    return out


# ---------------------------------------------------------------- estimators


def grpo(groups: Sequence[Group], p: AdvantageParams) -> TokenAdvantages:
    """(R − μ_g) / max(σ_g, floor); zero-variance groups → 0."""
    per: dict[str, float] = {}
    for g in groups:
        adv = normalize([r.reward for r in g.rollouts], floor=p.std_floor, zero_tol=p.zero_tol)
        per.update({r.rollout_id: a for r, a in zip(g.rollouts, adv, strict=True)})
    return _broadcast(groups, per)


def dr_grpo(groups: Sequence[Group], p: AdvantageParams) -> TokenAdvantages:
    """R − μ_g (no std division); pair with the ``fixed`` loss aggregation."""
    per: dict[str, float] = {}
    for g in groups:
        adv = normalize([r.reward for r in g.rollouts], floor=1.0, zero_tol=p.zero_tol, divide=False)
        per.update({r.rollout_id: a for r, a in zip(g.rollouts, adv, strict=True)})
    return _broadcast(groups, per)


def rloo(groups: Sequence[Group], p: AdvantageParams) -> TokenAdvantages:
    """R_i − mean_{j≠i} R_j (leave-one-out baseline)."""
    per: dict[str, float] = {}
    for g in groups:
        rs = [r.reward for r in g.rollouts]
        total, n = sum(rs), len(rs)
        for r in g.rollouts:
            a = r.reward - (total - r.reward) / (n - 1)
            per[r.rollout_id] = 0.0 if abs(a) <= p.zero_tol else a
    return _broadcast(groups, per)


def gdpo(groups: Sequence[Group], p: AdvantageParams) -> TokenAdvantages:
    """Normalize each reward part within its group, sum with ``gdpo_weights``, then normalize over
    the batch of valid groups (all rollouts of accepted groups; rejected groups never enter)."""
    combined: dict[str, float] = {}
    for g in groups:
        acc = [0.0] * len(g.rollouts)
        for part, w in zip(REWARD_PARTS, p.gdpo_weights, strict=True):
            adv = normalize([r.parts[part] for r in g.rollouts], floor=p.std_floor, zero_tol=p.zero_tol)
            acc = [a + w * x for a, x in zip(acc, adv, strict=True)]
        combined.update({r.rollout_id: a for r, a in zip(g.rollouts, acc, strict=True)})
    if combined:
        vals = list(combined.values())
        m, sd = _mean(vals), _std(vals)
        if sd <= p.zero_tol:
            combined = dict.fromkeys(combined, 0.0)
        else:
            combined = {k: (v - m) / (sd + p.batch_eps) for k, v in combined.items()}
    return _broadcast(groups, combined)


def gigpo(groups: Sequence[Group], p: AdvantageParams) -> TokenAdvantages:
    """Episode advantage (as GRPO) plus ω × step advantage on each generated segment.

    Step groups: within a task group, all model calls whose ``state_hash`` matches (a call shared
    by several branches of one rollout counts once). With a terminal reward and γ = 1 a step's
    return is its rollout's reward; steps alone in their state group get step advantage 0.
    Segments without a ``state_hash`` get the episode advantage only.
    """
    episode = grpo(groups, p)
    out: TokenAdvantages = {k: list(v) for k, v in episode.items()}
    for g in groups:
        states: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
        for r in g.rollouts:
            for s in r.samples:
                for seg in s.segments:
                    if seg.state_hash is not None:
                        states[seg.state_hash][(r.rollout_id, seg.call_seq)] = r.reward
        step_adv: dict[tuple[str, int], float] = {}
        for members in states.values():
            keys = list(members)
            if len(keys) < 2:
                step_adv.update(dict.fromkeys(keys, 0.0))
                continue
            adv = normalize([members[k] for k in keys], floor=p.std_floor, zero_tol=p.zero_tol)
            step_adv.update(dict(zip(keys, adv, strict=True)))
        for r in g.rollouts:
            for s in r.samples:
                row = out[sample_key(s)]
                for seg in s.segments:
                    if seg.state_hash is None:
                        continue
                    a = step_adv[(r.rollout_id, seg.call_seq)]
                    for t in range(seg.start, seg.end):
                        row[t] += p.gigpo_omega * a
    return out


def ppo_returns(groups: Sequence[Group], p: AdvantageParams) -> TokenAdvantages:
    """PPO over trees (γ = λ = 1): every token's return is the rollout reward; A_t = R − V(s_t)
    is formed by the trainer with its value head. Groups only gate validity here."""
    return _broadcast(groups, {r.rollout_id: r.reward for g in groups for r in g.rollouts})


@dataclass(frozen=True)
class Estimator:
    name: str
    fn: Callable[[Sequence[Group], AdvantageParams], TokenAdvantages]
    needs_value: bool = False
    required_parts: tuple[str, ...] = ()
    default_aggregation: str = "token_mean"


ESTIMATORS: dict[str, Estimator] = {
    "grpo": Estimator("grpo", grpo),
    "dr_grpo": Estimator("dr_grpo", dr_grpo, default_aggregation="fixed"),
    "gdpo": Estimator("gdpo", gdpo, required_parts=REWARD_PARTS),
    "gigpo": Estimator("gigpo", gigpo),
    "rloo": Estimator("rloo", rloo),
    "ppo": Estimator("ppo", ppo_returns, needs_value=True),
}


def get_estimator(name: str) -> Estimator:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise AdvantageError(f"unknown estimator {name!r}; choose one of {sorted(ESTIMATORS)}") from None


def estimate(
    name: str,
    samples: Iterable[TrainingSample],
    params: AdvantageParams,
    *,
    infra_failed: Mapping[str, int] | None = None,
) -> tuple[TokenAdvantages, GroupReport]:
    """Group, reject, then run the named estimator. Returns advantages for accepted samples only."""
    est = get_estimator(name)
    report = build_groups(
        samples, params.group_size, infra_failed=infra_failed, required_parts=est.required_parts
    )
    return est.fn(report.groups, params), report
