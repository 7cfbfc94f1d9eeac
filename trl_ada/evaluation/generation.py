"""Sampling completions: one set of [`SamplingSettings`], and the backends behind [`generate_completions`]: vLLM
when it is installed and a GPU is present, else transformers `generate`, or a running vLLM server (`"server"`)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..utils import is_int

logger = logging.getLogger(__name__)

Prompt = str | list[dict[str, str]]
"""A plain-text prompt (used as is) or a conversation (rendered with the tokenizer's chat template)."""

BACKENDS = ("auto", "vllm", "transformers", "server")


@dataclass(frozen=True)
class SamplingSettings:
    """How [`avg_at_k`], [`select_prompts`] and [`estimate_pass_rates`] sample completions.

    Args:
        temperature (`float`, defaults to `1.0`): sampling temperature; 0 is greedy decoding.
        top_p (`float`, defaults to `1.0`): nucleus sampling probability mass, in (0, 1].
        max_new_tokens (`int`, defaults to `4096`): most tokens per completion (the training config calls this
            `max_completion_length`, as does the `--max_completion_length` flag of the commands).
        seed (`int`, defaults to `0`): random seed of the sampling.
        backend (`str`, defaults to `"auto"`): `"vllm"`, `"transformers"`, `"auto"` (vLLM when usable), or
            `"server"`: a running vLLM server at `server_url` (unseeded: vLLM on CPU cannot seed a request).
        batch_size (`int`, defaults to `8`): prompts per `generate` call (transformers backend).
        dtype (`str`, defaults to `"auto"`): model dtype; `"auto"` is the checkpoint's on CUDA, float32 on CPU.
        server_url (`str`, *optional*): base URL of the vLLM server of `backend="server"`, e.g.
            `http://127.0.0.1:8000`; it must serve the model (the tokenizer is loaded from the model name).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 4096
    seed: int = 0
    backend: str = "auto"
    batch_size: int = 8
    dtype: str = "auto"
    server_url: str | None = None

    def __post_init__(self) -> None:
        _check_sampling(1, self.temperature, self.top_p, self.max_new_tokens)
        _check_positive_int(self.batch_size, "batch_size")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)}, got {self.backend!r}.")
        _check_server(self.backend, self.server_url)

    def generate_kwargs(self) -> dict[str, Any]:
        """The settings as keyword arguments of [`generate_completions`]."""
        return asdict(self)


def _check_positive_int(value: int, name: str) -> None:
    """ValueError naming `name` unless `value` is an integer >= 1."""
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")


def _check_sampling(num_samples: int, temperature: float, top_p: float, max_new_tokens: int) -> None:
    """ValueError naming the first invalid sampling option."""
    _check_positive_int(num_samples, "num_samples")
    _check_positive_int(max_new_tokens, "max_new_tokens")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature!r}.")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}.")


def _check_server(backend: str, server_url: str | None) -> None:
    """ValueError unless `server_url` is given exactly when `backend` is `"server"`."""
    if backend == "server" and not server_url:
        raise ValueError(
            "backend='server' needs server_url, the base URL of a running vLLM server (e.g. http://127.0.0.1:8000)."
        )
    if backend != "server" and server_url:
        raise ValueError(f"server_url={server_url!r} is read by backend='server' only; got backend={backend!r}.")


def vllm_available() -> bool:
    """True when vLLM is installed and a CUDA device is visible."""
    import torch

    return importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


def resolve_backend(backend: str) -> str:
    """`auto` -> `vllm` when usable, else `transformers` (never `server`); an explicit `vllm` without vLLM or CUDA is
    an error."""
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


def check_context(
    model_name_or_path: str, tokenizer: Any, prompts: Sequence[Prompt], lengths: Sequence[int], max_new_tokens: int
) -> None:
    """Before the model loads: a one-line `trl_ada.data.PromptTooLongError` for a prompt that leaves no room for a
    completion in the model's context (its `max_position_embeddings`, the tokenizer's `model_max_length`)."""
    from transformers import AutoConfig

    from ..data import check_prompt_lengths, max_prompt_tokens_hint, model_context

    context = model_context(AutoConfig.from_pretrained(model_name_or_path), tokenizer)
    if context is not None:
        hint = max_prompt_tokens_hint(context, max_new_tokens)
        fix = (
            f"Drop such prompts first (trl_ada.data.filter_by_prompt_length with max_prompt_tokens={hint}, or "
            f"--max_prompt_tokens {hint} on the command line), or shorten them."
        )
        over = {index: length for index, length in enumerate(lengths) if length >= context.tokens}
        check_prompt_lengths(prompts, over, context, "prompt", fix)


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


def _generate_server(
    model_name_or_path: str,
    tokenizer: Any,
    prompt_ids: list[list[int]],
    num_samples: int,
    *,
    server_url: str,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
) -> list[list[str]]:
    """Sample from the vLLM server at `server_url` (`/v1/completions`), every prompt's request in flight at once."""
    from ..server_requests import ServerCompletions, served_model

    sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": max_new_tokens}
    model = served_model(server_url, model_name_or_path)
    server = ServerCompletions(server_url.rstrip("/"), model, sampling, lambda logprobs: (None, None))
    try:
        for index, ids in enumerate(prompt_ids):
            server.submit(index, ids, num_samples)
        results: dict[int, list[list[int]]] = {}
        while server.pending:
            results.update((result.key, result.completion_ids) for result in server.results())
    finally:
        server.close()
    return [tokenizer.batch_decode(results[index], skip_special_tokens=True) for index in range(len(prompt_ids))]


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
    server_url: str | None = None,
) -> list[list[str]]:
    """`num_samples` sampled completions (decoded text) for every prompt, in prompt order.

    `backend`: `vllm` (needs vLLM and CUDA), `transformers` (`generate`, CUDA if available else CPU, `batch_size`
    prompts per call), `auto` (vLLM when usable), or `server` (the vLLM server at `server_url`, serving the model).
    `temperature=0` is greedy decoding (one completion, repeated). Results are reproducible for a given `seed` on a
    given backend and device, except from a server, which is not seeded.
    """
    _check_sampling(num_samples, temperature, top_p, max_new_tokens)
    _check_positive_int(batch_size, "batch_size")
    _check_server(backend, server_url)
    if not prompts:
        return []
    name = str(model_name_or_path)
    chosen = resolve_backend(backend)
    tokenizer = load_tokenizer(name)
    prompt_ids = encode_prompts(tokenizer, prompts, chat_template_kwargs)
    check_context(name, tokenizer, prompts, [len(ids) for ids in prompt_ids], max_new_tokens)
    logger.info("Sampling %d x %d completions with %s from %s.", len(prompts), num_samples, chosen, name)
    options = {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens, "seed": seed}
    if chosen == "vllm":
        return _generate_vllm(name, prompt_ids, num_samples, dtype=dtype, **options)
    if chosen == "server":
        options.pop("seed")
        return _generate_server(name, tokenizer, prompt_ids, num_samples, server_url=server_url, **options)
    return _generate_transformers(
        name, tokenizer, prompt_ids, num_samples, batch_size=batch_size, dtype=dtype, **options
    )
