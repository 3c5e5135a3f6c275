"""One coworkenv trial driven one tool call at a time over the HTTP face, graded at the end.

This is what every framework adapter (:mod:`coworkenv.integrations.openenv`, ``.trl``,
``.inspect``, ``.skyrl``, ``.verifiers_env``) stands on, so all of them pay the same reward for the
same actions.

Contract:

* :class:`Services` is a running coworkenv server (``coworkenv serve``: its base URL and operator
  token) and the task set it serves (the specs, loaded here too: grading needs them).
  :meth:`Services.local` starts one in this process on a free loopback port (a real uvicorn
  server; tests, notebooks, one-machine training). The agent side never sees the token.
* :meth:`Services.open` opens a fresh trial (``POST /trials``) and returns a :class:`TaskSession`:
  :attr:`~TaskSession.prompt` (our system prompt and the task's request), :attr:`~TaskSession.tools`
  (the trial's own ``GET /t/<capability>/tools``), :meth:`~TaskSession.call` (one ``POST`` to the
  tool's route: the services validate, audit and answer; a tool the task does not expose gets a
  ``tool_not_available`` body without reaching the services — every adapter lists only the task's
  tools, so a model cannot name another), and :meth:`~TaskSession.finish`.
* :meth:`TaskSession.finish` reads the evidence from the services (``/events`` and ``/state``
  with the token), grades it exactly as a ``coworkenv rollout`` would (:func:`grade_rollout`: an
  imported Claw-Eval task by its own ``grader.py`` when Claw-Eval's package is there, else ours;
  forbidden actions zero the reward) and returns an :class:`Outcome` holding a full
  :class:`RolloutRecord` (write it with :func:`append_record`; ``coworkenv eval`` scores it). A
  grader that fails gives a ``grader_error`` label and ``reward=None`` — never a 0. ``finish`` is
  idempotent and closes the trial.
* Tasks that need a workspace (``bash`` and file tools, ``command`` checks) are refused at
  :meth:`Services.open` with a :class:`CoworkError` naming the task: the adapters drive the
  services' tools only; ``coworkenv rollout`` runs those tasks in a sandbox.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from coworkenv.claweval.worker import GraderPool
from coworkenv.errors import CoworkError
from coworkenv.grading.grader import Episode, Judge
from coworkenv.proxy.messages import Message, ToolCall
from coworkenv.rollout.execute import transcript
from coworkenv.rollout.loop import system_prompt, wants_workspace_tools
from coworkenv.rollout.record import FailureLabel, RolloutRecord, ToolCallRecord
from coworkenv.rollout.reward import grade_rollout
from coworkenv.serve import to_json
from coworkenv.services.trial import AuditEvent, LoadedTask, initial_snapshot, load_task
from coworkenv.spec import TaskSpec


class SessionError(CoworkError):
    """The services could not be reached or refused the operator: an infrastructure failure."""


@dataclass(frozen=True)
class Outcome:
    """How one session ended: the reward (``None`` when the rollout is unscored) and its record."""

    record: RolloutRecord

    @property
    def reward(self) -> float | None:
        return self.record.rewards.reward if self.record.rewards is not None else None

    @property
    def failure(self) -> FailureLabel | None:
        return self.record.failure

    def parts(self) -> dict[str, float | None]:
        """reward, completion, safety and robustness (all ``None`` for an unscored rollout)."""
        r = self.record.rewards
        if r is None:
            return {"reward": None, "completion": None, "safety": None, "robustness": None}
        return r.model_dump(include={"reward", "completion", "safety", "robustness"})


@dataclass
class Services:
    """A coworkenv server and the tasks it serves (see the module docstring)."""

    url: str
    token: str
    tasks: Mapping[str, LoadedTask]
    judge: Judge | None = None
    graders: GraderPool | None = None
    timeout_s: float = 30.0
    _http: httpx.Client | None = field(default=None, repr=False)

    @classmethod
    def connect(cls, url: str, token: str, specs: Sequence[TaskSpec], **kw: Any) -> Services:
        """A server already running (``coworkenv serve``) that serves ``specs``."""
        return cls(url=url.rstrip("/"), token=token, tasks={s.id: load_task(s) for s in specs}, **kw)

    @classmethod
    @contextmanager
    def local(cls, specs: Sequence[TaskSpec], **kw: Any) -> Iterator[Services]:
        """Serve ``specs`` from this process (a real uvicorn server on a free loopback port)."""
        from coworkenv.serve.http import background_server, create_app
        from coworkenv.services.trial import Host

        if not specs:
            raise CoworkError("no tasks to serve: give at least one task file, directory or built-in id")
        host = Host()
        loaded = {s.id: host.add_task(s) for s in specs}
        token = secrets.token_urlsafe(24)
        with background_server(create_app(host, operator_token=token)) as url:
            services = cls(url=url, token=token, tasks=loaded, **kw)
            try:
                yield services
            finally:
                services.close()

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(base_url=self.url, timeout=self.timeout_s, trust_env=False)
        return self._http

    @property
    def operator(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def open(self, task_id: str, *, harness: str = "integration", trial: int = 0) -> TaskSession:
        """A fresh trial of ``task_id`` (see the module docstring)."""
        task = self.tasks.get(task_id)
        if task is None:
            known = ", ".join(sorted(self.tasks)[:8])
            more = " …" if len(self.tasks) > 8 else ""
            raise CoworkError(f"unknown task {task_id!r}: this task set has {known}{more}")
        if wants_workspace_tools(task.spec):
            raise CoworkError(
                f"task {task_id!r} needs a workspace (bash and file tools or a command check); the framework "
                "integrations drive the services' tools only — run it with `coworkenv rollout`"
            )
        body = self._request("POST", "/trials", json={"task_id": task_id}, expect=201)
        return TaskSession(self, task, body, harness=harness, trial=trial)

    def _request(self, method: str, path: str, *, expect: int = 200, **kw: Any) -> Any:
        try:
            resp = self.http.request(method, path, headers=self.operator, **kw)
        except httpx.HTTPError as exc:
            raise SessionError(f"{method} {self.url}{path}: {type(exc).__name__}: {exc}") from None
        if resp.status_code != expect:
            raise SessionError(f"{method} {self.url}{path} answered {resp.status_code}: {resp.text[:300]}")
        return resp.json()


class TaskSession:
    """One open trial (see the module docstring)."""

    def __init__(
        self, services: Services, task: LoadedTask, opened: Mapping[str, Any], *, harness: str, trial: int
    ):
        self.services = services
        self.task = task
        self.trial_id = str(opened["trial_id"])
        self.prefix = str(opened["prefix"])
        self.harness = harness
        self.trial = trial
        self.rollout_id = f"{harness}-{task.spec.id}-{uuid.uuid4().hex[:10]}"
        self.started = time.time()
        self.tools: list[dict[str, Any]] = self._agent("GET", "/tools")
        self.tool_names = frozenset(t["function"]["name"] for t in self.tools)
        self.prompt: list[dict[str, str]] = [
            {"role": "system", "content": system_prompt(task.spec)},
            {"role": "user", "content": task.spec.request},
        ]
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.outcome: Outcome | None = None

    @property
    def task_id(self) -> str:
        return self.task.spec.id

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> str:
        """Run one tool call; the services' JSON answer as text (an error body on a bad call)."""
        if self.outcome is not None:
            return _error("the episode is over: no more tool calls", "episode_done")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return self._log(name, {}, _error(f"arguments are not valid JSON: {exc}", "bad_json"))
        args = dict(arguments or {})
        if name not in self.tool_names or name not in self.task.tools:
            return self._log(name, args, _error(f"no tool named {name!r} in this task", "tool_not_available"))
        route = self.task.tools[name].route
        try:
            resp = self.services.http.post(f"{self.prefix}{route}", json=args)
        except httpx.HTTPError as exc:
            raise SessionError(f"POST {self.prefix}{route}: {type(exc).__name__}: {exc}") from None
        return self._log(name, args, resp.text)

    def _log(self, name: str, args: dict[str, Any], text: str) -> str:
        self.calls.append((name, args, text))
        return text

    def messages(self, final_answer: str) -> tuple[Message, ...]:
        """The conversation as this session saw it: prompt, one assistant turn per call, the answer."""
        out = [Message(role=m["role"], content=m["content"]) for m in self.prompt]
        for i, (name, args, text) in enumerate(self.calls):
            cid = f"call_{i}"
            call = ToolCall(id=cid, name=name, arguments=json.dumps(args))
            out.append(Message(role="assistant", tool_calls=(call,)))
            out.append(Message(role="tool", content=text, tool_call_id=cid, name=name))
        out.append(Message(role="assistant", content=final_answer))
        return tuple(out)

    def finish(self, final_answer: str = "", messages: Sequence[Message] | None = None) -> Outcome:
        """Grade the trial with ``final_answer`` and close it (idempotent: later calls return the first)."""
        if self.outcome is not None:
            return self.outcome
        events = [AuditEvent.from_dict(e) for e in self.services._request("GET", f"{self.prefix}/events")]
        state = self.services._request("GET", f"{self.prefix}/state").get("tables")
        spec = self.task.spec
        msgs = tuple(messages) if messages is not None else self.messages(final_answer)
        episode = Episode(
            events=events,
            final_answer=final_answer,
            state=state,
            initial_state=initial_snapshot(self.task) if spec.forbidden_effects else None,
            transcript=transcript(msgs),
        )
        record = RolloutRecord(
            rollout_id=self.rollout_id,
            task_id=spec.id,
            harness=self.harness,
            trial=self.trial,
            category=spec.category,
            difficulty=spec.difficulty,
            status="ok",
            started_at=self.started,
            wall_s=time.time() - self.started,
            final_answer=final_answer,
            messages=msgs,
            tool_calls=tuple(
                ToolCallRecord(seq=e.seq, tool=e.tool, args=e.args, ok=e.ok, error=_message(e.error))
                for e in events
            ),
            audit=tuple(e.to_dict() for e in events),
            meta={"integration": self.harness, "trial_id": self.trial_id},
        )
        graded = grade_rollout(self.task, record, episode, self.services.judge, self.services.graders)
        self.outcome = Outcome(record.model_copy(update=graded.update()))
        self.close()
        return self.outcome

    def close(self) -> None:
        """Close the trial on the server (a no-op when it is already gone)."""
        try:
            self.services.http.delete(f"/trials/{self.trial_id}", headers=self.services.operator)
        except httpx.HTTPError:
            return  # the server is gone; its trials went with it

    def _agent(self, method: str, path: str) -> Any:
        try:
            resp = self.services.http.request(method, f"{self.prefix}{path}")
            resp.raise_for_status()
        except httpx.HTTPError as exc:
            raise SessionError(f"{method} {self.prefix}{path}: {type(exc).__name__}: {exc}") from None
        return resp.json()


def _message(error: Mapping[str, Any] | None) -> str | None:
    return str(error.get("error")) if error else None


def _error(message: str, code: str) -> str:
    return to_json({"error": message, "code": code}).decode()
