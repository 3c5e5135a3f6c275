"""TRL: GRPOTrainer trains through our OpenEnv server on CPU, paid our reward."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkenv.integrations.session import Services
from coworkenv.spec import KeywordsPresent, TaskSpec
from tests.integration_policies import openenv_served, ours, policies, specs

pytest.importorskip("openenv")
pytest.importorskip("trl")

from coworkenv.integrations.trl import (
    coworkenv_reward,
    dataset,
    environment_factories,
    toolset_key,
    with_tool_template,
)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Services, str]]:
    with openenv_served() as served:
        yield served


def test_trl_environment_pays_our_reward_for_every_policy(served: tuple[Services, str]) -> None:
    services, url = served
    factories = environment_factories(url, specs())
    for spec in specs():
        env = factories[toolset_key(spec)]()
        for name, (steps, final) in policies(services.tasks[spec.id]).items():
            env.reset(task_id=spec.id, prompt=[])
            for step in steps:
                getattr(env, step.tool)(**dict(step.args))
            completion = [{"role": "assistant", "content": final}]
            assert coworkenv_reward([completion], [env]) == [ours(spec, (steps, final))], (spec.id, name)


def test_trl_tools_carry_the_served_schemas(served: tuple[Services, str]) -> None:
    from transformers.utils import get_json_schema

    services, url = served
    spec = specs()[0]
    env = environment_factories(url, [spec])[toolset_key(spec)]()
    served_tools = {t.name: t.input_schema() for t in services.tasks[spec.id].tools.values()}
    for name, schema in served_tools.items():
        shown = get_json_schema(getattr(env, name))["function"]
        assert shown["name"] == name
        assert set(shown["parameters"]["properties"]) == set(schema.get("properties", {}))
        assert set(shown["parameters"].get("required", [])) == set(schema.get("required", []))


def _varied(spec: TaskSpec) -> TaskSpec:
    """The task with one more answer check a random model meets about half the time (a rare letter),
    so that a group of rollouts differs in reward and GRPO has an advantage to follow."""
    extra = KeywordsPresent(name="rare_letter", weight=0.2, keywords=("z|q|x",))
    return spec.model_copy(update={"completion_checks": (*spec.completion_checks, extra)})


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")  # TRL's own deprecations
def test_grpo_trainer_makes_a_real_update_through_openenv(tmp_path: Path) -> None:
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from coworkenv.proxy.backends.embedded import smollm2_tokenizer, tiny_random_model

    spec = _varied(specs()[0])
    with openenv_served([spec]) as (_, url):
        tokenizer = with_tool_template(smollm2_tokenizer())
        model = tiny_random_model(tokenizer)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        args = GRPOConfig(
            output_dir=str(tmp_path),
            use_cpu=True,
            bf16=False,
            per_device_train_batch_size=16,
            num_generations=16,
            max_completion_length=24,
            max_steps=1,
            max_tool_calling_iterations=2,
            learning_rate=1e-3,
            temperature=1.0,
            seed=0,
            report_to="none",
            logging_steps=1,
            save_strategy="no",
        )
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=args,
            train_dataset=dataset([spec], repeat=16),
            reward_funcs=[coworkenv_reward],
            environment_factory=environment_factories(url, [spec]),
        )
        trainer.train()
        envs = [e for pool in trainer._environment_pool.values() for e in pool]
    step = trainer.state.log_history[0]
    assert trainer.state.global_step == 1
    rewards = [e.last_reward for e in envs if e.last_reward is not None]
    assert len(rewards) == 16  # every rollout graded by the OpenEnv server
    assert step["reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert step["reward_std"] > 0
    assert step["grad_norm"] > 0
    assert any(not torch.equal(before[n], p.detach()) for n, p in model.named_parameters())
