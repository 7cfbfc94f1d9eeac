"""Generation schedules: how one training step draws its completions.

Each schedule is one module holding its section (the plan's part that only it reads: a frozen dataclass, its
checks), the pure decision logic it needs, and the class that runs it in the trainer, with the state it keeps across
steps (`state_dict`, `save_state`, `load_state`). `SCHEDULES` registers each section by the name
`generation_schedule` takes; the section names its schedule class. A schedule refuses at construction what it cannot
do, runs a step (`run`) and hands back one `StepOutcome`; the trainer's shared step finish turns that into
advantages, metrics, memory updates and TRL's rows. Every module here loads without torch and TRL.

- `rounds`: rounds over the batch, every backend; with candidates beyond the batch, the refill schedule (`rounds.py`).
- `streaming`: per-completion requests to a vLLM server, exits as results arrive (`streaming.py`).
- `est`: one round per step, allocated from the pass-rate memory (Reinforce-Ada-Est, `est.py`), every backend.
- `pilot_commit`: a pilot of every candidate, then a commit to the B it chooses (Pilot-Commit, `pilot_commit.py`).
"""

from __future__ import annotations

from ..plan import Section
from .base import Schedule
from .est import Est
from .outcome import Key, Sample, StepOutcome
from .pilot_commit import PilotCommit
from .rounds import Rounds
from .streaming import Streaming

__all__ = ["SCHEDULES", "Key", "Sample", "Schedule", "StepOutcome"]

SCHEDULES: dict[str, type[Section]] = {
    "rounds": Rounds,
    "streaming": Streaming,
    "est": Est,
    "pilot_commit": PilotCommit,
}
"""The section of every generation schedule, by the value of `generation_schedule` that selects it."""
