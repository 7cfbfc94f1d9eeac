"""The worked example of `docs/architecture.md`: a schedule added from outside the package as one module plus one
registry line (`docs/examples/one_round.py`) resolves from flat fields, refuses what it does not use, and trains."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from datasets import Dataset
from tiny import CountingReward, tiny_config

from trl_ada import ReinforceAdaTrainer
from trl_ada.plan import SYNCHRONOUS, SamplingPlan, flat_fields, register

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
    monkeypatch.setattr(SYNCHRONOUS, "schedules", dict(SYNCHRONOUS.registry))  # undone after the test
    register(one_round.OneRound)  # the registry line


def test_the_architecture_page_shows_the_example_as_it_is():
    page = (EXAMPLE.parents[1] / "architecture.md").read_text()
    assert f"```python\n{EXAMPLE.read_text()}```" in page


def test_an_unregistered_schedule_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(generation_schedule="one_round")
    assert "generation_schedule='one_round'" in str(refused.value)
    assert all(repr(name) in str(refused.value) for name in SYNCHRONOUS.registry)


def test_the_registered_schedule_resolves_from_flat_fields(registered):
    plan = SamplingPlan.from_fields(generation_schedule="one_round", samples_per_round=8, num_generations=4)
    assert type(plan.section) is one_round.OneRound
    exits = plan.section.exits(4)
    assert (exits.exit_rule, exits.samples_per_round, exits.max_rounds) == ("balance", 8, 1)
    assert "max_rounds" not in plan.fields()
    owners = {f.name: f.owners for f in flat_fields()}
    assert "one_round" in owners["samples_per_round"] and "one_round" not in owners["max_rounds"]


def test_a_plan_whose_schedule_left_the_registry_is_refused_on_replace_naming_it(monkeypatch):
    monkeypatch.setattr(SYNCHRONOUS, "schedules", dict(SYNCHRONOUS.registry))
    register(one_round.OneRound)
    plan = SamplingPlan.from_fields(generation_schedule="one_round", samples_per_round=8, num_generations=4)
    monkeypatch.undo()  # no registry holds OneRound now: replace resolves on the synchronous trainer's registry
    with pytest.raises(ValueError) as refused:
        plan.replace(samples_per_round=4)
    assert "generation_schedule='one_round'" in str(refused.value)
    assert all(repr(name) in str(refused.value) for name in SYNCHRONOUS.registry)


@pytest.mark.parametrize(
    ("fields", "fragments", "fix"),
    [
        ({"max_rounds": 3}, ["max_rounds=3", "'one_round'", "'rounds'", "Remove max_rounds"], {}),
        ({"samples_per_round": 2}, ["samples_per_round=2", "samples_per_round >= 4"], {"samples_per_round": 4}),
        ({"streaming_window": 4}, ["streaming_window=4", "'streaming'", "Remove streaming_window"], {}),
    ],
)
def test_the_registered_schedule_refuses_what_it_does_not_use_and_the_fix_works(registered, fields, fragments, fix):
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(generation_schedule="one_round", num_generations=4, **fields)
    assert "\n" not in str(refused.value) and all(fragment in str(refused.value) for fragment in fragments)
    assert SamplingPlan.from_fields(generation_schedule="one_round", num_generations=4, **fix).section


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
