"""Claw-Eval's own mock services, run from a Claw-Eval checkout, one process for all tasks.

Contract: :class:`UpstreamServices` imports each ``mock_services/<service>/server.py`` of the
checkout (its own FastAPI app, handlers, fixture loader and ``/reset``), serves requests to it
in-process, and switches tasks the way Claw-Eval's runner configures a service — the task's
``*_FIXTURES`` path — by setting that path and calling the service's own ``POST /<service>/reset``.
:meth:`UpstreamServices.freeze_clock` lines their wall clock up with a trial's frozen instant (the
module's own ``datetime`` name answers ``now()`` with it), so timestamps compare byte for byte.
:func:`resolved_fixture` is the file Claw-Eval's service loads for a task — its ``*_FIXTURES`` env,
else the server's built-in default, read from the server's source without running it.
Nothing of Claw-Eval is copied; a checkout without ``mock_services/`` is a :class:`CoworkError`
naming the path.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import sys
from collections.abc import Mapping
from datetime import datetime, tzinfo
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

    def post_raw(self, route: str, content: bytes | None) -> Any:
        """The raw response to ``content`` (None: no body at all), sent as ``application/json``."""
        service = route.strip("/").split("/", 1)[0]
        headers = {"content-type": "application/json"}
        return self.clients[service].post(route, content=content, headers=headers)

    def post_routes(self, service: str) -> list[str]:
        """Every POST route the service's own app declares, but its ``/reset`` (its tool routes)."""
        routes = getattr(self.modules[service].app, "routes", [])
        paths = {
            str(r.path)
            for r in routes
            if "POST" in (getattr(r, "methods", None) or ()) and hasattr(r, "path")
        }
        return sorted(p for p in paths if not p.endswith("/reset"))

    def freeze_clock(self, instant: datetime | None) -> None:
        """Their ``datetime.now()`` answers ``instant`` from now on (None: the wall clock again).

        Each server reads the clock as ``datetime.now(timezone.utc)`` through its module's own
        ``datetime`` name; that name is swapped for a subclass whose ``now`` is frozen."""
        for module in self.modules.values():
            names = module.__dict__
            original = names.setdefault("_coworkenv_wall_datetime", names["datetime"])
            names["datetime"] = original if instant is None else _frozen(instant)

    def audit(self, service: str) -> dict[str, Any]:
        body = _json(self.clients[service].get(f"/{service}/audit"))
        return body if isinstance(body, dict) else {}


def _frozen(instant: datetime) -> type[datetime]:
    class Frozen(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> Frozen:
            at = instant.astimezone(tz) if tz is not None else instant.astimezone().replace(tzinfo=None)
            return cls.combine(at.date(), at.timetz())

    return Frozen


@functools.cache
def default_fixture(checkout: Path, service: str) -> Path | None:
    """The fixture file ``mock_services/<service>/server.py`` loads when its ``*_FIXTURES`` env is
    unset: the default of its ``FIXTURES_PATH = Path(os.environ.get(NAME, DEFAULT))``, evaluated from
    the source (``Path``, ``str``, ``__file__``, ``.parent``, ``.resolve()``, ``/``); None when the
    server is absent or builds its path otherwise."""
    server = checkout / "mock_services" / service / "server.py"
    try:
        tree = ast.parse(server.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "FIXTURES_PATH" for t in node.targets
        ):
            value = _evaluate(node.value, server)
            return Path(value) if isinstance(value, str | Path) else None
    return None


def _evaluate(node: ast.expr, server: Path) -> Any:
    """The value of the small path expressions a server's ``FIXTURES_PATH`` is made of, env unset."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id == "__file__":
        return str(server)
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        base = _evaluate(node.value, server)
        return base.parent if isinstance(base, Path) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left, right = _evaluate(node.left, server), _evaluate(node.right, server)
        return left / right if isinstance(left, Path) and isinstance(right, str | Path) else None
    if not isinstance(node, ast.Call):
        return None
    func, args = node.func, node.args
    if isinstance(func, ast.Name) and func.id in ("Path", "str") and len(args) == 1:
        inner = _evaluate(args[0], server)
        return None if inner is None else (Path(inner) if func.id == "Path" else str(inner))
    if isinstance(func, ast.Attribute) and func.attr == "resolve" and not args:
        base = _evaluate(func.value, server)
        return base.resolve() if isinstance(base, Path) else None
    if isinstance(func, ast.Attribute) and func.attr == "get" and len(args) == 2:  # os.environ.get
        return _evaluate(args[1], server)
    return None


def resolved_fixture(checkout: Path, dataset: Path, service: str, env: Mapping[str, Any]) -> Path | None:
    """The file Claw-Eval's ``service`` loads for a task whose service entry sets ``env``: the
    ``<SERVICE>_FIXTURES`` value, relative to ``dataset`` (the directory holding ``tasks/``, where
    Claw-Eval's runner starts services), else the server's :func:`default_fixture` — a path under the
    checkout's ``tasks/``, read as the same path under ``dataset`` when the checkout holds no tasks."""
    value = env.get(f"{service.upper()}_FIXTURES")
    if isinstance(value, str) and value:
        return (dataset / value).resolve()
    default = default_fixture(checkout.resolve(), service)
    if default is None:
        return None
    if not default.exists():
        try:
            return (dataset / default.relative_to(checkout.resolve())).resolve()
        except ValueError:
            return default
    return default


def _json(resp: Any) -> Any:
    try:
        return resp.json()
    except ValueError:
        return resp.text
