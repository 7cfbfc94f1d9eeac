"""Smoke tests of benchmarks/step_overhead.py and benchmarks/gpu_smoke.py: they run, print, write. No timings."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import load_benchmark_script

ROOT = Path(__file__).resolve().parents[1]
STEP_OVERHEAD = "benchmarks.step_overhead"
GPU_SMOKE = "benchmarks.gpu_smoke"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SMOKE_REPEATS = 3
SMOKE_INSTANCES = 2
STEP_OVERHEAD_TIMEOUT_S = 600
"""A hang guard, not a speed check: the smoke takes ~20 s on idle cores and minutes on heavily shared ones."""


def _cpu_env() -> dict[str, str]:
    """The environment for a benchmark subprocess: offline, and no CUDA device even on a GPU machine."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "", "TOKENIZERS_PARALLELISM": "false"}


def _run(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=_cpu_env(), capture_output=True, text=True, timeout=timeout
    )


# --------------------------------------------------------------------------------------------
# step_overhead.py
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def overhead_run(tmp_path_factory):
    pytest.importorskip("matplotlib")
    out = tmp_path_factory.mktemp("step_overhead")
    options = ("--repeats", str(SMOKE_REPEATS), "--instances", str(SMOKE_INSTANCES), "--out", str(out))
    result = _run("-m", STEP_OVERHEAD, "--smoke", "--quiet", *options, timeout=STEP_OVERHEAD_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, out


@pytest.mark.slow
@pytest.mark.xdist_group("step_overhead")  # one smoke run per session, not one per worker
def test_step_overhead_prints_the_table_and_both_ratios(overhead_run):
    printed, _ = overhead_run
    for text in ("GRPOTrainer", "Ada sampling=grpo", "Ada balance M=8 N=4", "wall ms", "CPU ms", "TRL glue", "ours"):
        assert text in printed
    for text in ("sampling=grpo / GRPOTrainer, wall:", "sampling=grpo / GRPOTrainer, CPU", "A/A control"):
        assert text in printed
    assert "ours (measured directly)" in printed
    assert "balance / none, wall:" in printed
    assert "per generated sample" in printed


@pytest.mark.slow
@pytest.mark.xdist_group("step_overhead")
def test_step_overhead_writes_json_csv_table_and_png(overhead_run):
    printed, out = overhead_run
    assert (out / "step_overhead.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "tables.txt").read_text().strip() in printed
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 * SMOKE_REPEATS * SMOKE_INSTANCES
    assert {row["method"] for row in rows} == {"grpo", "none", "balance"}
    assert {row["instance"] for row in rows} == {str(k) for k in range(SMOKE_INSTANCES)}


@pytest.mark.slow
@pytest.mark.xdist_group("step_overhead")
def test_step_overhead_ratios_are_present_and_finite(overhead_run):
    _, out = overhead_run
    data = json.loads((out / "results.json").read_text())
    for name in ("none_over_grpo", "balance_over_none", "grpo_a_a"):
        for clock in ("wall", "cpu"):
            ratio = data[name][clock]
            for key in ("ratio", "ci95_low", "ci95_high", "per_cycle_median"):
                assert ratio[key] is not None and math.isfinite(ratio[key]) and ratio[key] > 0, (name, clock, key)
            assert ratio["ci95_low"] <= ratio["ci95_high"]
    for key in ("samples_ratio", "time_per_sample_ratio", "cpu_time_per_sample_ratio"):
        assert math.isfinite(data["balance_over_none"][key])
    for summary in data["methods"].values():
        assert math.isfinite(summary["median_ours"]) and summary["median_ours"] >= 0.0


@pytest.mark.slow
@pytest.mark.xdist_group("step_overhead")
def test_step_overhead_methods_generate_equal_lengths_and_expected_samples(overhead_run):
    _, out = overhead_run
    data = json.loads((out / "results.json").read_text())
    methods, config = data["methods"], data["config"]
    batch = config["prompts"] * config["num_generations"]
    for summary in methods.values():
        assert summary["timed_steps"] == SMOKE_REPEATS * SMOKE_INSTANCES
        assert summary["mean_completion_length"] == config["max_completion_length"]  # EOS is suppressed
    assert methods["grpo"]["mean_samples"] == methods["none"]["mean_samples"] == batch
    cap = config["prompts"] * config["samples_per_round"] * config["max_rounds"]
    assert config["prompts"] * config["samples_per_round"] <= methods["balance"]["mean_samples"] <= cap
    assert data["balance_over_none"]["samples_ratio"] >= 2.0  # M=8 per prompt at least, n=4 for none


def test_baton_runs_one_thread_at_a_time_in_rotating_order():
    module = load_benchmark_script("step_overhead")
    baton = module.Baton(["a", "b", "c"])
    order, active, lock = [], [], threading.Lock()

    def worker(name: str, steps: int) -> None:
        try:
            for _ in range(steps):
                baton.wait_turn(name)
                with lock:
                    active.append(name)
                    assert len(active) == 1
                order.append(name)
                with lock:
                    active.remove(name)
        finally:
            baton.finish(name)

    threads = [threading.Thread(target=worker, args=(name, 3 if name != "c" else 2)) for name in "abc"]
    for thread in threads:
        thread.start()
    baton.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads)
    assert order == ["a", "b", "c", "b", "c", "a", "a", "b"]


# --------------------------------------------------------------------------------------------
# gpu_smoke.py
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_gpu_smoke_without_cuda_exits_cleanly_with_a_message():
    result = _run("-m", GPU_SMOKE, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no CUDA GPU found" in result.stdout
    assert "--tiny" in result.stdout


@pytest.mark.slow
def test_gpu_smoke_tiny_runs_on_cpu_and_prints_the_table(tmp_path):
    pytest.importorskip("peft")
    result = _run("-m", GPU_SMOKE, "--tiny", "--json", str(tmp_path / "smoke.json"))
    assert result.returncode == 0, result.stderr[-3000:]
    for text in ("gpu_smoke on CPU (tiny)", "GRPOTrainer", "ReinforceAdaTrainer balance", "peak GiB", "n/a (CPU)"):
        assert text in result.stdout
    assert "step-time ratio balance / GRPO:" in result.stdout
    data = json.loads((tmp_path / "smoke.json").read_text())
    grpo, ada = data["results"]["grpo"], data["results"]["balance"]
    assert len(grpo["step_times"]) == len(ada["step_times"]) == 3
    assert grpo["samples"] == [32.0, 32.0, 32.0]  # 8 prompts x n=4
    assert all(32 <= samples <= 96 for samples in ada["samples"])  # M=4 per prompt per round, N=3 rounds
