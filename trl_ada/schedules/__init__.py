"""Generation schedules: how one training step draws its completions.

Each schedule is one class in one module, registered below by the name `SamplingPlan.schedule` returns. A schedule
checks at construction what it cannot do (`check`), runs a step (`run`) and hands back one `StepOutcome`; the
trainer's shared step finish turns that into advantages, metrics, memory updates and TRL's rows.

- `rounds`: rounds over the batch (`rounds.py`), every backend.
- `refill`: rounds over candidates beyond the batch, with refill and pre-rollout skipping (`refill.py`).
- `streaming`: per-completion requests to a vLLM server, exits as results arrive (`streaming.py`).
- `est`: one round per step, allocated from the pass-rate memory (Reinforce-Ada-Est, `est.py`), every backend.
"""

from __future__ import annotations

from .est import EstSchedule
from .outcome import Key, RoundLogs, Sample, StepOutcome
from .refill import RefillSchedule
from .rounds import RoundsSchedule
from .streaming import StreamingSchedule

__all__ = ["SCHEDULES", "Key", "RoundLogs", "Sample", "StepOutcome", "schedule_for"]

SCHEDULES: dict[str, type[RoundsSchedule] | type[StreamingSchedule]] = {
    "rounds": RoundsSchedule,
    "refill": RefillSchedule,
    "streaming": StreamingSchedule,
    "est": EstSchedule,
}


def schedule_for(name: str):
    """The schedule class registered under `name`."""
    return SCHEDULES[name]
