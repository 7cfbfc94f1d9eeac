"""One prompt's adaptive sampling in the asynchronous worker (pure: numpy, no torch, no HTTP, no threads). The
sections the asynchronous trainer runs are registered with `trl_ada.plan.ASYNCHRONOUS` by their schedules' modules
(`PromptStreaming`, `PromptEst`, `PromptGrpo`).

The synchronous trainer samples a step's prompts together. The asynchronous worker admits prompts one at a time and
lets each finish on its own, so its state is one `PromptRollout` per prompt:

    rollout = PromptRollout(group_id, plan, version=3)          # Seq (balance/pos/...): exits as results arrive
    rollout = PromptRollout(group_id, plan, version=3, allocation=6)   # Est: exactly 6 samples, no exit
    send(rollout.start())
    while not rollout.done:
        request, rewards = wait_for_any_result()
        update = rollout.receive(request.id, rewards, version=current_version)
        send(update.issue, version=current_version); cancel(update.cancel)
    rollout.kept(), rollout.advantages(scale), rollout.pass_rate
    groups, metrics = trained_wave(finished_rollouts, live_version, max_staleness, scale)   # what the worker pushes

Both are the streaming schedule's `RequestWindow` over a one-prompt sampler (the section's own, `Section.sampler`:
the Est schedule's `EstSampler` with the prompt's allocation, so Est's counts and groups are written once; else
`AdaptiveSampler`): completions are
used in request order, so the exit decision and the kept group do not depend on the order the engine finishes them
in. Every completion remembers the policy version that was live when it was requested (`versions`).

Staleness rule: every completion drawn counts toward the exit decision and the pool baseline, whatever its version
(it is evidence about the prompt); only completions within `max_staleness` versions of the live policy are trained
(`trainable`), and the kept group is selected among them: n of them for Seq, with the synchronous trainer's
selection (balanced classes where the fresh samples allow), or none when fewer than n are fresh; every sample for
Est, or none when one is stale. A group is never trained in part.

Objective weights (`trained_wave`): the groups pushed together (one wave, an optimizer step's worth of prompts) are
weighted by f'(p) at each pool's pass rate, normalised as the synchronous trainer normalises a step
(`objectives.advantage_weights`): mean weight 1 over the trained samples of the groups with signal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..advantages import compute_advantages
from ..objectives import advantage_weights
from ..plan import SamplingPlan
from ..sampling import AdaptiveSampler, PromptPools
from ..schedules.streaming import Request, RequestWindow, Update
from ..utils import is_int

__all__ = [
    "PromptRollout",
    "TrainedGroup",
    "trainable",
    "trained_wave",
]


def trainable(versions: Sequence[int], live_version: int, max_staleness: int) -> list[bool]:
    """Which samples may still be trained: requested at most `max_staleness` policy versions ago."""
    return [live_version - version <= max_staleness for version in versions]


class PromptRollout:
    """The sampling state of one prompt (see the module docstring): Seq with `allocation=None`, else Est with that
    many samples. Either way a `RequestWindow` drives the prompt's sampler (the section's, whose cap is its
    allocation, else `AdaptiveSampler`) from results that arrive in any order."""

    def __init__(
        self,
        group_id: int,
        plan: SamplingPlan,
        version: int,
        *,
        allocation: int | None = None,
        prior: tuple[float, float] = (1.0, 1.0),
    ):
        if allocation is not None and (not is_int(allocation) or allocation < 1):
            raise ValueError(f"allocation={allocation!r}: an Est prompt needs at least one sample.")
        self.group_id = group_id
        self.plan = plan
        self.versions: list[int] = []  # policy version of each pool index, at request time
        self._version = version
        alpha, beta = prior
        allocated = {} if allocation is None else {"allocation": [allocation]}
        sampler = plan.section.sampler or AdaptiveSampler
        self.sampler: PromptPools = sampler(1, plan, prior_alpha=[alpha], prior_beta=[beta], **allocated)
        self.scheduler = RequestWindow(self.sampler, window=allocation)

    # -- events --------------------------------------------------------------------------------

    def start(self) -> list[Request]:
        """The prompt's first requests."""
        return self._stamp(self.scheduler.start(), self._version)

    def receive(
        self, request_id: int, rewards: Sequence[float], masked: Sequence[bool] | None = None, *, version: int
    ) -> Update:
        """Use one request's results; new requests are stamped with `version`, the policy live now."""
        update = self.scheduler.receive(request_id, rewards, masked)
        self._stamp(update.issue, version)
        return update

    # -- state ---------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.scheduler.done

    @property
    def pool(self) -> list[float]:
        """Every reward drawn for the prompt, in request order (NaN: no reward function had an opinion)."""
        return self.sampler.pools[0]

    def counts(self) -> tuple[int, int]:
        """Positives and negatives of the pool (scored samples only)."""
        return self.sampler.counts(0)

    @property
    def pass_rate(self) -> float:
        """Positives over scored samples of the pool (0 when nothing was scored)."""
        positives, negatives = self.counts()
        return positives / max(positives + negatives, 1)

    def kept(self, fresh: Sequence[bool] | None = None) -> list[int]:
        """Pool indices (ascending) of the kept group, selected among the `fresh` pool samples (default: all): n for
        Seq (the synchronous trainer's selection), every sample for Est; [] when the fresh samples cannot form it
        (Seq: fewer than n; Est: one is not fresh)."""
        if not self.done:
            raise RuntimeError("A prompt's group is formed once its sampling is done.")
        size = len(self.pool)
        fresh = [True] * size if fresh is None else list(fresh)
        if len(fresh) != size:
            raise ValueError(f"fresh has {len(fresh)} flags for a pool of {size} samples.")
        return self.sampler.group_among(0, [i for i in range(size) if fresh[i]])

    def fresh(self, live_version: int, max_staleness: int) -> list[bool]:
        """Which pool samples may still be trained under the live policy (`trainable`)."""
        return trainable(self.versions[: len(self.pool)], live_version, max_staleness)

    def advantages(self, scale: str = "none", kept: Sequence[int] | None = None) -> np.ndarray:
        """Advantages of the `kept` samples (default `kept()`, in that order) against the plan's baseline (pool:
        every drawn sample; group: the kept samples)."""
        pool = np.asarray(self.pool, dtype=np.float64)
        rewards = pool[list(self.kept() if kept is None else kept)]
        return compute_advantages(rewards[None, :], [pool], baseline=self.plan.advantage_baseline, scale=scale)[0]

    # -- internals -----------------------------------------------------------------------------

    def _stamp(self, requests: list[Request], version: int) -> list[Request]:
        """Record the policy version of each new request's pool indices."""
        for request in requests:
            end = request.first + request.size
            self.versions.extend([version] * (end - len(self.versions)))
        return requests


@dataclass(frozen=True)
class TrainedGroup:
    """What the worker pushes of one finished prompt: pool indices and their advantages (objective weight
    included); both empty when the group is dropped whole."""

    kept: list[int]
    advantages: np.ndarray


def trained_wave(
    rollouts: Sequence[PromptRollout], live_version: int, max_staleness: int, scale: str = "none"
) -> tuple[list[TrainedGroup], dict[str, float]]:
    """The trained group of each finished rollout under the live policy, and the objective-weight metrics.

    Each kept group is selected among the samples still fresh (`PromptRollout.kept`); its advantages are weighted
    as the synchronous trainer weighs a step's (`advantage_weights`, over these rollouts as one step): a group
    dropped whole has no trained sample and no weight in the mean. Metrics (`weight_mean`, `weight_max`,
    `floored_fraction`) only where the plan weighs gradients.
    """
    kept = [rollout.kept(rollout.fresh(live_version, max_staleness)) for rollout in rollouts]
    advantages = [rollout.advantages(scale, k) for rollout, k in zip(rollouts, kept, strict=True)]
    metrics: dict[str, float] = {}
    if rollouts and rollouts[0].plan.objective.weights_gradients:
        weights, metrics = advantage_weights(rollouts[0].plan, [rollout.pass_rate for rollout in rollouts], advantages)
        advantages = [a * w for a, w in zip(advantages, weights, strict=True)]
    return [TrainedGroup(k, a) for k, a in zip(kept, advantages, strict=True)], metrics
