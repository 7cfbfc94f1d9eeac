"""Sampling-based evaluation (avg@k, pass@k) and the paper's pass-rate prompt selection.

```python
from trl_ada.evaluation import avg_at_k, select_prompts
from trl_ada.data import load_prompt_dataset

report = avg_at_k("Qwen/Qwen2.5-Math-1.5B", {"math500": load_prompt_dataset("HuggingFaceH4/MATH-500", "test")}, k=32)
print(report.table())
kept = select_prompts("Qwen/Qwen2.5-Math-1.5B", load_prompt_dataset("data/train.jsonl"), num_samples=16)
```

Both sample with :func:`generate_completions` (vLLM when it is installed and a GPU is present, else transformers
`generate`) and score with :func:`trl_ada.rewards.math_reward`. A sample is *correct* when its reward exceeds
:data:`CORRECT_THRESHOLD` (math_reward is 0/1).

Command line: `trl-ada evaluate ...` and `trl-ada select-prompts ...` (see :func:`evaluate_main`,
:func:`select_prompts_main`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = [
    "BACKENDS",
    "CORRECT_THRESHOLD",
    "DEFAULT_MAX_PASS_RATE",
    "DatasetScore",
    "EvalReport",
    "avg_at_k",
    "encode_prompts",
    "evaluate_main",
    "generate_completions",
    "make_evaluate_parser",
    "make_select_prompts_parser",
    "resolve_backend",
    "save_selection",
    "score_completions",
    "select_prompts",
    "select_prompts_main",
    "vllm_available",
    "weighted_average",
]

logger = logging.getLogger(__name__)

Prompt = str | list[dict[str, str]]
"""A plain-text prompt (used as is) or a conversation (rendered with the tokenizer's chat template)."""

BACKENDS = ("auto", "vllm", "transformers")
CORRECT_THRESHOLD = 0.5
"""A sample whose reward is strictly above this counts as correct."""
SCORE_CHUNK_SIZE = 1024
"""Samples per `math_reward` call (one progress-bar step)."""
DEFAULT_MAX_PASS_RATE = 0.75
"""`select_prompts` keeps prompts solved at most this often (with 16 samples: at most 12 correct). Above it, a GRPO
group of 4 is all-correct, hence gradient-free, more than a third of the time (0.75**4 = 0.32; at 0.9, 0.66)."""


# ----------------------------------------------------------------------------------------------------------------
# Generation backends
# ----------------------------------------------------------------------------------------------------------------


def _check_positive_int(value: int, name: str) -> None:
    """ValueError naming `name` unless `value` is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")


def _check_sampling(num_samples: int, temperature: float, top_p: float, max_new_tokens: int) -> None:
    """ValueError naming the first invalid sampling option."""
    _check_positive_int(num_samples, "num_samples")
    _check_positive_int(max_new_tokens, "max_new_tokens")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature!r}.")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}.")


def vllm_available() -> bool:
    """True when vLLM is installed and a CUDA device is visible."""
    import torch

    return importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


def resolve_backend(backend: str) -> str:
    """`auto` -> `vllm` when usable, else `transformers`; an explicit `vllm` without vLLM or CUDA is an error."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}.")
    if backend == "auto":
        return "vllm" if vllm_available() else "transformers"
    if backend == "vllm" and not vllm_available():
        raise ValueError("backend='vllm' needs the `vllm` package and a CUDA GPU; use backend='transformers'.")
    return backend


def _load_tokenizer(model_name_or_path: str) -> Any:
    """The model's tokenizer, padding on the left, with a pad token."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def encode_prompts(tokenizer: Any, prompts: Sequence[Prompt], chat_template_kwargs: dict | None = None) -> list:
    """Token ids of each prompt; conversations go through the chat template with the generation prompt."""
    encoded = []
    for prompt in prompts:
        if isinstance(prompt, str):
            text = prompt
        else:
            text = tokenizer.apply_chat_template(
                prompt, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
            )
        encoded.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return encoded


def _generate_vllm(
    model_name_or_path: str,
    prompt_ids: list[list[int]],
    num_samples: int,
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
    dtype: str,
) -> list[list[str]]:
    """Sample with vLLM; prompt i is seeded `seed + i * num_samples` (vLLM adds the sample index)."""
    import vllm

    llm = vllm.LLM(model=model_name_or_path, dtype=dtype, seed=seed)
    params = [
        vllm.SamplingParams(
            n=num_samples, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens, seed=seed + i * num_samples
        )
        for i in range(len(prompt_ids))
    ]
    outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompt_ids], params, use_tqdm=True)
    return [[sample.text for sample in output.outputs] for output in outputs]


def _torch_dtype(dtype: str, on_cuda: bool) -> Any:
    """`auto` -> the checkpoint's dtype on CUDA, float32 on CPU; else the named torch dtype."""
    import torch

    if dtype == "auto":
        return "auto" if on_cuda else torch.float32
    resolved = getattr(torch, dtype, None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"dtype must be 'auto' or a torch dtype name such as 'bfloat16', got {dtype!r}.")
    return resolved


def _sampling_kwargs(temperature: float, top_p: float, max_new_tokens: int, num_samples: int) -> dict[str, Any]:
    """`generate` options for plain sampling: the model's own top-k / repetition settings are switched off."""
    if temperature == 0:
        return {"do_sample": False, "max_new_tokens": max_new_tokens, "num_return_sequences": 1}
    return {
        "do_sample": True,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": 0,
        "min_p": None,
        "repetition_penalty": 1.0,
        "max_new_tokens": max_new_tokens,
        "num_return_sequences": num_samples,
    }


def _generate_transformers(
    model_name_or_path: str,
    tokenizer: Any,
    prompt_ids: list[list[int]],
    num_samples: int,
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
    batch_size: int,
    dtype: str,
) -> list[list[str]]:
    """Sample with `generate`, `batch_size` prompts at a time (left padded, longest first), on CUDA if present."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(model_name_or_path, dtype=_torch_dtype(dtype, device == "cuda"))
    model = model.to(device).eval()
    kwargs = _sampling_kwargs(temperature, top_p, max_new_tokens, num_samples)
    order = sorted(range(len(prompt_ids)), key=lambda i: -len(prompt_ids[i]))
    results: list[list[str]] = [[] for _ in prompt_ids]
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    per_prompt = kwargs["num_return_sequences"]
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if device == "cuda" else []):
        torch.manual_seed(seed)
        for batch in tqdm(batches, desc="Generating", unit="batch"):
            texts = _generate_batch(model, tokenizer, [prompt_ids[i] for i in batch], kwargs)
            for j, index in enumerate(batch):
                results[index] = texts[j * per_prompt : (j + 1) * per_prompt]
    return results if per_prompt == num_samples else [samples * num_samples for samples in results]


def _generate_batch(model: Any, tokenizer: Any, prompt_ids: list[list[int]], kwargs: dict) -> list[str]:
    """Decoded completions of one left-padded batch, prompt-major (all samples of prompt 0 first)."""
    import torch

    batch = tokenizer.pad({"input_ids": prompt_ids}, padding=True, return_tensors="pt").to(model.device)
    with torch.no_grad():
        output = model.generate(**batch, pad_token_id=tokenizer.pad_token_id, **kwargs)
    return tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)


def generate_completions(
    model_name_or_path: str | Path,
    prompts: Sequence[Prompt],
    num_samples: int,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 4096,
    seed: int = 0,
    backend: str = "auto",
    batch_size: int = 8,
    dtype: str = "auto",
    chat_template_kwargs: dict | None = None,
) -> list[list[str]]:
    """`num_samples` sampled completions (decoded text) for every prompt, in prompt order.

    `backend`: `vllm` (needs vLLM and CUDA), `transformers` (`generate`, CUDA if available else CPU, `batch_size`
    prompts per call), or `auto` (vLLM when usable). `temperature=0` is greedy decoding (one completion, repeated).
    Results are reproducible for a given `seed` on a given backend and device.
    """
    _check_sampling(num_samples, temperature, top_p, max_new_tokens)
    _check_positive_int(batch_size, "batch_size")
    if not prompts:
        return []
    name = str(model_name_or_path)
    chosen = resolve_backend(backend)
    tokenizer = _load_tokenizer(name)
    prompt_ids = encode_prompts(tokenizer, prompts, chat_template_kwargs)
    logger.info("Sampling %d x %d completions with %s from %s.", len(prompts), num_samples, chosen, name)
    options = {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens, "seed": seed}
    if chosen == "vllm":
        return _generate_vllm(name, prompt_ids, num_samples, dtype=dtype, **options)
    return _generate_transformers(
        name, tokenizer, prompt_ids, num_samples, batch_size=batch_size, dtype=dtype, **options
    )


# ----------------------------------------------------------------------------------------------------------------
# Scoring
# ----------------------------------------------------------------------------------------------------------------


def score_completions(
    completions: Sequence[Sequence[str]], answers: Sequence[str], chunk_size: int = SCORE_CHUNK_SIZE
) -> list[list[bool]]:
    """Correctness of every sample: its `math_reward` against its problem's answer is above CORRECT_THRESHOLD.

    All samples are scored in chunks of `chunk_size` (math_reward verifies repeated answers once and may use its
    worker processes, see `TRL_ADA_REWARD_WORKERS`).
    """
    from tqdm.auto import tqdm

    from .rewards import math_reward

    if len(completions) != len(answers):
        raise ValueError(f"Got {len(completions)} lists of completions for {len(answers)} answers.")
    flat = [text for samples in completions for text in samples]
    golds = [answer for samples, answer in zip(completions, answers, strict=True) for _ in samples]
    rewards: list[float] = []
    for start in tqdm(range(0, len(flat), chunk_size), desc="Scoring", unit="chunk"):
        rewards += math_reward(flat[start : start + chunk_size], golds[start : start + chunk_size])
    correct = [reward > CORRECT_THRESHOLD for reward in rewards]
    return _split_by_sizes(correct, [len(samples) for samples in completions])


def _mean(values: Sequence[float]) -> float:
    """Arithmetic mean; 0.0 for an empty sequence."""
    return sum(values) / len(values) if values else 0.0


# ----------------------------------------------------------------------------------------------------------------
# avg@k
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class DatasetScore:
    """One benchmark's result: avg@k (mean per-problem pass rate) and pass@k (share with >= 1 correct sample)."""

    name: str
    num_problems: int
    avg_at_k: float
    pass_at_k: float

    @classmethod
    def from_correct(cls, name: str, correct: Sequence[Sequence[bool]]) -> DatasetScore:
        """Aggregate per-sample correctness of each problem."""
        return cls(
            name=name,
            num_problems=len(correct),
            avg_at_k=_mean([_mean([float(c) for c in samples]) for samples in correct]),
            pass_at_k=_mean([float(any(samples)) for samples in correct]),
        )


def weighted_average(scores: Sequence[DatasetScore], name: str = "average") -> DatasetScore:
    """The problem-count-weighted mean of the scores (the pooled score over all problems)."""
    total = sum(score.num_problems for score in scores)

    def pooled(metric: str) -> float:
        return sum(getattr(s, metric) * s.num_problems for s in scores) / total if total else 0.0

    return DatasetScore(name, total, pooled("avg_at_k"), pooled("pass_at_k"))


@dataclass
class EvalReport:
    """Per-dataset avg@k / pass@k, their size-weighted average, the settings, and per-problem pass rates."""

    model: str
    k: int
    scores: list[DatasetScore]
    settings: dict[str, Any] = field(default_factory=dict)
    pass_rates: dict[str, list[float]] = field(default_factory=dict)

    @property
    def average(self) -> DatasetScore:
        """Size-weighted average over datasets."""
        return weighted_average(self.scores)

    def to_dict(self, per_problem: bool = False) -> dict[str, Any]:
        """JSON-ready dict; `per_problem=True` adds every problem's pass rate."""
        out: dict[str, Any] = {
            "model": self.model,
            "k": self.k,
            "settings": self.settings,
            "datasets": [asdict(score) for score in self.scores],
            "average": asdict(self.average),
        }
        if per_problem:
            out["pass_rates"] = self.pass_rates
        return out

    def to_json(self, path: str | Path | None = None, per_problem: bool = False) -> str:
        """The report as JSON text, also written to `path` when given."""
        text = json.dumps(self.to_dict(per_problem=per_problem), indent=2)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text + "\n")
        return text

    def table(self) -> str:
        """A plain-text table: one row per dataset, then the size-weighted average."""
        header = ("dataset", "#problems", f"avg@{self.k}", f"pass@{self.k}")
        rows = [
            (s.name, str(s.num_problems), f"{100 * s.avg_at_k:.2f}", f"{100 * s.pass_at_k:.2f}")
            for s in [*self.scores, self.average]
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(
                [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
            )

        rule = "-" * len(line(header))
        return "\n".join([line(header), rule, *[line(r) for r in rows[:-1]], rule, line(rows[-1])])


def _format(dataset: Dataset, problem_column: str | None, answer_column: str | None) -> Dataset:
    """The dataset with the paper's conversational `prompt` and string `answer` columns."""
    from .data import format_dataset

    return format_dataset(dataset, problem_column=problem_column, answer_column=answer_column)


def _split_by_sizes(items: list, sizes: Sequence[int]) -> list[list]:
    """Cut `items` into consecutive chunks of the given sizes."""
    chunks, start = [], 0
    for size in sizes:
        chunks.append(items[start : start + size])
        start += size
    return chunks


def avg_at_k(
    model: str | Path,
    datasets: dict[str, Dataset],
    k: int = 32,
    temperature: float = 1.0,
    max_new_tokens: int = 4096,
    *,
    top_p: float = 1.0,
    seed: int = 0,
    backend: str = "auto",
    batch_size: int = 8,
    dtype: str = "auto",
    problem_column: str | None = None,
    answer_column: str | None = None,
) -> EvalReport:
    """Sample `k` completions per problem of every dataset and report avg@k and pass@k per dataset.

    avg@k of a dataset = mean over problems of the fraction of its k samples that are correct. The datasets need a
    problem and an answer column (see `trl_ada.data.resolve_columns`) and get the paper's prompt. All prompts go to
    the backend in one call, so the model is loaded once.
    """
    _check_positive_int(k, "k")
    if not datasets:
        raise ValueError("datasets is empty: pass at least one {name: Dataset}.")
    formatted = {name: _format(ds, problem_column, answer_column) for name, ds in datasets.items()}
    prompts = [prompt for ds in formatted.values() for prompt in ds["prompt"]]
    answers = [answer for ds in formatted.values() for answer in ds["answer"]]
    completions = generate_completions(
        model,
        prompts,
        k,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        backend=backend,
        batch_size=batch_size,
        dtype=dtype,
    )
    correct = score_completions(completions, answers)
    sizes = [len(ds) for ds in formatted.values()]
    per_dataset = dict(zip(formatted, _split_by_sizes(correct, sizes), strict=True))
    settings = {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens, "seed": seed}
    return EvalReport(
        model=str(model),
        k=k,
        scores=[DatasetScore.from_correct(name, c) for name, c in per_dataset.items()],
        settings={**settings, "backend": resolve_backend(backend)},
        pass_rates={name: [_mean([float(x) for x in s]) for s in c] for name, c in per_dataset.items()},
    )


# ----------------------------------------------------------------------------------------------------------------
# Prompt selection
# ----------------------------------------------------------------------------------------------------------------


def _check_max_pass_rate(max_pass_rate: float) -> None:
    """ValueError unless 0 < max_pass_rate <= 1."""
    if not 0 < max_pass_rate <= 1:
        raise ValueError(f"max_pass_rate must be in (0, 1], got {max_pass_rate!r}.")


def select_prompts(
    model: str | Path,
    dataset: Dataset,
    num_samples: int = 16,
    max_pass_rate: float = DEFAULT_MAX_PASS_RATE,
    min_correct: int = 1,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 2048,
    seed: int = 0,
    backend: str = "auto",
    batch_size: int = 8,
    dtype: str = "auto",
    problem_column: str | None = None,
    answer_column: str | None = None,
) -> Dataset:
    """The paper's difficulty filter: keep prompts the model solves sometimes, but not too often.

    Samples `num_samples` completions per prompt (paper: 16) and keeps a prompt when it has at least `min_correct`
    correct samples and a pass rate <= `max_pass_rate` (default 0.75). Returns the kept rows, formatted with the
    paper's prompt, plus `num_correct` and `pass_rate` columns.
    """
    _check_positive_int(num_samples, "num_samples")
    _check_max_pass_rate(max_pass_rate)
    if isinstance(min_correct, bool) or not isinstance(min_correct, int) or min_correct < 0:
        raise ValueError(f"min_correct must be an integer >= 0, got {min_correct!r}.")
    formatted = _format(dataset, problem_column, answer_column)
    completions = generate_completions(
        model,
        formatted["prompt"],
        num_samples,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        backend=backend,
        batch_size=batch_size,
        dtype=dtype,
    )
    correct = score_completions(completions, formatted["answer"])
    num_correct = [sum(samples) for samples in correct]
    pass_rates = [n / num_samples for n in num_correct]
    scored = formatted.add_column("num_correct", num_correct).add_column("pass_rate", pass_rates)
    keep = [
        i
        for i, (n, p) in enumerate(zip(num_correct, pass_rates, strict=True))
        if n >= min_correct and p <= max_pass_rate
    ]
    _log_selection(num_correct, pass_rates, len(keep), min_correct, max_pass_rate)
    return scored.select(keep)


def _log_selection(
    num_correct: Sequence[int], pass_rates: Sequence[float], kept: int, min_correct: int, max_pass_rate: float
) -> None:
    """Log how many prompts were kept and why the others were dropped."""
    too_hard = sum(n < min_correct for n in num_correct)
    too_easy = sum(n >= min_correct and p > max_pass_rate for n, p in zip(num_correct, pass_rates, strict=True))
    logger.info(
        "Prompt selection: kept %d of %d; dropped %d with fewer than %d correct (all-wrong when 1) and %d with pass "
        "rate > %.2f (too easy).",
        kept,
        len(num_correct),
        too_hard,
        min_correct,
        too_easy,
        max_pass_rate,
    )


# ----------------------------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------------------------


def _bounded(cast: type, low: float, high: float = math.inf, low_open: bool = False):
    """An argparse type: `cast(text)` within [low, high] (or (low, high] when `low_open`)."""
    if high == math.inf:
        interval = f"{'>' if low_open else '>='} {low}"
    else:
        interval = f"in {'(' if low_open else '['}{low}, {high}]"
    kind = "an integer" if cast is int else "a number"

    def parse(text: str):
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind} {interval}, got {text!r}") from None
        if value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"must be {interval}, got {value}")
        return value

    return parse


_positive_int = _bounded(int, 1)
_non_negative_int = _bounded(int, 0)
_non_negative_float = _bounded(float, 0.0)
_pass_rate = _bounded(float, 0.0, 1.0, low_open=True)


def _add_generation_arguments(parser: argparse.ArgumentParser, max_new_tokens: int) -> None:
    """Options shared by `evaluate` and `select-prompts`."""
    group = parser.add_argument_group("generation")
    group.add_argument(
        "--temperature", type=_non_negative_float, default=1.0, help="Sampling temperature; 0 is greedy."
    )
    group.add_argument("--top_p", type=_pass_rate, default=1.0, help="Nucleus sampling probability mass.")
    group.add_argument(
        "--max_new_tokens", type=_positive_int, default=max_new_tokens, help="Most tokens per completion."
    )
    group.add_argument("--backend", choices=BACKENDS, default="auto", help="auto: vLLM with CUDA, else transformers.")
    group.add_argument(
        "--batch_size", type=_positive_int, default=8, help="Prompts per `generate` call (transformers)."
    )
    group.add_argument(
        "--dtype", default="auto", help="Model dtype: auto (checkpoint dtype; float32 on CPU), bfloat16..."
    )
    group.add_argument("--seed", type=int, default=0, help="Random seed of the sampling.")


_SHARED_OPTIONS = (
    "temperature",
    "top_p",
    "max_new_tokens",
    "backend",
    "batch_size",
    "dtype",
    "seed",
    "problem_column",
    "answer_column",
)


def _shared_options(args: argparse.Namespace) -> dict[str, Any]:
    """The generation and column options of `evaluate`/`select-prompts`, as keywords of avg_at_k/select_prompts."""
    return {name: getattr(args, name) for name in _SHARED_OPTIONS}


def _add_data_arguments(parser: argparse.ArgumentParser, split: str) -> None:
    """Split and column options."""
    parser.add_argument(
        "--split", default=split, help=f"Dataset split (default: {split}); a single local file is always its data."
    )
    parser.add_argument("--problem_column", default=None, help="Problem column (default: problem, question, prompt).")
    parser.add_argument("--answer_column", default=None, help="Answer column (default: answer, gt, solution, ...).")


def make_evaluate_parser(prog: str = "trl-ada evaluate") -> argparse.ArgumentParser:
    """Parser of `trl-ada evaluate`."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Sample k completions per problem and report avg@k (mean accuracy over the k samples) and "
        "pass@k per dataset, plus their size-weighted average.",
    )
    parser.add_argument("--model", required=True, help="Model name on the Hub or local path.")
    parser.add_argument(
        "--datasets",
        nargs="+",
        required=True,
        metavar="NAME_OR_PATH",
        help="Hub datasets or local json/jsonl/parquet/csv files; write LABEL=NAME_OR_PATH to name a table row.",
    )
    _add_data_arguments(parser, "test")
    parser.add_argument("--k", type=_positive_int, default=32, help="Samples per problem (default: 32).")
    parser.add_argument("--limit", type=_positive_int, default=None, help="Evaluate only the first N problems.")
    parser.add_argument("--output", default=None, help="Write the report as JSON to this file.")
    _add_generation_arguments(parser, max_new_tokens=4096)
    return parser


def make_select_prompts_parser(prog: str = "trl-ada select-prompts") -> argparse.ArgumentParser:
    """Parser of `trl-ada select-prompts`."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Estimate each prompt's pass rate from num_samples samples and keep those with at least "
        "min_correct correct samples and a pass rate <= max_pass_rate (the paper's difficulty filter).",
    )
    parser.add_argument("--model", required=True, help="Model name on the Hub or local path.")
    parser.add_argument("--dataset", required=True, metavar="NAME_OR_PATH", help="Hub dataset or local data file.")
    _add_data_arguments(parser, "train")
    parser.add_argument("--num_samples", type=_positive_int, default=16, help="Samples per prompt (default: 16).")
    parser.add_argument(
        "--max_pass_rate",
        type=_pass_rate,
        default=DEFAULT_MAX_PASS_RATE,
        help=f"Drop prompts solved more often than this, in (0, 1] (default: {DEFAULT_MAX_PASS_RATE}).",
    )
    parser.add_argument(
        "--min_correct",
        type=_non_negative_int,
        default=1,
        help="Drop prompts with fewer correct samples (default: 1).",
    )
    parser.add_argument("--limit", type=_positive_int, default=None, help="Use only the first N prompts.")
    parser.add_argument(
        "--output", required=True, help="Directory for the kept prompts (save_to_disk) and DIR/prompts.jsonl."
    )
    parser.add_argument("--push_to_hub", default=None, metavar="REPO_ID", help="Also push the kept prompts here.")
    parser.add_argument(
        "--hub_token", default=None, help="Token for --push_to_hub (default: HF_TOKEN or the stored `hf auth login`)."
    )
    _add_generation_arguments(parser, max_new_tokens=2048)
    return parser


def _dataset_label(spec: str) -> tuple[str, str]:
    """`LABEL=NAME_OR_PATH` -> (label, source); otherwise a label from the file stem or the repository name."""
    label, sep, source = spec.partition("=")
    if sep and label and "/" not in label and not Path(spec).exists():
        return label, source
    path = Path(spec)
    return (path.stem if path.is_file() else spec.rstrip("/").split("/")[-1]), spec


def _load(source: str, split: str, limit: int | None) -> Dataset:
    """Load a dataset split (a single local file is read whole) and keep its first `limit` rows."""
    from .data import load_prompt_dataset

    dataset = load_prompt_dataset(source, split="train" if Path(source).expanduser().is_file() else split)
    return dataset.select(range(min(limit, len(dataset)))) if limit else dataset


def _setup_logging() -> None:
    """INFO logs from trl_ada to stderr, unless the application already configured them."""
    package_logger = logging.getLogger("trl_ada")
    if not package_logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
        package_logger.addHandler(handler)
        package_logger.setLevel(logging.INFO)


def _input_error(command: str, err: BaseException) -> int:
    """Print an input error (bad dataset, columns, options) without a traceback; exit code 1."""
    print(f"trl-ada {command}: error: {err}", file=sys.stderr)
    return 1


def _check_columns(dataset: Dataset, problem_column: str | None, answer_column: str | None) -> None:
    """Fail before any generation when the problem or answer column is missing."""
    from .data import resolve_columns

    resolve_columns(dataset.column_names, problem_column, answer_column)


def _load_eval_datasets(args: argparse.Namespace) -> dict[str, Dataset]:
    """The `--datasets` of `evaluate`, by table label, with their columns checked."""
    labels = [_dataset_label(spec) for spec in args.datasets]
    names = [label for label, _ in labels]
    if len(set(names)) != len(names):
        raise ValueError(f"--datasets: two datasets share a name in {names}; name them with LABEL=NAME_OR_PATH.")
    datasets = {label: _load(source, args.split, args.limit) for label, source in labels}
    for dataset in datasets.values():
        _check_columns(dataset, args.problem_column, args.answer_column)
    return datasets


def evaluate_main(argv: Sequence[str]) -> int:
    """`trl-ada evaluate`: print the avg@k table and write the JSON report when `--output` is given."""
    args = make_evaluate_parser().parse_args(list(argv))
    _setup_logging()
    try:
        datasets = _load_eval_datasets(args)
        resolve_backend(args.backend)
    except (ValueError, OSError) as err:
        return _input_error("evaluate", err)
    report = avg_at_k(args.model, datasets, k=args.k, **_shared_options(args))
    print(report.table())
    if args.output:
        report.to_json(args.output, per_problem=True)
        logger.info("Report written to %s.", args.output)
    return 0


def save_selection(
    dataset: Dataset, output_dir: str | Path, push_to_hub: str | None = None, hub_token: str | None = None
) -> Path:
    """Save with `save_to_disk` to `output_dir`, copy to `output_dir/prompts.jsonl`, and push when asked."""
    output_dir = Path(output_dir)
    dataset.save_to_disk(str(output_dir))
    dataset.to_json(str(output_dir / "prompts.jsonl"), lines=True, force_ascii=False)
    if push_to_hub:
        dataset.push_to_hub(push_to_hub, token=hub_token)
        logger.info("Pushed the kept prompts to https://huggingface.co/datasets/%s.", push_to_hub)
    return output_dir


def select_prompts_main(argv: Sequence[str]) -> int:
    """`trl-ada select-prompts`: write the kept prompts and their pass rates to `--output`."""
    args = make_select_prompts_parser().parse_args(list(argv))
    _setup_logging()
    try:
        dataset = _load(args.dataset, args.split, args.limit)
        _check_columns(dataset, args.problem_column, args.answer_column)
        resolve_backend(args.backend)
        if args.push_to_hub:
            from .cli import require_hub_token

            require_hub_token(args.hub_token, option=f"--push_to_hub {args.push_to_hub}", before="sampling")
    except (ValueError, OSError) as err:
        return _input_error("select-prompts", err)
    kept = select_prompts(
        args.model,
        dataset,
        num_samples=args.num_samples,
        max_pass_rate=args.max_pass_rate,
        min_correct=args.min_correct,
        **_shared_options(args),
    )
    output = save_selection(kept, args.output, args.push_to_hub, args.hub_token)
    print(f"Kept {len(kept)} of {len(dataset)} prompts -> {output} (train on {output / 'prompts.jsonl'}).")
    return 0
