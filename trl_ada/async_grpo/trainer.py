"""`AsyncReinforceAdaTrainer`: TRL's `AsyncGRPOTrainer` with `AdaptiveRolloutWorker` as its rollout worker."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import torch
from accelerate import PartialState
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase, TrainerCallback

from .. import _trl
from ..checkpoint_state import MEMORY_FILE
from ..checks import resolve_reward_funcs
from ..data import check_train_prompts, model_context, prompt_lengths, prompts_over, rendered_prompts
from ..run_dir import claim_run_dir, complete_checkpoint
from ..server_requests import decoding_params
from ..trainer import new_memory, restored_memory
from .config import AsyncReinforceAdaConfig
from .cpu_attention import tree_attention_cpu
from .weights import HTTPWeightTransfer
from .worker import READ_AHEAD, AdaptiveRolloutWorker, WorkerSettings, check_server, server_info, trainable_age

__all__ = ["AsyncReinforceAdaTrainer"]

IN_FLIGHT_STEPS = 16
"""At most this many optimizer steps of samples in flight by default, whatever `max_staleness` allows: more only
fills the server's queue (a staleness of 10**9 would admit billions of prompts at once)."""
STATE_FILE = "reinforce_ada_async.json"
"""The worker's data position and the policy version, written into every checkpoint (with `MEMORY_FILE`)."""


class AsyncReinforceAdaTrainer(_trl.async_joints()):
    """Reinforce-Ada with generation decoupled from training (`docs/async.md`).

    Takes what `AsyncGRPOTrainer` takes, except `rollout_worker` (always `AdaptiveRolloutWorker`), `tools` and
    `environment_factory` (single-turn text only). Without CUDA the weights reach the vLLM server through
    `HTTPWeightTransfer` unless `weight_transfer` is given; with CUDA, TRL's NCCL transfer. With `peft_config` and a
    server started with `--enable-lora`, TRL publishes each policy as an adapter (`trl-policy-v{N}`, on CPU too) and
    the worker's requests name it. `connect` builds the worker's connection to the server (default:
    `ServerCompletions` once `/health` answers; tests pass a script).
    """

    def __init__(
        self,
        model: str,
        reward_funcs: Callable | list[Callable] | None = None,
        args: AsyncReinforceAdaConfig | None = None,
        train_dataset: Any = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        callbacks: list[TrainerCallback] | None = None,
        optimizers: tuple = (None, None),
        peft_config: Any = None,
        weight_transfer: Any = None,
        connect: Callable[[WorkerSettings], Any] | None = None,
    ):
        if args is None:
            args = AsyncReinforceAdaConfig(f"{str(model).split('/')[-1]}-AsyncReinforceAda")
        if not isinstance(args, AsyncReinforceAdaConfig):
            raise TypeError(f"args must be an AsyncReinforceAdaConfig; got {type(args).__name__}.")
        args.check_fields()  # a field assigned since the config was built is checked, and trained, as given
        if not isinstance(model, str):
            raise TypeError(
                f"model must be a model id or a local path (TRL's asynchronous trainer loads it itself); got "
                f"{type(model).__name__}. Save the model with save_pretrained and pass its directory."
            )
        reward_funcs = _check_reward_funcs(reward_funcs)
        if train_dataset is None:
            raise ValueError("train_dataset is required: the rollout worker samples its prompts.")
        if processing_class is None:
            revision = (args.model_init_kwargs or {}).get("revision")
            processing_class = AutoTokenizer.from_pretrained(
                model, revision=revision, trust_remote_code=args.trust_remote_code
            )
        config = AutoConfig.from_pretrained(
            model, revision=(args.model_init_kwargs or {}).get("revision"), trust_remote_code=args.trust_remote_code
        )
        context, template_kwargs = model_context(config, processing_class), args.chat_template_kwargs
        check_train_prompts(train_dataset, processing_class, context, args.max_completion_length, template_kwargs)
        check_token_budget(args, train_dataset, processing_class)
        if peft_config is not None and weight_transfer is None:  # TRL's __init__ (or `_serves_lora`) asks the server
            check_server(_base_url(args), args.vllm_server_timeout, max_model_len=False)
        device = PartialState().device
        off_cuda = weight_transfer is None and device.type != "cuda"
        if off_cuda and not (peft_config is not None and _serves_lora(args)):
            weight_transfer = _http_weight_transfer(args)
        worker = AdaptiveRolloutWorker(
            _worker_settings(args, model),
            train_dataset,
            reward_funcs,
            processing_class,
            memory=new_memory(args.sampling_plan),
            connect=connect,
        )
        with _trl.async_trainer_on_device(device, tree_attention_cpu):
            super().__init__(
                model,
                reward_funcs=reward_funcs,
                args=args,
                train_dataset=train_dataset,
                processing_class=processing_class,
                callbacks=callbacks,
                optimizers=optimizers,
                peft_config=peft_config,
                rollout_worker=worker,
                weight_transfer=weight_transfer,
            )
        if off_cuda and weight_transfer is None and not self._lora_sync and self.accelerator.is_main_process:
            self.weight_transfer = _http_weight_transfer(args)  # TRL fell back to merged weights, over NCCL
        self.worker = worker
        worker.lora_name = self._lora_name if self._lora_sync else None
        worker.vocab_size = self.accelerator.unwrap_model(self.model).get_input_embeddings().num_embeddings
        self._trained_groups = worker.trained
        self._default_connection = connect is None
        self.add_callback(_CommitTrainedGroups(self))

    def trained_staleness(self, staleness: list[int]) -> None:
        """Log the staleness of the rows about to train, measured where `max_staleness` holds: at training."""
        if staleness:
            mean, most = sum(staleness) / len(staleness), float(max(staleness))
            _trl.log_metrics(
                self,
                {
                    "reinforce_ada/async/staleness_at_training_mean": mean,
                    "reinforce_ada/async/staleness_at_training_max": most,  # TRL reduces a `max` key by its maximum
                },
            )

    def commit_trained_groups(self) -> dict[str, Any]:
        """Pass the groups settled since the last call to the worker's pass-rate memory, in group order; returns the
        data position that includes exactly them (what a checkpoint stores)."""
        settled, position = self.worker.trained.take_settled()
        self.worker.commit(settled)
        return position

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """TRL's `train` in a claimed run directory (one run per `output_dir`, as `ReinforceAdaTrainer`).

        An absent server is reported once, naming `vllm_server_timeout`, before TRL's train-begin callback would wait
        for it in the weight transfer; another program at the address once, naming the URL and what it answered,
        before TRL's client reads its answers (`check_server`)."""
        if self._default_connection and self.accelerator.is_main_process:
            budget = self.args.token_budget
            check_server(self.worker.settings.base_url, self.args.vllm_server_timeout, max_model_len=budget is None)
        with claim_run_dir(self, resume_from_checkpoint) as checkpoint:
            return super().train(checkpoint, *args, **kwargs)

    def saving_checkpoint(self, folder: str, save: Callable[[], None]) -> None:
        """TRL's checkpoint and the worker's state, written under a saving marker (complete only with both)."""
        with complete_checkpoint(self, folder):
            save()
            if self.accelerator.is_main_process:
                self._save_worker_state(folder)

    def _save_worker_state(self, folder: str) -> None:
        """The worker's data position (every group settled in this run and the runs it resumed), the policy version
        and the pass-rate memory (which holds the visits of exactly those groups)."""
        position = self.commit_trained_groups()
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, STATE_FILE), "w") as file:
            json.dump({**position, "model_version": self.model_version}, file)
        if self.worker.memory is not None:
            self.worker.memory.save(os.path.join(folder, MEMORY_FILE))

    def resuming_worker(self, checkpoint: str | None) -> None:
        """Restore what `saving_checkpoint` wrote before the worker starts."""
        if checkpoint is None or not self.accelerator.is_main_process:
            return
        path = os.path.join(checkpoint, STATE_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path} is missing: {checkpoint} was not written by AsyncReinforceAdaTrainer, so where the rollout "
                "worker stopped is unknown. Resume from a checkpoint of this trainer, or start a new run."
            )
        with open(path) as file:
            state = json.load(file)
        worker = self.worker
        worker.resume_at(state["first_untrained"], state["trained_after"])
        self._trained_groups = worker.trained
        if worker.memory is not None:
            worker.memory = restored_memory(checkpoint, self.args.sampling_plan)
        self.set_groups_before_resume(state["first_untrained"] + len(state["trained_after"]))
        self.model_version = state["model_version"]
        worker.update_model_version(self.model_version)


class _CommitTrainedGroups(TrainerCallback):
    """After every optimizer step, the trained groups' visits enter the pass-rate memory."""

    def __init__(self, trainer: AsyncReinforceAdaTrainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        if self.trainer.accelerator.is_main_process:
            self.trainer.commit_trained_groups()


def queue_steps(max_staleness: int) -> int:
    """Optimizer steps of samples the worker may hold queued. A group is queued up to a version old (a weight sync
    can land while its requests run), ages one version per queued step ahead of it and one more between its read and
    its training (`READ_AHEAD`), so `max_staleness - 2` steps is the most that keeps it within `max_staleness` when
    it trains; at least one, so a step's batch is always ready."""
    return max(max_staleness - 1 - READ_AHEAD, 1)


def fixed_count(token_budget: int | None) -> bool:
    """Whether TRL's batcher packs a fixed number of rows a micro-batch (`token_budget` 0 or less; unset, TRL sets
    it to the server's context and packs by tokens)."""
    return token_budget is not None and token_budget <= 0


def queue_bound(queue_maxsize: int, queue_window: int) -> int:
    """Samples the worker may queue: `queue_maxsize` (0: no bound), never more than `queue_window` (`queue_steps`
    steps of samples); samples queued beyond it would go stale before their turn and be generated for nothing."""
    return queue_window if queue_maxsize <= 0 else min(queue_maxsize, queue_window)


def check_token_budget(args: AsyncReinforceAdaConfig, dataset: Any, tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse a positive `token_budget` that a sample (a prompt of `dataset` and `max_completion_length` tokens)
    could exceed: TRL's batcher drops such a sample without a word to the record of trained groups, so its group
    would never settle."""
    budget, completion = args.token_budget, args.max_completion_length
    if budget is None or budget <= 0:
        return
    fix = "or 0 to pack a fixed number of samples per micro-batch (unset: the vLLM server's max_model_len)"
    if budget <= completion:
        raise ValueError(
            f"token_budget={budget} leaves no room for a prompt beside max_completion_length={completion}: TRL "
            f"would drop samples whose group then never settles. Set token_budget to at least "
            f"max_completion_length plus the longest prompt's tokens, {fix}."
        )
    kwargs = args.chat_template_kwargs
    over = prompts_over(
        _train_prompts(dataset),
        budget - completion + 1,
        lambda prompts: rendered_prompts(prompts, tokenizer, kwargs),
        lambda prompts: prompt_lengths(prompts, tokenizer, kwargs),
    )
    if over:
        row = max(over, key=over.get)
        raise ValueError(
            f"token_budget={budget} is less than train_dataset row {row}'s {over[row]} prompt tokens plus "
            f"max_completion_length={completion}: TRL would drop such samples and their groups would never settle. "
            f"Set token_budget to at least {over[row] + completion}, {fix}."
        )


def _train_prompts(dataset: Any) -> list[Any]:
    """The `prompt` of every row of the train dataset (a `datasets.Dataset` or a sequence of rows)."""
    return list(dataset["prompt"]) if hasattr(dataset, "column_names") else [row["prompt"] for row in dataset]


def _check_reward_funcs(reward_funcs: Any) -> list[Callable]:
    """The reward functions as a list, registered names (`"math_final"`) and import paths resolved as the synchronous
    trainer resolves them; anything but a callable refused."""
    funcs = reward_funcs if isinstance(reward_funcs, list) else [] if reward_funcs is None else [reward_funcs]
    funcs = resolve_reward_funcs(funcs)
    if not funcs:
        raise ValueError("reward_funcs is empty: pass at least one reward function (a callable).")
    for func in funcs:
        if isinstance(func, (str, torch.nn.Module)) or not callable(func):
            raise ValueError(
                f"reward function {func!r} is not supported by the asynchronous trainer: it scores with Python "
                "callables (sync or async) only. Wrap a reward model in a function."
            )
    return funcs


def _http_weight_transfer(args: AsyncReinforceAdaConfig) -> HTTPWeightTransfer:
    return HTTPWeightTransfer(
        args.vllm_server_base_url,
        timeout=args.weight_sync_timeout,
        startup_timeout=args.vllm_server_timeout,
        timeout_option="vllm_server_timeout",
    )


def _serves_lora(args: AsyncReinforceAdaConfig) -> bool:
    """Whether the vLLM server was started with `--enable-lora` (its `/server_info` has a `lora_config`): then TRL
    syncs a PEFT adapter as an adapter, over HTTP, off CUDA too. The server has answered `check_server`."""
    info = server_info(_base_url(args))
    return info is not None and info.get("lora_config") is not None


def _base_url(args: AsyncReinforceAdaConfig) -> str:
    return args.vllm_server_base_url.rstrip("/")


def _worker_settings(args: AsyncReinforceAdaConfig, model: str) -> WorkerSettings:
    """The worker's settings from the config (TRL's decoding fields; the request budget TRL would infer)."""
    world = PartialState().num_processes
    samples_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * world
    # samples consumed while a request is still trainable: TRL's inference counts max_staleness steps, one more than
    # can pass between a request and its read (`trainable_age`), so the window is set here; prompts_in_flight needs it
    staleness_window = min(max(trainable_age(args.max_staleness), 1), IN_FLIGHT_STEPS) * samples_per_step
    if args.max_inflight_tasks < 0:
        args.max_inflight_tasks = staleness_window
    decoding = decoding_params(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        max_tokens=args.max_completion_length,
    )
    return WorkerSettings(
        plan=args.sampling_plan,
        base_url=_base_url(args),
        model=model,
        decoding=decoding,
        prompts_in_flight=args.prompts_in_flight,
        wave_size=max(1, samples_per_step // args.num_generations),
        max_staleness=args.max_staleness,
        scale_rewards=args.scale_rewards,
        reward_timeout=args.reward_timeout,
        request_timeout=args.request_timeout,
        max_retries=args.streaming_max_retries,
        server_timeout=args.vllm_server_timeout,
        queue_maxsize=queue_bound(args.queue_maxsize, queue_steps(args.max_staleness) * samples_per_step),
        micro_batch_rows=args.per_device_train_batch_size * world if fixed_count(args.token_budget) else 0,
        chat_template_kwargs=args.chat_template_kwargs,
    )
