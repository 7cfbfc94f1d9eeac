"""The benchmarks' `--smoke` runs against the suite's server: they run, print a table, write files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def run_smoke(module: str, server_url: str, out, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m MODULE --smoke` against the suite's server, writing into `out`; it must succeed."""
    command = [sys.executable, "-m", module, "--smoke", "--quiet", "--server-url", server_url, "--out", str(out)]
    result = subprocess.run(
        command, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return result


def test_step_time_benchmark_smoke(vllm_server, tmp_path):
    result = run_smoke("benchmarks.vllm_step_time", vllm_server.base_url, tmp_path)
    print(result.stdout)
    summary = {row["method"]: row for row in json.loads((tmp_path / "results.json").read_text())["summary"]}
    assert list(summary) == ["grpo", "none", "pos", "balance", "streaming"]
    assert summary["grpo"]["ratio_to_grpo"] == 1.0
    # smoke: 4 prompts, n = 4, M = 4, N = 2; GRPO and `none` draw n per prompt in one request
    for method in ("grpo", "none"):
        assert summary[method]["samples"] == 16 and summary[method]["rounds"] == 1
    for method in ("pos", "balance"):
        assert 16 <= summary[method]["samples"] <= 32 and 1 <= summary[method]["rounds"] <= 2
        assert 0.0 <= summary[method]["rounds_2_to_N_share"] < 1.0
    # streaming balance: the pools hold n..M·N per prompt; requests include those cancelled after an exit
    streaming = summary["streaming"]
    assert 16 <= streaming["used_samples"] <= streaming["samples"] <= 32 and streaming["rounds"] is None
    assert streaming["cancelled_requests"] >= 0 and streaming["cancelled_tokens"] >= 0
    assert summary["balance"]["ratio_to_balance"] == 1.0
    assert all(row["length_min"] <= row["tokens_per_sample"] <= row["length_max"] <= 16 for row in summary.values())
    for method in summary:
        assert f"| {method} |" in result.stdout
    table_rows = [line for line in (tmp_path / "table.md").read_text().splitlines() if line.startswith("| ")]
    assert len(table_rows) == 2 + 5  # header, separator, one row per method
    assert (tmp_path / "steps.csv").is_file()


def test_async_engine_benchmark_smoke(vllm_server, tmp_path):
    result = run_smoke("benchmarks.async_engine", vllm_server.base_url, tmp_path)
    print(result.stdout)
    results = json.loads((tmp_path / "results.json").read_text())
    rows = {row["method"]: row for row in results["rows"]}
    assert list(rows) == ["sync streaming", "async balance"]
    # balance's pool holds between n = 4 and M·N = 32 completions per group; the server's count per trained group
    # also holds cancelled requests and, for the worker, what it drew ahead into its queue or let go stale (not
    # bounded by M·N over two timed steps: 42 in one run)
    for row in rows.values():
        assert row["groups_per_s"] > 0 and 4 <= row["pool_per_group"] <= 32 and row["samples_per_group"] > 0
    assert rows["sync streaming"]["staleness"] is None
    staleness = rows["async balance"]["staleness"]
    assert 0 <= staleness["mean"] <= staleness["max"] and 0.0 <= staleness["dropped"] < 1.0
    assert set(results["ratios"]) == {"async balance / sync streaming"}
    assert "async balance / sync streaming" in result.stdout


def test_real_learning_benchmark_smoke(smollm2_server, tmp_path):
    result = run_smoke("benchmarks.real_learning", smollm2_server.base_url, tmp_path, timeout=1800)
    print(result.stdout)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["settings"]["arms"] == ["Est n=8", "async balance", "async GRPO n=4"]
    for family in ("arithmetic", "capitals"):
        summary = results["summary"][family]
        assert summary["seeds"] == [0]
        for arm in ("Est n=8", "async balance", "async GRPO n=4"):
            curve = summary["arms"][arm]["curve"]
            assert len(curve) == 2 and curve[0]["mark_s"]["mean"] == 0.0 and curve[1]["mark_s"]["mean"] == 1.0
            run = json.loads(
                (
                    tmp_path / "runs" / "shared" / family / f"{arm.replace(' ', '_').replace('=', '')}-seed0.json"
                ).read_text()
            )
            # the budget (1 s) ends the run at the first step end; the mark gets the weights it started from
            assert len(run["steps"]) == 1 and run["steps"][0]["clock_s"] > 1.0 and run["steps"][0]["tokens"] > 0
            assert run["settings"]["order"] == "seeded passes, every arm in order"
            trained = run["coverage"]["order"]  # the step's groups, the seed's first prompts (the worker's in flight)
            facts = [row["fact"] for row in results["tasks"][family]["train"]]
            assert trained and set(trained) <= set(facts)
            assert 0 <= run["steps"][0]["signal"] <= run["steps"][0]["tokens"]
            assert run["geometry"] == "shared" and set(run["busy"]) == {"trainer", "engine", "both"}
            assert all(0.0 <= share <= 1.0 for share in run["busy"].values())
            (mark,) = run["marks"]
            assert (mark["step"], mark["tokens"]) == (0, 0.0)
            assert len(mark["eval"]["correct"]) == len(results["tasks"][family]["evaluation"])
            assert mark["eval"]["sync_gap"] < 1e-3 and mark["eval"]["entropy"] > 0
        kept = results["tasks"][family]["train"]
        assert 1 <= len(kept) <= 4
    control = [row for row in results["tasks"]["capitals"]["evaluation"] if row["split"] == "control"]
    assert len(control) == 2
    assert "| Est n=8 − " not in result.stdout  # no GRPO arm in the smoke run: nothing to compare with
    for name in ("tables.md", "pass_rates.png", "real_arithmetic.png", "real_capitals.png", "pass_rates.json"):
        assert (tmp_path / name).is_file()
    saved = {path: path.stat().st_mtime_ns for path in (tmp_path / "runs").rglob("*.json")}
    assert len(saved) == 2 * (1 + 3)  # per family: the base and three arms
    run_smoke("benchmarks.real_learning", smollm2_server.base_url, tmp_path, timeout=1800)  # resumes from disk
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "runs").rglob("*.json")} == saved
