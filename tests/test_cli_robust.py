"""The command line under bad input: checked before any expensive work, one error line, exit 2, nothing overwritten."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from refusals import names

from trl_ada import cli
from trl_ada.cli import evaluate, select_prompts
from trl_ada.run_dir import SAVING_MARKER

pytestmark = pytest.mark.xdist_group("trainer")

PROBLEMS = [{"problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(8)]


@pytest.fixture(autouse=True)
def fresh_log_handler():
    """The CLI adds a stderr handler to the `trl_ada` logger once; let each test's captured stderr receive it."""
    package_logger = logging.getLogger("trl_ada")
    saved = package_logger.handlers[:]
    package_logger.handlers.clear()
    yield
    package_logger.handlers[:] = saved


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _one_error_line(capsys, command: str) -> str:
    """The error of `command`: the last line of stderr, no traceback before it."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"trl-ada {command}: error: ")
    return line


def _no_sampling(monkeypatch):
    monkeypatch.setattr(select_prompts, "select_prompts", lambda *a, **k: pytest.fail("sampled before the check"))
    monkeypatch.setattr(evaluate, "avg_at_k", lambda *a, **k: pytest.fail("sampled before the check"))


@pytest.fixture
def problems(tmp_path) -> str:
    return _jsonl(tmp_path / "problems.jsonl", PROBLEMS)


@pytest.fixture
def earlier_selection(tmp_path) -> Path:
    """An `--output` that already holds a selection."""
    path = tmp_path / "selected"
    path.mkdir()
    (path / "prompts.jsonl").write_text(json.dumps(PROBLEMS[0]) + "\n")
    return path


# --------------------------------------------------------------------------- select-prompts (items 1, 2, 3, 6)


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--min_correct", "5", "--num_samples", "2"], ["--min_correct 5", "--num_samples 2", "Lower --min_correct"]),
        (["--min_correct", "2", "--num_samples", "2"], ["--min_correct 2", "at most 1 correct", "--max_pass_rate"]),
    ],
)
def test_an_impossible_filter_is_refused_before_sampling(
    problems, earlier_selection, tmp_path, monkeypatch, capsys, flags, fragments
):
    _no_sampling(monkeypatch)
    argv = ["--model", "m", "--dataset", problems, "--output", str(earlier_selection), "--overwrite", *flags]
    assert select_prompts.main(argv) == 2
    names(_one_error_line(capsys, "select-prompts"), *fragments)
    assert [p.name for p in earlier_selection.iterdir()] == ["prompts.jsonl"]  # the earlier selection is intact


def test_an_empty_selection_is_not_written(problems, tmp_path, monkeypatch, capsys):
    from datasets import Dataset

    monkeypatch.setattr(select_prompts, "check_model", lambda *a: None)
    monkeypatch.setattr(select_prompts, "fitting_prompts", lambda datasets, *a: datasets)  # no model "m" to measure
    monkeypatch.setattr(select_prompts, "select_prompts", lambda *a, **k: Dataset.from_dict({"prompt": []}))
    out = tmp_path / "selected"
    argv = ["--model", "m", "--dataset", problems, "--output", str(out), "--backend", "transformers"]
    assert select_prompts.main(argv) == 1
    names(_one_error_line(capsys, "select-prompts"), "0 of 8 kept", "--min_correct", "--num_samples")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["problems.jsonl"]


@pytest.mark.parametrize(
    ("output", "extra", "fragments"),
    [
        ("selected", [], ["selected: already exists", "--overwrite"]),
        ("problems.jsonl/sub", ["--overwrite"], ["sub: cannot be created", "problems.jsonl is a file"]),
    ],
)
def test_select_prompts_checks_output_before_sampling(
    problems, earlier_selection, tmp_path, monkeypatch, capsys, output, extra, fragments
):
    _no_sampling(monkeypatch)
    argv = ["--model", "m", "--dataset", problems, "--output", str(tmp_path / output), *extra]
    assert select_prompts.main(argv) == 2
    names(_one_error_line(capsys, "select-prompts"), "--output ", *fragments)


def test_select_prompts_refuses_to_overwrite_its_input(earlier_selection, monkeypatch, capsys):
    _no_sampling(monkeypatch)
    selection = str(earlier_selection)
    assert select_prompts.main(["--model", "m", "--dataset", selection, "--output", selection, "--overwrite"]) == 2
    assert "this is also the input" in _one_error_line(capsys, "select-prompts")


@pytest.mark.parametrize("command", [select_prompts.main, evaluate.main])
def test_an_empty_dataset_is_refused_before_sampling(tmp_path, monkeypatch, capsys, command):
    _no_sampling(monkeypatch)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    data = ["--dataset", str(empty), "--output", str(tmp_path / "o")] if command is select_prompts.main else []
    argv = ["--model", "m", *(data or ["--datasets", str(empty)])]
    assert command(argv) == 2
    name = "select-prompts" if command is select_prompts.main else "evaluate"
    assert "empty.jsonl: has no rows" in _one_error_line(capsys, name)


@pytest.mark.slow
def test_a_selection_can_be_selected_again(tiny_model_dir, problems, tmp_path):
    from datasets import load_from_disk

    base = [
        "--model",
        tiny_model_dir,
        "--num_samples",
        "1",
        "--max_completion_length",
        "4",
        "--backend",
        "transformers",
    ]
    keep_all = ["--min_correct", "0", "--max_pass_rate", "1"]
    first, second = tmp_path / "first", tmp_path / "second"
    assert select_prompts.main([*base, *keep_all, "--dataset", problems, "--output", str(first)]) == 0
    before = sorted(p.name for p in first.iterdir())
    assert select_prompts.main([*base, *keep_all, "--dataset", str(first), "--output", str(second)]) == 0
    assert sorted(p.name for p in first.iterdir()) == before  # no cache-*.arrow left in the input
    reselected = load_from_disk(str(second))
    assert len(reselected) == len(PROBLEMS) and reselected.column_names.count("num_correct") == 1
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


# --------------------------------------------------------------------------- evaluate (items 3, 6, 7)


def test_evaluate_checks_output_before_sampling(problems, tmp_path, monkeypatch, capsys):
    _no_sampling(monkeypatch)
    report = tmp_path / "report.json"
    report.write_text("{}")
    assert evaluate.main(["--model", "m", "--datasets", problems, "--output", str(report)]) == 2
    assert f"--output {report}: already exists. Pass --overwrite" in _one_error_line(capsys, "evaluate")
    assert report.read_text() == "{}"
    assert evaluate.main(["--model", "m", "--datasets", problems, "--output", problems, "--overwrite"]) == 2
    assert "this is also the input" in _one_error_line(capsys, "evaluate")


@pytest.mark.parametrize(
    ("model", "fragments"),
    [
        ("./tiny-modle", ["--model ./tiny-modle: ", "no such directory", "Did you mean './tiny-model'?"]),
        ("no-such-model", ["--model no-such-model: ", "no such local directory", "Hugging Face cache"]),
    ],
)
def test_evaluate_names_a_missing_model_before_sampling(problems, tmp_path, monkeypatch, capsys, model, fragments):
    _no_sampling(monkeypatch)
    (tmp_path / "tiny-model").mkdir()
    monkeypatch.chdir(tmp_path)
    assert evaluate.main(["--model", model, "--datasets", problems]) == 2
    names(_one_error_line(capsys, "evaluate"), *fragments)


def test_evaluate_rejects_an_unknown_dtype(problems, capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(["--model", "m", "--datasets", problems, "--dtype", "float17"])
    assert exit_info.value.code == 2
    assert "argument --dtype: invalid choice: 'float17'" in capsys.readouterr().err


@pytest.mark.slow
def test_evaluate_overwrites_only_when_asked_and_writes_whole(tiny_model_dir, problems, tmp_path):
    report = tmp_path / "reports" / "report.json"
    argv = ["--model", tiny_model_dir, "--datasets", problems, "--k", "1", "--max_completion_length", "4"]
    argv += ["--backend", "transformers", "--output", str(report)]
    assert evaluate.main(argv) == 0
    first = json.loads(report.read_text())
    assert first["k"] == 1
    report.write_text("stale")
    assert evaluate.main([*argv, "--overwrite"]) == 0
    assert json.loads(report.read_text())["k"] == 1
    assert sorted(p.name for p in report.parent.iterdir()) == ["report.json"]


# --------------------------------------------------------------------------- train (items 4, 5, 6, 7, 8)


@pytest.fixture
def recipe(tmp_path, tiny_model_dir, problems) -> Path:
    config = {
        "model_name_or_path": tiny_model_dir,
        "dataset_name": problems,
        "reward_funcs": ["math"],
        "num_generations": 2,
        "samples_per_round": 2,
        "max_rounds": 1,
        "per_device_train_batch_size": 4,
        "max_completion_length": 4,
        "max_steps": 1,
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,
        "report_to": "none",
        "save_strategy": "steps",
        "save_steps": 1,
        "output_dir": str(tmp_path / "run"),
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _train(*argv: str) -> int:
    return cli.main(["train", *argv])


def _no_model_loading(monkeypatch):
    from trl_ada.cli import train as train_cli

    monkeypatch.setattr(train_cli, "build_trainer", lambda *a, **k: pytest.fail("loaded the model before the check"))


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--config"], ["--config needs a value", "YAML recipe", "e.g. --config recipes/"]),
        (["--config", "--max_steps", "1"], ["--config needs a value", "e.g. --config recipes/"]),
        (["--config", "nope.yaml"], ["--config nope.yaml: ", "no such file"]),
        (["--config", "broken.yaml"], ["--config broken.yaml: ", "line 2, column 1", "expected ',' or ']'"]),
        (["--config", "list.yaml"], ["--config list.yaml: ", "holds a list", "`key: value`"]),
        (
            ["--config", "typed.yaml"],
            ["samples_per_round: 'eight'", "typed.yaml", "`samples_per_round: 8`", "--samples_per_round"],
        ),
        (["--config", "typed_choice.yaml"], ["dtype: 'float17'", "typed_choice.yaml", "--dtype"]),
        (["--dtype", "float17"], ["argument --dtype", "'float17'"]),
    ],
)
def test_train_setup_errors_are_one_line_with_exit_code_2(tmp_path, monkeypatch, capsys, argv, fragments):
    monkeypatch.chdir(tmp_path)
    Path("broken.yaml").write_text("max_steps: [1\n")
    Path("list.yaml").write_text("- max_steps: 1\n")
    Path("typed.yaml").write_text("samples_per_round: eight\n")
    Path("typed_choice.yaml").write_text("dtype: float17\n")
    assert _train(*argv) == 2
    line = _one_error_line(capsys, "train")
    names(line, *fragments)
    assert len(line) < 400  # not the 200-line usage


@pytest.mark.parametrize("reward_funcs", [3, [3], {"math": 1}])
def test_reward_funcs_that_are_not_names_are_one_line(recipe, monkeypatch, capsys, reward_funcs):
    _no_model_loading(monkeypatch)
    config = yaml.safe_load(recipe.read_text())
    recipe.write_text(yaml.safe_dump({**config, "reward_funcs": reward_funcs}))
    assert _train("--config", str(recipe)) == 2
    names(_one_error_line(capsys, "train"), f"reward_funcs={reward_funcs!r}", "reward_funcs: [math]")


def test_a_recipe_that_is_not_utf8_is_one_line_naming_the_file(recipe, monkeypatch, capsys):
    _no_model_loading(monkeypatch)
    recipe.write_bytes(recipe.read_bytes() + "# caf\u00e9\n".encode("latin-1"))
    assert _train("--config", str(recipe)) == 2
    names(_one_error_line(capsys, "train"), f"--config {recipe}", "UTF-8")


@pytest.mark.parametrize(("written", "means"), [("no", "none"), ("off", "none"), ("false", "none"), ("yes", "all")])
def test_report_to_written_as_a_yaml_boolean_reads_as_its_meaning(recipe, written, means):
    from trl_ada.cli.train import parse_train_args

    recipe.write_text(recipe.read_text().replace("report_to: none", f"report_to: {written}"))
    assert f"report_to: {written}" in recipe.read_text()
    _, training_args, _ = parse_train_args(["--config", str(recipe)])
    _, expected, _ = parse_train_args(["--config", str(recipe), "--report_to", means])
    assert training_args.report_to == expected.report_to


def test_a_misspelt_local_model_path_says_no_such_directory(recipe, tmp_path, monkeypatch, capsys):
    _no_model_loading(monkeypatch)
    misspelt = str(Path(yaml.safe_load(recipe.read_text())["model_name_or_path"]).with_name("tiny-modle0"))
    assert _train("--config", str(recipe), "--model_name_or_path", misspelt) == 2
    names(
        _one_error_line(capsys, "train"), f"--model_name_or_path {misspelt}: ", "no such directory", "Did you mean '"
    )


def test_a_model_directory_with_a_truncated_weights_file_is_one_line(recipe, tmp_path, monkeypatch, capsys):
    import shutil

    _no_model_loading(monkeypatch)
    model = tmp_path / "cut-model"
    shutil.copytree(yaml.safe_load(recipe.read_text())["model_name_or_path"], model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert _train("--config", str(recipe), "--model_name_or_path", str(model)) == 2
    names(_one_error_line(capsys, "train"), f"--model_name_or_path {model}: ", "model.safetensors", "again")


def test_resume_without_a_checkpoint_fails_before_the_model_loads(recipe, tmp_path, monkeypatch, capsys):
    _no_model_loading(monkeypatch)
    assert _train("--config", str(recipe), "--resume_from_checkpoint", "true") == 2
    line = _one_error_line(capsys, "train")
    names(line, "resume_from_checkpoint=True", "no checkpoint", "without resume_from_checkpoint")
    assert not (tmp_path / "run").exists()  # the lock's directory is not left behind


def test_a_used_output_dir_is_refused_before_the_model_loads(recipe, tmp_path, monkeypatch, capsys):
    _no_model_loading(monkeypatch)
    old = tmp_path / "run" / "checkpoint-3"
    old.mkdir(parents=True)
    (old / "trainer_state.json").write_text("{}")
    assert _train("--config", str(recipe)) == 2
    line = _one_error_line(capsys, "train")
    names(line, "(checkpoint-3)", "resume_from_checkpoint=true", "overwrite_output_dir=true")
    (old / SAVING_MARKER).write_text("")
    assert _train("--config", str(recipe), "--resume_from_checkpoint", "true") == 2
    assert "holds only partial checkpoints (checkpoint-3)" in _one_error_line(capsys, "train")


def test_a_dataset_smaller_than_one_batch_is_refused(recipe, tmp_path, capsys):
    small = _jsonl(tmp_path / "small.jsonl", PROBLEMS[:1])
    assert _train("--config", str(recipe), "--dataset_name", small) == 2
    names(_one_error_line(capsys, "train"), "train_dataset has 1 prompts", "2 distinct prompts", "per_device_train")
    assert not (tmp_path / "run").exists()


HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from trl_ada.run_dir import run_lock
    with run_lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
""")


def test_a_second_concurrent_run_fails_at_once_naming_the_first(recipe, tmp_path, monkeypatch, capsys):
    _no_model_loading(monkeypatch)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        assert _train("--config", str(recipe)) == 2
        names(_one_error_line(capsys, "train"), f"process {child.pid} on ", "another output_dir", ".trl_ada.lock")
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_rerun_with_overwrite_replaces_the_old_checkpoints(recipe, tmp_path, capsys):
    run = tmp_path / "run"
    assert _train("--config", str(recipe), "--max_steps", "2") == 0
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert _train("--config", str(recipe)) == 2
    assert _train("--config", str(recipe), "--overwrite_output_dir", "true") == 0
    assert [p.name for p in run.glob("checkpoint-*")] == ["checkpoint-1"]
    assert json.loads((run / "trainer_state.json").read_text())["global_step"] == 1
    assert not (run / ".trl_ada.lock").exists()


def test_train_help_opens_with_usage_description_and_the_reinforce_ada_options(capsys):
    assert cli.main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "usage: trl-ada train --config RECIPE.yaml [--KEY VALUE ...]"
    assert "Train a model with Reinforce-Ada adaptive sampling" in out[:1000]
    assert out.index("--config RECIPE.yaml  YAML recipe") < out.index("--samples_per_round")
    groups = [line[:-1] for line in lines if line and not line.startswith(" ") and line.endswith(":")]
    assert groups[:10] == [
        "options",
        "adaptive sampling (Reinforce-Ada, arXiv 2510.04996)",
        "the pass-rate memory and budgeted rounds (all off by default)",
        "dynamic sampling: candidates, refill and pre-rollout skipping (all off by default)",
        "how generation is scheduled",
        "the objective (arXiv 2510.04996v3: J_f = E[f(p)], prompt weight f'(p))",
        "the run directory",
        "the loss",
        "data and rewards",
        "model (TRL ModelConfig)",
    ]
    assert "TRL GRPOConfig: generation" in groups and "transformers TrainingArguments: Optimizer" in groups
    options = out[out.index("\noptions:") :]
    assert options.index("--samples_per_round") < options.index("--dataset_name") < options.index("--learning_rate")
    other = out[out.index("\nother options:") :] if "\nother options:" in out else ""
    assert "--output_dir" not in other and "--learning_rate" not in other


@pytest.mark.parametrize(
    ("flags", "state_file", "message"),
    [
        (["--pass_rate_memory", "true"], "pass_rate_memory.npz", "Corrupt pass-rate memory file"),
        (["--prompt_oversampling", "2"], "candidate_stream.json", "Corrupt candidate stream file"),
    ],
)
def test_a_corrupt_reinforce_ada_state_in_the_resumed_checkpoint_is_one_line(
    recipe, tmp_path, capsys, flags, state_file, message
):
    assert _train("--config", str(recipe), *flags) == 0
    saved = tmp_path / "run" / "checkpoint-1" / state_file
    saved.write_bytes(saved.read_bytes()[:20])
    assert _train("--config", str(recipe), *flags, "--max_steps", "2", "--resume_from_checkpoint", "true") == 2
    line = _one_error_line(capsys, "train")
    names(line, f"{message} {saved}: ", "without resume_from_checkpoint")


def test_an_output_dir_that_is_a_file_is_one_line(recipe, tmp_path, monkeypatch, capsys):
    _no_model_loading(monkeypatch)
    (tmp_path / "run").write_text("not a directory")
    assert _train("--config", str(recipe)) == 2
    names(_one_error_line(capsys, "train"), "run' is a file", "another output_dir")


BAD_DATA = {
    "empty.jsonl": (b"", "empty.jsonl: has no rows"),
    "broken.jsonl": (
        b'{"problem": "a", "answer": "1"}\n{"problem": broken\n',
        "broken.jsonl: line 2 is not valid JSON",
    ),
    "binary.jsonl": (b"\x89PNG\r\n\x1a\n\x00", "binary.jsonl: line 1 is not UTF-8 text"),
    "mixed": (None, "mixed: could not be read as a dataset (Couldn't cast"),
}


def _bad_data(tmp_path: Path, name: str) -> str:
    content, _ = BAD_DATA[name]
    path = tmp_path / name
    if content is None:  # a folder whose files do not share their columns
        path.mkdir()
        _jsonl(path / "a.jsonl", PROBLEMS)
        _jsonl(path / "b.jsonl", [{"question": "q", "level": 1}])
    else:
        path.write_bytes(content)
    return str(path)


@pytest.mark.parametrize("name", sorted(BAD_DATA))
@pytest.mark.parametrize("command", ["train", "evaluate", "select-prompts"])
def test_an_unreadable_data_file_is_one_line_naming_it(recipe, tmp_path, monkeypatch, capsys, command, name):
    _no_sampling(monkeypatch)
    data = _bad_data(tmp_path, name)
    argv = {
        "train": ["--config", str(recipe), "--dataset_name", data],
        "evaluate": ["--model", "m", "--datasets", data],
        "select-prompts": ["--model", "m", "--dataset", data, "--output", str(tmp_path / "o")],
    }[command]
    assert cli.main([command, *argv]) == 2
    assert BAD_DATA[name][1] in _one_error_line(capsys, command)


def test_rows_without_an_answer_are_dropped_with_a_warning_before_sampling(tmp_path, monkeypatch, capsys):
    rows = [*PROBLEMS[:3], {"problem": "What is 0 + 1?", "answer": None}, {"problem": "What is 1 + 1?", "answer": ""}]
    data = _jsonl(tmp_path / "gaps.jsonl", rows)
    sampled = []
    monkeypatch.setattr(select_prompts, "check_model", lambda *a, **k: None)
    monkeypatch.setattr(select_prompts, "fitting_prompts", lambda datasets, *a: datasets)  # no model "m" to measure
    monkeypatch.setattr(select_prompts, "select_prompts", lambda model, dataset, **k: sampled.append(dataset) or [])
    assert select_prompts.main(["--model", "m", "--dataset", data, "--output", str(tmp_path / "o")]) == 1
    assert [row["answer"] for row in sampled[0]] == ["1", "2", "3"]
    names(capsys.readouterr().err, "gaps.jsonl: dropped 2 of 5 rows", "column 'answer'")
    datasets = evaluate.load_datasets(evaluate.make_parser().parse_args(["--model", "m", "--datasets", data]))
    assert len(datasets["gaps"]) == 3
