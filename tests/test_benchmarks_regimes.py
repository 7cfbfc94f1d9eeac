"""The regimes benchmark's bookkeeping: modelled hours per step, probes at equal budgets, cost to a target, and the
central comparison, on hand-built step records."""

from __future__ import annotations

import math

import pytest

from benchmarks.gpu_hours import StepPricer
from benchmarks.learning_regimes import (
    add_gpu_hours,
    baseline_budgets,
    build_regime_methods,
    central_claim,
    first_reaching,
    probe_at,
    summarize,
)
from trl_ada.toy.experiment import MethodSpec

NAN = math.nan


def _record(step: int, samples: float, pass_rate: float = NAN, hard: float = NAN, rounds=(32.0,)) -> dict:
    record = {"step": step, "cumulative_samples": samples, "eval_pass_rate": pass_rate, "eval_pass_rate_hard": hard}
    record.update({"eval_pass_at_8": pass_rate, "eval_entropy": 1.0})
    record.update({f"samples_round_{r + 1}": float(c) for r, c in enumerate(rounds)})
    return record


def test_every_preset_is_in_the_comparison_and_builds():
    labels = [spec.label for spec in build_regime_methods()]
    expected = [
        "GRPO n=4",
        "GRPO n=8",
        "GRPO n=16",
        "DAPO 3x",
        "Seq-pos",
        "Seq-balance",
        "Est n=8",
        "Pilot-Commit n=8",
    ]
    assert labels == [*expected, "budgeted balance", "GRPO n=4 + skip"]


def test_gpu_hours_price_each_step_by_its_rounds_and_trained_rows():
    pricer = StepPricer(prompts_per_step=8)
    grpo = [_record(1, 32), _record(2, 64)]
    add_gpu_hours(grpo, MethodSpec("g", "GRPO n=4"), pricer)
    assert [r["gpu_hours"] for r in grpo] == pytest.approx([102 / 3600, 204 / 3600])
    rounds = [_record(1, 64, rounds=(32.0, 32.0))]
    add_gpu_hours(rounds, MethodSpec("b", "Seq-balance", trainer="reinforce_ada", exit_rule="balance"), pricer)
    assert rounds[0]["gpu_hours"] > 102 / 3600  # a second round costs its own engine time
    assert rounds[0]["gpu_hours_table3"] == pytest.approx(rounds[0]["gpu_hours"] * 290 / 397)  # Table 3's ratio


def test_probe_at_a_budget_is_the_last_probe_within_it_and_targets_the_first_reaching():
    records = [_record(1, 32), _record(2, 64, 0.2, 0.0), _record(3, 96), _record(4, 128, 0.4, 0.1)]
    assert probe_at(records, "cumulative_samples", 100)["step"] == 2
    assert probe_at(records, "cumulative_samples", 128)["step"] == 4
    assert probe_at(records, "cumulative_samples", 50) == {}
    assert first_reaching(records, 0.3)["cumulative_samples"] == 128
    assert first_reaching(records, 0.5) == {}


def test_summaries_and_the_central_comparison_by_hand():
    def run(hard: float) -> list[dict]:
        records = [_record(1, 32, 0.1, hard / 2), _record(2, 64, 0.3, hard)]
        for r, hours in zip(records, (0.5, 1.0), strict=True):
            r["gpu_hours"] = r["gpu_hours_table3"] = hours
        return records

    baseline = {0: run(0.1), 1: run(0.2)}
    budgets = baseline_budgets(baseline)
    hours = {0.5: 0.5, 1.0: 1.0}
    assert budgets == {"cumulative_samples": {0.5: 32.0, 1.0: 64.0}, "gpu_hours": hours, "gpu_hours_table3": hours}
    summaries = {
        "GRPO n=4": summarize(baseline, budgets),
        "GRPO n=16": summarize({0: run(0.3), 1: run(0.3)}, budgets),
        "Seq-balance": summarize({0: run(0.4), 1: run(0.4)}, budgets),
    }
    at_hours = summaries["Seq-balance"]["at_budget"]["gpu_hours"]["1.0"]["hardest third"]
    assert at_hours["values"] == [0.4, 0.4]
    assert summaries["GRPO n=4"]["to_target"]["0.3"]["samples"]["mean"] == 64
    claim = central_claim(summaries).splitlines()
    assert claim[0].startswith("Seq-balance - GRPO n=4 on the hardest third")
    assert "+0.250 ± 0.050" in claim[0]  # differences 0.3 and 0.2 (population std)
    assert "(2/2 seeds higher; larger than the spread)" in claim[0]
    assert "+0.100 ± 0.000" in claim[1]
    assert "scaled to Table 3" in claim[2] and len(claim) == 4
