"""Generation schedules: how one training step draws its completions.

Each schedule is one module holding its section (the plan's part that only it reads: a frozen dataclass, its
checks, registered by `trl_ada.plan.register` under the name `generation_schedule` takes), the pure decision logic
it needs, and the class that runs it in the trainer, with the state it keeps across steps (`state_dict`,
`save_state`, `load_state`). A schedule refuses at construction what it cannot do, runs a step (`run`) and hands back
one `StepOutcome`; the trainer's shared step finish turns that into advantages, metrics, memory updates and TRL's
rows. Every module here loads without torch and TRL; importing this package registers the built-in schedules.

- `rounds`: rounds over the batch, every backend; with candidates beyond the batch, the refill schedule (`rounds.py`).
- `streaming`: per-completion requests to a vLLM server, exits as results arrive (`streaming.py`).
- `est`: one round per step, allocated from the pass-rate memory (Reinforce-Ada-Est, `est.py`), every backend.
- `pilot_commit`: a pilot of every candidate, then a commit to the B it chooses (Pilot-Commit, `pilot_commit.py`).
- `grpo`: plain GRPO, one round of exactly n per prompt (`grpo.py`).
"""

from __future__ import annotations

from . import est, grpo, pilot_commit, rounds, streaming  # noqa: F401  (each registers its sections)
from .base import Key, Sample, Schedule, StepOutcome

__all__ = ["Key", "Sample", "Schedule", "StepOutcome"]
