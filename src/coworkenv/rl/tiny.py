"""A tiny random Llama for tests and benchmarks (2 layers, hidden 64 by default; seconds on CPU).

Contract: :func:`tiny_llama` is deterministic for a given seed and needs no files or network.
"""

from __future__ import annotations

from typing import Any


def tiny_llama(
    vocab_size: int = 512, *, hidden: int = 64, layers: int = 2, heads: int = 4, seed: int = 0
) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.eval()
    return model


def save_tiny_checkpoint(path: Any, vocab_size: int = 256, *, seed: int = 0, **shape: int) -> Any:
    """A loadable checkpoint dir (config, weights, word-level tokenizer ``t0 … t<n>``) for CLI tests."""
    from pathlib import Path

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    p = Path(path)
    model = tiny_llama(vocab_size, seed=seed, **shape)
    model.save_pretrained(p)
    vocab = {f"t{i}": i for i in range(vocab_size - 1)}
    vocab["<unk>"] = vocab_size - 1
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>").save_pretrained(p)
    return p
