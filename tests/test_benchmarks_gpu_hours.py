"""Modelled GPU hours of toy steps: calibrated on GRPO n=4's published step, and priced by rounds and trained rows."""

from __future__ import annotations

import pytest

from benchmarks.gpu_hours import StepPricer, cumulative_hours


def test_grpo_n4_step_costs_the_papers_published_time_and_its_training_part():
    pricer = StepPricer(prompts_per_step=8)
    assert pricer.scale == 8  # 64 paper prompts per engine over 8 toy prompts
    assert pricer.step_seconds([32], 32) == pytest.approx(102.0)
    assert pricer.step_seconds([0], 32) == pytest.approx(15.0)  # the training part alone


def test_more_rounds_more_completions_and_more_training_cost_more():
    pricer = StepPricer(prompts_per_step=8)
    one_round = pricer.step_seconds([64], 32)
    assert pricer.step_seconds([32, 32], 32) > one_round  # a second round waits for its own longest completion
    assert pricer.step_seconds([64], 64) == pytest.approx(one_round + 15.0)  # 4 more trained per prompt: 15 s more
    assert pricer.step_seconds([128], 32) > one_round


def test_cumulative_hours_add_up_the_steps():
    pricer = StepPricer(prompts_per_step=8)
    assert cumulative_hours(pricer, [([32], 32)] * 36) == pytest.approx([102.0 * k / 3600 for k in range(1, 37)])
