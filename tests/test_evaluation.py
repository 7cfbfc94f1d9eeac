"""Tests of `trl_ada.evaluation`: generation backends, avg@k / pass@k, prompt selection, and the two commands."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from trl_ada import evaluation as ev  # noqa: E402

CONVERSATION = [{"role": "user", "content": "What is 1 + 1?"}]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A random tiny Qwen2 model with a ChatML tokenizer, built offline once for this module."""
    from trl_ada.toy import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("evaluation-tiny-model")))


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


def stub_generator(samples_by_problem: dict[str, list[str]], calls: list[dict] | None = None):
    """A `generate_completions` stand-in: the completions of each prompt, found by its problem text."""

    def generate(model, prompts, num_samples, **kwargs):
        if calls is not None:
            calls.append({"model": model, "num_prompts": len(prompts), "num_samples": num_samples, **kwargs})
        out = []
        for prompt in prompts:
            user = prompt[-1]["content"]
            matches = [samples for problem, samples in samples_by_problem.items() if problem in user]
            assert len(matches) == 1, f"no stubbed completions for {user!r}"
            assert len(matches[0]) == num_samples
            out.append(list(matches[0]))
        return out

    return generate


def boxed(*values: str) -> list[str]:
    return [f"The answer is \\boxed{{{v}}}." for v in values]


# ----------------------------------------------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------------------------------------------


def test_transformers_backend_shapes_and_seed(tiny_model: str) -> None:
    prompts = [CONVERSATION, "plain text prompt", [{"role": "user", "content": "Say a"}]]
    kwargs = {"max_new_tokens": 6, "backend": "transformers", "batch_size": 2}
    first = ev.generate_completions(tiny_model, prompts, 3, seed=1, **kwargs)
    assert [len(samples) for samples in first] == [3, 3, 3]
    assert all(isinstance(text, str) for samples in first for text in samples)
    assert ev.generate_completions(tiny_model, prompts, 3, seed=1, **kwargs) == first
    assert ev.generate_completions(tiny_model, prompts, 3, seed=2, **kwargs) != first


def test_greedy_decoding_repeats_one_completion(tiny_model: str) -> None:
    out = ev.generate_completions(
        tiny_model, [CONVERSATION], 3, temperature=0.0, max_new_tokens=5, backend="transformers"
    )
    assert len(out[0]) == 3 and len(set(out[0])) == 1


def test_left_padded_batches_match_single_prompts(tiny_model: str) -> None:
    prompts = [CONVERSATION, "a much longer plain text prompt than the other one", "hi"]
    kwargs = {"temperature": 0.0, "max_new_tokens": 6, "backend": "transformers"}
    batched = ev.generate_completions(tiny_model, prompts, 1, batch_size=3, **kwargs)
    assert batched == ev.generate_completions(tiny_model, prompts, 1, batch_size=1, **kwargs)


def test_resolve_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "vllm_available", lambda: False)
    assert ev.resolve_backend("auto") == "transformers"
    assert ev.resolve_backend("transformers") == "transformers"
    with pytest.raises(ValueError, match="vllm"):
        ev.resolve_backend("vllm")
    with pytest.raises(ValueError, match="backend"):
        ev.resolve_backend("sglang")
    monkeypatch.setattr(ev, "vllm_available", lambda: True)
    assert ev.resolve_backend("auto") == "vllm"


def test_vllm_path_contract_with_stand_in(tiny_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vLLM path gets chat-templated token ids, n samples per prompt and distinct per-prompt seeds."""
    record: dict = {}

    class SamplingParams:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class LLM:
        def __init__(self, **kwargs):
            record["init"] = kwargs

        def generate(self, prompts, params, use_tqdm=True):
            record["prompts"], record["params"] = prompts, params
            return [
                types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"p{i}s{j}") for j in range(p.n)])
                for i, p in enumerate(params)
            ]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    monkeypatch.setattr(ev, "vllm_available", lambda: True)
    prompts = [CONVERSATION, [{"role": "user", "content": "Say b"}]]
    out = ev.generate_completions(tiny_model, prompts, 2, temperature=0.7, top_p=0.9, max_new_tokens=9, seed=5)

    assert out == [["p0s0", "p0s1"], ["p1s0", "p1s1"]]
    assert record["init"]["model"] == tiny_model and record["init"]["seed"] == 5
    expected_ids = ev.encode_prompts(ev._load_tokenizer(tiny_model), prompts)
    assert [p["prompt_token_ids"] for p in record["prompts"]] == expected_ids
    params = record["params"]
    assert [(p.n, p.temperature, p.top_p, p.max_tokens) for p in params] == [(2, 0.7, 0.9, 9)] * 2
    assert len({p.seed for p in params}) == 2


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(
    ev.importlib.util.find_spec("vllm") is None or not _cuda_available(), reason="needs vllm and a CUDA GPU"
)
def test_vllm_backend_on_gpu(tiny_model: str) -> None:
    out = ev.generate_completions(tiny_model, [CONVERSATION, "hello"], 2, max_new_tokens=8, backend="vllm")
    assert [len(samples) for samples in out] == [2, 2]


# ----------------------------------------------------------------------------------------------------------------
# avg@k and prompt selection with a stubbed generator (exact values)
# ----------------------------------------------------------------------------------------------------------------


def test_avg_at_k_exact_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from datasets import Dataset

    calls: list[dict] = []
    samples = {
        "Compute 1 + 1.": boxed("2", "3", "2", "2"),  # 3/4
        "Compute 2 + 3.": boxed("4", "6", "7", "1"),  # 0/4
        "Compute 10 - 4.": boxed("6", "0", "6", "5"),  # 2/4
    }
    monkeypatch.setattr(ev, "generate_completions", stub_generator(samples, calls))
    datasets = {
        "alpha": Dataset.from_dict({"problem": ["Compute 1 + 1.", "Compute 2 + 3."], "answer": ["2", "5"]}),
        "beta": Dataset.from_dict({"question": ["Compute 10 - 4."], "gt": ["6"]}),
    }
    report = ev.avg_at_k("some-model", datasets, k=4, temperature=0.6, max_new_tokens=16, seed=3)

    assert calls == [
        {"model": "some-model", "num_prompts": 3, "num_samples": 4, "temperature": 0.6, "top_p": 1.0}
        | {"max_new_tokens": 16, "seed": 3, "backend": "auto", "batch_size": 8, "dtype": "auto"}
    ]
    by_name = {s.name: s for s in report.scores}
    assert (by_name["alpha"].num_problems, by_name["alpha"].avg_at_k, by_name["alpha"].pass_at_k) == (2, 0.375, 0.5)
    assert (by_name["beta"].num_problems, by_name["beta"].avg_at_k, by_name["beta"].pass_at_k) == (1, 0.5, 1.0)
    assert report.average.num_problems == 3
    assert report.average.avg_at_k == pytest.approx((0.375 * 2 + 0.5) / 3)
    assert report.average.pass_at_k == pytest.approx(2 / 3)
    assert report.pass_rates == {"alpha": [0.75, 0.0], "beta": [0.5]}

    table = report.table()
    assert "avg@4" in table and "pass@4" in table and "average" in table.splitlines()[-1]
    assert "37.50" in table and "66.67" in table
    payload = json.loads(report.to_json())
    assert payload["k"] == 4 and [row["name"] for row in payload["datasets"]] == ["alpha", "beta"]
    assert payload["average"]["avg_at_k"] == pytest.approx(report.average.avg_at_k)


def _selection_dataset():
    from datasets import Dataset

    problems = ["Compute 2 * 2.", "Compute 1 + 2.", "Compute 3 + 3.", "Compute 5 - 5."]
    return Dataset.from_dict({"problem": problems, "answer": ["4", "3", "6", "0"], "source": ["a", "b", "c", "d"]})


SELECTION_SAMPLES = {
    "Compute 2 * 2.": boxed("1", "2", "3", "5"),  # 0/4: all wrong
    "Compute 1 + 2.": boxed("3", "1", "1", "1"),  # 1/4
    "Compute 3 + 3.": boxed("6", "6", "6", "1"),  # 3/4: on the threshold, kept
    "Compute 5 - 5.": boxed("0", "0", "0", "0"),  # 4/4: too easy
}


def test_select_prompts_keeps_expected_rows(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(ev, "generate_completions", stub_generator(SELECTION_SAMPLES))
    with caplog.at_level("INFO", logger="trl_ada.evaluation"):
        kept = ev.select_prompts("m", _selection_dataset(), num_samples=4, max_pass_rate=0.75)
    assert kept["source"] == ["b", "c"]
    assert kept["pass_rate"] == [0.25, 0.75]
    assert kept["num_correct"] == [1, 3]
    assert kept["prompt"][0][-1]["content"].startswith("Compute 1 + 2.")
    assert "kept 2 of 4; dropped 1 with fewer than 1 correct" in caplog.text
    assert "and 1 with pass rate > 0.75" in caplog.text


def test_select_prompts_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "generate_completions", stub_generator(SELECTION_SAMPLES))
    strict = ev.select_prompts("m", _selection_dataset(), num_samples=4, max_pass_rate=0.5)
    assert strict["source"] == ["b"]
    everything = ev.select_prompts("m", _selection_dataset(), num_samples=4, max_pass_rate=1.0, min_correct=0)
    assert everything["pass_rate"] == [0.0, 0.25, 0.75, 1.0]


# ----------------------------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------------------------


def test_bad_api_options_name_the_option() -> None:
    from datasets import Dataset

    ds = Dataset.from_dict({"problem": ["Compute 1 + 1."], "answer": ["2"]})
    with pytest.raises(ValueError, match=r"^k must be .* got 0"):
        ev.avg_at_k("m", {"d": ds}, k=0)
    with pytest.raises(ValueError, match=r"^num_samples must be .* got 0"):
        ev.select_prompts("m", ds, num_samples=0)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=rf"^max_pass_rate must be in \(0, 1\], got {bad}"):
            ev.select_prompts("m", ds, max_pass_rate=bad)
    with pytest.raises(ValueError, match="top_p"):
        ev.generate_completions("m", ["x"], 1, top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        ev.generate_completions("m", ["x"], 1, temperature=-1.0)


def test_missing_columns_use_the_data_module_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from datasets import Dataset

    monkeypatch.setattr(ev, "generate_completions", pytest.fail)  # must fail before generating
    with pytest.raises(ValueError, match="No answer column found"):
        ev.avg_at_k("m", {"d": Dataset.from_dict({"problem": ["x"], "label": ["1"]})}, k=1)
    with pytest.raises(ValueError, match="No problem column found"):
        ev.select_prompts("m", Dataset.from_dict({"text": ["x"], "answer": ["1"]}))


@pytest.mark.parametrize(
    ("command", "flags", "option"),
    [
        (ev.evaluate_main, ["--k", "0"], "--k"),
        (ev.evaluate_main, ["--k", "two"], "--k"),
        (ev.evaluate_main, ["--max_new_tokens", "0"], "--max_new_tokens"),
        (ev.select_prompts_main, ["--num_samples", "0"], "--num_samples"),
        (ev.select_prompts_main, ["--max_pass_rate", "0"], "--max_pass_rate"),
        (ev.select_prompts_main, ["--max_pass_rate", "1.5"], "--max_pass_rate"),
    ],
)
def test_bad_command_options_name_the_option(command, flags, option, tmp_path, capsys) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"problem": "Compute 1 + 1.", "answer": "2"}])
    source = ["--datasets", data] if command is ev.evaluate_main else ["--dataset", data, "--output", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        command(["--model", "m", *source, *flags])
    assert exit_info.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


def test_evaluate_main_reports_missing_columns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = write_jsonl(tmp_path / "bad.jsonl", [{"text": "Compute 1 + 1.", "answer": "2"}])
    assert ev.evaluate_main(["--model", "m", "--datasets", data]) == 1
    assert "trl-ada evaluate: error: No problem column found" in capsys.readouterr().err


def test_cli_dispatches_to_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from trl_ada.cli import main

    data = write_jsonl(tmp_path / "d.jsonl", [{"problem": "Compute 1 + 1.", "answer": "2"}])
    assert main(["select-prompts", "--model", "m", "--dataset", data, "--output", "o", "--num_samples", "0"]) == 2
    assert "argument --num_samples" in capsys.readouterr().err


def test_dataset_labels(tmp_path: Path) -> None:
    local = write_jsonl(tmp_path / "aime24.jsonl", [])
    assert ev._dataset_label("math500=HuggingFaceH4/MATH-500") == ("math500", "HuggingFaceH4/MATH-500")
    assert ev._dataset_label("HuggingFaceH4/MATH-500") == ("MATH-500", "HuggingFaceH4/MATH-500")
    assert ev._dataset_label(local) == ("aime24", local)


# ----------------------------------------------------------------------------------------------------------------
# End to end on the tiny model
# ----------------------------------------------------------------------------------------------------------------


def test_evaluate_main_end_to_end(tiny_model: str, two_datasets, tmp_path: Path, capsys) -> None:
    alpha, beta = two_datasets
    output = tmp_path / "out" / "results.json"
    argv = ["--model", tiny_model, "--datasets", alpha, f"second={beta}", "--k", "2", "--max_new_tokens", "8"]
    assert ev.evaluate_main([*argv, "--backend", "transformers", "--output", str(output)]) == 0

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


def test_select_prompts_main_end_to_end(tiny_model: str, two_datasets, tmp_path: Path, monkeypatch) -> None:
    import huggingface_hub
    from datasets import Dataset, load_from_disk

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_stored")
    monkeypatch.setattr(huggingface_hub, "whoami", lambda token: {"name": "me"})
    pushed: list[tuple[str, str | None]] = []
    monkeypatch.setattr(Dataset, "push_to_hub", lambda self, repo_id, **kw: pushed.append((repo_id, kw.get("token"))))
    alpha, _ = two_datasets
    output = tmp_path / "selected"
    argv = ["--model", tiny_model, "--dataset", alpha, "--num_samples", "2", "--max_new_tokens", "8"]
    flags = ["--min_correct", "0", "--backend", "transformers", "--output", str(output), "--push_to_hub", "me/sel"]
    assert ev.select_prompts_main([*argv, *flags]) == 0

    kept = load_from_disk(str(output))
    assert len(kept) == 3  # a random model solves nothing: every pass rate is 0 <= 0.75, and min_correct=0
    assert {"prompt", "answer", "pass_rate", "num_correct"} <= set(kept.column_names)
    assert all(rate in (0.0, 0.5, 1.0) for rate in kept["pass_rate"])
    assert len((output / "prompts.jsonl").read_text().splitlines()) == 3
    assert pushed == [("me/sel", None)]  # None: huggingface_hub uses the stored login it was checked against


def test_select_prompts_push_without_token_fails_before_sampling(two_datasets, tmp_path: Path, monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    monkeypatch.setattr(ev, "select_prompts", lambda *a, **kw: pytest.fail("sampled before the token check"))
    alpha, _ = two_datasets
    argv = ["--model", "unused", "--dataset", alpha, "--backend", "transformers", "--output", str(tmp_path / "o")]
    assert ev.select_prompts_main([*argv, "--push_to_hub", "me/sel"]) == 1
    err = capsys.readouterr().err
    assert "--push_to_hub me/sel" in err and "hf auth login" in err and "--hub_token" in err
    assert not (tmp_path / "o").exists()


def test_select_prompts_hub_token_flag_is_verified_and_used(tiny_model, two_datasets, tmp_path, monkeypatch):
    import huggingface_hub
    from datasets import Dataset

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    checked: list[str] = []
    monkeypatch.setattr(huggingface_hub, "whoami", lambda token: checked.append(token) or {"name": "me"})
    pushed: list[str | None] = []
    monkeypatch.setattr(Dataset, "push_to_hub", lambda self, repo_id, **kw: pushed.append(kw.get("token")))
    alpha, _ = two_datasets
    argv = ["--model", tiny_model, "--dataset", alpha, "--num_samples", "1", "--max_new_tokens", "4"]
    flags = ["--backend", "transformers", "--output", str(tmp_path / "o"), "--push_to_hub", "me/sel"]
    assert ev.select_prompts_main([*argv, *flags, "--hub_token", "hf_flag"]) == 0
    assert checked == ["hf_flag"] and pushed == ["hf_flag"]
