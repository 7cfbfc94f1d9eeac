"""`trl-ada demo` (trl_ada/cli/demo.py): smoke run, output files, bad output directory, Ctrl-C."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

pytest.importorskip("matplotlib")

from trl_ada.cli import demo  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One `--smoke` run: (exit code, stdout, stderr, parent dir, output dir)."""
    parent = tmp_path_factory.mktemp("demo")
    out = parent / "out"
    with contextlib.redirect_stdout(io.StringIO()) as stdout, contextlib.redirect_stderr(io.StringIO()) as stderr:
        code = demo.main(["--smoke", "--output_dir", str(out)])
    return code, stdout.getvalue(), stderr.getvalue(), parent, out


@pytest.mark.slow
def test_smoke_prints_tables_and_summary(smoke_run):
    code, stdout, stderr, _, _ = smoke_run
    assert code == 0, stderr
    for text in ("GRPO n=4", "balance M=4 N=2", "first-round reward", "zero-std groups", "cum. samples", "Summary"):
        assert text in stdout
    assert "Regime: full transfer" in stdout and "docs/choosing.md" in stdout  # which regime, and the guide
    assert "[grpo] step   1/2" in stderr and "[balance] step   2/2" in stderr  # per-step progress lines
    assert "{'loss'" not in stdout + stderr  # no raw log dicts from the Trainer


@pytest.mark.slow
def test_smoke_writes_png_and_json_with_both_methods(smoke_run):
    _, _, _, parent, out = smoke_run
    assert sorted(p.name for p in out.iterdir()) == sorted(demo.RESULT_FILES)
    assert (out / "demo.png").read_bytes()[:8] == PNG_MAGIC
    data = json.loads((out / "demo.json").read_text())
    assert list(data["steps"]) == ["grpo", "balance"] == list(data["summary"])
    grpo, balance = data["steps"]["grpo"], data["steps"]["balance"]
    assert len(grpo) == len(balance) == data["config"]["steps"] == 2
    assert [r["step"] for r in grpo] == [r["step"] for r in balance] == [1, 2]
    assert all(r["samples"] == 2 * 4 for r in grpo)  # plain GRPO: prompts per step x n
    assert all(r["samples"] >= 2 * 4 for r in balance)  # at least one round of M=4 per prompt
    assert balance[-1]["cumulative_samples"] == sum(r["samples"] for r in balance)
    for record in grpo + balance:
        assert 0.0 <= record["first_round_reward"] <= 1.0
        assert 0.0 <= record["frac_reward_zero_std"] <= 1.0
    assert [p.name for p in parent.iterdir()] == ["out"]  # the staging directory was moved, not left behind


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
    assert "interrupted" in captured.err and "balance" in captured.err and str(out) in captured.err
    assert "Summary" not in captured.out
    if existing:
        assert [p.name for p in out.iterdir()] == ["demo.json"] and (out / "demo.json").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if existing else [])


def test_bad_methods_is_a_usage_error(tmp_path, capsys):
    assert demo.main(["--methods", "grpo,nope", "--output_dir", str(tmp_path / "out")]) == 2
    assert "nope" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
