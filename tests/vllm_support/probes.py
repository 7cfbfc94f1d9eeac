"""What the engine was asked and what it computes, read from the outside of a training run (test-only)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import requests
import torch


def server_metric(base_url: str, name: str, missing: float | None = None) -> float:
    """A Prometheus gauge or counter of the server's `/metrics`, summed over its label sets; `missing` when the
    server does not export it (None: an error)."""
    text = requests.get(f"{base_url}/metrics", timeout=10).text
    values = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.eE+-]+)$", text, flags=re.M)
    if not values and missing is None:
        raise KeyError(f"{name} is not in the /metrics of {base_url}")
    return sum(float(v) for v in values) if values else missing


def server_prompt_logprobs(base_url: str, model: str, token_ids: list[int]) -> list[float]:
    """Log-probs the vLLM server at `base_url` gives each token of `token_ids` after the first."""
    response = requests.post(
        f"{base_url}/v1/completions",
        json={"model": model, "prompt": [token_ids], "max_tokens": 1, "prompt_logprobs": 0},
        timeout=60,
    )
    response.raise_for_status()
    positions = response.json()["choices"][0]["prompt_logprobs"]
    return [positions[i][str(token)]["logprob"] for i, token in enumerate(token_ids) if i > 0]


def engine_prompt_logprobs(generation, token_ids: list[int]) -> list[float]:
    """Log-probs the engine behind a TRL `VLLMGeneration` gives each token of `token_ids` after the first."""
    if generation.mode == "server":
        client = generation.vllm_client
        return server_prompt_logprobs(client.base_url, client.model, token_ids)
    from vllm import SamplingParams

    llm = generation.llm
    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
    # the class's method: the trainer's calls may be wrapped by `record_requests`, a probe must not be recorded
    (output,) = type(llm).generate(llm, [{"prompt_token_ids": token_ids}], sampling_params=params, use_tqdm=False)
    return [output.prompt_logprobs[i][token].logprob for i, token in enumerate(token_ids) if i > 0]


@torch.no_grad()
def model_logprobs(model: torch.nn.Module, token_ids: list[int]) -> list[float]:
    """The same log-probs from the trainer's model (float32, temperature 1)."""
    logits = model(torch.tensor([token_ids], device=model.device)).logits[0].float()
    logps = logits.log_softmax(-1)
    return [logps[i - 1, token].item() for i, token in enumerate(token_ids) if i > 0]


def record_requests(generation, prompt_key: Callable[[list[int]], str]) -> list[Counter]:
    """Wrap the engine's generate call; each call appends a Counter {prompt key: completions requested}."""
    calls: list[Counter] = []
    if generation.mode == "server":
        client = generation.vllm_client
        original = client.generate

        def generate(prompts, *args, n: int = 1, **kwargs):
            calls.append(Counter({prompt_key(p): 0 for p in prompts}))
            for p in prompts:
                calls[-1][prompt_key(p)] += n
            return original(prompts, *args, n=n, **kwargs)

        client.generate = generate
    else:
        llm = generation.llm
        original = llm.generate

        def generate(prompts, *args, sampling_params, **kwargs):
            calls.append(Counter())
            for p in prompts:
                calls[-1][prompt_key(p["prompt_token_ids"])] += sampling_params.n
            return original(prompts, *args, sampling_params=sampling_params, **kwargs)

        llm.generate = generate
    return calls
