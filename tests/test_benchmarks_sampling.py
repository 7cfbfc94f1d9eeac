"""Smoke test of benchmarks/sampling_efficiency.py and sampling_multi_epoch.py: they run, print their tables, write
sane numbers and a PNG."""

from __future__ import annotations

import contextlib
import io
import json
import math

import numpy as np
import pytest
from conftest import load_benchmark_script
from refusals import names

pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def benchmark():
    return load_benchmark_script("sampling_efficiency")


@pytest.fixture(scope="module")
def smoke_runs(benchmark, tmp_path_factory):
    """Two smoke runs with the same seed into separate directories; (data, out_dir, stdout) each."""
    runs = []
    for name in ("first", "second"):
        out = tmp_path_factory.mktemp(name)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            data = benchmark.main(["--smoke", "--quiet", "--out", str(out)])
        runs.append((data, out, printed.getvalue()))
    return runs


@pytest.mark.slow
def test_smoke_prints_tables_and_writes_files(benchmark, smoke_runs):
    data, tmp_path, printed = smoke_runs[0]
    for prompt_set in ("base", "hard", "easy"):
        assert f"[{prompt_set}]" in printed
    for header in ("sampler", "eff. groups", "samples/prompt", "samples/eff. group", "rounds", "vs GRPO n=4"):
        assert header in printed
    assert "balance M=8 N=4" in printed

    figure = tmp_path / "sampling_efficiency.png"
    assert figure.is_file() and figure.read_bytes()[:8] == PNG_MAGIC
    assert (tmp_path / "tables.txt").read_text().strip()
    assert (tmp_path / "results.csv").read_text().count("\n") == 1 + 3 * len(benchmark.build_samplers())
    assert json.loads((tmp_path / "results.json").read_text())["results"].keys() == data["results"].keys()


@pytest.mark.slow
def test_json_has_every_sampler_with_sane_values(benchmark, smoke_runs):
    data, out, _ = smoke_runs[0]
    on_disk = json.loads((out / "results.json").read_text())
    names = [spec.name for spec in benchmark.build_samplers()]
    assert {"GRPO n=4", "GRPO n=32", "DAPO n=4 (gen B)", "pos M=8 N=4", "balance M=1 N=32"} <= set(names)
    assert set(on_disk["results"]) == {"base", "hard", "easy"}
    for results in on_disk["results"].values():
        assert list(results) == names
        for values in results.values():
            assert 0.0 <= values["effective_fraction"] <= 1.0
            for fraction in ("low_pass_effective_fraction", "exited_fraction", "exited_effective_fraction"):
                assert values[fraction] is None or 0.0 <= values[fraction] <= 1.0  # None: not defined here
            assert values["samples_per_prompt"] >= 4.0
            assert values["rounds"] >= 1.0
            spe = values["samples_per_effective_group"]
            assert spe is None or spe >= values["samples_per_prompt"] - 1e-9  # None: no effective group (inf)
        assert results["GRPO n=4"]["samples_per_prompt"] == 4.0
        assert results["GRPO n=4"]["rounds"] == 1.0
        assert results["GRPO n=4"]["ratio_vs_grpo4"] == pytest.approx(1.0)
        assert results["balance M=1 N=32"]["samples_per_prompt"] <= 32.0
        for name, values in results.items():
            if name.startswith("balance"):
                assert values["exited_effective_fraction"] in (None, 1.0)  # an exited balance group is mixed
    base = on_disk["results"]["base"]
    assert base["DAPO n=4 (gen B)"]["prompts_drawn_per_slot"] >= 1.0
    assert base["GRPO n=4"]["prompts_drawn_per_slot"] == 1.0
    for name in names:
        if name.startswith("balance"):
            assert base[name]["effective_fraction"] >= base["GRPO n=4"]["effective_fraction"]
    assert data["prompt_sets"]["base"]["expected_mean"] == pytest.approx(0.265, abs=0.005)


@pytest.mark.slow
def test_deterministic_for_a_seed(smoke_runs):
    (_, first_out, _), (_, second_out, _) = smoke_runs  # compare the files: NaN (no exit rule) is null there
    first, second = (json.loads((out / "results.json").read_text()) for out in (first_out, second_out))
    assert first["results"] == second["results"]
    assert first["prompt_sets"] == second["prompt_sets"]
    assert (first_out / "results.csv").read_text() == (second_out / "results.csv").read_text()
    assert (first_out / "tables.txt").read_text() == (second_out / "tables.txt").read_text()


@pytest.mark.slow
def test_different_seed_changes_the_numbers(benchmark, smoke_runs, tmp_path):
    benchmark.main(["--smoke", "--quiet", "--seed", "1", "--out", str(tmp_path)])
    other = json.loads((tmp_path / "results.json").read_text())
    first = json.loads((smoke_runs[0][1] / "results.json").read_text())
    assert other["config"]["first_seed"] == 1
    assert other["results"] != first["results"]


def test_balance_groups_are_mixed_when_the_exit_rule_is_met(benchmark):
    """Direct check on one adaptive step: every exited prompt's kept group holds both classes."""
    spec = next(s for s in benchmark.build_samplers() if s.name == "balance M=8 N=4")
    rates = benchmark.step_prompts(benchmark.PROMPT_SETS[0], seed=0, step=0, num_prompts=64)
    result = benchmark.run_step(spec, benchmark.PROMPT_SETS[0], rates, seed=0)
    assert result.exited_effective == result.exited
    assert result.effective_groups >= result.exited
    assert not math.isnan(result.samples / result.num_prompts)


@pytest.fixture(scope="module")
def multi_epoch():
    return load_benchmark_script("sampling_multi_epoch")


@pytest.fixture(scope="module")
def multi_epoch_run(benchmark, tmp_path_factory):
    out = tmp_path_factory.mktemp("multi_epoch")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        data = benchmark.main(["--multi-epoch", "--smoke", "--quiet", "--out", str(out)])
    return data, out, printed.getvalue()


@pytest.mark.slow
def test_multi_epoch_mode_writes_every_sampler_with_consistent_numbers(multi_epoch, multi_epoch_run):
    data, out, printed = multi_epoch_run
    assert "[base multi-epoch]" in printed and "calib. MAE" in printed
    assert (out / "sampling_efficiency_multi_epoch.png").read_bytes()[:8] == PNG_MAGIC
    specs = {spec.name: spec for spec in multi_epoch.build_multi_epoch_samplers()}
    assert {"GRPO n=4", "GRPO n=8", "GRPO n=16", "DAPO n=4 (gen B)", "balance M=8 N=4", "Est n=8"} <= set(specs)
    for budget in (4, 6, 8):
        assert {f"budget {budget}", f"memory + budget {budget}", f"budgeted balance B={budget}"} <= set(specs)
    assert "[base multi-epoch, Est side by side]" in printed and "trained/prompt" in printed
    results = json.loads((out / "multi_epoch.json").read_text())["results"]["base"]
    assert list(results) == list(specs) == list(data["results"]["base"])
    for name, values in results.items():
        spec = specs[name]
        memory = spec.plan.memory.enabled
        trained = values["samples_per_prompt"] if spec.family == "est" else spec.num_generations
        if spec.family == "dapo":  # n per filled slot; a batch left short after the last round trains fewer
            assert values["trained_per_prompt"] <= trained
        else:
            assert values["trained_per_prompt"] == trained
        if spec.family in ("grpo", "est"):
            assert values["samples_per_prompt"] == spec.num_generations and values["rounds"] == 1.0
        if spec.sample_budget is not None:
            assert spec.num_generations <= values["samples_per_prompt"] <= spec.sample_budget
        if spec.family != "dapo":
            assert values["rounds"] <= spec.max_rounds
        if spec.family == "refill":  # candidates: every trained prompt keeps n; at least the epochs' prompts consumed
            assert values["samples_per_prompt"] >= spec.num_generations
            assert values["prompts_drawn_per_slot"] >= 1.0 and values["epochs_consumed"] >= 2.0
            assert (values["skipped_per_slot"] > 0) <= (spec.skip_threshold is not None)
            continue
        assert values["epochs_consumed"] == (2.0 if spec.family != "dapo" else values["prompts_drawn_per_slot"] * 2)
        # 2 epochs: the second visits every prompt again, so a memory hits on exactly half of the visits
        assert values["memory_hit_fraction"] == (0.5 if memory else 0.0)
        assert (values["futile_fraction"] > 0) <= (spec.futility_threshold > 0)
        assert (values["predicted_pass_rate"] is not None) == memory  # NaN (null) without hits
    assert results["budget 4"]["samples_per_prompt"] == 4.0


def test_skip_coverage_mode_compares_the_rules_before_and_after_the_fix(benchmark, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        data = benchmark.main(["--multi-epoch", "--skip-coverage", "--smoke", "--quiet", "--out", str(tmp_path)])
    assert "[skip coverage]" in printed.getvalue() and (tmp_path / "skip_coverage.txt").is_file()
    results = json.loads((tmp_path / "skip_coverage.json").read_text())["results"]
    assert list(results) == list(data["results"])
    for sampler in ("n=4, 3x", "balance 4x8, 4 r/p, 3x"):
        rows = {rule: results[f"{sampler} | {rule}"] for rule in ("no skip", "before fix", "after fix")}
        assert rows["no skip"]["low_skipped"] == rows["no skip"]["zero_skipped"] == 0.0
        assert rows["after fix"]["low_starved"] == rows["after fix"]["third_starved"] == 0.0  # revisits guaranteed
        assert all(row["samples_per_prompt"] >= 4.0 for row in rows.values())


def test_skip_coverage_is_a_part_of_the_multi_epoch_mode(benchmark):
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as error:
        benchmark.main(["--skip-coverage", "--smoke"])
    names(error.getvalue(), "--skip-coverage", "add --multi-epoch")


def test_est_allocates_exactly_b_times_n_every_step_from_the_memory(multi_epoch):
    """The paper's Est in the simulation: one round per step whose allocation sums to B·n, every sample trained,
    the memory (λ = 0.9, Beta(1, 1)) updated with the pool counts; revisited prompts get unequal allocations."""
    from trl_ada.simulation import LearningPrompts, SimulatedPolicy, simulate_step

    spec = next(s for s in multi_epoch.build_multi_epoch_samplers() if s.name == multi_epoch.EST_PAPER)
    plan = spec.plan
    assert (plan.generation_schedule, plan.num_generations, plan.memory.decay, plan.objective.function) == (
        "est",
        8,
        0.9,
        "log",
    )
    memory = multi_epoch.new_memory(plan)
    assert memory.decay == 0.9 and memory.prior == (1.0, 1.0)
    rng = np.random.default_rng(0)
    prompts = LearningPrompts(multi_epoch.PROMPT_SETS[0].sample(rng, 32))
    batch, allocations = 16, []
    for step in range(6):  # three epochs of two steps
        ids = np.arange(32)[(step % 2) * batch : (step % 2 + 1) * batch]
        result, effective = multi_epoch.run_adaptive_step(spec, prompts.current[ids], step, memory, ids)
        assert result.samples == result.trained == batch * plan.num_generations
        assert result.rounds == 1 and effective.size == batch
        prompts.learn(ids, effective)
        allocations.append(result)
    assert [r.memory_hits for r in allocations] == [0, 0, batch, batch, batch, batch]
    sampler = simulate_step(SimulatedPolicy(prompts.current[:batch], seed=9), memory, np.arange(batch), plan)
    assert sampler.allocation.sum() == batch * plan.num_generations
    assert sampler.allocation.min() >= 2 and sampler.allocation.max() <= 32
    assert sampler.allocation.min() < sampler.allocation.max()  # the estimates differ, so do the sizes
