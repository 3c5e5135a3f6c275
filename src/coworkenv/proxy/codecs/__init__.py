"""Chat templates and tool-call codecs per model family.

``get_codec(family, tokenizer)``: ``smollm2`` (ChatML, tools in the system prompt as compact
signatures; ``smollm2-json``: as JSON Schema lines), ``hermes``
(Qwen/Hermes native tools section), ``generic`` (the tokenizer's own ``apply_chat_template``).
See :mod:`.base` for the contract and :mod:`.parse` for what output is accepted as a tool call.
"""

from __future__ import annotations

from typing import Any

from coworkenv.errors import CoworkError
from coworkenv.proxy.codecs.base import Codec, Rendered, TokenizerLike, resolve_tool_name
from coworkenv.proxy.codecs.generic import GenericCodec
from coworkenv.proxy.codecs.hermes import HermesCodec
from coworkenv.proxy.codecs.parse import parse_turn
from coworkenv.proxy.codecs.smollm2 import SmolLM2Codec

FAMILIES = ("smollm2", "smollm2-json", "hermes", "generic")


def get_codec(family: str = "smollm2", tokenizer: Any | None = None) -> Codec:
    """The codec of a model family; ``generic`` needs the HF tokenizer."""
    if family == "smollm2":
        return SmolLM2Codec()
    if family == "smollm2-json":
        return SmolLM2Codec(tool_format="json")
    if family in ("hermes", "qwen"):
        return HermesCodec()
    if family == "generic":
        if tokenizer is None:
            raise CoworkError("codec 'generic' needs a tokenizer (it uses the tokenizer's chat template)")
        return GenericCodec(tokenizer)
    raise CoworkError(f"unknown codec family {family!r}; choose one of {', '.join(FAMILIES)}")


__all__ = [
    "FAMILIES",
    "Codec",
    "GenericCodec",
    "HermesCodec",
    "Rendered",
    "SmolLM2Codec",
    "TokenizerLike",
    "get_codec",
    "parse_turn",
    "resolve_tool_name",
]
