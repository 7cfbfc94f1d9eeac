"""Pilot-Commit (arXiv 2605.26606): a cheap pilot of every candidate decides where a step's group samples go.

A step of B prompts pilots C = ⌈`pilot_oversampling` · B⌉ candidates (the batch's B, then new prompts from the
refill schedule's seeded `CandidateStream`): round 1 draws `pilot_samples` completions of each. A candidate *passes*
when its pilot pass rate p̂ lies strictly inside the band (`pilot_band_low`, `pilot_band_high`); the default band
(0, 1) passes every candidate whose pilot is mixed. Of the passing candidates, up to B are chosen for the commit by
`commit_priority` (`"variance"`: largest p̂(1 − p̂) first; `"random"`: a seeded draw, the same on every process),
ties in draw order. When fewer than B pass, the batch is filled to B (TRL's shape is B × n) from the other
candidates by pilot variance, then draw order (`pilot_commit_selection`). Round 2 draws `commit_samples` more of each
chosen candidate; its trained group is its whole pool, pilot plus commit, so `pilot_samples + commit_samples` is the
group size n (`commit_samples=None` derives it) and the pool baseline is GRPO's group mean. Every candidate piloted
is consumed from the stream, whose position is the schedule's state (`candidate_stream.json` in a checkpoint).

    sampler = PilotCommitSampler(C, plan, num_kept=B)
    sampler.plan_round(); sampler.ingest(rewards)   # the pilot: pilot_samples per candidate, prompt-major
    sampler.plan_round(); sampler.ingest(rewards)   # the commit: commit_samples per chosen candidate
    sampler.kept_prompts(), sampler.select_groups()  # B prompts, each its whole pool of n

A step draws C · `pilot_samples` + B · `commit_samples` completions (GRPO: B · n). Synchronous: the pilot and the
commit run in the same step, so nothing is stale. Loads without torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..groups import reward_values
from ..plan import SCHEDULING, SamplingPlan, Section, register
from ..records import option
from ..sampling import PromptPools, masked_flags
from ..utils import is_int
from .base import StepOutcome, sampler_prior
from .rounds import CandidatesSchedule

__all__ = [
    "COMMIT_PRIORITIES",
    "PilotCommit",
    "PilotCommitSampler",
    "PilotCommitSchedule",
    "pilot_commit_selection",
]

COMMIT_PRIORITIES = ("variance", "random")
"""How the commit chooses among the candidates whose pilot passes the band."""


def pilot_commit_selection(
    pass_rates: Sequence[float],
    num_kept: int,
    section: PilotCommit,
    uniforms: Sequence[float] | None = None,
) -> tuple[list[int], list[bool]]:
    """(committed, passed): the candidates (ascending) that get the commit, and which pilots pass the band.

    `pass_rates` is each candidate's pilot pass rate (NaN: nothing scored). Up to `num_kept` passing candidates are
    chosen by the section's `commit_priority` (`"variance"`: p̂(1 − p̂) descending; `"random"`: `uniforms`
    ascending, one per candidate), ties by draw order; fewer than `num_kept` passing are filled from the others
    by p̂(1 − p̂) descending (NaN last), then draw order.
    """
    rates = np.asarray(pass_rates, dtype=np.float64).reshape(-1)
    count = rates.size
    if not is_int(num_kept) or not 1 <= num_kept <= count:
        raise ValueError(f"num_kept={num_kept!r}: must be an integer in [1, candidates={count}].")
    variance = np.where(np.isnan(rates), -1.0, rates * (1.0 - rates))
    passed = [section.passes(float(rate)) for rate in rates]
    if section.commit_priority == "random":
        draws = np.asarray(uniforms, dtype=np.float64).reshape(-1) if uniforms is not None else None
        if draws is None or draws.size != count:
            raise ValueError(f"commit_priority='random' needs one uniform draw per candidate ({count}).")
        rank = {i: (float(draws[i]), i) for i in range(count)}
    else:
        rank = {i: (-float(variance[i]), i) for i in range(count)}
    chosen = sorted((i for i in range(count) if passed[i]), key=rank.__getitem__)[:num_kept]
    others = sorted((i for i in range(count) if not passed[i]), key=lambda i: (-float(variance[i]), i))
    chosen += others[: num_kept - len(chosen)]
    return sorted(chosen), passed


class PilotCommitSampler(PromptPools):
    """One Pilot-Commit step over `num_prompts` candidates that keeps `num_kept` of them: the pilot (round 1, every
    candidate), the selection (`pilot_commit_selection`), the commit (round 2, the chosen). With `commit_samples=0`
    the step is the pilot alone. `uniforms` (one per candidate) are the seeded draws of `commit_priority="random"`.
    """

    max_rounds = 2

    def __init__(
        self,
        num_prompts: int,
        plan: SamplingPlan,
        *,
        num_kept: int | None = None,
        uniforms: Sequence[float] | None = None,
        **prior: Any,
    ):
        super().__init__(num_prompts, plan, **prior)
        self.section: PilotCommit = plan.section
        self.num_kept = num_prompts if num_kept is None else num_kept
        if not is_int(self.num_kept) or not 1 <= self.num_kept <= num_prompts:
            raise ValueError(f"num_kept={self.num_kept!r}: must be an integer in [1, num_prompts={num_prompts}].")
        self.pilot_size, self.commit_size = self.section.sizes(plan.num_generations)
        self.uniforms = uniforms
        self.committed: list[int] | None = None
        self.passed = [False] * num_prompts

    @property
    def done(self) -> bool:
        """After the pilot and, unless it is empty, the commit."""
        return self.round >= (2 if self.commit_size else 1)

    def plan_round(self) -> list[int]:
        """The pilot (every candidate, `pilot_samples` each), then the commit (the chosen, `commit_samples` each)."""
        if self.done:
            raise RuntimeError("Pilot-Commit samples a pilot and a commit per step; it is done.")
        if self.round == 0:
            self._plan, self._plan_sizes = list(range(self.num_prompts)), [self.pilot_size] * self.num_prompts
        else:
            self._plan, self._plan_sizes = list(self.committed), [self.commit_size] * len(self.committed)
        return list(self._plan)

    def ingest(self, rewards: Sequence[float], masked: Sequence[bool] | None = None) -> list[int]:
        """Add the round's rewards (prompt-major); after the pilot, choose the commit. Returns the prompts that left
        sampling (after the pilot: every candidate not chosen)."""
        if self._plan is None:
            raise RuntimeError("Call plan_round() before ingest().")
        values = reward_values(rewards, sum(self._plan_sizes))
        flags = masked_flags(masked, len(values))
        start = 0
        for prompt, size in zip(self._plan, self._plan_sizes, strict=True):
            self.pools[prompt].extend(values[start : start + size].tolist())
            self.masked[prompt].extend(flags[start : start + size])
            start += size
        planned, self._plan, self._plan_sizes = self._plan, None, []
        self.round += 1
        if self.round == 1:
            self.first_round_sizes = [len(pool) for pool in self.pools]
            self.committed, self.passed = pilot_commit_selection(
                self.pilot_pass_rates(), self.num_kept, self.section, self.uniforms
            )
            leaving = [p for p in planned if p not in self.committed or not self.commit_size]
        else:
            leaving = planned
        for prompt in leaving:
            self.exit_round[prompt] = self.round
        return leaving

    def pilot_pass_rates(self) -> np.ndarray:
        """Each candidate's pass rate over its scored pilot completions (NaN: none scored)."""
        return np.array([self.first_round_pass_rate(p) for p in range(self.num_prompts)])

    # -- groups --------------------------------------------------------------------------------

    def candidates(self, prompt: int) -> list[int]:
        """Pool indices a group may still keep: the whole pool of a chosen (or not yet decided) candidate."""
        if self.committed is not None and prompt not in self.committed:
            return []
        return list(range(len(self.pools[prompt])))

    def kept_prompts(self) -> list[int]:
        """The `num_kept` candidates that got the commit, in draw order."""
        if not self.done:
            raise RuntimeError("Prompts are kept once sampling is done.")
        return list(self.committed)

    def select_groups(self) -> list[list[int]]:
        """Each kept candidate's whole pool: pilot plus commit, n completions."""
        if not self.done:
            raise RuntimeError("Groups are formed once sampling is done.")
        return [list(range(len(self.pools[p]))) for p in self.committed]

    def group_among(self, prompt: int, eligible: Sequence[int]) -> list[int]:
        """The whole pool when every sample of it is eligible, else nothing (a group is never trained in part)."""
        return list(range(len(self.pools[prompt]))) if len(eligible) == len(self.pools[prompt]) else []

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """The sampler's numbers plus the pilot's (`pilot_commit/...`)."""
        rates = self.pilot_pass_rates()
        committed = self.committed or []
        metrics = {
            "candidates": float(self.num_prompts),
            "in_band_fraction": float(np.mean(self.passed)),
            "filled_fraction": sum(not self.passed[p] for p in committed) / max(len(committed), 1),
            "pilot_pass_rate": float(np.nanmean(rates)) if not np.isnan(rates).all() else math.nan,
        }
        return {**super().metrics(prefix), **{f"{prefix}pilot_commit/{k}": v for k, v in metrics.items()}}


@register
@dataclass(frozen=True)
class PilotCommit(Section):
    """Pilot-Commit, every backend: a pilot round over candidates beyond the batch, then a commit round for the B
    chosen by their pilot pass rates.

    The section holds the pilot and commit sizes, the band, the priority and the candidates."""

    name: ClassVar[str] = "pilot_commit"
    group: ClassVar[str] = SCHEDULING
    sampler: ClassVar[type] = PilotCommitSampler
    all_negative: ClassVar[str] = (
        "no candidate's pilot lies inside the band, the commit goes to candidates filled in draw order, and every "
        "trained group is flat."
    )

    pilot_samples: int | None = option(
        None,
        "Pilot-Commit: completions of the pilot, drawn for every candidate (at least 2, at most n); None = "
        "max(2, ⌊n/2⌋).",
        within="[2, inf)",  # at most n: `check`
    )
    commit_samples: int | None = option(
        None,
        "Pilot-Commit: completions committed to each chosen candidate (at least 0); the trained group is pilot plus "
        "commit, so `pilot_samples + commit_samples` must be n; None = n − `pilot_samples`.",
        within="[0, inf)",
    )
    pilot_band_low: float = option(
        0.0,
        "Pilot-Commit: a candidate passes when its pilot pass rate is strictly above this, in [0, 1).",
        within="[0, 1)",  # below pilot_band_high: `__post_init__`
    )
    pilot_band_high: float = option(
        1.0,
        "Pilot-Commit: ... and strictly below this, in (`pilot_band_low`, 1]. The default band (0, 1) passes every "
        "candidate whose pilot holds a positive and a negative.",
        within="(0, 1]",
    )
    commit_priority: str = option(
        "variance",
        'Pilot-Commit: which passing candidates get the commit when more than B pass. `"variance"`: the largest '
        'pilot p̂(1 − p̂) first; `"random"`: a seeded draw. Ties, and the fill when fewer than B pass (highest pilot '
        "variance of the others), go in draw order.",
        choices=COMMIT_PRIORITIES,
    )
    pilot_oversampling: float = option(
        2.0,
        "Pilot-Commit: at least 1. A generation batch of B prompts pilots ⌈`pilot_oversampling` · B⌉ candidates: "
        "its own B, then new prompts from the seeded candidate stream over `train_dataset` (as the refill "
        "schedule's), and trains exactly B of them.",
        within="[1, inf)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        low, high = self.pilot_band_low, self.pilot_band_high
        if low >= high:
            raise ValueError(
                f"pilot_band_low={low!r}, pilot_band_high={high!r}: the band (low, high) admits no pilot pass rate. "
                "Set pilot_band_low < pilot_band_high (e.g. 0.0 and 1.0: every mixed pilot passes)."
            )

    def sizes(self, num_generations: int) -> tuple[int, int]:
        """(pilot, commit): the completions of a candidate's pilot and of its commit (n = their sum)."""
        pilot = max(2, num_generations // 2) if self.pilot_samples is None else self.pilot_samples
        commit = num_generations - pilot if self.commit_samples is None else self.commit_samples
        return pilot, commit

    def passes(self, pass_rate: float) -> bool:
        """The pilot pass rate lies strictly inside the band (a NaN, nothing scored, does not)."""
        return self.pilot_band_low < pass_rate < self.pilot_band_high

    def schedule_class(self) -> type[PilotCommitSchedule]:
        return PilotCommitSchedule

    def check(self, plan: SamplingPlan) -> None:
        """The group is pilot plus commit, n completions; the band admits some pass rate of the pilot."""
        n = plan.num_generations
        pilot, commit = self.sizes(n)
        if pilot > n:
            raise ValueError(
                f"pilot_samples={pilot} is more than num_generations={n}: the trained group is the pilot plus the "
                f"commit, n completions. Lower pilot_samples to at most {n}."
            )
        if pilot + commit != n:
            given = "" if self.pilot_samples is not None else " (pilot_samples=None: max(2, num_generations // 2))"
            raise ValueError(
                f"pilot_samples + commit_samples = {pilot} + {commit} = {pilot + commit}{given}, but the trained "
                f"group is num_generations={n} completions (TRL's batch is B × n). Set commit_samples={n - pilot}, "
                "or leave it None (num_generations - pilot_samples)."
            )
        if not any(self.passes(k / pilot) for k in range(pilot + 1)):
            raise ValueError(
                f"pilot_band_low={self.pilot_band_low!r}, pilot_band_high={self.pilot_band_high!r}: no pass rate a "
                f"pilot of pilot_samples={pilot} can measure (0, 1/{pilot}, ..., 1) lies strictly inside the band. "
                "Widen the band, or raise pilot_samples."
            )


class PilotCommitSchedule(CandidatesSchedule):
    """Two rounds over candidates beyond the batch (`PilotCommitSampler`), run by the rounds loop: the batch's B
    prompts and ⌈`pilot_oversampling` · B⌉ − B more from the seeded candidate stream, every one consumed."""

    what = "Pilot-Commit's pilots"
    oversampling_field = "pilot_oversampling"
    instead = "Use generation_schedule='rounds'."

    @property
    def oversampling(self) -> float:
        return self.plan.section.pilot_oversampling

    def new_sampler(self, step_inputs: list[dict]) -> tuple[list[dict], PilotCommitSampler]:
        """The step's candidates and their sampler; the draws are seeded by (`seed`, global step), so the same on
        every process."""
        trainer, b = self.trainer, len(step_inputs)
        rows = self.candidate_rows(step_inputs)
        uniforms = np.random.default_rng([trainer.args.seed, trainer.state.global_step]).random(len(rows))
        prior = sampler_prior(trainer.pass_rate_memory, rows)
        return rows, PilotCommitSampler(len(rows), self.plan, num_kept=b, uniforms=uniforms, **prior)

    def end_step(self, outcome: StepOutcome) -> None:
        """Every candidate beyond the batch was piloted: consume them all."""
        sampler = outcome.sampler
        self.candidate_stream.consume(sampler.num_prompts - sampler.num_kept)
