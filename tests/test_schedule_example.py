"""The worked example of `docs/architecture.md`: a schedule added as one module plus one registry line
(`docs/examples/one_round.py`) resolves from flat fields, refuses what it has no use for, and trains."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from datasets import Dataset
from tiny import CountingReward, tiny_config

from trl_ada import ReinforceAdaTrainer
from trl_ada.plan import SamplingPlan
from trl_ada.schedules import SCHEDULES

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "one_round.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("one_round_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses read the module's namespace
    spec.loader.exec_module(module)
    return module


one_round = _load_example()


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(SCHEDULES, "one_round", one_round.OneRound)  # the registry line


def test_the_architecture_page_shows_the_example_as_it_is():
    page = (EXAMPLE.parents[1] / "architecture.md").read_text()
    assert f"```python\n{EXAMPLE.read_text()}```" in page


def test_an_unregistered_schedule_is_refused_naming_the_registered_ones():
    with pytest.raises(
        ValueError,
        match=r"^generation_schedule='one_round': choose one of \['rounds', 'streaming', 'est', 'pilot_commit'\]\.$",
    ):
        SamplingPlan.from_fields(generation_schedule="one_round")


def test_the_registered_schedule_resolves_from_flat_fields(registered):
    plan = SamplingPlan.from_fields(generation_schedule="one_round", samples_per_round=8, num_generations=4)
    assert type(plan.section) is one_round.OneRound
    assert (plan.section.exit_rule, plan.section.samples_per_round, plan.section.cap) == ("balance", 8, 8)
    assert plan.fields()["max_rounds"] == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"max_rounds": 3},
            "max_rounds=3 has no effect under generation_schedule='one_round': it draws one round per step. Remove "
            "max_rounds (or set it to 1), or use generation_schedule='rounds'.",
        ),
        (
            {"samples_per_round": 2},
            "samples_per_round=2: generation_schedule='one_round' draws one round, which must fill a group of "
            "num_generations=4. Set samples_per_round >= 4.",
        ),
        (
            {"streaming_window": 4},
            "streaming_window=4 has no effect under generation_schedule='one_round': one round of samples_per_round "
            "completions per prompt, then each group is selected. Remove streaming_window, or use "
            "generation_schedule='streaming'.",
        ),
    ],
)
def test_the_registered_schedule_refuses_what_it_has_no_use_for(registered, fields, message):
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(generation_schedule="one_round", num_generations=4, **fields)
    assert str(refused.value) == message


class HalfRight(CountingReward):
    """Every prompt's completions alternate right, wrong, right, ..."""

    def rule(self, prompt: str, k: int) -> float:
        return float(k % 2 == 0)


def test_a_step_draws_one_round_of_m_and_trains_balanced_groups_of_n(registered, tiny_model_dir, tmp_path):
    prompts = [f"prompt {i}" for i in range(4)]
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in prompts]})
    args = tiny_config(
        tmp_path,
        generation_schedule="one_round",
        num_generations=4,
        samples_per_round=8,
        per_device_train_batch_size=16,
        max_steps=1,
    )
    reward = HalfRight()
    trainer = ReinforceAdaTrainer(model=tiny_model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)
    trainer.train()
    assert dict(reward.scored) == dict.fromkeys(prompts, 8)  # one round of M = 8, every prompt
    logs = next(h for h in trainer.state.log_history if "reinforce_ada/samples" in h)
    assert logs["reinforce_ada/samples"] == 32.0 and logs["reinforce_ada/rounds"] == 1.0
    assert logs["reinforce_ada/mixed_group_fraction"] == 1.0  # balance keeps 2 right and 2 wrong of each pool
