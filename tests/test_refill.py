"""Candidates beyond the batch: refill, the keep rule, pre-rollout skipping, and their configuration."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DAPO, run_scripted
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ada.candidates import (
    RefillSampler,
    all_right_probability,
    all_wrong_probability,
    num_candidates,
    skip_before_rollout,
)
from trl_ada.memory import PassRateMemory
from trl_ada.plan import SamplingPlan
from trl_ada.sampling import AdaptiveSampler
from trl_ada.schedules.rounds import RefillSchedule, RoundsSchedule
from trl_ada.simulation import SimulatedPolicy, simulate_refill_step


def test_dapo_mode_drops_zero_variance_groups_and_refills_from_the_candidates():
    # B=2 of C=4; one round of n=2 per candidate. Candidate 0 is all right, 2 all wrong: both free their slot.
    sampler = RefillSampler(num_prompts=4, num_kept=2, max_rounds=3, **DAPO)
    plans = run_scripted(sampler, {0: [1, 1], 1: [1, 0], 2: [0, 0], 3: [0, 1]})
    assert plans == [[0, 1], [2], [3]]
    assert sampler.kept_prompts() == [1, 3]
    assert sampler.kept_rewards().tolist() == [[1.0, 0.0], [0.0, 1.0]]
    stats = sampler.refill_statistics()
    assert (stats.candidates, stats.sampled, stats.kept, stats.consumed) == (4, 4, 2, 4)
    assert stats.effective_kept_fraction == 1.0 and stats.samples_per_kept_prompt == 4.0
    assert stats.exhausted is False


def test_candidates_running_out_under_fill_the_batch_in_draw_order_and_say_so():
    sampler = RefillSampler(num_prompts=3, num_kept=2, max_rounds=4, **DAPO)
    plans = run_scripted(sampler, {0: [1, 1], 1: [0, 1], 2: [0, 0]})
    assert plans == [[0, 1], [2]]  # no candidate left for round 3: the step ends early
    assert sampler.kept_prompts() == [0, 1]  # effective 1 first, then the first-drawn of the rest
    stats = sampler.refill_statistics()
    assert stats.ineffective_kept_fraction == 0.5 and stats.exhausted is True


def test_round_cap_limits_refill():
    sampler = RefillSampler(num_prompts=6, num_kept=2, max_rounds=2, **DAPO)
    plans = run_scripted(sampler, {0: [1, 1], 1: [0, 1], 2: [0, 0], 3: [0, 1], 4: [1, 0], 5: [1, 0]})
    assert plans == [[0, 1], [2]]
    assert sampler.kept_prompts() == [0, 1]
    assert sampler.refill_statistics().consumed == 3  # candidates 3-5 were never examined: not consumed
    assert sampler.exhausted is False  # slots are free because of the round cap, not for lack of candidates


def test_a_candidate_that_can_still_sample_holds_its_slot():
    # B=1, balance with n=2 and two rounds per candidate: candidate 1 enters only once 0 has hit its cap (4) without
    # signal; candidate 2 is never needed.
    kwargs = {"num_generations": 2, "samples_per_round": 2, "max_rounds": 4, "rounds_per_prompt": 2}
    sampler = RefillSampler(num_prompts=3, num_kept=1, exit_rule="balance", **kwargs)
    plans = run_scripted(sampler, {0: [0, 0, 0, 0], 1: [1, 0], 2: [1, 0]})
    assert plans == [[0], [0], [1]]
    assert sampler.kept_prompts() == [1]


def test_a_skipped_candidate_gets_no_completion_and_refill_passes_over_it():
    sampler = RefillSampler(num_prompts=4, num_kept=2, max_rounds=3, skipped=[True, False, True, False], **DAPO)
    plans = run_scripted(sampler, {1: [1, 0], 3: [0, 1]})
    assert plans == [[1, 3]]
    assert sampler.pools[0] == [] and sampler.pools[2] == []
    assert sampler.refill_statistics().skipped == 2


def test_too_few_unskipped_candidates_still_fill_the_batch():
    sampler = RefillSampler(num_prompts=3, num_kept=2, max_rounds=1, skipped=[True, True, False], **DAPO)
    plans = run_scripted(sampler, {0: [1, 0], 1: [1, 1], 2: [0, 1]})
    assert plans == [[0, 2]]  # candidate 2, then the first skipped one: the batch keeps B prompts
    assert sampler.kept_prompts() == [0, 2]


def test_without_candidates_it_samples_exactly_as_the_adaptive_sampler():
    rates = np.random.default_rng(0).random(40)
    kwargs = {"num_generations": 4, "samples_per_round": 8, "max_rounds": 4, "exit_rule": "balance"}
    reference, refill = AdaptiveSampler(num_prompts=40, **kwargs), RefillSampler(num_prompts=40, **kwargs)
    for sampler in (reference, refill):
        policy = SimulatedPolicy(rates, seed=3)
        while not sampler.done:
            plan = sampler.plan_round()
            sampler.ingest(policy.sample(plan, sampler.plan_sizes))
    assert refill.pools == reference.pools
    assert refill.select_groups() == reference.select_groups()
    assert refill.kept_prompts() == list(range(40))


def test_budget_counts_the_kept_prompts():
    sampler = RefillSampler(
        num_prompts=8, num_kept=4, num_generations=2, samples_per_round=4, max_rounds=2, sample_budget=3
    )
    assert sampler.budget_total == 12


def test_all_right_and_all_wrong_probabilities_are_the_beta_binomial_ends():
    # Beta(1, 9), 4 draws: P(all wrong) = 9/10 * 10/11 * 11/12 * 12/13 = 9/13; P(all right) = 1*2*3*4 / (10*11*12*13)
    alpha, beta = np.array([1.0, 2.5]), np.array([9.0, 0.5])
    assert all_wrong_probability(alpha, beta, 4)[0] == pytest.approx(9 / 13)
    assert all_right_probability(alpha, beta, 4)[0] == pytest.approx(24 / 17160)
    assert all_right_probability(alpha, beta, 4)[1] == pytest.approx(2.5 * 3.5 * 4.5 * 5.5 / (3 * 4 * 5 * 6))
    assert all_wrong_probability(alpha, beta, 64)[0] == pytest.approx(9 / 73)  # Beta(1, b): b / (b + draws)
    assert all_right_probability(alpha, beta, 0).tolist() == [1.0, 1.0]


# Hand-built posteriors, n = 4, skip_threshold = 0.6, skip_unsolvable_draws = 64, skip_max_consecutive = 4.
SKIP_PLAN = SamplingPlan.from_fields(num_generations=4, skip_threshold=0.6, skip_exploration=0.05)
POSTERIORS = {  # (alpha, beta): P(4 right), P(4 wrong), P(64 wrong)
    "easy": (9.0, 1.0),  # 9/13 = 0.69 ≥ 0.6: skipped
    "hard": (1.0, 9.0),  # P(4 wrong) = 9/13 = 0.69 (skipped before the fix), P(64 wrong) = 9/73: sampled
    "hard, much evidence": (1.0, 94.0),  # P(64 wrong) = 94/158 = 0.595 < 0.6: still sampled
    "unsolvable": (1.0, 97.0),  # P(64 wrong) = 97/161 = 0.602 ≥ 0.6: skipped
    "unknown": (1.0, 1.0),  # P(4 right) = 0.2
}


def _skips(posteriors, hits=None, streaks=None, uniforms=None, plan=SKIP_PLAN):
    alpha, beta = np.array(posteriors).T
    size = len(posteriors)
    hits = np.ones(size, dtype=bool) if hits is None else np.asarray(hits)
    streaks = np.zeros(size, dtype=int) if streaks is None else np.asarray(streaks)
    uniforms = np.full(size, 0.5) if uniforms is None else np.asarray(uniforms)
    return skip_before_rollout(plan, alpha, beta, hits, streaks, uniforms).tolist()


def test_only_easy_or_unsolvable_prompts_are_skipped_never_merely_hard_ones():
    assert _skips(list(POSTERIORS.values())) == [True, False, False, True, False]
    easy_only = SKIP_PLAN.replace(skip_unsolvable_draws=None)
    assert _skips(list(POSTERIORS.values()), plan=easy_only) == [True, False, False, False, False]


def test_a_skip_needs_a_memory_hit_no_exploration_draw_and_a_streak_below_the_limit():
    easy, unsolvable = POSTERIORS["easy"], POSTERIORS["unsolvable"]
    assert _skips([easy, unsolvable], hits=[False, False]) == [False, False]
    assert _skips([easy, unsolvable], uniforms=[0.049, 0.05]) == [False, True]  # explored below 0.05
    assert _skips([easy, unsolvable] * 2, streaks=[3, 3, 4, 9]) == [True, True, False, False]  # revisit due at 4
    assert _skips([easy], plan=SKIP_PLAN.replace(skip_threshold=None)) == [False]


def test_an_unsolvable_prompt_is_skipped_only_after_the_evidence_and_revisited_after_the_streak():
    # decay 1, balance M=8 N=4: a p = 0 prompt draws 32 wrong per visit, Beta(1, 1 + 32 v) after v visits, and
    # P(64 wrong) = (1 + 32 v) / (65 + 32 v) = 0.34, 0.50, 0.60 after 1, 2, 3 visits: skipped from the 4th turn on,
    # 4 times in a row (skip_max_consecutive), sampled at the 5th, then skipped again.
    memory = PassRateMemory(decay=1.0)
    plan = SamplingPlan.from_fields(
        num_generations=4, samples_per_round=8, max_rounds=4, skip_threshold=0.6, skip_exploration=0
    )
    turns = []
    for step in range(9):
        sampler = simulate_refill_step(SimulatedPolicy([0.0, 0.5], seed=step), 1, memory, [0, 1], plan)
        turns.append(sampler.skipped[0])
        assert sampler.skipped_prompts() == ([0] if sampler.skipped[0] else [])
    assert turns == [False, False, False, True, True, True, True, False, True]
    assert memory.visits([1]).tolist() == [4] and memory.skip_streaks([1]).tolist() == [1]


def test_a_skipped_prompt_admitted_to_fill_round_one_was_visited_not_skipped():
    # Three easy prompts (p = 0.9), one kept per step, skip above 0.3: each is skipped once the memory has seen it.
    # At step 4 all three are skipped, so round 1 admits prompt 0 anyway to fill the batch: it is sampled, so its
    # skip streak restarts (0), while prompts 1 and 2, skipped and never sampled, count one more skip each.
    memory = PassRateMemory(decay=1.0)
    plan = SamplingPlan.from_fields(
        num_generations=2, exit_rule="pos", samples_per_round=4, max_rounds=1, skip_threshold=0.3, skip_exploration=0
    )
    for step in range(4):
        sampler = simulate_refill_step(SimulatedPolicy([0.9] * 3, seed=step), 1, memory, None, plan)
    assert sampler.skipped == [True, True, True] and sampler.admitted == [True, False, False]
    assert sampler.skipped_prompts() == [1, 2]
    assert memory.skip_streaks(np.arange(3) + 1).tolist() == [0, 2, 1]


@settings(max_examples=30, deadline=None)
@given(
    rates=st.lists(st.sampled_from([0.0, 0.02, 0.3, 0.98, 1.0]), min_size=3, max_size=10),
    limit=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_no_prompt_is_skipped_more_than_skip_max_consecutive_times_in_a_row(rates, limit, seed):
    memory = PassRateMemory(decay=1.0)
    plan = SamplingPlan.from_fields(
        num_generations=2,
        exit_rule="mixed",
        samples_per_round=4,
        max_rounds=2,
        skip_threshold=0.5,
        skip_exploration=0.0,
        skip_unsolvable_draws=4,
        skip_max_consecutive=limit,
    )
    streak = np.zeros(len(rates), dtype=int)
    for step in range(8):
        sampler = simulate_refill_step(SimulatedPolicy(rates, seed=seed + step), 1, memory, None, plan)
        skipped = np.isin(np.arange(len(rates)), sampler.skipped_prompts())
        streak = np.where(skipped, streak + 1, np.where([bool(pool) for pool in sampler.pools], 0, streak))
        assert streak.max() <= limit
        np.testing.assert_array_equal(memory.skip_streaks(np.arange(len(rates)) + 1), streak)


def test_num_candidates():
    assert num_candidates(256, 1.0) == 256
    assert num_candidates(256, 3.0) == 768
    assert num_candidates(3, 1.5) == 5
    assert num_candidates(10, 1.1) == 11  # no float noise: 1.1 * 10 is 11, not 12


@settings(max_examples=40, deadline=None)
@given(
    rates=st.lists(st.sampled_from([0.0, 0.05, 0.3, 0.7, 1.0]), min_size=2, max_size=24),
    kept=st.integers(1, 24),
    rule=st.sampled_from(["mixed", "balance", "pos"]),
    samples_per_round=st.integers(1, 4),
    rounds=st.integers(2, 6),
    seed=st.integers(0, 2**16),
)
def test_the_batch_keeps_exactly_num_kept_distinct_prompts_effective_first(
    rates, kept, rule, samples_per_round, rounds, seed
):
    kept = min(kept, len(rates))
    sampler = RefillSampler(
        num_prompts=len(rates),
        num_kept=kept,
        num_generations=2,
        samples_per_round=samples_per_round,
        max_rounds=rounds,
        rounds_per_prompt=max(1, -(-2 // samples_per_round)),
        exit_rule=rule,
    )
    policy = SimulatedPolicy(rates, seed=seed)
    while not sampler.done:
        plan = sampler.plan_round()
        assert len(set(plan)) == len(plan)
        sampler.ingest(policy.sample(plan, sampler.plan_sizes))
    chosen = sampler.kept_prompts()
    assert len(chosen) == kept and chosen == sorted(set(chosen))
    assert sampler.kept_rewards().shape == (kept, 2)
    effective = [p for p in range(len(rates)) if sampler.is_effective(p)]
    assert sum(sampler.is_effective(p) for p in chosen) == min(kept, len(effective))


@settings(max_examples=60, deadline=None)
@given(
    rates=st.lists(st.sampled_from([0.0, 0.05, 0.3, 0.9, 1.0]), min_size=4, max_size=24),
    kept=st.integers(1, 8),
    budget=st.sampled_from([4, 5, 6, 8, 12]),
    rounds_per_prompt=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_refill_stays_within_the_step_budget_and_still_fills_every_kept_group(
    rates, kept, budget, rounds_per_prompt, seed
):
    """A refilled candidate is admitted only when the budget can still pay for its group."""
    kept = min(kept, len(rates))
    sampler = RefillSampler(
        num_prompts=len(rates),
        num_kept=kept,
        num_generations=4,
        samples_per_round=4,
        max_rounds=6,
        rounds_per_prompt=rounds_per_prompt,
        exit_rule="mixed",
        sample_budget=budget,
    )
    policy = SimulatedPolicy(rates, seed=seed)
    while not sampler.done:
        plan = sampler.plan_round()
        sampler.ingest(policy.sample(plan, sampler.plan_sizes))
    assert sampler.samples_drawn <= budget * kept
    assert sampler.kept_rewards().shape == (kept, 4)


def test_refill_waits_for_a_budget_that_can_pay_for_a_new_group():
    # 2 kept of 4 candidates, n = 2, budget 3 per kept prompt = 6 completions. Round 1 draws 2 for each kept one
    # (4 in all); both come back all wrong, so both slots are free, but the 2 left pay for only one new group.
    sampler = RefillSampler(
        num_prompts=4,
        num_kept=2,
        num_generations=2,
        samples_per_round=2,
        max_rounds=3,
        sample_budget=3,
        **{k: v for k, v in DAPO.items() if k not in ("num_generations", "samples_per_round")},
    )
    plans = run_scripted(sampler, {0: [0.0, 0.0], 1: [0.0, 0.0], 2: [1.0, 0.0], 3: [1.0, 0.0]})
    assert plans == [[0, 1], [2]]
    assert sampler.samples_drawn == 6 and sampler.kept_prompts() == [0, 2]


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"prompt_oversampling": 0.5}, r"prompt_oversampling=0.5: must be in \[1, inf\) \(e.g. prompt_oversampling=1"),
        ({"prompt_oversampling": float("nan")}, r"prompt_oversampling=nan"),
        ({"skip_exploration": 1.5}, r"skip_exploration=1.5: must be in \[0, 1\] \(e.g. skip_exploration=0.05\)"),
        ({"skip_exploration": -0.1}, r"skip_exploration=-0.1"),
        ({"skip_threshold": 0.0, "pass_rate_memory": True}, r"skip_threshold=0.0: must be in \(0, 1\]"),
        ({"skip_threshold": 0.9}, r"skip_threshold=0.9 .*pass_rate_memory=False"),
        ({"rounds_per_prompt": 5}, r"rounds_per_prompt=5 is more than max_rounds=4"),
        ({"rounds_per_prompt": 0}, r"rounds_per_prompt=0: must be in \[1, inf\) \(e.g. rounds_per_prompt=1\)"),
        ({"rounds_per_prompt": 1, "samples_per_round": 2}, r"samples_per_round \* rounds_per_prompt = 2 \* 1"),
    ],
)
def test_bad_refill_config_names_the_field_and_the_fix(tmp_path, overrides, match):
    from trl_ada import ReinforceAdaConfig

    fields = {"output_dir": str(tmp_path), "report_to": "none", "use_cpu": True, "max_rounds": 4, **overrides}
    with pytest.raises(ValueError, match=match):
        ReinforceAdaConfig(**fields)


def test_dapo_dynamic_sampling_is_a_valid_configuration(tmp_path):
    from trl_ada import ReinforceAdaConfig

    config = ReinforceAdaConfig(
        output_dir=str(tmp_path),
        report_to="none",
        use_cpu=True,
        exit_rule="mixed",
        num_generations=4,
        samples_per_round=4,
        rounds_per_prompt=1,
        max_rounds=4,
        prompt_oversampling=3.0,
    )
    assert (
        config.sampling_plan.section.schedule_class() is RefillSchedule
        and config.sampling_plan.section.exit_rule == "mixed"
    )
    assert (
        ReinforceAdaConfig(
            output_dir=str(tmp_path), report_to="none", use_cpu=True
        ).sampling_plan.section.schedule_class()
        is RoundsSchedule
    )
