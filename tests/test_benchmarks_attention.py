"""benchmarks/async_attention.py: the synchronous batch holds the tree's samples, and the smoke run agrees across arms
and writes its files (its times are not checked)."""

from __future__ import annotations

import json

from conftest import load_benchmark_script

async_attention = load_benchmark_script("async_attention")


def test_the_padded_batch_holds_every_sample_of_the_tree():
    settings = async_attention.Settings.smoke()
    batch = async_attention.micro_batch(settings, seed=0)
    grid = batch.grid
    assert grid.shape[0] == settings.prompts * settings.completions
    real = grid >= 0
    for row in grid:  # a sample is a root-to-leaf path, without gaps
        columns = row.ge(0).nonzero().flatten()
        assert columns[-1] - columns[0] + 1 == len(columns)
        assert batch.tree["position_ids"][row[columns]].tolist() == list(range(len(columns)))
    assert set(grid[real].tolist()) == set(range(len(batch.tree["input_ids"])))  # every packed token is in a sample


def test_smoke_run_agrees_across_arms_and_writes_its_files(tmp_path, capsys):
    results = async_attention.main(["--smoke", "--out", str(tmp_path), "--repeats", "2", "--warmup", "0"])
    assert "| segment rows (trl_ada) |" in capsys.readouterr().out
    assert {row["arm"] for row in results["rows"]} == {
        "per-segment loop",
        "one dense mask",
        "segment rows (trl_ada)",
        async_attention.BASELINE,
    }
    assert max(max(d.values()) for d in results["differences"]) < 1e-5
    assert all(len(times) == 2 for times in results["times_ms"].values())
    assert json.loads((tmp_path / "results.json").read_text())["settings"]["repeats"] == 2
    assert (tmp_path / "table.md").is_file()
