"""One prompt's adaptive sampling in the asynchronous worker (pure: numpy, no torch, no HTTP, no threads).

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

Seq rollouts are the streaming schedule's `StreamingScheduler` over a one-prompt `AdaptiveSampler`: completions are
used in request order, so the exit decision and the kept group do not depend on the order the engine finishes them
in. Every completion remembers the policy version that was live when it was requested (`versions`).

Staleness rule: every completion drawn counts toward the exit decision and the pool baseline, whatever its version
(it is evidence about the prompt); only kept completions within `max_staleness` versions of the live policy are
trained (`trainable`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..advantages import compute_advantages
from ..groups import check_rewards
from ..plan import SamplingPlan
from ..sampling import AdaptiveSampler
from ..streaming import Request, StreamingScheduler, Update

__all__ = ["PromptRollout", "trainable"]


def trainable(versions: Sequence[int], live_version: int, max_staleness: int) -> list[bool]:
    """Which samples may still be trained: requested at most `max_staleness` policy versions ago."""
    return [live_version - version <= max_staleness for version in versions]


class PromptRollout:
    """The sampling state of one prompt (see the module docstring): Seq with `allocation=None`, else Est."""

    def __init__(
        self,
        group_id: int,
        plan: SamplingPlan,
        version: int,
        *,
        allocation: int | None = None,
        prior: tuple[float, float] = (1.0, 1.0),
    ):
        if allocation is not None and (
            isinstance(allocation, bool) or not isinstance(allocation, int) or allocation < 1
        ):
            raise ValueError(f"allocation={allocation!r}: an Est prompt needs at least one sample.")
        self.group_id = group_id
        self.plan = plan
        self.allocation = allocation
        self.versions: list[int] = []  # policy version of each pool index, at request time
        self._version = version
        if allocation is None:
            alpha, beta = prior
            self.sampler: AdaptiveSampler | None = AdaptiveSampler(1, plan, prior_alpha=[alpha], prior_beta=[beta])
            self.scheduler: StreamingScheduler | None = StreamingScheduler(self.sampler)
        else:
            self.sampler = self.scheduler = None
            self._pool: list[float] = []
            self._pending: dict[int, Request] = {}
            self._arrived: dict[int, list[float]] = {}

    # -- events --------------------------------------------------------------------------------

    def start(self) -> list[Request]:
        """The prompt's first requests."""
        if self.scheduler is not None:
            return self._stamp(self.scheduler.start(), self._version)
        size, chunk = self.allocation, self.plan.streaming_chunk
        requests = [Request(i, 0, first, min(chunk, size - first)) for i, first in enumerate(range(0, size, chunk))]
        self._pending = {request.id: request for request in requests}
        return self._stamp(requests, self._version)

    def receive(
        self, request_id: int, rewards: Sequence[float], masked: Sequence[bool] | None = None, *, version: int
    ) -> Update:
        """Use one request's results; new requests are stamped with `version`, the policy live now."""
        if self.scheduler is not None:
            update = self.scheduler.receive(request_id, rewards, masked)
            self._stamp(update.issue, version)
            return update
        request = self._pending.get(request_id)
        if request is None:
            return Update()
        self._arrived[request_id] = check_rewards(rewards, request.size).tolist()
        while self._pending and min(self._pending) in self._arrived:  # ids are in pool order
            self._pool.extend(self._arrived.pop(min(self._pending)))
            del self._pending[min(self._pending)]
        return Update(exited=[0]) if not self._pending else Update()

    # -- state ---------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        if self.scheduler is not None:
            return self.scheduler.done
        return bool(self._pool) and not self._pending

    @property
    def pool(self) -> list[float]:
        """Every reward drawn for the prompt, in request order (NaN: no reward function had an opinion)."""
        return self.sampler.pools[0] if self.sampler is not None else self._pool

    def counts(self) -> tuple[int, int]:
        """Positives and negatives of the pool (scored samples only)."""
        if self.sampler is not None:
            return self.sampler.counts(0)
        scored = [r for r in self._pool if not np.isnan(r)]
        positives = sum(r > self.plan.positive_threshold for r in scored)
        return positives, len(scored) - positives

    @property
    def pass_rate(self) -> float:
        """Positives over scored samples of the pool (0 when nothing was scored)."""
        positives, negatives = self.counts()
        return positives / max(positives + negatives, 1)

    def kept(self) -> list[int]:
        """Pool indices of the kept group: n for Seq (the sync trainer's selection), every sample for Est."""
        if not self.done:
            raise RuntimeError("A prompt's group is formed once its sampling is done.")
        if self.sampler is None:
            return list(range(len(self._pool)))
        return self.sampler.select_groups()[0]

    def advantages(self, scale: str = "none") -> np.ndarray:
        """Advantages of the kept samples (`kept()` order) against the plan's baseline (pool: every drawn sample)."""
        pool = np.asarray(self.pool, dtype=np.float64)
        kept = pool[self.kept()]
        return compute_advantages(kept[None, :], [pool], baseline=self.plan.advantage_baseline, scale=scale)[0]

    # -- internals -----------------------------------------------------------------------------

    def _stamp(self, requests: list[Request], version: int) -> list[Request]:
        """Record the policy version of each new request's pool indices."""
        for request in requests:
            end = request.first + request.size
            self.versions.extend([version] * (end - len(self.versions)))
        return requests
