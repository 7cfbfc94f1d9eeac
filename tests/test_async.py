"""The asynchronous trainer without vLLM: the worker against a scripted server, the bad configs, the full
`AsyncGRPOTrainer` loop on CPU, checkpoints and resume, and the CPU tree attention (the per-prompt core:
`test_async_rollout.py`)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import time

import numpy as np
import pytest
import torch
from refusals import names, refusal
from streaming_fake import ScriptedCompletions, scripted_completion
from test_async_rollout import feed
from transformers import AutoModelForCausalLM, AutoTokenizer

from trl_ada import _trl
from trl_ada.async_grpo import AdaptiveRolloutWorker, AsyncReinforceAdaConfig, AsyncReinforceAdaTrainer, PromptRollout
from trl_ada.async_grpo.trainer import STATE_FILE, _check_reward_funcs, _worker_settings, queue_bound, queue_steps
from trl_ada.async_grpo.worker import READ_AHEAD, _Prompt, wait_for_server
from trl_ada.checkpoint_state import MEMORY_FILE
from trl_ada.memory import PassRateMemory, prompt_key
from trl_ada.plan import SamplingPlan
from trl_ada.rewards import format_reward, math_final_reward, math_reward
from trl_ada.run_dir import is_complete
from trl_ada.schedules.est import est_allocation
from trl_ada.toy import build_tiny_model, make_toy_dataset
from trl_ada.trainer import new_memory


def test_the_queue_holds_at_most_the_window():
    assert queue_bound(1024, queue_window=32) == 32
    assert queue_bound(16, queue_window=32) == 16
    assert queue_bound(0, queue_window=32) == 32


@pytest.mark.parametrize("max_staleness", [3, 4, 7])
def test_a_group_queued_a_version_old_is_still_fresh_when_it_trains(max_staleness):
    """It ages a version per queued step ahead of it and one more between its read and its training: the bound is
    the longest queue that keeps it trainable."""
    assert 1 + queue_steps(max_staleness) + READ_AHEAD <= max_staleness
    assert 1 + queue_steps(max_staleness) + 1 + READ_AHEAD > max_staleness  # one step more and it would be dropped


@pytest.mark.parametrize("max_staleness", [1, 2])
def test_the_queue_always_holds_a_step(max_staleness):
    assert queue_steps(max_staleness) == 1


@pytest.mark.parametrize(("max_staleness", "queue_maxsize", "queued"), [(2, 0, 8), (4, 0, 16), (4, 12, 12), (1, 0, 8)])
def test_the_worker_queues_the_samples_of_queue_steps(tmp_path, tiny, max_staleness, queue_maxsize, queued):
    args = async_config(tmp_path, max_staleness=max_staleness, queue_maxsize=queue_maxsize)  # 8 samples a step
    assert _worker_settings(args, tiny[0]).queue_maxsize == queued


# -- the config --------------------------------------------------------------------------------------


def async_config(tmp_path, **fields) -> AsyncReinforceAdaConfig:
    run = dict(bf16=False, use_cpu=True, max_steps=3, per_device_train_batch_size=8, token_budget=0, report_to=[])
    run.update(dtype="float32", learning_rate=1e-2, max_completion_length=4, logging_steps=1, save_strategy="no")
    return AsyncReinforceAdaConfig(output_dir=str(tmp_path / "out"), **{**run, **fields})


def test_presets_resolve_to_streaming_or_est(tmp_path):
    assert async_config(tmp_path).sampling_plan.generation_schedule == "streaming"
    est = async_config(tmp_path, sampling="est").sampling_plan
    assert (est.generation_schedule, est.memory.enabled, est.objective.function) == ("est", True, "log")
    assert async_config(tmp_path, sampling="pos").sampling_plan.section.exit_rule == "pos"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"prompt_oversampling": 2.0}, "prompt_oversampling=2.0: .*the asynchronous trainer"),
        ({"sampling": "dapo"}, "sampling='dapo' sets prompt_oversampling"),
        ({"sample_budget": 8.0}, "sample_budget=8.0: .*Remove sample_budget"),
        ({"generation_schedule": "rounds"}, "generation_schedule='rounds': the asynchronous trainer runs"),
        ({"vllm_mode": "colocate"}, "vllm_mode='colocate' is not supported"),
        ({"max_staleness": -1}, "max_staleness=-1"),
        ({"max_staleness": 0}, "max_staleness=0: must be in [1, inf"),
        ({"queue_maxsize": "5"}, "queue_maxsize='5'.*write queue_maxsize=5"),
        ({"queue_maxsize": None}, "queue_maxsize=None"),
        ({"queue_maxsize": float("nan")}, "queue_maxsize=nan"),
        ({"queue_maxsize": 5.5}, "queue_maxsize=5.5"),
        ({"queue_maxsize": True}, "queue_maxsize=True: must be an integer, not a boolean"),
        ({"queue_maxsize": -1}, "queue_maxsize=-1: must be in [0, inf"),
        ({"weight_sync_steps": 0}, "weight_sync_steps=0: must be in [1, inf"),
        ({"weight_sync_steps": -1}, "weight_sync_steps=-1"),
        ({"streaming_window": 2, "streaming_chunk": 3}, "streaming_window=2: completions of a prompt in flight"),
        ({"scale_rewards": "batch"}, "scale_rewards='batch'"),
        ({"max_prompts_in_flight": 0}, "max_prompts_in_flight=0"),
        ({"reward_timeout": 0}, "reward_timeout=0"),
        ({"exit_rule": "nope"}, "nope"),
    ],
)
def test_options_the_async_path_cannot_honour_are_refused_at_construction(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        async_config(tmp_path, **fields)


def test_registered_reward_names_resolve_as_in_the_synchronous_trainer():
    assert _check_reward_funcs(["math_final", "format"]) == [math_final_reward, format_reward]
    assert _check_reward_funcs("trl_ada.rewards:math_reward") == [math_reward]
    names(refusal(_check_reward_funcs, "some/reward-model"), "'some/reward-model'", "asynchronous", "callables")


# -- the worker against a scripted server -------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model_dir = build_tiny_model(tmp_path_factory.mktemp("model"), hidden_size=64)
    return str(model_dir), AutoTokenizer.from_pretrained(model_dir)


def parity_reward(completion_ids, **kwargs):
    """1 when a completion's first token is even: a function of the completion only."""
    return [float(ids[0] % 2 == 0) for ids in completion_ids]


def scripted_worker(tmp_path, tiny, server, reward=parity_reward, **fields) -> AdaptiveRolloutWorker:
    """A worker on the toy dataset (8 prompts) whose connection is the scripted `server`."""
    model_dir, tokenizer = tiny
    args = async_config(tmp_path, **fields)
    return AdaptiveRolloutWorker(
        _worker_settings(args, model_dir),
        make_toy_dataset(8),
        [reward],
        tokenizer,
        memory=new_memory(args.sampling_plan),
        connect=lambda settings: server,
    )


def run_worker(tmp_path, tiny, groups: int, reward=parity_reward, **fields):
    server = ScriptedCompletions(len(tiny[1]), max_length=4, seed=1)
    worker = scripted_worker(tmp_path, tiny, server, reward, **fields)
    dataset = worker.dataset
    worker.start()
    samples = []
    try:
        while len({s.group_id for s in samples}) < groups or any(
            sum(s.group_id == g for s in samples) < 4 for g in {s.group_id for s in samples}
        ):
            worker.check_health(60)
            try:
                samples.append(worker.rollout_buffer.get(timeout=0.2))
            except Exception:
                continue
    finally:
        worker.stop()
    return worker, server, dataset, samples


def replay(tokenizer, dataset, group: int, plan: SamplingPlan) -> PromptRollout:
    """What the worker must have computed for `group`: its scripted completions fed in request order."""
    row = dataset[group % len(dataset)]
    prompt_ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, return_dict=False)
    stream = parity_reward([scripted_completion(prompt_ids, i, len(tokenizer), 4) for i in range(plan.section.cap)])
    rollout = PromptRollout(group, plan, 0)
    feed(rollout, stream)
    return rollout


def test_worker_pushes_groups_of_n_with_pool_advantages_whatever_the_arrival_order(tmp_path, tiny):
    worker, server, dataset, samples = run_worker(tmp_path, tiny, groups=6)
    by_group: dict[int, list] = {}
    for sample in samples:
        by_group.setdefault(sample.group_id, []).append(sample)
    for group, rows in by_group.items():
        if len(rows) < 4:
            continue  # still being pushed when the worker stopped
        assert len(rows) == 4
        expected = replay(tiny[1], dataset, group, worker.settings.plan)
        np.testing.assert_allclose([s.advantage for s in rows], expected.advantages(), atol=1e-12)
        assert [s.metrics["reward"] for s in rows] == [expected.pool[i] for i in expected.kept()]
        for sample in rows:
            prompt_len = int((sample.completion_mask == 0).sum())
            assert sample.input_ids.shape == sample.completion_mask.shape == sample.old_log_probs.shape
            assert sample.completion_mask[prompt_len:].all() and (sample.old_log_probs[:prompt_len] == 0).all()
            assert sample.model_version == 0
    assert server.cancelled > 0  # requests of prompts that exited early were cancelled
    assert server.closed  # stop() closes the connection: nothing left in flight


def test_a_reward_function_that_raises_stops_the_worker_with_its_name(tmp_path, tiny):
    def broken(**kwargs):
        raise ZeroDivisionError("scripted failure")

    with pytest.raises(RuntimeError) as stopped:
        run_worker(tmp_path, tiny, groups=1, reward=broken)
    names(str(stopped.value), "'broken'", "ZeroDivisionError: scripted failure")


def test_a_reward_function_that_hangs_is_bounded_by_reward_timeout(tmp_path, tiny):
    def slow(completion_ids, **kwargs):
        time.sleep(5)
        return [0.0] * len(completion_ids)

    with pytest.raises(RuntimeError) as stopped:
        run_worker(tmp_path, tiny, groups=1, reward=slow, reward_timeout=0.3)
    names(str(stopped.value), "'slow'", "reward_timeout=0.3 s", "raise reward_timeout")


def test_a_request_that_fails_past_its_retries_stops_the_worker_with_the_server_named(tmp_path, tiny):
    server = ScriptedCompletions(len(tiny[1]), max_length=4, seed=1, fail_after=5)
    worker = scripted_worker(tmp_path, tiny, server)
    worker.start()
    try:
        with pytest.raises(RuntimeError) as stopped:
            for _ in range(200):
                worker.check_health(60)
                time.sleep(0.05)
        names(str(stopped.value), "stopped: RuntimeError: ", "http://scripted")  # the stand-in server's own error
    finally:
        worker.stop()
    assert server.closed  # the requests still in flight were cancelled


def test_no_server_at_start_names_the_url_and_the_option():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RuntimeError) as refused:
        wait_for_server(f"http://127.0.0.1:{port}", 0.5)
    names(str(refused.value), f"http://127.0.0.1:{port}/health", "vllm_server_timeout=0.5 s", "`vllm serve MODEL`")


def test_a_resumed_worker_skips_the_groups_trained_before_the_checkpoint(tmp_path, tiny):
    model_dir, tokenizer = tiny
    args = async_config(tmp_path)
    worker = AdaptiveRolloutWorker(_worker_settings(args, model_dir), make_toy_dataset(8), [parity_reward], tokenizer)
    worker.resume_at(2, [4, 5])
    assert [worker._next_group() for _ in range(4)] == [2, 3, 6, 7]


def test_est_allocates_each_wave_from_the_memory(tmp_path, tiny):
    server = ScriptedCompletions(len(tiny[1]), max_length=4, seed=3)
    worker = scripted_worker(tmp_path, tiny, server, sampling="est")  # 8 rows per step, n = 4: waves of 2 prompts
    dataset, plan = worker.dataset, worker.settings.plan
    worker.memory.update(np.array([prompt_key(dataset[0]["prompt"])], dtype=np.uint64), [8], [0])  # p̂ = 9/10
    worker.start()
    sizes: dict[int, int] = {}
    try:
        while sizes.get(0, 0) + sizes.get(1, 0) < 8 or sizes.get(2, 0) + sizes.get(3, 0) < 8:
            worker.check_health(60)
            with contextlib.suppress(queue.Empty):
                sample = worker.rollout_buffer.get(timeout=0.2)
                sizes[sample.group_id] = sizes.get(sample.group_id, 0) + 1
    finally:
        worker.stop()
    # 1/sqrt(p̂ + 0.05) at p̂ = 0.9 and at the prior's 0.5: 8 samples split 3.46 / 4.54, rounded to 3 / 5
    np.testing.assert_array_equal(est_allocation([0.9, 0.5], plan), [3, 5])
    assert (sizes[0], sizes[1]) == (3, 5)
    assert (sizes[2], sizes[3]) == (4, 4)  # the next wave: two unseen prompts, 4 each


def test_a_group_whose_kept_samples_are_stale_is_dropped_whole(tmp_path, tiny):
    model_dir, tokenizer = tiny
    dataset = make_toy_dataset(8)

    def worker_for(max_staleness: int) -> AdaptiveRolloutWorker:
        args = async_config(tmp_path, max_staleness=max_staleness)
        return AdaptiveRolloutWorker(_worker_settings(args, model_dir), dataset, [parity_reward], tokenizer)

    def sampled_prompt(worker: AdaptiveRolloutWorker) -> _Prompt:
        rollout = PromptRollout(0, worker.settings.plan, version=0)
        prompt = _Prompt(rollout, dataset[0], [5, 6, 7])
        feed(rollout, [1.0, 0.0] * 16)  # requests of later windows are stamped with version 1
        for index in range(len(rollout.pool)):
            prompt.completion_ids[index], prompt.logprobs[index] = [9, 9], [-0.5, -0.5]
            prompt.texts[index] = "xx"
            prompt.rewards_per_func[index] = [rollout.pool[index]]
        return prompt

    strict = worker_for(max_staleness=1)  # trained at most 1 version after its request: pushed under the live one
    strict.update_model_version(1)
    strict._finish(sampled_prompt(strict))
    assert strict.rollout_buffer.qsize() == 0  # the balance pool [1, 0, 1, 0] came from the first window, under v0
    metrics = [strict.metrics_queue.get_nowait() for _ in range(strict.metrics_queue.qsize())]
    assert sum(m.get("reinforce_ada/async/dropped_stale_groups", 0) for m in metrics) == 1
    assert 0 in strict.trained  # dropped whole: settled, a resume does not sample it again

    lenient = worker_for(max_staleness=2)
    lenient.update_model_version(1)
    prompt = sampled_prompt(lenient)
    lenient._finish(prompt)
    pushed = [lenient.rollout_buffer.get_nowait() for _ in range(4)]
    assert [s.model_version for s in pushed] == [0, 0, 0, 0]
    np.testing.assert_allclose([s.advantage for s in pushed], prompt.rollout.advantages())
    assert pushed[0].old_log_probs.tolist() == [0.0, 0.0, 0.0, -0.5, -0.5]


def test_memory_learns_a_group_only_once_it_is_trained(tmp_path, tiny):
    worker, _, dataset, samples = run_worker(tmp_path, tiny, groups=2, pass_rate_memory=True)
    group = samples[0].group_id
    key = prompt_key(dataset[group % len(dataset)]["prompt"])
    assert worker.memory.visits([key])[0] == 0  # pushed, not yet trained
    worker.commit([group])
    assert worker.memory.visits([key])[0] == 1


# -- the full trainer on CPU --------------------------------------------------------------------------


class NoTransfer:
    """A weight transfer that only counts the syncs (the scripted server has no weights)."""

    def __init__(self):
        self.syncs = 0

    def init_weight_transfer(self): ...

    def pause(self): ...

    def send_weights(self, iterator):
        self.syncs += sum(1 for _ in iterator) > 0

    def resume(self): ...

    def destroy(self): ...


def train(tmp_path, tiny, resume=None, **fields):
    """One run of the trainer on the scripted server; also returns the groups settled at each step (`settled`)."""
    model_dir, tokenizer = tiny
    server, transfer = ScriptedCompletions(len(tokenizer), max_length=4, seed=2), NoTransfer()
    trainer = AsyncReinforceAdaTrainer(
        model_dir,
        reward_funcs=[parity_reward],
        args=async_config(tmp_path, **fields),
        train_dataset=make_toy_dataset(16),
        processing_class=tokenizer,
        weight_transfer=transfer,
        connect=lambda settings: server,
    )
    trainer.settled = record_settled_groups(trainer)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train(resume_from_checkpoint=resume)
    return trainer, before, transfer


def record_settled_groups(trainer) -> list[tuple[int, list[int]]]:
    """(global step, groups) each time the trainer hands settled groups to the worker's memory (`commit`)."""
    settled: list[tuple[int, list[int]]] = []
    commit = trainer.worker.commit

    def recorded(group_ids):
        settled.append((trainer.state.global_step, list(group_ids)))
        commit(group_ids)

    trainer.worker.commit = recorded
    return settled


def groups_until(settled: list[tuple[int, list[int]]], step: float) -> list[int]:
    """The groups a run settled up to (and including) `step`, in the order they settled."""
    return [group for at, groups in settled if at <= step for group in groups]


def recorded_groups(checkpoint: str) -> set[int]:
    with open(os.path.join(checkpoint, STATE_FILE)) as file:
        state = json.load(file)
    return set(range(state["first_untrained"])) | set(state["trained_after"])


@pytest.mark.slow
def test_async_trainer_trains_checkpoints_and_resumes_the_worker(tmp_path, tiny):
    trainer, before, transfer = train(tmp_path, tiny, save_strategy="steps", save_steps=2, pass_rate_memory=True)
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert len(changed) == len(before)
    assert transfer.syncs == 4  # the cold sync, then one per step
    assert _trl.check_async_joints(trainer) == []
    assert len(trainer._trained_groups) == 6  # 3 steps of 8 rows, groups of 4: not the batch collated ahead
    checkpoint = os.path.join(tmp_path, "out", "checkpoint-2")
    assert {STATE_FILE, MEMORY_FILE, "model.safetensors", "optimizer.pt"} <= set(os.listdir(checkpoint))
    assert is_complete(checkpoint)
    with open(os.path.join(checkpoint, STATE_FILE)) as file:
        state = json.load(file)
    assert state["model_version"] == 3  # the cold sync, then two steps
    assert recorded_groups(checkpoint) == set(groups_until(trainer.settled, 2))
    assert len(recorded_groups(checkpoint)) == 4  # two steps of two groups
    saved = PassRateMemory.load(os.path.join(checkpoint, MEMORY_FILE))
    assert sum(saved.visits([prompt_key(row["prompt"]) for row in make_toy_dataset(16)])) == 4  # one per group
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert all(h["sample/staleness_mean"] <= trainer.args.max_staleness for h in steps)

    # interrupted after checkpoint-2 (step 3 is lost), resumed, interrupted after checkpoint-4, resumed again
    second, _, _ = train(tmp_path, tiny, max_steps=5, save_strategy="steps", save_steps=2, resume=checkpoint)
    assert second.model_version == 7  # numbering continues: v3 at the checkpoint, the cold sync, steps 3 to 5
    third, _, _ = train(
        tmp_path,
        tiny,
        max_steps=6,
        save_strategy="steps",
        save_steps=2,
        resume=os.path.join(tmp_path, "out", "checkpoint-4"),
    )
    assert third.state.global_step == 6
    runs = [
        groups_until(trainer.settled, 2),  # what checkpoint-2 kept of the first run
        groups_until(second.settled, 4),  # what checkpoint-4 kept of the second
        groups_until(third.settled, 6),
    ]
    every = [group for run in runs for group in run]
    assert len(every) == len(set(every)) == 12  # no group trained twice, whatever run trained it
    assert recorded_groups(os.path.join(tmp_path, "out", "checkpoint-4")) == set(runs[0]) | set(runs[1])
    assert recorded_groups(os.path.join(tmp_path, "out", "checkpoint-6")) == set(every)


def test_cpu_tree_attention_matches_the_plain_forward(tiny):
    from transformers import AttentionInterface
    from trl.experimental.async_grpo.packing import TREE_ATTENTION, TreeRow

    from trl_ada.async_grpo.cpu_attention import tree_attention_cpu

    AttentionInterface.register(TREE_ATTENTION, tree_attention_cpu)
    model = AutoModelForCausalLM.from_pretrained(tiny[0], dtype=torch.float32).eval()
    samples = [[5, 6, 7, 8, 9], [5, 6, 7, 10, 11, 12], [13, 14]]  # two share a prefix
    row = TreeRow()
    for ids in samples:
        row.add(
            {
                "input_ids": np.array(ids),
                "completion_mask": np.ones(len(ids), dtype=np.int64),
                "old_log_probs": np.zeros(len(ids), dtype=np.float32),
                "advantage": 0.0,
                "group_id": 0,
            }
        )
    packed = row.pack()
    model.config._attn_implementation = TREE_ATTENTION
    with torch.no_grad():
        tree_logits = model(
            input_ids=packed["input_ids"][None],
            position_ids=packed["position_ids"][None],
            tree_kv_index=packed["tree_kv_index"],
            tree_cu_seqlens_q=packed["tree_cu_seqlens_q"],
            tree_cu_seqlens_k=packed["tree_cu_seqlens_k"],
            tree_max_seqlen_q=int(packed["tree_max_seqlens"][0]),
            tree_max_seqlen_k=int(packed["tree_max_seqlens"][1]),
        ).logits[0]
        model.config._attn_implementation = "eager"
        for nodes, ids in zip(row.sample_nodes, samples, strict=True):
            plain = model(input_ids=torch.tensor([ids])).logits[0]
            order = torch.tensor([packed_position(packed, row, node) for node in nodes])
            torch.testing.assert_close(tree_logits[order], plain, atol=1e-5, rtol=1e-5)


def packed_position(packed, row, node: int) -> int:
    """A packed position holding `node`'s token at `node`'s depth (nodes that tie share their prefix, so their
    logits are equal)."""
    tokens, positions = packed["input_ids"].tolist(), packed["position_ids"].tolist()
    depth = next(d for nodes in row.sample_nodes for d, n in enumerate(nodes) if n == node)
    matches = [
        i for i, (t, p) in enumerate(zip(tokens, positions, strict=True)) if t == row.tokens[node] and p == depth
    ]
    return matches[0]


@pytest.mark.slow
@pytest.mark.parametrize("sampling", ["balance", "est"])
def test_max_staleness_holds_where_samples_train_with_the_dispatchers_read_ahead(tmp_path, tiny, sampling):
    """max_staleness=1 through TRL's real reader, batcher and accelerate's dispatcher: the dispatcher reads each
    micro-batch before the previous step's weight sync, so a row read under the live version trains a version
    later. The staleness measured at training reaches 1 (the read-ahead is there) and never exceeds the bound, also
    for Est, whose groups of several sizes cross micro-batch boundaries."""
    trainer, _, _ = train(tmp_path, tiny, max_staleness=1, max_steps=4, sampling=sampling)
    steps = [h for h in trainer.state.log_history if "loss" in h]
    at_training = [h["reinforce_ada/async/staleness_at_training_max"] for h in steps]
    assert len(at_training) == 4
    assert max(at_training) == 1 and all(value <= 1 for value in at_training)
    assert all(h["reinforce_ada/async/staleness_at_training_mean"] <= h["sample/staleness_mean"] + 1 for h in steps)


def test_a_huge_max_staleness_keeps_the_default_window_bounded(tmp_path, tiny):
    """max_staleness=10**9 admitted billions of prompts at once and hung training: the default in-flight window is
    at most IN_FLIGHT_STEPS steps of samples (8 a step here)."""
    from trl_ada.async_grpo.trainer import IN_FLIGHT_STEPS

    args = async_config(tmp_path, max_staleness=10**9)
    settings = _worker_settings(args, tiny[0])
    assert args.max_inflight_tasks == IN_FLIGHT_STEPS * 8
    assert 1 <= settings.prompts_in_flight <= IN_FLIGHT_STEPS * 8
