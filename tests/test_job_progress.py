"""What a user of the job sees: progress without a terminal, and scores printed for people."""

from __future__ import annotations

import io

from rich.console import Console

from coworkenv.job.progress import StageProgress
from coworkenv.job.run import _describe, _num


def test_without_a_terminal_each_step_prints_a_line() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=120)
    with StageProgress(console, "sft") as bar:
        bar.start(3)
        bar.set(1)
        bar.set(1)  # no progress, no line
        bar.advance()
        bar.set(3)
    lines = buf.getvalue().splitlines()
    assert [ln.split(" (")[0] for ln in lines] == ["sft: step 1/3", "sft: step 2/3", "sft: step 3/3"]
    assert all(ln.endswith("s)") for ln in lines)


def test_on_a_terminal_the_bar_prints_no_step_lines() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with StageProgress(console, "sft") as bar:
        bar.start(2)
        bar.set(2)
    assert "sft: step" not in buf.getvalue()


def test_scores_print_rounded_and_say_what_20_means() -> None:
    assert _num(21.000000000000004, 1) == "21.0"
    assert _num(None, 1) == "-"
    info = {
        "before": {"overall": {"score": 20.000000000000004, "completion": 0.0}},
        "after": {"overall": {"score": 25.333333333333336, "completion": 0.0666666}},
    }
    text = _describe("eval", info)
    assert text.startswith("held-out completion 0.000 → 0.067, score 20.0 → 25.3")
    assert "20 = a safe run that completed nothing" in text
    assert "000000" not in text


def test_eval_line_shows_base_then_sft_then_after_when_the_base_was_evaluated() -> None:
    info = {
        "base": {"overall": {"score": 20.0, "completion": 0.0}},
        "before": {"overall": {"score": 28.0, "completion": 0.1}},
        "after": {"overall": {"score": 30.0, "completion": 0.125}},
    }
    text = _describe("eval", info)
    assert text.startswith("held-out completion base 0.000 → SFT 0.100 → 0.125, score 28.0 → 30.0")
