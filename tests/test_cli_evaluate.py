"""`trl-ada evaluate` and `trl-ada select-prompts` (trl_ada/cli/evaluate.py, trl_ada/cli/select_prompts.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from refusals import names

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from trl_ada.cli import evaluate, select_prompts  # noqa: E402


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.fixture
def two_datasets(tmp_path: Path) -> tuple[str, str]:
    """Two local jsonl benchmarks of 3 and 2 problems, with different column names."""
    alpha = write_jsonl(
        tmp_path / "alpha.jsonl",
        [{"problem": "Compute 1 + 1.", "answer": "2"}, {"problem": "Compute 2 + 3.", "answer": "5"}]
        + [{"problem": "Compute 3 * 3.", "answer": "9"}],
    )
    beta = write_jsonl(
        tmp_path / "beta.jsonl",
        [{"question": "Compute 10 - 4.", "gt": 6}, {"question": "Compute 7 + 1.", "gt": 8}],
    )
    return alpha, beta


@pytest.mark.parametrize(
    ("command", "flags", "option"),
    [
        (evaluate.main, ["--k", "0"], "--k"),
        (evaluate.main, ["--k", "two"], "--k"),
        (evaluate.main, ["--max_new_tokens", "0"], "--max_new_tokens"),
        (select_prompts.main, ["--num_samples", "0"], "--num_samples"),
        (select_prompts.main, ["--max_pass_rate", "0"], "--max_pass_rate"),
        (select_prompts.main, ["--max_pass_rate", "1.5"], "--max_pass_rate"),
    ],
)
def test_bad_command_options_name_the_option(command, flags, option, tmp_path, capsys) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"problem": "Compute 1 + 1.", "answer": "2"}])
    source = ["--datasets", data] if command is evaluate.main else ["--dataset", data, "--output", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        command(["--model", "m", *source, *flags])
    assert exit_info.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


def test_max_new_tokens_is_a_deprecated_alias_of_max_completion_length(capsys) -> None:
    parser = evaluate.make_parser()
    args = parser.parse_args(["--model", "m", "--datasets", "d", "--max_new_tokens", "12"])
    assert args.max_completion_length == 12
    names(capsys.readouterr().err, "warning: --max_new_tokens", "deprecated", "use --max_completion_length")
    assert parser.parse_args(["--model", "m", "--datasets", "d"]).max_completion_length == 4096
    assert (
        select_prompts.make_parser()
        .parse_args(["--model", "m", "--dataset", "d", "--output", "o"])
        .max_completion_length
        == 2048
    )


def test_evaluate_main_reports_missing_columns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = write_jsonl(tmp_path / "bad.jsonl", [{"text": "Compute 1 + 1.", "answer": "2"}])
    assert evaluate.main(["--model", "m", "--datasets", data]) == 2
    names(capsys.readouterr().err, "trl-ada evaluate: error: ", "No problem column", "['text', 'answer']")


@pytest.mark.parametrize(
    "flags",
    [["--backend", "server"], ["--vllm_server_base_url", "http://127.0.0.1:8000"]],
    ids=["no-url", "no-backend"],
)
def test_the_server_backend_and_its_url_go_together(flags, tmp_path: Path, capsys) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"problem": "Compute 1 + 1.", "answer": "2"}])
    argv = ["--model", "m", "--dataset", data, "--output", str(tmp_path / "o"), *flags]
    assert select_prompts.main(argv) == 2
    err = capsys.readouterr().err
    names(err, "(got --backend ", "--vllm_server_base_url", "give both or neither")
    assert not (tmp_path / "o").exists()


def test_cli_dispatches_to_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from trl_ada.cli import main

    data = write_jsonl(tmp_path / "d.jsonl", [{"problem": "Compute 1 + 1.", "answer": "2"}])
    assert main(["select-prompts", "--model", "m", "--dataset", data, "--output", "o", "--num_samples", "0"]) == 2
    assert "argument --num_samples" in capsys.readouterr().err


def test_dataset_labels(tmp_path: Path) -> None:
    local = write_jsonl(tmp_path / "aime24.jsonl", [])
    assert evaluate.dataset_label("math500=HuggingFaceH4/MATH-500") == ("math500", "HuggingFaceH4/MATH-500")
    assert evaluate.dataset_label("HuggingFaceH4/MATH-500") == ("MATH-500", "HuggingFaceH4/MATH-500")
    assert evaluate.dataset_label(local) == ("aime24", local)


# ----------------------------------------------------------------------------------------------------------------
# End to end on the tiny model
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_evaluate_main_end_to_end(tiny_model_dir: str, two_datasets, tmp_path: Path, capsys) -> None:
    alpha, beta = two_datasets
    output = tmp_path / "out" / "results.json"
    argv = ["--model", tiny_model_dir, "--datasets", alpha, f"second={beta}", "--k", "2", "--max_new_tokens", "8"]
    assert evaluate.main([*argv, "--backend", "transformers", "--output", str(output)]) == 0

    report = json.loads(output.read_text())
    rows = report["datasets"]
    assert [(row["name"], row["num_problems"]) for row in rows] == [("alpha", 3), ("second", 2)]
    for metric in ("avg_at_k", "pass_at_k"):
        weighted = sum(row[metric] * row["num_problems"] for row in rows) / 5
        assert report["average"][metric] == pytest.approx(weighted)
        assert all(0.0 <= row[metric] <= 1.0 for row in rows)
    assert report["average"]["num_problems"] == 5
    assert report["k"] == 2 and report["settings"]["max_new_tokens"] == 8
    assert report["settings"]["backend"] == "transformers"
    assert [len(report["pass_rates"][name]) for name in ("alpha", "second")] == [3, 2]
    stdout = capsys.readouterr().out
    assert "alpha" in stdout and "second" in stdout and "avg@2" in stdout


@pytest.mark.slow
def test_select_prompts_main_end_to_end(tiny_model_dir: str, two_datasets, tmp_path: Path, monkeypatch) -> None:
    import huggingface_hub
    from datasets import Dataset, load_from_disk

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_stored")
    monkeypatch.setattr(huggingface_hub, "whoami", lambda token: {"name": "me"})
    pushed: list[tuple[str, str | None]] = []
    monkeypatch.setattr(Dataset, "push_to_hub", lambda self, repo_id, **kw: pushed.append((repo_id, kw.get("token"))))
    alpha, _ = two_datasets
    output = tmp_path / "selected"
    argv = ["--model", tiny_model_dir, "--dataset", alpha, "--num_samples", "2", "--max_new_tokens", "8"]
    flags = ["--min_correct", "0", "--backend", "transformers", "--output", str(output), "--push_to_hub", "me/sel"]
    assert select_prompts.main([*argv, *flags]) == 0

    kept = load_from_disk(str(output))
    assert len(kept) == 3  # a random model solves nothing: every pass rate is 0 <= 0.75, and min_correct=0
    assert {"prompt", "answer", "pass_rate", "num_correct"} <= set(kept.column_names)
    assert all(rate in (0.0, 0.5, 1.0) for rate in kept["pass_rate"])
    assert len((output / "prompts.jsonl").read_text().splitlines()) == 3
    assert pushed == [("me/sel", None)]  # None: huggingface_hub uses the stored login it was checked against


def test_select_prompts_push_without_token_fails_before_sampling(two_datasets, tmp_path: Path, monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    monkeypatch.setattr(
        select_prompts, "select_prompts", lambda *a, **kw: pytest.fail("sampled before the token check")
    )
    alpha, _ = two_datasets
    argv = ["--model", "unused", "--dataset", alpha, "--backend", "transformers", "--output", str(tmp_path / "o")]
    assert select_prompts.main([*argv, "--push_to_hub", "me/sel"]) == 1
    err = capsys.readouterr().err
    assert "--push_to_hub me/sel" in err and "hf auth login" in err and "--hub_token" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_select_prompts_hub_token_flag_is_verified_and_used(tiny_model_dir, two_datasets, tmp_path, monkeypatch):
    import huggingface_hub
    from datasets import Dataset

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    checked: list[str] = []
    monkeypatch.setattr(huggingface_hub, "whoami", lambda token: checked.append(token) or {"name": "me"})
    pushed: list[str | None] = []
    monkeypatch.setattr(Dataset, "push_to_hub", lambda self, repo_id, **kw: pushed.append(kw.get("token")))
    alpha, _ = two_datasets
    argv = ["--model", tiny_model_dir, "--dataset", alpha, "--num_samples", "1", "--max_new_tokens", "4"]
    keep_all = ["--min_correct", "0", "--max_pass_rate", "1"]  # an empty selection would not be written or pushed
    flags = ["--backend", "transformers", "--output", str(tmp_path / "o"), "--push_to_hub", "me/sel", *keep_all]
    assert select_prompts.main([*argv, *flags, "--hub_token", "hf_flag"]) == 0
    assert checked == ["hf_flag"] and pushed == ["hf_flag"]


@pytest.mark.parametrize("command", [evaluate, select_prompts])
def test_reward_option_resolves_a_registered_name_before_sampling(command, tmp_path: Path, monkeypatch, capsys):
    from trl_ada.rewards import math_final_reward, short_answer_reward

    data = write_jsonl(tmp_path / "d.jsonl", [{"problem": "What is 4 + 9?", "answer": "13"}])
    source = ["--datasets", data] if command is evaluate else ["--dataset", data, "--output", str(tmp_path / "o")]
    sampler = "avg_at_k" if command is evaluate else "select_prompts"
    monkeypatch.setattr(command, sampler, lambda *a, **kw: pytest.fail("sampled with a bad --reward"))
    assert command.main(["--model", "m", *source, "--reward", "maths_final"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    names(err, "error: --reward maths_final: ", "'maths_final'", "'math_final'?")

    used = []

    def sample(*args, reward_func, **kwargs):
        used.append(reward_func)
        raise SystemExit(0)  # stop once the reward is known

    monkeypatch.setattr(command, sampler, sample)
    monkeypatch.setattr(command, "check_model", lambda *a, **kw: None)
    monkeypatch.setattr(command, "fitting_prompts", lambda datasets, *a, **kw: datasets)  # "m" has no tokenizer
    for name in ("math_final", "short_answer"):
        with pytest.raises(SystemExit):
            command.main(["--model", "m", *source, "--reward", name])
    assert used == [math_final_reward, short_answer_reward]
    assert command.make_parser().parse_args(["--model", "m", *source]).reward == "math"


# ----------------------------------------------------------------------------------------------------------------
# A prompt longer than the model's context: refused before the model runs, or dropped with --max_prompt_tokens
# ----------------------------------------------------------------------------------------------------------------

LONG_PROBLEM = "Compute the sum of the next numbers: " + "one two three four five six seven eight nine ten " * 60


def test_a_prompt_longer_than_the_context_is_refused_in_one_line_and_the_advice_works(
    tiny_model_dir: str, tmp_path: Path, capsys, caplog, monkeypatch
) -> None:
    from trl_ada.evaluation import generation

    def never(*args, **kwargs):
        raise AssertionError("the model must not run")

    monkeypatch.setattr(generation, "_generate_transformers", never)
    rows = [{"problem": "Compute 1 + 1.", "answer": "2"}, {"problem": LONG_PROBLEM, "answer": "55"}]
    data = write_jsonl(tmp_path / "long.jsonl", rows)
    argv = ["--model", tiny_model_dir, "--datasets", f"long={data}", "--k", "1", "--max_completion_length", "8"]
    assert evaluate.main(argv) == 2
    error = capsys.readouterr().err.split("trl-ada evaluate: error: ")[1].strip()
    assert "\n" not in error
    names(error, "--datasets long: problem 1 ('Compute the sum", "max_position_embeddings is 512")
    names(error, "--max_prompt_tokens 504")
    monkeypatch.undo()
    with caplog.at_level("WARNING", logger="trl_ada.cli.common"):
        assert evaluate.main([*argv, "--max_prompt_tokens", "504"]) == 0
    names(caplog.text, "long: dropped 1 of 2 problems", "--max_prompt_tokens 504")
    assert capsys.readouterr().out.splitlines()[2].startswith("long             1")  # the one problem left


def test_generation_refuses_a_prompt_longer_than_the_context_before_loading_the_model(tiny_model_dir, monkeypatch):
    from trl_ada.data import PromptTooLongError
    from trl_ada.evaluation import generation

    monkeypatch.setattr(generation, "_generate_transformers", pytest.fail)
    prompts = [[{"role": "user", "content": "hi"}], [{"role": "user", "content": LONG_PROBLEM}]]
    with pytest.raises(PromptTooLongError) as refused:
        generation.generate_completions(tiny_model_dir, prompts, 1, max_new_tokens=4, backend="transformers")
    names(str(refused.value), "prompt 1 ('Compute the sum", "max_position_embeddings is 512", "max_prompt_tokens=508")
