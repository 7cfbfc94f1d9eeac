"""`ReinforceAdaTrainer`: TRL's `GRPOTrainer` with Reinforce-Ada's adaptive sampling.

Glue only; the algorithm lives in `sampling.py` and `advantages.py`. Per training step:

1. `_generate_and_score_completions` keeps the step's inputs, lets TRL run, then swaps in pool-baseline advantages.
2. `_generate` (training only) runs the rounds: every process holds the same `AdaptiveSampler` (driven by gathered
   rewards), each round's active prompts are sharded evenly over processes, each process calls TRL's own
   `_generate` with `samples_per_round` copies of its prompts and TRL's `_calculate_rewards` on them. At the end
   the kept n per prompt are exchanged once and each process returns its own slice, in TRL's order.
3. `_calculate_rewards` hands TRL the cached rewards of the kept samples instead of scoring them twice.

Old/ref log-probs, importance sampling and the loss stay TRL's.
"""

from __future__ import annotations

import math
import os
import textwrap
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from .advantages import compute_advantages
from .config import ReinforceAdaConfig
from .sampling import AdaptiveSampler, aggregate_rewards

__all__ = ["ReinforceAdaTrainer"]

METRIC_PREFIX = "reinforce_ada/"


def shard_evenly(items: list[int], num_shards: int) -> list[list[int]]:
    """Split `items` into `num_shards` contiguous shards of equal length ⌈len/num_shards⌉.

    Short shards are padded by repeating `items[0]`; padded slots are generated and scored (so every process
    enters every collective with the same sizes) but discarded. The real items are the first `len(items)` slots.
    """
    size = math.ceil(len(items) / num_shards)
    padded = items + [items[0]] * (size * num_shards - len(items))
    return [padded[k * size : (k + 1) * size] for k in range(num_shards)]


def _forget_unselectable(sampler: AdaptiveSampler, prompts: list[int], *stores: dict) -> None:
    """Drop samples of `prompts` that group selection can no longer keep, so a step holds O(n) per prompt."""
    for j in prompts:
        keep = set(sampler.candidates(j))
        for store in stores:
            for i in range(len(sampler.pools[j])):
                if i not in keep:
                    store.pop((j, i), None)


def _check_vllm_server(args: ReinforceAdaConfig, retry_interval: float = 1.0) -> None:
    """Wait up to `vllm_server_timeout` seconds for the vLLM server's `/health`; raise naming the options if it fails.

    TRL's own check names neither option, and keeps polling forever when something else answers on the port.
    """
    url = (args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}").rstrip("/")
    deadline = time.monotonic() + args.vllm_server_timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=max(1.0, min(10.0, args.vllm_server_timeout))):
                return  # 200
        except urllib.error.HTTPError as error:
            answer = f"{url}/health answered HTTP {error.code}"
        except (OSError, ValueError) as error:
            answer = f"nothing answered ({error})"
        if time.monotonic() >= deadline:
            raise ConnectionError(
                f"No vLLM server at {url} within vllm_server_timeout={args.vllm_server_timeout:g} s: {answer}. Start "
                "one for this model first (`trl vllm-serve --model <model>`, or `vllm serve <model>`) and wait until "
                "it reports that it is ready; then set vllm_server_base_url (or vllm_server_host and "
                "vllm_server_port) to its address, and raise vllm_server_timeout if it is still loading."
            )
        time.sleep(retry_interval)


@dataclass
class _Sample:
    """One generated completion, kept by the process that generated it until groups are formed."""

    prompt_ids: list[int]
    completion_ids: list[int]
    completion: Any
    logprobs: list[float] | None
    images: Any
    extra_logs: dict[str, Any]


class ReinforceAdaTrainer(GRPOTrainer):
    """GRPOTrainer whose training generation is Reinforce-Ada's adaptive multi-round sampling (arXiv 2510.04996).

    Takes the same arguments as [`~trl.GRPOTrainer`], with `args` a [`ReinforceAdaConfig`]. Evaluation keeps plain
    GRPO sampling. `tools`, `environment_factory` and `rollout_func` need `exit_rule="none"`.
    """

    _tag_names = ["trl", "grpo", "reinforce-ada"]
    _name = "Reinforce-Ada"
    _paper = {
        "title": "Reinforce-Ada: An Adaptive Sampling Framework for Reinforce-Style LLM Training",
        "id": "2510.04996",
        "citation": textwrap.dedent("""\
            @article{xiong2025reinforceada,
                title        = {{Reinforce-Ada: An Adaptive Sampling Framework for Reinforce-Style LLM Training}},
                author       = {Wei Xiong and Chenlu Ye and Baohao Liao and Hanze Dong and Xinxing Xu and Christof Monz
                                and Jiang Bian and Nan Jiang and Tong Zhang},
                year         = 2025,
                eprint       = {arXiv:2510.04996},
            }"""),
    }

    def __init__(self, model, reward_funcs, args: ReinforceAdaConfig | None = None, *pargs, **kwargs):
        if isinstance(model, os.PathLike):
            model = str(model)
        if args is None:
            name = model if isinstance(model, str) else model.config._name_or_path
            args = ReinforceAdaConfig(f"{name.split('/')[-1]}-Reinforce-Ada")
        if not isinstance(args, ReinforceAdaConfig):
            raise TypeError(
                f"args is a {type(args).__name__}; ReinforceAdaTrainer needs a ReinforceAdaConfig. Build it with "
                "the keyword arguments you gave GRPOConfig: ReinforceAdaConfig(output_dir=..., ...). Its defaults "
                "are the paper's (num_generations=4, scale_rewards='none', epsilon_high=0.28), not GRPOConfig's."
            )
        if args.is_adaptive:
            for option in ("tools", "rollout_func", "environment_factory"):
                if kwargs.get(option):
                    raise NotImplementedError(
                        f"{option} is not supported with adaptive sampling (exit_rule={args.exit_rule!r}): multi-turn "
                        f"rollouts cannot be resampled round by round. Use exit_rule='none' to train with {option} "
                        "through plain GRPOTrainer sampling."
                    )
        if args.use_vllm and args.vllm_mode == "server":
            _check_vllm_server(args)
        super().__init__(model, reward_funcs, args, *pargs, **kwargs)
        self._use_rounds = not (self.tools or self.rollout_func or self.environment_factories)
        self._step_inputs: list[dict] | None = None
        self._sampler: AdaptiveSampler | None = None
        self._kept_rewards_per_func: torch.Tensor | None = None

    # ----------------------------------------------------------------------------------------------------------
    # TRL joints
    # ----------------------------------------------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not (self.model.training and self._use_rounds):
            return super()._generate_and_score_completions(inputs)
        self._step_inputs = inputs
        try:
            output = super()._generate_and_score_completions(inputs)
            output["advantages"] = self._pool_advantages(len(inputs))
        finally:
            self._step_inputs, self._sampler, self._kept_rewards_per_func = None, None, None
        return output

    def _generate(self, prompts: list):
        if self._step_inputs is None:  # evaluation, or a path without rounds
            return super()._generate(prompts)
        return self._generate_adaptively(prompts, self._step_inputs)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self._kept_rewards_per_func is not None:  # the kept samples were scored during the rounds
            return self._kept_rewards_per_func
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    # ----------------------------------------------------------------------------------------------------------
    # Adaptive rounds
    # ----------------------------------------------------------------------------------------------------------

    def _generate_adaptively(self, prompts: list, inputs: list[dict]):
        args = self.args
        n = self.num_generations
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        all_prompts, all_inputs = gather_object(prompts), gather_object(inputs)
        sampler = AdaptiveSampler(
            num_prompts=len(all_prompts) // n,  # TRL's sampler repeats each prompt n times in a row
            num_generations=n,
            samples_per_round=args.samples_per_round,
            max_rounds=args.max_rounds,
            positive_threshold=args.positive_threshold,
            exit_rule=args.exit_rule,
        )
        m = sampler.samples_per_round
        weights = self.reward_weights.cpu().numpy()
        owned: dict[tuple[int, int], _Sample] = {}
        rewards_per_func: dict[tuple[int, int], np.ndarray] = {}
        local_tokens = 0

        while not sampler.done:
            active = sampler.plan_round()
            shard = shard_evenly(active, world)[rank]
            round_prompts = [all_prompts[j * n] for j in shard for _ in range(m)]
            round_inputs = [all_inputs[j * n] for j in shard for _ in range(m)]
            start = time.perf_counter()
            with self._generations_per_prompt(m):
                prompt_ids, completion_ids, _, completions, logprobs, _, images, _ = super()._generate(round_prompts)
            generation_time = time.perf_counter() - start
            round_rewards = super()._calculate_rewards(round_inputs, round_prompts, completions, completion_ids)
            round_rewards = round_rewards.float().cpu().numpy()[: len(active) * m]
            extra_logs = self._take_extra_logs(len(round_prompts))

            pool_sizes = [len(sampler.pools[j]) for j in active]
            for a, (j, base) in enumerate(zip(active, pool_sizes, strict=True)):
                for s in range(m):
                    rewards_per_func[(j, base + s)] = round_rewards[a * m + s]
            first_slot = rank * len(shard)
            for slot, j in enumerate(shard):
                if first_slot + slot >= len(active):  # padding
                    continue
                base = pool_sizes[first_slot + slot]
                for s in range(m):
                    row = slot * m + s
                    local_tokens += len(completion_ids[row])
                    owned[(j, base + s)] = _Sample(
                        prompt_ids=prompt_ids[row],
                        completion_ids=completion_ids[row],
                        completion=completions[row],
                        logprobs=None if logprobs is None else logprobs[row],
                        images=None if images is None else images[row],
                        extra_logs={column: values[row] for column, values in extra_logs.items()},
                    )
            sampler.ingest(aggregate_rewards(round_rewards, weights))
            _forget_unselectable(sampler, active, owned, rewards_per_func)
            self._metrics["train"][f"{METRIC_PREFIX}generation_time/round_{sampler.round}"].append(generation_time)

        self._sampler = sampler
        kept = [(j, i) for j, group in enumerate(sampler.select_groups()) for i in group]
        self._kept_rewards_per_func = torch.tensor(
            np.stack([rewards_per_func[key] for key in kept]), dtype=torch.float32, device=self.accelerator.device
        )
        tokens = self.accelerator.gather(torch.tensor([local_tokens], device=self.accelerator.device)).sum().item()
        self._log_sampling_metrics(sampler, tokens)
        local = slice(rank * len(prompts), (rank + 1) * len(prompts))
        return self._local_outputs(kept, owned, local)

    def _local_outputs(self, kept: list[tuple[int, int]], owned: dict[tuple[int, int], _Sample], local: slice):
        """Exchange the kept samples once and return this process's slice in the shape of TRL's `_generate`."""
        mine = {g: owned[key] for g, key in enumerate(kept) if key in owned}
        if self.accelerator.num_processes > 1:
            merged: dict[int, _Sample] = {}
            for part in gather_object([mine]):
                merged.update(part)
            mine = merged
        samples = [mine[g] for g in range(len(kept))[local]]
        for sample in samples:
            for column, value in sample.extra_logs.items():
                self._pending_extra_logs[column].append(value)
        logprobs = None if any(s.logprobs is None for s in samples) else [s.logprobs for s in samples]
        images = None if all(s.images is None for s in samples) else [s.images for s in samples]
        return (
            [s.prompt_ids for s in samples],
            [s.completion_ids for s in samples],
            None,  # tool_mask: no tools with adaptive rounds
            [s.completion for s in samples],
            logprobs,
            {},  # extra_fields: no rollout_func with adaptive rounds
            images,
            [],  # tool_images
        )

    def _take_extra_logs(self, num_rows: int) -> dict[str, list]:
        """Columns reward functions logged with `log_extra` for this round (kept per sample, flushed for the kept)."""
        logs = {column: values for column, values in self._pending_extra_logs.items() if len(values) == num_rows}
        self._pending_extra_logs.clear()
        return logs

    @contextmanager
    def _generations_per_prompt(self, count: int):
        """TRL's `_generate` asks the backend for `self.num_generations` per prompt; a round asks for M."""
        saved, self.num_generations = self.num_generations, count
        try:
            yield
        finally:
            self.num_generations = saved

    # ----------------------------------------------------------------------------------------------------------
    # Advantages and metrics
    # ----------------------------------------------------------------------------------------------------------

    def _pool_advantages(self, num_local: int) -> torch.Tensor:
        """Advantages of this process's kept samples; also fixes the advantages TRL logged for the table.

        A completion that every reward function declined (None) counts as reward 0 in its pool, so that exits can be
        decided, and gets advantage 0, as in TRL.
        """
        sampler = self._sampler
        advantages = compute_advantages(
            sampler.kept_rewards(),
            sampler.pools,
            baseline=self.args.advantage_baseline,
            scale=self.scale_rewards,
        ).reshape(-1)
        unscorable = torch.isnan(self._kept_rewards_per_func).all(dim=1).cpu().numpy()
        advantages[unscorable] = 0.0  # as TRL: no reward function had an opinion, so no learning signal
        logged = self._logs["advantages"]
        for _ in range(min(len(advantages), len(logged))):
            logged.pop()
        logged.extend(advantages.tolist())
        rank = self.accelerator.process_index
        local = advantages[rank * num_local : (rank + 1) * num_local]
        return torch.tensor(local, dtype=torch.float32, device=self.accelerator.device)

    def _log_sampling_metrics(self, sampler: AdaptiveSampler, tokens: float) -> None:
        metrics = sampler.statistics().as_metrics(prefix=METRIC_PREFIX)
        metrics[f"{METRIC_PREFIX}tokens"] = float(tokens)
        for name, value in metrics.items():
            self._metrics["train"][name].append(value)
