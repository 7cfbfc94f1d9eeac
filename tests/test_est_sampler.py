"""EstSampler and est_allocation by hand: the one round through `ingest` or `add_sample`, the order of calls, an
explicit allocation, the allocation metrics, and the objective's alpha in the allocation (no torch, no TRL)."""

import math

import numpy as np
import pytest
from refusals import names

from trl_ada.objectives import allocate, sample_weight
from trl_ada.plan import PRESETS, resolve
from trl_ada.schedules.est import LOW_PASS_RATE, EstSampler, est_allocation

EST = PRESETS["est"](num_generations=4)  # log objective, hybrid weighting, ε = 0.05, [N_min, N_max] = [2, 16]


def message(excinfo) -> str:
    return str(excinfo.value)


# -- one round through plan_round + ingest -------------------------------------------------------------------------


def test_ingest_exits_every_prompt_in_round_one_with_its_flags_and_whole_pool():
    # p̂ = 1/20, 1/4, 9/10: 1/√(p̂ + ε) = 3.16, 1.83, 1.03; 12 ∝ -> 6.31, 3.64, 2.05 -> [6, 4, 2]
    sampler = EstSampler(3, EST, prior_alpha=[1, 1, 9], prior_beta=[19, 3, 1])
    assert sampler.allocation.tolist() == [6, 4, 2]
    assert sampler.round == 0 and not sampler.done and sampler.exit_round == [None, None, None]
    assert sampler.plan_round() == [0, 1, 2] and sampler.plan_sizes == [6, 4, 2]
    rewards = [0, 0, 0, 0, 0, 1] + [1, 0, 0, 0] + [1, 1]
    masked = [False, False, False, False, False, True] + [True, False, False, True] + [False, True]
    assert sampler.ingest(rewards, masked) == [0, 1, 2]
    assert sampler.round == 1 and sampler.done
    assert sampler.exit_round == [1, 1, 1]
    assert sampler.first_round_sizes == [6, 4, 2]
    assert sampler.plan_sizes == []
    # each prompt's flags are its own slice of the prompt-major list
    assert sampler.masked == [[False] * 5 + [True], [True, False, False, True], [False, True]]
    assert sampler.pools == [[0.0] * 5 + [1.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0]]
    kept = sampler.kept_rewards()
    assert [row.dtype for row in kept] == [np.float64] * 3
    assert [row.tolist() for row in kept] == [[0, 0, 0, 0, 0, 1], [1, 0, 0, 0], [1, 1]]
    assert sampler.select_groups() == [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3], [0, 1]]
    assert [sampler.candidates(p) for p in range(3)] == sampler.select_groups()  # every sample can be trained
    assert sampler.round_of(1) == 1 and sampler.round_of(7) == 1  # every sample is of the one round


def test_ingest_without_masked_flags_marks_nothing():
    sampler = EstSampler(2, EST, prior_alpha=[1, 1], prior_beta=[1, 1], allocation=[2, 3])
    sampler.plan_round()
    sampler.ingest([1, 0, 0, 1, 0])
    assert sampler.masked == [[False, False], [False, False, False]]
    assert sampler.first_round_sizes == [2, 3] and sampler.exit_round == [1, 1]


# -- results one by one through add_sample + close -----------------------------------------------------------------


def test_add_sample_fills_each_allocation_then_refuses_more():
    sampler = EstSampler(2, EST, prior_alpha=[1, 1], prior_beta=[1, 1], allocation=[3, 2])
    assert sampler.cap_of(0) == 3 and sampler.budget_room(1, [0, 0]) == 2
    assert sampler.add_sample(0, 1.0) is False
    assert sampler.add_sample(0, 0.0, masked=True) is False
    assert sampler.add_sample(1, 1.0, masked=True) is False
    assert sampler.exit_round == [None, None]
    assert sampler.add_sample(0, 0.0) is True  # 3 of 3
    assert sampler.exit_round == [1, None] and sampler.active == [1]
    with pytest.raises(RuntimeError) as excinfo:
        sampler.add_sample(0, 1.0)
    names(message(excinfo), "Prompt 0 ", "its allocation")
    assert sampler.add_sample(1, 0.0) is True  # 2 of 2
    assert sampler.exit_round == [1, 1] and sampler.active == []
    assert sampler.masked == [[False, True, False], [True, False]]
    assert not sampler.done  # the step ends with close()
    with pytest.raises(RuntimeError) as excinfo:
        sampler.select_groups()
    assert "once sampling is done" in message(excinfo)
    sampler.close(1)
    assert sampler.round == 1 and sampler.done
    assert sampler.first_round_sizes == [3, 2]
    assert sampler.select_groups() == [[0, 1, 2], [0, 1]]
    assert [row.tolist() for row in sampler.kept_rewards()] == [[1.0, 0.0, 0.0], [1.0, 0.0]]
    # first-round pass rates (threshold 0.7): 1/3 and 1/2
    assert sampler.allocation_metrics()["realized_pass_rate"] == pytest.approx((1 / 3 + 1 / 2) / 2)


# -- the order of calls --------------------------------------------------------------------------------------------


def test_calls_out_of_order_raise_with_the_exact_message():
    sampler = EstSampler(2, EST, prior_alpha=[1, 1], prior_beta=[1, 1])
    with pytest.raises(RuntimeError) as excinfo:
        sampler.ingest([0.0] * 8)
    assert message(excinfo) == "Call plan_round() before ingest()."
    with pytest.raises(RuntimeError) as excinfo:
        sampler.select_groups()
    assert "once sampling is done" in message(excinfo)
    sampler.plan_round()
    sampler.ingest([0.0] * 8)
    with pytest.raises(RuntimeError) as excinfo:
        sampler.plan_round()
    names(message(excinfo), "one round per step", "done")


# -- an explicit allocation ----------------------------------------------------------------------------------------


def test_explicit_allocation_is_validated_and_kept_as_integers():
    sampler = EstSampler(2, EST, prior_alpha=[1, 1], prior_beta=[1, 1], allocation=[2.0, 5.0])
    assert sampler.allocation.dtype == np.int64 and sampler.allocation.tolist() == [2, 5]
    assert sampler.plan_round() == [0, 1] and sampler.plan_sizes == [2, 5]
    with pytest.raises(ValueError) as excinfo:  # three counts for two prompts, each >= 1
        EstSampler(2, EST, prior_alpha=[1, 1], prior_beta=[1, 1], allocation=[4, 4, 4])
    names(message(excinfo), "allocation=[4, 4, 4]", ">= 1 per prompt")
    with pytest.raises(ValueError) as excinfo:
        EstSampler(2, EST, prior_alpha=[1, 1], prior_beta=[1, 1], allocation=[4, 0])
    names(message(excinfo), "allocation=[4, 0]", ">= 1 per prompt")


def test_memory_hits_reach_the_step_statistics():
    sampler = EstSampler(4, EST, prior_alpha=[1] * 4, prior_beta=[1] * 4, memory_hits=[True, False, True, True])
    assert sampler.memory_hits.tolist() == [True, False, True, True]
    sampler.plan_round()
    sampler.ingest([1.0] * 16)
    assert sampler.metrics()["est/memory_hit_fraction"] == 0.75  # 3 of 4 prompts were remembered


# -- allocation metrics --------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("error")
def test_allocation_metrics_by_hand():
    # p̂ = 1/10 (exactly LOW_PASS_RATE: not low), 1/20 (low), 1/2, 3/4
    sampler = EstSampler(4, EST, prior_alpha=[1, 1, 1, 3], prior_beta=[9, 19, 1, 1], allocation=[5, 3, 2, 2])
    assert sampler.estimates[0] == LOW_PASS_RATE
    nan = float("nan")
    before = sampler.allocation_metrics()  # nothing sampled yet: nothing to calibrate against
    assert math.isnan(before["realized_pass_rate"]) and math.isnan(before["calibration_error"])
    sampler.plan_round()
    sampler.ingest([1, 0, 0, 0, nan] + [nan, nan, nan] + [1, 1] + [0, 1])
    metrics = sampler.allocation_metrics()
    assert sorted(metrics) == sorted(
        [
            "samples_min",
            "samples_mean",
            "samples_max",
            "low_pass_share",
            "predicted_pass_rate",
            "realized_pass_rate",
            "calibration_error",
        ]
    )
    assert (metrics["samples_min"], metrics["samples_mean"], metrics["samples_max"]) == (2.0, 3.0, 5.0)
    assert metrics["low_pass_share"] == 3 / 12  # only the 1/20 prompt's 3 samples
    assert metrics["predicted_pass_rate"] == pytest.approx((0.1 + 0.05 + 0.5 + 0.75) / 4)  # 0.35
    # realised: 1/4 (the NaN is unscored), none scored (left out), 1, 1/2
    assert metrics["realized_pass_rate"] == pytest.approx((0.25 + 1 + 0.5) / 3)
    assert metrics["calibration_error"] == pytest.approx((0.15 + 0.5 + 0.25) / 3)  # 0.3
    logged = sampler.metrics("train/")
    assert logged["train/est/predicted_pass_rate"] == pytest.approx(0.35)
    assert logged["train/est/low_pass_share"] == 0.25


@pytest.mark.filterwarnings("error")
def test_allocation_metrics_are_nan_when_no_sample_was_scored():
    sampler = EstSampler(2, EST, prior_alpha=[1, 1], prior_beta=[1, 3], allocation=[2, 2])
    sampler.plan_round()
    sampler.ingest([float("nan")] * 4)
    metrics = sampler.allocation_metrics()
    assert math.isnan(metrics["realized_pass_rate"]) and math.isnan(metrics["calibration_error"])
    assert metrics["predicted_pass_rate"] == pytest.approx((0.5 + 0.25) / 2)


# -- est_allocation ------------------------------------------------------------------------------------------------


def power_plan():
    """Est with n = 4 under the power objective, alpha 0.2, its weight sizing the samples (implicit)."""
    return resolve(
        {
            "generation_schedule": "est",
            "pass_rate_memory": True,
            "num_generations": 4,
            "objective": "power",
            "objective_alpha": 0.2,
            "objective_weighting": "implicit",
        }
    )


def test_est_allocation_reads_the_power_objectives_alpha():
    plan = power_plan()
    p = [0.05, 0.25, 0.9, 0.5]
    # w = α (p̂ + ε)^(α − 1) = 0.2 · (0.1, 0.3, 0.95, 0.55)^-0.8 ∝ 6.31, 2.62, 1.04, 1.61; 16 ∝ -> the third below 2
    # is clipped to 2, the other 14 ∝ 6.31, 2.62, 1.61 -> 8.38, 3.48, 2.14: floors 8, 3, 2, +1 to the .48
    assert est_allocation(p, plan).tolist() == [8, 4, 2, 2]
    assert (
        est_allocation(p, plan).tolist()
        == allocate(sample_weight(np.array(p), "power", "implicit", 0.2, 0.05), 16, 2, 16).tolist()
    )
    # α = 0.5: ∝ (p̂ + ε)^-0.5 = 3.16, 1.83, 1.03, 1.35; 16 ∝ -> 6.87, 3.97, 2.23, 2.93: floors 6, 3, 2, 2, +1 to
    # the .97, .93 and .87
    assert est_allocation(p, plan.replace(objective_alpha=0.5)).tolist() == [7, 4, 2, 3]


def test_est_allocation_takes_integer_estimates():
    plan = power_plan()
    # p̂ = 0, 1: (0.05, 1.05)^-0.8 ∝ 10.98, 0.96; 8 ∝ -> 7.36, 0.64: the second clipped up to 2, the first gets 6
    allocation = est_allocation([0, 1], plan)
    assert allocation.dtype == np.int64 and allocation.tolist() == [6, 2]
    assert allocation.tolist() == est_allocation([0.0, 1.0], plan).tolist()
