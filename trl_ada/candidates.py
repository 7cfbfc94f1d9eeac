"""Candidate prompts beyond the batch: refill, the keep rule and pre-rollout skipping (dynamic sampling).

The rounds schedule's `Candidates` sub-section (its fields and their checks), the `RefillSampler` that samples over the
candidates and the seeded `CandidateStream` they are drawn from; the refill schedule (`schedules/rounds.py`) runs them.
Pure Python and numpy, no torch and no TRL (`docs/algorithm.md`, "Candidates, refill and the keep rule"). A step draws
C = ⌈`prompt_oversampling` · B⌉ candidate prompts in a seeded order and trains on exactly B of them (`num_kept`), so
the batch keeps TRL's shape B × n:

1. **Pre-rollout skip** (`skip_before_rollout`). A candidate the pass-rate memory has seen is skipped before any
   completion only on evidence that sampling it is wasted: it is *easy* (posterior probability that n completions
   are all right at least `skip_threshold`) or *unsolvable* (posterior probability that `skip_unsolvable_draws`
   completions are all wrong at least `skip_threshold`). A prompt that is merely hard (its n completions would
   likely all be wrong, but more could find a right one) is never skipped: it is where adaptive sampling spends
   its rounds. A candidate skipped `skip_max_consecutive` times in a row (the memory's skip streak) is sampled at
   its next turn, and one whose uniform draw falls below `skip_exploration` is sampled anyway.
2. **Admission and refill.** Round 1 admits the first B candidates that are not skipped, in draw order. Before each
   later round, every *free slot* admits the next candidate in draw order. A slot is held by an admitted candidate
   that met its exit rule, that can still sample (under its own cap M · `rounds_per_prompt`), or whose pool is
   mixed already; it is freed by a candidate that finished without signal (cap reached, or stopped as futile). A
   candidate is admitted only while enough rounds remain to fill its group.
3. **Keep rule.** Of the candidates whose pool fills a group, the B kept are the effective ones (at least one
   positive and one negative: the kept group is mixed) first, then the others, each in draw order.

The batch is under-filled (kept groups without signal) only when the candidates or the round cap run out; that is
measured by `RefillStatistics.ineffective_kept_fraction` and `exhausted`. Candidates after the last one examined
were never looked at: they are not consumed (`consumed`), so a data stream can hand them out again.

DAPO's dynamic sampling is this with `exit_rule="mixed"`, `samples_per_round=n`, `rounds_per_prompt=1`: one round of
n per candidate, zero-variance groups dropped, refilled from the candidates up to `max_rounds`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .plan import CANDIDATES, SamplingPlan
from .records import Record, option
from .sampling import AdaptiveSampler
from .utils import is_int

__all__ = [
    "HARD_PASS_RATE",
    "CandidateStream",
    "Candidates",
    "RefillSampler",
    "RefillStatistics",
    "all_right_probability",
    "all_wrong_probability",
    "num_candidates",
    "skip_before_rollout",
]

HARD_PASS_RATE = 0.25  # a kept prompt is "hard" when its first round's pass rate is below this


MAX_SKIP_UNSOLVABLE_DRAWS = 10_000
"""The largest `skip_unsolvable_draws`: its probability is a product over that many draws for every candidate."""


@dataclass(frozen=True)
class Candidates(Record):
    """The rounds schedule's candidates beyond the batch, refill and pre-rollout skipping (all off by default)."""

    group: ClassVar[str] = CANDIDATES

    prompt_oversampling: float = option(
        1.0,
        "At least 1. A generation batch of B prompts samples over C = ⌈`prompt_oversampling` · B⌉ candidates: its "
        "own B, then new prompts from a seeded candidate stream over `train_dataset`, and keeps exactly B (TRL's "
        "shape, B × n). Round 1 admits the first B candidates not skipped; before each later round every free slot "
        "(its prompt finished without signal) admits the next candidate. The kept B are the candidates with a mixed "
        "group first, then the others, each in draw order.",
        within="[1, inf)",
    )
    rounds_per_prompt: int | None = option(
        None,
        "Rounds one candidate may sample (its cap is `samples_per_round * rounds_per_prompt`); `max_rounds` stays "
        "the step's round cap; None = `max_rounds`. DAPO's dynamic sampling (`sampling=\"dapo\"`) is "
        '`exit_rule="mixed"`, `samples_per_round=n`, `rounds_per_prompt=1` with `prompt_oversampling` > 1.',
        within="[1, inf)",
    )
    skip_threshold: float | None = option(
        None,
        "In (0, 1]; None = never skip. A candidate the pass-rate memory has seen is skipped before any completion "
        "only on evidence that it is easy (posterior probability that n completions are all right at least this) "
        "or unsolvable (the same for `skip_unsolvable_draws` completions all wrong). A prompt that is only hard is "
        "never skipped. Needs `pass_rate_memory=True`.",
        within="(0, 1]",
    )
    skip_exploration: float = option(
        0.05,
        "In [0, 1]: the probability that a skippable candidate is sampled anyway (a seeded draw, the same on every "
        "process), so that a prompt the policy has learned since is seen again.",
        within="[0, 1]",
    )
    skip_unsolvable_draws: int | None = option(
        64,
        "At least 1: a candidate is skipped as unsolvable when its posterior probability that this many "
        "completions are all wrong is at least `skip_threshold` (with `memory_decay=0.5` only all-wrong visits of "
        "32 completions or more build that evidence). None = never skip a prompt for being hard.",
        within=f"[1, {MAX_SKIP_UNSOLVABLE_DRAWS}]",
    )
    skip_max_consecutive: int = option(
        4,
        "At least 1: a candidate skipped this many times in a row (the memory's skip streak, kept in checkpoints) "
        "is sampled at its next turn, so no prompt is skipped for good.",
        within="[1, inf)",
    )

    @property
    def active(self) -> bool:
        """True when a step samples over candidates beyond its batch or may skip some (the refill schedule)."""
        return self.prompt_oversampling > 1.0 or self.skip_threshold is not None or self.rounds_per_prompt is not None

    def rounds(self, max_rounds: int) -> int:
        """Rounds one candidate may sample: `rounds_per_prompt`, or `max_rounds` when it is None."""
        return max_rounds if self.rounds_per_prompt is None else min(self.rounds_per_prompt, max_rounds)


def num_candidates(num_kept: int, prompt_oversampling: float) -> int:
    """C = ⌈oversampling · B⌉ candidates for B kept prompts (1.0 → exactly B)."""
    return max(num_kept, math.ceil(round(prompt_oversampling * num_kept, 9)))


def all_right_probability(alpha: np.ndarray, beta: np.ndarray, draws: int) -> np.ndarray:
    """P(`draws` new completions are all right) when p ~ Beta(alpha, beta): E[p^draws] = Π (α + i) / (α + β + i)."""
    alpha = np.asarray(alpha, dtype=np.float64).reshape(-1, 1)
    beta = np.asarray(beta, dtype=np.float64).reshape(-1, 1)
    i = np.arange(draws)
    return np.prod((alpha + i) / (alpha + beta + i), axis=1)


def all_wrong_probability(alpha: np.ndarray, beta: np.ndarray, draws: int) -> np.ndarray:
    """P(`draws` new completions are all wrong) when p ~ Beta(alpha, beta): E[(1 − p)^draws]."""
    return all_right_probability(beta, alpha, draws)


def skip_before_rollout(
    plan: SamplingPlan,
    alpha: np.ndarray,
    beta: np.ndarray,
    memory_hits: np.ndarray,
    skip_streaks: np.ndarray,
    uniforms: np.ndarray,
) -> np.ndarray:
    """Which candidates are skipped before any completion (see the module docstring): a memory hit that is easy
    (P(n right) >= `skip_threshold`) or unsolvable (P(`skip_unsolvable_draws` wrong) >= `skip_threshold`), whose
    skip streak is below `skip_max_consecutive` and whose uniform draw (`uniforms`, one per candidate, the same on
    every process) is not below `skip_exploration`."""
    hits = np.asarray(memory_hits, dtype=bool)
    candidates: Candidates = plan.section.candidates
    threshold = candidates.skip_threshold
    if threshold is None:
        return np.zeros(hits.shape, dtype=bool)
    easy = all_right_probability(alpha, beta, plan.num_generations) >= threshold
    unsolvable = np.zeros(hits.shape, dtype=bool)
    if candidates.skip_unsolvable_draws is not None:
        unsolvable = all_wrong_probability(alpha, beta, candidates.skip_unsolvable_draws) >= threshold
    revisit = np.asarray(skip_streaks) >= candidates.skip_max_consecutive
    explore = np.asarray(uniforms) < candidates.skip_exploration
    return hits & (easy | unsolvable) & ~revisit & ~explore


@dataclass(frozen=True)
class RefillStatistics:
    """What the candidates did in one step; fractions are over the kept (trained) prompts."""

    candidates: int
    skipped: int
    sampled: int
    kept: int
    consumed: int
    effective_kept_fraction: float
    samples_per_kept_prompt: float
    hard_kept_fraction: float
    ineffective_kept_fraction: float
    exhausted: bool

    def as_metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat `name -> value` pairs under `refill/`."""
        return {f"{prefix}refill/{name}": float(value) for name, value in self.__dict__.items()}


class RefillSampler(AdaptiveSampler):
    """An [`AdaptiveSampler`] over `num_prompts` candidates that keeps `num_kept` of them (see the module docstring).

    `skipped` flags candidates skipped before rollout (`skip_before_rollout`); the plan's `rounds_per_prompt` caps the
    rounds of one candidate (its cap is `samples_per_round * rounds_per_prompt`), `max_rounds` those of the step. With
    `num_kept = num_prompts`, no skip and `rounds_per_prompt = max_rounds` it samples as [`AdaptiveSampler`] does.
    """

    def __init__(
        self,
        num_prompts: int,
        plan: SamplingPlan | None = None,
        *,
        num_kept: int | None = None,
        skipped: Sequence[bool] | None = None,
        **sampler_arguments: Any,
    ):
        c = num_prompts
        self.num_kept = c if num_kept is None else num_kept
        if not is_int(self.num_kept) or not 1 <= self.num_kept <= c:
            raise ValueError(f"num_kept={self.num_kept!r}: must be an integer in [1, num_prompts={c}].")
        self.skipped = [False] * c if skipped is None else [bool(flag) for flag in skipped]
        if len(self.skipped) != c:
            raise ValueError(f"skipped has {len(self.skipped)} flags; expected one per candidate ({c}).")
        super().__init__(num_prompts, plan, **sampler_arguments)
        self.admitted = [False] * c
        self._examined = 0

    # -- state ---------------------------------------------------------------------------------

    @property
    def num_budgeted(self) -> int:
        """The budget is counted over the kept prompts: `sample_budget` completions per trained prompt."""
        return self.num_kept

    @property
    def cap(self) -> int:
        """The most completions one candidate may draw in the step: M · `rounds_per_prompt`."""
        return self.samples_per_round * self.plan.section.candidates.rounds(self.max_rounds)

    @property
    def active(self) -> list[int]:
        """Admitted candidates still sampling, in draw order."""
        return [p for p in super().active if self.admitted[p]]

    @property
    def done(self) -> bool:
        """The round cap is reached, the budget is spent, or nothing can sample and no free slot can be refilled."""
        if self.round >= self.max_rounds or self._budget_spent():
            return True
        if any(len(self.pools[p]) < self.cap for p in self.active):
            return False
        return not (self.round == 0 or (self._free_slots() > 0 and self._refillable()))

    @property
    def exhausted(self) -> bool:
        """Slots are free and no candidate is left to refill them (every one examined or skipped)."""
        return self._free_slots() > 0 and all(self.skipped[self._examined :])

    def is_effective(self, prompt: int) -> bool:
        """The candidate's pool fills a group and holds a positive and a negative: its kept group is mixed."""
        positives, negatives = self.counts(prompt)
        return len(self.pools[prompt]) >= self.num_generations and positives > 0 and negatives > 0

    def _holds_slot(self, prompt: int) -> bool:
        can_sample = self.is_active(prompt) and len(self.pools[prompt]) < self.cap
        return self.exit_round[prompt] is not None or can_sample or self.is_effective(prompt)

    def _free_slots(self) -> int:
        return self.num_kept - sum(self._holds_slot(p) for p in range(self.num_prompts) if self.admitted[p])

    def _refillable(self) -> bool:
        """A candidate not examined yet and not skipped remains, and it could fill its group in the rounds left and
        within the budget."""
        time_left = self.samples_per_round * (self.max_rounds - self.round) >= self.num_generations
        return time_left and self._refill_room() > 0 and not all(self.skipped[self._examined :])

    def _refill_room(self) -> int:
        """New candidates whose group the budget can still pay for, after the groups admitted ones still need."""
        if self.budget_total is None:
            return self.num_prompts
        return max(self.budget_total - self.samples_drawn - self.still_needed(), 0) // self.num_generations

    def _admit(self) -> None:
        """Round 1: the first `num_kept` candidates not skipped. Later: one new candidate per free slot."""
        free = self.num_kept if self.round == 0 else min(self._free_slots(), self._refill_room())
        if free <= 0 or (self.round and not self._refillable()):
            return
        while free and self._examined < self.num_prompts:
            p = self._examined
            self._examined += 1
            if not self.skipped[p]:
                self.admitted[p] = True
                free -= 1
        if self.round == 0 and free:  # too few candidates survive the skip: the batch still needs num_kept
            for p in [p for p in range(self.num_prompts) if not self.admitted[p]][:free]:
                self.admitted[p] = True

    def skipped_prompts(self) -> list[int]:
        """Candidates skipped in effect: examined, flagged by the skip and never sampled (the memory's skip streak
        counts these; a skipped candidate admitted to fill round 1 was visited instead)."""
        return [p for p in range(self._examined) if self.skipped[p] and not self.pools[p]]

    def still_needed(self) -> int:
        """Completions still owed to admitted candidates whose pool cannot fill a group yet."""
        return sum(max(self.num_generations - len(pool), 0) for p, pool in enumerate(self.pools) if self.admitted[p])

    # -- rounds --------------------------------------------------------------------------------

    def plan_round(self) -> list[int]:
        """Admit candidates into free slots (see the module docstring), then plan as [`AdaptiveSampler`] does."""
        if self.done:
            raise RuntimeError("Sampling is finished: no candidate can sample, max_rounds is reached or budget spent.")
        self._admit()
        return super().plan_round()

    # -- results -------------------------------------------------------------------------------

    def kept_prompts(self) -> list[int]:
        """The `num_kept` kept candidates, in draw order: effective ones first, then the others, each by draw order."""
        if not self.done:
            raise RuntimeError("Prompts are kept once sampling is done.")
        filled = [p for p in range(self.num_prompts) if len(self.pools[p]) >= self.num_generations]
        if len(filled) < self.num_kept:
            raise RuntimeError(f"Only {len(filled)} candidates filled a group; {self.num_kept} must be kept.")
        ranked = sorted(filled, key=lambda p: (not self.is_effective(p), p))
        return sorted(ranked[: self.num_kept])

    @property
    def consumed(self) -> int:
        """Candidates examined (admitted or skipped), in draw order; those after them were never looked at."""
        return self._examined

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """The sampler's metrics and the candidates' (`refill/*`)."""
        return {**super().metrics(prefix), **self.refill_statistics().as_metrics(prefix=prefix)}

    def refill_statistics(self) -> RefillStatistics:
        """Candidates drawn, skipped, sampled, kept and consumed; effective and hard shares of the kept prompts."""
        kept = self.kept_prompts()
        sampled = [p for p in range(self.num_prompts) if self.pools[p]]
        effective = [self.is_effective(p) for p in kept]
        first = [self.first_round_pass_rate(p) for p in kept]
        return RefillStatistics(
            candidates=self.num_prompts,
            skipped=sum(self.skipped),
            sampled=len(sampled),
            kept=len(kept),
            consumed=self._examined,
            effective_kept_fraction=float(np.mean(effective)),
            samples_per_kept_prompt=self.samples_drawn / len(kept),
            hard_kept_fraction=float(np.mean([rate < HARD_PASS_RATE for rate in first])),
            ineffective_kept_fraction=1.0 - float(np.mean(effective)),
            exhausted=self.exhausted,
        )


@dataclass
class CandidateStream:
    """Dataset indices for the candidates beyond a batch: every index once per pass, passes in permutations seeded by
    (`seed`, pass number), so every process walks the same stream and a checkpoint restores it from two numbers.

    `peek` looks at the next candidates without consuming them; `consume(k)` moves past the first k it returned
    (and past the indices it passed over before them), so candidates a step did not examine are offered again.
    """

    size: int
    seed: int
    epoch: int = 0
    position: int = 0
    _marks: list[tuple[int, int]] = field(init=False, default_factory=list, repr=False, compare=False)
    _orders: dict[int, np.ndarray] = field(init=False, default_factory=dict, repr=False, compare=False)

    def order(self, epoch: int) -> np.ndarray:
        """The permutation of pass `epoch`."""
        if epoch not in self._orders:
            self._orders = {epoch: np.random.default_rng([self.seed, epoch]).permutation(self.size)}
        return self._orders[epoch]

    def peek(self, count: int, accept: Callable[[int], bool] = lambda index: True) -> list[int]:
        """Up to `count` next indices that `accept` takes (e.g. not a prompt of the batch), within two passes."""
        epoch, position, taken = self.epoch, self.position, []
        self._marks = []
        for _ in range(2 * self.size):
            if len(taken) == count:
                break
            if position == self.size:
                epoch, position = epoch + 1, 0
            index = int(self.order(epoch)[position])
            position += 1
            if accept(index):
                taken.append(index)
                self._marks.append((epoch, position))
        return taken

    def consume(self, count: int) -> None:
        """Move past the first `count` indices of the last `peek`."""
        if count > len(self._marks):
            raise ValueError(f"consume({count}): the last peek returned only {len(self._marks)} indices.")
        if count:
            self.epoch, self.position = self._marks[count - 1]
        self._marks = []

    def state_dict(self) -> dict[str, int]:
        """What a checkpoint stores."""
        return {"size": self.size, "seed": self.seed, "epoch": self.epoch, "position": self.position}

    @classmethod
    def from_state_dict(cls, state: dict[str, int]) -> CandidateStream:
        """The stream a checkpoint stored."""
        return cls(int(state["size"]), int(state["seed"]), int(state["epoch"]), int(state["position"]))
