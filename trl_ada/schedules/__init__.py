"""Generation schedules: how one training step draws its completions.

Each schedule is one class in one module, registered below by the name `SamplingPlan.schedule` returns. A schedule
refuses at construction what it cannot do, runs a step (`run`) and hands back one `StepOutcome`; the trainer's
shared step finish turns that into advantages, metrics, memory updates and TRL's rows. A schedule with state across
steps keeps it itself (`state_dict`, `save_state`, `load_state`); the trainer checkpoints it.

- `rounds`: rounds over the batch (`rounds.py`), every backend.
- `refill`: rounds over candidates beyond the batch, with refill and pre-rollout skipping (`refill.py`).
- `streaming`: per-completion requests to a vLLM server, exits as results arrive (`streaming.py`).
- `est`: one round per step, allocated from the pass-rate memory (Reinforce-Ada-Est, `est.py`), every backend.
"""

from __future__ import annotations

from .base import Schedule
from .est import EstSchedule
from .outcome import Key, RoundLogs, Sample, StepOutcome
from .refill import RefillSchedule
from .rounds import RoundsSchedule
from .streaming import ServerStreamingSchedule

__all__ = ["SCHEDULES", "Key", "RoundLogs", "Sample", "Schedule", "StepOutcome"]

SCHEDULES: dict[str, type[Schedule]] = {
    "rounds": RoundsSchedule,
    "refill": RefillSchedule,
    "streaming": ServerStreamingSchedule,
    "est": EstSchedule,
}
