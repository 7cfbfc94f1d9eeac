"""The sampler's rules, defaults and reported numbers that the behaviour tests leave implicit: the `mixed` rule,
default arguments, exact metric names, statistics of empty or unscored pools, equality at the confidence and futility
thresholds, and `candidates` with unscored or masked samples. Torch-free, hand-computed."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from refusals import names, refusal

from trl_ada import exit_rules
from trl_ada.plan import SamplingPlan
from trl_ada.sampling import (
    AdaptiveSampler,
    QuotaRule,
    aggregate_rewards,
    exit_probability,
    get_exit_rule,
    prior_round_size,
    register_exit_rule,
)


@pytest.mark.parametrize(
    ("positives", "negatives", "met"),
    [(1, 1, True), (3, 1, True), (1, 7, True), (0, 4, False), (4, 0, False), (0, 0, False)],
)
def test_the_mixed_rule_needs_one_positive_and_one_negative(positives, negatives, met):
    rule = get_exit_rule("mixed")
    assert rule.name == "mixed"
    for n in (2, 4, 8):
        assert rule.is_met(positives, negatives, n) is met


def test_the_mixed_rule_exits_a_prompt_once_its_pool_fills_a_group_and_is_mixed():
    # n = 4, M = 2: prompt 0 is mixed after round 1 (2 samples) but exits only with a full group; prompt 1 stays
    # all right; prompt 2 gets its negative in round 3.
    sampler = AdaptiveSampler(num_prompts=3, num_generations=4, samples_per_round=2, max_rounds=4, exit_rule="mixed")
    exits = []
    for rewards in ([1, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1, 0], [1, 1]):
        if sampler.done:
            break
        sampler.plan_round()
        exits.append(sampler.ingest(rewards))
    assert exits == [[], [0], [2], []]
    assert sampler.exit_round == [2, None, 3]
    assert [len(pool) for pool in sampler.pools] == [4, 8, 6]


def test_default_arguments():
    sampler = AdaptiveSampler(num_prompts=2)
    settings = (sampler.num_generations, sampler.samples_per_round, sampler.max_rounds, sampler.positive_threshold)
    assert settings == (4, 8, 4, 0.7) and sampler.exit_rule == "balance" and sampler.cap == 32
    assert (sampler.first_round, sampler.later_rounds, sampler.round_confidence) == ("fixed", "fixed", 0.5)
    assert (sampler.futility_threshold, sampler.sample_budget, sampler.estimating) == (0.0, None, False)
    assert sampler.plan_round() == [0, 1] and sampler.plan_sizes == [8, 8]


def test_a_rule_without_a_name_or_an_is_met_method_is_refused(exit_rule_registry):
    class NoName:
        name = 3

        def is_met(self, num_positive, num_negative, num_generations):
            return True

    class NotCallable:
        name = "not-callable"
        is_met = True

    for rule in (NoName(), NotCallable()):
        with pytest.raises(TypeError) as refused:
            register_exit_rule(rule)
        names(str(refused.value), "`name: str`", "`is_met(pos, neg, n)`", f"got {rule!r}")
    assert sorted(exit_rules._EXIT_RULES) == ["balance", "mixed", "pos"]


def test_metric_names_are_exact_and_unprefixed_by_default():
    sampler = AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=2)
    sampler.plan_round()
    sampler.ingest([1.0, 0.0, 1.0, 1.0])  # prompt 0 exits; prompt 1 all right so far
    sampler.plan_round()
    sampler.ingest([1.0, 1.0])
    metrics = sampler.statistics().as_metrics()
    assert metrics == {
        "samples": 6.0,
        "samples_per_prompt": 3.0,
        "rounds": 2.0,
        "exited_fraction": 0.5,
        "unresolved_fraction": 0.5,
        "unresolved_all_positive_fraction": 0.5,
        "unresolved_all_negative_fraction": 0.0,
        "unresolved_mixed_fraction": 0.0,
        "pool_pass_rate": 5 / 6,
        "first_round_reward": 0.75,
        "mixed_group_fraction": 0.5,
        "exit_fraction/round_1": 0.5,
        "exit_fraction/round_2": 0.0,
    }


def test_statistics_before_any_sample():
    stats = AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=3).statistics()
    assert (stats.samples, stats.samples_per_prompt, stats.rounds) == (0, 0.0, 0)
    assert stats.exit_fraction_per_round == (0.0, 0.0, 0.0) and stats.exited_fraction == 0.0
    assert stats.unresolved_fraction == 1.0 and stats.pool_pass_rate == 0.0  # no scored sample: 0 of at least 1
    assert math.isnan(stats.first_round_reward) and math.isnan(stats.mixed_group_fraction)  # nothing kept yet


def test_statistics_of_a_pool_no_function_scored():
    nan = float("nan")
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=2)
    sampler.plan_round()
    assert sampler.ingest([nan, nan]) == [0]  # more samples cannot help
    stats = sampler.statistics()
    assert math.isnan(stats.first_round_reward) and stats.pool_pass_rate == 0.0
    assert stats.mixed_group_fraction == 0.0 and stats.exited_fraction == 1.0


def test_first_round_pass_rate_is_strictly_above_the_threshold_and_nan_without_scores():
    # memory hits on both prompts; first rounds 0.7, 0.7, 1, 0 (0.7 is not above 0.7: 1 of 4) and nan, nan.
    nan = float("nan")
    sampler = AdaptiveSampler(
        num_prompts=2,
        num_generations=4,
        samples_per_round=4,
        max_rounds=1,
        prior_alpha=[1.0, 3.0],
        prior_beta=[3.0, 1.0],
        memory_hits=[True, True],
    )
    sampler.plan_round()
    sampler.ingest([0.7, 0.7, 1.0, 0.0, nan, nan, nan, nan])
    est = sampler.statistics().estimation
    assert est.memory_hit_fraction == 1.0 and est.predicted_pass_rate == 0.5
    assert est.realized_pass_rate == 0.25  # prompt 1 has no scored first round: left out of the mean
    assert est.calibration_error == 0.0  # |0.25 - 0.25| for prompt 0, prompt 1 left out
    assert math.isnan(est.budget_used)


def test_estimation_statistics_without_memory_hits_are_nan():
    sampler = AdaptiveSampler(
        num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=1, futility_threshold=0.1, sample_budget=3
    )
    sampler.plan_round()
    sampler.ingest([1.0, 0.0, 1.0, 0.0])
    est = sampler.statistics().estimation
    assert est.memory_hit_fraction == 0.0 and est.budget_used == 4 / 6
    assert math.isnan(est.predicted_pass_rate) and math.isnan(est.realized_pass_rate)
    assert math.isnan(est.calibration_error)


def test_a_round_size_whose_probability_equals_the_confidence_is_enough():
    probability = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    assert prior_round_size(probability, 1, 4, 0.5) == 2
    assert prior_round_size(probability, 3, 4, 0.5) == 3
    assert prior_round_size(probability, 1, 3, 0.9) == 3  # none reaches it: the largest allowed


def test_a_chance_exactly_at_the_futility_threshold_is_not_futile_in_rounds():
    # n = 2, M = 2, cap 4, balance: after 0, 0 the chance of a positive in the 2 left is 0.4 (Beta(1, 3)).
    at = exit_probability(get_exit_rule("balance"), 2, np.array([1.0]), np.array([3.0]), [0], [2], 4)[0, 2]
    sampler = AdaptiveSampler(
        num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=2, futility_threshold=float(at)
    )
    sampler.plan_round()
    sampler.ingest([0.0, 0.0])
    assert sampler.stopped == [False] and sampler.active == [0] and not sampler.done
    below = AdaptiveSampler(
        num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=2, futility_threshold=float(at) + 1e-9
    )
    below.plan_round()
    below.ingest([0.0, 0.0])
    assert below.stopped == [True] and below.done


def test_candidates_skip_unscored_and_masked_samples_beyond_the_first_n():
    nan = float("nan")
    sampler = AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=5, max_rounds=1)
    sampler.plan_round()
    sampler.ingest([nan, nan, nan, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0], masked=[False] * 5 + [True] + [False] * 4)
    assert sampler.candidates(0) == [0, 1, 3, 4]  # unscored are their own class: the first two of it
    assert sampler.candidates(1) == [1, 2, 3, 4]  # its masked first positive comes after the unmasked 1 and 2


def test_aggregate_rewards_refusal_names_the_expected_shape():
    refused = refusal(aggregate_rewards, np.zeros((3, 2)), [1.0, 1.0, 1.0])
    names(refused, "rewards_per_func", "shape (3, 2)", "(num_completions, 3)")
    nan = float("nan")
    rewards = aggregate_rewards([[1, nan], [nan, nan], [0, 2]], [2, 0.5])
    assert rewards[0] == 2.0 and math.isnan(rewards[1]) and rewards[2] == 1.0
    declined = aggregate_rewards([[1, None], [None, None]], [2, 0.5])  # TRL's None: the function declined
    assert declined[0] == 2.0 and math.isnan(declined[1])


def test_an_unknown_rule_without_a_close_name_gets_no_hint():
    refused = refusal(get_exit_rule, "zzzzzz")
    names(refused, "exit_rule='zzzzzz'", "['balance', 'mixed', 'pos']")
    assert "Did you mean" not in refused


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"num_generations": 1}, ["num_generations=1", ">= 2"]),
        ({"positive_threshold": float("inf")}, ["positive_threshold=inf", "finite"]),
        ({"round_confidence": 0.0}, ["round_confidence=0.0", "(0, 1)"]),
        ({"futility_threshold": 1.0}, ["futility_threshold=1.0", "[0, 1)"]),
    ],
)
def test_impossible_settings_name_the_field_and_the_valid_range(kwargs, fragments):
    with pytest.raises(ValueError) as refused:
        AdaptiveSampler(num_prompts=1, **kwargs)
    assert all(fragment in str(refused.value) for fragment in fragments)


@pytest.mark.parametrize(
    "kwargs",
    [{"first_round": "prior"}, {"later_rounds": "prior"}, {"futility_threshold": 0.5}, {"sample_budget": 8.0}],
)
def test_estimation_options_are_refused_under_plain_grpo(kwargs):
    ((name, value),) = kwargs.items()
    with pytest.raises(ValueError) as refused:
        AdaptiveSampler(num_prompts=1, sampling="grpo", **kwargs)
    assert f"{name}={value!r}" in str(refused.value) and f"Remove {name}" in str(refused.value)
    assert AdaptiveSampler(num_prompts=1, sampling="grpo").samples_per_round == 4  # the fix, followed
    assert AdaptiveSampler(num_prompts=1, exit_rule="balance", **kwargs).estimating


@pytest.mark.parametrize("kwargs", [{"first_round": "prior"}, {"later_rounds": "prior"}])
def test_either_prior_sizing_alone_turns_the_estimation_statistics_on(kwargs):
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=1, **kwargs)
    assert sampler.estimating
    sampler.plan_round()
    sampler.ingest([1.0, 0.0])
    assert sampler.statistics().estimation is not None


def test_rewards_of_a_round_may_come_as_a_prompt_by_sample_table():
    sampler = AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=1)
    assert sampler.plan_sizes == []  # nothing planned yet
    sampler.plan_round()
    assert sampler.ingest(np.array([[1.0, 0.0], [1.0, 1.0]])) == [0]
    assert sampler.pools == [[1.0, 0.0], [1.0, 1.0]] and sampler.masked == [[False, False], [False, False]]


def test_bad_rewards_and_calls_out_of_order_get_the_exact_reason():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=1)
    with pytest.raises(RuntimeError) as refused:
        sampler.ingest([1.0, 0.0])
    assert str(refused.value) == "Call plan_round() before ingest()."
    with pytest.raises(RuntimeError) as refused:
        sampler.select_groups()
    assert "once sampling is done" in str(refused.value)
    sampler.plan_round()
    names(refusal(sampler.ingest, [1.0]), "rewards has 1 values", "expected 2", "samples_per_round")
    names(refusal(sampler.ingest, [1.0, -float("inf")]), "rewards[1] = -inf", "or NaN")
    sampler.ingest([1.0, 0.0])
    with pytest.raises(RuntimeError) as refused:
        sampler.plan_round()
    names(str(refused.value), "Sampling is finished", "max_rounds")


def test_a_prior_sized_later_round_may_ask_for_a_single_completion():
    # n = 2, balance, cap 12: round 1 draws 0, 0, 0, 0. A positive in 1 more draw has chance 1/6 under Beta(1, 5),
    # which meets a round_confidence of 0.15: the second round asks for 1 completion, not 2.
    sampler = AdaptiveSampler(
        num_prompts=1,
        num_generations=2,
        samples_per_round=4,
        max_rounds=3,
        later_rounds="prior",
        round_confidence=0.15,
    )
    sampler.plan_round()
    sampler.ingest([0.0] * 4)
    assert sampler.plan_round() == [0] and sampler.plan_sizes == [1]


def test_unresolved_counts_need_a_scored_sample():
    # n = 2, one round: prompt 0 has one scored positive and one unscored sample (unresolved, all positive);
    # prompt 1 has one scored negative; prompt 2 nothing scored (it exits: no function can score it).
    nan = float("nan")
    sampler = AdaptiveSampler(num_prompts=3, num_generations=2, samples_per_round=2, max_rounds=1)
    sampler.plan_round()
    sampler.ingest([1.0, nan, 0.0, nan, nan, nan])
    stats = sampler.statistics()
    assert sampler.exit_round == [None, None, 1]
    assert stats.unresolved_all_positive_fraction == pytest.approx(1 / 3)
    assert stats.unresolved_all_negative_fraction == pytest.approx(1 / 3)
    assert stats.unresolved_mixed_fraction == 0.0
    empty = AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=1).statistics()
    assert empty.unresolved_all_positive_fraction == 0.0 and empty.unresolved_all_negative_fraction == 0.0


def test_exit_probability_refuses_counts_of_different_lengths():
    rule = get_exit_rule("balance")
    ones = np.ones(1)
    assert exit_probability(rule, 2, ones, ones, [0], [0], 4).shape == (1, 5)
    with pytest.raises(ValueError):
        exit_probability(rule, 2, ones, ones, [0, 1], [0], 4)  # one prompt's negatives are missing


def test_an_unknown_attribute_names_the_class_and_the_attribute():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=1)
    assert sampler.positive_threshold == 0.7  # a plan field, read through the sampler
    with pytest.raises(AttributeError) as refused:
        sampler.no_such_field  # noqa: B018
    names(str(refused.value), "'AdaptiveSampler'", "'no_such_field'")


def test_add_sample_appends_one_unmasked_completion_and_exits_in_round_one_by_default():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=2, max_rounds=2)
    assert sampler.add_sample(0, 1.0) is False
    assert sampler.add_sample(0, 0.0) is True
    assert sampler.pools == [[1.0, 0.0]] and sampler.masked == [[False, False]] and sampler.exit_round == [1]
    with pytest.raises(RuntimeError) as refused:
        sampler.add_sample(0, 1.0)
    names(str(refused.value), "Prompt 0 ", "left sampling")


def test_kept_prompts_wait_for_the_end_of_sampling():
    sampler = AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=1)
    with pytest.raises(RuntimeError) as refused:
        sampler.kept_prompts()
    assert "once sampling is done" in str(refused.value)
    sampler.plan_round()
    sampler.ingest([1.0, 0.0, 0.0, 0.0])
    assert sampler.kept_prompts() == [0, 1]


def test_statistics_without_hits_or_scores_do_not_warn():
    """Numbers that do not apply are NaN (or left out of the metrics) without numpy's "Mean of empty slice"."""
    nan = float("nan")
    sampler = AdaptiveSampler(
        num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=1, futility_threshold=0.1, sample_budget=2
    )
    sampler.plan_round()
    sampler.ingest([nan, nan, nan, nan])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = sampler.statistics()
        metrics = stats.as_metrics()
    assert math.isnan(stats.first_round_reward) and stats.estimation.memory_hit_fraction == 0.0
    assert math.isnan(stats.estimation.predicted_pass_rate) and math.isnan(stats.estimation.calibration_error)
    assert "first_round_reward" in metrics


@pytest.mark.parametrize("num_prompts", [0, True, 2.0, "2"])
def test_a_step_needs_an_integer_number_of_prompts(num_prompts):
    names(refusal(AdaptiveSampler, num_prompts=num_prompts), f"num_prompts={num_prompts!r}", "at least one prompt")


def test_fields_given_with_a_plan_replace_its_fields():
    plan = SamplingPlan.from_fields(num_generations=2, samples_per_round=2, max_rounds=3)
    sampler = AdaptiveSampler(2, plan, max_rounds=1)
    assert sampler.plan == plan.replace(max_rounds=1) and sampler.max_rounds == 1 and plan.section.max_rounds == 3
    assert AdaptiveSampler(2, plan).plan is plan


def test_a_chance_exactly_at_the_futility_threshold_gets_a_full_round():
    # n = 2, M = 4, cap 8, balance, a remembered prior Beta(1, 9). Before any sample the chance to meet the rule
    # within the cap is computed from the prior; at exactly that threshold the prompt is not futile and asks for M.
    alpha, beta = np.array([1.0]), np.array([9.0])
    at = float(exit_probability(get_exit_rule("balance"), 2, alpha, beta, [0], [0], 8)[0, 8])
    kwargs = {"num_generations": 2, "samples_per_round": 4, "max_rounds": 2, "prior_alpha": alpha, "prior_beta": beta}
    sampler = AdaptiveSampler(num_prompts=1, futility_threshold=at, memory_hits=[True], **kwargs)
    sampler.plan_round()
    assert sampler.plan_sizes == [4]
    futile = AdaptiveSampler(num_prompts=1, futility_threshold=at + 1e-9, memory_hits=[True], **kwargs)
    futile.plan_round()
    assert futile.plan_sizes == [2]  # a futile prompt only fills its group


def test_a_none_reward_is_an_unscored_sample():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=2, samples_per_round=3, max_rounds=1)
    sampler.plan_round()
    sampler.ingest([1.0, None, 0.0])
    assert (
        math.isnan(sampler.pools[0][1]) and sampler.counts(0) == (1, 1) and sampler.is_scored(0) == [True, False, True]
    )


def test_a_budget_breaks_a_tie_in_mixed_pool_gain_by_the_gain_in_exit_probability(monkeypatch):
    monkeypatch.setitem(exit_rules._EXIT_RULES, "two_pos", QuotaRule("two_pos", lambda n: 2, lambda n: 0))
    # Both pools end round 1 mixed ([1, 0]): one more completion adds no chance of a mixed pool to either (a tie at
    # exactly 0). Under the rule "two positives", the next completion exits prompt 1 with probability 1/2
    # (Beta(1, 1) prior + the pool: Beta(2, 2)) and prompt 0 with 1/4 (Beta(1, 5) + the pool: Beta(2, 6)).
    sampler = AdaptiveSampler(
        2,
        num_generations=2,
        samples_per_round=2,
        max_rounds=2,
        exit_rule="two_pos",
        sample_budget=2.5,  # 5 completions: 2 + 2 fill the groups, 1 is left for round 2
        prior_alpha=[1.0, 1.0],
        prior_beta=[5.0, 1.0],
        memory_hits=[True, True],
    )
    assert sampler.plan_round() == [0, 1] and sampler.plan_sizes == [2, 2]
    sampler.ingest([1.0, 0.0, 1.0, 0.0])
    assert sampler.plan_round() == [1] and sampler.plan_sizes == [1]  # prompt order alone would pick prompt 0
