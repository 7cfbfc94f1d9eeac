"""The keyed toy task (trl_ada/toy/keyed.py), its pass-rate filter, and the probe's difficulty metrics."""

from __future__ import annotations

import math
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from trl_ada.toy import experiment, keyed, make_toy_dataset, results, toy_reward  # noqa: E402
from trl_ada.toy.specs import TaskSettings, keyed_task  # noqa: E402

# ---------------------------------------------------------------------------------------------------- task


@pytest.mark.parametrize(
    ("num_prompts", "transfer", "codes"),
    [(36, 0.0, 36), (36, 1.0, 1), (11, 0.5, 6), (11, 0.9, 2), (11, 0.1, 10), (1, 0.0, 1), (5, 0.25, 4)],
)
def test_transfer_sets_the_number_of_distinct_codes(num_prompts, transfer, codes):
    assert keyed.num_codes(num_prompts, transfer) == codes
    rows = keyed.keyed_rows(num_prompts, transfer, (1, 2, 3))
    assert len(rows) == num_prompts and len({text for _, _, text in rows}) == num_prompts
    assert len({code for code, _, _ in rows}) == codes


def test_rows_share_codes_in_blocks_and_cycle_the_counts():
    rows = keyed.keyed_rows(6, 0.6, (1, 2))  # round(1 + 0.4 * 5) = 3 codes, two consecutive items each
    codes = keyed.used_codes(3)
    assert rows == [
        (codes[0], 1, "Recall the code of AA"),
        (codes[0], 2, "Recall the code of AB"),
        (codes[1], 1, "Recall the code of AC"),
        (codes[1], 2, "Recall the code of AD"),
        (codes[2], 1, "Recall the code of AE"),
        (codes[2], 2, "Recall the code of AF"),
    ]
    assert keyed.item_name(27) == "BB"


def test_used_codes_spread_over_the_frequency_order():
    assert keyed.used_codes(keyed.MAX_KEYED_PROMPTS) == keyed.KEYED_CODES
    assert keyed.used_codes(1) == keyed.KEYED_CODES[18]  # the middle one
    assert keyed.used_codes(3) == keyed.KEYED_CODES[6] + keyed.KEYED_CODES[18] + keyed.KEYED_CODES[30]


def test_codes_are_sorted_by_how_many_tokens_contain_them():
    from trl_ada.toy import build_tokenizer

    tokenizer = build_tokenizer()
    pieces = [tokenizer.convert_tokens_to_string([token]) for token in tokenizer.get_vocab()]
    counts = [sum(code in piece for piece in pieces) for code in keyed.KEYED_CODES]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] > 50 and counts[-1] == 1
    assert not set(keyed.KEYED_CODES) & set("".join(keyed.item_name(i) for i in range(keyed.MAX_KEYED_PROMPTS)))


def test_reward_needs_the_items_code_k_times():
    rows = keyed.keyed_rows(36, 0.0, (1, 2, 3))
    assert rows[1][:2] == ("t", 2) and rows[26][:2] == ("0", 3)
    completions = ["tt", "t", "the cat", "000", "0 0", [{"role": "assistant", "content": "t0t"}]]
    answers, counts = ["t", "t", "t", "0", "0", "t"], [2, 2, 2, 3, 3, 2]
    assert toy_reward(completions, answers, counts, prompts=None, trainer_state=None) == [1, 0, 1, 1, 0, 1]


def test_dataset_is_deterministic_and_cycles_through_every_prompt():
    settings = TaskSettings(family="keyed", num_prompts=12, transfer=0.5, counts=(1, 2))
    dataset = experiment.make_task(settings, steps=3, seed=4)
    assert dataset.column_names == ["prompt", "answer", "min_count"] and dataset.num_rows == 24
    assert dataset.to_dict() == experiment.make_task(settings, steps=3, seed=4).to_dict()
    assert dataset["prompt"] != experiment.make_task(settings, steps=3, seed=5)["prompt"]
    first = {(p[0]["content"], a, k) for p, a, k in zip(*(dataset[:12][c] for c in dataset.column_names), strict=True)}
    assert first == {(text, code, count) for code, count, text in settings.task_rows()}


# ---------------------------------------------------------------------------------------------------- filter


def _stub_rates(monkeypatch, rates):
    calls = []

    def estimate(model_dir, rows, num_samples, max_new_tokens, seed):
        calls.append((model_dir, num_samples, seed))
        return rates[: len(rows)]

    monkeypatch.setattr(experiment, "estimate_row_pass_rates", estimate)
    return calls


def test_filter_keeps_exactly_the_prompts_in_the_band(monkeypatch):
    rates = [0.0, 0.0625, 0.375, 0.4375, 1.0, 0.125, 0.3125, 0.0, 0.25, 0.5]
    calls = _stub_rates(monkeypatch, rates)
    settings = keyed_task(num_prompts=10, prompts_per_step=2, filter_samples=8)
    rows = experiment.training_rows(settings, "model", seed=3)
    assert rows == [settings.task_rows()[i] for i in (1, 2, 5, 6, 8)]  # (0, 0.375]
    assert calls == [("model", 8, 3)]
    dataset = experiment.make_task(settings, steps=5, seed=3, model_dir="model")
    assert {p[0]["content"] for p in dataset["prompt"]} == {text for _, _, text in rows}


def test_filter_applies_to_the_letters_task_too(monkeypatch):
    settings = TaskSettings(pass_rate_band=(0.2, 1.0), prompts_per_step=2)
    rows = settings.task_rows()
    _stub_rates(monkeypatch, [0.5 if count == 1 else 0.0 for _, count, _ in rows])
    assert experiment.training_rows(settings, "model") == [row for row in rows if row[1] == 1]


def test_a_band_that_leaves_too_few_prompts_names_the_band_and_the_fix(monkeypatch):
    _stub_rates(monkeypatch, [0.0] * 30 + [0.25] * 6)
    with pytest.raises(ValueError) as error:
        experiment.make_task(keyed_task(), steps=2, seed=0, model_dir="model")
    message = str(error.value)
    assert "\n" not in message
    for text in ("pass_rate_band=(0.0, 0.375)", "keeps 6 of 36", "prompts_per_step=8", "widen the band"):
        assert text in message
    with pytest.raises(ValueError, match="pass its model_dir"):
        experiment.training_rows(keyed_task())


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"transfer": 1.5}, r"transfer=1\.5 is outside \[0, 1\]; use 0"),
        ({"transfer": -0.1}, r"transfer=-0\.1 is outside"),
        ({"num_prompts": 37}, r"num_prompts=37 is outside \[1, 36\]"),
        ({"num_prompts": 0}, r"num_prompts=0 is outside"),
        ({"counts": (0, 1)}, r"counts=\(0, 1\) must be .* each in \[1, 12\] .* use e\.g\. \(1, 2, 3\)"),
        ({"counts": (13,)}, r"counts=\(13,\)"),
        ({"counts": ()}, r"counts=\(\) must be non-empty"),
        ({"pass_rate_band": (0.5, 0.2)}, r"pass_rate_band=\(0\.5, 0\.2\) must satisfy 0 <= low < high <= 1; use"),
        ({"pass_rate_band": (-0.1, 0.5)}, r"pass_rate_band=\(-0\.1, 0\.5\)"),
        ({"filter_samples": 0}, r"filter_samples=0 must be at least 1"),
        ({"family": "words"}, r"family='words' is not a task family; use one of \['letters', 'keyed'\]"),
    ],
)
def test_settings_outside_their_range_are_refused_in_one_line(options, named):
    with pytest.raises(ValueError, match=named) as error:
        keyed_task(**options)
    assert "\n" not in str(error.value)


def test_letters_defaults_are_unchanged():
    settings = TaskSettings()
    assert (settings.family, settings.pass_rate_band) == ("letters", None)
    assert len(settings.task_rows()) == 40
    expected = make_toy_dataset(40, seed=0, targets="ao", counts=(1, 2, 3, 4, 5))
    assert experiment.make_task(settings, 5, 0).to_dict() == expected.to_dict()


# ---------------------------------------------------------------------------------------------------- metrics


def test_pass_at_k_is_the_unbiased_estimator():
    assert results.pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert results.pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert results.pass_at_k(4, 2, 4) == 1.0
    assert results.pass_at_k(16, 2, 8) == pytest.approx(1 - 3003 / 12870)  # 1 - C(14,8)/C(16,8)
    assert results.pass_at_k(16, 0, 16) == 0.0 and results.pass_at_k(16, 16, 1) == 1.0
    assert math.isnan(results.pass_at_k(8, 3, 16))


def test_buckets_and_their_pass_rates_on_a_hand_built_example():
    buckets = results.difficulty_buckets([0, 5, 1, 2, 16, 3])
    assert buckets == {"hard": [0, 2], "medium": [3, 5], "easy": [1, 4], "1_2_of_16": [2, 3]}
    metrics = results.probe_metrics([4, 8, 0, 2, 8, 8], 8, buckets)
    assert metrics["eval_pass_rate_hard"] == pytest.approx(0.25)  # (4/8 + 0) / 2
    assert metrics["eval_pass_rate_medium"] == pytest.approx(0.625)  # (2/8 + 1) / 2
    assert metrics["eval_pass_rate_easy"] == 1.0
    assert metrics["eval_pass_rate_1_2_of_16"] == pytest.approx(0.125)
    assert metrics["eval_pass_at_1"] == pytest.approx(30 / 48)
    assert metrics["eval_pass_at_8"] == pytest.approx(5 / 6)  # every prompt with a right answer
    assert "eval_pass_at_16" not in metrics
    assert math.isnan(results.probe_metrics([1], 8, {"1_2_of_16": []})["eval_pass_rate_1_2_of_16"])


def test_entropy_of_uniform_and_peaked_distributions():
    import torch

    vocab = 384
    live = torch.tensor([[True, True, False]])
    uniform = torch.zeros(1, 3, vocab)
    assert results.mean_token_entropy(uniform, live) == pytest.approx(math.log(vocab), rel=1e-6)
    peaked = torch.full((1, 3, vocab), -1e4)
    peaked[..., 0] = 0.0
    peaked[0, 2] = 0.0  # uniform, but after the end: not counted
    assert results.mean_token_entropy(peaked, live) == pytest.approx(0.0, abs=1e-6)
    halves = torch.zeros(1, 2, 2)
    assert results.mean_token_entropy(halves, torch.tensor([[True, False]])) == pytest.approx(math.log(2))


def test_metrics_at_milestones_read_the_first_probe_at_or_after_each():
    nan = math.nan
    records = [
        {"step": k, "cumulative_samples": 32.0 * k, "eval_pass_rate": p, "eval_pass_at_2": q, "samples": 32.0}
        for k, (p, q) in enumerate([(nan, nan), (0.1, 0.2), (nan, nan), (0.3, 0.5)], start=1)
    ]
    rows = results.metrics_at_milestones(records, [0, 64, 65, 1000])
    assert [r["step"] for r in rows[:3]] == [2, 2, 4]
    assert rows[2] == {"milestone": 65.0, "step": 4.0, "cumulative_samples": 128.0, "eval_pass_rate": 0.3,
                       "eval_pass_at_2": 0.5}  # fmt: skip
    assert math.isnan(rows[3]["step"]) and math.isnan(rows[3]["eval_pass_at_2"])


# ---------------------------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_two_steps_on_the_filtered_keyed_task_record_the_difficulty_metrics(tmp_path):
    settings = keyed_task(prompts_per_step=2, eval_every=1, eval_samples=4)
    model_dir = experiment.prepare_model(tmp_path / "model", seed=0)
    dataset = experiment.make_task(settings, steps=2, seed=0, model_dir=model_dir)
    rows = experiment.training_rows(settings, model_dir, seed=0)
    assert 2 <= len(rows) < 36 and set(dataset["answer"]) <= {code for code, _, _ in rows}
    spec = experiment.MethodSpec("grpo_n4", "GRPO n=4")
    records = experiment.run_method(spec, model_dir, dataset, seed=0, steps=2, settings=settings, work_dir=tmp_path)
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert 0 <= record["eval_pass_rate"] <= 1 and 0 < record["eval_entropy"] <= math.log(384) + 1e-3
        assert record["eval_pass_at_1"] == pytest.approx(record["eval_pass_rate"])
        assert record["eval_pass_at_4"] >= record["eval_pass_at_2"] >= record["eval_pass_at_1"]
        assert {"eval_pass_rate_hard", "eval_pass_rate_1_2_of_16"} <= set(record)
