"""Which groups the asynchronous trainer is done with: the record a checkpoint stores and a resume skips (pure: no
torch, no TRL).

The worker numbers groups 0, 1, 2, ... as it admits prompts and pushes each group's trained samples as rows of the
trainer's queue. A group is *settled* once none of its rows can still train:

- every row it pushed reached the loss (a group's rows may straddle micro-batches and optimizer steps: they are
  counted, and the group settles with its last row), or was dropped on the way because its group went stale in the
  queue (every row of it then is);
- or it pushed no row at all (dropped whole at push: its kept group could not be formed from fresh samples).

A resume continues at the first group not settled and skips the later ones that were, so a group trained before a
checkpoint never trains again, whatever the number of interruptions: the record starts from the checkpoint's. It is
kept compact, as the checkpoint stores it: `first_untrained` (every group before it settled) and the settled groups
after it, which shrink back into the prefix as it advances.

TRL's `AsyncGRPOTrainer` holds the record as `_trained_groups`: its collator calls `update` with the group ids of a
micro-batch's rows when it collates it (one micro-batch ahead of training), `training_step` calls `take_next` when
the oldest collated micro-batch trains, and its epoch stop reads `len` (groups settled in this run). The worker
stamps each pushed group with the policy version its rows were requested under, so `take_next` gives the staleness
of every row at the point it trains (`max_staleness`'s contract is checked there, `docs/async.md`).
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Iterable

__all__ = ["TrainedGroups"]


class TrainedGroups:
    """The settled groups (see the module docstring), starting from a checkpoint's position."""

    def __init__(self, first_untrained: int = 0, trained_after: Iterable[int] = ()):
        self.first_untrained = first_untrained
        self.trained_after = {group for group in trained_after if group > first_untrained}
        self._advance()
        self.expected: dict[int, int] = {}  # group -> rows pushed, for groups not settled yet
        self.counted: Counter[int] = Counter()  # group -> rows trained or dropped, for groups not settled yet
        self.collated: deque[Counter[int]] = deque()  # rows per group of each collated micro-batch, oldest first
        self.requested: dict[int, int] = {}  # group -> the oldest policy version its pushed rows were requested under
        self.settled_since: list[int] = []  # settled since the last `take_settled`
        self.settled_here = 0  # settled in this run
        self._lock = threading.Lock()

    # -- the worker ----------------------------------------------------------------------------

    def expect(self, group: int, rows: int, version: int | None = None) -> None:
        """The worker pushed `rows` rows of `group` (0: dropped whole, settled at once), requested under policy
        `version` at the oldest."""
        with self._lock:
            self.expected[group] = rows
            if version is not None and rows:
                self.requested[group] = version
            self._settle_if_complete(group)

    def discard(self, group: int) -> None:
        """One row of `group` will never reach the loss (dropped from the queue)."""
        with self._lock:
            self.counted[group] += 1
            self._settle_if_complete(group)

    # -- TRL's trainer -------------------------------------------------------------------------

    def update(self, *micro_batches: Iterable[int]) -> None:
        """The collator's call: the group id of each row of a collated micro-batch (not trained yet)."""
        with self._lock:
            self.collated.append(Counter(group for rows in micro_batches for group in rows))

    def take_next(self, live_version: int = 0) -> list[int]:
        """The oldest collated micro-batch is being trained under policy `live_version`: its rows count. Returns
        each trained row's staleness (`live_version` minus the version it was requested under; rows of a group
        pushed without a version are left out)."""
        with self._lock:
            if not self.collated:
                return []
            staleness = []
            for group, rows in self.collated.popleft().items():
                if group in self.requested:
                    staleness += [live_version - self.requested[group]] * rows
                self.counted[group] += rows
                self._settle_if_complete(group)
            return staleness

    def __len__(self) -> int:
        """Groups settled in this run (TRL adds the count before the resume for its epoch stop)."""
        return self.settled_here

    def __contains__(self, group: int) -> bool:
        with self._lock:
            return group < self.first_untrained or group in self.trained_after

    # -- checkpoints ---------------------------------------------------------------------------

    def take_settled(self) -> tuple[list[int], dict[str, int | list[int]]]:
        """The groups settled since the last call (ascending), and the position that includes exactly them."""
        with self._lock:
            settled, self.settled_since = sorted(self.settled_since), []
            return settled, self._position()

    def position(self) -> dict[str, int | list[int]]:
        """`first_untrained` and the settled groups after it (what a checkpoint stores)."""
        with self._lock:
            return self._position()

    # -- internals -----------------------------------------------------------------------------

    def _position(self) -> dict[str, int | list[int]]:
        return {"first_untrained": self.first_untrained, "trained_after": sorted(self.trained_after)}

    def _settle_if_complete(self, group: int) -> None:
        expected = self.expected.get(group)
        if expected is None or self.counted[group] < expected:
            return
        del self.expected[group], self.counted[group]
        self.requested.pop(group, None)
        self.trained_after.add(group)
        self._advance()
        self.settled_since.append(group)
        self.settled_here += 1

    def _advance(self) -> None:
        """Fold the settled groups that continue the prefix into it."""
        while self.first_untrained in self.trained_after:
            self.trained_after.remove(self.first_untrained)
            self.first_untrained += 1
