"""The sampling core (docs/algorithm.md, steps 1-4): exit rules, the per-step state machine, group selection,
statistics and input validation. Pure Python, no torch."""

from __future__ import annotations

import math
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import names, refusal

from trl_ada import sampling
from trl_ada.plan import SamplingPlan
from trl_ada.sampling import (
    NONE,
    AdaptiveSampler,
    QuotaRule,
    aggregate_rewards,
    exit_rule_names,
    get_exit_rule,
    register_exit_rule,
    select_group,
)
from trl_ada.schedules.grpo import Grpo
from trl_ada.simulation import SimulatedPolicy, simulate_step


def run_rounds(sampler: AdaptiveSampler, *rounds: list[float]) -> list[list[int]]:
    """Feed each round's rewards (prompt-major) to the sampler; return the prompts exiting per round."""
    exits = []
    for rewards in rounds:
        sampler.plan_round()
        exits.append(sampler.ingest(rewards))
    return exits


# --------------------------------------------------------------------------------------------
# Exit rules
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_positive", "num_negative", "n", "met"),
    [
        # n = 4 needs 2 positives and 2 negatives
        (2, 2, 4, True),
        (5, 3, 4, True),
        (1, 7, 4, False),
        (3, 1, 4, False),
        (4, 0, 4, False),
        (0, 4, 4, False),
        # n = 5 needs 2 positives and 3 negatives
        (2, 3, 5, True),
        (3, 2, 5, False),
        (1, 9, 5, False),
        (4, 4, 5, True),
        # n = 2 needs 1 positive and 1 negative
        (1, 1, 2, True),
        (2, 0, 2, False),
        (0, 2, 2, False),
    ],
)
def test_balance_rule_needs_half_positives_and_the_rest_negatives(num_positive, num_negative, n, met):
    assert get_exit_rule("balance").is_met(num_positive, num_negative, n) is met


@pytest.mark.parametrize(
    ("num_positive", "num_negative", "met"), [(1, 0, True), (1, 31, True), (4, 0, True), (0, 32, False), (0, 0, False)]
)
def test_pos_rule_needs_one_positive(num_positive, num_negative, met):
    assert get_exit_rule("pos").is_met(num_positive, num_negative, 4) is met


@pytest.mark.parametrize(("num_positive", "num_negative"), [(0, 0), (0, 4), (4, 0), (2, 2)])
def test_none_rule_is_always_met(num_positive, num_negative):
    assert NONE.is_met(num_positive, num_negative, 4) is True


def test_builtin_rules_are_registered_but_plain_grpos_none_is_no_choice():
    assert exit_rule_names() == ["balance", "mixed", "pos"]
    for name in exit_rule_names():
        assert get_exit_rule(name).name == name


def test_misspelled_exit_rule_names_the_value_lists_valid_names_and_suggests_a_fix():
    with pytest.raises(ValueError) as info:
        get_exit_rule("balanse")
    message = str(info.value)
    assert "exit_rule='balanse'" in message
    assert "['balance', 'mixed', 'pos']" in message
    assert "Did you mean 'balance'?" in message


def test_unknown_exit_rule_is_rejected_by_the_sampler():
    names(
        refusal(AdaptiveSampler, num_prompts=1, exit_rule="greedy"),
        "exit_rule='greedy'",
        "['balance', 'mixed', 'pos']",
    )


def test_custom_rule_registered_by_name_drives_the_sampler(exit_rule_registry):
    three_positives = QuotaRule("three_positives", min_positive=lambda n: 3, min_negative=lambda n: 0)
    assert register_exit_rule(three_positives) is three_positives
    assert "three_positives" in exit_rule_names()

    sampler = AdaptiveSampler(
        num_prompts=1, num_generations=4, samples_per_round=4, max_rounds=3, exit_rule="three_positives"
    )
    exits = run_rounds(sampler, [1, 1, 0, 0], [0, 0, 0, 1])
    assert exits == [[], [0]]  # two positives are not enough, the third one is
    assert sampler.exit_round == [2]
    assert sampler.done
    assert sampler.select_groups() == [[0, 1, 2, 3]]  # selection still keeps 2 + 2


def test_registering_a_taken_name_raises_unless_overwriting(exit_rule_registry):
    rule = QuotaRule("three_positives", min_positive=lambda n: 3, min_negative=lambda n: 0)
    register_exit_rule(rule)
    with pytest.raises(ValueError, match="'three_positives' is already registered"):
        register_exit_rule(QuotaRule("three_positives", min_positive=lambda n: 1, min_negative=lambda n: 0))
    with pytest.raises(ValueError, match="'balance' is already registered"):
        register_exit_rule(QuotaRule("balance", min_positive=lambda n: 1, min_negative=lambda n: 0))
    assert get_exit_rule("three_positives") is rule

    replacement = QuotaRule("three_positives", min_positive=lambda n: 1, min_negative=lambda n: 0)
    register_exit_rule(replacement, overwrite=True)
    assert get_exit_rule("three_positives") is replacement


def test_registering_something_that_is_not_a_rule_raises_type_error(exit_rule_registry):
    with pytest.raises(TypeError, match="is_met"):
        register_exit_rule(object())
    assert exit_rule_names() == ["balance", "mixed", "pos"]


# --------------------------------------------------------------------------------------------
# The state machine
# --------------------------------------------------------------------------------------------


def test_prompt_cannot_exit_before_its_pool_holds_n_samples():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=4, samples_per_round=2, max_rounds=4, exit_rule="pos")
    assert run_rounds(sampler, [1, 0]) == [[]]  # positive in hand, but only 2 of the 4 samples a group needs
    assert sampler.active == [0]
    assert run_rounds(sampler, [0, 0]) == [[0]]
    assert sampler.exit_round == [2]
    assert sampler.pools == [[1.0, 0.0, 0.0, 0.0]]
    assert sampler.done


def test_balance_exits_each_prompt_in_the_round_it_meets_the_rule():
    sampler = AdaptiveSampler(num_prompts=3, num_generations=4, samples_per_round=4, max_rounds=3)
    # round 1: prompt 0 mixed 2+2, prompt 1 all wrong, prompt 2 has 3 right and 1 wrong
    assert run_rounds(sampler, [1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0]) == [[0]]
    assert sampler.plan_round() == [1, 2]  # the exited prompt is not sampled again
    assert sampler.ingest([0, 0, 1, 1, 1, 1, 0, 1]) == [1, 2]
    assert sampler.exit_round == [1, 2, 2]
    assert [len(pool) for pool in sampler.pools] == [4, 8, 8]
    assert sampler.done and sampler.round == 2
    assert sampler.select_groups() == [[0, 1, 2, 3], [0, 1, 6, 7], [0, 1, 3, 6]]
    np.testing.assert_array_equal(sampler.kept_rewards(), [[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 0, 0]])


def test_positive_means_strictly_above_the_threshold():
    sampler = AdaptiveSampler(
        num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=1, positive_threshold=0.7
    )
    run_rounds(sampler, [0.7, 0.71])
    assert sampler.is_positive(0) == [False, True]
    assert sampler.counts(0) == (1, 1)
    assert sampler.exit_round == [1]


def test_unresolved_prompts_stop_at_max_rounds():
    sampler = AdaptiveSampler(num_prompts=2, num_generations=4, samples_per_round=2, max_rounds=3)
    run_rounds(sampler, [0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1])
    assert sampler.done and sampler.exit_round == [None, None]
    with pytest.raises(RuntimeError, match="max_rounds"):
        sampler.plan_round()
    assert sampler.select_groups() == [[0, 1, 2, 3], [0, 1, 2, 3]]
    stats = sampler.statistics()
    assert stats.unresolved_all_negative_fraction == 0.5
    assert stats.unresolved_all_positive_fraction == 0.5
    assert stats.samples == 12 and stats.rounds == 3


def test_none_rule_is_one_round_of_exactly_n():
    plan = SamplingPlan(Grpo(), num_generations=4)  # plain GRPO, the section `sampling="grpo"` selects
    assert plan == SamplingPlan.from_fields(sampling="grpo", num_generations=4)
    sampler = AdaptiveSampler(2, plan)
    assert (sampler.samples_per_round, sampler.max_rounds) == (4, 1)
    assert run_rounds(sampler, [0, 0, 0, 0, 1, 0, 1, 1]) == [[0, 1]]
    assert sampler.done
    assert sampler.select_groups() == [[0, 1, 2, 3], [0, 1, 2, 3]]


def test_groups_are_formed_only_once_sampling_is_done():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=2)
    run_rounds(sampler, [0, 0])
    with pytest.raises(RuntimeError, match="done"):
        sampler.select_groups()


def test_ingest_before_plan_round_raises():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=2)
    with pytest.raises(RuntimeError, match=r"plan_round\(\)"):
        sampler.ingest([1, 0])
    run_rounds(sampler, [0, 0])
    with pytest.raises(RuntimeError, match=r"plan_round\(\)"):  # each plan is ingested once
        sampler.ingest([1, 0])


def test_ingest_rejects_rewards_of_the_wrong_length():
    sampler = AdaptiveSampler(num_prompts=3, num_generations=4, samples_per_round=8, max_rounds=4)
    sampler.plan_round()
    with pytest.raises(ValueError, match=r"rewards has 23 values; expected 24"):
        sampler.ingest([0.0] * 23)
    assert sampler.round == 0 and sampler.pools == [[], [], []]  # a rejected round leaves no trace


def test_ingest_rejects_an_infinite_reward_naming_its_index():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=4, max_rounds=1)
    sampler.plan_round()
    with pytest.raises(ValueError, match=r"rewards\[2\] = inf"):
        sampler.ingest([1.0, 0.0, float("inf"), 1.0])
    assert sampler.pools == [[]]


# --------------------------------------------------------------------------------------------
# Unscored samples ("no opinion": every reward function returned None)
# --------------------------------------------------------------------------------------------

NAN = float("nan")


def test_unscored_samples_are_neither_positive_nor_negative_for_the_exit_rule():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=4, samples_per_round=4, max_rounds=3)
    assert run_rounds(sampler, [1, NAN, 1, NAN]) == [[]]  # 2 positives; the unscored are not the 2 negatives
    assert sampler.counts(0) == (2, 0)
    assert run_rounds(sampler, [NAN, 0, NAN, NAN]) == [[]]
    assert sampler.counts(0) == (2, 1)
    assert run_rounds(sampler, [NAN, NAN, NAN, 0]) == [[0]]
    assert sampler.counts(0) == (2, 2)
    assert sampler.select_groups() == [[0, 2, 5, 11]]  # the scored ones; no unscored sample is needed


def test_a_prompt_no_function_can_score_stops_after_its_first_round():
    sampler = AdaptiveSampler(num_prompts=2, num_generations=4, samples_per_round=4, max_rounds=3)
    assert run_rounds(sampler, [NAN] * 4 + [0, 0, 0, 0]) == [[0]]
    assert run_rounds(sampler, [0, 0, 0, 0], [0, 0, 0, 0]) == [[], []]
    assert sampler.exit_round == [1, None]
    assert [len(pool) for pool in sampler.pools] == [4, 12]
    assert sampler.select_groups()[0] == [0, 1, 2, 3]
    assert np.isnan(sampler.kept_rewards()[0]).all()


def test_unscored_samples_fill_a_group_only_when_the_scored_cannot():
    assert select_group([True, False, False, True], 4, is_scored=[True, False, True, False]) == [0, 1, 2, 3]
    # 1 positive and 2 negatives scored: all three kept, the first unscored fills the group
    positive = [False, True, False, False, False, False]
    scored = [False, True, False, True, False, True]
    assert select_group(positive, 4, is_scored=scored) == [0, 1, 3, 5]
    # 3 negatives scored: all kept before any unscored
    assert select_group([False] * 6, 4, is_scored=[False, True, False, True, True, False]) == [0, 1, 3, 4]


@given(st.lists(st.sampled_from([0.0, 1.0, NAN]), min_size=4, max_size=32))
@settings(max_examples=200, deadline=None)
def test_unscored_samples_never_change_exits_or_classes(pool):
    """Property: dropping every unscored sample leaves counts, and hence the exit decision, unchanged."""
    scored = [r for r in pool if not math.isnan(r)]
    with_nan = AdaptiveSampler(num_prompts=1, num_generations=4, samples_per_round=len(pool), max_rounds=1)
    run_rounds(with_nan, pool)
    assert with_nan.counts(0) == (sum(r > 0.7 for r in scored), sum(r <= 0.7 for r in scored))
    group = with_nan.select_groups()[0]
    kept_scored = sum(not math.isnan(pool[i]) for i in group)
    assert kept_scored == min(4, len(scored))  # scored samples always come first
    stats = with_nan.statistics()
    assert stats.samples == len(pool)
    if scored:
        assert stats.pool_pass_rate == pytest.approx(sum(r > 0.7 for r in scored) / len(scored))
        assert stats.first_round_reward == pytest.approx(sum(scored) / len(scored))
    else:
        assert math.isnan(stats.first_round_reward)


# --------------------------------------------------------------------------------------------
# Truncated completions under mask_truncated_completions
# --------------------------------------------------------------------------------------------


def test_selection_prefers_samples_that_carry_gradient_within_each_class():
    # pool: positives at 0, 3, 5 (0 masked); negatives at 1, 2, 4, 6 (1 and 2 masked)
    positive = [True, False, False, True, False, True, False]
    masked = [True, True, True, False, False, False, False]
    assert select_group(positive, 4) == [0, 1, 2, 3]  # without masks: the earliest draws
    assert select_group(positive, 4, is_masked=masked) == [3, 4, 5, 6]  # 2 + 2, none masked
    # a class with too few unmasked samples still fills its quota with masked ones
    assert select_group([True, False, False, True], 4, is_masked=[False, True, True, False]) == [0, 1, 2, 3]


def test_sampler_keeps_an_unmasked_balanced_group_when_the_pool_allows_it():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=4, samples_per_round=8, max_rounds=2)
    sampler.plan_round()
    masked = [True, True, False, False, False, False, False, False]  # the first two negatives were truncated
    assert sampler.ingest([0, 0, 1, 1, 0, 0, 1, 1], masked=masked) == [0]  # exits on rewards alone
    assert sampler.select_groups() == [[2, 3, 4, 5]]
    assert sampler.candidates(0) == [0, 1, 2, 3, 4, 5, 6, 7]


def test_ingest_rejects_masks_of_the_wrong_length():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=1)
    sampler.plan_round()
    with pytest.raises(ValueError, match="masked has 1 flags; expected 2"):
        sampler.ingest([0, 1], masked=[True])


# --------------------------------------------------------------------------------------------
# Group selection
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_positive", "num_negative", "kept_positive"),
    [(6, 2, 2), (8, 0, 4), (1, 31, 1), (0, 32, 0), (2, 2, 2), (3, 1, 3), (1, 3, 1)],
)
def test_select_group_keeps_half_positives_and_fills_shortfalls_from_the_other_class(
    num_positive, num_negative, kept_positive
):
    rng = np.random.default_rng(num_positive * 100 + num_negative)
    is_positive = rng.permutation([True] * num_positive + [False] * num_negative).tolist()
    group = select_group(is_positive, 4)
    assert len(group) == 4 and len(set(group)) == 4
    assert group == sorted(group)
    assert sum(is_positive[i] for i in group) == kept_positive
    assert select_group(is_positive, 4) == group  # the same pool gives the same group


def test_select_group_keeps_the_earliest_draws_of_each_class():
    is_positive = [False, True, False, True, True, False, True, True]  # 5 right / 3 wrong
    assert select_group(is_positive, 4) == [0, 1, 2, 3]
    assert select_group([True] * 8, 4) == [0, 1, 2, 3]
    assert select_group([False] * 31 + [True], 4) == [0, 1, 2, 31]
    assert select_group([True, True, False], 3) == [0, 1, 2]  # n = 3 keeps 1 positive + 2 negatives, short 1


def test_select_group_of_an_odd_n_keeps_more_negatives():
    assert select_group([True] * 4 + [False] * 4, 5) == [0, 1, 4, 5, 6]


def test_select_group_rejects_a_pool_smaller_than_n():
    with pytest.raises(ValueError, match="num_generations=4"):
        select_group([True, False, True], 4)


@pytest.mark.parametrize(
    ("pool", "kept_positive"),
    [([1] * 6 + [0] * 2, 2), ([1] * 8, 4), ([1] + [0] * 31, 1), ([0] * 32, 0)],
)
def test_sampler_forms_groups_with_the_same_rule(pool, kept_positive):
    m = 8
    sampler = AdaptiveSampler(num_prompts=1, num_generations=4, samples_per_round=m, max_rounds=len(pool) // m)
    while not sampler.done:
        sampler.plan_round()
        sampler.ingest(pool[sampler.round * m : (sampler.round + 1) * m])
    assert sampler.pools == [[float(r) for r in pool]]
    (group,) = sampler.select_groups()
    assert len(group) == 4 and group == sorted(group)
    assert sum(pool[i] for i in group) == kept_positive
    assert sampler.select_groups() == [group]


# --------------------------------------------------------------------------------------------
# Validation and reward aggregation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"samples_per_round": 0}, ["samples_per_round=0"]),
        ({"max_rounds": 0}, ["max_rounds=0"]),
        ({"num_generations": 1}, ["num_generations=1"]),
        (
            {"samples_per_round": 1, "max_rounds": 3, "num_generations": 4},
            ["samples_per_round * max_rounds = 1 * 3 = 3", "num_generations=4"],
        ),
        ({"positive_threshold": float("nan")}, ["positive_threshold=nan"]),
        ({"positive_threshold": float("inf")}, ["positive_threshold=inf"]),
        ({"positive_threshold": float("-inf")}, ["positive_threshold=-inf"]),
        ({"positive_threshold": "0.7"}, ["positive_threshold='0.7'"]),
    ],
)
def test_impossible_sampling_plans_name_the_parameter_and_value(kwargs, fragments):
    plan = {"num_generations": 4, "samples_per_round": 8, "max_rounds": 4, "positive_threshold": 0.7, **kwargs}
    with pytest.raises(ValueError) as info:
        AdaptiveSampler(num_prompts=2, **plan)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_sampler_needs_at_least_one_prompt():
    with pytest.raises(ValueError, match="num_prompts=0"):
        AdaptiveSampler(num_prompts=0)


def test_aggregate_rewards_weights_functions_and_skips_nan():
    rewards = aggregate_rewards([[1.0, math.nan], [math.nan, math.nan], [0.5, 1.0]], weights=[1.0, 2.0])
    np.testing.assert_array_equal(rewards, [1.0, np.nan, 2.5])  # a row no function scored stays unscored


@pytest.mark.parametrize("shape", [(3,), (3, 3), (3, 1)])
def test_aggregate_rewards_rejects_a_shape_not_matching_the_weights(shape):
    with pytest.raises(ValueError, match=r"expected \(num_completions, 2\)"):
        aggregate_rewards(np.zeros(shape), weights=[1.0, 2.0])


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def test_statistics_of_a_hand_run():
    sampler = AdaptiveSampler(num_prompts=4, num_generations=2, samples_per_round=2, max_rounds=2)
    # prompt 0 exits in round 1, prompt 1 in round 2, prompt 2 stays all wrong, prompt 3 stays all right
    run_rounds(sampler, [1, 0, 0, 0, 0, 0, 1, 1], [0, 1, 0, 0, 1, 1])
    stats = sampler.statistics()
    assert stats.num_prompts == 4
    assert stats.samples == 14 and stats.samples_per_prompt == 3.5
    assert stats.rounds == 2
    assert stats.exit_fraction_per_round == (0.25, 0.25)
    assert stats.exited_fraction == 0.5 and stats.unresolved_fraction == 0.5
    assert stats.unresolved_all_positive_fraction == 0.25
    assert stats.unresolved_all_negative_fraction == 0.25
    assert stats.unresolved_mixed_fraction == 0.0
    assert stats.pool_pass_rate == 6 / 14
    assert stats.first_round_reward == 3 / 8
    assert stats.mixed_group_fraction == 0.5

    metrics = stats.as_metrics(prefix="ada/")
    assert metrics["ada/samples"] == 14.0
    assert metrics["ada/exit_fraction/round_1"] == 0.25
    assert metrics["ada/exit_fraction/round_2"] == 0.25
    assert metrics["ada/first_round_reward"] == 3 / 8


# --------------------------------------------------------------------------------------------
# Properties over random steps
# --------------------------------------------------------------------------------------------


@st.composite
def sampling_steps(draw):
    """A random step: pass rates, n in [2, 8], N in [1, 6], M in [1, 8] with M * N >= n (for an adaptive rule),
    threshold, rule."""
    num_generations = draw(st.integers(2, 8))
    max_rounds = draw(st.integers(1, 6))
    samples_per_round = draw(st.integers(-(-num_generations // max_rounds), 8))
    pass_rates = draw(st.lists(st.sampled_from([0.0, 1.0]) | st.floats(0.0, 1.0), min_size=1, max_size=12))
    exit_rule = draw(st.sampled_from(["balance", "pos", None]))  # None: plain GRPO
    rounds = (
        {"sampling": "grpo"}  # plain GRPO refuses the rule, M and N: it draws one round of exactly n
        if exit_rule is None
        else {"exit_rule": exit_rule, "samples_per_round": samples_per_round, "max_rounds": max_rounds}
    )
    return {
        "pass_rates": pass_rates,
        "seed": draw(st.integers(0, 2**32 - 1)),
        "num_generations": num_generations,
        **rounds,
        "positive_threshold": draw(st.sampled_from([0.5, 0.7]) | st.floats(-0.5, 1.5)),
    }


def simulate_recorded(step: dict) -> tuple[AdaptiveSampler, list[tuple[list[int], list[int | None]]]]:
    """Run `simulate_step`, recording each round's plan and which prompts had exited when it was made."""
    plans = []
    plan_round = AdaptiveSampler.plan_round

    def recording_plan_round(sampler):
        exited_before = list(sampler.exit_round)
        plan = plan_round(sampler)
        plans.append((plan, exited_before))
        return plan

    policy = SimulatedPolicy(step["pass_rates"], seed=step["seed"])
    kwargs = {key: value for key, value in step.items() if key not in ("pass_rates", "seed")}
    with patch.object(AdaptiveSampler, "plan_round", autospec=True, side_effect=recording_plan_round):
        sampler = simulate_step(policy, **kwargs)
    return sampler, plans


@settings(max_examples=200, deadline=None)
@given(sampling_steps())
def test_every_step_keeps_n_samples_per_prompt_and_samples_only_active_prompts(step):
    sampler, plans = simulate_recorded(step)
    n, b = step["num_generations"], len(step["pass_rates"])
    m = sampler.samples_per_round
    grpo = "sampling" in step

    # rounds within the cap, one plan per round, each plan = the prompts that had not exited
    assert 1 <= sampler.round <= (1 if grpo else step["max_rounds"])
    assert len(plans) == sampler.round
    for plan, exited_before in plans:
        assert plan == [p for p in range(b) if exited_before[p] is None]
    assert sampler.done

    # no prompt sampled after it exited: pool size = M × (exit round, or rounds used)
    for p, pool in enumerate(sampler.pools):
        exit_round = sampler.exit_round[p]
        assert len(pool) == m * (exit_round if exit_round is not None else sampler.round)
        if grpo:
            assert len(pool) == n and exit_round == 1

    # samples drawn = Σ over rounds of (#active × M)
    drawn = sum(len(plan) * m for plan, _ in plans)
    assert drawn == sum(len(pool) for pool in sampler.pools) == sampler.statistics().samples

    # every prompt keeps exactly n distinct samples of its own pool, in draw order
    groups = sampler.select_groups()
    assert len(groups) == b
    for p, group in enumerate(groups):
        assert len(group) == n and len(set(group)) == n
        assert group == sorted(group)
        assert all(0 <= i < len(sampler.pools[p]) for i in group)


@settings(max_examples=200, deadline=None)
@given(sampling_steps())
def test_prompts_exit_in_the_first_round_their_rule_is_met(step):
    sampler, _ = simulate_recorded(step)
    n, m = step["num_generations"], sampler.samples_per_round
    rule = NONE if "sampling" in step else get_exit_rule(step["exit_rule"])
    for p, pool in enumerate(sampler.pools):
        positive = sampler.is_positive(p)
        met = [
            r * m >= n and rule.is_met(sum(positive[: r * m]), r * m - sum(positive[: r * m]), n)
            for r in range(1, len(pool) // m + 1)
        ]
        exit_round = sampler.exit_round[p]
        if exit_round is None:
            assert not any(met)
        else:
            assert met.index(True) + 1 == exit_round

        if step.get("exit_rule") == "balance" and exit_round is not None:
            kept_positive = sum(positive[i] for i in sampler.select_groups()[p])
            assert kept_positive == n // 2  # and so n − ⌊n/2⌋ negatives


@settings(max_examples=200, deadline=None)
@given(sampling_steps())
def test_statistics_add_up(step):
    sampler, _ = simulate_recorded(step)
    stats = sampler.statistics()
    b, m = len(step["pass_rates"]), sampler.samples_per_round

    fractions = [
        *stats.exit_fraction_per_round,
        stats.exited_fraction,
        stats.unresolved_fraction,
        stats.unresolved_all_positive_fraction,
        stats.unresolved_all_negative_fraction,
        stats.unresolved_mixed_fraction,
        stats.pool_pass_rate,
        stats.mixed_group_fraction,
    ]
    assert all(0.0 <= fraction <= 1.0 for fraction in fractions)
    assert stats.num_prompts == b and stats.rounds == sampler.round
    assert len(stats.exit_fraction_per_round) == sampler.max_rounds
    assert sum(stats.exit_fraction_per_round) == pytest.approx(stats.exited_fraction, abs=1e-12)
    assert stats.unresolved_fraction == pytest.approx(
        stats.unresolved_all_positive_fraction
        + stats.unresolved_all_negative_fraction
        + stats.unresolved_mixed_fraction,
        abs=1e-12,
    )
    assert stats.exited_fraction + stats.unresolved_fraction == pytest.approx(1.0, abs=1e-12)
    assert stats.exited_fraction == pytest.approx(sum(r is not None for r in sampler.exit_round) / b, abs=1e-12)
    assert stats.samples_per_prompt * stats.num_prompts == pytest.approx(stats.samples, rel=1e-12)
    assert stats.first_round_reward == pytest.approx(np.mean([pool[:m] for pool in sampler.pools]), abs=1e-12)
    assert stats.pool_pass_rate == pytest.approx(
        sum(sum(sampler.is_positive(p)) for p in range(b)) / stats.samples, abs=1e-12
    )


def test_candidates_are_the_first_n_of_each_class_and_cover_the_group():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=4, samples_per_round=8, max_rounds=1)
    sampler.plan_round()
    sampler.ingest([1, 1, 0, 1, 1, 1, 0, 1])
    assert sampler.candidates(0) == [0, 1, 2, 3, 4, 6]  # the 5th and 6th positives can never be kept
    assert set(sampler.select_groups()[0]) <= set(sampler.candidates(0))


# --------------------------------------------------------------------------------------------
# Reinforce-Ada-Est: prior-sized rounds, futility stop, per-step budget
# --------------------------------------------------------------------------------------------


def test_beta_binomial_pmf_matches_hand_values():
    np.testing.assert_allclose(sampling.beta_binomial_pmf(2, [1.0], [1.0]), [[1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(sampling.beta_binomial_pmf(1, [2.0], [1.0]), [[1 / 3, 2 / 3]])
    np.testing.assert_allclose(sampling.beta_binomial_pmf(3, [0.5], [0.5]), [[0.3125, 0.1875, 0.1875, 0.3125]])
    np.testing.assert_allclose(sampling.beta_binomial_pmf(0, [2.0, 3.0], [1.0, 1.0]), [[1.0], [1.0]])


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 40),
    st.floats(0.05, 60.0),
    st.floats(0.05, 60.0),
)
def test_beta_binomial_pmf_is_a_distribution_with_the_right_mean(draws, alpha, beta):
    pmf = sampling.beta_binomial_pmf(draws, [alpha], [beta])[0]
    assert pmf.shape == (draws + 1,) and np.all(pmf >= 0)
    assert math.isclose(pmf.sum(), 1.0, rel_tol=1e-9)
    assert math.isclose(pmf @ np.arange(draws + 1), draws * alpha / (alpha + beta), rel_tol=1e-9, abs_tol=1e-12)


def test_exit_probability_matches_hand_computation():
    balance, pos = get_exit_rule("balance"), get_exit_rule("pos")
    # empty pool, uniform prior: k ~ uniform on 0..m; balance n=4 needs 2 <= k <= m - 2
    probability = sampling.exit_probability(balance, 4, np.array([1.0]), np.array([1.0]), [0], [0], cap=8)[0]
    np.testing.assert_allclose(probability, [0, 0, 0, 0, 1 / 5, 2 / 6, 3 / 7, 4 / 8, 5 / 9])
    probability = sampling.exit_probability(pos, 4, np.array([1.0]), np.array([1.0]), [0], [0], cap=4)[0]
    np.testing.assert_allclose(probability, [0, 0, 0, 0, 4 / 5])
    # pool 1+ / 3-, posterior Beta(2, 4): one more positive is needed, P(next is positive) = 2/6
    probability = sampling.exit_probability(balance, 4, np.array([2.0]), np.array([4.0]), [1], [3], cap=2)[0]
    np.testing.assert_allclose(probability, [0, 1 / 3, 1 - (4 * 5) / (6 * 7)])


def test_prior_round_size_is_the_smallest_size_reaching_the_confidence():
    probability = np.array([0, 0, 0, 0, 0.2, 0.33, 0.43, 0.5, 0.56])
    assert sampling.prior_round_size(probability, 4, 8, 0.55) == 8
    assert sampling.prior_round_size(probability, 4, 8, 0.4) == 6
    assert sampling.prior_round_size(probability, 7, 8, 0.1) == 7  # never below `low`
    assert sampling.prior_round_size(probability, 4, 6, 0.9) == 6  # none reaches it: the cap left


def test_grant_by_marginal_gain_spends_on_the_largest_increments_first():
    gain = np.array([[0.0, 0.5, 0.7, 0.8], [0.0, 0.4, 0.8, 0.9], [0.0, 0.0, 0.0, 0.0]])
    tie = np.zeros_like(gain)
    low, high = np.array([0, 0, 0]), np.array([3, 3, 3])
    # increments: prompt 0: .5 .2 .1, prompt 1: .4 .4 .1, prompt 2: 0 0 0
    assert sampling.grant_by_marginal_gain(low, high, 0, gain, tie).tolist() == [0, 0, 0]
    assert sampling.grant_by_marginal_gain(low, high, 1, gain, tie).tolist() == [1, 0, 0]
    assert sampling.grant_by_marginal_gain(low, high, 3, gain, tie).tolist() == [1, 2, 0]
    assert sampling.grant_by_marginal_gain(low, high, 4, gain, tie).tolist() == [2, 2, 0]
    assert sampling.grant_by_marginal_gain(low, high, 100, gain, tie).tolist() == [3, 3, 3]
    assert sampling.grant_by_marginal_gain(low, np.array([1, 3, 3]), 3, gain, tie).tolist() == [1, 2, 0]
    assert sampling.grant_by_marginal_gain(np.array([2, 0, 1]), high, 1, gain, tie).tolist() == [2, 1, 1]
    second = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [0, 0.3, 0.3, 0.3]])
    assert sampling.grant_by_marginal_gain(low, high, 7, gain, second).tolist() == [3, 3, 1]


def _est(num_prompts: int, **kwargs) -> AdaptiveSampler:
    base = {"num_generations": 4, "samples_per_round": 8, "max_rounds": 4}
    return AdaptiveSampler(num_prompts=num_prompts, **{**base, **kwargs})


def test_prior_sized_first_round():
    sampler = _est(
        4,
        first_round="prior",
        round_confidence=0.55,
        prior_alpha=[50.0, 1.0, 99.0, 1.0],
        prior_beta=[50.0, 99.0, 1.0, 1.0],
        memory_hits=[True, True, True, False],
    )
    assert sampler.plan_round() == [0, 1, 2, 3]
    # p ~ 0.5: 4 draws meet balance w.p. ~3/8, 5 draws w.p. ~5/8; p ~ 0.01 or 0.99: the whole cap; Beta(1, 1): 8
    assert sampler.plan_sizes == [5, 32, 32, 8]


def test_prior_sized_later_round_uses_the_pool():
    sampler = _est(1, samples_per_round=4, later_rounds="prior")
    sampler.plan_round()
    assert sampler.plan_sizes == [4]  # the first round stays fixed
    sampler.ingest([1, 0, 0, 0])  # Beta(2, 4): one more positive needed
    sampler.plan_round()
    assert sampler.plan_sizes == [2]  # P(a positive within 1) = 1/3, within 2 = 1 - 20/42 > 0.5


def test_futile_prompt_only_fills_its_group_then_stops():
    sampler = _est(2, futility_threshold=0.05, prior_alpha=[0.01, 50.0], prior_beta=[100.0, 50.0])
    assert sampler.plan_round() == [0, 1]
    assert sampler.plan_sizes == [4, 8]
    assert sampler.ingest([0] * 4 + [1, 0] * 4) == [1]
    assert sampler.stopped == [True, False] and sampler.exit_round == [None, 1]
    assert sampler.done and sampler.active == []
    assert sampler.select_groups()[0] == [0, 1, 2, 3]  # formed like any unresolved prompt's
    stats = sampler.statistics()
    assert stats.samples == 12 and stats.estimation.futile_fraction == 0.5 and stats.unresolved_fraction == 0.5
    assert stats.first_round_reward == 0.25  # prompts weigh equally: (0/4 + 4/8) / 2, not 4/12


def test_futility_stop_after_a_round_of_evidence():
    sampler = _est(2, samples_per_round=4, max_rounds=2, futility_threshold=0.2)
    sampler.plan_round()
    assert sampler.plan_sizes == [4, 4]  # uniform prior: neither is futile before any evidence
    sampler.ingest([0] * 4 + [1, 1, 1, 0])
    # prompt 0: Beta(1, 5), 4 draws left: P(>= 2 positives) ~ 0.18 < 0.2; prompt 1: Beta(4, 2), needs 1 negative
    assert sampler.stopped == [True, False]
    assert sampler.plan_round() == [1]


def test_budget_fills_every_group_first_then_paces_the_rest_over_the_rounds_left():
    sampler = _est(2, max_rounds=3, sample_budget=6)  # 12 completions for the step
    assert sampler.plan_round() == [0, 1] and sampler.plan_sizes == [4, 4]  # nothing known: only the groups
    sampler.ingest([1, 0, 1, 0] + [0, 0, 0, 0])
    assert sampler.plan_round() == [1] and sampler.plan_sizes == [2]  # 4 left over 2 rounds
    sampler.ingest([0, 0])
    assert not sampler.done
    assert sampler.plan_round() == [1] and sampler.plan_sizes == [2]  # the rest in the last round
    sampler.ingest([0, 0])
    assert sampler.done and sampler.samples_drawn == 12
    assert sampler.statistics().estimation.budget_used == 1.0


def test_budget_of_n_is_grpo_sampling():
    sampler = simulate_step(SimulatedPolicy([0.0, 0.3, 0.9, 1.0], seed=0), sample_budget=4, num_generations=4)
    assert sampler.round == 1 and [len(pool) for pool in sampler.pools] == [4, 4, 4, 4]


def test_budget_goes_where_a_mixed_group_is_most_likely():
    sampler = _est(3, max_rounds=2, sample_budget=5, prior_beta=[3.0, 1.0, 1.0])  # 15 completions
    sampler.plan_round()
    sampler.ingest([1, 1, 1, 1] + [0, 0, 0, 0] + [1, 0, 0, 0])
    # posteriors Beta(5, 3), Beta(1, 5); prompt 2 is mixed already. Marginal chances of a first negative for
    # prompt 0: 3/8, then 5/8 - 30/72 ~ .21, then ~.125; of a first positive for prompt 1: 1/6.
    assert sampler.plan_round() == [0, 1]
    assert sampler.plan_sizes == [2, 1]


def test_budget_spent_ends_the_step():
    sampler = _est(2, max_rounds=4, sample_budget=4.5)  # 9 completions: 8 fill the groups, 1 left
    sampler.plan_round()
    sampler.ingest([0] * 8)
    sizes = []
    while not sampler.done:
        sampler.plan_round()
        sizes.append(sampler.plan_sizes)
        sampler.ingest([0] * sum(sampler.plan_sizes))
    assert sizes == [[1]] and sampler.samples_drawn == 9 and sampler.round == 2  # no empty round


def test_estimation_statistics_report_hits_and_first_round_calibration():
    sampler = _est(2, samples_per_round=4, max_rounds=1, prior_alpha=[3.0, 1.0], memory_hits=[True, False])
    sampler.plan_round()
    sampler.ingest([1, 0, 0, 0, 1, 1, 1, 1])
    est = sampler.statistics().estimation
    assert est.memory_hit_fraction == 0.5 and est.futile_fraction == 0.0
    assert est.predicted_pass_rate == 0.75 and est.realized_pass_rate == 0.25 and est.calibration_error == 0.5
    assert math.isnan(est.budget_used)
    metrics = sampler.statistics().as_metrics(prefix="x/")
    assert metrics["x/est/memory_hit_fraction"] == 0.5 and metrics["x/est/calibration_error"] == 0.5


def test_default_sampler_reports_no_estimation_metrics():
    sampler = simulate_step(SimulatedPolicy([0.5, 0.1], seed=0))
    assert sampler.statistics().estimation is None
    assert not any(key.startswith("est/") for key in sampler.statistics().as_metrics())


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"sample_budget": 3}, ["sample_budget=3", ">= num_generations=4", "or None"]),
        ({"sample_budget": math.inf}, ["sample_budget=inf"]),
        ({"futility_threshold": 1.0}, ["futility_threshold=1.0", "[0, 1)", "e.g. futility_threshold=0.0"]),
        ({"futility_threshold": -0.1}, ["futility_threshold=-0.1"]),
        ({"first_round": "posterior"}, ["first_round='posterior'", "['fixed', 'prior']"]),
        ({"later_rounds": "big"}, ["later_rounds='big'"]),
        ({"round_confidence": 1.0}, ["round_confidence=1.0", "(0, 1)"]),
        (
            {"sampling": "grpo", "samples_per_round": 4, "max_rounds": 1, "sample_budget": 8},
            ["samples_per_round=4", "'grpo'", "Remove samples_per_round"],
        ),
        ({"sampling": "grpo"}, ["samples_per_round=8", "(set by sampling='grpo')", "Remove samples_per_round"]),
        ({"prior_alpha": [1.0]}, ["prior_alpha must hold one positive number per prompt (2)"]),
        ({"prior_beta": [1.0, 0.0]}, ["prior_beta must hold one positive number per prompt"]),
        ({"memory_hits": [True]}, ["memory_hits must hold one flag per prompt (2)"]),
    ],
)
def test_bad_estimation_options_name_the_option_and_value(kwargs, fragments):
    with pytest.raises(ValueError) as error:
        _est(2, **kwargs)
    for fragment in fragments:
        assert fragment in str(error.value)


@st.composite
def estimation_steps(draw):
    n = draw(st.integers(2, 6))
    m = draw(st.integers(-(-n // 4), 8))
    rounds = draw(st.integers(-(-n // m), 4))
    b = draw(st.integers(1, 10))
    budget = draw(st.one_of(st.none(), st.floats(n, m * rounds + 2)))
    return {
        "pass_rates": draw(st.lists(st.sampled_from([0.0, 0.02, 0.3, 0.5, 0.9, 1.0]), min_size=b, max_size=b)),
        "seed": draw(st.integers(0, 1000)),
        "num_generations": n,
        "samples_per_round": m,
        "max_rounds": rounds,
        "exit_rule": draw(st.sampled_from(["balance", "pos"])),
        "first_round": draw(st.sampled_from(["fixed", "prior"])),
        "later_rounds": draw(st.sampled_from(["fixed", "prior"])),
        "round_confidence": draw(st.sampled_from([0.3, 0.5, 0.9])),
        "futility_threshold": draw(st.sampled_from([0.0, 0.05, 0.5])),
        "sample_budget": budget,
        "prior_alpha": draw(st.lists(st.floats(0.05, 30.0), min_size=b, max_size=b)),
        "prior_beta": draw(st.lists(st.floats(0.05, 30.0), min_size=b, max_size=b)),
        "memory_hits": draw(st.lists(st.booleans(), min_size=b, max_size=b)),
    }


@settings(max_examples=150, deadline=None)
@given(estimation_steps())
def test_estimation_keeps_every_invariant(step):
    plans = []
    original = AdaptiveSampler.plan_round

    def recording_plan_round(self):
        active_before = self.active
        plan = original(self)
        plans.append((active_before, plan, self.plan_sizes, [len(pool) for pool in self.pools]))
        return plan

    kwargs = {key: value for key, value in step.items() if key not in ("pass_rates", "seed")}
    with patch.object(AdaptiveSampler, "plan_round", autospec=True, side_effect=recording_plan_round):
        sampler = simulate_step(SimulatedPolicy(step["pass_rates"], seed=step["seed"]), **kwargs)
    n, b, cap = step["num_generations"], len(step["pass_rates"]), sampler.cap
    rule = get_exit_rule(step["exit_rule"])

    assert sampler.done and 1 <= sampler.round <= step["max_rounds"] and len(plans) == sampler.round
    for active_before, plan, sizes, pool_sizes in plans:
        assert plan and set(plan) <= set(active_before) and len(sizes) == len(plan) and all(s >= 1 for s in sizes)
        assert all(pool_sizes[p] + s <= cap for p, s in zip(plan, sizes, strict=True))
    sizes = [len(pool) for pool in sampler.pools]
    assert all(n <= size <= cap for size in sizes)  # every group can be filled, never beyond M x N
    if step["sample_budget"] is not None:
        assert sum(sizes) <= math.floor(step["sample_budget"] * b)
    if step["first_round"] == "prior":
        assert all(n <= size <= cap for size in sampler.first_round_sizes)
    for p in range(b):
        positives, negatives = sampler.counts(p)
        if sampler.exit_round[p] is not None:
            assert rule.is_met(positives, negatives, n) and not sampler.stopped[p]
        if sampler.stopped[p]:
            assert step["futility_threshold"] > 0 and sizes[p] >= n and sampler.exit_round[p] is None
    unresolved = [p for p in range(b) if sampler.exit_round[p] is None and not sampler.stopped[p]]
    if unresolved:  # a prompt left active means the step ran out of rounds or budget, or its cap is spent
        spent = step["sample_budget"] is not None and sum(sizes) >= math.floor(step["sample_budget"] * b)
        assert sampler.round == step["max_rounds"] or spent or all(sizes[p] == cap for p in unresolved)
    groups = sampler.select_groups()
    assert all(len(group) == n == len(set(group)) for group in groups)
    assert sampler.statistics().samples == sum(sizes)


def test_a_prompt_at_its_cap_ends_the_step_without_empty_rounds():
    sampler = _est(1, first_round="prior", prior_alpha=[1.0], prior_beta=[99.0], memory_hits=[True])
    sampler.plan_round()
    assert sampler.plan_sizes == [32]  # the whole cap M·N in round 1
    sampler.ingest([0.0] * 32)
    assert sampler.done and sampler.round == 1 and sampler.exit_round == [None]


def test_estimation_metrics_leave_out_what_does_not_apply_and_warn_about_nothing():
    import warnings

    from trl_ada.candidates import RefillSampler

    # Remembered candidates 2 and 3 are never sampled (the batch keeps 2), and no budget is set.
    sampler = RefillSampler(
        4, num_kept=2, num_generations=2, samples_per_round=2, max_rounds=1, memory_hits=[True, False, True, True]
    )
    sampler.plan_round()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Mean of empty slice" would fail here
        sampler.ingest([1.0, 0.0, 1.0, 1.0])
        metrics = sampler.metrics(prefix="reinforce_ada/")
    assert "reinforce_ada/est/budget_used" not in metrics
    assert metrics["reinforce_ada/est/realized_pass_rate"] == 0.5  # candidate 0 only: the others were not sampled
    assert metrics["reinforce_ada/est/predicted_pass_rate"] == 0.5
    assert all(value == value for value in metrics.values())  # no NaN anywhere


def test_estimation_metrics_without_a_memory_hit_leave_out_the_calibration():
    sampler = AdaptiveSampler(2, num_generations=2, samples_per_round=2, max_rounds=1, sample_budget=2)
    sampler.plan_round()
    sampler.ingest([1.0, 0.0, 0.0, 0.0])
    metrics = sampler.metrics()
    assert metrics["est/budget_used"] == 1.0
    assert not {"est/predicted_pass_rate", "est/realized_pass_rate", "est/calibration_error"} & metrics.keys()
