"""`trl-ada demo` (trl_ada/cli/demo.py): both regimes in a smoke run, output files, the closing lines, bad options,
bad output directory, Ctrl-C; and the no-transfer regime's reading (`trl_ada.toy.results`) on hand-made records."""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest
from refusals import names

pytest.importorskip("matplotlib")

from trl_ada.cli import demo  # noqa: E402
from trl_ada.toy.results import probe_at, probe_reading, probe_summary  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REAL_MODEL_COMMAND = ".venv-vllm/bin/python -m benchmarks.real_learning"
STEP_FIELDS = {"step", "first_round_reward", "samples", "cumulative_samples", "frac_reward_zero_std", "wall_time"}
SUMMARY_FIELDS = {
    "steps",
    "initial_first_round_reward",
    "final_first_round_reward",
    "total_samples",
    "reward_gain_per_1k_samples",
    "mean_frac_reward_zero_std",
    "wall_time",
    "steps_to",
    "samples_to",
}
PROBE_POINT = {"step", "samples", "pass_rate", "hardest_third"}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One `--smoke` run: (exit code, stdout, stderr, parent dir, output dir)."""
    parent = tmp_path_factory.mktemp("demo")
    out = parent / "out"
    with contextlib.redirect_stdout(io.StringIO()) as stdout, contextlib.redirect_stderr(io.StringIO()) as stderr:
        code = demo.main(["--smoke", "--output_dir", str(out)])
    return code, stdout.getvalue(), stderr.getvalue(), parent, out


@pytest.mark.slow
def test_smoke_prints_both_regimes_and_ends_with_the_real_model_command(smoke_run):
    code, stdout, stderr, _, _ = smoke_run
    assert code == 0, stderr
    transfer, no_transfer = stdout.split("== Regime 2, no transfer")
    for text in ("GRPO n=4", "balance M=4 N=2", "first-round reward", "cum. samples", "Summary", "steps to 0.5"):
        assert text in transfer
    assert "What this regime shows: learning transfers" in transfer and "loses per generated sample" in transfer
    for text in ("hardest third", "within GRPO n=4's samples", "Per step:", "Per sample:"):
        assert text in no_transfer
    assert "What this regime shows: no transfer (transfer 0)" in no_transfer and "docs/choosing.md" in no_transfer
    assert stdout.endswith("\n".join(demo.REAL_MODEL_LINES) + "\n")  # the closing lines
    closing = stdout.rsplit("Total wall time", 1)[1]
    assert "toy tasks on a tiny random model" in closing and REAL_MODEL_COMMAND in closing
    assert "make test-vllm" in closing and "docs/benchmarks_real.md" in closing
    for regime in ("transfer", "no_transfer"):  # per-step progress lines
        assert f"[{regime}/grpo] step   1/2" in stderr and f"[{regime}/balance] step   2/2" in stderr
    assert "hardest third" in stderr.split("[no_transfer/grpo] step   1/2")[1].splitlines()[0]
    assert "{'loss'" not in stdout + stderr  # no raw log dicts from the Trainer


@pytest.mark.slow
def test_smoke_writes_both_regimes_into_json_png_and_txt(smoke_run):
    _, stdout, _, parent, out = smoke_run
    assert sorted(p.name for p in out.iterdir()) == sorted(demo.RESULT_FILES)
    assert (out / "demo.png").read_bytes()[:8] == PNG_MAGIC
    text = (out / "demo.txt").read_text()
    assert text.startswith("== Regime 1, transfer") and text.endswith("\n".join(demo.REAL_MODEL_LINES) + "\n")
    data = json.loads((out / "demo.json").read_text())
    assert list(data) == ["config", "regimes"]
    assert data["config"] == {
        "seed": 0,
        "smoke": True,
        "regimes": ["transfer", "no_transfer"],
        "methods": {name: data["config"]["methods"][name] for name in ("grpo", "balance")},
        "smoothing_window": 5,
        "targets": [0.5, 0.7],
    }
    assert data["config"]["methods"]["balance"]["samples_per_round"] == 4  # smoke: M=4, N=2
    assert data["config"]["methods"]["balance"]["max_rounds"] == 2
    assert list(data["regimes"]) == ["transfer", "no_transfer"]
    for name, regime in data["regimes"].items():
        assert list(regime) == ["task", "steps", "summary", "records"] and regime["steps"] == 2
        assert regime["task"]["prompts_per_step"] == 2
        assert list(regime["summary"]) == list(regime["records"]) == ["grpo", "balance"]
        grpo, balance = regime["records"]["grpo"], regime["records"]["balance"]
        assert [r["step"] for r in grpo] == [r["step"] for r in balance] == [1, 2]
        assert all(r["samples"] == 2 * 4 for r in grpo)  # plain GRPO: prompts per step x n
        assert all(r["samples"] >= 2 * 4 for r in balance)  # at least one round of M=4 per prompt
        assert balance[-1]["cumulative_samples"] == sum(r["samples"] for r in balance)
        for record in grpo + balance:
            assert set(record) >= STEP_FIELDS
            assert 0.0 <= record["first_round_reward"] <= 1.0 and 0.0 <= record["frac_reward_zero_std"] <= 1.0
        probed = name == "no_transfer"
        for method, summary in regime["summary"].items():
            assert set(summary) == SUMMARY_FIELDS | ({"probe"} if probed else set())
            assert summary["total_samples"] == regime["records"][method][-1]["cumulative_samples"]
        if not probed:
            assert regime["task"]["family"] == "letters"
            assert all(r["eval_pass_rate"] is None for r in grpo + balance)  # no probe
            continue
        task = regime["task"]
        assert (task["family"], task["transfer"], task["pass_rate_band"]) == ("keyed", 0.0, [0.0, 0.375])
        assert (task["eval_every"], task["eval_samples"]) == (1, 4)
        for record in grpo + balance:  # a probe every step
            assert 0.0 <= record["eval_pass_rate"] <= 1.0 and 0.0 <= record["eval_pass_rate_hard"] <= 1.0
        for method, summary in regime["summary"].items():
            assert list(summary["probe"]) == ["final", "within_budget"]
            final = summary["probe"]["final"]
            assert set(final) == PROBE_POINT and final["step"] == 2
            last = regime["records"][method][-1]
            assert final["hardest_third"] == last["eval_pass_rate_hard"]
            assert final["samples"] == last["cumulative_samples"]
        grpo_total = regime["summary"]["grpo"]["total_samples"]
        assert regime["summary"]["grpo"]["probe"]["within_budget"]["step"] == 2  # its own whole run
        within = [r for r in balance if r["cumulative_samples"] <= grpo_total]
        expected = within[-1]["step"] if within else None  # None: JSON's NaN
        assert regime["summary"]["balance"]["probe"]["within_budget"]["step"] == expected
    assert [p.name for p in parent.iterdir()] == ["out"]  # the staging directory was moved, not left behind
    assert "Regime 1, transfer" in stdout and "Regime 2, no transfer" in stdout


def test_regimes_and_steps_options_select_and_size_the_runs():
    args = demo.parse_args(["--regimes", "no_transfer", "--methods", "pos, grpo", "--steps", "7"])
    assert [r.name for r in args.regimes] == ["no_transfer"] and [r.steps for r in args.regimes] == [7]
    assert [m.name for m in args.methods] == ["pos", "grpo"]
    defaults = demo.parse_args([])
    assert [(r.name, r.steps) for r in defaults.regimes] == [("transfer", 50), ("no_transfer", 40)]
    assert [m.name for m in defaults.methods] == ["grpo", "balance"]
    no_transfer = defaults.regimes[1].settings
    assert (no_transfer.family, no_transfer.transfer, no_transfer.pass_rate_band) == ("keyed", 0.0, (0.0, 0.375))
    assert no_transfer.eval_every == 5 and defaults.regimes[0].settings.eval_every == 0
    smoke = demo.parse_args(["--smoke", "--regimes", "transfer,no_transfer,transfer"])
    assert [(r.name, r.steps, r.settings.prompts_per_step) for r in smoke.regimes] == [
        ("transfer", 2, 2),
        ("no_transfer", 2, 2),
    ]
    assert smoke.regimes[1].settings.eval_every == 1 and smoke.regimes[0].settings.eval_every == 0


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--regimes", "transfer,paper"], ["--regimes 'transfer,paper'", "'paper'", "transfer, no_transfer"]),
        (["--regimes", ","], ["--regimes ','", "empty list", "transfer, no_transfer"]),
        (["--methods", "grpo,nope"], ["--methods 'grpo,nope'", "'nope'", "grpo, balance, pos"]),
        (["--steps", "0"], ["--steps 0", "at least 1", "e.g. --steps 50"]),
        (["--steps", "many"], ["argument --steps", "'many'", "`trl-ada demo --help`"]),
        (["--regime", "transfer"], ["--regime transfer", "`trl-ada demo --help`"]),
    ],
)
def test_bad_options_get_one_line_naming_option_value_and_fix(tmp_path, capsys, argv, fragments):
    assert demo.main([*argv, "--output_dir", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("trl-ada demo: error: ")
    names(captured.err, *fragments)
    assert not (tmp_path / "out").exists()


def test_unwritable_output_dir_fails_before_training(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = blocker / "results"

    def no_training(*args, **kwargs):
        raise AssertionError("training started despite an unusable output directory")

    monkeypatch.setattr(demo, "run_method", no_training)
    assert demo.main(["--smoke", "--output_dir", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and str(out) in error and "error" in error
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"] and blocker.read_text() == "not a directory"


@pytest.mark.parametrize("existing", [False, True])
@pytest.mark.slow
def test_ctrl_c_leaves_no_partial_results(tmp_path, monkeypatch, capsys, existing):
    out = tmp_path / "out"
    if existing:  # results of an earlier run stay as they were
        out.mkdir()
        (out / "demo.json").write_text("old")
    real_run_method, trained = demo.run_method, []

    def interrupted_after_first_method(spec, *args, **kwargs):
        if trained:
            raise KeyboardInterrupt
        trained.append(spec.name)
        return real_run_method(spec, *args, **kwargs)

    monkeypatch.setattr(demo, "run_method", interrupted_after_first_method)
    assert demo.main(["--smoke", "--output_dir", str(out)]) == 130
    assert trained == ["grpo"]
    captured = capsys.readouterr()
    assert "interrupted" in captured.err and "balance M=4 N=2 (transfer)" in captured.err
    assert str(out) in captured.err and "Summary" not in captured.out
    if existing:
        assert [p.name for p in out.iterdir()] == ["demo.json"] and (out / "demo.json").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if existing else [])


# ----------------------------------------------------------------------------------------------------------------
# The no-transfer reading, on hand-made records
# ----------------------------------------------------------------------------------------------------------------


def _records(samples_per_step: int, hardest: dict[int, float], overall: dict[int, float]) -> list[dict]:
    """Step records of a run of 4 steps, probed at the steps in `hardest`."""
    nan = math.nan
    return [
        {
            "step": step,
            "cumulative_samples": float(step * samples_per_step),
            "eval_pass_rate": overall.get(step, nan),
            "eval_pass_rate_hard": hardest.get(step, nan),
        }
        for step in range(1, 5)
    ]


GRPO = _records(32, {2: 0.125, 4: 0.25}, {2: 0.3, 4: 0.5})
BALANCE = _records(100, {2: 0.5, 4: 0.75}, {2: 0.4, 4: 0.625})


def test_probe_summary_reads_the_last_probe_and_the_last_within_the_budget():
    summary = probe_summary(BALANCE, budget=250)
    assert summary["final"] == {"step": 4.0, "samples": 400.0, "pass_rate": 0.625, "hardest_third": 0.75}
    assert summary["within_budget"] == {"step": 2.0, "samples": 200.0, "pass_rate": 0.4, "hardest_third": 0.5}
    within = probe_summary(BALANCE, budget=128)["within_budget"]  # no probe within 128 samples: NaN throughout
    assert set(within) == PROBE_POINT and all(math.isnan(value) for value in within.values())
    assert probe_at(GRPO, "cumulative_samples", 127)["step"] == 2  # the last probe at or within the budget


def test_probe_reading_says_per_step_and_per_sample_which_is_ahead():
    from trl_ada.toy.results import summarize

    specs = [demo.DEMO_METHODS["grpo"], demo.DEMO_METHODS["balance"]]
    summaries = {}
    for spec, records in zip(specs, (GRPO, BALANCE), strict=True):
        full = [{**r, "first_round_reward": 0.0, "frac_reward_zero_std": 0.0, "wall_time": 1.0} for r in records]
        budget = GRPO[-1]["cumulative_samples"]
        summaries[spec.name] = summarize(full, [0.5]) | {"probe": probe_summary(records, budget)}
    lines = probe_reading(specs, summaries).splitlines()
    assert lines == [
        "Reading (the probe's pass rate, overall and on the hardest third):",
        "- Per step: after 4 steps balance M=8 N=4 is ahead of GRPO n=4 on the hardest third, 0.750 vs 0.250 "
        "(+0.500; overall 0.625 vs 0.500).",
        "- Per sample: balance M=8 N=4 generated 400 samples (3.1x GRPO n=4's); it had not reached its first probe "
        "within GRPO n=4's 128 samples.",
        "- One seed, and the hardest third is a few items: one item moves it by a quarter or more.",
    ]
    summaries["balance"]["probe"] = probe_summary(BALANCE, budget=250)  # a probe within the budget, behind
    summaries["grpo"]["total_samples"] = 250.0
    summaries["grpo"]["probe"]["final"]["hardest_third"] = 0.625
    assert probe_reading(specs, summaries).splitlines()[2] == (
        "- Per sample: balance M=8 N=4 generated 400 samples (1.6x GRPO n=4's); within GRPO n=4's 250 samples "
        "(balance M=8 N=4's probe at step 2) it was behind GRPO n=4's end of run on the hardest third, 0.500 vs 0.625."
    )
    assert probe_reading(specs[1:], {"balance": summaries["balance"]}) == ""  # no GRPO to compare with
