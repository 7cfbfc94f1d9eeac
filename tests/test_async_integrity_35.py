"""Issue 35, items 3 and 4: a kept group reaches the loss whole or not at all once it is queued (whatever versions its
rows come from), and a `token_budget` that a sample could exceed is refused before training."""

from __future__ import annotations

import queue
from collections import defaultdict

import pytest
from refusals import names, refusal
from test_async import async_config
from test_async_worker import Recorder, drain, tiny, worker_for  # noqa: F401 (tiny: the module-scoped model)
from trl.experimental.async_grpo.async_grpo_trainer import RolloutQueueDataset, _reduce_metric

from trl_ada.memory import prompt_key

REFILLED = {0: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0] + [0.0] * 24}
"""The issue's prompt: 1000 from the first window, then 1... from the refill (the pool 10001 exits)."""


def refilled_group(tmp_path, tiny):  # noqa: F811
    """The issue's example: n = 4, streaming_window = 4, max_staleness = 2 (trained at most 2 versions after it was
    requested: pushed or read at most 1 behind, `trainable_age`), one prompt. The first window is
    requested under version 0, the refill under version 1; the group is pushed under version 1 with kept rows of
    versions 0, 0, 0, 1 (two positives, two negatives)."""
    worker = worker_for(
        tmp_path,
        tiny,
        [{"prompt": "hello"}],
        max_staleness=2,
        streaming_window=4,
        max_prompts_in_flight=1,
        pass_rate_memory=True,
    )
    server, active = Recorder(), {}
    worker._admit(active, server)
    worker.update_model_version(1)
    worker._use(server.answer(REFILLED), active, server)  # 1000 under version 0: the refill goes out under version 1
    worker._use(server.answer(REFILLED), active, server)  # 1 under version 1: the pool 10001 exits
    assert active == {} and worker.rollout_buffer.qsize() == 4
    return worker


# -- item 3: a group goes stale in the queue whole --------------------------------------------------------------------


def test_a_refilled_group_that_goes_stale_in_the_queue_is_dropped_whole_and_settles(tmp_path, tiny):  # noqa: F811
    """After one more sync the group's oldest rows are two versions behind: none of its rows trains (not the lone
    version-1 positive), the group settles, and its visit (2 positives, 3 negatives: 10001) reaches the pass-rate
    memory."""
    worker = refilled_group(tmp_path, tiny)
    worker.update_model_version(2)

    with pytest.raises(queue.Empty):
        worker.rollout_buffer.get_nowait()
    key = "reinforce_ada/async/dropped_stale_in_queue_total"
    pushed = [worker.metrics_queue.get_nowait() for _ in range(worker.metrics_queue.qsize())]
    assert _reduce_metric(key, [m[key] for m in pushed if key in m]) == 4  # as TRL logs it: the 4 rows dropped

    settled, position = worker.trained.take_settled()
    assert settled == [0] and position == {"first_untrained": 1, "trained_after": []}
    worker.commit(settled)
    alpha, beta, _ = worker.memory.posterior([prompt_key("hello")])
    prior_alpha, prior_beta = worker.settings.plan.memory.prior
    assert (alpha[0] - prior_alpha, beta[0] - prior_beta) == pytest.approx((2.0, 3.0))


def test_a_fresh_refilled_group_trains_whole_with_both_signs(tmp_path, tiny):  # noqa: F811
    pushed = drain(refilled_group(tmp_path, tiny))
    assert [s.group_id for s in pushed] == [0] * 4
    advantages = [s.advantage for s in pushed]
    assert sum(a > 0 for a in advantages) == 2 and sum(a < 0 for a in advantages) == 2


def queue_ran_dry(stale_after_s: float) -> None:
    """TRL's reader calls its health check when the queue stays empty: here, no row is coming any more."""
    raise queue.Empty


def test_a_group_let_through_keeps_its_rows_across_a_sync_in_trls_reader(tmp_path, tiny):  # noqa: F811
    """TRL's reader takes two rows of the group under version 1, then a weight sync makes version 2 live before it
    takes the other two: the group was let through, so all four rows reach it (not three of them, or one)."""
    worker = refilled_group(tmp_path, tiny)
    reader = RolloutQueueDataset(
        rollout_queue=worker.rollout_buffer,
        model_version_fn=lambda: worker.model_version,
        check_health_fn=queue_ran_dry,
        stale_after_s=60,
        metrics=defaultdict(list),
        max_staleness=worker.settings.max_staleness,
        poll_interval_s=0.05,
    )
    rows = iter(reader)
    read = [next(rows), next(rows)]
    worker.update_model_version(2)
    read += [next(rows), next(rows)]

    assert [row["group_id"] for row in read] == [0] * 4
    advantages = [row["advantage"] for row in read]
    assert sum(a > 0 for a in advantages) == 2 and sum(a < 0 for a in advantages) == 2
    assert worker.rollout_buffer.qsize() == 0


# -- item 4: a token budget a sample could exceed -----------------------------------------------------------------


LONG_PROMPT = "one two three four five six seven eight nine ten " * 3


def test_a_token_budget_that_a_sample_could_exceed_is_refused_before_the_model_loads(tmp_path, tiny, monkeypatch):  # noqa: F811
    """TRL's batcher drops a sample longer than `token_budget` without telling the record of trained groups: its
    group would never settle. Refused at construction, naming the option, its value and the budget that fits."""
    from trl_ada.async_grpo import AsyncReinforceAdaTrainer
    from trl_ada.async_grpo import trainer as async_trainer

    class Built(Exception):
        """Raised by the rollout worker, built before the model loads: the check has passed."""

    def built(*args, **kwargs):
        raise Built

    model_dir, tokenizer = tiny
    monkeypatch.setattr(async_trainer, "AdaptiveRolloutWorker", built)
    dataset = [{"prompt": "hi"}, {"prompt": LONG_PROMPT}]
    prompt_tokens = len(tokenizer(LONG_PROMPT, add_special_tokens=False)["input_ids"])
    reward = [lambda completions, **_: [0.0] * len(completions)]

    def build(token_budget):
        args = async_config(tmp_path, token_budget=token_budget, max_completion_length=4)
        AsyncReinforceAdaTrainer(model_dir, reward, args=args, train_dataset=dataset, processing_class=tokenizer)

    with pytest.raises(ValueError) as refused:
        build(prompt_tokens + 3)
    message = str(refused.value)
    assert f"token_budget={prompt_tokens + 3}" in message and str(prompt_tokens + 4) in message
    assert "\n" not in message
    for fits in (prompt_tokens + 4, 0, None):
        with pytest.raises(Built):
            build(fits)


def test_a_token_budget_no_larger_than_the_completion_is_refused_without_counting_prompts(tmp_path, tiny):  # noqa: F811
    from trl_ada.async_grpo.trainer import check_token_budget

    args = async_config(tmp_path, token_budget=4, max_completion_length=4)
    with pytest.raises(ValueError, match="token_budget=4"):
        check_token_budget(args, [{"prompt": "hi"}], tiny[1])
    check_token_budget(async_config(tmp_path, token_budget=64, max_completion_length=4), [{"prompt": "hi"}], tiny[1])


def test_the_token_budget_is_checked_against_a_datasets_prompt_column(tmp_path, tiny):  # noqa: F811
    from datasets import Dataset

    from trl_ada.async_grpo.trainer import check_token_budget

    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": LONG_PROMPT}]]})
    args = async_config(tmp_path, token_budget=16, max_completion_length=4)
    refused = refusal(check_token_budget, args, dataset, tiny[1])
    names(refused, "token_budget=16", "train_dataset row 0", "max_completion_length=4", "token_budget to at least")


@pytest.mark.parametrize(("micro_batch_rows", "trains"), [(4, False), (8, True), (0, False)])
def test_a_group_is_judged_by_the_staleness_its_last_row_will_train_at(tmp_path, tiny, micro_batch_rows, trains):  # noqa: F811
    """max_staleness=2, live version 1: a group of 4 rows requested under version 0 is a version old when read.
    After 2 rows handed, its rows cross into the next micro-batch of 4 (a sync can come before its last rows train:
    they would train 3 versions old), and are dropped whole; in micro-batches of 8 they do not cross and train;
    under a token budget (rows per micro-batch unknown) a group of more than one row counts as crossing."""
    from types import SimpleNamespace

    from trl_ada.async_grpo.worker import RolloutQueue

    worker = worker_for(tmp_path, tiny, [{"prompt": "hello"}], max_staleness=2)
    rows = RolloutQueue(worker, micro_batch_rows=micro_batch_rows)
    worker.update_model_version(1)
    worker.trained.expect(0, 2, version=1)
    worker.trained.expect(1, 4, version=0)
    for group, version, count in ((0, 1, 2), (1, 0, 4)):
        for _ in range(count):
            rows.put(SimpleNamespace(group_id=group, model_version=version))
    read = [rows.get_nowait().group_id for _ in range(2)]
    assert read == [0, 0]
    if trains:
        assert [rows.get_nowait().group_id for _ in range(4)] == [1] * 4
    else:
        with pytest.raises(queue.Empty):
            rows.get_nowait()
        assert 1 in worker.trained  # dropped whole: settled
