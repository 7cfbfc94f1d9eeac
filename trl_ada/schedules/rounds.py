"""The rounds schedule: each round is one batched generation call for the active prompts, on every backend.

Every process holds the same sampler, driven by gathered rewards. A round is each active prompt's planned samples,
split evenly over the processes at sample level; each process prepares its rows with TRL's own preamble
(environments reset, tool dicts, images), generates them with TRL's own `_generate` (single turn, tools,
environments or `rollout_func`) and scores them with TRL's `_calculate_rewards`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from .. import _trl
from ..sampling import AdaptiveSampler
from .base import Schedule
from .outcome import Key, Sample, StepOutcome

__all__ = ["RoundSplit", "RoundsSchedule", "round_keys", "split_round"]


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

    def rows(self, rank: int) -> range:
        """The global rows process `rank` generates (padding included)."""
        return range(rank * self.rows_per_process, (rank + 1) * self.rows_per_process)


def split_round(plan_sizes: list[int], num_processes: int) -> RoundSplit:
    """Split a round at sample level so that no process generates a completion nobody asked for."""
    num_samples = sum(plan_sizes)
    rows = math.ceil(num_samples / num_processes)
    return RoundSplit(num_samples, num_processes, rows, math.gcd(*plan_sizes, rows))


def round_keys(sampler: AdaptiveSampler, planned: list[int]) -> list[Key]:
    """(prompt, pool index) of every sample of the `planned` round, prompt-major: the order `ingest` expects."""
    sizes = sampler.plan_sizes
    return [(j, len(sampler.pools[j]) + s) for j, size in zip(planned, sizes, strict=True) for s in range(size)]


def merge_extra_fields(inputs: list[dict], extra_fields: dict[str, Any]) -> None:
    """Give reward functions the fields `rollout_func` returned, row by row, as GRPOTrainer does."""
    for i, row in enumerate(inputs):
        for key, values in extra_fields.items():
            if not isinstance(values, list):
                row[key] = values
            elif i < len(values):
                row[key] = values[i]


class RoundsSchedule(Schedule):
    """Rounds over the step's prompts (`AdaptiveSampler.plan_round` / `ingest`), one batched call per round."""

    def run(self, step_inputs: list[dict]) -> StepOutcome:
        trainer = self.trainer
        rank, world = trainer.accelerator.process_index, trainer.accelerator.num_processes
        inputs, sampler = self.new_sampler(step_inputs)
        outcome = StepOutcome(inputs, sampler)
        while not sampler.done:
            active = sampler.plan_round()
            keys = round_keys(sampler, active)
            split = split_round(sampler.plan_sizes, world)
            rows = split.rows(rank)
            row_prompts = [keys[min(r, split.num_samples - 1)][0] for r in rows]  # padding repeats the last
            num_real = sum(r < split.num_samples for r in rows)
            round_inputs = [dict(inputs[j]) for j in row_prompts]  # copies: rollout fields are merged in

            start = time.perf_counter()
            round_prompts = _trl.prepare_prompts(trainer, round_inputs)
            with _trl.held_generation_metrics(trainer, outcome.logs, split.rows_per_process * world):
                generated = _trl.generate_rows(trainer, round_prompts, split.copies_per_request)
            generation_time = time.perf_counter() - start
            merge_extra_fields(round_inputs, generated.extra_fields)
            with _trl.held_reward_metrics(trainer, outcome.logs, num_real):
                rewards = _trl.score_rows(trainer, round_inputs, round_prompts, generated)
            rewards = rewards.float().cpu().numpy()[: split.num_samples]
            stats = trainer.gather_row_statistics(generated)[: split.num_samples]
            extra_logs = _trl.take_extra_logs(trainer, len(rows))
            outcome.columns.update(extra_logs)

            for key, reward, stat in zip(keys, rewards, stats, strict=True):
                outcome.rewards_per_func[key], outcome.row_stats[key] = reward, stat
            for local, r in enumerate(rows[:num_real]):
                outcome.samples[keys[r]] = _sample(generated, local, extra_logs)
            masked = stats[:, 2].astype(bool) if trainer.mask_truncated_completions else None
            guarded = trainer.reward_guard.aggregate(
                rewards, generated.completions, offset=rank * split.rows_per_process
            )
            sampler.ingest(guarded, masked=masked)
            outcome.keep_selectable(active)
            outcome.metrics[f"generation_time/round_{sampler.round}"] = generation_time
            outcome.metrics[f"samples/round_{sampler.round}"] = float(split.num_samples)
        return outcome


def _sample(rows: _trl.GeneratedRows, local: int, extra_logs: dict[str, list]) -> Sample:
    """Row `local` of a round's generated rows, with the `log_extra` values reward functions logged for it."""
    return Sample(
        prompt_ids=rows.prompt_ids[local],
        completion_ids=rows.completion_ids[local],
        completion=rows.completions[local],
        logprobs=None if rows.logprobs is None else rows.logprobs[local],
        images=None if rows.images is None else rows.images[local],
        tool_mask=None if rows.tool_mask is None else rows.tool_mask[local],
        tool_images=rows.tool_images[local] if rows.tool_images else [],
        extra_fields={k: v[local] if isinstance(v, list) else v for k, v in rows.extra_fields.items()},
        extra_logs={column: values[local] for column, values in extra_logs.items()},
    )
