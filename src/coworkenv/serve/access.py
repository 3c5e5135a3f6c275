"""Who may reach what on the services: capability URLs for agents, an operator token for graders.

Contract (enforced by :mod:`coworkenv.serve.http` and :class:`coworkenv.serve.mcp.StreamableHttpMount`):

* An agent reaches its trial only through ``/t/<capability>/...`` (:attr:`Trial.capability`, an
  unguessable secret handed to the rollout's harness): tool routes, ``tools``, ``health`` and the
  MCP endpoint. Knowing or guessing a trial **id** gives nothing.
* Everything that reads or rewrites grading evidence — ``events``, ``state``, ``reset``,
  ``<service>/audit``, ``<service>/reset`` — and every host route that names trials or tasks
  (``/trials``, ``/tasks``) needs the **operator token**, presented as ``Authorization: Bearer
  <token>`` or ``X-Coworkenv-Token: <token>``; with it, ``/t/<trial id>/...`` also works.
* A missing token answers 401 ``unauthorized``, a wrong one 403 ``forbidden`` — the usual
  ``{"error", "code"}`` body — and the attempt is recorded (:meth:`Host.refuse`): on the trial
  whose capability was used when there is one, always in the host's log. Unknown keys and known
  trial ids without the token get the same answer, so trial ids cannot be probed.

The token is compared in constant time; it never appears in a refusal record or a response.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time
from collections.abc import Iterable
from typing import Any

from coworkenv.services.trial import Host, Trial

log = logging.getLogger(__name__)

TOKEN_HEADER = "x-coworkenv-token"
TOKEN_ENV = "COWORKENV_OPERATOR_TOKEN"
"""Environment variable ``coworkenv serve`` reads the operator token from (else it makes one)."""

TRIAL_ENDPOINTS = frozenset({"events", "state", "reset"})
SERVICE_ENDPOINTS = frozenset({"audit", "reset"})
HOST_ROUTES = frozenset({"trials", "tasks"})


def new_token() -> str:
    """A fresh operator token (256 random bits)."""
    return secrets.token_urlsafe(32)


def presented_token(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The token a request carries (``Authorization: Bearer`` or ``X-Coworkenv-Token``), else None."""
    for key, value in headers:
        name = key.lower()
        if name == TOKEN_HEADER.encode():
            return bytes(value).strip()
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return bytes(value[7:]).strip()
    return None


class OperatorToken:
    """The operator's secret; :meth:`check` says whether a request presents it."""

    def __init__(self, token: str) -> None:
        if len(token) < 16:
            raise ValueError(
                "the operator token must be at least 16 characters; leave it unset to get a random one"
            )
        self.value = token
        self._raw = token.encode()

    def check(self, headers: Iterable[tuple[bytes, bytes]]) -> str | None:
        """None when the request carries the token, else the refusal code (unauthorized/forbidden)."""
        given = presented_token(headers)
        if given is None:
            return "unauthorized"
        return None if hmac.compare_digest(given, self._raw) else "forbidden"


def is_operator_path(path: str, services: Iterable[str]) -> bool:
    """Whether a per-trial ``path`` (after ``/t/<key>``) reads or rewrites grading evidence.

    ``services`` are the trial's service names (``calendar/events`` is a tool, not the event log).
    """
    parts = [p for p in path.split("/") if p]
    if len(parts) == 1:
        return parts[0] in TRIAL_ENDPOINTS
    return len(parts) == 2 and parts[1] in SERVICE_ENDPOINTS and parts[0] in set(services)


def refusal(code: str, method: str, path: str, trial_id: str | None, client: str | None) -> dict[str, Any]:
    """One refusal record (``path`` must already have any capability replaced by the trial id)."""
    return {
        "kind": "refused_request",
        "code": code,
        "method": method,
        "path": path,
        "trial_id": trial_id,
        "client": client,
        "time": time.time(),
    }


async def record_refusal(host: Host, entry: dict[str, Any], trial: Trial | None) -> None:
    """Record ``entry`` via :meth:`Host.refuse`; a request that names no trial of its own is first
    attributed by the host's :attr:`Host.attribute` hook (in a worker thread, rate-limited)."""
    if trial is None and host.attribute is not None and host.attribution_allowed():
        try:
            tid = await asyncio.to_thread(host.attribute, entry.get("client"))
        except Exception:  # attribution is best effort; the refusal is recorded regardless
            log.exception("attributing a refused request failed")
            tid = None
        trial = host.trials.get(tid) if tid else None
        if trial is not None:
            entry = {**entry, "trial_id": trial.id, "attributed_by": "peer"}
    host.refuse(entry, trial)


REFUSAL_MESSAGES = {
    "unauthorized": "this endpoint needs the operator token (Authorization: Bearer <token>); "
    "agents reach their trial only through their capability URL",
    "forbidden": "wrong operator token",
}
