"""benchmarks/gpu_cost_model.py: the calibration's arithmetic, and the smoke run's table and files."""

from __future__ import annotations

import json

import pytest
from conftest import load_benchmark_script

gpu_cost_model = load_benchmark_script("gpu_cost_model")


def test_the_calibration_reproduces_the_baseline_and_splits_it_as_published():
    baseline = {"engine_time": 500.0, "trained": 256.0}
    calibration = gpu_cost_model.calibrate(baseline, total=102.0, training=15.0)
    assert calibration.step_time(500.0, 256.0) == pytest.approx(102.0)
    assert calibration.per_trained_sample * 256.0 == pytest.approx(15.0)
    # twice the engine time and twice the trained samples: twice each part
    assert calibration.step_time(1000.0, 512.0) == pytest.approx(2 * 87.0 + 2 * 15.0)


def test_every_row_of_table_3_is_modelled_with_the_library_samplers():
    methods = {method.name: method for method in gpu_cost_model.METHODS}
    assert set(methods) == set(gpu_cost_model.TABLE_3[0].published) == set(gpu_cost_model.TABLE_3[1].published)
    assert (methods["Est"].trained_per_prompt, methods["Est"].plan.num_generations) == (8, 8)
    assert methods["Seq-balance"].plan.section.cap == 32 and methods["GRPO n=4"].plan.section.exits(4).max_rounds == 1


def test_smoke_run_fits_the_baseline_exactly_and_writes_its_files(tmp_path, capsys):
    data = gpu_cost_model.main(["--smoke", "--out", str(tmp_path)])
    assert "Modelled step time" in capsys.readouterr().out
    for result in data["results"]:
        for paper in result["table_3"]:
            baseline = paper["rows"]["GRPO n=4"]
            assert baseline["fitted"] and baseline["predicted"] == pytest.approx(baseline["published"])
            assert all(row["predicted"] > 0 for row in paper["rows"].values())
        generation = result["generation"]
        assert generation["GRPO n=4"]["samples"][0] == 4 * result["prompts"]
        assert generation["Est"]["samples"][0] == 8 * result["prompts"]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [r["prompt_set"] for r in saved["results"]] == ["base", "hard"]
    assert (tmp_path / "table.txt").read_text().startswith("Modelled step time")
