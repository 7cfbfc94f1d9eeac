"""The rounds schedule: each round is one batched generation call for the active prompts, on every backend.

Every process holds the same sampler, driven by gathered rewards. A round is each active prompt's planned samples,
split evenly over the processes at sample level; each process takes its rows' prompts (through TRL's own preamble
with environments, tools or images: `_trl.round_prompts`), generates them with TRL's own `_generate` (single turn,
tools, environments or `rollout_func`) and scores them with TRL's `_calculate_rewards` (`score_and_record`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from .. import _trl
from ..sampling import AdaptiveSampler
from .base import Schedule, score_and_record
from .outcome import Key, StepOutcome

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
            round_inputs = [dict(inputs[j]) for j in row_prompts]  # copies: rollout fields are merged in

            start = time.perf_counter()
            round_prompts = _trl.round_prompts(trainer, round_inputs)
            with _trl.held_generation_metrics(trainer, outcome.logs, split.rows_per_process * world):
                generated = _trl.generate_rows(trainer, round_prompts, split.copies_per_request)
            generation_time = time.perf_counter() - start
            guarded, masked = score_and_record(
                trainer, outcome, keys, rows.start, round_inputs, round_prompts, generated
            )
            sampler.ingest(guarded, masked=masked)
            outcome.keep_selectable(active)
            outcome.metrics[f"generation_time/round_{sampler.round}"] = generation_time
            outcome.metrics[f"samples/round_{sampler.round}"] = float(split.num_samples)
        return outcome
