"""`PromptRollout`, one prompt of the asynchronous worker (pure: no torch; part of `make mutation`'s fast set):
exits and groups whatever the arrival order, hand-computed advantages, Est allocations, the staleness rule."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import names, refusal

from trl_ada.async_grpo.rollout import PromptRollout, trainable, trained_wave
from trl_ada.plan import ASYNCHRONOUS, SamplingPlan, resolve
from trl_ada.schedules.streaming import Update

BALANCE = SamplingPlan.from_fields(num_generations=4, generation_schedule="streaming")
EST = resolve({"generation_schedule": "est", "pass_rate_memory": True}, num_generations=4, host=ASYNCHRONOUS)


def feed(rollout: PromptRollout, stream: list[float], rng: random.Random | None = None) -> None:
    """Answer the rollout's requests from `stream` (reward of pool index i), in random order when `rng` is given."""
    pending = rollout.start()
    while pending:
        request = pending.pop(rng.randrange(len(pending)) if rng else 0)
        update = rollout.receive(request.id, stream[request.first : request.first + request.size], version=1)
        pending = [r for r in pending if r not in update.cancel] + update.issue


# -- the per-prompt core ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=32, max_size=32), st.integers(0, 10**6), st.integers(1, 3))
def test_exits_and_groups_do_not_depend_on_the_arrival_order(stream, seed, chunk):
    plan = BALANCE.replace(streaming_chunk=chunk)
    in_order, shuffled = PromptRollout(0, plan, 0), PromptRollout(0, plan, 0)
    feed(in_order, stream)
    feed(shuffled, stream, random.Random(seed))
    assert shuffled.pool == in_order.pool == stream[: len(in_order.pool)]
    assert shuffled.kept() == in_order.kept() and len(in_order.kept()) == 4
    np.testing.assert_array_equal(shuffled.advantages(), in_order.advantages())


def test_balance_pool_kept_group_and_advantages_by_hand():
    rollout = PromptRollout(7, BALANCE, version=3)
    feed(rollout, [1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 27, random.Random(0))
    assert rollout.pool == [1.0, 0.0, 0.0, 0.0, 1.0]  # balance: 2 positives and 2 negatives
    assert rollout.kept() == [0, 1, 2, 4]
    np.testing.assert_allclose(rollout.advantages(), [0.6, -0.4, -0.4, 0.6])  # r - 2/5
    assert rollout.versions[:8] == [3] * 8  # the first window was requested under version 3
    assert rollout.pass_rate == pytest.approx(0.4)


def test_est_rollout_requests_its_allocation_in_chunks_and_keeps_every_sample():
    rollout = PromptRollout(0, EST.replace(streaming_chunk=2), 0, allocation=5)
    requests = rollout.start()
    assert [(r.first, r.size) for r in requests] == [(0, 2), (2, 2), (4, 1)]
    for request, rewards in reversed(list(zip(requests, [[1.0, 0.0], [0.0, 0.0], [1.0]], strict=True))):
        rollout.receive(request.id, rewards, version=0)
    assert rollout.done and rollout.kept() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(rollout.advantages(), [0.6, -0.4, -0.4, -0.4, 0.6])
    with pytest.raises(ValueError, match="allocation=0"):
        PromptRollout(0, EST, 0, allocation=0)


def test_staleness_rule_trains_only_samples_within_the_window():
    assert trainable([5, 4, 3, 1], live_version=5, max_staleness=2) == [True, True, True, False]
    assert trainable([5, 4], live_version=5, max_staleness=0) == [True, False]


@pytest.mark.parametrize("exit_rule", ["balance", "pos", "mixed"])
def test_the_pool_is_the_request_order_prefix_at_which_the_exit_rule_holds(exit_rule):
    from trl_ada.sampling import AdaptiveSampler

    plan = BALANCE.replace(exit_rule=exit_rule)
    stream = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0] + [0.0] * 23
    rollout = PromptRollout(0, plan, 0)
    feed(rollout, stream, random.Random(5))
    oracle = AdaptiveSampler(1, plan)
    for reward in stream:  # one completion at a time, in request order, until the rule (or the cap) stops it
        if oracle.add_sample(0, reward) or len(oracle.pools[0]) == plan.section.cap:
            break
    assert rollout.pool == oracle.pools[0]
    assert len(rollout.pool) == {"balance": 8, "pos": 6, "mixed": 6}[exit_rule]


def test_later_requests_carry_the_version_live_when_they_were_sent():
    rollout = PromptRollout(7, BALANCE, version=3)
    first = rollout.start()
    assert rollout.group_id == 7 and [r.prompt for r in first] == [0] * 8
    update = rollout.receive(first[0].id, [0.0], version=4)
    assert [(r.first, r.size) for r in update.issue] == [(8, 1)]  # the window refills
    assert rollout.versions == [3] * 8 + [4]


def test_masked_completions_reach_the_sampler():
    rollout = PromptRollout(0, BALANCE, 0)
    first = rollout.start()
    rollout.receive(first[0].id, [1.0], masked=[True], version=0)
    assert rollout.sampler.masked[0] == [True]


def test_group_baseline_and_scaling_follow_the_plan():
    rollout = PromptRollout(0, BALANCE.replace(advantage_baseline="group"), 0)
    feed(rollout, [1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 27)
    np.testing.assert_allclose(rollout.advantages(), [0.5, -0.5, -0.5, 0.5])  # r - 2/4, the kept group's mean
    scaled = PromptRollout(0, BALANCE, 0)
    feed(scaled, [1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 27)
    std = np.std([1.0, 0.0, 0.0, 0.0, 1.0], ddof=1)
    np.testing.assert_allclose(scaled.advantages("group"), np.array([0.6, -0.4, -0.4, 0.6]) / (std + 1e-4))


def test_est_rollout_versions_counts_and_exit():
    rollout = PromptRollout(0, EST.replace(streaming_chunk=2), 5, allocation=4)
    requests = rollout.start()
    assert rollout.versions == [5, 5, 5, 5] and [r.prompt for r in requests] == [0, 0]
    with pytest.raises(RuntimeError, match="once its sampling is done"):
        rollout.kept()
    assert rollout.receive(requests[1].id, [1.0, float("nan")], version=6) == Update()
    assert rollout.receive(requests[0].id, [0.0, 1.0], version=6) == Update(exited=[0])
    assert rollout.receive(requests[0].id, [0.0, 1.0], version=6) == Update()  # already used: ignored
    assert rollout.counts() == (2, 1)  # the NaN (no opinion) is neither
    assert rollout.pass_rate == pytest.approx(2 / 3)
    np.testing.assert_allclose(rollout.advantages(), [-2 / 3, 1 / 3, 1 / 3, 0.0])  # r - 2/3; NaN gets 0


@pytest.mark.parametrize("allocation", [0, True, 2.0])
def test_an_est_allocation_must_be_a_positive_integer(allocation):
    with pytest.raises(ValueError, match="allocation="):
        PromptRollout(0, EST, 0, allocation=allocation)


def test_an_allocation_of_one_sample_is_valid():
    rollout = PromptRollout(0, EST, 0, allocation=1)
    (request,) = rollout.start()
    assert rollout.receive(request.id, [0.7], version=0) == Update(exited=[0])
    assert rollout.counts() == (0, 1)  # positive means strictly above positive_threshold (0.7)


def test_the_prior_decides_the_futility_stop():
    """All wrong: under a prior that says the prompt is hopeless, the futility stop ends it as soon as its pool can
    fill a group; under a flat prior it keeps sampling longer; under one that says it is easy, longer still."""
    drawn = {}
    for prior in [(1.0, 1.0), (1.0, 1000.0), (1000.0, 1.0)]:
        rollout = PromptRollout(0, BALANCE.replace(futility_threshold=0.5), 0, prior=prior)
        feed(rollout, [0.0] * 32)
        drawn[prior] = len(rollout.pool)
    assert drawn[(1.0, 1000.0)] == 4 < drawn[(1.0, 1.0)] < drawn[(1000.0, 1.0)]


# -- staleness: the kept group is formed from the samples still fresh ---------------------------------------------


def stale_first_window(stream: list[float], window: int = 4) -> PromptRollout:
    """A balance rollout whose first `window` requests were sent under version 0 and the later ones under 1."""
    rollout = PromptRollout(0, BALANCE.replace(streaming_window=window), version=0)
    feed(rollout, stream)  # `feed` stamps every later request with version 1
    return rollout


def test_the_issues_example_drops_the_group_whole_instead_of_training_its_positives_alone():
    """n = 4, max_staleness = 0, the pool 0000 at version 0 then 11 at version 1: the kept group [0, 1, 4, 5] would
    train only its two positives (+0.667 each). Two fresh samples cannot form a group of 4: none is trained."""
    rollout = stale_first_window([0.0] * 4 + [1.0, 1.0, 0.0, 0.0] + [0.0] * 24)
    assert rollout.pool == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0] and rollout.versions[:6] == [0, 0, 0, 0, 1, 1]
    assert rollout.kept() == [0, 1, 4, 5]
    assert rollout.fresh(live_version=1, max_staleness=0) == [False] * 4 + [True] * 2
    assert rollout.kept(rollout.fresh(1, 0)) == []
    (group,), metrics = trained_wave([rollout], live_version=1, max_staleness=0)
    assert group.kept == [] and group.advantages.size == 0 and metrics == {}
    (group,), _ = trained_wave([rollout], live_version=1, max_staleness=1)
    assert group.kept == [0, 1, 4, 5]
    np.testing.assert_allclose(group.advantages, [-1 / 3, -1 / 3, 2 / 3, 2 / 3])  # r - 2/6


def test_the_kept_group_is_balanced_among_the_fresh_samples():
    """0000 at version 0, then 0011 at version 1: among the fresh samples, 2 negatives and 2 positives (the stale
    negatives would be earlier draws, preferred without staleness)."""
    rollout = stale_first_window([0.0] * 4 + [0.0, 0.0, 1.0, 1.0] + [0.0] * 24)
    assert rollout.pool == [0.0] * 6 + [1.0, 1.0]
    assert rollout.kept() == [0, 1, 6, 7]
    (group,), _ = trained_wave([rollout], live_version=1, max_staleness=0)
    assert group.kept == [4, 5, 6, 7]
    np.testing.assert_allclose(group.advantages, [-0.25, -0.25, 0.75, 0.75])  # r - 2/8: the pool's baseline


def test_fresh_flags_must_match_the_pool():
    rollout = stale_first_window([1.0, 0.0] * 16)
    names(refusal(rollout.kept, [True] * 3), "fresh has 3 flags", "pool of 4 samples")
    assert rollout.kept([True, True, True, True]) == rollout.kept() == [0, 1, 2, 3]


def test_an_est_group_is_trained_whole_or_not_at_all():
    rollout = PromptRollout(0, EST.replace(streaming_chunk=4), 2, allocation=3)
    (request,) = rollout.start()
    rollout.receive(request.id, [1.0, 0.0, 0.0], version=3)
    assert rollout.fresh(live_version=3, max_staleness=1) == [True] * 3
    assert rollout.kept(rollout.fresh(3, 1)) == [0, 1, 2]
    assert rollout.kept(rollout.fresh(3, 0)) == []
    assert rollout.kept([True, False, True]) == []  # one stale sample: the allocation is not trained in part


def test_advantages_of_a_given_selection():
    rollout = stale_first_window([0.0] * 4 + [0.0, 0.0, 1.0, 1.0] + [0.0] * 24)
    np.testing.assert_allclose(rollout.advantages(kept=[6, 0]), [0.75, -0.25])
    group_baseline = PromptRollout(0, BALANCE.replace(streaming_window=4, advantage_baseline="group"), 0)
    feed(group_baseline, [0.0] * 4 + [0.0, 0.0, 1.0, 1.0] + [0.0] * 24)
    np.testing.assert_allclose(group_baseline.advantages(kept=[4, 5, 6, 7]), [-0.5, -0.5, 0.5, 0.5])


# -- objective weights: one wave of groups, weighted as a synchronous step ------------------------------------------

LOG = BALANCE.replace(objective="log")  # explicit weighting: w = 1 / (p + 0.05)


def finished(plan: SamplingPlan, stream: list[float], group: int = 0) -> PromptRollout:
    rollout = PromptRollout(group, plan, 0)
    feed(rollout, stream)
    return rollout


def test_identical_groups_of_one_wave_get_equal_weights_with_mean_one_over_the_samples_with_signal():
    """Two groups at p = 0.25, one at p = 0.5 and one that never solves (no signal): raw weights 1/0.3, 1/0.3, 1/0.55
    and 1/0.05. The mean over the 12 trained samples with signal, (2 · 4 / 0.3 + 4 / 0.55) / 12 = 2.8283, divides
    them: 1.1786, 1.1786, 0.6429; the group without signal does not enter the mean (its advantages are 0)."""
    quarter = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 24
    wave = [
        finished(LOG, quarter, 0),
        finished(LOG, [0.0] * 32, 1),
        finished(LOG, quarter, 2),
        finished(LOG, [0.0, 1.0, 0.0, 1.0] + [0.0] * 28, 3),
    ]
    assert [r.pass_rate for r in wave] == [0.25, 0.0, 0.25, 0.5]
    groups, metrics = trained_wave(wave, live_version=1, max_staleness=1)
    mean = (8 / 0.3 + 4 / 0.55) / 12
    expected = [(1 / 0.3) / mean, (1 / 0.3) / mean, (1 / 0.55) / mean]
    np.testing.assert_allclose(expected, [1.1786, 1.1786, 0.6429], atol=1e-4)
    np.testing.assert_allclose(groups[0].advantages, np.array([-0.25, -0.25, 0.75, 0.75]) * expected[0])
    np.testing.assert_allclose(groups[2].advantages, groups[0].advantages)
    np.testing.assert_allclose(groups[3].advantages, np.array([-0.5, 0.5, -0.5, 0.5]) * expected[2])
    np.testing.assert_array_equal(groups[1].advantages, np.zeros(4))
    weights = [groups[i].advantages / wave[i].advantages() for i in (0, 2, 3)]  # per trained sample
    assert np.mean(np.concatenate(weights)) == pytest.approx(1.0)
    assert metrics == pytest.approx({"weight_mean": mean, "weight_max": expected[0], "floored_fraction": 0.0})


def test_a_group_dropped_whole_has_no_weight_in_its_waves_mean():
    quarter = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 24
    stale = PromptRollout(5, LOG.replace(streaming_window=4), 0)
    feed(stale, [0.0, 1.0, 0.0, 1.0] + [0.0] * 28)  # p = 0.5, all four requested under version 0
    fresh = PromptRollout(6, LOG, 1)
    feed(fresh, quarter)
    groups, metrics = trained_wave([stale, fresh], live_version=1, max_staleness=0)
    assert groups[0].kept == [] and groups[1].kept == [0, 1, 3, 7]
    np.testing.assert_allclose(groups[1].advantages, [-0.25, -0.25, 0.75, 0.75])  # alone with signal: weight 1
    assert metrics["weight_mean"] == pytest.approx(1 / 0.3)


def test_linear_objective_leaves_advantages_unweighted_and_logs_no_weight():
    rollout = finished(BALANCE, [1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 27)
    (group,), metrics = trained_wave([rollout], live_version=0, max_staleness=0)
    np.testing.assert_allclose(group.advantages, [0.6, -0.4, -0.4, 0.6])
    assert metrics == {} and trained_wave([], 0, 0) == ([], {})


def test_scaling_reaches_the_wave():
    rollout = finished(BALANCE, [1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 27)
    (group,), _ = trained_wave([rollout], 0, 0, scale="group")
    np.testing.assert_allclose(group.advantages, rollout.advantages("group"))


def test_unscored_samples_fill_a_group_last_among_the_fresh_ones():
    """[NaN, 0, 1, 1, 0]: the unscored first draw is neither class; the group takes the scored ones."""
    rollout = finished(BALANCE, [float("nan"), 0.0, 1.0, 1.0, 0.0] + [0.0] * 27)
    assert len(rollout.pool) == 5
    assert rollout.kept() == rollout.kept([True] * 5) == [1, 2, 3, 4]


def test_masked_samples_come_last_within_their_class_among_the_fresh_ones():
    """[0 (masked: truncated), 0, 0, 1, 1]: the negatives kept are the unmasked 1 and 2, not the earliest 0 and 1."""
    rollout = PromptRollout(0, BALANCE, 0)
    requests = rollout.start()
    for request, reward in zip(requests, [0.0, 0.0, 0.0, 1.0, 1.0], strict=False):
        rollout.receive(request.id, [reward], masked=[request.first == 0], version=0)
    assert rollout.done and len(rollout.pool) == 5
    assert rollout.kept() == rollout.kept([True] * 5) == [1, 2, 3, 4]


def test_a_group_alone_in_its_wave_gets_weight_one():
    rollout = finished(LOG, [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 24)
    (group,), metrics = trained_wave([rollout], live_version=0, max_staleness=0)
    np.testing.assert_allclose(group.advantages, [-0.25, -0.25, 0.75, 0.75])
    assert metrics == pytest.approx({"weight_mean": 1 / 0.3, "weight_max": 1.0, "floored_fraction": 0.0})
