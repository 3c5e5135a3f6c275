"""The SFT export goes through TRL's SFTTrainer dataset preparation (conversational data with tools)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from coworkenv.curation.export import curate, write_jsonl
from tests.test_curation import conv, rec, write_collection


@pytest.mark.filterwarnings("ignore")
def test_sft_trainer_prepares_the_export(tmp_path: Path) -> None:
    trl = pytest.importorskip("trl")
    from datasets import load_dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    root = write_collection(tmp_path / "c", [rec("M1_a", 0, 0.7), rec("M1_a", 1, 0.9, messages=conv(3))])
    out = tmp_path / "sft.jsonl"
    write_jsonl(curate([root]).rows, out)
    raw = Tokenizer(models.WordLevel({"[UNK]": 0, "[PAD]": 1, "[EOS]": 2}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]"
    )
    tok.chat_template = (
        "{% if tools %}TOOLS {{ tools | tojson }}\n{% endif %}{% for m in messages %}{{ m.role }}: "
        "{{ m.content }}{% for tc in (m.tool_calls or []) %} CALL {{ tc.function.name }} "
        "{{ tc.function.arguments }}{% endfor %}\n{% endfor %}[EOS]"
    )
    seen: list[object] = []
    original = tok.apply_chat_template

    def spy(conversation: object, *args: object, **kwargs: object) -> object:
        seen.append(kwargs.get("tools"))
        return original(conversation, *args, **kwargs)  # type: ignore[arg-type]

    tok.apply_chat_template = spy  # type: ignore[method-assign]
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=8, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
        )
    )
    ds = load_dataset("json", data_files=str(out), split="train")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = trl.SFTTrainer(
            model=model,
            args=trl.SFTConfig(
                output_dir=str(tmp_path / "o"), max_length=4096, report_to=[], use_cpu=True, bf16=False
            ),
            train_dataset=ds,
            processing_class=tok,
        )
    prepared = trainer.train_dataset
    assert len(prepared) == 2
    assert "input_ids" in prepared.column_names
    assert seen
    assert isinstance(seen[0], list)
    assert json.dumps(seen[0]).count("helpdesk_get_ticket") == 1  # tools parsed from the JSON string
