"""The rounds schedule: each round is one batched generation call for the active prompts, on every backend.

Its section, `Rounds`, is the exits of `Seq` (exit rule, M, N, futility stop) with a step budget, rounds sized from
the pass-rate posterior (`PriorSizing`) and candidates beyond the batch (`candidates.Candidates`). With candidates
on, the refill schedule runs it: rounds over candidate prompts, refill and pre-rollout skipping, whose candidate
stream is its state.

Every process holds the same sampler, driven by gathered rewards. A round is each active prompt's planned samples,
split evenly over the processes at sample level; each process generates its rows and scores them with TRL's own code
(`_trl.TRLRounds`: `_generate`, single turn, tools, environments or `rollout_func`; `_calculate_rewards`), records
them in the step's outcome, and the sampler ingests every process's rewards.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..candidates import Candidates, CandidateStream, RefillSampler, num_candidates, skip_before_rollout
from ..checkpoint_state import CANDIDATE_STREAM_FILE, load_candidate_stream, save_candidate_stream
from ..memory import prompt_key, prompt_keys
from ..plan import SamplingPlan, register
from ..sampling import AdaptiveSampler
from ..seq import Exits, PriorSizing, Seq, budget_option, with_budget
from .base import Key, Schedule, StepHost, StepOutcome, sampler_prior

if TYPE_CHECKING:
    from .._trl import TRLRounds

__all__ = ["RefillSchedule", "RoundSplit", "Rounds", "RoundsSchedule", "require_memory", "round_keys", "split_round"]


@register
@dataclass(frozen=True)
class Rounds(Seq):
    """Each round is one batched generation call for the active prompts, and the next round waits for its longest
    completion; every backend. Exits are decided after each round, optionally on a budget, with rounds sized from
    a prior and candidates beyond the batch (the refill schedule)."""

    name: ClassVar[str] = "rounds"

    sizing: PriorSizing = PriorSizing()
    sample_budget: float | None = budget_option()
    candidates: Candidates = Candidates()

    def schedule_class(self) -> type[Schedule]:
        return RefillSchedule if self.candidates.active else RoundsSchedule

    def exits(self, num_generations: int) -> Exits:
        return with_budget(super().exits(num_generations), self.sample_budget, self.sizing)

    def check(self, plan: SamplingPlan) -> None:
        super().check(plan)
        rounds = self.candidates.rounds_per_prompt
        if rounds is None:
            return
        if rounds > self.max_rounds:
            raise ValueError(
                f"rounds_per_prompt={rounds} is more than max_rounds={self.max_rounds}, the rounds of the whole step. "
                "Lower rounds_per_prompt, or raise max_rounds."
            )
        if self.samples_per_round * rounds < plan.num_generations:
            raise ValueError(
                f"samples_per_round * rounds_per_prompt = {self.samples_per_round} * {rounds} is smaller than "
                f"num_generations={plan.num_generations}: a candidate could never fill its group. Raise "
                "rounds_per_prompt or samples_per_round."
            )

    def check_trainer(self, plan: SamplingPlan, config: Any) -> None:
        require_memory(plan)


def require_memory(plan: SamplingPlan) -> None:
    """A trainer's priors come from its pass-rate memory: prior-sized first rounds and skipping need it on. (A sampler
    built directly takes its priors from the caller instead.)"""
    rounds, memory = plan.section, plan.memory.enabled
    if not isinstance(rounds, Rounds):
        return
    if rounds.sizing.first_round == "prior" and not memory:
        raise ValueError(
            "first_round='prior' sizes the first round from the pass-rate memory, but pass_rate_memory=False. Set "
            "pass_rate_memory=True, or use first_round='fixed'."
        )
    if rounds.candidates.skip_threshold is not None and not memory:
        raise ValueError(
            f"skip_threshold={rounds.candidates.skip_threshold!r} skips candidates from the pass-rate memory, but "
            "pass_rate_memory=False. Set pass_rate_memory=True, or skip_threshold=None."
        )


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

    def run(self, step_inputs: list[dict], rounds: TRLRounds) -> StepOutcome:
        rank, world = self.trainer.accelerator.process_index, self.trainer.accelerator.num_processes
        inputs, sampler = self.new_sampler(step_inputs)
        outcome = StepOutcome(inputs, sampler)
        while not sampler.done:
            active = sampler.plan_round()
            keys = round_keys(sampler, active)
            split = split_round(sampler.plan_sizes, world)
            rows = split.rows(rank)
            round_inputs = [dict(inputs[keys[min(r, split.num_samples - 1)][0]]) for r in rows]  # padding: the last

            start = time.perf_counter()
            generated = rounds.generate(round_inputs, split.copies_per_request)
            generation_time = time.perf_counter() - start
            scores = rounds.score(generated, split.num_samples, rows.start)
            outcome.record(keys, rows.start, generated.rows, scores)
            sampler.ingest(scores.rewards, masked=scores.masked)
            outcome.keep_selectable(active)
            outcome.metrics[f"generation_time/round_{sampler.round}"] = generation_time
            outcome.metrics[f"samples/round_{sampler.round}"] = float(split.num_samples)
        return outcome


CANDIDATE_FIELDS = "prompt_oversampling / skip_threshold / rounds_per_prompt"


class CandidatesSchedule(RoundsSchedule):
    """Rounds over C = ⌈oversampling · B⌉ candidates a step: the batch's B prompts first, then new prompts from a
    seeded `CandidateStream` over the train dataset, never one prompt twice in a step. The stream is the schedule's
    state: checkpoints keep its position (`candidate_stream.json`). A subclass names, for the refusals, what draws
    candidates (`what`, a plural noun phrase), its oversampling field and how to do without (`instead`), and reads the
    oversampling factor (`oversampling`)."""

    what: ClassVar[str]
    oversampling_field: ClassVar[str]
    instead: ClassVar[str]

    @property
    def oversampling(self) -> float:
        raise NotImplementedError

    def __init__(self, trainer: StepHost):
        from .. import _trl

        super().__init__(trainer)
        if _trl.rollout_features(trainer)["environment_factory"]:
            raise ValueError(
                f"{self.what} draw candidates beyond the batch, which environment_factory does not support yet "
                f"(its environments are per batch row). {self.instead}"
            )
        dataset = trainer.train_dataset
        if dataset is None or not hasattr(dataset, "__len__"):
            raise ValueError(
                f"{self.what} need a train_dataset with a length (a map-style dataset): the extra candidates are "
                "drawn from it by index."
            )
        args, oversampling = trainer.args, self.oversampling
        per_batch = args.generation_batch_size // args.num_generations
        needed = num_candidates(per_batch, oversampling)
        if len(dataset) < needed:
            name = self.oversampling_field
            raise ValueError(
                f"{name}={oversampling:g}: one step samples over {needed:.6g} candidate prompts ({per_batch} per "
                f"generation batch), but train_dataset has only {len(dataset)}. Lower {name} to at most "
                f"{len(dataset) / per_batch:.2f}, or add prompts."
            )
        self.candidate_stream = CandidateStream(len(dataset), args.seed)

    def candidate_rows(self, step_inputs: list[dict]) -> list[dict]:
        """The step's candidates: the batch first, then new prompts from the stream (peeked, not consumed); the same
        on every process (the batch is gathered and the stream is identical)."""
        trainer, b = self.trainer, len(step_inputs)
        if any("image" in x or "images" in x for x in step_inputs):
            raise ValueError(f"{self.what} do not support image datasets yet. {self.instead}")
        seen = {prompt_key(x["prompt"]) for x in step_inputs}

        def accept(index: int) -> bool:  # no prompt twice in a step
            key = prompt_key(trainer.train_dataset[index]["prompt"])
            if key in seen:
                return False
            seen.add(key)
            return True

        extra = self.candidate_stream.peek(num_candidates(b, self.oversampling) - b, accept)
        return step_inputs + [trainer.train_dataset[index] for index in extra]

    def state_dict(self) -> dict[str, Any]:
        """The candidate stream's position."""
        return self.candidate_stream.state_dict()

    def save_state(self, state: dict[str, Any], folder: str) -> None:
        save_candidate_stream(CandidateStream.from_state_dict(state), os.path.join(folder, CANDIDATE_STREAM_FILE))

    def load_state(self, checkpoint: str) -> None:
        self.candidate_stream = load_candidate_stream(checkpoint, self.candidate_stream.size)


class RefillSchedule(CandidatesSchedule):
    """Rounds over candidates beyond the batch (`candidates.py` has the rules): a step samples over
    C = ⌈`prompt_oversampling` · B⌉ candidates and trains on exactly B of them."""

    what = CANDIDATE_FIELDS
    oversampling_field = "prompt_oversampling"
    instead = "Use the defaults (prompt_oversampling=1.0, skip_threshold=None, rounds_per_prompt=None)."

    @property
    def oversampling(self) -> float:
        return self.plan.section.candidates.prompt_oversampling

    def new_sampler(self, step_inputs: list[dict]) -> tuple[list[dict], RefillSampler]:
        """The step's candidates and their `RefillSampler`; the exploration draws are seeded by (`seed`, global
        step), so the same on every process."""
        trainer, plan, b = self.trainer, self.plan, len(step_inputs)
        candidates = plan.section.candidates
        rows = self.candidate_rows(step_inputs)
        prior = sampler_prior(trainer.pass_rate_memory, rows)
        skipped = None
        if candidates.skip_threshold is not None:
            uniforms = np.random.default_rng([trainer.args.seed, trainer.state.global_step]).random(len(rows))
            streaks = trainer.pass_rate_memory.skip_streaks(prompt_keys([x["prompt"] for x in rows]))
            skipped = skip_before_rollout(
                plan, prior["prior_alpha"], prior["prior_beta"], prior["memory_hits"], streaks, uniforms
            )
        return rows, RefillSampler(len(rows), plan, num_kept=b, skipped=skipped, **prior)

    def end_step(self, outcome: StepOutcome) -> None:
        """Consume the stream's candidates the step examined (the others are offered again next step), and count
        the skips in the memory's skip streaks."""
        sampler = outcome.sampler
        self.candidate_stream.consume(max(sampler.consumed - sampler.num_kept, 0))
        if self.plan.section.candidates.skip_threshold is not None:
            skipped = [outcome.inputs[p]["prompt"] for p in sampler.skipped_prompts()]
            self.trainer.pass_rate_memory.record_skips(prompt_keys(skipped))
