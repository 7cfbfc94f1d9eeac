"""`TrainedGroups`, the asynchronous trainer's record of settled groups (pure: no torch; part of `make mutation`'s fast
set): rows counted when trained, not when collated; a group settles with its last row; the record a checkpoint
stores merges the runs it resumed, stays compact, and never lists a group twice."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ada.async_grpo.trained import TrainedGroups


def test_a_micro_batch_counts_when_it_is_trained_not_when_it_is_collated():
    record = TrainedGroups()
    record.expect(0, 2)
    record.expect(1, 2)
    record.update(g for g in (0, 0, 1, 1))  # collated (TRL passes a generator)
    record.update([0])  # a stray row collated ahead: trained later
    assert 0 not in record and len(record) == 0
    record.take_next()
    assert 0 in record and 1 in record and len(record) == 2
    record.take_next()
    record.take_next()  # nothing left collated: no change
    assert record.position() == {"first_untrained": 2, "trained_after": []}


def test_a_group_whose_rows_straddle_micro_batches_settles_with_its_last_row():
    record = TrainedGroups()
    record.expect(0, 5)  # an Est group of 5 rows
    record.expect(1, 3)
    record.update([0, 0, 0, 0])
    record.update([0, 1, 1, 1])
    record.take_next()
    assert 0 not in record  # 4 of its 5 rows trained: a checkpoint now must not skip it on resume
    assert record.position() == {"first_untrained": 0, "trained_after": []}
    record.take_next()
    assert record.position() == {"first_untrained": 2, "trained_after": []}
    assert record.take_settled() == ([0, 1], {"first_untrained": 2, "trained_after": []})


def test_rows_dropped_in_the_queue_and_groups_dropped_whole_settle_too():
    record = TrainedGroups()
    record.expect(0, 0)  # dropped whole at push: nothing will ever come
    assert 0 in record
    record.expect(1, 2)
    record.discard(1)  # one row went stale in the queue
    record.update([1])
    assert 1 not in record
    record.take_next()
    assert 1 in record and len(record) == 2


def test_rows_may_be_counted_before_their_group_count_is_known():
    record = TrainedGroups()
    record.update([3, 3])
    record.take_next()
    assert 3 not in record
    record.expect(3, 2)
    assert 3 in record


def test_the_record_is_compact_and_shrinks_as_the_prefix_advances():
    record = TrainedGroups()
    for group in (1, 2, 4, 5):
        record.expect(group, 0)
    assert record.position() == {"first_untrained": 0, "trained_after": [1, 2, 4, 5]}
    record.expect(0, 0)
    assert record.position() == {"first_untrained": 3, "trained_after": [4, 5]}
    record.expect(3, 0)
    assert record.position() == {"first_untrained": 6, "trained_after": []}
    assert record.trained_after == set() and record.expected == {} and not record.counted


def test_a_resumed_record_starts_from_the_checkpoint_and_keeps_every_earlier_group():
    """The issue's chain: run 1 settles 0-3 and 5, run 2 (resumed) settles 4 and 7, run 3 resumes from run 2's
    checkpoint: its record still holds run 1's groups."""
    first = TrainedGroups()
    for group in (0, 1, 2, 3, 5):
        first.expect(group, 0)
    checkpoint = first.position()
    assert checkpoint == {"first_untrained": 4, "trained_after": [5]}
    second = TrainedGroups(**checkpoint)
    assert [g for g in range(8) if g in second] == [0, 1, 2, 3, 5]
    assert len(second) == 0  # settled in this run: none yet (TRL adds the count before the resume)
    second.expect(4, 0)
    second.expect(7, 0)
    settled, position = second.take_settled()
    assert settled == [4, 7] and len(second) == 2
    assert position == {"first_untrained": 6, "trained_after": [7]}
    third = TrainedGroups(**position)
    assert [g for g in range(9) if g in third] == [0, 1, 2, 3, 4, 5, 7]


def test_a_checkpoint_position_keeps_only_the_groups_after_its_prefix():
    assert TrainedGroups(3, [1, 4, 6]).position() == {"first_untrained": 3, "trained_after": [4, 6]}


def test_take_settled_returns_each_group_once_in_order():
    record = TrainedGroups()
    record.expect(2, 0)
    record.expect(0, 0)
    assert record.take_settled() == ([0, 2], {"first_untrained": 1, "trained_after": [2]})
    assert record.take_settled() == ([], {"first_untrained": 1, "trained_after": [2]})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=12), st.integers(1, 5), st.integers(0, 10**6))
def test_every_group_settles_exactly_once_whatever_the_micro_batches(sizes, micro_batch, seed):
    """Rows of groups pushed in order, some dropped in the queue, cut into micro-batches of any size: every group
    settles once, and only when its last row is trained or dropped."""
    rng = random.Random(seed)
    record = TrainedGroups()
    rows = []
    for group, size in enumerate(sizes):
        record.expect(group, size)
        rows += [group] * size
    remaining = {group: size for group, size in enumerate(sizes)}
    settled: list[int] = []
    while rows:
        batch, rows = rows[:micro_batch], rows[micro_batch:]
        kept = []
        for group in batch:
            if rng.random() < 0.2:
                record.discard(group)
                remaining[group] -= 1
            else:
                kept.append(group)
        record.update(kept)
        record.take_next()
        for group in kept:
            remaining[group] -= 1
        new, _ = record.take_settled()
        assert all(remaining[group] == 0 for group in new)
        assert all(remaining[group] > 0 for group in range(len(sizes)) if group not in record)
        settled += new
    assert sorted(settled) == list(range(len(sizes))) == sorted(set(settled))
    assert record.position() == {"first_untrained": len(sizes), "trained_after": []}


def test_the_worker_and_the_trainer_may_report_from_two_threads():
    record = TrainedGroups()

    def worker():
        for group in range(500):
            record.expect(group, 1)

    thread = threading.Thread(target=worker)
    thread.start()
    for group in range(500):
        record.update([group])
        record.take_next()
    thread.join()
    assert record.position() == {"first_untrained": 500, "trained_after": []}
    assert len(record) == 500


@pytest.mark.parametrize("group", [0, 7])
def test_nothing_is_settled_before_the_worker_reports(group):
    assert group not in TrainedGroups()


def test_take_next_gives_each_trained_rows_staleness_against_the_policy_that_trains_it():
    record = TrainedGroups()
    record.expect(0, 2, version=3)
    record.expect(1, 1, version=5)
    record.expect(2, 1)  # pushed without a version: not measured
    record.update([0, 0, 1, 2])
    assert record.take_next(live_version=6) == [3, 3, 1]
    assert record.requested == {}  # settled groups leave the table
    assert record.take_next(live_version=7) == []  # nothing collated
