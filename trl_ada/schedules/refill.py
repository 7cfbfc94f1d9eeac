"""The refill schedule: rounds over candidate prompts beyond the batch, with refill and pre-rollout skipping.

A step samples over C = ⌈`prompt_oversampling` · B⌉ candidates (the batch first, then new prompts from the seeded
`CandidateStream`) with a `RefillSampler`, and trains on exactly B of them (`refill.py` has the rules). The stream is
the schedule's state: checkpoints keep its position (`candidate_stream.json`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .. import _trl
from ..checkpoint_state import CANDIDATE_STREAM_FILE, load_candidate_stream, save_candidate_stream
from ..memory import prompt_key, prompt_keys
from ..refill import CandidateStream, RefillSampler, num_candidates, skip_before_rollout
from .base import StepHost, sampler_prior
from .outcome import StepOutcome
from .rounds import RoundsSchedule

__all__ = ["RefillSchedule"]

CANDIDATE_FIELDS = "prompt_oversampling / skip_threshold / rounds_per_prompt"


class RefillSchedule(RoundsSchedule):
    """Rounds over candidates drawn from `candidate_stream`, the schedule's state."""

    def __init__(self, trainer: StepHost):
        super().__init__(trainer)
        if _trl.rollout_features(trainer)["environment_factory"]:
            raise ValueError(
                f"{CANDIDATE_FIELDS} draw candidates beyond the batch, which environment_factory does not support yet "
                "(its environments are per batch row). Use the defaults (prompt_oversampling=1.0, "
                "skip_threshold=None, rounds_per_prompt=None)."
            )
        dataset = trainer.train_dataset
        if dataset is None or not hasattr(dataset, "__len__"):
            raise ValueError(
                f"{CANDIDATE_FIELDS} need a train_dataset with a length (a map-style dataset): the extra candidates "
                "are drawn from it by index."
            )
        args = trainer.args
        per_batch = args.generation_batch_size // args.num_generations
        needed = num_candidates(per_batch, args.prompt_oversampling)
        if len(dataset) < needed:
            raise ValueError(
                f"prompt_oversampling={args.prompt_oversampling:g}: one step samples over {needed} candidate prompts "
                f"({per_batch} per generation batch), but train_dataset has only {len(dataset)}. Lower "
                f"prompt_oversampling to at most {len(dataset) / per_batch:.2f}, or add prompts."
            )
        self.candidate_stream = CandidateStream(len(dataset), args.seed)

    def new_sampler(self, step_inputs: list[dict]) -> tuple[list[dict], RefillSampler]:
        """The step's candidates (the batch first, then new prompts from the stream) and their `RefillSampler`.

        The same on every process: the batch is gathered, the stream and the memory are identical, and the
        exploration draws are seeded by (`seed`, global step).
        """
        trainer, plan, b = self.trainer, self.plan, len(step_inputs)
        if any("image" in x or "images" in x for x in step_inputs):
            raise ValueError(
                f"{CANDIDATE_FIELDS} do not support image datasets yet; use the defaults (prompt_oversampling=1.0, "
                "skip_threshold=None, rounds_per_prompt=None)."
            )
        seen = {prompt_key(x["prompt"]) for x in step_inputs}

        def accept(index: int) -> bool:  # no prompt twice in a step
            key = prompt_key(trainer.train_dataset[index]["prompt"])
            if key in seen:
                return False
            seen.add(key)
            return True

        extra = self.candidate_stream.peek(num_candidates(b, plan.prompt_oversampling) - b, accept)
        candidates = step_inputs + [trainer.train_dataset[index] for index in extra]
        prior = sampler_prior(trainer.pass_rate_memory, candidates)
        skipped = None
        if plan.skip_threshold is not None:
            uniforms = np.random.default_rng([trainer.args.seed, trainer.state.global_step]).random(len(candidates))
            streaks = trainer.pass_rate_memory.skip_streaks(prompt_keys([x["prompt"] for x in candidates]))
            skipped = skip_before_rollout(
                plan, prior["prior_alpha"], prior["prior_beta"], prior["memory_hits"], streaks, uniforms
            )
        return candidates, RefillSampler(len(candidates), plan, num_kept=b, skipped=skipped, **prior)

    def end_step(self, outcome: StepOutcome) -> None:
        """Consume the stream's candidates the step examined (the others are offered again next step), and count
        the skips in the memory's skip streaks."""
        sampler = outcome.sampler
        self.candidate_stream.consume(max(sampler.consumed - sampler.num_kept, 0))
        if self.plan.skip_threshold is not None:
            skipped = [outcome.inputs[p]["prompt"] for p in sampler.skipped_prompts()]
            self.trainer.pass_rate_memory.record_skips(prompt_keys(skipped))

    def state_dict(self) -> dict[str, Any]:
        """The candidate stream's position."""
        return self.candidate_stream.state_dict()

    def save_state(self, state: dict[str, Any], folder: str) -> None:
        save_candidate_stream(CandidateStream.from_state_dict(state), os.path.join(folder, CANDIDATE_STREAM_FILE))

    def load_state(self, checkpoint: str) -> None:
        self.candidate_stream = load_candidate_stream(checkpoint, self.candidate_stream.size)
