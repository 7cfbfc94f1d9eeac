"""Tests of `trl_ada.evaluation`: generation backends, avg@k / pass@k, pass-rate estimates, prompt selection."""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from refusals import names, refusal

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from trl_ada import evaluation as ev  # noqa: E402

CONVERSATION = [{"role": "user", "content": "What is 1 + 1?"}]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A random tiny Qwen2 model with a ChatML tokenizer, built offline once for this module."""
    from trl_ada.toy import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("evaluation-tiny-model")))


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
    monkeypatch.setattr(ev.generation, "vllm_available", lambda: False)
    assert ev.resolve_backend("auto") == "transformers"
    assert ev.resolve_backend("transformers") == "transformers"
    with pytest.raises(ValueError, match="vllm"):
        ev.resolve_backend("vllm")
    with pytest.raises(ValueError, match="backend"):
        ev.resolve_backend("sglang")
    monkeypatch.setattr(ev.generation, "vllm_available", lambda: True)
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
    monkeypatch.setattr(ev.generation, "vllm_available", lambda: True)
    prompts = [CONVERSATION, [{"role": "user", "content": "Say b"}]]
    out = ev.generate_completions(tiny_model, prompts, 2, temperature=0.7, top_p=0.9, max_new_tokens=9, seed=5)

    assert out == [["p0s0", "p0s1"], ["p1s0", "p1s1"]]
    assert record["init"]["model"] == tiny_model and record["init"]["seed"] == 5
    expected_ids = ev.encode_prompts(ev.load_tokenizer(tiny_model), prompts)
    assert [p["prompt_token_ids"] for p in record["prompts"]] == expected_ids
    params = record["params"]
    assert [(p.n, p.temperature, p.top_p, p.max_tokens) for p in params] == [(2, 0.7, 0.9, 9)] * 2
    assert len({p.seed for p in params}) == 2


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(
    ev.generation.importlib.util.find_spec("vllm") is None or not _cuda_available(), reason="needs vllm and a CUDA GPU"
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
    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator(samples, calls))
    datasets = {
        "alpha": Dataset.from_dict({"problem": ["Compute 1 + 1.", "Compute 2 + 3."], "answer": ["2", "5"]}),
        "beta": Dataset.from_dict({"question": ["Compute 10 - 4."], "gt": ["6"]}),
    }
    sampling = ev.SamplingSettings(temperature=0.6, max_new_tokens=16, seed=3)
    report = ev.avg_at_k("some-model", datasets, k=4, sampling=sampling)

    assert calls == [
        {"model": "some-model", "num_prompts": 3, "num_samples": 4, "temperature": 0.6, "top_p": 1.0}
        | {"max_new_tokens": 16, "seed": 3, "backend": "auto", "batch_size": 8, "dtype": "auto", "server_url": None}
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


def test_estimate_pass_rates_passes_per_prompt_columns_to_the_reward(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict] = []
    samples = {"Say a": ["a", "aa", "b"], "Say b": ["b", "bb", "bbb"]}
    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator(samples, calls))
    prompts = [[{"role": "user", "content": text}] for text in samples]

    def at_least(completions, answer, min_count, **kwargs):
        return [float(c.count(a) >= k) for c, a, k in zip(completions, answer, min_count, strict=True)]

    sampling = ev.SamplingSettings(temperature=0.5, max_new_tokens=7, seed=4, backend="transformers")
    rates = ev.estimate_pass_rates(
        "m", prompts, ["a", "b"], 3, sampling=sampling, reward_func=at_least, columns={"min_count": [2, 1]}
    )
    assert rates == [1 / 3, 1.0]
    assert calls[0]["num_samples"] == 3 and calls[0]["max_new_tokens"] == 7 and calls[0]["seed"] == 4


def test_sampling_settings_reject_bad_values() -> None:
    names(refusal(ev.SamplingSettings, max_new_tokens=0), "max_new_tokens", ">= 1", "got 0")
    names(
        refusal(ev.SamplingSettings, backend="tgi"), "backend", "['auto', 'vllm', 'transformers', 'server']", "'tgi'"
    )
    with pytest.raises(ValueError, match="top_p"):
        ev.SamplingSettings(top_p=1.5)
    names(refusal(ev.SamplingSettings, backend="server"), "backend='server'", "server_url", "http://127.0.0.1:8000")
    names(
        refusal(ev.SamplingSettings, server_url="http://h:1"), "server_url='http://h:1'", "backend='server'", "'auto'"
    )


class ServedCompletions(BaseHTTPRequestHandler):
    """A vLLM server's `/v1/models` (serving "served-name") and `/v1/completions`: `n` completions, each the prompt's
    own token ids followed by its completion index's."""

    requests: list = []

    def do_GET(self):
        self._answer({"data": [{"id": "served-name"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ServedCompletions.requests.append(body)
        ids = body["prompt"][0]
        self._answer({"choices": [{"token_ids": [*ids[-2:], 10 + i], "logprobs": None} for i in range(body["n"])]})

    def _answer(self, payload):
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_server_backend_samples_every_prompt_from_the_server(tiny_model: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ServedCompletions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ServedCompletions.requests = []
    prompts = ["one two", [{"role": "user", "content": "three"}]]
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        settings = ev.SamplingSettings(temperature=0.5, max_new_tokens=9, backend="server", server_url=url)
        out = ev.generate_completions(tiny_model, prompts, 3, **settings.generate_kwargs())
    finally:
        server.shutdown()
    tokenizer = ev.load_tokenizer(tiny_model)
    ids = ev.encode_prompts(tokenizer, prompts)
    assert out == [[tokenizer.decode([*p[-2:], 10 + i], skip_special_tokens=True) for i in range(3)] for p in ids]
    asked = sorted(ServedCompletions.requests, key=lambda body: len(body["prompt"][0]))
    assert [body["prompt"][0] for body in asked] == sorted(ids, key=len)
    for body in asked:  # the model the server serves (not the local path); no seed: vLLM on CPU cannot seed one
        assert body["model"] == "served-name" and body["n"] == 3 and "seed" not in body
        assert body["temperature"] == 0.5 and body["max_tokens"] == 9 and body["top_p"] == 1.0


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
    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator(SELECTION_SAMPLES))
    with caplog.at_level("INFO", logger="trl_ada.evaluation"):
        kept = ev.select_prompts("m", _selection_dataset(), num_samples=4, max_pass_rate=0.75)
    assert kept["source"] == ["b", "c"]
    assert kept["pass_rate"] == [0.25, 0.75]
    assert kept["num_correct"] == [1, 3]
    assert kept["prompt"][0][-1]["content"].startswith("Compute 1 + 2.")
    names(caplog.text, "kept 2 of 4", "dropped 1 with fewer than 1 correct", "1 with pass rate > 0.75")


def test_score_prompts_keeps_every_row_and_the_band_keeps_the_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator(SELECTION_SAMPLES))
    scored = ev.score_prompts("m", _selection_dataset(), 4)
    assert scored["source"] == ["a", "b", "c", "d"]
    assert scored["num_correct"] == [0, 1, 3, 4] and scored["pass_rate"] == [0.0, 0.25, 0.75, 1.0]
    assert ev.keep_in_band(scored, max_pass_rate=0.75)["source"] == ["b", "c"]
    assert ev.keep_in_band(scored, max_pass_rate=1.0, min_correct=3)["source"] == ["c", "d"]
    names(refusal(ev.keep_in_band, scored, min_correct=-1), "min_correct", ">= 0", "got -1")


def test_select_prompts_scores_with_the_given_reward_and_the_other_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator(SELECTION_SAMPLES))
    seen = []

    def names_the_source(completions, answer, source, **kwargs):
        seen.append(set(kwargs))
        return [float(s in ("b", "d")) for s in source]

    kept = ev.select_prompts("m", _selection_dataset(), 4, max_pass_rate=1.0, reward_func=names_the_source)
    assert kept["source"] == ["b", "d"] and kept["pass_rate"] == [1.0, 1.0]
    assert seen and all("prompt" not in names and "answer" not in names for names in seen)


def test_select_prompts_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator(SELECTION_SAMPLES))
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
        names(refusal(ev.select_prompts, "m", ds, max_pass_rate=bad), "max_pass_rate", "(0, 1]", f"got {bad}")
    with pytest.raises(ValueError, match="top_p"):
        ev.generate_completions("m", ["x"], 1, top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        ev.generate_completions("m", ["x"], 1, temperature=-1.0)


def test_missing_columns_use_the_data_module_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from datasets import Dataset

    monkeypatch.setattr(ev.generation, "generate_completions", pytest.fail)  # must fail before generating
    with pytest.raises(ValueError, match="No answer column found"):
        ev.avg_at_k("m", {"d": Dataset.from_dict({"problem": ["x"], "label": ["1"]})}, k=1)
    with pytest.raises(ValueError, match="No problem column found"):
        ev.select_prompts("m", Dataset.from_dict({"text": ["x"], "answer": ["1"]}))


def test_avg_at_k_and_select_prompts_score_with_the_reward_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from datasets import Dataset

    from trl_ada.rewards import math_final_reward

    prose = {"What is 4 + 9?": ["4 + 9 = 13.", "It is 12.", "To find 4 + 9, we", r"So $\boxed{13}$."]}
    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator(prose))
    data = Dataset.from_dict({"problem": ["What is 4 + 9?"], "answer": ["13"]})
    boxed_only = ev.avg_at_k("m", {"d": data}, k=4)
    final = ev.avg_at_k("m", {"d": data}, k=4, reward_func=math_final_reward)
    assert (boxed_only.pass_rates, boxed_only.settings["reward"]) == ({"d": [0.25]}, "math_reward")
    assert (final.pass_rates, final.settings["reward"]) == ({"d": [0.5]}, "math_final_reward")
    kept = ev.select_prompts("m", data, num_samples=4, max_pass_rate=0.5, reward_func=math_final_reward)
    assert kept["pass_rate"] == [0.5]


def test_select_prompts_reads_a_list_answer_as_one_latex_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from datasets import Dataset

    samples = {"Find the primes.": boxed("2, 3", "2,3", "3, 2", "[2, 3]")}  # the last one is not the answer
    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator(samples))
    dataset = Dataset.from_dict({"problem": ["Find the primes."], "answer": [[2, 3]]})
    kept = ev.select_prompts("m", dataset, num_samples=4, max_pass_rate=1.0)
    assert (kept["answer"], kept["num_correct"]) == (["2, 3"], [3])


@pytest.mark.parametrize("value", [math.inf, -math.inf, 1e300])
def test_an_infinite_reward_is_refused_as_training_refuses_it(monkeypatch: pytest.MonkeyPatch, value) -> None:
    """evaluate and select-prompts refuse what training refuses: a reward beyond float32's range would count as
    correct (inf > 0.5) and report a 100 % pass rate."""
    from datasets import Dataset

    from trl_ada.checks import RewardError

    def boundless(completions, **kwargs):
        return [0.0, value]

    monkeypatch.setattr(ev.generation, "generate_completions", stub_generator({"What is 4 + 9?": ["12", "13"]}))
    data = Dataset.from_dict({"problem": ["What is 4 + 9?"], "answer": ["13"]})
    for run in (
        lambda: ev.avg_at_k("m", {"d": data}, k=2, reward_func=boundless),
        lambda: ev.select_prompts("m", data, num_samples=2, reward_func=boundless),
    ):
        with pytest.raises(RewardError) as refused:
            run()
        names(str(refused.value), f"'boundless' returned {value}", "the completion '13'", "[0, 1]")
