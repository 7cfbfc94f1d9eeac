"""The Reinforce-Ada sampling core: pools, exit rules, group selection and per-step statistics.

Pure Python and numpy, no torch and no TRL, so every line can be checked against the algorithm
(`docs/algorithm.md`, "One step, precisely") and tested on its own. One `AdaptiveSampler` lives for one training step:

    sampler = AdaptiveSampler(num_prompts=B, num_generations=n, samples_per_round=M, max_rounds=N)
    while not sampler.done:
        prompts = sampler.plan_round()           # active prompts, each gets M new completions
        sampler.ingest(rewards)                   # len(prompts) * M rewards, prompt-major
    groups = sampler.select_groups()              # n pool indices per prompt
    stats = sampler.statistics()

Rewards handed to the sampler are the weighted sums of the reward functions (TRL's `nansum`: a
function returning None has no opinion and adds nothing). A completion that no function scored has
reward NaN: it has no opinion either, so it is neither positive nor negative for the exit rule, it is
left out of the pool mean, and a group takes it only when the scored samples cannot fill it. A prompt
whose pool holds n samples and not one scored stops sampling (no function can score it).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .utils import closest_name

__all__ = [
    "AdaptiveSampler",
    "ExitRule",
    "QuotaRule",
    "SamplingStatistics",
    "aggregate_rewards",
    "get_exit_rule",
    "register_exit_rule",
]


# --------------------------------------------------------------------------------------------
# Exit rules
# --------------------------------------------------------------------------------------------


class ExitRule(Protocol):
    """Decides, from a prompt's pool counts, whether the prompt has enough signal to stop sampling."""

    name: str

    def is_met(self, num_positive: int, num_negative: int, num_generations: int) -> bool: ...


@dataclass(frozen=True)
class QuotaRule:
    """Exit once the pool holds at least `min_positive(n)` positives and `min_negative(n)` negatives."""

    name: str
    min_positive: Callable[[int], int]
    min_negative: Callable[[int], int]
    description: str = ""

    def is_met(self, num_positive: int, num_negative: int, num_generations: int) -> bool:
        return num_positive >= self.min_positive(num_generations) and num_negative >= self.min_negative(
            num_generations
        )


BALANCE = QuotaRule(
    "balance",
    min_positive=lambda n: n // 2,
    min_negative=lambda n: n - n // 2,
    description="at least ⌊n/2⌋ positives and n − ⌊n/2⌋ negatives (the paper's best variant)",
)
POS = QuotaRule(
    "pos",
    min_positive=lambda n: 1,
    min_negative=lambda n: 0,
    description="at least one positive",
)
NONE = QuotaRule(
    "none",
    min_positive=lambda n: 0,
    min_negative=lambda n: 0,
    description="plain GRPO sampling: one round of exactly n completions per prompt",
)

_EXIT_RULES: dict[str, ExitRule] = {rule.name: rule for rule in (BALANCE, POS, NONE)}


def register_exit_rule(rule: ExitRule, *, overwrite: bool = False) -> ExitRule:
    """Make `rule` available by its name, e.g. as `ReinforceAdaConfig(exit_rule=rule.name)`."""
    if not callable(getattr(rule, "is_met", None)) or not isinstance(getattr(rule, "name", None), str):
        raise TypeError(f"An exit rule needs a `name: str` and an `is_met(pos, neg, n)` method; got {rule!r}.")
    if rule.name in _EXIT_RULES and not overwrite:
        raise ValueError(f"exit_rule {rule.name!r} is already registered; pass overwrite=True to replace it.")
    _EXIT_RULES[rule.name] = rule
    return rule


def exit_rule_names() -> list[str]:
    """Names of the registered exit rules."""
    return sorted(_EXIT_RULES)


def get_exit_rule(name: str) -> ExitRule:
    """The registered rule called `name`; a ValueError lists the valid names otherwise."""
    if name not in _EXIT_RULES:
        close = closest_name(name, _EXIT_RULES)
        hint = f" Did you mean {close!r}?" if close else ""
        raise ValueError(f"exit_rule={name!r} is not a known exit rule; choose one of {exit_rule_names()}.{hint}")
    return _EXIT_RULES[name]


# --------------------------------------------------------------------------------------------
# Validation and reward aggregation
# --------------------------------------------------------------------------------------------


def validate_sampling(
    num_generations: int, samples_per_round: int, max_rounds: int, positive_threshold: float
) -> None:
    """Raise a ValueError naming the parameter, the value and the fix for an impossible sampling plan."""
    if not isinstance(num_generations, int) or num_generations < 2:
        raise ValueError(
            f"num_generations={num_generations!r}: the group size n must be an integer >= 2, since a group of one "
            "completion has no baseline."
        )
    if not isinstance(samples_per_round, int) or samples_per_round < 1:
        raise ValueError(f"samples_per_round={samples_per_round!r}: must be an integer >= 1 (the paper uses 8).")
    if not isinstance(max_rounds, int) or max_rounds < 1:
        raise ValueError(f"max_rounds={max_rounds!r}: must be an integer >= 1 (the paper uses 4).")
    if samples_per_round * max_rounds < num_generations:
        raise ValueError(
            f"samples_per_round * max_rounds = {samples_per_round} * {max_rounds} = {samples_per_round * max_rounds} "
            f"is smaller than num_generations={num_generations}: a prompt could never fill its group. Raise "
            f"samples_per_round or max_rounds so that their product is at least {num_generations}."
        )
    if not isinstance(positive_threshold, numbers.Real) or not math.isfinite(positive_threshold):
        raise ValueError(
            f"positive_threshold={positive_threshold!r}: must be a finite number (0.7 for 0/1 rewards; a "
            "completion is positive when its reward is strictly greater)."
        )


def aggregate_rewards(rewards_per_func: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Weighted sum over reward functions, as TRL does: a NaN (function returned None) adds nothing.

    A completion that every function declined stays NaN (unscored), as in TRL's advantage computation.
    """
    rewards_per_func = np.asarray(rewards_per_func, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if rewards_per_func.ndim != 2 or rewards_per_func.shape[1] != weights.shape[0]:
        raise ValueError(
            f"rewards_per_func has shape {rewards_per_func.shape}; expected (num_completions, {weights.shape[0]}), "
            "one column per reward function."
        )
    rewards = np.nansum(rewards_per_func * weights[None, :], axis=1)
    rewards[np.isnan(rewards_per_func).all(axis=1)] = np.nan
    return rewards


def _as_rewards(rewards: Sequence[float], expected: int) -> np.ndarray:
    values = np.asarray(rewards, dtype=np.float64).reshape(-1)
    if values.shape[0] != expected:
        raise ValueError(
            f"rewards has {values.shape[0]} values; expected {expected} (samples_per_round for each prompt of the "
            "round's plan, prompt-major)."
        )
    bad = np.flatnonzero(np.isinf(values))
    if bad.size:
        raise ValueError(
            f"rewards[{int(bad[0])}] = {values[bad[0]]}: a reward must be finite, or NaN for a completion that no "
            "reward function scored."
        )
    return values


# --------------------------------------------------------------------------------------------
# Group selection
# --------------------------------------------------------------------------------------------


def _split_by_class(
    is_positive: Sequence[bool], is_scored: Sequence[bool] | None = None, is_masked: Sequence[bool] | None = None
) -> tuple[list[int], list[int], list[int]]:
    """(positive, negative, unscored) indices of a pool; within each, unmasked samples first, then draw order."""
    scored = is_scored if is_scored is not None else [True] * len(is_positive)
    masked = is_masked if is_masked is not None else [False] * len(is_positive)
    order = sorted(range(len(is_positive)), key=lambda i: (masked[i], i))
    positives = [i for i in order if scored[i] and is_positive[i]]
    negatives = [i for i in order if scored[i] and not is_positive[i]]
    unscored = [i for i in order if not scored[i]]
    return positives, negatives, unscored


def select_group(
    is_positive: Sequence[bool],
    num_generations: int,
    is_scored: Sequence[bool] | None = None,
    is_masked: Sequence[bool] | None = None,
) -> list[int]:
    """Indices (ascending, i.e. draw order) of the n pool samples that form the prompt's group.

    k_pos = min(⌊n/2⌋, P), k_neg = min(n − k_pos, Q); a shortfall is filled from the other class, then from the
    unscored samples (`is_scored` False: no reward function had an opinion). Within a class, samples that still
    carry gradient (`is_masked` False, e.g. not truncated under `mask_truncated_completions`) come first, then the
    earliest draws, so the choice is deterministic given the pool.
    """
    n = num_generations
    positives, negatives, unscored = _split_by_class(is_positive, is_scored, is_masked)
    if len(is_positive) < n:
        raise ValueError(f"A pool of {len(is_positive)} samples cannot fill a group of num_generations={n}.")
    k_pos = min(n // 2, len(positives))
    k_neg = min(n - k_pos, len(negatives))
    k_pos = min(n - k_neg, len(positives))
    return sorted(positives[:k_pos] + negatives[:k_neg] + unscored[: n - k_pos - k_neg])


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
        return {prefix + key: value for key, value in metrics.items()}


# --------------------------------------------------------------------------------------------
# The per-step state machine
# --------------------------------------------------------------------------------------------


@dataclass
class AdaptiveSampler:
    """Pool state of one training step over `num_prompts` distinct prompts (`docs/algorithm.md`, steps 1-4).

    With `exit_rule="none"` the step is plain GRPO sampling: one round of exactly n per prompt.
    """

    num_prompts: int
    num_generations: int = 4
    samples_per_round: int = 8
    max_rounds: int = 4
    positive_threshold: float = 0.7
    exit_rule: str = "balance"
    pools: list[list[float]] = field(init=False)
    masked: list[list[bool]] = field(init=False)
    exit_round: list[int | None] = field(init=False)
    round: int = field(init=False, default=0)
    _plan: list[int] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.num_prompts, int) or self.num_prompts < 1:
            raise ValueError(f"num_prompts={self.num_prompts!r}: a step needs at least one prompt.")
        self.rule = get_exit_rule(self.exit_rule)
        if self.exit_rule == "none":
            self.samples_per_round, self.max_rounds = self.num_generations, 1
        validate_sampling(self.num_generations, self.samples_per_round, self.max_rounds, self.positive_threshold)
        self.pools = [[] for _ in range(self.num_prompts)]
        self.masked = [[] for _ in range(self.num_prompts)]
        self.exit_round = [None] * self.num_prompts

    # -- state ---------------------------------------------------------------------------------

    @property
    def active(self) -> list[int]:
        """Prompts still sampling, in prompt order."""
        return [i for i, r in enumerate(self.exit_round) if r is None]

    @property
    def done(self) -> bool:
        """No prompt is active, or the round cap is reached."""
        return self.round >= self.max_rounds or not self.active

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

    def _meets_exit(self, prompt: int) -> bool:
        if len(self.pools[prompt]) < self.num_generations:  # a group must be fillable before leaving
            return False
        if not any(self.is_scored(prompt)):  # no reward function can score this prompt: more samples cannot help
            return True
        return self.rule.is_met(*self.counts(prompt), self.num_generations)

    # -- rounds --------------------------------------------------------------------------------

    def plan_round(self) -> list[int]:
        """The prompts that get `samples_per_round` new completions in the next round."""
        if self.done:
            raise RuntimeError("Sampling is finished: no prompt is active or max_rounds is reached.")
        self._plan = self.active
        return list(self._plan)

    def ingest(self, rewards: Sequence[float], masked: Sequence[bool] | None = None) -> list[int]:
        """Add the round's rewards (prompt-major, M per planned prompt) and return the prompts that exit.

        `masked` flags samples that reach the loss without gradient (truncated under `mask_truncated_completions`);
        group selection prefers the others within each class.
        """
        if self._plan is None:
            raise RuntimeError("Call plan_round() before ingest().")
        m = self.samples_per_round
        values = _as_rewards(rewards, len(self._plan) * m)
        flags = [False] * len(values) if masked is None else [bool(flag) for flag in masked]
        if len(flags) != len(values):
            raise ValueError(f"masked has {len(flags)} flags; expected {len(values)}, one per reward.")
        self.round += 1
        exited = []
        for k, prompt in enumerate(self._plan):
            self.pools[prompt].extend(values[k * m : (k + 1) * m].tolist())
            self.masked[prompt].extend(flags[k * m : (k + 1) * m])
            if self._meets_exit(prompt):
                self.exit_round[prompt] = self.round
                exited.append(prompt)
        self._plan = None
        return exited

    def candidates(self, prompt: int) -> list[int]:
        """Pool indices that group selection can still keep: the first n of each class (later draws never are)."""
        n = self.num_generations
        classes = _split_by_class(self.is_positive(prompt), self.is_scored(prompt), self.masked[prompt])
        return sorted(i for indices in classes for i in indices[:n])

    # -- results -------------------------------------------------------------------------------

    def select_groups(self) -> list[list[int]]:
        """For every prompt, the pool indices of its n kept samples."""
        if not self.done:
            raise RuntimeError("Groups are formed once sampling is done.")
        return [
            select_group(self.is_positive(p), self.num_generations, self.is_scored(p), self.masked[p])
            for p in range(self.num_prompts)
        ]

    def kept_rewards(self) -> np.ndarray:
        """(num_prompts, n) rewards of the kept samples, in group order."""
        groups = self.select_groups()
        return np.array([[self.pools[p][i] for i in group] for p, group in enumerate(groups)])

    def statistics(self) -> SamplingStatistics:
        """Per-step numbers for logging and benchmarks."""
        b, m = self.num_prompts, self.samples_per_round
        sizes = np.array([len(pool) for pool in self.pools])
        exits = [sum(r == k for r in self.exit_round) / b for k in range(1, self.max_rounds + 1)]
        unresolved = [p for p in range(b) if self.exit_round[p] is None]
        positives, negatives = np.array([self.counts(p) for p in range(b)]).T
        scored = positives + negatives
        all_pos = sum(int(positives[p] == scored[p] > 0) for p in unresolved)
        all_neg = sum(int(positives[p] == 0 < scored[p]) for p in unresolved)
        first_round = np.array([reward for pool in self.pools for reward in pool[:m]])
        first_round = first_round[~np.isnan(first_round)]
        mixed_groups = float("nan")
        if self.done:
            kept = [row[~np.isnan(row)] for row in self.kept_rewards()]
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
            first_round_reward=float(np.mean(first_round)) if first_round.size else float("nan"),
            mixed_group_fraction=mixed_groups,
        )
