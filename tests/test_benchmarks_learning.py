"""Smoke test of benchmarks/learning.py: it trains every method, prints its tables, writes JSON, CSV and a PNG."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math

import numpy as np
import pytest
from conftest import load_benchmark_script
from refusals import names

pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LABELS = ["GRPO n=4", "GRPO n=16", "pos M=4 N=2", "balance M=4 N=2"]


@pytest.fixture(scope="module")
def benchmark():
    return load_benchmark_script("learning")


@pytest.fixture(scope="module")
def smoke_run(benchmark, tmp_path_factory):
    """One `--smoke` run: (returned data, output dir, stdout)."""
    out = tmp_path_factory.mktemp("learning")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        data = benchmark.main(["--smoke", "--quiet", "--out", str(out)])
    return data, out, printed.getvalue()


@pytest.mark.slow
def test_smoke_prints_tables_with_every_method(smoke_run):
    _, _, printed = smoke_run
    for text in ("Target: first-round reward 0.5", "Target: first-round reward 0.7", "steps vs GRPO n=4", *LABELS):
        assert text in printed


@pytest.mark.slow
def test_smoke_writes_figure_json_and_csv(smoke_run):
    data, out, _ = smoke_run
    assert (out / "learning.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "tables.txt").read_text().strip()
    on_disk = json.loads((out / "results.json").read_text())
    assert list(on_disk["summaries"]) == list(on_disk["runs"]) == LABELS == list(data["summaries"])
    steps = on_disk["config"]["steps"]
    for label, per_seed in on_disk["runs"].items():
        assert list(per_seed) == ["0"]
        assert [r["step"] for r in per_seed["0"]] == list(range(1, steps + 1)), label
    grpo16 = on_disk["runs"]["GRPO n=16"]["0"]
    assert all(r["samples"] == 2 * 16 for r in grpo16)  # prompts per step x n
    with (out / "steps.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(LABELS) * steps
    assert {row["method"] for row in rows} == set(LABELS)


def test_summaries_and_ratios_on_synthetic_runs(benchmark):
    def run(rise_at: int, per_step: float) -> list[dict]:
        return [
            {
                "step": k,
                "first_round_reward": 1.0 if k >= rise_at else 0.0,
                "cumulative_samples": per_step * k,
                "frac_reward_zero_std": 0.5,
                "wall_time": float(k),
            }
            for k in range(1, 21)
        ]

    summaries = {
        "GRPO n=4": benchmark.summarize_method({0: run(10, 32), 1: run(12, 32)}, (0.5,)),
        "balance": benchmark.summarize_method({0: run(5, 128), 1: run(100, 128)}, (0.5,)),
    }
    benchmark.add_ratios(summaries, (0.5,), baseline="GRPO n=4")
    # smoothed over 5 steps, a jump from 0 to 1 at step s reaches 0.5 at step s + 2
    assert summaries["GRPO n=4"]["steps_to_0.5"]["values"] == [12, 14]
    assert summaries["GRPO n=4"]["steps_to_0.5"]["ratio_vs_baseline"] == pytest.approx(1.0)
    balance = summaries["balance"]["steps_to_0.5"]
    assert balance["reached"] == 1 and math.isnan(balance["values"][1])
    assert balance["ratio_vs_baseline"] == pytest.approx(7 / 13)
    assert summaries["balance"]["samples_to_0.5"]["ratio_vs_baseline"] == pytest.approx(7 * 128 / (13 * 32))
    table = benchmark.target_table(summaries, 0.5, num_seeds=2)
    assert "1/2" in table and "0.54" in table


def test_budgeted_methods_compare_at_equal_samples(benchmark):
    methods = {spec.label: spec for spec in benchmark.build_budgeted_methods()}
    labels = ["GRPO n=4", "GRPO n=8", "balance M=8 N=4", "budgeted balance B=8", "budgeted balance B=4"]
    assert list(methods) == labels
    for budget in (8, 4):
        options = dict(methods[f"budgeted balance B={budget}"].options)
        assert options["sample_budget"] == budget and options["pass_rate_memory"]
        assert (options["first_round"], options["later_rounds"]) == ("prior", "prior")
        assert methods[f"budgeted balance B={budget}"].max_rounds == 3
    assert benchmark.parse_args(["--budgeted"]).seeds == 5


def test_refill_methods_compare_dapo_balance_est_and_their_combinations(benchmark):
    methods = {spec.label: spec for spec in benchmark.build_refill_methods()}
    assert list(methods)[:5] == ["GRPO n=4", "GRPO n=8", "balance M=8 N=4", "budgeted balance B=4", "DAPO 3x"]
    dapo = methods["DAPO 3x"]
    assert (dapo.exit_rule, dapo.samples_per_round, dapo.max_rounds, dapo.num_generations) == ("mixed", 4, 4, 4)
    assert dict(dapo.options) == {"prompt_oversampling": 3.0, "rounds_per_prompt": 1}
    skipping = [label for label, spec in methods.items() if "skip_threshold" in dict(spec.options)]
    assert skipping == [
        "DAPO 3x + skip",
        "n=4 + skip",
        "balance 4x8, 4 r/p, 3x + skip",
        "budgeted balance B=8, 3x + skip",
    ]
    for label in skipping:
        options = dict(methods[label].options)
        assert options["pass_rate_memory"] and options["prompt_oversampling"] == 3.0
    assert dict(methods["budgeted balance B=4"].options)["sample_budget"] == 4
    args = benchmark.parse_args(["--refill"])
    assert (args.seeds, args.steps, args.prompts) == (5, 60, 8)
    with pytest.raises(SystemExit):
        benchmark.parse_args(["--refill", "--budgeted"])


@pytest.mark.slow
def test_refill_smoke_probes_the_pass_rate_and_counts_every_candidate_sampled(benchmark, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        data = benchmark.main(["--refill", "--smoke", "--quiet", "--out", str(tmp_path)])
    names(printed.getvalue(), "Target: pass rate 0.7", "every task prompt")
    assert (tmp_path / "learning.png").read_bytes()[:8] == PNG_MAGIC
    runs = {label: per_seed["0"] for label, per_seed in data["runs"].items()}
    assert len(runs) == len(benchmark.build_refill_methods(smoke=True))
    for label, records in runs.items():
        assert [r["step"] for r in records] == [1, 2], label
        assert math.isnan(records[0]["eval_pass_rate"]) and 0 <= records[1]["eval_pass_rate"] <= 1  # every 2 steps
    for record in runs["DAPO 3x"] + runs["DAPO 3x + skip"]:  # one round of 4 per sampled candidate, kept or not
        assert record["samples"] == 4 * record["refill_sampled"] >= 4 * 2
    assert all(r["samples"] == 2 * 4 for r in runs["n=4 + skip"])  # one round: the batch's 2 slots x 4
    assert data["summaries"]["DAPO 3x"]["curve"] == "eval_pass_rate"
    assert data["first_round_summaries"]["DAPO 3x"]["curve"] == "first_round_reward"


def test_keyed_family_options_and_their_one_line_errors(benchmark, capsys):
    settings = benchmark.parse_args(["--family", "keyed", "--transfer", "0.5"]).settings
    assert (settings.family, settings.transfer, settings.pass_rate_band) == ("keyed", 0.5, (0.0, 0.375))
    assert (settings.eval_every, settings.eval_samples) == (2, 16)
    assert benchmark.parse_args(["--band", "0", "0.5"]).settings.pass_rate_band == (0.0, 0.5)
    assert benchmark.parse_args([]).settings == benchmark.TaskSettings(prompts_per_step=8)
    with pytest.raises(SystemExit):
        benchmark.parse_args(["--family", "keyed", "--transfer", "2"])
    assert "transfer=2.0 is outside [0, 1]; use 0" in capsys.readouterr().err
    assert benchmark.milestones(settings, steps=10) == [80.0, 160.0, 240.0, 320.0]


def test_objective_methods_run_presets_without_round_fields(benchmark, tmp_path):
    from trl_ada.config import ReinforceAdaConfig
    from trl_ada.toy.experiment import TaskSettings, _config_kwargs

    methods = {spec.label: spec for spec in benchmark.build_objective_methods()}
    assert list(methods) == [
        "GRPO n=4",
        "GRPO n=8",
        "balance M=8 N=4",
        "balance M=8 N=4 log",
        "Est n=8",
        "Est n=8 linear",
        "Est n=8 explicit",
        "Est n=8 implicit",
        "budgeted balance B=8",
    ]
    est = _config_kwargs(methods["Est n=8"], TaskSettings(), steps=2, seed=0, output_dir=tmp_path)
    assert est["sampling"] == "est" and est["num_generations"] == 8
    assert not {"exit_rule", "samples_per_round", "max_rounds"} & set(est)
    config = ReinforceAdaConfig(**est)
    assert (config.generation_schedule, config.objective, config.objective_weighting) == ("est", "log", "hybrid")
    explicit = _config_kwargs(methods["Est n=8 explicit"], TaskSettings(), steps=2, seed=0, output_dir=tmp_path)
    assert ReinforceAdaConfig(**explicit).objective_weighting == "explicit"
    log = _config_kwargs(methods["balance M=8 N=4 log"], TaskSettings(), steps=2, seed=0, output_dir=tmp_path)
    assert (log["exit_rule"], log["objective"]) == ("balance", "log")
    assert benchmark.parse_args(["--objectives"]).seeds == 5


def test_objective_summaries_count_trained_samples_spikes_and_the_hardest_third(benchmark):
    def run(rise_at: int, trained_per_step: float) -> list[dict]:
        records = [
            {
                "step": k,
                "first_round_reward": 1.0 if k >= rise_at else 0.0,
                "cumulative_samples": 64.0 * k,
                "cumulative_trained_samples": trained_per_step * k,
                "frac_reward_zero_std": 0.5,
                "wall_time": float(k),
                "loss": 10.0 if k == 3 else 1.0,
                "grad_norm": 4.0 if k == 5 else 1.0,
            }
            for k in range(1, 21)
        ]
        records[-1].update(dict.fromkeys(benchmark.DIFFICULTY_COLUMNS, 0.5))
        return records

    summary = benchmark.summarize_objectives({0: run(10, 32), 1: run(12, 64)}, (0.5,))
    assert summary["steps_to_0.5"]["values"] == [12, 14]  # smoothed over 5 steps
    assert summary["trained_to_0.5"]["values"] == [12 * 32, 14 * 64]
    assert summary["trained_per_step"]["values"] == [32, 64]
    assert summary["loss_spikes"]["values"] == [1, 1]
    assert summary["grad_norm_spikes"]["values"] == [1, 1]  # 4 > 3 x the median 1
    assert summary["grad_norm_max"]["values"] == [4, 4]
    assert summary["final_hard_third_pass_rate"]["mean"] == 0.5
    assert benchmark.spikes([1.0, -1.0, 6.0, float("nan")]) == 1
    hardest = benchmark.hardest_third(np.array([0.5, 0.0, 0.0, 0.2, 0.9, 0.0]), [1, 4, 5, 2, 1, 3])
    assert list(hardest) == [2, 1]  # the lowest pass rates; ties: the larger letter count first


@pytest.mark.slow
def test_objectives_smoke_records_trained_samples_loss_and_difficulty(benchmark, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        data = benchmark.main(["--objectives", "--smoke", "--quiet", "--out", str(tmp_path)])
    assert "trained vs GRPO n=8" in printed.getvalue() and "hardest third" in printed.getvalue()
    assert (tmp_path / "learning.png").read_bytes()[:8] == PNG_MAGIC
    for label, per_seed in data["runs"].items():
        records = per_seed["0"]
        spec = next(s for s in benchmark.build_objective_methods(smoke=True) if s.label == label)
        assert all(r["trained_samples"] == 2 * spec.num_generations for r in records), label
        assert all(math.isfinite(r["loss"]) and r["grad_norm"] >= 0 for r in records), label
        assert 0 <= records[-1]["final_hard_third_pass_rate"] <= records[-1]["final_pass_rate"] + 1, label
    est = data["runs"]["Est n=8"]["0"]
    assert [r["samples"] for r in est] == [16, 16]  # B·n generated, every sample trained
