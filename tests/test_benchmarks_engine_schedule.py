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
