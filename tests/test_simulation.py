"""The simulated policy and one simulated step of adaptive sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from refusals import names, refusal

from trl_ada.advantages import compute_advantages
from trl_ada.simulation import SimulatedPolicy, simulate_step

PAPER = {"num_generations": 4, "samples_per_round": 8, "max_rounds": 4}  # n = 4, M = 8, N = 4


def test_policy_draws_bernoulli_rewards_prompt_major():
    policy = SimulatedPolicy([0.0, 1.0, 0.0], seed=0)
    np.testing.assert_array_equal(policy.sample([1, 2], 3), [1, 1, 1, 0, 0, 0])
    assert policy.sample([], 3).shape == (0,)


@pytest.mark.parametrize("pass_rates", [[0.5, -0.1], [1.5], [math.nan], [math.inf], [], [[0.5, 0.5]]])
def test_policy_rejects_pass_rates_that_are_not_probabilities(pass_rates):
    names(refusal(SimulatedPolicy, pass_rates), "pass_rates", "non-empty", "[0, 1]", f"got {pass_rates!r}")


def test_prompts_that_are_always_wrong_or_always_right_use_every_round():
    sampler = simulate_step(SimulatedPolicy([0.0, 1.0], seed=0), **PAPER)
    assert sampler.round == 4
    assert sampler.exit_round == [None, None]
    assert sampler.pools == [[0.0] * 32, [1.0] * 32]
    np.testing.assert_array_equal(sampler.kept_rewards(), [[0.0] * 4, [1.0] * 4])
    np.testing.assert_array_equal(compute_advantages(sampler.kept_rewards(), sampler.pools), np.zeros((2, 4)))
    stats = sampler.statistics()
    assert stats.samples == 64 and stats.samples_per_prompt == 32.0
    assert stats.unresolved_all_negative_fraction == 0.5
    assert stats.unresolved_all_positive_fraction == 0.5
    assert stats.exit_fraction_per_round == (0.0, 0.0, 0.0, 0.0)


def test_seeded_mid_pass_prompts_mostly_exit_in_round_one():
    sampler = simulate_step(SimulatedPolicy([0.5] * 20, seed=1), **PAPER)
    assert sampler.exit_round == [1] * 5 + [2] + [1] * 5 + [2] + [1] * 8
    assert sampler.round == 2
    stats = sampler.statistics()
    assert stats.samples == 18 * 8 + 2 * 16
    assert stats.exit_fraction_per_round == (0.9, 0.1, 0.0, 0.0)
    # prompt 5 drew one right answer in round 1 and three more in round 2; its group takes the first two of each
    assert sampler.pools[5] == [0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0]
    assert sampler.select_groups()[5] == [0, 1, 3, 8]


@pytest.mark.parametrize("seed", range(5))
def test_mid_pass_round_one_exit_rate_matches_the_binomial(seed):
    # P(2 <= right <= 6 among 8 draws at p = 0.5) = 1 - 18/256 ≈ 0.930; the std over 1000 prompts is ≈ 0.008
    sampler = simulate_step(SimulatedPolicy([0.5] * 1000, seed=seed), **PAPER)
    round_one = sampler.statistics().exit_fraction_per_round[0]
    assert abs(round_one - (1 - 18 / 256)) < 0.03


def test_plain_grpo_draws_exactly_n_per_prompt():
    sampler = simulate_step(SimulatedPolicy([0.0, 0.3, 1.0], seed=0), num_generations=4, sampling="grpo")
    assert [len(pool) for pool in sampler.pools] == [4, 4, 4]
    assert sampler.statistics().samples == 12


def test_seeded_runs_are_deterministic():
    pass_rates = np.linspace(0.0, 1.0, 11).tolist()
    first = simulate_step(SimulatedPolicy(pass_rates, seed=7), **PAPER)
    again = simulate_step(SimulatedPolicy(pass_rates, seed=7), **PAPER)
    other = simulate_step(SimulatedPolicy(pass_rates, seed=8), **PAPER)
    assert first.pools == again.pools
    assert first.exit_round == again.exit_round
    assert first.select_groups() == again.select_groups()
    assert first.statistics() == again.statistics()
    assert first.pools != other.pools
