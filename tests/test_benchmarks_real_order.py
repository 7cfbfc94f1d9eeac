"""The real-model benchmark's prompt order: every arm, synchronous or asynchronous, trains along the seed's order
(`benchmarks.real_learning.ORDER`), and each run records what it trained (`Coverage`). Checked on the tiny model:
the synchronous trainer with TRL's sampler unshuffled, the asynchronous one against a scripted server."""

from __future__ import annotations

import pytest
from datasets import Dataset
from streaming_fake import ScriptedCompletions
from test_async import (
    NoTransfer,
    async_config,
    parity_reward,
    tiny,  # noqa: F401 (the module-scoped model)
)
from tiny import tiny_config

from benchmarks import real_learning as rl
from trl_ada import ReinforceAdaTrainer
from trl_ada.async_grpo import AsyncReinforceAdaTrainer
from trl_ada.toy import make_toy_dataset

FACTS = 16


def ordered_rows() -> Dataset:
    """The toy prompts, each row naming its place in the order (`fact`), as `train_rows` lays out the benchmark's."""
    return Dataset.from_list([dict(row, fact=f"fact {i}") for i, row in enumerate(make_toy_dataset(FACTS))])


def first_facts(count: int) -> list[str]:
    return [f"fact {i}" for i in range(count)]


def parity_text_reward(completions, **kwargs) -> list[float]:
    """1 for a completion of even length: both signs turn up, so the adaptive schedules exit."""
    return [float(len(str(c)) % 2 == 0) for c in completions]


@pytest.mark.parametrize("sampling", ["grpo", "balance", "est"])
def test_a_synchronous_arm_unshuffled_trains_the_orders_first_prompts_step_by_step(tmp_path, tiny_model_dir, sampling):
    """3 steps of 2 prompts: the 6 groups trained are the order's first 6 prompts, in order, whatever the schedule."""
    n = 8 if sampling == "est" else 2
    args = tiny_config(
        tmp_path, sampling=sampling, num_generations=n, per_device_train_batch_size=2 * n, max_steps=3,
        shuffle_dataset=False,
    )  # fmt: skip
    trainer = ReinforceAdaTrainer(tiny_model_dir, [parity_text_reward], args=args, train_dataset=ordered_rows())
    coverage = rl.Coverage.watching(trainer)
    trainer.train()
    assert coverage.order == first_facts(6)
    assert coverage.dropped == {} and coverage.signal_tokens >= 0


def test_trls_shuffled_sampler_does_not_keep_the_order(tmp_path, tiny_model_dir):
    """What the benchmark's synchronous arms did before: TRL's default sampler draws the rows shuffled."""
    args = tiny_config(tmp_path, sampling="grpo", num_generations=2, per_device_train_batch_size=4, max_steps=3)
    trainer = ReinforceAdaTrainer(tiny_model_dir, [parity_text_reward], args=args, train_dataset=ordered_rows())
    coverage = rl.Coverage.watching(trainer)
    trainer.train()
    assert len(coverage.order) == 6 and coverage.order != first_facts(6)


@pytest.mark.slow
@pytest.mark.parametrize("sampling", ["grpo", "balance"])
def test_an_asynchronous_arm_trains_the_orders_first_prompts_up_to_the_groups_it_drops(tmp_path, tiny, sampling):  # noqa: F811
    """4 steps of 2 groups against a scripted server: the worker admits the order's prompts in turn, so the groups
    trained and dropped (counted apart) are among the order's first ones, up to the prompts still in flight when
    training stopped (groups finish out of order); none twice; signal rows were trained."""
    model_dir, tokenizer = tiny
    server = ScriptedCompletions(len(tokenizer), max_length=4, seed=2)
    trainer = AsyncReinforceAdaTrainer(
        model_dir,
        reward_funcs=[parity_reward],
        args=async_config(tmp_path, sampling=sampling, max_steps=4),
        train_dataset=ordered_rows(),
        processing_class=tokenizer,
        weight_transfer=NoTransfer(),
        connect=lambda settings: server,
    )
    coverage = rl.Coverage.watching(trainer)
    trainer.train()
    settled = coverage.order + list(coverage.dropped.elements())
    assert len(coverage.order) == 8  # 4 steps of 8 rows, groups of 4
    assert len(set(settled)) == len(settled)
    assert set(settled) <= set(first_facts(len(settled) + trainer.worker.settings.prompts_in_flight))
    assert coverage.signal_tokens > 0
