"""benchmarks/engine_schedule.py: the modelled engine's arithmetic, and the smoke run's table and files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import load_benchmark_script

engine_schedule = load_benchmark_script("engine_schedule")
Engine, EngineSetting = engine_schedule.Engine, engine_schedule.EngineSetting


def drain(engine) -> list[list[int]]:
    finished = []
    while engine.busy:
        finished.append(engine.advance())
    return finished


def test_a_queue_beyond_capacity_waits_and_a_fuller_batch_costs_more_per_step():
    engine = Engine(EngineSetting(prompts=1, capacity=1, batch_cost=0.5))
    engine.submit(0, 3)
    engine.submit(1, 5)
    assert drain(engine) == [[0], [1]]  # one at a time, first in first out
    assert (engine.time, engine.tokens) == (3 * 1.5 + 5 * 1.5, 8)

    engine = Engine(EngineSetting(prompts=1, capacity=2, batch_cost=0.5))
    engine.submit(0, 3)
    engine.submit(1, 5)
    assert drain(engine) == [[0], [1]]
    assert (engine.time, engine.tokens) == (3 * (1 + 0.5 * 2 / 2) + 2 * (1 + 0.5 * 1 / 2), 8)


def test_a_cancelled_sequence_stops_decoding_and_leaves_the_queue():
    engine = Engine(EngineSetting(prompts=1, capacity=1))
    engine.submit(0, 2)
    engine.submit(1, 10)
    engine.submit(2, 4)
    assert engine.advance() == [0]
    engine.cancel(1)  # still queued: it never runs
    assert drain(engine) == [[2]]
    assert engine.tokens == 2 + 4


def test_completion_lengths_stay_within_one_and_the_cap():
    setting = EngineSetting(prompts=1, median_length=400, length_sigma=2.0, max_length=512)
    lengths = engine_schedule.completion_lengths(setting, np.random.default_rng(0), 5000)
    assert lengths.min() >= 1 and lengths.max() == 512


@pytest.mark.parametrize("method", engine_schedule.METHODS)
def test_every_method_fills_every_group_with_the_library_samplers(method):
    setting = engine_schedule.SMOKE_SETTINGS[0]
    step = engine_schedule.run_step(method, setting, seed=0)
    assert step["engine_time"] > 0 and step["tokens"] >= step["samples"]
    if method == "GRPO n=4":
        assert step["samples"] == 4 * setting.prompts and step["cancelled_requests"] == 0
    else:
        assert 4 * setting.prompts <= step["samples"] <= 32 * setting.prompts


def test_smoke_run_prints_the_table_and_writes_its_files(tmp_path, capsys):
    data = engine_schedule.main(["--smoke", "--out", str(tmp_path), "--quiet"])
    printed = capsys.readouterr().out
    assert "balance streaming, window M·N" in printed and "vs balance rounds" in printed
    saved = json.loads((tmp_path / "results.json").read_text())
    methods = saved["results"][0]["methods"]
    assert set(methods) == set(engine_schedule.METHODS)
    assert methods["GRPO n=4"]["vs_grpo"] == 1.0 and methods["balance rounds"]["vs_rounds"] == 1.0
    assert (tmp_path / "table.txt").read_text().strip() == printed.strip()
    assert data["seeds"] == [0]
    trainer = saved["results"][0]["with_trainer"]
    assert set(trainer) == {"steps", "costs", "methods", "ratios", "exits"}
    assert set(trainer["methods"]) == set(engine_schedule.METHODS) | set(engine_schedule.ASYNC_METHODS)
    assert "async balance, K=fill / balance streaming" in trainer["ratios"]
    assert all(v["same_pool"] == v["same_group"] == v["prompts"] > 0 for v in trainer["exits"].values())
    assert "Asynchronous over synchronous" in printed and (tmp_path / "wall_per_group.png").stat().st_size > 0


def test_advance_stops_at_a_deadline_and_pause_and_wait_move_only_the_clock():
    engine = Engine(EngineSetting(prompts=1, capacity=1, batch_cost=0.0))
    engine.submit(0, 10)
    assert engine.advance(deadline=3.5) == [] and engine.time == 4.0  # the decoding step that reaches it
    engine.pause(2.0)
    assert engine.advance() == [0] and (engine.time, engine.tokens, engine.decoding_steps) == (12.0, 10, 10)
    engine.wait(20.0)
    engine.wait(15.0)
    assert engine.time == 20.0


def test_trainer_costs_split_a_grpo_step_as_the_paper_and_sync_steps_add_them_up():
    costs = engine_schedule.trainer_costs(85.0)
    assert (costs.train, costs.sync, costs.max_staleness) == pytest.approx((15.0, 2.0, 4))
    assert engine_schedule.sync_step_ends([85.0, 85.0], costs) == pytest.approx([102.0, 204.0])


SMOKE = engine_schedule.SMOKE_SETTINGS[0]


def async_loop(family="balance", multiple=1, setting=SMOKE, seed=0, max_staleness=4):
    streams = engine_schedule.RewardStreams(setting, seed)
    costs = engine_schedule.trainer_costs(300.0, max_staleness)
    in_flight = engine_schedule.prompts_in_flight(family, setting, multiple)
    return engine_schedule.AsyncLoop(family, setting, streams, costs, in_flight)


@pytest.mark.parametrize("multiple", [1, 2])
def test_async_balance_pools_and_exits_are_the_sync_streaming_ones_whatever_the_arrival_order(multiple):
    # Another length spread changes every completion's length (so the order results arrive in), not the rewards.
    other = EngineSetting(prompts=SMOKE.prompts, capacity=SMOKE.capacity, median_length=80.0, length_sigma=2.0)
    sync, _ = engine_schedule.run_sync("balance streaming", other, engine_schedule.RewardStreams(other, 0), steps=4)
    run = async_loop(multiple=multiple).run_steps(4)
    prompts, same_pool, same_group = engine_schedule.same_exits(sync.outcomes, run.outcomes)
    assert prompts >= 48 and same_pool == same_group == prompts  # nothing goes stale on this engine
    assert any(len(outcome.pool) > 4 for outcome in run.outcomes.values())  # some prompts sampled past n


def test_async_trains_a_group_in_less_wall_time_than_sync_on_the_same_streams():
    seed = engine_schedule.run_seed_with_trainer(SMOKE, seed=0, groups=engine_schedule.SMOKE_TRAINED_GROUPS)
    wall = {method: engine_schedule.run_summary(run, SMOKE)["wall_per_group"] for method, run in seed["runs"].items()}
    for method, (family, _) in engine_schedule.ASYNC_METHODS.items():
        references = ("balance rounds", "balance streaming") if family == "balance" else ("GRPO n=4",)
        assert all(wall[method] <= wall[reference] for reference in references), method


@pytest.mark.parametrize("family", ["GRPO n=4", "balance"])
def test_samples_are_never_newer_than_the_live_policy_and_staleness_is_counted_from_it(family):
    loop = async_loop(family, multiple=2)
    run = loop.run_steps(4)
    assert len(run.step_ends) == run.warmup + 4 == loop.version
    assert run.trained and min(run.trained) >= 0 and max(run.trained) <= 4
    for outcome in run.outcomes.values():
        assert list(outcome.versions) == sorted(outcome.versions) and max(outcome.versions) <= loop.version
    if family == "GRPO n=4":
        assert {len(outcome.pool) for outcome in run.outcomes.values()} == {4}


def test_the_trainer_drops_only_samples_older_than_max_staleness():
    run = async_loop("GRPO n=4", multiple=2, max_staleness=0).run_steps(4)
    assert run.dropped and min(run.dropped) > 0  # requested under an older policy than the one training
    assert set(run.trained) == {0}
    summary = engine_schedule.run_summary(run, SMOKE)
    assert summary["dropped_fraction"] == len(run.dropped) / (len(run.dropped) + len(run.trained)) > 0


def test_our_worker_pushes_a_group_of_fresh_samples_or_drops_it_whole():
    # max_staleness = 0: a group is formed among the samples requested under the policy live when its prompt ends
    loop = async_loop("balance", multiple=2, max_staleness=0)
    run = loop.run_steps(4)
    kept = {prompt: outcome.kept for prompt, outcome in run.outcomes.items()}
    assert {len(group) for group in kept.values()} == {0, 4}  # never a part of a group
    dropped_whole = [prompt for prompt, group in kept.items() if not group]
    assert dropped_whole and all(max(run.outcomes[p].versions) < loop.version for p in dropped_whole)
    for prompt, group in kept.items():  # a kept group's samples share one version: the one live at the push
        assert len({run.outcomes[prompt].versions[i] for i in group}) <= 1
    assert set(run.trained) == {0}
