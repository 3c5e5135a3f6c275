"""SFT: assistant-only masks through the smollm2 codec, training lowers the loss, LoRA export merges."""

from __future__ import annotations

import json
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
            "run": {"out_dir": str(tmp_path / "out"), "resume": False},
        },
    )
    tr = SFTTrainer(cfg, model=tiny_llama(256), tokenizer=ByteTok())
    ex = build_examples(read_sft_jsonl(data), ByteTok(), max_len=cfg.max_len)
    with torch.no_grad():
        first, _ = tr._loss(ex[:2])
    res = tr.train(ex)
    with torch.no_grad():
        last, _ = tr._loss(ex[:2])
    assert res["steps"] == 6
    assert float(last) < 0.8 * float(first)
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
