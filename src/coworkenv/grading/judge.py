"""An LLM judge over any OpenAI-compatible Chat Completions endpoint.

Configured by :class:`JudgeConfig` (base URL, model, API key or the name of the environment
variable holding it). The judge sees the task request, the rubric, the agent's tool calls and final
answer, and must answer with JSON ``{"score": <0..1>, "reason": "..."}``; anything else raises, and
the grader then reports the check as not run (never as 0).
"""

from __future__ import annotations

import json
import os
import re

import httpx
from pydantic import BaseModel, ConfigDict, Field

from coworkenv.grading.grader import Episode
from coworkenv.spec import TaskSpec

_JSON = re.compile(r"\{.*\}", re.DOTALL)


class JudgeConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1")
    model: str
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    timeout_s: float = 60.0


def render_episode(spec: TaskSpec, ep: Episode, max_chars: int = 12000) -> str:
    lines = [f"REQUEST:\n{spec.request}", "TOOL CALLS:"]
    for e in ep.events:
        out = json.dumps(e.result if e.ok else e.error, ensure_ascii=False, default=str)
        lines.append(f"- {e.tool}({json.dumps(e.args, ensure_ascii=False)}) -> {out[:400]}")
    lines.append(f"FINAL ANSWER:\n{ep.final_answer}")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars // 2] + "\n...\n" + text[-max_chars // 2 :]


class OpenAIJudge:
    def __init__(self, config: JudgeConfig, client: httpx.Client | None = None) -> None:
        self.config = config
        self._client = client or httpx.Client(timeout=config.timeout_s)

    def score(self, rubric: str, spec: TaskSpec, episode: Episode) -> tuple[float, str]:
        cfg = self.config
        key = cfg.api_key or os.environ.get(cfg.api_key_env, "")
        prompt = (
            "You grade an AI coworker's work against a rubric. Reply with JSON only: "
            '{"score": <number between 0 and 1>, "reason": "<one sentence>"}.\n\n'
            f"RUBRIC:\n{rubric}\n\n{spec.judge_rubric}\n\nEPISODE:\n{render_episode(spec, episode)}"
        )
        resp = self._client.post(
            cfg.base_url.rstrip("/") + "/chat/completions",
            headers={"Authorization": f"Bearer {key}"} if key else {},
            json={
                "model": cfg.model,
                "temperature": cfg.temperature,
                "messages": [{"role": "user", "content": prompt}],
            },
        )
        resp.raise_for_status()
        content = resp.json()["choices"][0]["message"]["content"] or ""
        m = _JSON.search(content)
        if not m:
            raise ValueError(f"judge reply has no JSON object: {content[:200]!r}")
        data = json.loads(m.group(0))
        score = float(data["score"])
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"judge score out of range: {score}")
        return score, str(data.get("reason", ""))


def judge_from_env() -> OpenAIJudge | None:
    """The judge configured by ``COWORKENV_JUDGE_BASE_URL`` + ``COWORKENV_JUDGE_MODEL`` (key in
    ``COWORKENV_JUDGE_API_KEY`` or ``OPENAI_API_KEY``), or ``None``: ``llm_judge`` checks are then
    reported *not run* and completion renormalizes over the checks that ran."""
    base = os.environ.get("COWORKENV_JUDGE_BASE_URL")
    model = os.environ.get("COWORKENV_JUDGE_MODEL")
    if not base or not model:
        return None
    env = "COWORKENV_JUDGE_API_KEY" if os.environ.get("COWORKENV_JUDGE_API_KEY") else "OPENAI_API_KEY"
    return OpenAIJudge(JudgeConfig(base_url=base, model=model, api_key_env=env))
