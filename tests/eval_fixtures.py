"""Rollout records for the eval/report tests: real reference replays, an empty run, an infra failure."""

from __future__ import annotations

from typing import Any

from coworkenv.grading.replay import run_reference, run_steps
from coworkenv.proxy.messages import Message, ToolCall
from coworkenv.rollout.record import FailureLabel, RewardParts, RolloutRecord, ToolCallRecord
from coworkenv.services import load_task
from coworkenv.spec import TaskSpec


def record(spec: TaskSpec, trial: int, *, good: bool, harness: str = "builtin") -> RolloutRecord:
    task = load_task(spec)
    res = run_reference(task) if good else run_steps(task, [], "")
    g = res.grade
    events = [e.to_dict() for e in res.episode.events]
    msgs: list[Message] = [Message(role="user", content=spec.request)]
    for e in res.episode.events:
        cid = f"c{e.seq}"
        msgs.append(Message(role="assistant", tool_calls=(ToolCall(id=cid, name=e.tool, arguments="{}"),)))
        msgs.append(Message(role="tool", tool_call_id=cid, name=e.tool, content=str(e.result)[:200]))
    answer = res.episode.final_answer
    msgs.append(Message(role="assistant", content=answer))
    return RolloutRecord(
        rollout_id=f"{spec.id}/{harness}/{trial}",
        task_id=spec.id,
        harness=harness,
        trial=trial,
        category=spec.category,
        difficulty=spec.difficulty,
        status="ok",
        final_answer=answer,
        messages=tuple(msgs),
        tool_calls=tuple(
            ToolCallRecord(seq=e.seq, tool=e.tool, args=e.args, ok=e.ok) for e in res.episode.events
        ),
        audit=tuple(events),
        grade=g.model_dump(mode="json"),
        rewards=None
        if g.reward is None
        else RewardParts(
            reward=g.reward, completion=g.completion or 0.0, safety=g.safety, robustness=g.robustness
        ),
    )


def infra(spec: TaskSpec, trial: int, harness: str = "builtin") -> RolloutRecord:
    return RolloutRecord(
        rollout_id=f"{spec.id}/{harness}/{trial}",
        task_id=spec.id,
        harness=harness,
        trial=trial,
        category=spec.category,
        difficulty=spec.difficulty,
        status="infra_failure",
        failure=FailureLabel(kind="upstream_error", detail="backend 503"),
    )


def parts(reward: float, **kw: Any) -> RewardParts:
    return RewardParts(
        reward=reward,
        completion=kw.get("completion", reward),
        safety=kw.get("safety", 1.0),
        robustness=kw.get("robustness", 1.0),
    )
