"""SFT: assistant-only masks through the smollm2 codec, training lowers the loss, LoRA export merges."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from coworkenv.errors import SpecError
from coworkenv.proxy.codecs import get_codec
from coworkenv.rl.common import build_policy, merged_state_dict
from coworkenv.rl.config import LoRAConfig, ModelConfig, SFTConfig, parse_config
from coworkenv.rl.sft import SFTTrainer, build_examples, read_sft_jsonl
from coworkenv.rl.tiny import tiny_llama


class ByteTok:
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


CONV = {
    "messages": [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Close ticket 7."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "close_ticket", "arguments": '{"id": 7}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
        {"role": "assistant", "content": "Done: ticket 7 is closed."},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "close_ticket",
                "description": "Close",
                "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}},
            },
        }
    ],
}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    p = tmp_path / "sft.jsonl"
    p.write_text("\n".join(json.dumps(CONV) for _ in range(4)) + "\n")
    return p


def test_mask_covers_assistant_turns_only(data: Path) -> None:
    rows = read_sft_jsonl(data)
    ex = build_examples(rows[:1], ByteTok(), max_len=100_000)
    assert len(ex) == 1
    e = ex[0]
    supervised = bytes(t for t, m in zip(e.ids, e.mask, strict=True) if m).decode()
    codec = get_codec("smollm2")
    call = codec.format_assistant("", _calls())
    assert supervised == call + "<|im_end|>" + "Done: ticket 7 is closed.<|im_end|>"
    full = bytes(e.ids).decode()
    assert "Close ticket 7." in full
    assert '{"ok": true}' in full
    assert "Close ticket 7." not in supervised


def _calls() -> Any:
    from coworkenv.proxy.messages import ToolCall

    return (ToolCall(id="c1", name="close_ticket", arguments='{"id": 7}'),)


def test_bad_row_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(CONV) + '\n{"nomessages": 1}\n')
    with pytest.raises(SpecError, match=r"bad\.jsonl:2"):
        read_sft_jsonl(p)


def test_sft_trains(data: Path, tmp_path: Path) -> None:
    cfg = parse_config(
        SFTConfig,
        {
            "data": str(data),
            "model": {"lora": None},
            "optim": {"lr": 3e-3},
            "epochs": 3,
            "batch_size": 2,
            "grad_accum": 1,
            "max_len": 2048,
            "autocast": "off",  # exact comparisons below: fp32 on every CPU
            "run": {"out_dir": str(tmp_path / "out"), "resume": False},
        },
    )
    tr = SFTTrainer(cfg, model=tiny_llama(256), tokenizer=ByteTok())
    ex = build_examples(read_sft_jsonl(data), ByteTok(), max_len=cfg.max_len)
    with torch.no_grad():
        first, _ = tr._loss(ex[:2])
    held_before = tr.evaluate(ex[:2])
    res = tr.train(ex)
    with torch.no_grad():
        last, _ = tr._loss(ex[:2])
    assert res["steps"] == 6
    assert float(last) < 0.8 * float(first)
    # evaluate() is the per-supervised-token loss of the same forward, with no update
    n_tok = sum(sum(e.mask[1:]) for e in ex[:2])
    assert held_before == pytest.approx(float(first) / n_tok, rel=1e-4)
    assert tr.evaluate(ex[:2]) == pytest.approx(float(last) / n_tok, rel=1e-4)
    assert tr.evaluate(ex[:2]) == tr.evaluate(ex[:2])
    assert len((tmp_path / "out" / "metrics.jsonl").read_text().splitlines()) == 6


def test_lora_merge_reproduces_logits() -> None:
    model, _ = build_policy(ModelConfig(lora=LoRAConfig(r=4, alpha=8, dropout=0.0)), tiny_llama(256), None)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    plain = tiny_llama(256)
    plain.load_state_dict(merged_state_dict(model), strict=True)
    ids = torch.arange(40)[None]
    torch.testing.assert_close(plain(input_ids=ids).logits, model(input_ids=ids).logits, rtol=1e-4, atol=1e-4)


def test_lora_defaults_match_paper() -> None:
    m = ModelConfig()
    assert m.lora is not None
    assert (m.lora.r, m.lora.alpha, m.lora.dropout) == (32, 64, 0.05)
    model, _ = build_policy(ModelConfig(lora=None), tiny_llama(64, hidden=32), None)
    assert all(p.requires_grad for p in model.parameters())


def _conversation(family: str, i: int) -> dict[str, Any]:
    """Conversations of one family share a long system prompt and tool list; each differs after."""
    conv = json.loads(json.dumps(CONV))
    conv["messages"][0]["content"] = f"You help the {family} team. " * 8
    conv["messages"][1]["content"] = f"Close ticket {i}."
    conv["messages"][4]["content"] = f"Done: ticket {i} is closed."
    return conv


def _grads(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


LAYERS = 2  # tiny_llama's default depth, used by the tests below
FP32_EPS = torch.finfo(torch.float32).eps


def packing_tolerances(compute: torch.dtype, n_tok: int, layers: int = LAYERS) -> tuple[float, float]:
    """(loss rtol, gradient tolerance relative to the tensor's largest entry) for packed against
    unpacked SFT: the same math with reductions associated differently (tree-masked against causal
    attention, other matmul shapes), so they agree to the rounding of the dtype computed in.

    ``u`` = ``torch.finfo(compute).eps``. Loss: each token's loss passes through ``layers`` layers,
    each rounding its outputs once to ``compute`` (relative error ≤ layers·u per token); those
    errors are independent across the ``n_tok`` summed tokens, so the sum's relative error shrinks
    by √n_tok; the loss itself is reduced in fp32 either way (autocast keeps log-softmax and the
    sum in fp32), adding log2(n_tok)·eps32 for the summation. Gradients: a linear layer's forward
    and its two backward matmuls each round their operands to ``compute`` (3 roundings per layer,
    relative to the tensor's scale), and a weight gradient accumulates ``n_tok`` contributions in
    fp32 (√n_tok·eps32). Measured on an AVX-512 + AMX CPU (n_tok = 928): fp32 loss 4.7e-8 of 1.2e-6,
    grads 7.9e-7 of 4.1e-6; bf16 loss 1.3e-5 of 5.1e-4, grads 1.2e-2 of 4.7e-2.
    """
    u = torch.finfo(compute).eps
    loss = layers * u / math.sqrt(n_tok) + math.log2(n_tok) * FP32_EPS
    grad = 3 * layers * u + math.sqrt(n_tok) * FP32_EPS
    return loss, grad


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("lora", [False, True])
def test_packed_sft_matches_unpacked_loss_and_gradients(tmp_path: Path, lora: bool, precision: str) -> None:
    """Exact in fp32 (autocast pinned off, whatever the CPU), and at bf16's own tolerance with bf16
    autocast forced on (emulated where the CPU lacks native bf16: slower, same rounding)."""
    p = tmp_path / "sft.jsonl"
    rows = [_conversation(f, i) for f in ("billing", "support") for i in range(3)] + [CONV, CONV]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    examples = build_examples(read_sft_jsonl(p), ByteTok(), max_len=4096)
    base = tiny_llama(256)
    autocast = {"fp32": "off", "bf16": "bf16"}[precision]

    def trainer(pack: bool) -> SFTTrainer:
        cfg = parse_config(
            SFTConfig,
            {
                "data": str(p),
                "model": {"lora": {"r": 4, "alpha": 8, "dropout": 0.0} if lora else None},
                "pack": pack,
                "autocast": autocast,
                "run": {"out_dir": str(tmp_path / f"out-{pack}"), "resume": False},
            },
        )
        model = tiny_llama(256)
        model.load_state_dict(base.state_dict())
        return SFTTrainer(cfg, model=model, tokenizer=ByteTok(), log_metrics=False)

    plain, packed = trainer(False), trainer(True)
    assert packed.packed
    assert not plain.packed
    assert plain.bf16 is packed.bf16 is (precision == "bf16")
    if lora:  # nonzero B so that LoRA gradients reach A as well
        with torch.no_grad():
            for pl, pk in zip(plain.model.parameters(), packed.model.parameters(), strict=True):
                if pl.requires_grad:
                    pl.normal_(0, 0.02)
                    pk.copy_(pl)
    n_tok = sum(sum(e.mask[1:]) for e in examples)
    plain_loss = 0.0
    for e in examples:
        loss, _ = plain._loss([e])
        (loss / n_tok).backward()
        plain_loss += float(loss.detach())
    forwarded = 0
    packed_loss = 0.0
    for loss, n_fwd in packed._losses([examples]):
        (loss / n_tok).backward()
        packed_loss += float(loss.detach())
        forwarded += n_fwd
    loss_rtol, grad_tol = packing_tolerances(torch.bfloat16 if precision == "bf16" else torch.float32, n_tok)
    assert packed_loss == pytest.approx(plain_loss, rel=loss_rtol, abs=0)
    g_plain, g_packed = _grads(plain.model), _grads(packed.model)
    assert g_plain.keys() == g_packed.keys()
    assert g_plain
    for name, g in g_plain.items():
        scale = float(g.abs().max())
        assert scale > 0, name
        torch.testing.assert_close(g_packed[name], g, rtol=0, atol=grad_tol * scale, msg=name)
    # the shared system prompts and tool lists were forwarded once per family, not once per row
    assert forwarded < 0.6 * sum(len(e.ids) for e in examples)


def test_packing_splits_at_the_token_budget(tmp_path: Path) -> None:
    from coworkenv.rl.sft import pack_examples

    p = tmp_path / "sft.jsonl"
    p.write_text("\n".join(json.dumps(_conversation("ops", i)) for i in range(4)) + "\n")
    examples = build_examples(read_sft_jsonl(p), ByteTok(), max_len=4096)
    longest = max(len(e.ids) for e in examples)
    units = pack_examples(examples, max_nodes=longest + 10)
    assert len(units) > 1
    assert all(len(u) <= longest + 10 for u in units)
    supervised = sum(sum(e.mask[1:]) for e in examples)
    assert sum(sum(u.weight[i] for i in u.train_idx) for u in units) == supervised


@pytest.mark.parametrize("pack", [False, True])
def test_bf16_autocast_loss_matches_fp32_within_two_percent(tmp_path: Path, pack: bool) -> None:
    """The stated tolerance of ``SFTConfig.autocast``: forced bf16 (slow on an AVX2 CPU, but
    correct) against fp32 on the same weights and data, and a step still lowers the loss."""
    from coworkenv.machine import native_bf16
    from coworkenv.rl.sft import use_bf16

    p = tmp_path / "sft.jsonl"
    p.write_text(
        "\n".join(json.dumps(_conversation(f, i)) for f in ("billing", "ops") for i in range(2)) + "\n"
    )
    examples = build_examples(read_sft_jsonl(p), ByteTok(), max_len=4096)
    base = tiny_llama(256)
    losses = {}
    for mode in ("off", "bf16"):
        cfg = parse_config(
            SFTConfig,
            {
                "data": str(p),
                "model": {"lora": None},
                "pack": pack,
                "autocast": mode,
                "optim": {"lr": 3e-3},
                "epochs": 1,
                "batch_size": 4,
                "grad_accum": 1,
                "run": {"out_dir": str(tmp_path / f"out-{mode}-{pack}"), "resume": False},
            },
        )
        model = tiny_llama(256)
        model.load_state_dict(base.state_dict())
        tr = SFTTrainer(cfg, model=model, tokenizer=ByteTok(), log_metrics=False)
        assert tr.bf16 is (mode == "bf16")
        before = tr.evaluate(examples)
        res = tr.train(examples)
        assert res["precision"] == ("bf16-autocast" if mode == "bf16" else "fp32")
        after = tr.evaluate(examples)
        assert before is not None
        assert after is not None
        assert after < before
        losses[mode] = before
    assert losses["bf16"] == pytest.approx(losses["off"], rel=0.02)
    assert use_bf16("off") is False
    assert use_bf16("bf16") is True
    assert use_bf16("auto") is native_bf16()


def test_auto_precision_is_fp32_on_a_cpu_without_native_bf16() -> None:
    """``autocast = "auto"`` follows the CPU family: oneDNN limited to AVX2 (what an AVX2-only CPU
    reports; ``ONEDNN_MAX_CPU_ISA=AVX2`` emulates it on any x86 CPU) has no native bf16, so SFT runs
    in fp32 there. The other direction needs a CPU with AVX512-BF16 or AMX, asserted only there."""
    import subprocess
    import sys

    code = "from coworkenv.machine import native_bf16; print(native_bf16())"
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert res.stdout.strip() == "False"
    from coworkenv.machine import cpu_flags, native_bf16

    if os.environ.get("ONEDNN_MAX_CPU_ISA") is None and {"avx512_bf16", "amx_bf16"} & set(cpu_flags()):
        assert native_bf16()


def test_packing_keeps_unrelated_conversations_apart(tmp_path: Path) -> None:
    """A conversation joins a trie only when it shares a real prefix with it; the others are
    forwarded alone (a plain causal forward, no tree attention over unrelated rows)."""
    from coworkenv.rl.sft import MIN_PACK_SHARED, pack_examples

    p = tmp_path / "sft.jsonl"
    rows = [_conversation("ops", 0), _conversation("ops", 1), _conversation("billing", 0)]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    examples = build_examples(read_sft_jsonl(p), ByteTok(), max_len=4096)
    # unrelated: a conversation whose very first token differs shares nothing with the others
    stranger = type(examples[0])(ids=(7, *examples[0].ids[1:]), mask=examples[0].mask)
    units = pack_examples([*examples[:2], stranger], max_nodes=100_000)
    assert [u.tree for u in units] == [True, False]
    assert len(units[0]) < len(examples[0].ids) + len(examples[1].ids) - MIN_PACK_SHARED
    assert len(units[1]) == len(stranger.ids)
    supervised = sum(sum(e.mask[1:]) for e in (*examples[:2], stranger))
    assert sum(sum(u.weight[i] for i in u.train_idx) for u in units) == supervised


def test_checkpoint_over_checkpoints_only_large_forwards(tmp_path: Path) -> None:
    """``checkpoint_over``: forwards above it recompute in backward, smaller ones do not, and the
    loss and gradients are those of checkpointing every forward."""
    from coworkenv.rl.sft import pack_examples

    p = tmp_path / "sft.jsonl"
    rows = [_conversation("ops", 0), _conversation("ops", 1)]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    examples = build_examples(read_sft_jsonl(p), ByteTok(), max_len=4096)
    # a conversation sharing nothing with them (its first token differs) is forwarded alone
    examples.append(type(examples[0])(ids=(7, *examples[0].ids[1:]), mask=examples[0].mask))
    sizes = sorted(len(u) for u in pack_examples(examples, 8192))
    assert len(sizes) == 2  # the two "ops" conversations in one trie, the stranger alone
    base = tiny_llama(256)

    def run(limit: int | None) -> tuple[float, dict[str, torch.Tensor], list[bool]]:
        cfg = parse_config(
            SFTConfig,
            {
                "data": str(p),
                "model": {"lora": {"r": 4, "alpha": 8, "dropout": 0.0}, "gradient_checkpointing": True},
                "checkpoint_over": limit,
                "autocast": "off",  # exact comparisons below: fp32 on every CPU
                "run": {"out_dir": str(tmp_path / f"out-{limit}"), "resume": False},
            },
        )
        model = tiny_llama(256)
        model.load_state_dict(base.state_dict())
        tr = SFTTrainer(cfg, model=model, tokenizer=ByteTok(), log_metrics=False)
        with torch.no_grad():  # nonzero B so that LoRA gradients reach A as well
            for q in tr.trainable:
                q.copy_(torch.randn_like(q, generator=torch.Generator().manual_seed(q.numel())) * 0.02)
        assert tr._ckpt_layers
        seen: list[bool] = []
        tr.model.train()
        total = 0.0
        for loss, _ in tr._losses([examples]):
            seen.append(tr._ckpt_layers[0].gradient_checkpointing)
            loss.backward()
            total += float(loss.detach())
        return total, _grads(tr.model), seen

    loss_all, g_all, seen_all = run(None)
    loss_mid, g_mid, seen_mid = run(sizes[0])
    assert sorted(seen_all) == [True, True]
    assert sorted(seen_mid) == [False, True]  # only the larger forward is checkpointed
    assert loss_mid == pytest.approx(loss_all, rel=1e-6)
    assert g_all.keys() == g_mid.keys()
    for name, g in g_all.items():
        torch.testing.assert_close(g_mid[name], g, rtol=1e-5, atol=1e-7, msg=name)
