"""Modelled GPU hours of a toy learning run: every step priced by the GPU cost model (`benchmarks/gpu_cost_model.py`).

A model, not a measurement. A toy step of `prompts_per_step` prompts is priced as the paper's step of 64 prompts per
engine with the same completions per prompt: each round's completions (`reinforce_ada/samples/round_<r>`) are scaled
by 64 / `prompts_per_step` and run on the modelled continuous-batching engine (the round waits for its longest
completion), and the trained completions are scaled the same way:

    step seconds = c_gen · Σ_rounds engine time(scaled round) + c_train · scaled trained completions

with `c_gen` and `c_train` calibrated on GRPO n=4 as in the cost model (a step of one round of 4 per prompt takes the
paper's published time: 102 s at Qwen2.5-Math-1.5B on 8×H100, of which 15 s training). The cost model reproduces
Table 3's one-round rows (GRPO, Est) within 20 % and over-predicts the multi-round rows (Seq-pos, Seq-balance) by
37-128 % (`docs/lab/benchmarks_cost.md`): hours of multi-round methods are an upper bound, not an estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from benchmarks.engine_schedule import Engine, EngineSetting, completion_lengths
from benchmarks.gpu_cost_model import ENGINE, TABLE_3, Calibration, PaperSetting, calibrate

__all__ = ["BASELINE_PER_PROMPT", "StepPricer", "cumulative_hours"]

BASELINE_PER_PROMPT = 4  # GRPO n=4: the calibration row
DRAWS = 8  # length draws averaged per round size


def round_engine_time(setting: EngineSetting, completions: int, draws: int = DRAWS) -> float:
    """Mean engine time of one round of `completions` sequences (lengths drawn `draws` times, fixed seeds)."""
    times = []
    for draw in range(draws):
        engine = Engine(setting)
        for key, length in enumerate(completion_lengths(setting, np.random.default_rng(draw), completions)):
            engine.submit(key, int(length))
        while engine.busy:
            engine.advance()
        times.append(engine.time)
    return float(np.mean(times))


@dataclass
class StepPricer:
    """Prices a toy step of `prompts_per_step` prompts in seconds of the `paper` setting (Table 3's 1.5B row)."""

    prompts_per_step: int
    paper: PaperSetting = TABLE_3[0]
    setting: EngineSetting = ENGINE
    _rounds: dict[int, float] = field(default_factory=dict, repr=False)

    @property
    def scale(self) -> float:
        """Paper prompts per engine over toy prompts per step."""
        return self.setting.prompts / self.prompts_per_step

    def round_time(self, completions: float) -> float:
        """Engine time of a round of `completions` toy completions, scaled to the paper's batch (memoised)."""
        scaled = int(round(completions * self.scale))
        if scaled not in self._rounds:
            self._rounds[scaled] = round_engine_time(self.setting, scaled) if scaled else 0.0
        return self._rounds[scaled]

    @cached_property
    def calibration(self) -> Calibration:
        """`c_gen`, `c_train` from GRPO n=4: one round of 4 per prompt, 4 per prompt trained."""
        baseline = BASELINE_PER_PROMPT * self.prompts_per_step
        measured = {"engine_time": self.round_time(baseline), "trained": baseline * self.scale}
        return calibrate(measured, self.paper.published["GRPO n=4"], self.paper.baseline_training)

    def step_seconds(self, round_completions: Sequence[float], trained: float) -> float:
        """Modelled seconds of a step that generated `round_completions` (per round) and trained `trained` rows."""
        engine = sum(self.round_time(c) for c in round_completions if c > 0)
        return self.calibration.step_time(engine, trained * self.scale)


def cumulative_hours(pricer: StepPricer, steps: Sequence[tuple[Sequence[float], float]]) -> list[float]:
    """Modelled GPU hours after each step, from (round completions, trained rows) per step."""
    return (np.cumsum([pricer.step_seconds(rounds, trained) for rounds, trained in steps]) / 3600.0).tolist()
