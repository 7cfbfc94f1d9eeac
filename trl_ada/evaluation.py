"""Sampling-based evaluation (avg@k, pass@k), pass-rate estimation and the paper's prompt selection.

```python
from trl_ada.data import load_prompt_dataset
from trl_ada.evaluation import SamplingSettings, avg_at_k, select_prompts

report = avg_at_k("Qwen/Qwen2.5-Math-1.5B", {"math500": load_prompt_dataset("HuggingFaceH4/MATH-500", "test")}, k=32)
print(report.table())
kept = select_prompts("Qwen/Qwen2.5-Math-1.5B", load_prompt_dataset("data/train.jsonl"), num_samples=16)
```

Both sample with [`generate_completions`] (vLLM when it is installed and a GPU is present, else transformers
`generate`) under one [`SamplingSettings`], and score with [`~trl_ada.rewards.math_reward`]. A sample is *correct*
when its reward exceeds `CORRECT_THRESHOLD` (math_reward is 0/1). The commands `trl-ada evaluate` and
`trl-ada select-prompts` (`trl_ada.cli`) are thin layers over this module.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .utils import format_table, mean

if TYPE_CHECKING:
    from datasets import Dataset

    from .rewards import RewardFunc

__all__ = [
    "CORRECT_THRESHOLD",
    "DEFAULT_MAX_PASS_RATE",
    "DatasetScore",
    "EvalReport",
    "SamplingSettings",
    "avg_at_k",
    "estimate_pass_rates",
    "generate_completions",
    "load_tokenizer",
    "save_selection",
    "score_completions",
    "select_prompts",
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


@dataclass(frozen=True)
class SamplingSettings:
    """How [`avg_at_k`], [`select_prompts`] and [`estimate_pass_rates`] sample completions.

    Args:
        temperature (`float`, defaults to `1.0`): sampling temperature; 0 is greedy decoding.
        top_p (`float`, defaults to `1.0`): nucleus sampling probability mass, in (0, 1].
        max_new_tokens (`int`, defaults to `4096`): most tokens per completion (the training config calls this
            `max_completion_length`, as does the `--max_completion_length` flag of the commands).
        seed (`int`, defaults to `0`): random seed of the sampling.
        backend (`str`, defaults to `"auto"`): `"vllm"`, `"transformers"` or `"auto"` (vLLM when usable).
        batch_size (`int`, defaults to `8`): prompts per `generate` call (transformers backend).
        dtype (`str`, defaults to `"auto"`): model dtype; `"auto"` is the checkpoint's on CUDA, float32 on CPU.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 4096
    seed: int = 0
    backend: str = "auto"
    batch_size: int = 8
    dtype: str = "auto"

    def __post_init__(self) -> None:
        _check_sampling(1, self.temperature, self.top_p, self.max_new_tokens)
        _check_positive_int(self.batch_size, "batch_size")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)}, got {self.backend!r}.")

    def generate_kwargs(self) -> dict[str, Any]:
        """The settings as keyword arguments of [`generate_completions`]."""
        return asdict(self)


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


def load_tokenizer(model_name_or_path: str, *, revision: str | None = None, trust_remote_code: bool = False) -> Any:
    """The model's tokenizer, padding on the left (for generation), with a pad token (the EOS token if it has none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(
        model_name_or_path, revision=revision, trust_remote_code=trust_remote_code
    )
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
    tokenizer = load_tokenizer(name)
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
    completions: Sequence[Sequence[str]],
    answers: Sequence[str],
    chunk_size: int = SCORE_CHUNK_SIZE,
    *,
    reward_func: RewardFunc | None = None,
    columns: Mapping[str, Sequence[Any]] | None = None,
) -> list[list[bool]]:
    """Correctness of every sample: its reward against its problem's answer is above `CORRECT_THRESHOLD`.

    `reward_func` (default [`~trl_ada.rewards.math_reward`]) is called as TRL calls a reward function:
    `reward_func(completions=..., answer=..., **columns)`, every per-problem value of `answer` and of the extra
    `columns` repeated for each of its samples. All samples are scored in chunks of `chunk_size` (math_reward
    verifies repeated answers once and may use its worker processes, see `TRL_ADA_REWARD_WORKERS`).
    """
    from tqdm.auto import tqdm

    if reward_func is None:
        from .rewards import math_reward as reward_func

    if len(completions) != len(answers):
        raise ValueError(f"Got {len(completions)} lists of completions for {len(answers)} answers.")
    per_problem = {"answer": answers, **(columns or {})}
    flat = [text for samples in completions for text in samples]
    repeated = {
        name: [value for samples, value in zip(completions, values, strict=True) for _ in samples]
        for name, values in per_problem.items()
    }
    rewards: list[float] = []
    for start in tqdm(range(0, len(flat), chunk_size), desc="Scoring", unit="chunk"):
        chunk = slice(start, start + chunk_size)
        rewards += reward_func(completions=flat[chunk], **{name: values[chunk] for name, values in repeated.items()})
    correct = [reward > CORRECT_THRESHOLD for reward in rewards]
    return _split_by_sizes(correct, [len(samples) for samples in completions])


def _pass_rate(correct: Sequence[bool]) -> float:
    """Share of correct samples (0.0 for none)."""
    return mean((float(c) for c in correct), default=0.0)


def estimate_pass_rates(
    model: str | Path,
    prompts: Sequence[Prompt],
    answers: Sequence[str],
    num_samples: int,
    *,
    sampling: SamplingSettings | None = None,
    reward_func: RewardFunc | None = None,
    columns: Mapping[str, Sequence[Any]] | None = None,
) -> list[float]:
    """Each prompt's pass rate: the share of its `num_samples` sampled completions that are correct.

    Samples with [`generate_completions`] under `sampling` and scores with [`score_completions`] (`reward_func`,
    default [`~trl_ada.rewards.math_reward`], gets `answer` and the extra per-prompt `columns`).
    """
    _check_positive_int(num_samples, "num_samples")
    sampling = sampling or SamplingSettings()
    completions = generate_completions(model, prompts, num_samples, **sampling.generate_kwargs())
    correct = score_completions(completions, answers, reward_func=reward_func, columns=columns)
    return [_pass_rate(samples) for samples in correct]


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
            avg_at_k=mean((_pass_rate(samples) for samples in correct), default=0.0),
            pass_at_k=mean((float(any(samples)) for samples in correct), default=0.0),
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
        return format_table(header, rows[:-1], footer=rows[-1:])


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
    *,
    sampling: SamplingSettings | None = None,
    problem_column: str | None = None,
    answer_column: str | None = None,
) -> EvalReport:
    """Sample `k` completions per problem of every dataset and report avg@k and pass@k per dataset.

    avg@k of a dataset = mean over problems of the fraction of its k samples that are correct. The datasets need a
    problem and an answer column (see `trl_ada.data.resolve_columns`) and get the paper's prompt. All prompts go to
    the backend in one call, so the model is loaded once. `sampling` defaults to `SamplingSettings()`.
    """
    _check_positive_int(k, "k")
    if not datasets:
        raise ValueError("datasets is empty: pass at least one {name: Dataset}.")
    sampling = sampling or SamplingSettings()
    formatted = {name: _format(ds, problem_column, answer_column) for name, ds in datasets.items()}
    prompts = [prompt for ds in formatted.values() for prompt in ds["prompt"]]
    answers = [answer for ds in formatted.values() for answer in ds["answer"]]
    completions = generate_completions(model, prompts, k, **sampling.generate_kwargs())
    correct = score_completions(completions, answers)
    sizes = [len(ds) for ds in formatted.values()]
    per_dataset = dict(zip(formatted, _split_by_sizes(correct, sizes), strict=True))
    settings = {name: getattr(sampling, name) for name in ("temperature", "top_p", "max_new_tokens", "seed")}
    return EvalReport(
        model=str(model),
        k=k,
        scores=[DatasetScore.from_correct(name, c) for name, c in per_dataset.items()],
        settings={**settings, "backend": resolve_backend(sampling.backend)},
        pass_rates={name: [_pass_rate(s) for s in c] for name, c in per_dataset.items()},
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
    sampling: SamplingSettings | None = None,
    problem_column: str | None = None,
    answer_column: str | None = None,
) -> Dataset:
    """The paper's difficulty filter: keep prompts the model solves sometimes, but not too often.

    Estimates each prompt's pass rate from `num_samples` samples (paper: 16; [`estimate_pass_rates`]) and keeps a
    prompt when it has at least `min_correct` correct samples and a pass rate <= `max_pass_rate` (default 0.75).
    Returns the kept rows, formatted with the paper's prompt, plus `num_correct` and `pass_rate` columns.
    `sampling` defaults to `SamplingSettings(max_new_tokens=2048)`.
    """
    _check_positive_int(num_samples, "num_samples")
    _check_max_pass_rate(max_pass_rate)
    if isinstance(min_correct, bool) or not isinstance(min_correct, int) or min_correct < 0:
        raise ValueError(f"min_correct must be an integer >= 0, got {min_correct!r}.")
    formatted = _format(dataset, problem_column, answer_column)
    earlier = [column for column in ("num_correct", "pass_rate") if column in formatted.column_names]
    formatted = formatted.remove_columns(earlier)  # re-selecting an earlier selection replaces its estimates
    sampling = sampling or SamplingSettings(max_new_tokens=2048)
    pass_rates = estimate_pass_rates(model, formatted["prompt"], formatted["answer"], num_samples, sampling=sampling)
    num_correct = [round(rate * num_samples) for rate in pass_rates]
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
