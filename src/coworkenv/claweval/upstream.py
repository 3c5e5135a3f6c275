"""Claw-Eval's own mock services, run from a Claw-Eval checkout, one process for all tasks.

Contract: :class:`UpstreamServices` imports each ``mock_services/<service>/server.py`` of the
checkout (its own FastAPI app, handlers, fixture loader and ``/reset``), serves requests to it
in-process, and switches tasks the way Claw-Eval's runner configures a service — the task's
``*_FIXTURES`` path — by setting that path and calling the service's own ``POST /<service>/reset``.
Nothing of Claw-Eval is copied; a checkout without ``mock_services/`` is a :class:`CoworkError`
naming the path.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from coworkenv.errors import CoworkError

SKIPPED = frozenset({"documents", "web", "web_real", "web_real_injection", "ocr", "caption"})
"""Services not compared: they read files or the network, not fixtures."""


def find_checkout(explicit: str | Path | None = None) -> Path | None:
    """A Claw-Eval checkout: ``explicit``, ``$COWORKENV_CLAW_EVAL_CHECKOUT``, else
    ``../shared/claw-eval/upstream`` beside the repository."""
    root = Path(__file__).resolve().parents[3]
    for cand in (
        explicit,
        os.environ.get("COWORKENV_CLAW_EVAL_CHECKOUT"),
        root.parent / "shared" / "claw-eval" / "upstream",
    ):
        if cand and (Path(cand) / "mock_services").is_dir():
            return Path(cand).resolve()
    return None


class UpstreamServices:
    """Claw-Eval's mock services of a checkout, addressed by route prefix (``/gmail/...``)."""

    def __init__(self, checkout: Path, sample_fixtures: dict[str, Path]) -> None:
        """``sample_fixtures``: one fixture file per service, loaded at import (their servers read
        the file when imported)."""
        from starlette.testclient import TestClient

        mock = checkout / "mock_services"
        if not mock.is_dir():
            raise CoworkError(f"{checkout}: no mock_services/ (not a Claw-Eval checkout)")
        if str(checkout) not in sys.path:
            sys.path.insert(0, str(checkout))
        os.environ.setdefault("ERROR_RATE", "0")
        self.modules: dict[str, ModuleType] = {}
        self.clients: dict[str, Any] = {}
        for service, fixture in sample_fixtures.items():
            server = mock / service / "server.py"
            if service in SKIPPED or not server.is_file():
                continue
            os.environ[f"{service.upper()}_FIXTURES"] = str(fixture)
            spec = importlib.util.spec_from_file_location(f"_claw_eval_mock_{service}", server)
            if spec is None or spec.loader is None:
                raise CoworkError(f"{server}: cannot be imported")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.modules[service] = module
            self.clients[service] = TestClient(module.app, raise_server_exceptions=False)

    def load(self, service: str, fixture: Path) -> None:
        """Point ``service`` at a task's fixture file and reset it (its own reset reloads the file)."""
        setattr(self.modules[service], "FIXTURES_PATH", fixture)  # noqa: B010 - a module global of theirs
        resp = self.clients[service].post(f"/{service}/reset")
        if resp.status_code != 200:
            raise CoworkError(f"Claw-Eval {service} reset failed: {resp.status_code} {resp.text[:200]}")

    def serves(self, service: str) -> bool:
        return service in self.clients

    def post(self, route: str, body: Any) -> tuple[int, Any]:
        service = route.strip("/").split("/", 1)[0]
        resp = self.clients[service].post(route, json=body)
        return resp.status_code, _json(resp)

    def audit(self, service: str) -> dict[str, Any]:
        body = _json(self.clients[service].get(f"/{service}/audit"))
        return body if isinstance(body, dict) else {}


def _json(resp: Any) -> Any:
    try:
        return resp.json()
    except ValueError:
        return resp.text
