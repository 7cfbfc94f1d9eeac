"""The Reinforce-Ada sampler: one step's pools, exits and kept groups (pure Python and numpy, no torch, no TRL).

Every line can be checked against the algorithm (`docs/algorithm.md`, "One step, precisely"). One `AdaptiveSampler`
lives for one training step and reads its parameters from a `SamplingPlan`:

    sampler = AdaptiveSampler(B, SamplingPlan.from_fields(num_generations=n, samples_per_round=M, max_rounds=N))
    while not sampler.done:
        prompts = sampler.plan_round()           # active prompts; each gets M new completions by default
        sampler.ingest(rewards)                   # sum(sampler.plan_sizes) rewards, prompt-major
    groups = sampler.select_groups()              # n pool indices per kept prompt
    stats = sampler.statistics()

Schedules without rounds (streaming) drive the same state through `add_sample`, `budget_room` and `close`. The pool
state and the statistics every sampler shares are `PromptPools`; `schedules.est.EstSampler` is the other sampler.

Rewards handed to the sampler are the weighted sums of the reward functions (TRL's `nansum`: a function returning
None has no opinion and adds nothing). A completion that no function scored has reward NaN: it has no opinion either,
so it is neither positive nor negative for the exit rule, it is left out of the pool mean, and a group takes it only
when the scored samples cannot fill it. A prompt whose pool holds n samples and not one scored stops sampling (no
function can score it). The exit rules (`exit_rules.py`), group selection (`groups.py`) and the Beta maths
(`beta.py`) are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .beta import beta_binomial_pmf, exit_probability, grant_by_marginal_gain, prior_round_size
from .exit_rules import (
    BALANCE,
    MIXED,
    NONE,
    POS,
    ExitRule,
    QuotaRule,
    exit_rule_names,
    get_exit_rule,
    register_exit_rule,
)
from .groups import aggregate_rewards, reward_values, select_group, split_by_class
from .plan import SamplingPlan
from .seq import ROUND_SIZINGS
from .utils import is_int

__all__ = [
    "BALANCE",
    "MIXED",
    "NONE",
    "POS",
    "ROUND_SIZINGS",
    "AdaptiveSampler",
    "EstimationStatistics",
    "ExitRule",
    "QuotaRule",
    "SamplingStatistics",
    "PromptPools",
    "aggregate_rewards",
    "beta_binomial_pmf",
    "exit_probability",
    "exit_rule_names",
    "get_exit_rule",
    "grant_by_marginal_gain",
    "masked_flags",
    "plan_with",
    "prior_round_size",
    "register_exit_rule",
    "reward_values",
    "select_group",
]

# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingStatistics:
    """What one step of adaptive sampling did; fractions are over the step's distinct prompts."""

    num_prompts: int
    samples: int
    samples_per_prompt: float
    rounds: int
    exit_fraction_per_round: tuple[float, ...]
    exited_fraction: float
    unresolved_fraction: float
    unresolved_all_positive_fraction: float
    unresolved_all_negative_fraction: float
    unresolved_mixed_fraction: float
    pool_pass_rate: float
    first_round_reward: float
    mixed_group_fraction: float
    estimation: EstimationStatistics | None = None

    def as_metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat `name -> value` pairs, for TRL's metric log."""
        metrics = {
            "samples": float(self.samples),
            "samples_per_prompt": self.samples_per_prompt,
            "rounds": float(self.rounds),
            "exited_fraction": self.exited_fraction,
            "unresolved_fraction": self.unresolved_fraction,
            "unresolved_all_positive_fraction": self.unresolved_all_positive_fraction,
            "unresolved_all_negative_fraction": self.unresolved_all_negative_fraction,
            "unresolved_mixed_fraction": self.unresolved_mixed_fraction,
            "pool_pass_rate": self.pool_pass_rate,
            "first_round_reward": self.first_round_reward,
            "mixed_group_fraction": self.mixed_group_fraction,
        }
        for r, fraction in enumerate(self.exit_fraction_per_round, start=1):
            metrics[f"exit_fraction/round_{r}"] = fraction
        if self.estimation is not None:
            metrics.update(self.estimation.as_metrics())
        return {prefix + key: value for key, value in metrics.items()}


@dataclass(frozen=True)
class EstimationStatistics:
    """What the pass-rate memory, prior-sized rounds, futility stop and budget did in one step."""

    memory_hit_fraction: float
    futile_fraction: float
    budget_used: float
    predicted_pass_rate: float
    realized_pass_rate: float
    calibration_error: float

    def as_metrics(self) -> dict[str, float]:
        """Flat `name -> value` pairs (memory hits, futile stops, budget, first-round calibration on hits).

        A value that does not apply to the step (no budget, no memory hit: NaN) is left out, not logged as NaN.
        """
        return {f"est/{name}": float(value) for name, value in self.__dict__.items() if not math.isnan(value)}


# --------------------------------------------------------------------------------------------
# The per-step state machine
# --------------------------------------------------------------------------------------------


class PromptPools:
    """What every sampler of one step holds over its `num_prompts` distinct prompts: each prompt's pool of rewards
    (in draw order, with its truncation flags), its exit round, and the Beta prior of its pass rate (`prior_alpha`,
    `prior_beta`, e.g. from a `PassRateMemory`; `memory_hits` flags the prompts it knew); and what a step's statistics
    read of them. `AdaptiveSampler` decides exits in rounds, `schedules.est.EstSampler` allocates one round."""

    max_rounds = 1
    sizes_rounds_from_prior = False

    def __init__(
        self,
        num_prompts: int,
        plan: SamplingPlan,
        *,
        prior_alpha: Sequence[float] | None = None,
        prior_beta: Sequence[float] | None = None,
        memory_hits: Sequence[bool] | None = None,
    ):
        if not is_int(num_prompts) or num_prompts < 1:
            raise ValueError(f"num_prompts={num_prompts!r}: a step needs at least one prompt.")
        self.plan = plan
        self.num_prompts = num_prompts
        self.num_generations = plan.num_generations
        self.positive_threshold = plan.positive_threshold
        self.pools: list[list[float]] = [[] for _ in range(num_prompts)]
        self.masked: list[list[bool]] = [[] for _ in range(num_prompts)]
        self.exit_round: list[int | None] = [None] * num_prompts
        self.stopped = [False] * num_prompts  # stopped as futile
        self.first_round_sizes = [0] * num_prompts
        self.round = 0
        self._plan: list[int] | None = None
        self._plan_sizes: list[int] = []
        self.prior_alpha = _per_prompt("prior_alpha", prior_alpha, 1.0, num_prompts)
        self.prior_beta = _per_prompt("prior_beta", prior_beta, 1.0, num_prompts)
        self.memory_hits = _per_prompt("memory_hits", memory_hits, False, num_prompts)
        self.estimating = memory_hits is not None
        self.budget_total: int | None = None

    # -- state ---------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        raise NotImplementedError

    @property
    def active(self) -> list[int]:
        """Prompts still sampling, in prompt order (not exited, not stopped as futile)."""
        return [p for p in range(self.num_prompts) if self.is_active(p)]

    def is_active(self, prompt: int) -> bool:
        """The prompt has neither met its exit rule nor been stopped as futile."""
        return self.exit_round[prompt] is None and not self.stopped[prompt]

    @property
    def plan_sizes(self) -> list[int]:
        """Completions each prompt of the current plan gets this round."""
        return list(self._plan_sizes)

    def is_positive(self, prompt: int) -> list[bool]:
        """Class of each pool sample of `prompt`, in draw order (strict `reward > positive_threshold`)."""
        return [reward > self.positive_threshold for reward in self.pools[prompt]]

    def is_scored(self, prompt: int) -> list[bool]:
        """Whether some reward function scored each pool sample of `prompt` (NaN: no opinion)."""
        return [not math.isnan(reward) for reward in self.pools[prompt]]

    def counts(self, prompt: int) -> tuple[int, int]:
        """(positives, negatives) in the pool of `prompt`; unscored samples are neither."""
        positives = sum(self.is_positive(prompt))
        return positives, sum(self.is_scored(prompt)) - positives

    @property
    def samples_drawn(self) -> int:
        """Completions drawn so far in the step."""
        return sum(len(pool) for pool in self.pools)

    def still_needed(self) -> int:
        """Completions still owed to prompts whose pool cannot fill a group yet."""
        return sum(max(self.num_generations - len(pool), 0) for pool in self.pools)

    # -- results -------------------------------------------------------------------------------

    def kept_prompts(self) -> list[int]:
        """The prompts that reach the loss, in batch order: every prompt of the step."""
        if not self.done:
            raise RuntimeError("Prompts are kept once sampling is done.")
        return list(range(self.num_prompts))

    def select_groups(self) -> list[list[int]]:
        """For every kept prompt (`kept_prompts` order), the pool indices of its kept samples."""
        raise NotImplementedError

    def kept_rewards(self) -> np.ndarray:
        """(kept prompts, n) rewards of the kept samples, in `kept_prompts` and group order."""
        groups = self.select_groups()
        return np.array(
            [[self.pools[p][i] for i in group] for p, group in zip(self.kept_prompts(), groups, strict=True)]
        )

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """The step's numbers as flat `name -> value` pairs, for TRL's metric log."""
        return self.statistics().as_metrics(prefix=prefix)

    def statistics(self) -> SamplingStatistics:
        """Per-step numbers for logging and benchmarks."""
        b = self.num_prompts
        sizes = np.array([len(pool) for pool in self.pools])
        exits = [sum(r == k for r in self.exit_round) / b for k in range(1, self.max_rounds + 1)]
        unresolved = [p for p in range(b) if self.exit_round[p] is None]
        positives, negatives = np.array([self.counts(p) for p in range(b)]).T
        scored = positives + negatives
        all_pos = sum(int(positives[p] == scored[p] > 0) for p in unresolved)
        all_neg = sum(int(positives[p] == 0 < scored[p]) for p in unresolved)
        first_round = [
            [reward for reward in pool[: self.first_round_sizes[p]] if not math.isnan(reward)]
            for p, pool in enumerate(self.pools)
        ]
        if self.estimating:  # first rounds may differ in size: weigh prompts equally, as a plain GRPO round does
            first_round = [float(np.mean(rewards)) for rewards in first_round if rewards]
        else:
            first_round = [reward for rewards in first_round for reward in rewards]
        mixed_groups = float("nan")
        if self.done:
            kept = [np.asarray(row)[~np.isnan(row)] for row in self.kept_rewards()]
            mixed_groups = float(np.mean([row.size > 0 and row.max() > row.min() for row in kept]))
        return SamplingStatistics(
            num_prompts=b,
            samples=int(sizes.sum()),
            samples_per_prompt=float(sizes.mean()),
            rounds=self.round,
            exit_fraction_per_round=tuple(exits),
            exited_fraction=1.0 - len(unresolved) / b,
            unresolved_fraction=len(unresolved) / b,
            unresolved_all_positive_fraction=all_pos / b,
            unresolved_all_negative_fraction=all_neg / b,
            unresolved_mixed_fraction=(len(unresolved) - all_pos - all_neg) / b,
            pool_pass_rate=float(positives.sum() / max(scored.sum(), 1)),
            first_round_reward=float(np.mean(first_round)) if first_round else float("nan"),
            mixed_group_fraction=mixed_groups,
            estimation=self._estimation_statistics() if self.estimating else None,
        )

    def first_round_pass_rate(self, prompt: int) -> float:
        """Positives among the scored completions of the first round of `prompt` (NaN when none was scored)."""
        first = self.pools[prompt][: self.first_round_sizes[prompt]]
        scored = [reward > self.positive_threshold for reward in first if not math.isnan(reward)]
        return float(np.mean(scored)) if scored else float("nan")

    def _estimation_statistics(self) -> EstimationStatistics:
        hits = np.flatnonzero(self.memory_hits)
        predicted = self.prior_alpha[hits] / (self.prior_alpha[hits] + self.prior_beta[hits])
        realized = np.array([self.first_round_pass_rate(p) for p in hits])
        seen = ~np.isnan(realized)  # a remembered candidate that was not sampled has no realised pass rate
        budget_used = self.samples_drawn / self.budget_total if self.budget_total else float("nan")
        return EstimationStatistics(
            memory_hit_fraction=hits.size / self.num_prompts,
            futile_fraction=sum(self.stopped) / self.num_prompts,
            budget_used=budget_used,
            predicted_pass_rate=float(predicted.mean()) if hits.size else float("nan"),
            realized_pass_rate=float(realized[seen].mean()) if seen.any() else float("nan"),
            calibration_error=float(np.abs(predicted - realized)[seen].mean()) if seen.any() else float("nan"),
        )


class AdaptiveSampler(PromptPools):
    """Pool state of one training step over `num_prompts` distinct prompts (`docs/algorithm.md`, steps 1-4).

    `plan` holds every parameter (a `SamplingPlan` whose section decides exits: its `exits`, `seq.Exits`; keyword
    arguments build one, or change the given one); the sampler reads them once, as its own attributes
    (`sampler.samples_per_round`). With `generation_schedule="grpo"` (`sampling="grpo"`) the step is plain GRPO
    sampling: one round of exactly n per prompt, under the exit rule `NONE`, always met.

    Budgeted rounds (all off by default, which gives every active prompt M completions per round): a Beta prior per
    prompt, combined with the step's pool, sizes the first round (`first_round="prior"`) and/or later rounds
    (`later_rounds="prior"`) to the smallest size, within the prompt's remaining cap M·N (and at least n in the first
    round), that meets the exit rule with probability `round_confidence`; stops a prompt whose chance to meet its rule
    within its remaining cap is below `futility_threshold`; and caps the step at `sample_budget` completions per
    prompt on average, granting each round the completions a prompt needs to fill its group first, then the rest by
    priority (see `plan_round`).
    """

    def __init__(
        self,
        num_prompts: int,
        plan: SamplingPlan | None = None,
        *,
        prior_alpha: Sequence[float] | None = None,
        prior_beta: Sequence[float] | None = None,
        memory_hits: Sequence[bool] | None = None,
        **plan_fields: Any,
    ):
        plan = plan_with(plan, plan_fields)
        if not hasattr(plan.section, "exits"):
            raise ValueError(
                f"generation_schedule={plan.generation_schedule!r} has no exit rule and rounds for an AdaptiveSampler "
                "to decide (its schedule module has its own sampler)."
            )
        exits = plan.section.exits(plan.num_generations)
        super().__init__(num_prompts, plan, prior_alpha=prior_alpha, prior_beta=prior_beta, memory_hits=memory_hits)
        self.exit_rule = exits.exit_rule
        self.rule = NONE if exits.exit_rule == NONE.name else get_exit_rule(exits.exit_rule)  # NONE: plain GRPO's
        self.samples_per_round, self.max_rounds = exits.samples_per_round, exits.max_rounds
        self.futility_threshold, self.sample_budget = exits.futility_threshold, exits.sample_budget
        self.first_round, self.later_rounds = exits.sizing.first_round, exits.sizing.later_rounds
        self.round_confidence = exits.sizing.round_confidence
        self.sizes_rounds_from_prior = exits.sizing.from_prior
        self.estimating |= (
            self.sizes_rounds_from_prior or self.futility_threshold > 0 or self.sample_budget is not None
        )
        self.budget_total = None if self.sample_budget is None else math.floor(self.sample_budget * self.num_budgeted)

    # -- state ---------------------------------------------------------------------------------

    @property
    def num_budgeted(self) -> int:
        """Prompts the step's budget is counted over: every prompt of the step."""
        return self.num_prompts

    @property
    def done(self) -> bool:
        """The round cap is reached, no active prompt has room left under its cap M·N, or the budget is spent."""
        if self.round >= self.max_rounds or self._budget_spent():
            return True
        return all(len(self.pools[p]) >= self.cap for p in self.active)

    @property
    def cap(self) -> int:
        """M·N: the most completions one prompt may draw in the step."""
        return self.samples_per_round * self.max_rounds

    def cap_of(self, prompt: int) -> int:
        """The most completions `prompt` may draw in the step (`cap`)."""
        return self.cap

    def round_of(self, count: int) -> int:
        """The round in which the rounds schedule would have drawn a prompt's `count`-th completion."""
        return math.ceil(count / self.samples_per_round)

    def meets_exit(self, prompt: int) -> bool:
        """The pool can fill a group and meets the exit rule (or holds n samples and not one scored)."""
        if len(self.pools[prompt]) < self.num_generations:  # a group must be fillable before leaving
            return False
        if not any(self.is_scored(prompt)):  # no reward function can score this prompt: more samples cannot help
            return True
        return self.rule.is_met(*self.counts(prompt), self.num_generations)

    def is_futile(self, prompt: int) -> bool:
        """With a `futility_threshold`: the pool can fill a group and its posterior chance to meet the exit rule
        within the prompt's remaining cap is below the threshold."""
        return prompt in self.futile([prompt])

    def futile(self, prompts: Sequence[int]) -> list[int]:
        """The `prompts` that are futile (`is_futile`), from one batched posterior computation."""
        filled = [p for p in prompts if len(self.pools[p]) >= self.num_generations]
        if self.futility_threshold <= 0 or not filled:
            return []
        probability = self.exit_probability(filled)
        left = [self.cap - len(self.pools[p]) for p in filled]
        return [p for p, row, m in zip(filled, probability, left, strict=True) if row[m] < self.futility_threshold]

    # -- rounds --------------------------------------------------------------------------------

    def plan_round(self) -> list[int]:
        """The prompts that get new completions in the next round; `plan_sizes` says how many each.

        By default every active prompt gets `samples_per_round`. With a `sample_budget`, each prompt is first
        granted what it still needs to fill its group (n − pool size; reserved from the start, so always
        available). The rest of the budget goes, one completion at a time and never beyond a prompt's request,
        where it adds the most posterior probability of a mixed pool (a new effective group); ties by the
        probability it adds to meeting the exit rule, then prompt order. A prompt with no evidence yet (memory
        miss, empty pool) gets only what fills its group: all such prompts look alike, so the budget waits for
        the first round's results. A prompt granted nothing this round stays active.
        """
        if self.done:
            raise RuntimeError("Sampling is finished: no prompt is active, max_rounds is reached or the budget spent.")
        prompts = self.active
        sizes = self._requests(prompts)
        if self.budget_total is not None:
            sizes = self._within_budget(prompts, sizes)
        self._plan = [p for p, size in zip(prompts, sizes, strict=True) if size > 0]
        self._plan_sizes = [int(size) for size in sizes if size > 0]
        return list(self._plan)

    def ingest(self, rewards: Sequence[float], masked: Sequence[bool] | None = None) -> list[int]:
        """Add the round's rewards (prompt-major, `plan_sizes` per planned prompt) and return the prompts that exit.

        `masked` flags samples that reach the loss without gradient (truncated under `mask_truncated_completions`);
        group selection prefers the others within each class. With a `futility_threshold`, prompts whose pool can
        fill a group and whose posterior chance to meet the exit rule within their remaining cap is below it then
        stop sampling (`stopped`).
        """
        if self._plan is None:
            raise RuntimeError("Call plan_round() before ingest().")
        values = reward_values(rewards, sum(self._plan_sizes))
        flags = masked_flags(masked, len(values))
        self.round += 1
        exited = []
        start = 0
        for prompt, size in zip(self._plan, self._plan_sizes, strict=True):
            if not self.pools[prompt]:
                self.first_round_sizes[prompt] = size
            self.pools[prompt].extend(values[start : start + size].tolist())
            self.masked[prompt].extend(flags[start : start + size])
            start += size
            if self.meets_exit(prompt):
                self.exit_round[prompt] = self.round
                exited.append(prompt)
        self._plan, self._plan_sizes = None, []
        for prompt in self.futile(self.active):
            self.stopped[prompt] = True
        return exited

    # -- schedules without rounds (streaming) --------------------------------------------------

    def add_sample(self, prompt: int, reward: float, masked: bool = False, round: int = 1) -> bool:
        """Append one completion's reward to the pool of an active `prompt` (the next in its request order); True if
        the prompt then leaves sampling: it meets its exit rule (exit round `round`) or is stopped as futile."""
        if not self.is_active(prompt):
            raise RuntimeError(f"Prompt {prompt} has left sampling; its pool takes no more completions.")
        self.pools[prompt].append(float(reward_values([reward], 1)[0]))
        self.masked[prompt].append(bool(masked))
        if self.meets_exit(prompt):
            self.exit_round[prompt] = round
            return True
        self.stopped[prompt] = self.is_futile(prompt)
        return self.stopped[prompt]

    def budget_room(self, prompt: int, requested: Sequence[int]) -> int:
        """Completions `prompt` may still request within the step's budget, when every prompt q has requested
        `requested[q]` so far: what fills its group always fits; beyond it, what the budget leaves after every
        other prompt's group is filled."""
        if self.budget_total is None:
            return self.cap
        n = self.num_generations
        owed = sum(max(n - count, 0) for q, count in enumerate(requested) if q != prompt)
        own = max(n - requested[prompt], 0)
        return own + max(self.budget_total - sum(requested) - owed - own, 0)

    def close(self, rounds: int) -> None:
        """End a step driven by `add_sample`: `rounds` is the step's length in rounds; the first round of each prompt
        counts as its first `samples_per_round` completions (what `statistics` reads)."""
        self.round = rounds
        for p, pool in enumerate(self.pools):
            self.first_round_sizes[p] = min(len(pool), self.samples_per_round)
        if not self.done:  # a budget left some prompts short of their cap: sampling is over all the same
            self.round = self.max_rounds

    # -- budgeted planning ---------------------------------------------------------------------

    def exit_probability(self, prompts: Sequence[int], rule: ExitRule | None = None) -> np.ndarray:
        """(len(prompts), cap + 1): posterior probability that m more completions meet `rule` (default: the plan's)."""
        counts = np.array([self.counts(p) for p in prompts], dtype=np.int64).reshape(-1, 2)
        alpha = self.prior_alpha[list(prompts)] + counts[:, 0]
        beta = self.prior_beta[list(prompts)] + counts[:, 1]
        rule = self.rule if rule is None else rule
        return exit_probability(rule, self.num_generations, alpha, beta, counts[:, 0], counts[:, 1], self.cap)

    def _requests(self, prompts: list[int]) -> np.ndarray:
        """Completions each active prompt asks for this round: M, or prior-sized; a futile one only fills its group."""
        sizes = np.array([len(self.pools[p]) for p in prompts], dtype=np.int64)
        left = self.cap - sizes
        sizing = self.first_round if self.round == 0 else self.later_rounds
        fixed = np.minimum(self.samples_per_round, left)
        if sizing == "fixed" and self.futility_threshold == 0:
            return fixed
        probability = self.exit_probability(prompts)
        needed = np.maximum(self.num_generations - sizes, 0)
        if sizing == "prior":
            low = np.maximum(needed, 1) if self.round else np.full_like(sizes, self.num_generations)
            requests = np.array(
                [prior_round_size(probability[i], low[i], left[i], self.round_confidence) for i in range(len(prompts))]
            )
        else:
            requests = fixed
        futile = probability[np.arange(len(prompts)), left] < self.futility_threshold
        return np.where(futile, np.minimum(requests, needed), requests)

    def _within_budget(self, prompts: list[int], requests: np.ndarray) -> np.ndarray:
        """Cut the round's requests to the budget: group-filling completions first, the rest by marginal gain."""
        sizes = np.array([len(self.pools[p]) for p in prompts], dtype=np.int64)
        needed = np.minimum(requests, np.maximum(self.num_generations - sizes, 0))
        uninformed = (sizes == 0) & ~self.memory_hits[prompts]  # nothing known yet: the budget waits for round 1
        high = np.where(uninformed, needed, requests)
        rounds_left = self.max_rounds - self.round
        available = -(-(self.budget_total - self.samples_drawn - self.still_needed()) // rounds_left)  # ceil
        mixed = self.exit_probability(prompts, MIXED)
        exits = self.exit_probability(prompts)
        return grant_by_marginal_gain(needed, high, available, mixed, exits)

    def _budget_spent(self) -> bool:
        if self.budget_total is None:
            return False
        return self.still_needed() == 0 and self.samples_drawn >= self.budget_total

    def candidates(self, prompt: int) -> list[int]:
        """Pool indices that group selection can still keep: the first n of each class (later draws never are)."""
        n = self.num_generations
        classes = split_by_class(self.is_positive(prompt), self.is_scored(prompt), self.masked[prompt])
        return sorted(i for indices in classes for i in indices[:n])

    # -- results -------------------------------------------------------------------------------

    def group_among(self, prompt: int, eligible: Sequence[int]) -> list[int]:
        """The group of `prompt` selected among the `eligible` pool indices (ascending) only: n of them, classes
        balanced as `select_group` does, or none when fewer than n are eligible."""
        if len(eligible) < self.num_generations:
            return []
        positive, scored, masked = self.is_positive(prompt), self.is_scored(prompt), self.masked[prompt]
        chosen = select_group(
            [positive[i] for i in eligible],
            self.num_generations,
            [scored[i] for i in eligible],
            [masked[i] for i in eligible],
        )
        return [eligible[j] for j in chosen]

    def select_groups(self) -> list[list[int]]:
        """For every kept prompt (`kept_prompts` order), the pool indices of its n kept samples."""
        if not self.done:
            raise RuntimeError("Groups are formed once sampling is done.")
        return [
            select_group(self.is_positive(p), self.num_generations, self.is_scored(p), self.masked[p])
            for p in self.kept_prompts()
        ]


def plan_with(plan: SamplingPlan | None, fields: dict[str, Any]) -> SamplingPlan:
    """`plan`, or the plan of flat `fields` (`SamplingPlan.from_fields`), or `plan` with `fields` changed."""
    if plan is None:
        return SamplingPlan.from_fields(**fields)
    return plan.replace(**fields) if fields else plan


def _per_prompt(name: str, values: Sequence | None, default: float | bool, num_prompts: int) -> np.ndarray:
    """One value per prompt (`default` for all when None); prior parameters must be positive."""
    array = np.full(num_prompts, default) if values is None else np.asarray(values)
    if array.shape != (num_prompts,) or (not isinstance(default, bool) and not np.all(array > 0)):
        kind = "flag" if isinstance(default, bool) else "positive number"
        raise ValueError(f"{name} must hold one {kind} per prompt ({num_prompts}).")
    return array.astype(type(default))


def masked_flags(masked: Sequence[bool] | None, expected: int) -> list[bool]:
    flags = [False] * expected if masked is None else [bool(flag) for flag in masked]
    if len(flags) != expected:
        raise ValueError(f"masked has {len(flags)} flags; expected {expected}, one per reward.")
    return flags
