"""The Reinforce-Ada sampling core: pools, exit rules, group selection and per-step statistics.

Pure Python and numpy, no torch and no TRL, so every line can be checked against the algorithm
(`docs/algorithm.md`, "One step, precisely") and tested on its own. One `AdaptiveSampler` lives for one training step:

    sampler = AdaptiveSampler(num_prompts=B, num_generations=n, samples_per_round=M, max_rounds=N)
    while not sampler.done:
        prompts = sampler.plan_round()           # active prompts; each gets M new completions by default
        sampler.ingest(rewards)                   # sum(sampler.plan_sizes) rewards, prompt-major
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
from functools import lru_cache
from typing import Protocol

import numpy as np

from .utils import closest_name

__all__ = [
    "AdaptiveSampler",
    "EstimationStatistics",
    "ExitRule",
    "QuotaRule",
    "SamplingStatistics",
    "aggregate_rewards",
    "beta_binomial_pmf",
    "exit_probability",
    "grant_by_marginal_gain",
    "get_exit_rule",
    "register_exit_rule",
    "validate_estimation",
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

MIXED = QuotaRule(
    "mixed",
    min_positive=lambda n: 1,
    min_negative=lambda n: 1,
    description="at least one positive and one negative (DAPO's filter: the group is effective)",
)

_EXIT_RULES: dict[str, ExitRule] = {rule.name: rule for rule in (BALANCE, POS, MIXED, NONE)}


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


# --------------------------------------------------------------------------------------------
# Planning with a pass-rate prior (Reinforce-Ada-Est)
# --------------------------------------------------------------------------------------------

ROUND_SIZINGS = ("fixed", "prior")


def validate_estimation(
    num_generations: int,
    exit_rule: str,
    first_round: str,
    later_rounds: str,
    round_confidence: float,
    futility_threshold: float,
    sample_budget: float | None,
) -> None:
    """Raise a ValueError naming the parameter, the value and what is valid for an impossible estimation plan."""
    for name, value in (("first_round", first_round), ("later_rounds", later_rounds)):
        if value not in ROUND_SIZINGS:
            raise ValueError(f"{name}={value!r}: choose one of {list(ROUND_SIZINGS)}.")
    if not isinstance(round_confidence, numbers.Real) or not 0.0 < round_confidence < 1.0:
        raise ValueError(
            f"round_confidence={round_confidence!r}: must be in (0, 1), the probability with which a prior-sized "
            "round should meet the exit rule (e.g. 0.5)."
        )
    if not isinstance(futility_threshold, numbers.Real) or not 0.0 <= futility_threshold < 1.0:
        raise ValueError(
            f"futility_threshold={futility_threshold!r}: must be in [0, 1); 0 turns the futility stop off, e.g. 0.05 "
            "stops a prompt whose chance to meet its exit rule within its remaining cap is below 5%."
        )
    if sample_budget is not None and (
        not isinstance(sample_budget, numbers.Real)
        or not math.isfinite(sample_budget)
        or sample_budget < num_generations
    ):
        raise ValueError(
            f"sample_budget={sample_budget!r}: the average completions per prompt a step may draw must be a number >= "
            f"num_generations={num_generations} (every prompt keeps n completions), or None for no budget."
        )
    sized = "prior" in (first_round, later_rounds)
    if (sized or futility_threshold > 0 or sample_budget is not None) and exit_rule == "none":
        raise ValueError(
            "exit_rule='none' samples one round of n per prompt, so first_round/later_rounds='prior', "
            "futility_threshold and sample_budget have nothing to act on: use an adaptive exit rule ('balance')."
        )


def beta_binomial_pmf(draws: int, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """(len(alpha), draws + 1): P(k positives in `draws` new completions) when p ~ Beta(alpha, beta)."""
    alpha, beta = np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    i = np.arange(draws)
    first = np.prod((beta[:, None] + i) / (alpha[:, None] + beta[:, None] + i), axis=1)  # k = 0
    k = np.arange(draws)
    ratios = (draws - k) * (alpha[:, None] + k) / ((k + 1) * (beta[:, None] + draws - k - 1))  # pmf(k+1) / pmf(k)
    return np.concatenate([first[:, None], first[:, None] * np.cumprod(ratios, axis=1)], axis=1)


@lru_cache(maxsize=65536)
def _exit_grid(rule: ExitRule, positives: int, negatives: int, num_generations: int, cap: int) -> np.ndarray:
    """(cap + 1, cap + 1) booleans: after m more draws with k positives, can the pool fill a group and meet `rule`?"""
    grid = np.zeros((cap + 1, cap + 1), dtype=bool)
    for m in range(cap + 1):
        if positives + negatives + m >= num_generations:
            for k in range(m + 1):
                grid[m, k] = rule.is_met(positives + k, negatives + m - k, num_generations)
    return grid


def exit_probability(
    rule: ExitRule,
    num_generations: int,
    alpha: np.ndarray,
    beta: np.ndarray,
    positives: Sequence[int],
    negatives: Sequence[int],
    cap: int,
) -> np.ndarray:
    """(prompts, cap + 1): posterior probability that m = 0..cap more completions make the pool meet `rule`.

    `alpha`, `beta` are each prompt's Beta posterior *including* its current pool; the number of positives among m
    new completions is then Beta-binomial(m, alpha, beta).
    """
    pools = zip(positives, negatives, strict=True)
    grids = np.stack([_exit_grid(rule, int(p), int(q), num_generations, cap) for p, q in pools])
    probability = np.empty((len(grids), cap + 1))
    for m in range(cap + 1):
        probability[:, m] = (beta_binomial_pmf(m, alpha, beta) * grids[:, m, : m + 1]).sum(axis=1)
    return probability


def prior_round_size(probability: np.ndarray, low: int, high: int, confidence: float) -> int:
    """Smallest m in [low, high] with probability[m] >= confidence, or `high` if none reaches it."""
    reaching = np.flatnonzero(probability[low : high + 1] >= confidence)
    return low + int(reaching[0]) if reaching.size else high


def grant_by_marginal_gain(low: np.ndarray, high: np.ndarray, available: int, *gains: np.ndarray) -> np.ndarray:
    """Completions per prompt in [low, high] spending at most `available` beyond `low`, one at a time by gain.

    `gains` are (prompts, cap + 1) curves (probability of an outcome after m completions); the (m+1)-th completion
    of a prompt is worth `gain[m + 1] - gain[m]`. The extra completions go to the largest marginal gains of the
    first curve, ties broken by the next curve's, then by prompt order: the greedy optimum when the curves are
    concave, as the probability of a mixed pool is once the pool can fill a group.
    """
    rows, draws = np.nonzero(np.arange(gains[0].shape[1] - 1)[None, :] < high[:, None])
    keep = draws >= low[rows]
    rows, draws = rows[keep], draws[keep]
    marginal = [np.diff(gain, axis=1)[rows, draws] for gain in gains]
    order = np.lexsort((draws, rows, *(-m for m in reversed(marginal))))
    granted = np.bincount(rows[order[: max(int(available), 0)]], minlength=len(low))
    return low + granted


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
        """Flat `name -> value` pairs (memory hits, futile stops, budget, first-round calibration on hits)."""
        return {f"est/{name}": float(value) for name, value in self.__dict__.items()}


# --------------------------------------------------------------------------------------------
# The per-step state machine
# --------------------------------------------------------------------------------------------


@dataclass
class AdaptiveSampler:
    """Pool state of one training step over `num_prompts` distinct prompts (`docs/algorithm.md`, steps 1-4).

    With `exit_rule="none"` the step is plain GRPO sampling: one round of exactly n per prompt.

    Reinforce-Ada-Est (all off by default, which gives every active prompt M completions per round): a Beta prior
    per prompt (`prior_alpha`, `prior_beta`, e.g. from a `PassRateMemory`), combined with the step's pool, sizes
    the first round (`first_round="prior"`) and/or later rounds (`later_rounds="prior"`) to the smallest size, within
    the prompt's remaining cap M·N (and at least n in the first round), that meets the exit rule with probability
    `round_confidence`; stops a prompt whose chance to meet its rule within its remaining cap is below
    `futility_threshold`; and caps the step at `sample_budget` completions per prompt on average, granting each
    round the completions a prompt needs to fill its group first, then the rest by priority (see `plan_round`).
    """

    num_prompts: int
    num_generations: int = 4
    samples_per_round: int = 8
    max_rounds: int = 4
    positive_threshold: float = 0.7
    exit_rule: str = "balance"
    first_round: str = "fixed"
    later_rounds: str = "fixed"
    round_confidence: float = 0.5
    futility_threshold: float = 0.0
    sample_budget: float | None = None
    prior_alpha: Sequence[float] | None = None
    prior_beta: Sequence[float] | None = None
    memory_hits: Sequence[bool] | None = None
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
        self._init_estimation()

    def _init_estimation(self) -> None:
        validate_estimation(
            self.num_generations,
            self.exit_rule,
            self.first_round,
            self.later_rounds,
            self.round_confidence,
            self.futility_threshold,
            self.sample_budget,
        )
        b = self.num_prompts
        self.estimating = self.memory_hits is not None or self.first_round == "prior" or self.later_rounds == "prior"
        self.estimating |= self.futility_threshold > 0 or self.sample_budget is not None
        for name, default in (("prior_alpha", 1.0), ("prior_beta", 1.0), ("memory_hits", False)):
            values = np.full(b, default) if getattr(self, name) is None else np.asarray(getattr(self, name))
            if values.shape != (b,) or (name != "memory_hits" and not np.all(values > 0)):
                raise ValueError(f"{name} must hold one {'positive number' if default else 'flag'} per prompt ({b}).")
            setattr(self, name, values.astype(type(default)))
        self.stopped = [False] * b  # stopped as futile
        self.first_round_sizes = [0] * b
        self._plan_sizes: list[int] = []
        self._budget_total = None if self.sample_budget is None else math.floor(self.sample_budget * b)

    # -- state ---------------------------------------------------------------------------------

    @property
    def active(self) -> list[int]:
        """Prompts still sampling, in prompt order (not exited, not stopped as futile)."""
        return [i for i, r in enumerate(self.exit_round) if r is None and not self.stopped[i]]

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

    @property
    def plan_sizes(self) -> list[int]:
        """Completions each prompt of the current plan gets this round (all `samples_per_round` by default)."""
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

    def _meets_exit(self, prompt: int) -> bool:
        if len(self.pools[prompt]) < self.num_generations:  # a group must be fillable before leaving
            return False
        if not any(self.is_scored(prompt)):  # no reward function can score this prompt: more samples cannot help
            return True
        return self.rule.is_met(*self.counts(prompt), self.num_generations)

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
        if self._budget_total is not None:
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
        values = _as_rewards(rewards, sum(self._plan_sizes))
        flags = [False] * len(values) if masked is None else [bool(flag) for flag in masked]
        if len(flags) != len(values):
            raise ValueError(f"masked has {len(flags)} flags; expected {len(values)}, one per reward.")
        self.round += 1
        exited = []
        start = 0
        for prompt, size in zip(self._plan, self._plan_sizes, strict=True):
            if not self.pools[prompt]:
                self.first_round_sizes[prompt] = size
            self.pools[prompt].extend(values[start : start + size].tolist())
            self.masked[prompt].extend(flags[start : start + size])
            start += size
            if self._meets_exit(prompt):
                self.exit_round[prompt] = self.round
                exited.append(prompt)
        self._plan, self._plan_sizes = None, []
        if self.futility_threshold > 0:
            self._stop_futile()
        return exited

    # -- Reinforce-Ada-Est planning ------------------------------------------------------------

    def _exit_probability(self, rule: ExitRule, prompts: list[int]) -> np.ndarray:
        """(len(prompts), cap + 1): posterior probability that m more completions meet `rule`."""
        counts = np.array([self.counts(p) for p in prompts], dtype=np.int64).reshape(-1, 2)
        alpha = self.prior_alpha[prompts] + counts[:, 0]
        beta = self.prior_beta[prompts] + counts[:, 1]
        return exit_probability(rule, self.num_generations, alpha, beta, counts[:, 0], counts[:, 1], self.cap)

    def _requests(self, prompts: list[int]) -> np.ndarray:
        """Completions each active prompt asks for this round: M, or prior-sized; a futile one only fills its group."""
        sizes = np.array([len(self.pools[p]) for p in prompts], dtype=np.int64)
        left = self.cap - sizes
        sizing = self.first_round if self.round == 0 else self.later_rounds
        fixed = np.minimum(self.samples_per_round, left)
        if sizing == "fixed" and self.futility_threshold == 0:
            return fixed
        probability = self._exit_probability(self.rule, prompts)
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
        available = -(-(self._budget_total - self.samples_drawn - self._still_needed()) // rounds_left)  # ceil
        mixed = self._exit_probability(MIXED, prompts)
        exits = self._exit_probability(self.rule, prompts)
        return grant_by_marginal_gain(needed, high, available, mixed, exits)

    @property
    def samples_drawn(self) -> int:
        """Completions drawn so far in the step."""
        return sum(len(pool) for pool in self.pools)

    def _still_needed(self) -> int:
        """Completions still owed to prompts whose pool cannot fill a group yet."""
        return sum(max(self.num_generations - len(pool), 0) for pool in self.pools)

    def _budget_spent(self) -> bool:
        if self._budget_total is None:
            return False
        return self._still_needed() == 0 and self.samples_drawn >= self._budget_total

    def _stop_futile(self) -> None:
        prompts = [p for p in self.active if len(self.pools[p]) >= self.num_generations]
        if not prompts:
            return
        probability = self._exit_probability(self.rule, prompts)
        for row, prompt in enumerate(prompts):
            if probability[row, self.cap - len(self.pools[prompt])] < self.futility_threshold:
                self.stopped[prompt] = True

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
            first_round_reward=float(np.mean(first_round)) if first_round else float("nan"),
            mixed_group_fraction=mixed_groups,
            estimation=self._estimation_statistics() if self.estimating else None,
        )

    def _first_round_pass_rate(self, prompt: int) -> float:
        """Positives among the scored completions of the first round of `prompt` (NaN when none was scored)."""
        first = self.pools[prompt][: self.first_round_sizes[prompt]]
        scored = [reward > self.positive_threshold for reward in first if not math.isnan(reward)]
        return float(np.mean(scored)) if scored else float("nan")

    def _estimation_statistics(self) -> EstimationStatistics:
        hits = np.flatnonzero(self.memory_hits)
        predicted = self.prior_alpha[hits] / (self.prior_alpha[hits] + self.prior_beta[hits])
        realized = np.array([self._first_round_pass_rate(p) for p in hits])
        budget_used = self.samples_drawn / self._budget_total if self._budget_total else float("nan")
        return EstimationStatistics(
            memory_hit_fraction=hits.size / self.num_prompts,
            futile_fraction=sum(self.stopped) / self.num_prompts,
            budget_used=budget_used,
            predicted_pass_rate=float(predicted.mean()) if hits.size else float("nan"),
            realized_pass_rate=float(np.nanmean(realized)) if hits.size else float("nan"),
            calibration_error=float(np.nanmean(np.abs(predicted - realized))) if hits.size else float("nan"),
        )
