"""Refill slots and the refill budget: which candidates hold a slot, when a free slot is refilled, and what the
budget still owes to the candidates already admitted. Torch-free; every scenario is scripted and hand-checked."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DAPO, run_scripted
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import names

from trl_ada.candidates import (
    MAX_SKIP_UNSOLVABLE_DRAWS,
    Candidates,
    RefillSampler,
    all_wrong_probability,
    num_candidates,
    skip_before_rollout,
)
from trl_ada.plan import SamplingPlan
from trl_ada.simulation import SimulatedPolicy


def test_a_candidate_stopped_as_futile_frees_its_slot():
    # B=1, n=2, M=2, two rounds per candidate (cap 4), balance. Candidate 0 draws 0, 0: one positive is still
    # needed, and P(a positive in the 2 draws left | Beta(1, 3)) = 1 - 3/5 = 0.4 < 0.5, so it stops as futile
    # with room left under its cap; its slot goes to candidate 1 at once.
    sampler = RefillSampler(
        num_prompts=3,
        num_kept=1,
        num_generations=2,
        samples_per_round=2,
        max_rounds=4,
        rounds_per_prompt=2,
        exit_rule="balance",
        futility_threshold=0.5,
    )
    plans = run_scripted(sampler, {0: [0.0, 0.0, 0.0, 0.0], 1: [1.0, 0.0], 2: [1.0, 0.0]})
    assert sampler.stopped[0] and len(sampler.pools[0]) == 2 < sampler.cap
    assert plans == [[0], [1]]
    assert sampler.kept_prompts() == [1] and sampler.pools[2] == []


def test_a_candidate_that_met_its_rule_keeps_its_slot_even_with_room_left():
    # B=1, pos rule, cap 4: candidate 0 exits with a positive in round 1 and holds the only slot.
    sampler = RefillSampler(
        num_prompts=2, num_kept=1, num_generations=2, samples_per_round=2, max_rounds=3, exit_rule="pos"
    )
    plans = run_scripted(sampler, {0: [1.0, 1.0], 1: [1.0, 0.0]})
    assert plans == [[0]] and sampler.exit_round == [1, None] and sampler.kept_prompts() == [0]
    assert sampler.refill_statistics().consumed == 1


def test_no_refill_when_the_rounds_left_cannot_fill_a_group():
    # n=4, M=2, cap 4, three rounds: candidate 0 reaches its cap without signal after round 2; one round of 2 is left,
    # too few for a new group of 4, so candidate 1 is never admitted.
    sampler = RefillSampler(
        num_prompts=2,
        num_kept=1,
        num_generations=4,
        samples_per_round=2,
        max_rounds=3,
        rounds_per_prompt=2,
        exit_rule="mixed",
    )
    plans = run_scripted(sampler, {0: [0.0] * 4, 1: [1.0, 0.0, 1.0, 0.0]})
    assert plans == [[0], [0]] and sampler.round == 2 and sampler.pools[1] == []
    assert sampler.kept_prompts() == [0]


def test_no_refill_in_the_last_round_even_while_another_candidate_samples_on():
    # B=2, n=4, M=2, cap 6, three rounds, mixed, futility 0.3. After round 2 candidate 0 (4 wrong) stops as futile
    # (2/7 < 0.3) and frees its slot; candidate 1 (2 wrong, 2 unscored: 0.4) samples on in round 3. One round of 2
    # cannot fill a new group of 4, so the free slot stays empty.
    nan = float("nan")
    sampler = RefillSampler(
        num_prompts=3,
        num_kept=2,
        num_generations=4,
        samples_per_round=2,
        max_rounds=3,
        rounds_per_prompt=3,
        exit_rule="mixed",
        futility_threshold=0.3,
    )
    plans = run_scripted(sampler, {0: [0.0] * 6, 1: [0.0, 0.0, nan, nan, 1.0, 0.0], 2: [1.0, 0.0] * 3})
    assert plans == [[0, 1], [0, 1], [1]]
    assert sampler.stopped[0] and sampler.exit_round[1] == 3 and sampler.pools[2] == []
    assert sampler.kept_prompts() == [0, 1]


def test_a_budget_too_small_for_a_new_group_ends_the_step():
    # B=2, n=2, budget 2.5 per kept prompt = 5. Round 1 draws 4, all wrong: two free slots, but 1 completion left
    # cannot pay for a group of 2, so the step ends after one round.
    sampler = RefillSampler(num_prompts=4, num_kept=2, max_rounds=3, sample_budget=2.5, **DAPO)
    plans = run_scripted(sampler, {0: [0.0, 0.0], 1: [0.0, 0.0], 2: [1.0, 0.0], 3: [1.0, 0.0]})
    assert plans == [[0, 1]] and sampler.round == 1 and sampler.done
    assert sampler.samples_drawn == 4 and sampler.kept_prompts() == [0, 1]


def test_refill_never_admits_a_skipped_candidate_after_the_first_round():
    # B=2 of 4, candidate 3 skipped. Both first candidates come back without signal; the two free slots can take
    # only candidate 2: the skipped one stays out (only round 1 falls back on skipped candidates).
    sampler = RefillSampler(num_prompts=4, num_kept=2, max_rounds=3, skipped=[False, False, False, True], **DAPO)
    plans = run_scripted(sampler, {0: [0.0, 0.0], 1: [1.0, 1.0], 2: [1.0, 0.0]})
    assert plans == [[0, 1], [2]] and sampler.pools[3] == [] and not sampler.admitted[3]
    assert sampler.kept_prompts() == [0, 2]  # the effective one, then the first-drawn of the rest
    stats = sampler.refill_statistics()
    assert (stats.skipped, stats.sampled, stats.consumed, stats.exhausted) == (1, 3, 4, True)


def test_a_step_whose_every_candidate_is_skipped_still_trains_on_the_first_ones():
    sampler = RefillSampler(num_prompts=3, num_kept=2, max_rounds=3, skipped=[True, True, True], **DAPO)
    plans = run_scripted(sampler, {0: [0.0, 0.0], 1: [1.0, 1.0], 2: [1.0, 0.0]})
    assert plans == [[0, 1]]  # round 1 falls back on the first skipped candidates; no refill from skipped ones
    assert sampler.kept_prompts() == [0, 1] and sampler.pools[2] == []
    stats = sampler.refill_statistics()
    assert (stats.candidates, stats.skipped, stats.sampled, stats.kept, stats.consumed) == (3, 3, 2, 2, 3)
    assert stats.exhausted is True and stats.effective_kept_fraction == 0.0 and stats.ineffective_kept_fraction == 1.0


def test_refill_statistics_count_hard_prompts_below_a_quarter_in_the_first_round():
    # n=4, M=4, one round each. Candidate 0: 1 of 4 right (exactly 0.25: not hard); 1: 0 of 4 (hard, no signal).
    kwargs = {"num_generations": 4, "samples_per_round": 4, "rounds_per_prompt": 1, "exit_rule": "mixed"}
    sampler = RefillSampler(num_prompts=2, num_kept=2, max_rounds=1, **kwargs)
    run_scripted(sampler, {0: [1.0, 0.0, 0.0, 0.0], 1: [0.0] * 4})
    stats = sampler.refill_statistics()
    assert stats.hard_kept_fraction == 0.5 and stats.effective_kept_fraction == 0.5
    assert stats.samples_per_kept_prompt == 4.0 and stats.exhausted  # candidate 1's slot is free, none is left
    assert stats.as_metrics()["refill/hard_kept_fraction"] == 0.5  # no prefix by default
    metrics = stats.as_metrics("train/")
    assert metrics["train/refill/hard_kept_fraction"] == 0.5 and metrics["train/refill/exhausted"] == 1.0


def test_group_selection_of_a_refill_step_prefers_scored_and_unmasked_samples():
    # n=2, M=4, one round: candidate 0 draws 1, nan, 0, 1 with the first flagged masked. The kept group takes one of
    # each class, scored and unmasked first: pool indices 3 (positive, unmasked) and 2 (negative).
    kwargs = {"num_generations": 2, "samples_per_round": 4, "rounds_per_prompt": 1, "exit_rule": "mixed"}
    sampler = RefillSampler(num_prompts=1, num_kept=1, max_rounds=1, **kwargs)
    sampler.plan_round()
    sampler.ingest([1.0, float("nan"), 0.0, 1.0], masked=[True, False, False, False])
    assert sorted(sampler.select_groups()[0]) == [2, 3]
    assert sorted(sampler.kept_rewards()[0].tolist()) == [0.0, 1.0]


@settings(max_examples=25, deadline=None)
@given(
    rates=st.lists(st.sampled_from([0.0, 0.05, 0.3, 0.9, 1.0]), min_size=4, max_size=16),
    kept=st.integers(1, 6),
    budget=st.sampled_from([4, 5, 6, 8]),
    samples_per_round=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_refill_with_rounds_smaller_than_a_group_stays_within_the_budget(rates, kept, budget, samples_per_round, seed):
    """With M < n an admitted candidate still owes completions for rounds: the refill room must count them."""
    kept = min(kept, len(rates))
    sampler = RefillSampler(
        num_prompts=len(rates),
        num_kept=kept,
        num_generations=4,
        samples_per_round=samples_per_round,
        max_rounds=8,
        rounds_per_prompt=-(-8 // samples_per_round),
        exit_rule="mixed",
        sample_budget=budget,
    )
    policy = SimulatedPolicy(rates, seed=seed)
    while not sampler.done:
        plan = sampler.plan_round()
        sampler.ingest(policy.sample(plan, sampler.plan_sizes))
    assert sampler.samples_drawn <= budget * kept
    assert sampler.kept_rewards().shape == (kept, 4)


def test_refill_room_counts_what_admitted_candidates_still_owe():
    # B=2, n=4, M=2, cap 6, mixed, futility 0.3, budget 8 per kept prompt = 16.
    # Rounds 1-2: 0 and 1 draw 4 each. 0 is all wrong: P(a positive in 2 more | Beta(1, 5)) = 2/7 < 0.3, it stops
    # and frees its slot; 1 has 2 wrong and 2 unscored: P = 1 - 3/5 = 0.4, it goes on. Candidate 2 enters.
    # Round 3: the budget gives 1 one more (wrong: P(positive in 1 | Beta(1, 4)) = 0.2, it stops) and 2 its first 2.
    # Before round 4: 11 drawn, 5 left, but candidate 2 still owes 2 for its group: 3 cannot pay for a new group of
    # 4, so candidate 3 never enters (counting only the 5 left would admit it and spend 17).
    nan = float("nan")
    sampler = RefillSampler(
        num_prompts=5,
        num_kept=2,
        num_generations=4,
        samples_per_round=2,
        max_rounds=8,
        rounds_per_prompt=3,
        exit_rule="mixed",
        futility_threshold=0.3,
        sample_budget=8,
    )
    script = {0: [0.0] * 6, 1: [0.0, 0.0, nan, nan, 0.0, 0.0], 2: [0.0] * 6, 3: [1.0, 0.0] * 3, 4: [1.0, 0.0] * 3}
    plans = run_scripted(sampler, script)
    assert plans == [[0, 1], [0, 1], [1, 2], [2]]
    assert [len(pool) for pool in sampler.pools] == [4, 5, 4, 0, 0] and sampler.samples_drawn == 13 <= 16
    assert sampler.stopped[:3] == [True, True, True] and sampler.kept_prompts() == [0, 1]


REFILL_FIELDS = (
    "prompt_oversampling",
    "skip_threshold",
    "skip_exploration",
    "rounds_per_prompt",
    "skip_unsolvable_draws",
    "skip_max_consecutive",
)
"""`Candidates`' fields in the order the cases below give their values."""


def candidates(*values) -> Candidates:
    """The candidates record of these values (`REFILL_FIELDS` in order; the rest at their defaults)."""
    return Candidates(**dict(zip(REFILL_FIELDS, values, strict=False)))


@pytest.mark.parametrize(
    ("values", "field"),
    [
        (("3",), "prompt_oversampling"),
        ((True,), "prompt_oversampling"),
        ((0.5,), "prompt_oversampling"),
        ((float("inf"),), "prompt_oversampling"),
        ((2.0, 0.0), "skip_threshold"),
        ((2.0, 1.5), "skip_threshold"),
        ((2.0, True), "skip_threshold"),
        ((2.0, "0.9"), "skip_threshold"),
        ((2.0, None, "0.1"), "skip_exploration"),
        ((2.0, None, False), "skip_exploration"),
        ((2.0, None, 1.5), "skip_exploration"),
        ((2.0, None, -0.5), "skip_exploration"),
        ((2.0, None, 0.0, 0), "rounds_per_prompt"),
        ((2.0, None, 0.0, True), "rounds_per_prompt"),
        ((2.0, None, 0.0, 2.0), "rounds_per_prompt"),
        ((2.0, 0.6, 0.0, None, 0), "skip_unsolvable_draws"),
        ((2.0, 0.6, 0.0, None, 64.0), "skip_unsolvable_draws"),
        ((2.0, 0.6, 0.0, None, True), "skip_unsolvable_draws"),
        ((2.0, 0.6, 0.0, None, MAX_SKIP_UNSOLVABLE_DRAWS + 1), "skip_unsolvable_draws"),
        ((2.0, 0.6, 0.0, None, 64, 0), "skip_max_consecutive"),
        ((2.0, 0.6, 0.0, None, 64, None), "skip_max_consecutive"),
        ((2.0, 0.6, 0.0, None, 64, 2.5), "skip_max_consecutive"),
    ],
)
def test_an_impossible_candidate_plan_is_refused_with_field_value_and_a_fix_that_works(values, field):
    """One line naming the field and its value; the example it offers (the field's default) is accepted."""
    with pytest.raises(ValueError) as refused:
        candidates(*values)
    message = str(refused.value)
    value = values[REFILL_FIELDS.index(field)]
    assert message.startswith(f"{field}={value!r}: ") and "\n" not in message
    fixed = list(values)
    fixed[REFILL_FIELDS.index(field)] = getattr(Candidates(), field)
    if fixed[REFILL_FIELDS.index(field)] is None:  # None turns the option off: the example is a number
        fixed[REFILL_FIELDS.index(field)] = 0.9 if field == "skip_threshold" else 1
    assert candidates(*fixed)


@pytest.mark.parametrize(
    "values", [(1.0, None, 0.0, None), (1.0, 1.0, 1.0, 1), (3, 1, 0, 7), (2.5, 0.001, 0.0, None), (1.0, 0.5, 0.05, 3)]
)
def test_a_possible_candidate_plan_is_accepted(values):
    assert candidates(*values, 64, 4) and candidates(*values, None, 1)


def test_skip_unsolvable_draws_accepts_1_to_its_maximum():
    for draws in (1, MAX_SKIP_UNSOLVABLE_DRAWS):
        assert candidates(2.0, 0.9, 0.0, None, draws).skip_unsolvable_draws == draws


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"num_kept": 0}, ["num_kept=0", "an integer in [1, num_prompts=3]"]),
        ({"num_kept": 4}, ["num_kept=4", "an integer in [1, num_prompts=3]"]),
        ({"num_kept": True}, ["num_kept=True", "an integer in [1, num_prompts=3]"]),
        ({"num_kept": 2.0}, ["num_kept=2.0", "an integer in [1, num_prompts=3]"]),
        ({"skipped": [False]}, ["skipped has 1 flags", "one per candidate (3)"]),
        ({"rounds_per_prompt": 0}, ["rounds_per_prompt=0", "[1, inf)", "(e.g. rounds_per_prompt=1)"]),
        (
            {"rounds_per_prompt": 1, "samples_per_round": 2},
            ["samples_per_round * rounds_per_prompt = 2 * 1", "num_generations=4", "Raise rounds_per_prompt"],
        ),
    ],
)
def test_a_bad_refill_sampler_is_refused_with_the_reason(kwargs, fragments):
    with pytest.raises(ValueError) as refused:
        RefillSampler(**{"num_prompts": 3, "num_generations": 4, "samples_per_round": 4, "max_rounds": 4, **kwargs})
    names(str(refused.value), *fragments)


def test_a_candidates_cap_is_rounds_per_prompt_rounds_and_defaults_to_max_rounds():
    kwargs = {"num_prompts": 2, "num_generations": 2, "samples_per_round": 2, "max_rounds": 3}
    assert RefillSampler(**kwargs).cap == 6 and RefillSampler(**kwargs, rounds_per_prompt=1).cap == 2
    assert RefillSampler(**kwargs, rounds_per_prompt=2).cap == 4
    assert RefillSampler(**kwargs, num_kept=1).num_kept == 1 and RefillSampler(**kwargs).num_kept == 2


def test_finished_or_unfinished_sampling_says_why():
    sampler = RefillSampler(num_prompts=2, num_kept=1, max_rounds=1, **DAPO)
    with pytest.raises(RuntimeError) as refused:
        sampler.kept_prompts()
    assert "once sampling is done" in str(refused.value)
    run_scripted(sampler, {0: [1.0, 0.0]})
    with pytest.raises(RuntimeError) as refused:
        sampler.plan_round()
    names(str(refused.value), "Sampling is finished", "max_rounds")


def test_num_candidates_rounds_away_float_noise_only():
    assert num_candidates(3, 1.0000000001) == 3  # 3.0000000003: float noise below 1e-9 is rounded away
    assert num_candidates(3, 1.00000001) == 4  # 3.00000003: a real excess is one more candidate
    assert num_candidates(7, 1.0) == 7 and num_candidates(7, 0.5) == 7


def test_skip_threshold_exploration_and_streak_are_inclusive_bounds():
    # Beta(1, 1), n = 2: P(both right) = 1/3 (the all-wrong side is judged on skip_unsolvable_draws, off here).
    alpha, beta, hits = np.ones(4), np.ones(4), [1, 1, 0, 1]
    uniforms, streaks = np.array([0.25, 0.5, 0.9, 0.5]), np.array([0, 1, 0, 2])
    plan = SamplingPlan.from_fields(
        num_generations=2, skip_exploration=0.25, skip_unsolvable_draws=None, skip_max_consecutive=2
    )

    def skip(**changes):
        return skip_before_rollout(plan.replace(**changes), alpha, beta, hits, streaks, uniforms)

    skipped = skip(skip_threshold=1 / 3)
    assert skipped.dtype == bool and skipped.tolist() == [True, True, False, False]  # u = 0.25 is not below 0.25;
    assert skip(skip_threshold=1 / 3 + 1e-9).tolist() == [False] * 4  # a streak of 2 = skip_max_consecutive: due
    never = skip(skip_threshold=None)
    assert never.dtype == bool and never.tolist() == [False] * 4


def test_an_unsolvable_chance_exactly_at_the_threshold_is_skipped():
    # Beta(1, 2), n = 2: P(both right) = 1/6 is far below the threshold; P(2 more wrong) = 1/2 is at it.
    alpha, beta = np.array([1.0]), np.array([2.0])
    threshold = float(all_wrong_probability(alpha, beta, 2)[0])
    plan = SamplingPlan.from_fields(
        num_generations=2, skip_threshold=threshold, skip_unsolvable_draws=2, skip_exploration=0.0
    )
    assert skip_before_rollout(plan, alpha, beta, [1], [0], [0.5]).tolist() == [True]


def test_a_refill_sampler_takes_a_plan_and_reports_refill_metrics():
    plan = SamplingPlan.from_fields(
        num_generations=2, samples_per_round=2, max_rounds=3, exit_rule="mixed", rounds_per_prompt=1
    )
    sampler = RefillSampler(3, plan, num_kept=1)
    assert sampler.plan is plan and sampler.cap == 2
    plans = run_scripted(sampler, {0: [0.0, 0.0], 1: [1.0, 0.0], 2: [1.0, 0.0]})
    assert plans == [[0], [1]] and sampler.kept_prompts() == [1]
    metrics = sampler.metrics()
    assert metrics["refill/kept"] == 1.0 and metrics["refill/consumed"] == 2.0 and metrics["samples"] == 4.0
    assert sampler.metrics("train/")["train/refill/candidates"] == 3.0
