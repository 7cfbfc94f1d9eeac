"""The streaming scheduler: exits decided in request order whatever the arrival order, cancellation, cap, budget.

Pure Python, no torch: an "engine" here is a set of in-flight requests, finished in an order the test chooses.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import names, refusal

from trl_ada.sampling import AdaptiveSampler, get_exit_rule
from trl_ada.schedules.streaming import RequestWindow


def run(scheduler: RequestWindow, reward, pick) -> tuple[list, list[int]]:
    """Serve the scheduler's requests; `pick(in_flight)` chooses which finishes next. Returns (log, cancelled ids)."""
    in_flight = {r.id: r for r in scheduler.start()}
    served, cancelled = [], []
    while in_flight:
        request = pick(sorted(in_flight.values(), key=lambda r: r.id))
        del in_flight[request.id]
        served.append(request)
        rewards = [reward(request.prompt, request.first + k) for k in range(request.size)]
        update = scheduler.receive(request.id, rewards)
        for cancel in update.cancel:
            assert cancel.prompt in update.exited or scheduler.sampler.stopped[cancel.prompt]
            cancelled.append(in_flight.pop(cancel.id).id)
        in_flight.update({r.id: r for r in update.issue})
    assert scheduler.done
    return served, cancelled


def first_issued(requests):
    return requests[0]


def shortest_prefix(rewards: list[float], n: int, cap: int, rule: str = "balance") -> int:
    """By hand: the length of the shortest prefix (>= n) whose counts meet the rule, or the cap."""
    exit_rule = get_exit_rule(rule)
    for size in range(n, cap + 1):
        positives = sum(r > 0.7 for r in rewards[:size])
        if exit_rule.is_met(positives, size - positives, n):
            return size
    return cap


def make(b: int, n: int = 4, m: int = 4, rounds: int = 3, **kwargs) -> AdaptiveSampler:
    return AdaptiveSampler(num_prompts=b, num_generations=n, samples_per_round=m, max_rounds=rounds, **kwargs)


@settings(max_examples=60, deadline=None)
@given(
    table=st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=12, max_size=12), min_size=1, max_size=5),
    window=st.integers(1, 6),
    chunk=st.integers(1, 3),
    rule=st.sampled_from(["balance", "pos"]),
    seed=st.integers(0, 2**16),
)
def test_any_arrival_order_gives_the_in_order_pools_exits_and_groups(table, window, chunk, rule, seed):
    def reward(prompt, index):
        return table[prompt][index]

    in_order = RequestWindow(make(len(table), exit_rule=rule), window=window, chunk=chunk)
    run(in_order, reward, first_issued)
    rng = random.Random(seed)
    shuffled = RequestWindow(make(len(table), exit_rule=rule), window=window, chunk=chunk)
    run(shuffled, reward, rng.choice)

    a, b = in_order.sampler, shuffled.sampler
    assert a.pools == b.pools
    assert a.exit_round == b.exit_round
    assert a.select_groups() == b.select_groups()
    # and the pools are the shortest request-order prefixes that meet the rule (hand-computed), capped at M·N = 12
    assert [len(pool) for pool in b.pools] == [shortest_prefix(row, 4, 12, rule) for row in table]
    assert b.pools == [row[: len(pool)] for row, pool in zip(table, b.pools, strict=True)]
    for p, pool in enumerate(b.pools):  # every used completion once; never more requested than the cap or window
        assert len(pool) <= shuffled.requested[p] <= min(12, len(pool) + window + chunk - 1)


def test_a_short_completion_that_finishes_first_does_not_exit_its_prompt_early():
    """Length-dependent reward: short completions fail, long ones pass; the engine finishes the short ones first.

    Requested in the order long, long, short, short, short, short, long, long: balance (n = 4) is met by the first
    four (2 right, 2 wrong). Taken in arrival order it would see the four shorts first and keep 4 wrong + 2 right
    by the time the longs arrive; taken in request order it keeps exactly the first four, half right.
    """
    lengths = [30, 30, 2, 2, 2, 2, 30, 30]

    def reward(prompt, index):
        return float(lengths[index] > 10)

    def shortest_first(requests):
        return min(requests, key=lambda r: (lengths[r.first], r.id))

    scheduler = RequestWindow(make(1, m=8, rounds=1), window=8)
    served, cancelled = run(scheduler, reward, shortest_first)
    assert [r.first for r in served[:4]] == [2, 3, 4, 5]  # the shorts arrived first ...
    assert scheduler.sampler.pools == [[1.0, 1.0, 0.0, 0.0]]  # ... but the pool is the request-order prefix
    assert scheduler.sampler.select_groups() == [[0, 1, 2, 3]]
    assert np.mean(scheduler.sampler.kept_rewards()) == 0.5
    assert len(cancelled) == 2  # the two long ones still running when the prompt exited (indices 6 and 7)


def test_exit_cancels_what_is_in_flight_and_ignores_late_results():
    scheduler = RequestWindow(make(2, m=4, rounds=3), window=6)
    first = scheduler.start()
    assert [(r.prompt, r.first) for r in first] == [(0, k) for k in range(6)] + [(1, k) for k in range(6)]
    for r in first[:4]:  # prompt 0: 1, 0, 1, 0 -> balance met after four
        update = scheduler.receive(r.id, [float(r.first % 2 == 0)])
    assert update.exited == [0]
    # the window kept six waiting: each of the first three results brought one more request (indices 6, 7, 8)
    assert sorted(r.first for r in update.cancel) == [4, 5, 6, 7, 8]
    assert all(r.prompt == 1 for r in scheduler.in_flight.values())
    assert scheduler.receive(update.cancel[0].id, [1.0]).issue == []  # a cancelled request's result is ignored
    assert scheduler.sampler.pools[0] == [1.0, 0.0, 1.0, 0.0]


def test_unresolved_prompt_draws_exactly_its_cap_and_the_statistics_count_rounds():
    scheduler = RequestWindow(make(2, m=4, rounds=3))
    run(scheduler, lambda p, i: 1.0 if p == 0 else float(i % 2), first_issued)
    sampler = scheduler.sampler
    assert [len(pool) for pool in sampler.pools] == [12, 4]
    assert sampler.exit_round == [None, 1]
    stats = sampler.statistics()
    assert stats.samples == 16 and stats.rounds == 3
    assert stats.exit_fraction_per_round == (0.5, 0.0, 0.0)
    assert stats.unresolved_all_positive_fraction == 0.5


def test_budget_bounds_the_completions_requested():
    sampler = make(4, m=4, rounds=3, sample_budget=6.0)  # 24 completions for 4 prompts, 16 of them owed to groups
    scheduler = RequestWindow(sampler, window=4)
    run(scheduler, lambda p, i: 0.0, random.Random(0).choice)  # never exits: every prompt wants its cap
    assert scheduler.requested_total == 24
    assert all(len(pool) >= 4 for pool in sampler.pools)
    assert sampler.done and len(sampler.select_groups()) == 4


def test_futility_stops_and_cancels():
    sampler = make(1, m=4, rounds=3, futility_threshold=0.5)
    scheduler = RequestWindow(sampler, window=8)
    run(scheduler, lambda p, i: 0.0, first_issued)
    assert sampler.stopped == [True] and len(sampler.pools[0]) < 12


def test_prior_sized_rounds_are_refused():
    refused = refusal(RequestWindow, make(2, first_round="prior"))
    names(refused, "first_round='prior'", "generation_schedule='streaming'", "'fixed'")


def config(**fields):
    from trl_ada import ReinforceAdaConfig

    return ReinforceAdaConfig("/tmp/trl-ada-streaming-config", report_to="none", use_cpu=True, bf16=False, **fields)


def test_config_streaming_needs_the_vllm_server():
    refused = refusal(config, generation_schedule="streaming")
    names(refused, "generation_schedule='streaming'", "use_vllm=False", "vllm_mode='colocate'", "'rounds'")
    with pytest.raises(ValueError, match=r"generation_schedule='stream'.*'streaming'"):
        config(generation_schedule="stream")
    refused = refusal(config, generation_schedule="streaming", use_vllm=True, vllm_mode="server", later_rounds="prior")
    names(refused, "later_rounds='prior'", "generation_schedule='streaming'")
    with pytest.raises(ValueError, match="streaming_max_retries=-1"):
        config(generation_schedule="streaming", use_vllm=True, vllm_mode="server", streaming_max_retries=-1)
    server = {"generation_schedule": "streaming", "use_vllm": True, "vllm_mode": "server"}
    refused = refusal(config, **server, prompt_oversampling=2.0)
    names(refused, "prompt_oversampling=2.0", "generation_schedule='streaming'", "Remove prompt_oversampling")
    refused = refusal(config, **server, streaming_window=33)
    names(refused, "streaming_window=33", "[streaming_chunk=1, samples_per_round * max_rounds=32]")
    with pytest.raises(ValueError, match=r"streaming_window=1.*\[streaming_chunk=2,"):
        config(
            generation_schedule="streaming", use_vllm=True, vllm_mode="server", streaming_chunk=2, streaming_window=1
        )
    args = config(generation_schedule="streaming", use_vllm=True, vllm_mode="server")
    assert (args.generation_schedule, args.streaming_max_retries, args.streaming_window) == ("streaming", 2, None)
    assert config().generation_schedule == "rounds"
