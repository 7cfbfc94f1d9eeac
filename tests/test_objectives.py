"""The pure core of the non-linear objectives and of Est: weights, their normalisation, the allocation and its
rounding, the sampler's one round, and ragged advantages, against hand-computed values and as properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ada.advantages import compute_advantages, normalize_then_sum_advantages, ragged_advantages
from trl_ada.objectives import (
    advantage_weights,
    allocate,
    gradient_weight,
    normalize,
    objective_weight,
    sample_weight,
)
from trl_ada.plan import SamplingPlan
from trl_ada.schedules.est import EstSampler, est_allocation

EST = SamplingPlan.from_fields(
    num_generations=4,
    generation_schedule="est",
    pass_rate_memory=True,
    objective="log",
    objective_weighting="hybrid",
)


# -- weights -------------------------------------------------------------------------------------------------------


def test_objective_weights_are_f_prime_at_p_plus_epsilon():
    p = np.array([0.0, 0.15, 0.95])
    np.testing.assert_allclose(objective_weight(p, "linear", 0.5, 0.05), [1, 1, 1])
    np.testing.assert_allclose(objective_weight(p, "log", 0.5, 0.05), [20, 5, 1])
    np.testing.assert_allclose(objective_weight(p, "power", 0.5, 0.05), [0.5 / math.sqrt(0.05), 0.5 / 0.2**0.5, 0.5])
    np.testing.assert_allclose(objective_weight(p, "power", 1.0, 0.05), [1, 1, 1])  # alpha 1 is linear


@pytest.mark.parametrize(
    ("weighting", "sample", "gradient"),
    [
        ("explicit", [1, 1], [20, 5]),
        ("implicit", [20, 5], [1, 1]),
        ("hybrid", [math.sqrt(20), math.sqrt(5)], [math.sqrt(20), math.sqrt(5)]),
        # √((1 − p + ε)/(p + ε)) and 1/√((p + ε)(1 − p + ε))
        ("variance", [math.sqrt(21), math.sqrt(4.5)], [1 / math.sqrt(0.0525), 1 / math.sqrt(0.18)]),
    ],
)
def test_the_log_weight_splits_between_samples_and_gradient(weighting, sample, gradient):
    p = np.array([0.0, 0.15])
    np.testing.assert_allclose(sample_weight(p, "log", weighting, 0.5, 0.05), sample)
    np.testing.assert_allclose(gradient_weight(p, "log", weighting, 0.5, 0.05), gradient)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=20), st.sampled_from(["explicit", "implicit", "hybrid"]))
def test_sample_times_gradient_weight_is_the_objective_weight(p, weighting):
    p = np.array(p)
    product = sample_weight(p, "log", weighting, 0.5, 0.05) * gradient_weight(p, "log", weighting, 0.5, 0.05)
    np.testing.assert_allclose(product, objective_weight(p, "log", 0.5, 0.05))


def test_normalize_makes_the_mean_weight_of_samples_with_signal_one():
    weights = normalize(np.array([4.0, 1.0, 100.0]), sizes=[2, 6, 4], has_signal=[True, True, False])
    np.testing.assert_allclose(weights, np.array([4.0, 1.0, 100.0]) / ((2 * 4 + 6 * 1) / 8))
    np.testing.assert_allclose(normalize(np.array([3.0, 5.0]), [4, 4], [False, False]), [1, 1])


@given(
    st.lists(st.tuples(st.floats(0.01, 100), st.integers(1, 10), st.booleans()), min_size=1, max_size=20).filter(
        lambda rows: any(signal for _, _, signal in rows)
    )
)
def test_normalized_weights_keep_their_ratios_and_average_one(rows):
    raw, sizes, signal = (np.array(column) for column in zip(*rows, strict=True))
    weights = normalize(raw, sizes, signal)
    np.testing.assert_allclose(weights / weights[0], raw / raw[0], rtol=1e-9)
    assert np.dot(weights, sizes * signal) / np.sum(sizes * signal) == pytest.approx(1.0)


# -- allocation ----------------------------------------------------------------------------------------------------


def test_allocation_by_hand_with_rounding_and_clipping():
    # w = 1, 1, 2, 4 over a total of 16: real 2, 2, 4, 8 -> exactly that
    assert allocate([1, 1, 2, 4], 16, 1, 32).tolist() == [2, 2, 4, 8]
    # within [3, 6]: the last is clipped at 6, the first two lifted to 3, the third takes the rest: 3, 3, 4, 6
    assert allocate([1, 1, 2, 4], 16, 3, 6).tolist() == [3, 3, 4, 6]
    # 3 equal weights, total 10: 3.33 each -> floors 3, 3, 3 and the missing one to the earliest tie
    assert allocate([1, 1, 1], 10, 2, 8).tolist() == [4, 3, 3]
    # fractions decide: real 10/7·(1, 2, 4) = 1.43, 2.86, 5.71 -> 1, 2, 5 and the two missing to .86 and .71
    assert allocate([1, 2, 4], 10, 1, 10).tolist() == [1, 3, 6]
    # uniform weights give every prompt n
    assert allocate([2.5] * 5, 20, 2, 16).tolist() == [4] * 5


@pytest.mark.parametrize(
    ("weights", "total", "low", "high", "fragment"),
    [
        ([1, 1], 3, 2, 8, "[4, 16]"),
        ([1, 1], 20, 2, 8, "[4, 16]"),
        ([1, 0], 4, 1, 8, "positive weight"),
        ([1, float("nan")], 4, 1, 8, "positive weight"),
    ],
)
def test_allocation_refuses_what_it_cannot_meet(weights, total, low, high, fragment):
    with pytest.raises(ValueError, match=f".*{fragment.replace('[', '.').replace(']', '.')}"):
        allocate(weights, total, low, high)


@settings(max_examples=300)
@given(
    st.lists(st.floats(0.01, 100), min_size=1, max_size=40),
    st.integers(1, 4),
    st.integers(0, 12),
    st.integers(1, 8),
)
def test_allocation_meets_the_total_within_bounds_and_follows_the_weights(weights, low, spread, per_prompt):
    high = low + spread
    b = len(weights)
    total = min(max(per_prompt * b, low * b), high * b)
    counts = allocate(weights, total, low, high)
    assert counts.sum() == total and counts.min() >= low and counts.max() <= high
    order = np.argsort(weights, kind="stable")
    w = np.array(weights)
    # a heavier prompt never gets fewer samples, up to the one the rounding gives
    for i, j in zip(order[:-1], order[1:], strict=True):
        if w[j] > w[i]:
            assert counts[j] >= counts[i] - 1
    # each count is within one of the exact real allocation
    c = _scale(w, total, low, high)
    assert np.all(np.abs(counts - np.clip(c * w, low, high)) < 1 + 1e-6)


def _scale(w: np.ndarray, total: int, low: int, high: int) -> float:
    """The scale whose clipped allocation sums to `total`, by bisection (the test's own, slow way)."""
    lo, hi = 0.0, high / w.min() + 1
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.clip(mid * w, low, high).sum() < total else (lo, mid)
    return hi


def test_est_allocation_of_the_paper_from_estimates():
    # p̂ = 0.05, 0.2, 0.45, 0.95 with ε = 0.05: 1/√(p̂ + ε) = 3.162, 2, 1.414, 1; 16 ∝ -> 6.68, 4.22, 2.99, 2.11:
    # floors 6, 4, 2, 2 and the two missing to the largest fractions (.99, .68)
    assert est_allocation([0.05, 0.2, 0.45, 0.95], EST).tolist() == [7, 4, 3, 2]
    assert est_allocation([0.05, 0.2, 0.45, 0.95], EST.replace(est_max_samples=5)).tolist() == [5, 5, 4, 2]
    explicit = EST.replace(objective_weighting="explicit")
    assert est_allocation([0.05, 0.2, 0.45, 0.95], explicit).tolist() == [4, 4, 4, 4]


# -- the sampler's one round ---------------------------------------------------------------------------------------


def test_est_sampler_draws_its_allocation_once_and_keeps_every_sample():
    sampler = EstSampler(3, EST.replace(num_generations=4), prior_alpha=[1, 1, 9], prior_beta=[19, 3, 1])
    np.testing.assert_allclose(sampler.estimates, [0.05, 0.25, 0.9])
    # 1/√(p̂ + ε) = 3.16, 1.83, 1.03; 12 ∝ -> 6.31, 3.64, 2.05: floors 6, 3, 2 and the missing one to .64
    assert sampler.allocation.tolist() == [6, 4, 2]
    assert sampler.plan_round() == [0, 1, 2] and sampler.plan_sizes == [6, 4, 2]
    sampler.ingest([0, 0, 0, 0, 0, 1] + [1, 0, 0, 0] + [1, 1])
    assert sampler.done and sampler.select_groups() == [list(range(6)), list(range(4)), [0, 1]]
    assert [r.tolist() for r in sampler.kept_rewards()] == [[0, 0, 0, 0, 0, 1], [1, 0, 0, 0], [1, 1]]
    metrics = sampler.metrics()
    assert (metrics["est/samples_min"], metrics["est/samples_mean"], metrics["est/samples_max"]) == (2, 4, 6)
    assert metrics["est/low_pass_share"] == 0.5  # 6 of 12 samples on the prompt with p̂ < 0.1
    assert metrics["est/realized_pass_rate"] == pytest.approx((1 / 6 + 1 / 4 + 1) / 3)
    assert metrics["est/calibration_error"] == pytest.approx((1 / 6 - 0.05 + 0 + 0.1) / 3)
    assert metrics["first_round_reward"] == pytest.approx((1 / 6 + 1 / 4 + 1) / 3)  # prompts weigh equally
    with pytest.raises(RuntimeError, match="one round"):
        sampler.plan_round()


# -- ragged advantages ---------------------------------------------------------------------------------------------


def test_ragged_advantages_by_hand():
    kept = [np.array([1.0, 0, 0, 0, 0, 1]), np.array([1.0, 0]), np.array([1.0, np.nan, 0])]
    advantages = ragged_advantages(kept, kept)
    np.testing.assert_allclose(advantages[0], np.array([1, 0, 0, 0, 0, 1]) - 1 / 3)
    np.testing.assert_allclose(advantages[1], [0.5, -0.5])
    np.testing.assert_allclose(advantages[2], [0.5, 0.0, -0.5])  # unscored: out of the mean, advantage 0
    batch = ragged_advantages(kept, kept, scale="batch")
    scale = np.std([1, 0, 0, 0, 0, 1, 1, 0, 1, 0], ddof=1) + 1e-4
    np.testing.assert_allclose(batch[1], np.array([0.5, -0.5]) / scale)


@given(st.integers(1, 6), st.integers(2, 6), st.data())
def test_groups_of_one_size_give_the_rectangular_advantages(b, n, data):
    rewards = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=b * n, max_size=b * n)))
    kept = rewards.reshape(b, n)
    pools = [np.concatenate([row, [1.0]]) for row in kept]
    for scale in ("none", "group", "batch"):
        ragged = ragged_advantages(list(kept), pools, scale=scale)
        np.testing.assert_array_equal(np.stack(ragged), compute_advantages(kept, pools, scale=scale))
    per_func = np.stack([kept, 1 - kept], axis=2)
    pools_per_func = [np.stack([pool, 1 - pool], axis=1) for pool in pools]
    ragged = ragged_advantages(list(per_func), pools_per_func, weights=[1.0, 0.5])
    np.testing.assert_array_equal(
        np.stack(ragged), normalize_then_sum_advantages(per_func, pools_per_func, [1.0, 0.5])
    )


def test_advantage_weights_of_a_step_by_hand():
    plan = SamplingPlan.from_fields(objective="log")  # explicit 1/(p + 0.05)
    advantages = [np.array([0.5, -0.5, 0.5, -0.5]), np.zeros(4), np.array([0.98, -0.02])]
    weights, metrics = advantage_weights(plan, [0.5, 0.0, 0.02], advantages)
    raw = np.array([1 / 0.55, 1 / 0.05, 1 / 0.07])
    mean = (4 * raw[0] + 2 * raw[2]) / 6  # the prompt without signal is left out of the mean
    np.testing.assert_allclose(weights, raw / mean)
    assert metrics["weight_mean"] == pytest.approx(mean)
    assert metrics["weight_max"] == pytest.approx(raw[2] / mean)
    assert metrics["floored_fraction"] == 0.5  # of the two prompts with signal, one is below ε = 0.05
    linear, _ = advantage_weights(SamplingPlan.from_fields(), [0.5, 0.0, 0.02], advantages)
    np.testing.assert_array_equal(linear, [1.0, 1.0, 1.0])


def test_advantage_weights_without_signal_and_under_the_power_objective():
    flat = [np.zeros(4), np.zeros(2)]
    weights, metrics = advantage_weights(SamplingPlan.from_fields(objective="log"), [0.0, 1.0], flat)
    np.testing.assert_array_equal(weights, [1.0, 1.0])  # nothing carries gradient: nothing to weigh
    assert all(math.isnan(value) for value in metrics.values())
    plan = SamplingPlan.from_fields(objective="power", objective_alpha=0.25, objective_epsilon=0.1)
    advantages = [np.array([0.5, -0.5]), np.array([0.75, -0.25, -0.25, -0.25])]
    weights, metrics = advantage_weights(plan, [0.5, 0.25], advantages)
    raw = 0.25 * np.array([0.6, 0.35]) ** -0.75  # α (p + ε)^(α − 1)
    mean = (2 * raw[0] + 4 * raw[1]) / 6
    np.testing.assert_allclose(weights, raw / mean)
    assert metrics["weight_mean"] == pytest.approx(mean) and metrics["floored_fraction"] == 0.0
