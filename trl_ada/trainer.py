"""`ReinforceAdaTrainer`: TRL's `GRPOTrainer` with Reinforce-Ada's adaptive sampling.

Glue only; the algorithm lives in `sampling.py`, `advantages.py`, `memory.py`, `refill.py` and `streaming.py`.
Per training step:

1. `_generate_and_score_completions` keeps the step's inputs, lets TRL run, then swaps in pool-baseline advantages.
2. `_generate` (training only) runs the rounds: every process holds the same `AdaptiveSampler` (driven by gathered
   rewards). A round is each active prompt's planned samples (M, or sized by Reinforce-Ada-Est), split evenly over
   the processes at sample level; each process prepares its rows with TRL's own preamble (environments reset, tool
   dicts, images), generates them with TRL's own `_generate` (single turn, tools, environments or `rollout_func`)
   and scores them with TRL's `_calculate_rewards`. At the end the kept n per prompt are exchanged once and each
   process returns its own slice, in TRL's order, with TRL's generation metrics computed on that kept batch.
3. `_calculate_rewards` hands TRL the cached rewards of the kept samples instead of scoring them twice.

With `generation_schedule="streaming"` (vLLM server mode) step 2 is `_generate_streaming` instead: a
`StreamingScheduler` (`streaming.py`, the same on every process) issues per-prompt requests to the server from the
main process, every arrived batch is broadcast, decoded by TRL's `_generate` (fed the server's answers through
`_generate_single_turn`) and scored by `_calculate_rewards` with its rows split over the processes, and requests of
prompts that exited are cancelled.

Old/ref log-probs, importance sampling and the loss stay TRL's.
"""

from __future__ import annotations

import math
import os
import textwrap
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from accelerate.utils import broadcast_object_list, gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from .advantages import compute_advantages, normalize_then_sum_advantages
from .checkpoint_state import (
    CANDIDATE_STREAM_FILE,
    MEMORY_FILE,
    load_candidate_stream,
    load_memory,
    save_candidate_stream,
)
from .checks import RewardGuard, check_trainer_inputs
from .config import ReinforceAdaConfig
from .memory import PassRateMemory, prompt_key, prompt_keys
from .refill import CandidateStream, RefillSampler, num_candidates, skip_before_rollout
from .run_dir import claim_run_dir, complete_checkpoint
from .sampling import AdaptiveSampler
from .server_requests import ServerCompletions
from .streaming import StreamingScheduler

__all__ = ["ReinforceAdaTrainer"]

METRIC_PREFIX = "reinforce_ada/"
_GENERATION_METRICS = ("num_tokens", "completions/", "tools/")  # what TRL's `_generate` logs


@dataclass(frozen=True)
class RoundSplit:
    """How one round's samples (`plan_sizes` per planned prompt, prompt-major) are split over the processes.

    Process p generates the global rows `[p * rows_per_process, (p + 1) * rows_per_process)` of the round. Rows past
    `num_samples` pad the last shard to an equal size (every collective needs one); there are fewer than
    `num_processes` of them, and none when `num_processes` divides `num_samples`. `copies_per_request` is what TRL's
    `_generate` is told as `num_generations`: it divides every prompt's samples and a shard, so a vLLM server can
    still ask for several completions of one prompt per request.
    """

    num_samples: int
    num_processes: int
    rows_per_process: int
    copies_per_request: int

    @property
    def num_padding(self) -> int:
        """Rows generated only to keep the shards equal (discarded, never counted)."""
        return self.rows_per_process * self.num_processes - self.num_samples


def split_round(plan_sizes: list[int], num_processes: int) -> RoundSplit:
    """Split a round at sample level so that no process generates a completion nobody asked for."""
    num_samples = sum(plan_sizes)
    rows = math.ceil(num_samples / num_processes)
    return RoundSplit(num_samples, num_processes, rows, math.gcd(*plan_sizes, rows))


def round_keys(sampler: AdaptiveSampler, planned: list[int]) -> list[tuple[int, int]]:
    """(prompt, pool index) of every sample of the `planned` round, prompt-major: the order `ingest` expects."""
    sizes = sampler.plan_sizes
    return [(j, len(sampler.pools[j]) + s) for j, size in zip(planned, sizes, strict=True) for s in range(size)]


class _RoundPromptsReady(Exception):
    """Raised by `_generate` while TRL prepares a round's rows, to hand back the prompts it built."""

    def __init__(self, prompts: list):
        super().__init__("round prompts prepared")
        self.prompts = prompts


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
    """One generated completion (or episode), kept by the process that generated it until groups are formed."""

    prompt_ids: list[int]
    completion_ids: list[int]
    completion: Any
    logprobs: list[float] | None
    images: Any
    tool_mask: list[int] | None
    tool_images: list
    extra_fields: dict[str, Any]
    extra_logs: dict[str, Any]


@dataclass
class _RoundLogs:
    """Per-step accumulators for what reward functions and TRL's `_generate` log during the rounds."""

    metric_sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # log_metric value x rows
    metric_rows: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    tool_calls: float = 0.0
    tool_failures: float = 0.0
    tool_rows: int = 0


@dataclass
class _Stream:
    """Per-step state of streaming generation: the step's prompts and what their arrived completions gave."""

    step_inputs: list[dict]
    prompt_rows: list
    owned: dict[tuple[int, int], _Sample] = field(default_factory=dict)  # (prompt, pool index) -> local sample
    rewards: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # ... -> rewards per function
    row_stats: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # ... -> prompt length, length, cut
    logs: _RoundLogs = field(default_factory=_RoundLogs)
    columns: set[str] = field(default_factory=set)
    returned_tokens: int = 0


class ReinforceAdaTrainer(GRPOTrainer):
    """GRPOTrainer whose training generation is Reinforce-Ada's adaptive multi-round sampling (arXiv 2510.04996).

    Takes the same arguments as [`~trl.GRPOTrainer`], with `args` a [`ReinforceAdaConfig`]. Evaluation keeps plain
    GRPO sampling. `tools`, `environment_factory` and `rollout_func` resample like single completions: each round asks
    TRL's own `_generate` for `samples_per_round` episodes of every active prompt.
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

    # Per-step state. Class-level defaults, so that a trainer built without `__init__` (as TRL's unit tests build
    # theirs) falls back to GRPOTrainer's behaviour instead of failing on a missing attribute.
    _step_inputs: list[dict] | None = None
    _sampler: AdaptiveSampler | None = None
    _kept_rewards_per_func: torch.Tensor | None = None
    _pool_rewards_per_func: list[np.ndarray] | None = None
    _preparing_round: bool = False
    _kept_inputs: list[dict] | None = None
    _streamed: tuple[list, list | None] | None = None
    pass_rate_memory: PassRateMemory | None = None
    candidate_stream: CandidateStream | None = None

    def __init__(self, model, reward_funcs=None, args: ReinforceAdaConfig | None = None, *pargs, **kwargs):
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
        if args.use_vllm and args.vllm_mode == "server":
            _check_vllm_server(args)
        reward_funcs = check_trainer_inputs(args, reward_funcs, pargs, kwargs)
        super().__init__(model, reward_funcs, args, *pargs, **kwargs)
        self._reward_guard = RewardGuard(
            self.reward_func_names,
            self.reward_weights.tolist(),
            args.positive_threshold,
            check_threshold=args.is_adaptive and self.accelerator.is_main_process,
        )
        self.pass_rate_memory = PassRateMemory(decay=args.memory_decay) if args.pass_rate_memory else None
        if args.uses_candidates:
            self.candidate_stream = self._new_candidate_stream(kwargs.get("environment_factory"))
        if args.generation_schedule == "streaming":
            self._check_streaming()

    # ----------------------------------------------------------------------------------------------------------
    # TRL joints
    # ----------------------------------------------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        self._step_inputs = inputs
        try:
            output = super()._generate_and_score_completions(inputs)
            if self.args.is_adaptive:  # with exit_rule="none" the pool is the group: TRL's advantages, bit for bit
                output["advantages"] = self._pool_advantages(len(inputs))
        finally:
            self._step_inputs, self._sampler = None, None
            self._kept_rewards_per_func, self._pool_rewards_per_func = None, None
        return output

    def _generate(self, prompts: list):
        if self._preparing_round:
            raise _RoundPromptsReady(prompts)
        if self._step_inputs is None:  # evaluation
            return super()._generate(prompts)
        with self._kept_step_state():
            if self.args.generation_schedule == "streaming":
                outputs = self._generate_streaming(prompts, self._step_inputs)
            else:
                outputs = self._generate_adaptively(prompts, self._step_inputs)
        if self._kept_inputs is not None:  # candidates: TRL's rows become the kept prompts (logs, row count)
            self._step_inputs[:] = self._kept_inputs
            prompts[:] = [x["prompt"] for x in self._kept_inputs]
            self._kept_inputs = None
        return outputs

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if self._streamed is not None:  # streaming: the server already generated these rows
            return self._streamed
        return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self._kept_rewards_per_func is not None:  # the kept samples were scored during the rounds
            return self._kept_rewards_per_func
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    # ----------------------------------------------------------------------------------------------------------
    # Run directory: one run per output_dir, no half-written checkpoint resumed (see run_dir.py)
    # ----------------------------------------------------------------------------------------------------------

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """TRL's `train` in a claimed run directory; a resumed run also restores the pass-rate memory."""
        with claim_run_dir(self, resume_from_checkpoint) as checkpoint:
            if self.pass_rate_memory is not None and checkpoint is not None:
                self.pass_rate_memory = load_memory(checkpoint, decay=self.args.memory_decay)
            if self.candidate_stream is not None and checkpoint is not None:
                self.candidate_stream = load_candidate_stream(checkpoint, self.candidate_stream.size)
            return super().train(checkpoint, *args, **kwargs)

    def _save_checkpoint(self, model, trial):
        with complete_checkpoint(self, trial):
            super()._save_checkpoint(model, trial)
            folder = os.path.join(self._get_output_dir(trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
            if self.pass_rate_memory is not None and self.args.should_save:  # inside: complete only with it
                self.pass_rate_memory.save(os.path.join(folder, MEMORY_FILE))
            if self.candidate_stream is not None and self.args.should_save:
                save_candidate_stream(self.candidate_stream, os.path.join(folder, CANDIDATE_STREAM_FILE))

    # ----------------------------------------------------------------------------------------------------------
    # Adaptive rounds
    # ----------------------------------------------------------------------------------------------------------

    def _generate_adaptively(self, prompts: list, inputs: list[dict]):
        n = self.num_generations
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        all_inputs = gather_object(inputs)
        step_inputs = all_inputs[::n]  # TRL's sampler repeats each prompt n times in a row
        if self.candidate_stream is not None:
            step_inputs, sampler = self._new_refill_sampler(step_inputs)
        else:
            sampler = self._new_sampler(step_inputs)
        owned: dict[tuple[int, int], _Sample] = {}  # (prompt, pool index) -> sample generated by this process
        row_stats: dict[tuple[int, int], np.ndarray] = {}  # (prompt, pool index) -> prompt length, length, truncated
        pool_rewards_per_func: list[list[np.ndarray]] = [[] for _ in step_inputs]
        logs, columns, tokens = _RoundLogs(), set(), 0

        while not sampler.done:
            active = sampler.plan_round()
            keys = round_keys(sampler, active)
            split = split_round(sampler.plan_sizes, world)
            rows = range(rank * split.rows_per_process, (rank + 1) * split.rows_per_process)
            row_prompts = [keys[min(r, split.num_samples - 1)][0] for r in rows]  # padding repeats the last
            num_real = sum(r < split.num_samples for r in rows)
            round_inputs = [dict(step_inputs[j]) for j in row_prompts]  # copies: rollout fields are merged in

            start = time.perf_counter()
            round_prompts = self._prepare_round(round_inputs)
            with (
                self._generations_per_prompt(split.copies_per_request),
                self._held_generation_metrics(logs, split.rows_per_process * world),
            ):
                prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, images, tool_images = (
                    super()._generate(round_prompts)
                )
            generation_time = time.perf_counter() - start
            _merge_extra_fields(round_inputs, extra_fields)
            with self._held_reward_metrics(logs, num_real):
                rewards = super()._calculate_rewards(round_inputs, round_prompts, completions, completion_ids)
            rewards = rewards.float().cpu().numpy()[: split.num_samples]
            stats = self._gather_row_stats(prompt_ids, completion_ids, tool_mask)[: split.num_samples]
            extra_logs = self._take_extra_logs(len(rows))
            columns.update(extra_logs)

            for (j, i), reward, stat in zip(keys, rewards, stats, strict=True):
                pool_rewards_per_func[j].append(reward)
                row_stats[(j, i)] = stat
            for local, r in enumerate(rows[:num_real]):
                owned[keys[r]] = _Sample(
                    prompt_ids=prompt_ids[local],
                    completion_ids=completion_ids[local],
                    completion=completions[local],
                    logprobs=None if logprobs is None else logprobs[local],
                    images=None if images is None else images[local],
                    tool_mask=None if tool_mask is None else tool_mask[local],
                    tool_images=tool_images[local] if tool_images else [],
                    extra_fields={k: v[local] if isinstance(v, list) else v for k, v in extra_fields.items()},
                    extra_logs={column: values[local] for column, values in extra_logs.items()},
                )
            tokens += int(stats[:, 1].sum())
            masked = stats[:, 2].astype(bool) if self.mask_truncated_completions else None
            guarded = self._reward_guard.aggregate(rewards, completions, offset=rank * split.rows_per_process)
            sampler.ingest(guarded, masked=masked)
            _forget_unselectable(sampler, active, owned)
            self._metrics["train"][f"{METRIC_PREFIX}generation_time/round_{sampler.round}"].append(generation_time)

        self._sampler = sampler
        self._reward_guard.end_step()
        self._remember_pass_rates(sampler, step_inputs)
        width = len(self.reward_funcs)
        self._pool_rewards_per_func = [
            np.stack(pool) if pool else np.empty((0, width)) for pool in pool_rewards_per_func
        ]
        kept = [
            (j, i) for j, group in zip(_kept_prompts(sampler), sampler.select_groups(), strict=True) for i in group
        ]
        if isinstance(sampler, RefillSampler):
            self._kept_inputs = [step_inputs[j] for j, _ in kept][local_rows(rank, len(prompts))]
            self._advance_candidate_stream(sampler, len(all_inputs) // n)
        kept_rewards = np.stack([self._pool_rewards_per_func[j][i] for j, i in kept])
        self._kept_rewards_per_func = torch.tensor(kept_rewards, dtype=torch.float32, device=self.accelerator.device)
        self._log_sampling_metrics(sampler, tokens)
        self._log_kept_generation_metrics(np.stack([row_stats[key] for key in kept]), logs)
        self._flush_reward_metrics(logs)
        return self._local_outputs(kept, owned, local_rows(rank, len(prompts)), sorted(columns))

    def _new_sampler(self, step_inputs: list[dict]) -> AdaptiveSampler:
        args = self.args
        return AdaptiveSampler(
            num_prompts=len(step_inputs),
            num_generations=self.num_generations,
            samples_per_round=args.samples_per_round,
            max_rounds=args.max_rounds,
            positive_threshold=args.positive_threshold,
            exit_rule=args.exit_rule,
            **self._estimation_arguments(step_inputs),
        )

    def _prepare_round(self, round_inputs: list[dict]) -> list:
        """The prompts TRL's own preamble builds for these rows: environments drawn and reset, tool dicts, images."""
        self._preparing_round = True
        try:
            GRPOTrainer._generate_and_score_completions(self, round_inputs)
        except _RoundPromptsReady as ready:
            return ready.prompts
        finally:
            self._preparing_round = False
        raise RuntimeError("GRPOTrainer._generate_and_score_completions returned without calling _generate.")

    def _gather_row_stats(self, prompt_ids, completion_ids, tool_mask) -> np.ndarray:
        """(rows of every process, 3): prompt length, completion length and truncation, as TRL's `_generate` counts."""
        eos_and_pad = [*self.eos_token_ids, self._tokenizer.pad_token_id]
        lengths = [sum(mask) for mask in tool_mask] if tool_mask is not None else [len(ids) for ids in completion_ids]
        local = [
            [len(p), length, bool(ids) and ids[-1] not in eos_and_pad]
            for p, length, ids in zip(prompt_ids, lengths, completion_ids, strict=True)
        ]
        local = torch.tensor(local, dtype=torch.long, device=self.accelerator.device).reshape(-1, 3)
        return self.accelerator.gather(local).cpu().numpy()

    def _local_outputs(self, kept: list[tuple[int, int]], owned: dict, local: slice, columns: list[str]):
        """Exchange the kept samples once and return this process's slice in the shape of TRL's `_generate`."""
        mine = {g: owned[key] for g, key in enumerate(kept) if key in owned}
        if self.accelerator.num_processes > 1:
            merged: dict[int, _Sample] = {}
            for part in gather_object([mine]):
                merged.update(part)
            mine = merged
        samples = [mine[g] for g in range(len(kept))[local]]
        for column in columns:  # a column some round did not log is None there, as in GRPOTrainer
            self._pending_extra_logs[column].extend(sample.extra_logs.get(column) for sample in samples)
        fields = sorted({key for sample in samples for key in sample.extra_fields})
        return (
            [s.prompt_ids for s in samples],
            [s.completion_ids for s in samples],
            None if any(s.tool_mask is None for s in samples) else [s.tool_mask for s in samples],
            [s.completion for s in samples],
            None if any(s.logprobs is None for s in samples) else [s.logprobs for s in samples],
            {key: [s.extra_fields.get(key) for s in samples] for key in fields},
            None if all(s.images is None for s in samples) else [s.images for s in samples],
            [s.tool_images for s in samples] if self.tools else [],
        )

    def _take_extra_logs(self, num_rows: int) -> dict[str, list]:
        """Columns reward functions logged with `log_extra` for this round (kept per sample, flushed for the kept)."""
        logs = {column: values for column, values in self._pending_extra_logs.items() if len(values) == num_rows}
        self._pending_extra_logs.clear()
        return logs

    @contextmanager
    def _kept_step_state(self):
        """Restore the step's per-row environments and tool dicts, which the rounds' preambles replace."""
        names = ("environments", "_batch_environments", "_sync_tool_dicts", "_async_tool_dicts")
        saved = {name: getattr(self, name) for name in names if hasattr(self, name)}
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    @contextmanager
    def _generations_per_prompt(self, count: int):
        """TRL's `_generate` asks the backend for `self.num_generations` copies per request; a round sets it."""
        saved, self.num_generations = self.num_generations, count
        try:
            yield
        finally:
            self.num_generations = saved

    @contextmanager
    def _held_generation_metrics(self, logs: _RoundLogs, num_rows: int):
        """Keep what TRL's `_generate` logs per call out of the log; the kept batch is logged once per step."""
        metrics = self._metrics["train"]
        saved = {key: list(values) for key, values in metrics.items() if key.startswith(_GENERATION_METRICS)}
        tokens_seen = self.state.num_input_tokens_seen
        try:
            yield
        finally:
            new = {
                key: values[len(saved.get(key, [])) :]
                for key, values in metrics.items()
                if key.startswith(_GENERATION_METRICS)
            }
            if new.get("tools/call_frequency"):  # TRL counts tool calls per call, not per completion
                calls = new["tools/call_frequency"][-1] * num_rows
                logs.tool_calls += calls
                logs.tool_failures += new.get("tools/failure_frequency", [0.0])[-1] * calls
                logs.tool_rows += num_rows
            for key in new:
                if key in saved:
                    metrics[key] = saved[key]
                else:
                    del metrics[key]
            self.state.num_input_tokens_seen = tokens_seen

    @contextmanager
    def _held_reward_metrics(self, logs: _RoundLogs, num_rows: int):
        """Hold the `log_metric` values of a round's reward call, weighted by the real rows it scored here."""
        pending = self._pending_metrics
        saved = {name: list(values) for name, values in pending.items()}
        try:
            yield
        finally:
            for name, values in pending.items():
                for value in values[len(saved.get(name, [])) :]:
                    if num_rows:
                        logs.metric_sums[name] += value * num_rows
                        logs.metric_rows[name] += num_rows
            pending.clear()
            pending.update(saved)

    # ----------------------------------------------------------------------------------------------------------
    # Streaming generation (generation_schedule="streaming", vLLM server mode)
    # ----------------------------------------------------------------------------------------------------------

    def _check_streaming(self) -> None:
        """Streaming supports single-turn text generation; refuse the rest at construction."""
        unsupported = {
            "tools": bool(self.tools),
            "environment_factory": getattr(self, "environment_factories", None) is not None,
            "rollout_func": self.rollout_func is not None,
            "a vision-language model": bool(getattr(self, "_is_vlm", False)),
        }
        found = [name for name, present in unsupported.items() if present]
        if found:
            raise ValueError(
                f"generation_schedule='streaming' does not support {', '.join(found)} (it asks the vLLM server for "
                "single-turn text completions, one request per few completions). Use generation_schedule='rounds'."
            )

    def _streaming_requests(self) -> ServerCompletions:
        """Concurrent requests to the vLLM server with TRL's sampling settings (`VLLMGeneration`'s)."""
        from trl.generation.vllm_client import parse_logprobs

        generation, args = self.vllm_generation, self.args
        sampling = {
            "repetition_penalty": generation.repetition_penalty,
            "temperature": generation.temperature,
            "top_p": generation.top_p,
            "top_k": generation.top_k,
            "min_p": 0.0 if generation.min_p is None else generation.min_p,
            "max_tokens": generation.max_completion_length,
            "logprobs": 0,
        }
        if generation.structured_outputs_regex is not None:
            sampling["structured_outputs"] = {"regex": generation.structured_outputs_regex}
        sampling.update(generation.generation_kwargs or {})
        client = generation.vllm_client
        return ServerCompletions(
            client.base_url,
            client.model,
            sampling,
            parse_logprobs,
            request_timeout=args.streaming_request_timeout,
            max_retries=args.streaming_max_retries,
        )

    def _generate_streaming(self, prompts: list, inputs: list[dict]):
        """One step's sampling as a stream of per-completion requests (see `streaming.py`).

        Every process holds the same `StreamingScheduler`. The main process alone talks to the server; each batch of
        results it receives is broadcast, split over the processes at row level for decoding and scoring (TRL's
        `_generate` and `_calculate_rewards`), and the gathered rewards drive every process's scheduler alike.
        """
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        all_inputs = gather_object(inputs) if world > 1 else inputs
        step_inputs = all_inputs[:: self.num_generations]  # TRL's sampler repeats each prompt n times in a row
        sampler = self._new_sampler(step_inputs)
        scheduler = StreamingScheduler(sampler, window=self.args.streaming_window, chunk=self.args.streaming_chunk)
        prompt_rows = self._prepare_round([dict(x) for x in step_inputs])
        prompt_ids = self._tokenize_prompts(prompt_rows)[0]
        if self.state.global_step != self._last_loaded_step:  # weights reach the server once, before generation
            self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step

        stream = _Stream(step_inputs, prompt_rows)
        requests = self._streaming_requests() if self.accelerator.is_main_process else None
        start = time.perf_counter()
        try:
            _forward(requests, prompt_ids, scheduler.start())
            while not scheduler.done:
                results = self._next_results(requests, scheduler)
                guarded, masked = self._score_streamed(results, stream)
                offset = 0
                for result in results:
                    size = result.key.size
                    update = scheduler.receive(
                        result.key.id, guarded[offset : offset + size], masked[offset : offset + size]
                    )
                    offset += size
                    _forward(requests, prompt_ids, update.issue, update.cancel)
                    _forget_unselectable(sampler, update.exited, stream.owned)
        finally:
            if requests is not None:
                requests.close()
        generation_time = time.perf_counter() - start

        self._sampler = sampler
        self._reward_guard.end_step()
        self._remember_pass_rates(sampler, step_inputs)
        self._pool_rewards_per_func = [
            np.stack([stream.rewards[(j, i)] for i in range(len(pool))]) for j, pool in enumerate(sampler.pools)
        ]
        kept = [(j, i) for j, group in enumerate(sampler.select_groups()) for i in group]
        kept_rewards = np.stack([self._pool_rewards_per_func[j][i] for j, i in kept])
        self._kept_rewards_per_func = torch.tensor(kept_rewards, dtype=torch.float32, device=self.accelerator.device)
        used_tokens = sum(
            int(stream.row_stats[(j, i)][1]) for j, pool in enumerate(sampler.pools) for i in range(len(pool))
        )
        self._log_sampling_metrics(sampler, used_tokens)
        cancelled = self._main_process_value(0 if requests is None else requests.cancelled)
        metrics = self._metrics["train"]
        metrics[f"{METRIC_PREFIX}generation_time/streaming"].append(generation_time)
        metrics[f"{METRIC_PREFIX}streaming/requests"].append(float(scheduler.requested_total))
        metrics[f"{METRIC_PREFIX}streaming/cancelled_requests"].append(float(cancelled))
        metrics[f"{METRIC_PREFIX}streaming/returned_tokens"].append(float(stream.returned_tokens))
        metrics[f"{METRIC_PREFIX}streaming/unused_returned_tokens"].append(float(stream.returned_tokens - used_tokens))
        self._log_kept_generation_metrics(np.stack([stream.row_stats[key] for key in kept]), stream.logs)
        self._flush_reward_metrics(stream.logs)
        return self._local_outputs(kept, stream.owned, local_rows(rank, len(prompts)), sorted(stream.columns))

    def _next_results(self, requests: ServerCompletions | None, scheduler: StreamingScheduler) -> list:
        """The next results the scheduler still waits for, received by the main process and shared with the others.

        A failure on the main process (retries spent, nothing left running) is raised on every process alike.
        """
        payload: list = [None]
        if requests is not None:
            try:
                results: list = []
                while not results:
                    if not requests.pending:
                        raise RuntimeError("Streaming: the scheduler waits for requests that are no longer running.")
                    results = [r for r in requests.results() if r.key.id in scheduler.in_flight]
                payload = [results]
            except RuntimeError as error:
                if self.accelerator.num_processes == 1:
                    raise
                payload = [str(error)]
        if self.accelerator.num_processes > 1:
            broadcast_object_list(payload, from_process=0)
        if isinstance(payload[0], str):
            raise RuntimeError(payload[0])
        return payload[0]

    def _score_streamed(self, results: list, stream: _Stream) -> tuple[np.ndarray, np.ndarray]:
        """Decode and score arrived completions, split over the processes; their rewards and truncation flags.

        TRL's gathers need the same number of rows on every process: the last row is repeated to even them out, and
        the repeat's score is dropped.
        """
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        rows = [(result, k) for result in results for k in range(result.key.size)]
        per_process = math.ceil(len(rows) / world)
        mine = [min(r, len(rows) - 1) for r in range(rank * per_process, (rank + 1) * per_process)]
        num_real = sum(r < len(rows) for r in range(rank * per_process, (rank + 1) * per_process))
        row_inputs = [dict(stream.step_inputs[rows[r][0].key.prompt]) for r in mine]
        row_prompts = [stream.prompt_rows[rows[r][0].key.prompt] for r in mine]
        completion_ids = [rows[r][0].completion_ids[rows[r][1]] for r in mine]
        logprobs = None if results[0].logprobs is None else [rows[r][0].logprobs[rows[r][1]] for r in mine]
        self._streamed = (completion_ids, logprobs)
        try:
            with self._generations_per_prompt(1), self._held_generation_metrics(stream.logs, per_process * world):
                row_ids, completion_ids, _, completions, logprobs, _, _, _ = GRPOTrainer._generate(self, row_prompts)
        finally:
            self._streamed = None
        with self._held_reward_metrics(stream.logs, num_real):
            rewards = GRPOTrainer._calculate_rewards(self, row_inputs, row_prompts, completions, completion_ids)
        rewards = rewards.float().cpu().numpy()[: len(rows)]
        stats = self._gather_row_stats(row_ids, completion_ids, None)[: len(rows)]
        extra_logs = self._take_extra_logs(len(mine))
        stream.columns.update(extra_logs)
        stream.returned_tokens += int(stats[:, 1].sum())
        for (result, k), reward, stat in zip(rows, rewards, stats, strict=True):
            key = (result.key.prompt, result.key.first + k)
            stream.rewards[key], stream.row_stats[key] = reward, stat
        for local, r in enumerate(mine[:num_real]):
            result, k = rows[r]
            stream.owned[(result.key.prompt, result.key.first + k)] = _Sample(
                prompt_ids=row_ids[local],
                completion_ids=completion_ids[local],
                completion=completions[local],
                logprobs=None if logprobs is None else logprobs[local],
                images=None,
                tool_mask=None,
                tool_images=[],
                extra_fields={},
                extra_logs={column: values[local] for column, values in extra_logs.items()},
            )
        guarded = self._reward_guard.aggregate(rewards, completions, offset=rank * per_process)
        masked = stats[:, 2].astype(bool) if self.mask_truncated_completions else np.zeros(len(rows), bool)
        return guarded, masked

    def _main_process_value(self, value: int) -> int:
        """`value` as the main process has it, on every process (what only the main process counts)."""
        if self.accelerator.num_processes == 1:
            return value
        payload = [value]
        broadcast_object_list(payload, from_process=0)
        return payload[0]

    # ----------------------------------------------------------------------------------------------------------
    # Reinforce-Ada-Est: pass-rate memory
    # ----------------------------------------------------------------------------------------------------------

    def _estimation_arguments(self, inputs: list[dict]) -> dict[str, Any]:
        """`AdaptiveSampler` arguments for the step's distinct prompts: sizing, futility, budget, memory prior."""
        arguments = self.args.estimation_kwargs
        if self.pass_rate_memory is not None:
            alpha, beta, hits = self.pass_rate_memory.posterior(prompt_keys([x["prompt"] for x in inputs]))
            arguments.update(prior_alpha=alpha, prior_beta=beta, memory_hits=hits)
        return arguments

    def _remember_pass_rates(self, sampler: AdaptiveSampler, inputs: list[dict]) -> None:
        """One visit per distinct prompt: every completion drawn in the step (gathered, so the same on all ranks)."""
        if self.pass_rate_memory is None:
            return
        sampled = [j for j in range(sampler.num_prompts) if sampler.pools[j]]  # a skipped candidate made no visit
        counts = np.array([sampler.counts(j) for j in sampled]).reshape(-1, 2)
        self.pass_rate_memory.update(prompt_keys([inputs[j]["prompt"] for j in sampled]), counts[:, 0], counts[:, 1])

    # ----------------------------------------------------------------------------------------------------------
    # Dynamic sampling: candidates beyond the batch, refill, pre-rollout skipping (see refill.py)
    # ----------------------------------------------------------------------------------------------------------

    def _new_candidate_stream(self, environment_factory) -> CandidateStream:
        """The seeded stream of extra candidates; a dataset too small for one step's candidates is an error."""
        args, dataset = self.args, self.train_dataset
        if environment_factory is not None:
            raise ValueError(
                "prompt_oversampling / skip_threshold / rounds_per_prompt draw candidates beyond the batch, which "
                "environment_factory does not support yet (its environments are per batch row). Use the defaults "
                "(prompt_oversampling=1.0, skip_threshold=None, rounds_per_prompt=None)."
            )
        if dataset is None or not hasattr(dataset, "__len__"):
            raise ValueError(
                "prompt_oversampling / skip_threshold / rounds_per_prompt need a train_dataset with a length (a map-"
                "style dataset): the extra candidates are drawn from it by index."
            )
        per_batch = args.generation_batch_size // args.num_generations
        needed = num_candidates(per_batch, args.prompt_oversampling)
        if len(dataset) < needed:
            raise ValueError(
                f"prompt_oversampling={args.prompt_oversampling:g}: one step samples over {needed} candidate prompts "
                f"({per_batch} per generation batch), but train_dataset has only {len(dataset)}. Lower "
                f"prompt_oversampling to at most {len(dataset) / per_batch:.2f}, or add prompts."
            )
        return CandidateStream(len(dataset), args.seed)

    def _new_refill_sampler(self, batch_inputs: list[dict]) -> tuple[list[dict], RefillSampler]:
        """The step's candidates (the batch first, then new prompts from the stream) and their `RefillSampler`.

        The same on every process: the batch is gathered, the stream and the memory are identical, and the
        exploration draws are seeded by (`seed`, global step).
        """
        args, b = self.args, len(batch_inputs)
        if any("image" in x or "images" in x for x in batch_inputs):
            raise ValueError(
                "prompt_oversampling / skip_threshold / rounds_per_prompt do not support image datasets yet; use the "
                "defaults (prompt_oversampling=1.0, skip_threshold=None, rounds_per_prompt=None)."
            )
        seen = {prompt_key(x["prompt"]) for x in batch_inputs}

        def accept(index: int) -> bool:  # no prompt twice in a step
            key = prompt_key(self.train_dataset[index]["prompt"])
            if key in seen:
                return False
            seen.add(key)
            return True

        extra = self.candidate_stream.peek(num_candidates(b, args.prompt_oversampling) - b, accept)
        candidates = batch_inputs + [self.train_dataset[index] for index in extra]
        arguments = self._estimation_arguments(candidates)
        skipped = None
        if args.skip_threshold is not None:
            uniforms = np.random.default_rng([args.seed, self.state.global_step]).random(len(candidates))
            skipped = skip_before_rollout(
                arguments["prior_alpha"],
                arguments["prior_beta"],
                arguments["memory_hits"],
                self.num_generations,
                args.skip_threshold,
                args.skip_exploration,
                uniforms,
            )
        sampler = RefillSampler(
            num_prompts=len(candidates),
            num_kept=b,
            rounds_per_prompt=args.rounds_per_prompt,
            skipped=skipped,
            num_generations=self.num_generations,
            samples_per_round=args.samples_per_round,
            max_rounds=args.max_rounds,
            positive_threshold=args.positive_threshold,
            exit_rule=args.exit_rule,
            **arguments,
        )
        return candidates, sampler

    def _advance_candidate_stream(self, sampler: RefillSampler, batch_size: int) -> None:
        """Consume the stream's candidates the step examined; the others are offered again next step."""
        self.candidate_stream.consume(max(sampler.refill_statistics().consumed - batch_size, 0))

    # ----------------------------------------------------------------------------------------------------------
    # Advantages and metrics
    # ----------------------------------------------------------------------------------------------------------

    def _pool_advantages(self, num_local: int) -> torch.Tensor:
        """Advantages of this process's kept samples; also fixes the advantages TRL logged for the table.

        A completion that every reward function declined (None) has no opinion: it is left out of the pool's mean
        and std and gets advantage 0, as in TRL.
        """
        sampler, baseline = self._sampler, self.args.advantage_baseline
        kept_prompts = _kept_prompts(sampler)
        if self.multi_objective_aggregation == "normalize_then_sum":
            pools = [self._pool_rewards_per_func[j] for j in kept_prompts]
            kept = np.stack([pools[row][group] for row, group in enumerate(sampler.select_groups())])
            weights = self.reward_weights.cpu().numpy()
            advantages = normalize_then_sum_advantages(kept, pools, weights, baseline=baseline)
        else:
            pools = [sampler.pools[j] for j in kept_prompts]
            advantages = compute_advantages(sampler.kept_rewards(), pools, baseline=baseline, scale=self.scale_rewards)
        advantages = advantages.reshape(-1)
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
        if isinstance(sampler, RefillSampler):
            metrics.update(sampler.refill_statistics().as_metrics(prefix=METRIC_PREFIX))
        for name, value in metrics.items():
            self._metrics["train"][name].append(value)

    def _log_kept_generation_metrics(self, kept_stats: np.ndarray, logs: _RoundLogs) -> None:
        """TRL's generation metrics (`num_tokens`, `completions/*`, `tools/*`) of the batch that reaches the loss."""
        metrics = self._metrics["train"]
        prompt_lengths, lengths, truncated = (torch.as_tensor(column) for column in kept_stats.T)
        truncated = truncated.bool()
        self.state.num_input_tokens_seen += int(prompt_lengths.sum() + lengths.sum())
        metrics["num_tokens"] = [self.state.num_input_tokens_seen]
        metrics["completions/mean_length"].append(lengths.float().mean().item())
        metrics["completions/min_length"].append(lengths.float().min().item())
        metrics["completions/max_length"].append(lengths.float().max().item())
        metrics["completions/clipped_ratio"].append(truncated.float().mean().item())
        terminated = lengths[~truncated] if (~truncated).any() else torch.zeros(1)
        metrics["completions/mean_terminated_length"].append(terminated.float().mean().item())
        metrics["completions/min_terminated_length"].append(terminated.float().min().item())
        metrics["completions/max_terminated_length"].append(terminated.float().max().item())
        if logs.tool_rows:  # every generated episode: TRL does not count tool calls per completion
            metrics["tools/call_frequency"].append(logs.tool_calls / logs.tool_rows)
            metrics["tools/failure_frequency"].append(logs.tool_failures / logs.tool_calls if logs.tool_calls else 0.0)

    def _flush_reward_metrics(self, logs: _RoundLogs) -> None:
        """Hand TRL each `log_metric` value so that its cross-process average weighs every real row once."""
        for name, rows in logs.metric_rows.items():
            self._pending_metrics[name].extend([logs.metric_sums[name] / rows] * rows)


def _merge_extra_fields(inputs: list[dict], extra_fields: dict[str, Any]) -> None:
    """Give reward functions the fields `rollout_func` returned, row by row, as GRPOTrainer does."""
    for i, row in enumerate(inputs):
        for key, values in extra_fields.items():
            if not isinstance(values, list):
                row[key] = values
            elif i < len(values):
                row[key] = values[i]


def _forget_unselectable(sampler: AdaptiveSampler, prompts: list[int], owned: dict) -> None:
    """Drop samples of `prompts` that group selection can no longer keep, so a step holds O(n) per prompt."""
    for j in prompts:
        keep = set(sampler.candidates(j))
        for i in range(len(sampler.pools[j])):
            if i not in keep:
                owned.pop((j, i), None)


def _forward(requests: ServerCompletions | None, prompt_ids: list, issue: list, cancel: Sequence = ()) -> None:
    """The main process sends the scheduler's new requests and cancels stale ones; the others only track them."""
    if requests is None:
        return
    for request in cancel:
        requests.cancel(request)
    for request in issue:
        requests.submit(request, prompt_ids[request.prompt], request.size)


def local_rows(rank: int, rows_per_process: int) -> slice:
    """This process's rows of a batch gathered in process order."""
    return slice(rank * rows_per_process, (rank + 1) * rows_per_process)


def _kept_prompts(sampler: AdaptiveSampler) -> list[int]:
    """The step's prompts that reach the loss, in batch order: all of them, or a `RefillSampler`'s kept candidates."""
    return sampler.kept_prompts() if isinstance(sampler, RefillSampler) else list(range(sampler.num_prompts))
