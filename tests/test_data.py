"""Prompt template, column mapping, local dataset loading and the prompt-length filter (`trl_ada.data`)."""

from __future__ import annotations

import json
import logging

import pytest
from datasets import Dataset
from refusals import names, refusal

from trl_ada.data import (
    INSTRUCTION,
    SYSTEM_PROMPT,
    ReinforceAdaScriptArguments,
    build_prompt,
    drop_unanswered,
    filter_by_prompt_length,
    format_dataset,
    load_prompt_dataset,
    prompt_token_count,
    resolve_columns,
)

ROWS = [
    {"problem": "What is 2 + 3?", "answer": "5", "level": 1},
    {"problem": "Compute 7 * 6.", "answer": "42", "level": 2},
    {"problem": "Solve x + 1 = 3 for x.", "answer": "2", "level": 1},
]

# ---------------------------------------------------------------------------------------------------- prompt template


REFERENCE_SUFFIX = " Let's think step by step and output the final answer within \\boxed{}."


def test_instruction_wording():
    assert INSTRUCTION == "Think through the problem step by step, then write your final answer inside \\boxed{}."
    assert SYSTEM_PROMPT == "Please reason step by step, and put your final answer within \\boxed{}."


def test_build_prompt_exact_text_defaults_to_the_reference_wording():
    assert build_prompt("What is 2 + 3?") == [
        {"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
        {
            "role": "user",
            "content": "What is 2 + 3? Let's think step by step and output the final answer within \\boxed{}.",
        },
    ]


def test_build_prompt_trl_ada_style_exact_text():
    assert build_prompt("What is 2 + 3?", prompt_style="trl_ada") == [
        {
            "role": "system",
            "content": "Think through the problem step by step, then write your final answer inside \\boxed{}.",
        },
        {
            "role": "user",
            "content": "What is 2 + 3?\n\n"
            "Think through the problem step by step, then write your final answer inside \\boxed{}.",
        },
    ]


def test_unknown_prompt_style_lists_the_choices():
    names(refusal(build_prompt, "Find x.", prompt_style="paper"), "prompt_style='paper'", "['reference', 'trl_ada']")


def test_build_prompt_strips_problem_whitespace():
    assert build_prompt("  Find x.\n")[-1]["content"] == f"Find x.{REFERENCE_SUFFIX}"


def test_build_prompt_system_override_and_no_system():
    assert build_prompt("Find x.", system_prompt="You are a careful mathematician.")[0] == {
        "role": "system",
        "content": "You are a careful mathematician.",
    }
    assert build_prompt("Find x.", system_prompt="") == [{"role": "user", "content": f"Find x.{REFERENCE_SUFFIX}"}]


# ---------------------------------------------------------------------------------------------------- column mapping


@pytest.mark.parametrize("problem_alias", ["problem", "question", "prompt"])
@pytest.mark.parametrize("answer_alias", ["answer", "gt", "solution", "ground_truth"])
def test_each_alias_is_recognised(problem_alias, answer_alias):
    dataset = Dataset.from_dict({problem_alias: ["What is 2 + 3?"], answer_alias: ["5"], "id": [7]})
    assert resolve_columns(dataset.column_names) == (problem_alias, answer_alias)
    formatted = format_dataset(dataset)
    assert formatted[0]["prompt"] == build_prompt("What is 2 + 3?")
    assert formatted[0]["answer"] == "5"
    assert formatted[0]["id"] == 7


def test_first_alias_found_wins():
    columns = ["solution", "question", "answer", "problem"]
    assert resolve_columns(columns) == ("problem", "answer")
    assert resolve_columns(["prompt", "question", "ground_truth", "gt"]) == ("question", "gt")


def test_explicit_columns_override_the_aliases():
    assert resolve_columns(["problem", "answer", "q", "a"], problem_column="q", answer_column="a") == ("q", "a")
    dataset = Dataset.from_dict({"problem": ["ignored"], "answer": ["0"], "q": ["What is 1 + 1?"], "a": ["2"]})
    row = format_dataset(dataset, problem_column="q", answer_column="a")[0]
    assert row["prompt"] == build_prompt("What is 1 + 1?")
    assert row["answer"] == "2"
    assert row["problem"] == "ignored"  # other columns are kept


@pytest.mark.parametrize(
    ("columns", "option"),
    [(["text", "answer"], "--problem_column"), (["problem", "explanation"], "--answer_column")],
)
def test_missing_column_error_lists_columns_and_option(columns, option):
    with pytest.raises(ValueError) as excinfo:
        resolve_columns(columns)
    message = str(excinfo.value)
    assert str(columns) in message
    assert option in message


def test_explicit_column_absent_is_an_error():
    with pytest.raises(ValueError, match=r"'q'.*problem_column.*\['problem', 'answer'\]"):
        resolve_columns(["problem", "answer"], problem_column="q")


def test_format_dataset_keeps_columns_and_stringifies_answers():
    dataset = Dataset.from_dict({"question": ["What is 6 * 7?", "Half of 3?"], "gt": [42, 1.5], "source": ["a", "b"]})
    formatted = format_dataset(dataset)
    assert set(formatted.column_names) == {"question", "gt", "source", "prompt", "answer"}
    assert formatted["answer"] == ["42", "1.5"]
    assert formatted["source"] == ["a", "b"]


def test_format_dataset_system_prompt_option():
    formatted = format_dataset(Dataset.from_dict({"problem": ["Find x."], "answer": ["1"]}), system_prompt="")
    assert formatted[0]["prompt"] == [{"role": "user", "content": f"Find x.{REFERENCE_SUFFIX}"}]
    formatted = format_dataset(Dataset.from_dict({"problem": ["Find x."], "answer": ["1"]}), prompt_style="trl_ada")
    assert formatted[0]["prompt"][-1] == {"role": "user", "content": f"Find x.\n\n{INSTRUCTION}"}


def test_conversational_prompt_column_is_kept_as_is():
    conversation = [{"role": "user", "content": "Already formatted"}]
    formatted = format_dataset(Dataset.from_dict({"prompt": [conversation], "answer": ["3"]}))
    assert formatted[0]["prompt"] == conversation


def test_rows_with_a_null_or_empty_answer_are_dropped_with_a_count(caplog):
    answers = ["5", None, "", "  ", "0"]
    dataset = Dataset.from_dict({"problem": [f"p{i}" for i in range(len(answers))], "answer": answers})
    with caplog.at_level(logging.WARNING, logger="trl_ada.data"):
        formatted = format_dataset(dataset)
    assert formatted["problem"] == ["p0", "p4"] and formatted["answer"] == ["5", "0"]
    names(caplog.text, "The dataset: dropped 3 of 5 rows", "column 'answer'")
    lists = Dataset.from_dict({"problem": ["a", "b", "c"], "answer": [["1"], [], [None]]})
    assert format_dataset(lists)["answer"] == ["1"]


def test_list_answers_become_one_latex_answer_and_unclear_ones_are_dropped_with_a_count(caplog):
    lists = Dataset.from_dict({"problem": ["a", "b", "c"], "answer": [[2, 3], [5], [1, 2, 4]]})
    assert format_dataset(lists)["answer"] == ["2, 3", "5", "1, 2, 4"]
    floats = Dataset.from_dict({"problem": list("abcde"), "answer": [1.5, float("nan"), float("inf"), 2.0, None]})
    with caplog.at_level(logging.WARNING, logger="trl_ada.data"):
        formatted = format_dataset(floats)
    assert formatted["problem"] == ["a", "d"] and formatted["answer"] == ["1.5", "2"]
    names(caplog.text, "The dataset: dropped 3 of 5 rows", "column 'answer'", "1 null or empty", "2 without a clear")
    booleans = Dataset.from_dict({"problem": ["a", "b"], "answer": [True, False]})
    names(refusal(format_dataset, booleans), "column 'answer'", "(a boolean, NaN)", "`answer_column`")


def test_a_dataset_without_any_answer_is_refused_naming_the_column():
    dataset = Dataset.from_dict({"question": ["a", "b"], "gt": [None, ""]})
    names(refusal(drop_unanswered, dataset, "gt", "data.jsonl"), "data.jsonl: ", "column 'gt'", "`answer_column`")


# ---------------------------------------------------------------------------------------------------- local loading


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_load_local_jsonl(tmp_path):
    dataset = load_prompt_dataset(str(_write_jsonl(tmp_path / "problems.jsonl", ROWS)))
    assert dataset.num_rows == 3
    assert dataset[1]["problem"] == "Compute 7 * 6."


def test_load_local_json_array(tmp_path):
    path = tmp_path / "problems.json"
    path.write_text(json.dumps(ROWS))
    assert load_prompt_dataset(str(path))["answer"] == ["5", "42", "2"]


def test_load_local_parquet(tmp_path):
    path = tmp_path / "problems.parquet"
    Dataset.from_list(ROWS).to_parquet(str(path))
    dataset = load_prompt_dataset(str(path), split="train")
    assert dataset["problem"] == [row["problem"] for row in ROWS]


def test_load_local_split_slice(tmp_path):
    dataset = load_prompt_dataset(str(_write_jsonl(tmp_path / "problems.jsonl", ROWS)), split="train[:2]")
    assert dataset.num_rows == 2


def test_load_local_directory_splits(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    _write_jsonl(data_dir / "train.jsonl", ROWS)
    _write_jsonl(data_dir / "test.jsonl", ROWS[:1])
    assert load_prompt_dataset(str(data_dir), split="train").num_rows == 3
    assert load_prompt_dataset(str(data_dir), split="test").num_rows == 1


def test_single_local_file_has_only_a_train_split(tmp_path):
    path = _write_jsonl(tmp_path / "problems.jsonl", ROWS)
    with pytest.raises(ValueError, match="single split"):
        load_prompt_dataset(str(path), split="test")


def test_load_save_to_disk_directory(tmp_path):
    from datasets import DatasetDict

    Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "single"))
    assert load_prompt_dataset(str(tmp_path / "single")).num_rows == 3
    with pytest.raises(ValueError, match="single split"):
        load_prompt_dataset(str(tmp_path / "single"), split="test")
    DatasetDict({"train": Dataset.from_list(ROWS), "test": Dataset.from_list(ROWS[:1])}).save_to_disk(
        str(tmp_path / "splits")
    )
    assert load_prompt_dataset(str(tmp_path / "splits"), split="test").num_rows == 1
    with pytest.raises(ValueError, match=r"\['train', 'test'\]"):
        load_prompt_dataset(str(tmp_path / "splits"), split="validation")


BROKEN = '{"problem": "a", "answer": "1"}\n{"problem": broken\n'


@pytest.mark.parametrize(
    ("name", "content", "fragments"),
    [
        ("empty.jsonl", "", ["empty.jsonl: ", "no rows", "the split"]),
        ("blank.jsonl", "\n\n", ["blank.jsonl: ", "no rows"]),
        ("broken.jsonl", BROKEN, ["broken.jsonl: line 2", "not valid JSON", "column 13", "Fix the file"]),
        ("binary.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00", ["binary.jsonl: line 1", "not UTF-8 text"]),
        ("pretty.json", '[\n  {"problem": "a",\n   "answer": }\n]\n', ["pretty.json: line 3", "not valid JSON"]),
    ],
)
def test_an_unreadable_local_file_is_one_line_naming_the_file_and_the_line(tmp_path, name, content, fragments):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    names(refusal(load_prompt_dataset, str(path)), *fragments)


def test_a_directory_of_files_that_do_not_fit_together_is_one_line(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", ROWS)
    _write_jsonl(tmp_path / "b.jsonl", [{"question": "q", "difficulty": 3}])
    names(refusal(load_prompt_dataset, str(tmp_path)), f"{tmp_path}: ", "(Couldn't cast", "same format and columns")
    (tmp_path / "b.jsonl").write_text(BROKEN)
    broken = refusal(load_prompt_dataset, str(tmp_path))
    names(broken, f"{tmp_path / 'b.jsonl'}: line 2", "not valid JSON", "Fix the file")


def test_unsupported_local_file(tmp_path):
    path = tmp_path / "problems.txt"
    path.write_text("What is 2 + 3?")
    with pytest.raises(ValueError, match=r"\.jsonl"):
        load_prompt_dataset(str(path))


def test_loaded_and_formatted_end_to_end(tmp_path):
    dataset = format_dataset(load_prompt_dataset(str(_write_jsonl(tmp_path / "p.jsonl", ROWS))))
    assert dataset[0]["prompt"] == build_prompt("What is 2 + 3?")
    assert dataset["answer"] == ["5", "42", "2"]
    assert dataset["level"] == [1, 2, 1]


# ---------------------------------------------------------------------------------------------------- length filter


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_prompt_token_count_matches_chat_template(tiny_tokenizer):
    prompt = build_prompt("What is 2 + 3?")
    text = tiny_tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    assert prompt_token_count(tiny_tokenizer, prompt) == len(tiny_tokenizer(text, add_special_tokens=False).input_ids)


def test_length_filter_drops_long_prompts_and_logs(tiny_tokenizer, caplog):
    problems = ["Add 1 and 1.", "Add 2 and 2.", "Add " + " and ".join(str(i) for i in range(60)) + "."]
    dataset = format_dataset(Dataset.from_dict({"problem": problems, "answer": ["2", "4", "1770"]}))
    lengths = [prompt_token_count(tiny_tokenizer, p) for p in dataset["prompt"]]
    limit = max(lengths[:2])
    assert lengths[2] > limit
    with caplog.at_level(logging.INFO, logger="trl_ada.data"):
        kept = filter_by_prompt_length(dataset, tiny_tokenizer, limit)
    assert kept["answer"] == ["2", "4"]
    assert "dropped 1 of 3" in caplog.text


def test_length_filter_keeps_prompts_at_the_limit(tiny_tokenizer):
    dataset = format_dataset(Dataset.from_dict({"problem": ["Add 1 and 1."], "answer": ["2"]}))
    limit = prompt_token_count(tiny_tokenizer, dataset[0]["prompt"])
    assert filter_by_prompt_length(dataset, tiny_tokenizer, limit).num_rows == 1
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        filter_by_prompt_length(dataset, tiny_tokenizer, limit - 1)


# ---------------------------------------------------------------------------------------------------- script arguments


def test_script_arguments_defaults_and_validation():
    args = ReinforceAdaScriptArguments(dataset_name="data.jsonl")
    assert args.reward_funcs == ["math"]
    assert args.problem_column is None and args.answer_column is None
    assert args.max_prompt_tokens is None and args.system_prompt is None
    assert args.dataset_train_split == "train"  # inherited from TRL's ScriptArguments
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        ReinforceAdaScriptArguments(max_prompt_tokens=0)
    with pytest.raises(ValueError, match="reward_funcs"):
        ReinforceAdaScriptArguments(reward_funcs=[])


def test_the_context_is_the_models_positions_else_the_tokenizers_capped_by_vllm():
    from types import SimpleNamespace

    from trl_ada.data import ModelContext, model_context

    plain = SimpleNamespace(max_position_embeddings=4096)
    unbounded = SimpleNamespace(model_max_length=int(1e30))  # transformers' "no limit" placeholder
    assert model_context(plain, unbounded) == ModelContext(4096, "the model's max_position_embeddings")
    short_tokenizer = SimpleNamespace(model_max_length=2048)
    assert model_context(plain, short_tokenizer).tokens == 4096  # the model's positions, not the tokenizer's metadata
    assert model_context(None, short_tokenizer) == ModelContext(2048, "the tokenizer's model_max_length")
    assert model_context(plain, unbounded, 1024) == ModelContext(1024, "vllm_max_model_length")
    yarn = SimpleNamespace(max_position_embeddings=32768, rope_parameters={"rope_type": "yarn", "factor": 4.0})
    assert model_context(yarn, unbounded) is None  # RoPE scaling extends the positions: not a limit
    assert model_context(yarn, short_tokenizer).tokens == 2048
    default_rope = SimpleNamespace(max_position_embeddings=512, rope_parameters={"rope_type": "default"})
    assert model_context(default_rope, None).tokens == 512


def test_only_prompts_whose_text_could_reach_the_limit_are_tokenized():
    from trl_ada.data import prompts_over

    counted = []

    def count(prompts):
        counted.extend(prompts)
        return [len(p.split()) for p in prompts]  # one token per word

    prompts = ["a b", "a " * 30, "a " * 3]
    assert prompts_over(prompts, 20, list, count) == {1: 30}
    assert counted == ["a " * 30]  # "a b" (3 bytes) and "a a a " (6 bytes) cannot hold 20 tokens
