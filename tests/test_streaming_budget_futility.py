"""The streaming scheduler's budget room for any window, its futility stop, its end-of-step path and its
request bookkeeping (ids, `done`, masked flags), torch-free and hand-computed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import names, refusal

from trl_ada.sampling import AdaptiveSampler, exit_probability, get_exit_rule
from trl_ada.schedules.streaming import RequestWindow


def make(b: int, n: int, m: int, rounds: int, **kwargs) -> AdaptiveSampler:
    return AdaptiveSampler(num_prompts=b, num_generations=n, samples_per_round=m, max_rounds=rounds, **kwargs)


def serve_in_order(scheduler: RequestWindow, reward) -> list:
    """Finish requests oldest first with `reward(prompt, index)`; returns every `Update`."""
    in_flight = {r.id: r for r in scheduler.start()}
    updates = []
    while in_flight:
        request = in_flight.pop(min(in_flight))
        update = scheduler.receive(
            request.id, [reward(request.prompt, request.first + k) for k in range(request.size)]
        )
        updates.append(update)
        for cancelled in update.cancel:
            in_flight.pop(cancelled.id)
        in_flight.update({r.id: r for r in update.issue})
    return updates


@pytest.mark.parametrize(
    ("window", "requested"),
    [(1, [5, 5, 5]), (2, [6, 5, 4]), (3, [6, 5, 4]), (6, [6, 5, 4]), (8, [7, 4, 4])],
)
def test_the_budget_pays_every_group_first_whatever_the_window(window, requested):
    # 3 prompts, n = 4, cap 12, budget 5 per prompt = 15 completions, 12 of them owed to the groups. Nobody ever
    # exits, so every prompt asks for all its window allows; a prompt gets more than n only while the others' groups
    # stay paid for. Prompt 0 asks first: with a window of 8 it takes 7 (8 would leave the others 7 for 8 owed).
    scheduler = RequestWindow(make(3, 4, 4, 3, sample_budget=5.0), window=window)
    serve_in_order(scheduler, lambda prompt, index: 0.0)
    assert scheduler.requested == requested and scheduler.requested_total == 15
    assert [len(pool) for pool in scheduler.sampler.pools] == requested
    assert scheduler.sampler.done and len(scheduler.sampler.select_groups()) == 3


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 4),
    window=st.integers(1, 12),
    budget=st.sampled_from([4.0, 4.5, 5.0, 7.0, 12.0]),
    rates=st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=4, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_requests_never_exceed_the_budget_and_every_group_fills(b, window, budget, rates, seed):
    rng = np.random.default_rng(seed)
    table = (rng.random((b, 12)) < np.array(rates[:b])[:, None]).astype(float)
    scheduler = RequestWindow(make(b, 4, 4, 3, sample_budget=budget), window=window)
    serve_in_order(scheduler, lambda prompt, index: table[prompt, index])
    assert scheduler.requested_total <= int(budget * b)
    assert all(len(pool) >= 4 for pool in scheduler.sampler.pools)
    assert scheduler.sampler.done and np.asarray(scheduler.sampler.kept_rewards()).shape == (b, 4)


def test_the_step_ends_cleanly_when_cancelled_requests_used_up_the_budget():
    # 2 prompts, n = 2, M = 2, cap 6, budget 3 per prompt = 6, window 4. Prompt 0 asks for 4, prompt 1 for its 2.
    # Prompt 0 meets balance after two results; its two other requests are cancelled, but they were requested: the
    # budget is spent with 4 completions used and prompt 1, all wrong, short of its cap. Sampling is over all the same.
    scheduler = RequestWindow(make(2, 2, 2, 3, sample_budget=3.0), window=4)
    first = scheduler.start()
    assert [(r.id, r.prompt, r.first) for r in first] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 0, 2),
        (3, 0, 3),
        (4, 1, 0),
        (5, 1, 1),
    ]
    assert scheduler.receive(0, [1.0]).exited == []
    update = scheduler.receive(1, [0.0])
    assert update.exited == [0] and [r.id for r in update.cancel] == [2, 3] and update.issue == []
    assert scheduler.receive(4, [0.0]).issue == []
    assert not scheduler.done
    assert scheduler.receive(5, [0.0]).issue == []  # the budget is spent: no more for prompt 1
    sampler = scheduler.sampler
    assert scheduler.done and scheduler.requested == [4, 2] and sampler.samples_drawn == 4
    assert sampler.round == sampler.max_rounds == 3 and sampler.done
    assert sampler.select_groups() == [[0, 1], [0, 1]]
    stats = sampler.statistics()
    assert stats.rounds == 3 and stats.exit_fraction_per_round == (0.5, 0.0, 0.0) and stats.samples == 4


def test_the_futility_stop_waits_for_a_full_group_cancels_and_stops_the_pool():
    # n = 2, M = 2, cap 4, balance, window 4, all wrong. After 1 result P(a positive in 3 more | Beta(1, 2)) = 0.6,
    # after 2: P(one in 2 more | Beta(1, 3)) = 0.4, both below 0.65, but the stop waits for a pool that fills a group:
    # it comes after the second result and cancels the two requests still running; their late results are ignored.
    scheduler = RequestWindow(make(2, 2, 2, 2, futility_threshold=0.65), window=4)
    first = scheduler.start()
    assert [r.id for r in first if r.prompt == 0] == [0, 1, 2, 3]
    update = scheduler.receive(0, [0.0])
    assert update.exited == [] and update.cancel == [] and not scheduler.sampler.stopped[0]
    update = scheduler.receive(1, [0.0])
    sampler = scheduler.sampler
    assert sampler.stopped[0] and sampler.exit_round[0] is None and sampler.pools[0] == [0.0, 0.0]
    assert update.exited == [0] and [r.id for r in update.cancel] == [2, 3] and update.issue == []
    assert scheduler.receive(2, [1.0]).issue == [] and scheduler.receive(3, [1.0]).exited == []
    assert sampler.pools[0] == [0.0, 0.0] and scheduler.requested[0] == 4
    assert all(r.prompt == 1 for r in scheduler.in_flight.values())


def test_a_chance_exactly_at_the_futility_threshold_is_not_futile():
    # n = 2, cap 4, balance: after 0, 0 the chance of a positive in the 2 left is P(Beta(1, 3)) = 0.4 (as the rounds
    # schedule computes it). At exactly that threshold the prompt goes on; after a third wrong one (0.2) it stops.
    at = exit_probability(get_exit_rule("balance"), 2, np.array([1.0]), np.array([3.0]), [0], [2], 4)[0, 2]
    assert at == pytest.approx(0.4)
    scheduler = RequestWindow(make(1, 2, 2, 2, futility_threshold=float(at)), window=1)
    updates = serve_in_order(scheduler, lambda prompt, index: 0.0)
    assert scheduler.sampler.pools == [[0.0, 0.0, 0.0]] and scheduler.sampler.stopped == [True]
    assert [u.exited for u in updates] == [[], [], [0]]


def test_done_only_after_start_and_once_nothing_is_in_flight():
    scheduler = RequestWindow(make(1, 2, 2, 1), window=2)
    assert scheduler.done is False  # nothing in flight, but the step has not started
    requests = scheduler.start()
    assert [(r.id, r.first, r.size) for r in requests] == [(0, 0, 1), (1, 1, 1)]
    assert scheduler.done is False
    scheduler.receive(1, [1.0])  # arrives out of order: waits for request 0
    assert scheduler.done is False and scheduler.sampler.pools == [[]]
    scheduler.receive(0, [0.0])
    assert scheduler.done is True and scheduler.sampler.pools == [[0.0, 1.0]]
    with pytest.raises(RuntimeError) as refused:
        scheduler.start()
    assert str(refused.value) == "start() was already called."


def test_request_ids_count_up_from_zero_across_the_step():
    scheduler = RequestWindow(make(2, 2, 2, 3), window=2, chunk=2)
    ids = [r.id for r in scheduler.start()]
    assert ids == [0, 1]
    update = scheduler.receive(0, [1.0, 1.0])  # prompt 0 needs a negative: one more request
    assert [(r.id, r.prompt, r.first, r.size) for r in update.issue] == [(2, 0, 2, 2)]


def test_masked_flags_reach_the_pool_in_request_order():
    # n = 2, M = 4, cap 4, two requests of 2. The second arrives first and waits; the pool then reads 1, 1 | 1, 0 and
    # balance is met at the fourth completion, the only masked one.
    scheduler = RequestWindow(make(1, 2, 4, 1), window=4, chunk=2)
    scheduler.start()
    scheduler.receive(1, [1.0, 0.0], masked=[False, True])
    scheduler.receive(0, [1.0, 1.0])
    assert scheduler.sampler.pools == [[1.0, 1.0, 1.0, 0.0]]
    assert scheduler.sampler.masked == [[False, False, False, True]]
    other = RequestWindow(make(1, 2, 4, 1), window=4, chunk=2)
    other.start()
    other.receive(0, [1.0, 1.0], masked=[True, 1])
    other.receive(1, [0.0, 0.0], masked=(0, True))
    assert other.sampler.pools == [[1.0, 1.0, 0.0]] and other.sampler.masked == [[True, True, False]]
    assert other.sampler.select_groups() == [[0, 2]]  # both positives are masked: the first one is kept
    short = RequestWindow(make(1, 2, 4, 1), window=4, chunk=2)
    short.start()
    names(refusal(short.receive, 0, [1.0, 1.0], masked=[True]), "masked has 1 flags", "expected 2", "per completion")


def test_results_for_a_dropped_prompt_are_not_kept():
    scheduler = RequestWindow(make(1, 2, 2, 2), window=4)
    scheduler.start()
    scheduler.receive(3, [1.0])  # arrives early, waits for 0-2
    scheduler.receive(0, [1.0])
    update = scheduler.receive(1, [0.0])  # balance met: 2 and 3 are dropped, 3's early result with them
    assert update.exited == [0] and [r.id for r in update.cancel] == [2]
    assert scheduler.done and scheduler._arrived == {}


def test_first_round_statistics_read_the_first_samples_per_round_completions():
    # n = 2, M = 2, cap 6: rewards 0.8, 0.8, then 1.0: all positive (> 0.7), so the prompt draws its cap.
    scheduler = RequestWindow(make(1, 2, 2, 3), window=2)
    serve_in_order(scheduler, lambda prompt, index: 0.8 if index < 2 else 1.0)
    sampler = scheduler.sampler
    assert len(sampler.pools[0]) == 6 and sampler.first_round_sizes == [2]
    assert sampler.statistics().first_round_reward == pytest.approx(0.8)


@pytest.mark.parametrize(("exit_at", "round_"), [(2, 1), (3, 2), (4, 2), (5, 3)])
def test_exit_rounds_are_counted_in_the_rounds_units(exit_at, round_):
    # n = 2, M = 2, cap 6, balance: all right until the negative at position exit_at; the rounds schedule would have
    # drawn it in round ceil(exit_at / 2).
    scheduler = RequestWindow(make(1, 2, 2, 3), window=1)
    serve_in_order(scheduler, lambda prompt, index: 0.0 if index == exit_at - 1 else 1.0)
    assert len(scheduler.sampler.pools[0]) == exit_at and scheduler.sampler.exit_round == [round_]
