"""Pool-baseline advantages (docs/algorithm.md, step 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import names, refusal

from trl_ada.advantages import compute_advantages, nanstd, normalize_then_sum_advantages, pool_moments
from trl_ada.sampling import AdaptiveSampler

POOL = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]  # 8 draws, 2 right: pool pass rate 0.25
KEPT = [[1.0, 0.0, 0.0, 1.0]]  # the balanced group of 2 + 2
POOL_STD = math.sqrt((2 * 0.75**2 + 6 * 0.25**2) / 7)  # unbiased: sqrt(1.5 / 7) = 0.4629...


def test_pool_baseline_subtracts_the_pool_pass_rate():
    advantages = compute_advantages(KEPT, [POOL])
    np.testing.assert_array_equal(advantages, [[0.75, -0.25, -0.25, 0.75]])


def test_pool_baseline_on_a_sampler_group():
    sampler = AdaptiveSampler(num_prompts=1, num_generations=4, samples_per_round=8, max_rounds=4)
    sampler.plan_round()
    assert sampler.ingest(POOL) == [0]
    assert sampler.select_groups() == [[0, 1, 2, 3]]
    advantages = compute_advantages(sampler.kept_rewards(), sampler.pools)
    np.testing.assert_array_equal(advantages, [[0.75, -0.25, -0.25, 0.75]])
    assert advantages.sum() == 1.0  # a balanced group under the pool baseline does not sum to zero


def test_group_baseline_is_grpo_mean_of_the_kept_samples():
    advantages = compute_advantages(KEPT, baseline="group")
    np.testing.assert_array_equal(advantages, [[0.5, -0.5, -0.5, 0.5]])
    np.testing.assert_array_equal(compute_advantages(KEPT, [POOL], baseline="group"), advantages)  # pools ignored


def test_group_scaling_divides_by_the_pool_unbiased_std():
    assert math.isclose(POOL_STD, 0.46291004988627565, rel_tol=1e-15)
    advantages = compute_advantages(KEPT, [POOL], scale="group")
    expected = np.array([[0.75, -0.25, -0.25, 0.75]]) / (POOL_STD + 1e-4)
    np.testing.assert_allclose(advantages, expected, rtol=1e-15)
    assert advantages[0, 0] == pytest.approx(1.6198352502, rel=1e-9)


def test_group_scaling_with_the_group_baseline_uses_the_group_std():
    group_std = math.sqrt(4 * 0.25 / 3)
    advantages = compute_advantages(KEPT, baseline="group", scale="group", epsilon=0.0)
    np.testing.assert_allclose(advantages, np.array([[0.5, -0.5, -0.5, 0.5]]) / group_std, rtol=1e-15)


def test_batch_scaling_divides_by_the_std_of_every_kept_reward():
    kept = [[1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]]
    pools = [POOL, [1.0, 0.0, 0.0, 0.0]]
    batch_std = math.sqrt((3 * 0.625**2 + 5 * 0.375**2) / 7)  # 3 ones among 8 kept rewards
    advantages = compute_advantages(kept, pools, scale="batch")
    expected = np.array([[0.75, -0.25, -0.25, 0.75], [0.75, -0.25, -0.25, -0.25]]) / (batch_std + 1e-4)
    np.testing.assert_allclose(advantages, expected, rtol=1e-15)


def test_uniform_pool_gives_zero_advantages_without_dividing_by_zero():
    advantages = compute_advantages([[0.0] * 4], [[0.0] * 32], scale="group")
    np.testing.assert_array_equal(advantages, [[0.0] * 4])


def test_pool_moments_handle_pools_of_different_sizes():
    means, stds = pool_moments([POOL, [1.0, 0.0], [0.5]])
    np.testing.assert_array_equal(means, [0.25, 0.5, 0.5])
    np.testing.assert_allclose(stds, [POOL_STD, math.sqrt(0.5), np.nan], rtol=1e-15)  # one value: no std, as TRL


NAN = float("nan")


def test_unscored_rewards_are_left_out_of_the_pool_mean_and_get_zero_advantage():
    # pool: 1, None, 0, 0, None, 1 -> scored mean 0.5; kept 1, None, 0, None
    advantages = compute_advantages([[1.0, NAN, 0.0, NAN]], [[1.0, NAN, 0.0, 0.0, NAN, 1.0]])
    np.testing.assert_array_equal(advantages, [[0.5, 0.0, -0.5, 0.0]])


def test_grpo_groups_with_abstentions_match_trl_numbers():
    # GRPO (pool = group): 1 / None gives 0 everywhere; 1, 0, None, None gives +-0.5
    np.testing.assert_array_equal(compute_advantages([[1.0, NAN]], [[1.0, NAN]]), [[0.0, 0.0]])
    np.testing.assert_array_equal(
        compute_advantages([[1.0, 0.0, NAN, NAN]], [[1.0, 0.0, NAN, NAN]]), [[0.5, -0.5, 0.0, 0.0]]
    )
    # scale="group" with one scored value: the std is undefined, so the advantage is 0 (TRL's NaN -> 0)
    np.testing.assert_array_equal(compute_advantages([[1.0, NAN]], [[1.0, NAN]], scale="group"), [[0.0, 0.0]])
    # scale="batch": the std of the kept scored rewards (1, 0 -> sqrt(0.5))
    advantages = compute_advantages([[1.0, 0.0, NAN, NAN]], [[1.0, 0.0, NAN, NAN]], scale="batch")
    np.testing.assert_allclose(advantages, [[0.5, -0.5, 0.0, 0.0]] / (np.array(math.sqrt(0.5)) + 1e-4))


def test_nanstd_is_unbiased_and_undefined_below_two_values():
    np.testing.assert_allclose(nanstd(np.array([[1.0, 2.0, NAN], [NAN, NAN, 3.0]]), axis=1), [math.sqrt(0.5), NAN])
    assert nanstd(np.array([1.0, NAN, 3.0])) == pytest.approx(math.sqrt(2.0))


def test_normalize_then_sum_normalises_each_function_by_its_pool_then_the_batch():
    # two prompts, n = 2, two functions weighted 1 and 2; pools of 4 with per-function moments
    pools = [
        np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]),  # means 0.5 / 0.5, stds sqrt(1/3)
        np.array([[1.0, 2.0], [1.0, 0.0], [1.0, NAN], [1.0, 1.0]]),  # f1 constant (std 0), f2 mean 1, std 1
    ]
    kept = np.stack([pools[0][[0, 1]], pools[1][[0, 1]]])
    s = math.sqrt(1 / 3) + 1e-4
    sums = np.array([0.5 / s - 2 * 0.5 / s, -0.5 / s + 2 * 0.5 / s, 0.0 + 2 * 1 / 1.0001, 0.0 - 2 * 1 / 1.0001])
    expected = (sums - sums.mean()) / (np.std(sums, ddof=1) + 1e-4)
    advantages = normalize_then_sum_advantages(kept, pools, [1.0, 2.0])
    np.testing.assert_allclose(advantages.reshape(-1), expected, rtol=1e-12)


def test_normalize_then_sum_gives_unscored_completions_zero():
    kept = np.array([[[1.0], [NAN], [0.0], [1.0]]])
    advantages = normalize_then_sum_advantages(kept, list(kept), [1.0])
    assert advantages[0, 1] == 0.0 and advantages[0, 0] > 0 > advantages[0, 2]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [({"baseline": "mean"}, "advantage_baseline='mean'"), ({"scale": "std"}, "scale_rewards='std'")],
)
def test_unknown_baseline_or_scale_names_the_option_and_the_choices(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        compute_advantages(KEPT, [POOL], **kwargs)
    assert fragment in str(info.value)
    assert ("['pool', 'group']" if "baseline" in kwargs else "['none', 'group', 'batch']") in str(info.value)


def test_pool_baseline_needs_one_pool_per_prompt():
    with pytest.raises(ValueError, match="pools"):
        compute_advantages(KEPT)
    with pytest.raises(ValueError, match="pools"):
        compute_advantages(KEPT, [POOL, POOL])


def test_kept_rewards_must_be_two_dimensional():
    with pytest.raises(ValueError, match=r"\(num_prompts, num_generations\)"):
        compute_advantages([1.0, 0.0], [POOL])


rewards = st.floats(-10.0, 10.0, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(2, 8).flatmap(
        lambda n: st.lists(st.lists(rewards, min_size=n, max_size=32), min_size=1, max_size=6).map(
            lambda pools: (n, pools)
        )
    )
)
def test_pool_advantage_is_reward_minus_pool_mean_and_group_advantages_sum_to_zero(case):
    n, pools = case
    kept = np.array([pool[:n] for pool in pools])
    advantages = compute_advantages(kept, pools)
    for row, pool, advantage in zip(kept, pools, advantages, strict=True):
        np.testing.assert_allclose(advantage, row - np.mean(pool), atol=1e-12)
    np.testing.assert_allclose(compute_advantages(kept, baseline="group").sum(axis=1), 0.0, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=4, max_size=16),
    st.lists(st.booleans(), min_size=4, max_size=16),
    st.sampled_from(["none", "group"]),
)
def test_adding_unscored_samples_never_changes_the_scored_advantages(pool, unscored, scale):
    """Property: an unscored completion has no opinion, wherever it sits in the pool or the group."""
    with_nan = [NAN if flag else reward for reward, flag in zip(pool, unscored + [False] * len(pool), strict=False)]
    kept = np.array([with_nan[:4]])
    scored_pool = [r for r in with_nan if not math.isnan(r)]
    advantages = compute_advantages(kept, [with_nan], scale=scale)
    reference = compute_advantages(np.nan_to_num(kept, nan=0.0), [scored_pool or [0.0]], scale=scale)
    for k in range(4):
        expected = 0.0 if math.isnan(kept[0, k]) else reference[0, k]
        assert advantages[0, k] == pytest.approx(expected, abs=1e-12)


def test_normalize_then_sum_centres_the_summed_rewards_on_their_batch_mean():
    # one function, pool 0, 1, 1, 1: mean 0.75, std 0.5; kept 1, 0 -> normalised 0.5, -1.5 (batch mean -0.5, std √2)
    pool = np.array([[0.0], [1.0], [1.0], [1.0]])
    advantages = normalize_then_sum_advantages(np.array([[[1.0], [0.0]]]), [pool], [1.0], epsilon=0.0)
    np.testing.assert_allclose(advantages, [[1 / math.sqrt(2), -1 / math.sqrt(2)]], rtol=1e-12)


def test_normalize_then_sum_with_the_group_baseline_uses_each_kept_group_per_function():
    # prompt 0: f1 = 0, 1, 2 (mean 1, std 1), f2 = 2, 4, 6 (mean 4, std 2)  -> both -1, 0, 1
    # prompt 1: f1 = 5, 7, 9 (mean 7, std 2) -> -1, 0, 1; f2 = 10, 0, 5 (mean 5, std 5) -> 1, -1, 0
    kept = np.array([[[0.0, 2.0], [1.0, 4.0], [2.0, 6.0]], [[5.0, 10.0], [7.0, 0.0], [9.0, 5.0]]])
    sums = np.array([[-1.5, 0.0, 1.5], [-0.5, -0.5, 1.0]])  # weights 1 and 0.5; batch mean 0, std sqrt(6 / 5)
    advantages = normalize_then_sum_advantages(kept, None, [1.0, 0.5], baseline="group", epsilon=0.0)
    np.testing.assert_allclose(advantages, sums / math.sqrt(1.2), rtol=1e-12)
    pools = [np.zeros((1, 2))] * 2  # ignored by the group baseline
    ignored = normalize_then_sum_advantages(kept, pools, [1.0, 0.5], baseline="group", epsilon=0.0)
    np.testing.assert_array_equal(ignored, advantages)


def test_a_pool_without_a_scored_reward_has_no_mean_and_no_std():
    means, stds = pool_moments([[NAN, NAN], [], [2.0, NAN, 4.0]])
    assert np.isnan(means[:2]).all() and np.isnan(stds[:2]).all()
    assert means[2] == 3.0 and stds[2] == pytest.approx(math.sqrt(2.0))
    # kept rewards unscored like their pool get no advantage, whatever the scaling
    for scale in ("none", "group", "batch"):
        np.testing.assert_array_equal(compute_advantages([[NAN, NAN]], [[NAN, NAN, NAN]], scale=scale), [[0.0, 0.0]])


def test_none_rewards_are_read_as_unscored():
    """TRL's `None` (no reward function scored the completion) counts as NaN wherever rewards are read."""
    advantages = compute_advantages([[1.0, None]], [[1.0, None, 0.0, 0.0]])
    np.testing.assert_allclose(advantages, [[1.0 - 1 / 3, 0.0]], rtol=1e-15)
    means, stds = pool_moments([[1.0, None, 0.0]])
    assert means.tolist() == [0.5] and stds[0] == pytest.approx(math.sqrt(0.5))
    assert nanstd([1.0, None, 3.0]) == pytest.approx(math.sqrt(2.0))
    # normalize_then_sum: f1 of the pool 1, None, 0, 0 has mean 1/3 and std sqrt(1/3); the kept 1, None -> 0 advantage
    kept = [[[1.0], [None]], [[0.0], [1.0]]]
    pools = [[[1.0], [None], [0.0], [0.0]], [[0.0], [1.0]]]
    with_none = normalize_then_sum_advantages(kept, pools, [1.0], epsilon=0.0)
    with_nan = normalize_then_sum_advantages(
        np.array(kept, dtype=float), [np.array(p, dtype=float) for p in pools], [1.0], epsilon=0.0
    )
    assert with_none[0, 1] == 0.0 and np.isfinite(with_none).all()
    np.testing.assert_array_equal(with_none, with_nan)


@pytest.mark.parametrize(
    ("call", "fragments"),
    [
        (
            lambda: compute_advantages(np.zeros((2, 2, 1)), [[0.0]] * 2),
            ["kept rewards", "(num_prompts, num_generations)", "got (2, 2, 1)"],
        ),
        (
            lambda: normalize_then_sum_advantages(np.zeros((2, 2)), [np.zeros((2, 1))] * 2, [1.0]),
            ["kept rewards", "(num_prompts, num_generations, num_functions)", "got (2, 2)"],
        ),
        (lambda: normalize_then_sum_advantages(np.zeros((2, 2, 1)), None, [1.0]), ["pool baseline", "(`pools`)"]),
        (lambda: compute_advantages(KEPT, [POOL, POOL]), ["pool baseline", "(`pools`)"]),
        (
            lambda: normalize_then_sum_advantages(np.zeros((1, 2, 1)), None, [1.0], baseline="kept"),
            ["advantage_baseline='kept'", "['pool', 'group']"],
        ),
    ],
)
def test_bad_advantage_inputs_get_the_exact_reason(call, fragments):
    names(refusal(call), *fragments)


def test_the_zero_std_fraction_counts_prompts_whatever_their_group_sizes():
    from trl_ada.advantages import zero_std_fraction

    groups = [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]]  # 3, 4, 4, 5
    assert zero_std_fraction(groups) == 0.75
    rows = np.concatenate(groups).reshape(-1, 4)  # TRL's blocks of num_generations = 4 cross the prompts
    assert float(np.mean(np.isclose(rows.std(axis=1), 0.0))) == 0.5
    assert zero_std_fraction([[1.0, 0.0], [2.0, 2.0]]) == 0.5  # equal sizes: TRL's own value
    assert zero_std_fraction([[1.0, np.nan, 1.0], [np.nan, np.nan], [0.5]]) == 1 / 3  # unscored left out; one: NaN std
