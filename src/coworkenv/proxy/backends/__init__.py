"""Model backends behind one interface (:class:`coworkenv.proxy.backends.base.Backend`).

:func:`make_backend` builds one from a spec string ``KIND[:TARGET][?key=value&...]``:

* ``embedded`` / ``embedded:CHECKPOINT_DIR`` — SmolLM2 (or a saved checkpoint) on CPU;
  options ``seed``, ``temperature``, ``top_p``, ``max_tokens``, ``codec``, ``version``, and the
  engine's: ``engine`` (``batched``, the default: continuous batching + prefix KV cache; or
  ``serial``), ``max_batch`` (concurrent requests per step, 32), ``cache_tokens`` (prefix-cache
  budget in tokens, 65536), ``step_tokens`` (tokens forwarded per step: a decode token per running
  request, prompt chunks in the rest, 512), ``attention`` (``arena``, the default: a shared
  prefix's KV read once per step for all requests sharing it, and every decoding request's own KV
  read in one call per layer from a slot arena of ``slot_tokens`` per request, 1024; ``cascade``:
  the shared prefix only; ``grouped``; or ``per_request``),
  ``sampler`` (``batched``, the default; or ``per_row``), ``matmul`` (``fp32``, the default;
  ``bf16``; ``auto``: bf16 where the CPU computes it natively), ``speculate`` (up to N draft tokens
  a step by prompt lookup, verified by speculative sampling: the same distribution and logprobs;
  0, the default, is off), ``kv`` (``fp32``, the default; ``bf16``: the KV cache and attention in
  bf16, as an engine serving bf16 keeps them; ``auto``: bf16 where the CPU computes it natively).
* ``scripted`` — every built-in task's reference solution, routed by the request text;
  ``scripted:TASK_ID_OR_FILE[,MORE]`` — those tasks; options ``fault_rate``, ``fault_seed``.
* ``vllm:URL``, ``sglang:URL``, ``openai:URL`` — a token-exact engine (OpenAI-compatible
  ``/v1/completions`` taking token ids, or SGLang's ``/generate``); options ``model`` (the name
  the engine serves; the trainer loads the same weights: ``smollm2``, a local checkpoint dir, or a
  hub id in the local cache — start the engine with ``--served-model-name`` when they differ),
  ``tokenizer`` (a local HF tokenizer dir; default the model's when it resolves locally, else the
  SmolLM2 checkpoint), ``codec``, ``temperature``, ``top_p``, ``max_tokens``, ``api_key_env``,
  ``version``.
* ``passthrough:URL`` — an external Chat Completions API (teacher capture, not token-exact);
  options ``model``, ``api_key_env``.
* ``simulated:TASK_ID_OR_FILE[,MORE]`` — those tasks' reference solutions at an engine's pace, for
  load tests (:mod:`coworkenv.proxy.backends.simulated`); options ``ttft_ms``, ``tpot_ms``, ``slots``.
  Without a target (``simulated?ttft_ms=…``) the runner gives each rollout its task's reference.

Heavy modules (torch, transformers) are imported only by the kinds that need them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from coworkenv.errors import CoworkError
from coworkenv.proxy.backends.base import Backend, BackendError, Completion

KINDS = ("embedded", "scripted", "simulated", "vllm", "sglang", "openai", "passthrough")

_FLOATS = ("temperature", "top_p", "fault_rate")
_INTS = (
    "seed",
    "max_tokens",
    "fault_seed",
    "max_batch",
    "cache_tokens",
    "step_tokens",
    "slot_tokens",
    "speculate",
)


def parse_spec(spec: str) -> tuple[str, str, dict[str, Any]]:
    """``(kind, target, options)`` of a backend spec string."""
    kind, _, rest = spec.partition(":")
    target, _, query = rest.partition("?")
    if not query and "?" not in rest and "?" in kind:
        kind, _, query = kind.partition("?")
    if kind not in KINDS:
        raise CoworkError(f"backend {spec!r}: unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    options: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        try:
            options[key] = float(value) if key in _FLOATS else int(value) if key in _INTS else value
        except ValueError:
            raise CoworkError(f"backend {spec!r}: option {key}={value!r} is not a number") from None
    return kind, target, options


def _take(options: dict[str, Any], spec: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise CoworkError(f"backend {spec!r}: unknown option(s) {unknown}; allowed: {', '.join(allowed)}")
    return options


def _scripted(target: str, options: dict[str, Any]) -> Backend:
    from coworkenv.proxy.backends.scripted import Faults, ScriptedBackend
    from coworkenv.tasks.builtin import builtin_task, builtin_tasks
    from coworkenv.tasks.load import load_spec

    faults = None
    if options.get("fault_rate"):
        faults = Faults(rate=float(options["fault_rate"]), seed=int(options.get("fault_seed", 0)))
    if not target:
        return ScriptedBackend.from_references(builtin_tasks(), faults=faults)
    try:
        specs = [load_spec(t) if Path(t).exists() else builtin_task(t) for t in target.split(",") if t]
    except KeyError as exc:
        raise CoworkError(f"backend 'scripted:{target}': {exc.args[0]}") from None
    if len(specs) == 1:
        return ScriptedBackend.from_reference(specs[0], faults=faults)
    return ScriptedBackend.from_references(specs, faults=faults)


def make_backend(spec: str) -> Backend:
    """Build a backend from a spec string (see the module docstring)."""
    kind, target, options = parse_spec(spec)
    if kind == "embedded":
        from coworkenv.models import EMBEDDED
        from coworkenv.proxy.backends.embedded import EmbeddedBackend

        opts = _take(
            options,
            spec,
            (
                "seed",
                "temperature",
                "top_p",
                "max_tokens",
                "codec",
                "version",
                "engine",
                "max_batch",
                "cache_tokens",
                "step_tokens",
                "attention",
                "slot_tokens",
                "sampler",
                "matmul",
                "speculate",
                "kv",
            ),
        )
        if "max_tokens" in opts:
            opts["max_new_tokens"] = opts.pop("max_tokens")
        return EmbeddedBackend.from_checkpoint(target or EMBEDDED, **opts)
    if kind == "scripted":
        return _scripted(target, _take(options, spec, ("fault_rate", "fault_seed")))
    if kind == "simulated":
        from coworkenv.proxy.backends.simulated import EngineSlots, SimulatedBackend, pace

        ttft_s, tpot_s, slots = pace(options, spec)
        if not target:
            raise CoworkError(
                f"backend {spec!r}: name the tasks (simulated:TASK_ID,...), or give the rollout runner "
                "'simulated?…' alone to pace each rollout's own reference solution"
            )
        engine = EngineSlots(slots) if slots else None
        return SimulatedBackend(_scripted(target, {}), ttft_s=ttft_s, tpot_s=tpot_s, slots=engine)
    if not target.startswith(("http://", "https://")):
        raise CoworkError(
            f"backend {spec!r}: {kind} needs an http(s) URL, e.g. {kind}:http://localhost:8000/v1"
        )
    if kind == "passthrough":
        from coworkenv.proxy.backends.passthrough import PassthroughBackend

        opts = _take(options, spec, ("model", "api_key_env", "version", "stream"))
        if "stream" in opts:
            opts["stream"] = str(opts["stream"]).lower() in ("1", "true", "yes")
        return PassthroughBackend(target, **opts)
    from coworkenv.proxy.backends.upstream import UpstreamBackend

    allowed = ("model", "tokenizer", "codec", "temperature", "top_p", "max_tokens", "api_key_env", "version")
    opts = _take(options, spec, allowed)
    tokenizer = _tokenizer(opts.pop("tokenizer", ""), spec, str(opts.get("model", "")))
    key_env = opts.pop("api_key_env", "")
    api_key = os.environ.get(key_env) if key_env else None
    return UpstreamBackend(target, tokenizer, flavor=kind, api_key=api_key, **opts)


def _tokenizer(path: str, spec: str, model: str = "") -> Any:
    from coworkenv.proxy.backends.embedded import smollm2_tokenizer

    if not path and model:
        from coworkenv.models import EMBEDDED, ModelError, resolve_checkpoint

        try:
            local = resolve_checkpoint(model) if model != EMBEDDED else None
        except ModelError:
            local = None
        if local is not None and (local / "tokenizer_config.json").exists():
            path = str(local)
    if not path:
        return smollm2_tokenizer()
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise CoworkError(
            f"backend {spec!r}: cannot load tokenizer {path!r} ({exc}); pass a local dir"
        ) from None


__all__ = ["KINDS", "Backend", "BackendError", "Completion", "make_backend", "parse_spec"]
