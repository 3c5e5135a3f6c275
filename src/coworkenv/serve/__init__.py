"""The faces generated from the tool tables: HTTP (FastAPI) and MCP (stdio and streamable HTTP).

Every face is a thin shell around :meth:`coworkenv.services.trial.Trial.call`: it finds the tool
(by Claw-Eval route or by name) in the task's tool table, hands the raw arguments to ``call`` —
which validates them, applies faults and records the audit event — and renders the
:class:`~coworkenv.services.trial.CallResult`. No face validates, mutates or audits on its own.

* :func:`create_app` (:mod:`coworkenv.serve.http`): one FastAPI app for a whole
  :class:`~coworkenv.services.trial.Host`; per-trial routes under ``/t/{trial_id}``, streamable
  HTTP MCP at ``/t/{trial_id}/mcp``, and an optional Claw-Eval compatibility mode.
* :func:`serve_stdio` (:mod:`coworkenv.serve.mcp`): one trial's tools over MCP stdio.

Submodules are imported lazily, so ``python -m coworkenv.serve.mcp`` runs without importing the
HTTP stack; :func:`to_json` is the one JSON encoder both faces use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from coworkenv.serve.http import background_server, create_app
    from coworkenv.serve.mcp import build_server, serve_stdio

__all__ = ["background_server", "build_server", "create_app", "serve_stdio", "to_json"]

_LAZY = {
    "create_app": "coworkenv.serve.http",
    "background_server": "coworkenv.serve.http",
    "build_server": "coworkenv.serve.mcp",
    "serve_stdio": "coworkenv.serve.mcp",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def _default(obj: Any) -> Any:
    if isinstance(obj, Mapping):  # MappingProxyType records from Table reads
        return dict(obj)
    if isinstance(obj, Set):
        return sorted(obj, key=repr)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def to_json(obj: Any) -> bytes:
    """Encode a tool result / error / audit body as UTF-8 JSON (orjson, with a stdlib fallback).

    Read-only mappings, sets and pydantic models are converted; anything else unknown is
    rendered with ``str`` by the fallback rather than failing the response.
    """
    try:
        return orjson.dumps(obj, default=_default)
    except TypeError:  # e.g. integers beyond 64 bits, exotic types
        return json.dumps(obj, default=_safe_default, ensure_ascii=False).encode()


def _safe_default(obj: Any) -> Any:
    try:
        return _default(obj)
    except TypeError:
        return str(obj)
