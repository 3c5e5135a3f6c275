"""The services container of a Harbor package: ``coworkenv serve`` with the grading endpoints locked.

Contract: ``python -m coworkenv.synth.packaging.sandbox TASK.json [--host H] [--port P]`` hosts one
trial (id ``default``) of the task, every tool at ``/t/default/<route>`` and at the root (Claw-Eval's
routes), exactly as ``coworkenv serve --claw-eval-compat``. Paths that read or rewrite the grading
evidence — ``…/events``, ``…/state``, ``…/audit``, ``…/reset`` and ``/trials`` — answer 403 unless
the request carries header ``X-Coworkenv-Token`` equal to ``$COWORKENV_VERIFIER_TOKEN`` (known to
the verifier only): the agent can neither read the hidden state wholesale nor erase a forbidden call.
"""

from __future__ import annotations

import argparse
import hmac
import os
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_HEADER = "x-coworkenv-token"
TOKEN_ENV = "COWORKENV_VERIFIER_TOKEN"
TRIAL_ID = "default"
TRIAL_ENDPOINTS = frozenset({"events", "state", "reset"})
SERVICE_ENDPOINTS = frozenset({"audit", "reset"})


def is_guarded(path: str) -> bool:
    """Whether ``path`` reads or rewrites grading evidence (see the module docstring).

    After an optional ``/t/<trial>`` prefix: ``events``, ``state``, ``reset``, ``<service>/audit``,
    ``<service>/reset``; and anything under ``/trials``. (``/calendar/events`` is a tool, not guarded.)
    """
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["trials"]:
        return True
    if len(parts) >= 2 and parts[0] == "t":
        parts = parts[2:]
    return (len(parts) == 1 and parts[0] in TRIAL_ENDPOINTS) or (
        len(parts) == 2 and parts[1] in SERVICE_ENDPOINTS
    )


class TokenGuard:
    """ASGI middleware: guarded paths need the verifier token; everything else passes through."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError(f"a verifier token is required (set {TOKEN_ENV})")
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_guarded(str(scope.get("path", ""))):
            given = dict(scope.get("headers") or []).get(TOKEN_HEADER.encode(), b"")
            if not hmac.compare_digest(given, self.token):
                body = b'{"error":"this endpoint is for the verifier only","code":"forbidden"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def locked_app(spec_path: str, token: str) -> ASGIApp:
    """The guarded app serving one trial of the task at ``spec_path``."""
    from coworkenv.serve.http import create_app
    from coworkenv.services import Host
    from coworkenv.tasks.load import load_spec

    spec = load_spec(__import__("pathlib").Path(spec_path))
    host = Host()
    host.add_task(spec, spec_path)
    # the agent's container knows /t/default: here the trial's capability is its id, and the
    # services' own operator token (the verifier's) guards the grading routes as TokenGuard does
    trial = host.open_trial(spec.id, TRIAL_ID, capability=TRIAL_ID)
    guard = TokenGuard(create_app(host, default_trial=trial.id, operator_token=token), token)
    return guard


def main(argv: Sequence[str] | None = None) -> None:
    import uvicorn

    ap = argparse.ArgumentParser(prog="python -m coworkenv.synth.packaging.sandbox", description=__doc__)
    ap.add_argument("spec", help="the serving spec (environment/services/task.json)")
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args(argv)
    app = locked_app(args.spec, os.environ.get(TOKEN_ENV, ""))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
