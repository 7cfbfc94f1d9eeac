"""`AdaptiveRolloutWorker` driven result by result (`_admit`, `_use`) against a recording connection: what it pushes
under staleness, how a wave is weighted, which model its requests name, how it encodes prompts, and what it says
about rewards that cannot train."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from refusals import names
from test_async import async_config, parity_reward, run_worker
from transformers import AutoTokenizer

from trl_ada.async_grpo import AdaptiveRolloutWorker
from trl_ada.async_grpo.trainer import _worker_settings
from trl_ada.checks import RewardError
from trl_ada.memory import prompt_key
from trl_ada.server_requests import CompletionResult
from trl_ada.toy import build_tiny_model
from trl_ada.trainer import new_memory

POSITIVE, NEGATIVE = 11, 12
"""First tokens of a right and a wrong completion for `first_token_is_11`."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model_dir = build_tiny_model(tmp_path_factory.mktemp("model"), hidden_size=64)
    return str(model_dir), AutoTokenizer.from_pretrained(model_dir)


def first_token_is_11(completion_ids, **kwargs):
    return [float(ids[0] == POSITIVE) for ids in completion_ids]


class Recorder:
    """A connection that records every request and answers the pending ones with scripted completions."""

    def __init__(self):
        self.pending: dict = {}
        self.models: dict = {}  # request key -> the model it named (None: the served one)
        self.cancelled: list = []

    def submit(self, key, prompt_ids, n, model=None):
        self.pending[key] = n
        self.models[key] = model

    def cancel(self, key):
        self.pending.pop(key, None)
        self.cancelled.append(key)

    def answer(self, streams: dict[int, list[float]], groups=None) -> list[CompletionResult]:
        """Answer the pending requests (of `groups` only, when given): pool index i of group g is right when
        `streams[g][i]` is 1."""
        keys = [key for key in self.pending if groups is None or key[0] in groups]
        results = []
        for key in keys:
            group, request = key
            ids = [[POSITIVE if streams[group][request.first + k] else NEGATIVE] for k in range(self.pending.pop(key))]
            results.append(CompletionResult(key, ids, [[-1.0]] * len(ids), attempts=1))
        return results


def worker_for(tmp_path, tiny, dataset, reward=first_token_is_11, **fields) -> AdaptiveRolloutWorker:
    model_dir, tokenizer = tiny
    args = async_config(tmp_path, **fields)
    return AdaptiveRolloutWorker(
        _worker_settings(args, model_dir), dataset, [reward], tokenizer, memory=new_memory(args.sampling_plan)
    )


def drain(worker: AdaptiveRolloutWorker) -> list:
    return [worker.rollout_buffer.get_nowait() for _ in range(worker.rollout_buffer.qsize())]


def metric_total(worker: AdaptiveRolloutWorker, name: str) -> float:
    metrics = [worker.metrics_queue.get_nowait() for _ in range(worker.metrics_queue.qsize())]
    return sum(m.get(name, 0.0) for m in metrics)


# -- staleness (items 3 and 5 of issue 29) --------------------------------------------------------------------------


def test_the_issues_stale_example_drops_the_group_whole_and_its_visit_reaches_the_memory(tmp_path, tiny):
    """n = 4, max_staleness = 1 (pushed only from samples of the live version): 0000 requested under version 0, then
    1100 under version 1. The kept group would be
    two stale negatives and two fresh positives, and only the positives would train (+0.667 each, a one-sided
    update). Two fresh samples cannot form a group: nothing is pushed, the drop is counted, and the visit (2
    positives, 4 negatives) still reaches the pass-rate memory once the group settles."""
    dataset = [{"prompt": "hello"}]
    worker = worker_for(
        tmp_path, tiny, dataset, max_staleness=1, streaming_window=4, max_prompts_in_flight=1, pass_rate_memory=True
    )
    server, active = Recorder(), {}
    stream = {0: [0.0] * 4 + [1.0, 1.0, 0.0, 0.0] + [0.0] * 24}
    worker._admit(active, server)
    worker.update_model_version(1)
    worker._use(server.answer(stream), active, server)  # 0000: the window refills under version 1
    worker._use(server.answer(stream), active, server)  # 11..: the pool 000011 meets the exit rule

    assert active == {}
    assert drain(worker) == []
    assert metric_total(worker, "reinforce_ada/async/dropped_stale_groups") == 1.0
    settled, position = worker.trained.take_settled()
    assert settled == [0] and position == {"first_untrained": 1, "trained_after": []}
    worker.commit(settled)
    assert worker._visits == {}
    key = prompt_key("hello")
    alpha, beta, _ = worker.memory.posterior([key])
    prior_alpha, prior_beta = worker.settings.plan.memory.prior
    assert (alpha[0] - prior_alpha, beta[0] - prior_beta) == pytest.approx((2.0, 4.0))


def test_a_group_is_pushed_whole_from_its_fresh_samples(tmp_path, tiny):
    """0000 under version 0, then 0011 under version 1: the fresh 0, 0, 1, 1 form the group, with the pool's
    baseline 2/8."""
    worker = worker_for(
        tmp_path, tiny, [{"prompt": "hello"}], max_staleness=1, streaming_window=4, max_prompts_in_flight=1
    )
    server, active = Recorder(), {}
    stream = {0: [0.0] * 4 + [0.0, 0.0, 1.0, 1.0] + [0.0] * 24}
    worker._admit(active, server)
    worker.update_model_version(1)
    worker._use(server.answer(stream), active, server)
    worker._use(server.answer(stream), active, server)
    pushed = drain(worker)
    assert [s.model_version for s in pushed] == [1, 1, 1, 1]
    assert [s.advantage for s in pushed] == pytest.approx([-0.25, -0.25, 0.75, 0.75])
    assert worker.trained.expected == {0: 4}  # settles once its four rows are trained


# -- objective weights (item 4) -------------------------------------------------------------------------------------


def test_a_wave_is_weighted_as_a_synchronous_step(tmp_path, tiny):
    """objective="log", 16 rows per step, n = 4: waves of 4 groups. Groups 0 and 2 have the same pool (p = 0.25),
    group 1 never solves (p = 0, no signal), group 3 has p = 0.5. Group 2 finishes last, after group 1: weighted by
    the recent groups' raw mean it got 0.47 where group 0 got 1.0. As one wave both get 1/0.3 over the mean raw
    weight of the 12 samples with signal, (8/0.3 + 4/0.55)/12: 1.1786."""
    dataset = [{"prompt": f"prompt {i}"} for i in range(4)]
    worker = worker_for(
        tmp_path, tiny, dataset, objective="log", per_device_train_batch_size=16, max_prompts_in_flight=4
    )
    server, active = Recorder(), {}
    quarter = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 24
    streams = {0: quarter, 1: [0.0] * 32, 2: quarter, 3: [0.0, 1.0, 0.0, 1.0] + [0.0] * 28}
    worker._admit(active, server)
    while set(active) != {2}:
        worker._use(server.answer(streams, groups={0, 1, 3}), active, server)
    assert drain(worker) == []  # the wave waits for its fourth group
    worker._use(server.answer(streams), active, server)

    by_group: dict[int, list[float]] = {}
    for sample in drain(worker):
        by_group.setdefault(sample.group_id, []).append(sample.advantage)
    weight = (1 / 0.3) / ((8 / 0.3 + 4 / 0.55) / 12)
    assert by_group[0] == pytest.approx(list(np.array([-0.25, -0.25, 0.75, 0.75]) * weight))
    assert by_group[2] == pytest.approx(by_group[0])
    assert by_group[1] == [0.0] * 4
    assert metric_total(worker, "reinforce_ada/objective/weight_mean") == pytest.approx((8 / 0.3 + 4 / 0.55) / 12)


# -- the model requests name (item 2) -------------------------------------------------------------------------------


def test_requests_name_the_adapter_of_the_live_policy(tmp_path, tiny):
    """Under TRL's adapter sync each policy is the adapter `trl-policy-v{N}`: the first window names v1, the requests
    sent after the update to version 2 name v2 (and are stamped version 2); without it, the served model."""
    worker = worker_for(tmp_path, tiny, [{"prompt": "hello"}], streaming_window=4, max_prompts_in_flight=1)
    worker.lora_name = "trl-policy"
    worker.update_model_version(1)
    server, active = Recorder(), {}
    worker._admit(active, server)
    first = list(server.models)
    assert [server.models[key] for key in first] == ["trl-policy-v1"] * 4
    worker.update_model_version(2)
    stream = {0: [0.0] * 32}
    worker._use(server.answer(stream), active, server)
    later = [key for key in server.models if key not in first]
    assert [server.models[key] for key in later] == ["trl-policy-v2"] * 4
    assert active[0].rollout.versions == [1] * 4 + [2] * 4

    plain = worker_for(tmp_path, tiny, [{"prompt": "hello"}], streaming_window=4, max_prompts_in_flight=1)
    plain.update_model_version(3)
    server = Recorder()
    plain._admit({}, server)
    assert set(server.models.values()) == {None}


# -- prompts (item 6) -----------------------------------------------------------------------------------------------


def test_chat_template_kwargs_reach_the_prompt_encoding(tmp_path, tiny):
    model_dir, _ = tiny
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}"
        "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}Answer:{% endif %}"
    )
    prompt = [{"role": "user", "content": "What is 2 + 2?"}]
    args = async_config(tmp_path, chat_template_kwargs={"enable_thinking": False})
    worker = AdaptiveRolloutWorker(_worker_settings(args, model_dir), [{"prompt": prompt}], [parity_reward], tokenizer)
    expected = tokenizer.apply_chat_template(
        prompt, add_generation_prompt=True, tokenize=True, return_dict=False, enable_thinking=False
    )
    plain = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert expected != plain
    assert worker._tokenize(prompt) == list(expected)


# -- rewards (items 7 and 10) ---------------------------------------------------------------------------------------


def test_no_reward_above_the_threshold_warns_once_after_three_waves(tmp_path, tiny, caplog):
    """sampling="pos" with rewards of 0.5 each: nothing is ever positive (> 0.5), so every prompt draws its cap. As
    the synchronous trainer does after three steps, the worker warns once, after three waves of prompts (2 each)."""

    def half(completion_ids, **kwargs):
        return [0.5] * len(completion_ids)

    dataset = [{"prompt": f"prompt {i}"} for i in range(8)]
    worker = worker_for(tmp_path, tiny, dataset, reward=half, sampling="pos", max_prompts_in_flight=2)
    caplog.set_level(logging.WARNING, logger="trl_ada")
    server, active = Recorder(), {}
    streams = {group: [0.0] * 32 for group in range(16)}
    history = []  # (prompts finished, warnings so far)
    while len(worker._visits) < 8:
        worker._admit(active, server)
        worker._use(server.answer(streams), active, server)
        drain(worker)  # the trainer reads what is queued: a full queue would hold the worker
        warned = [r for r in caplog.records if r.name == "trl_ada.checks" and "positive_threshold=" in r.getMessage()]
        history.append((len(worker._visits), len(warned)))
    assert all(warned == 0 for finished, warned in history if finished < 6), history
    assert history[-1][1] == 1, history


def test_a_reward_function_returning_text_stops_the_worker_naming_it(tmp_path, tiny):
    def as_text(completion_ids, **kwargs):
        return ["1"] * len(completion_ids)

    with pytest.raises(RewardError) as refused:
        run_worker(tmp_path, tiny, groups=1, reward=as_text)
    names(str(refused.value), "'as_text'", "a str ('1')", "completion 0", "float(score)")


def test_a_reward_function_returning_too_few_rewards_stops_the_worker_naming_it(tmp_path, tiny):
    def short(completion_ids, **kwargs):
        return [1.0] * (len(completion_ids) - 1)

    with pytest.raises(RewardError) as refused:
        run_worker(tmp_path, tiny, groups=1, reward=short)
    names(str(refused.value), "'short'", "one per completion")
    returned, asked = map(int, re.search(r"(\d+) rewards for (\d+) completions", str(refused.value)).groups())
    assert returned == asked - 1
