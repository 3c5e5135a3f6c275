"""CLI commands of the rl stage: ``coworkenv train sft CONFIG`` and ``coworkenv train rl CONFIG``.

Both validate the whole config first (errors name file, field and value), then train with a rich
progress bar, log metrics to ``<out_dir>/metrics.jsonl`` (TensorBoard when installed), checkpoint,
resume, and write a merged checkpoint to ``<out_dir>/final``. Multi-process:
``torchrun --nproc_per_node N -m coworkenv.cli train rl CONFIG`` (or ``accelerate launch -m ...``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from rich.progress import Progress

train_app = typer.Typer(no_args_is_help=True, help="Train a policy: SFT on curated data, RL on samples.")
err = Console(stderr=True)


def _progress() -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
    )


SET_HELP = "Override a config key: --set run.max_steps=2 (repeatable; the value is read as YAML)."


@train_app.command("sft")
def train_sft(
    config: Annotated[Path, typer.Argument(help="SFT config (YAML or JSON).")],
    overrides: Annotated[list[str] | None, typer.Option("--set", help=SET_HELP)] = None,
) -> None:
    """Supervised fine-tuning on curated conversations (loss on assistant tokens only)."""
    from coworkenv.rl.config import SFTConfig, load_config
    from coworkenv.rl.sft import SFTTrainer, build_examples, read_sft_jsonl

    cfg = load_config(config, SFTConfig, overrides or ())
    rows = read_sft_jsonl(cfg.data)
    trainer = SFTTrainer(cfg)
    examples = build_examples(rows, trainer.tokenizer, max_len=cfg.max_len)
    err.print(f"sft: {len(rows)} conversations -> {len(examples)} examples; out {cfg.run.out_dir}")
    prog = _progress()
    with prog:
        task = prog.add_task("sft", total=None)

        def tick(step: int, total: int) -> None:
            prog.update(task, completed=step, total=total)

        res = trainer.train(examples, progress=tick if cfg.run.progress else None)
    trainer.save()
    final = trainer.export()
    err.print(f"sft done: {res}; merged checkpoint {final}")


@train_app.command("rl")
def train_rl(
    config: Annotated[Path, typer.Argument(help="RL config (YAML or JSON).")],
    overrides: Annotated[list[str] | None, typer.Option("--set", help=SET_HELP)] = None,
) -> None:
    """RL updates over stored samples (offline: ``samples:`` in the config)."""
    from coworkenv.errors import SpecError
    from coworkenv.rl.common import save_merged, shutdown_distributed
    from coworkenv.rl.config import RLConfig, load_config
    from coworkenv.rl.offline import infra_failures, load_samples, offline_batches
    from coworkenv.rl.rl import RLTrainer

    cfg = load_config(config, RLConfig, overrides or ())
    if cfg.samples is None:
        raise SpecError.single(config, "samples", "offline `train rl` needs samples: <samples.jsonl or dir>")
    if not cfg.samples.exists():
        raise SpecError.single(config, "samples", f"{cfg.samples} does not exist")
    samples, problems = load_samples(cfg.samples)
    for p in problems[:10]:
        err.print(f"[yellow]{p}[/]")
    failed = infra_failures(cfg.samples)
    trainer = RLTrainer(cfg)
    batches = list(offline_batches(samples, cfg.batch_size, cfg.group_size, cfg.run.seed))
    if cfg.run.max_steps:
        batches = batches[: cfg.run.max_steps]
    err.print(f"rl[{cfg.estimator}]: {len(samples)} samples, {len(batches)} steps, {len(problems)} aborted")
    prog = _progress()
    with prog:
        task = prog.add_task(f"rl {cfg.estimator}", total=len(batches))
        for b in batches:
            m = trainer.step(b, infra_failed=failed)
            prog.update(
                task, advance=1, description=f"rl v{m['policy_version']} r={m.get('reward_mean', 0):.2f}"
            )
    model = trainer.export_model()  # under FSDP: gathered on rank 0 (every rank takes part)
    if trainer.rank == 0:
        trainer.save()
        final = save_merged(model, trainer.tokenizer, cfg.run.out_dir / "final")
        err.print(f"rl done: policy_version={trainer.version}; merged checkpoint {final}")
    shutdown_distributed()


def register(app: typer.Typer) -> None:
    """Add this stage's commands to app."""
    app.add_typer(train_app, name="train")
