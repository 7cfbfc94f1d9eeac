"""`ReinforceAdaTrainer`: TRL's `GRPOTrainer` with Reinforce-Ada's adaptive sampling.

Glue only. The sampling decisions live in the pure core (`plan.py`, `sampling.py`, `candidates.py`,
`memory.py`, `advantages.py`), the generation schedules in `schedules/`, and every joint with TRL's private surface in
`_trl.py` (`docs/architecture.md`). Per training step, `training_batch` (TRL asks for a generation batch):

1. hands the step's distinct prompts to the configured schedule (`rounds`, `refill`, `streaming`, `est`,
   `pilot_commit`) with TRL's half of a round (`_trl.TRLRounds`): for each round, generate, score, ingest; it returns
   one `StepOutcome`;
2. the shared step finish (`finish_step`) updates the pass-rate memory, logs the step, and returns this process's
   kept rows in TRL's order (each exchanged once between processes) with the rewards they were scored with;
3. TRL's `_generate_and_score_completions` runs once over the kept rows (`_trl.kept_training_batch`): padding, old
   and reference log-probs, importance sampling, its logs; with the pool-baseline advantages in place of TRL's.

The loss stays TRL's.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather_object
from transformers.utils import logging

from . import _trl
from ._trl import GeneratedRows, GRPOJoints, KeptRows
from .advantages import ragged_advantages, zero_std_fraction
from .checkpoint_state import MEMORY_FILE, load_memory
from .checks import RewardGuard, check_trainer_inputs
from .config import ReinforceAdaConfig
from .data import ModelContext, check_train_prompts, model_context
from .flat_rows import VISION_KEYS, loss_share, rows_of, signal_rows
from .groups import grpo_flat_fraction
from .memory import PassRateMemory, prompt_keys
from .objectives import advantage_weights
from .plan import SamplingPlan
from .run_dir import claim_run_dir, complete_checkpoint
from .sampling import PromptPools
from .schedules import Key, Sample, Schedule, StepOutcome
from .server_requests import wait_for_health

__all__ = ["ReinforceAdaTrainer"]

logger = logging.get_logger(__name__)

METRIC_PREFIX = "reinforce_ada/"


def _check_vllm_server(args: ReinforceAdaConfig, retry_interval: float = 1.0) -> None:
    """Wait up to `vllm_server_timeout` seconds for the vLLM server's `/health`; raise naming the options if it fails.

    TRL's own check names neither option, and keeps polling forever when something else answers on the port.
    """
    url = (args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}").rstrip("/")
    answer = wait_for_health(url, args.vllm_server_timeout, retry_interval)
    if answer is not None:
        raise ConnectionError(
            f"No vLLM server at {url} within vllm_server_timeout={args.vllm_server_timeout:g} s: {answer}. Start "
            "one for this model first (`trl vllm-serve --model <model>`, or `vllm serve <model>`) and wait until "
            "it reports that it is ready; then set vllm_server_base_url (or vllm_server_host and "
            "vllm_server_port) to its address, and raise vllm_server_timeout if it is still loading."
        )


class ReinforceAdaTrainer(GRPOJoints):
    """GRPOTrainer whose training generation is Reinforce-Ada's adaptive multi-round sampling (arXiv 2510.04996).

    Takes the same arguments as [`~trl.GRPOTrainer`], with `args` a [`ReinforceAdaConfig`]. Evaluation keeps plain
    GRPO sampling. `tools`, `environment_factory` and `rollout_func` resample like single completions: each round asks
    TRL's own `_generate` for `samples_per_round` episodes of every active prompt.
    """

    # Class-level defaults, so that a trainer built without `__init__` (as TRL's unit tests build theirs) falls back
    # to GRPOTrainer's behaviour instead of failing on a missing attribute.
    schedule: Schedule | None = None
    sampling_plan: SamplingPlan | None = None
    _batch_start: tuple[PassRateMemory | None, dict[str, Any] | None] | None = None
    pass_rate_memory: PassRateMemory | None = None

    def __init__(self, model, reward_funcs=None, args: ReinforceAdaConfig | None = None, *pargs, **kwargs):
        if isinstance(model, os.PathLike):
            model = str(model)
        if args is None:
            name = model if isinstance(model, str) else model.name_or_path
            args = ReinforceAdaConfig(f"{name.split('/')[-1]}-Reinforce-Ada")
        if not isinstance(args, ReinforceAdaConfig):
            raise TypeError(
                f"args is a {type(args).__name__}; ReinforceAdaTrainer needs a ReinforceAdaConfig. Build it with "
                "the keyword arguments you gave GRPOConfig: ReinforceAdaConfig(output_dir=..., ...). Its defaults "
                "are the paper's (num_generations=4, scale_rewards='none', epsilon_high=0.28), not GRPOConfig's."
            )
        args.check_fields()  # a field assigned since the config was built is checked, and trained, as given
        if args.use_vllm and args.vllm_mode == "server":
            _check_vllm_server(args)
        reward_funcs = check_trainer_inputs(args, reward_funcs, pargs, kwargs)
        super().__init__(model, reward_funcs, args, *pargs, **kwargs)
        # the plan this trainer trains, resolved from the fields as they are now (as TRL reads its fields when built)
        self.sampling_plan = plan = args.sampling_plan
        self.reward_guard = RewardGuard(
            self.reward_func_names,
            self.reward_weights.tolist(),
            plan.positive_threshold,
            check_threshold=plan.section.samples_adaptively and self.accelerator.is_main_process,
            all_negative=plan.section.all_negative,
        )
        if args.skip_zero_advantage_rows and self.aux_loss_enabled:
            raise ValueError(
                f"skip_zero_advantage_rows=True with router_aux_loss_coef={args.router_aux_loss_coef!r} on a mixture "
                "of experts: the router loss acts on every row, so a zero-advantage row cannot be skipped. Set "
                "router_aux_loss_coef=0.0, or skip_zero_advantage_rows=False."
            )
        self.pass_rate_memory = new_memory(plan)
        self.schedule = plan.section.schedule_class()(self)
        check_train_prompts(
            self.train_dataset,
            self.processing_class,
            self._context(),
            args.max_completion_length,
            render=lambda prompts: _trl.render_prompts(self, prompts),
            count=self._prompt_lengths,
        )
        logger.info("Reinforce-Ada sampling: %s", sampling_summary(args))

    def training_loss(self, inputs: dict, loss: Callable[[dict], torch.Tensor]) -> torch.Tensor:
        """TRL's loss; with `skip_zero_advantage_rows`, computed on the rows whose advantage is not zero and scaled
        to TRL's loss over every row (`trl_ada.flat_rows`: the same loss and gradient, fewer rows)."""
        if not self.args.skip_zero_advantage_rows or VISION_KEYS & inputs.keys():
            return loss(inputs)
        rows = signal_rows(inputs["advantages"])
        size = inputs["advantages"].shape[0]
        _trl.log_metrics(self, {"reinforce_ada/skipped_row_fraction": 1.0 - rows.numel() / size})
        if rows.numel() == size:
            return loss(inputs)
        kept = rows_of(inputs, rows if rows.numel() else rows.new_zeros(1))  # none: one row, a zero loss to step on
        return loss(kept) * loss_share(self.loss_type, inputs, kept)

    def _context(self) -> ModelContext | None:
        """The model's context length where known (None with environments or images: their prompts are rendered
        per row at generation)."""
        features = _trl.rollout_features(self)
        if features["environment_factory"] or features["a vision-language model"]:
            return None
        args = self.args
        vllm_length = args.vllm_max_model_length if args.use_vllm and args.vllm_mode == "colocate" else None
        return model_context(self.model.config, self.processing_class, vllm_length)

    def _prompt_lengths(self, prompts: list, batch_size: int = 256) -> list[int]:
        """Tokens of each prompt as TRL's generation sends it (chat template, tools, `chat_template_kwargs`)."""
        chunks = (prompts[start : start + batch_size] for start in range(0, len(prompts), batch_size))
        return [len(ids) for chunk in chunks for ids in _trl.tokenize_prompts(self, chunk)]

    # ----------------------------------------------------------------------------------------------------------
    # Hooks called from TRL's training step (`_trl.GRPOJoints`)
    # ----------------------------------------------------------------------------------------------------------

    def training_batch(self, inputs: list[dict]) -> dict:
        """One training batch: the schedule generates and scores the step's rounds through TRL (`_trl.TRLRounds`),
        the step finish keeps its groups, and TRL makes its batch of the kept rows in one pass, with our
        advantages."""
        if self.schedule is None:  # a trainer built without `__init__`
            return super().training_batch(inputs)
        if self._batch_spans_steps():  # a checkpoint may fall inside this batch: keep the state it started from
            self._batch_start = (copy.deepcopy(self.pass_rate_memory), self.schedule.state_dict())
        all_inputs = gather_object(inputs) if self.accelerator.num_processes > 1 else inputs
        with _trl.TRLRounds(self) as rounds:
            outcome = self.schedule.run(all_inputs[:: self.args.num_generations], rounds)  # TRL repeats each prompt
            kept = self.finish_step(outcome, inputs, rounds)
        plan = self.sampling_plan
        if not (plan.section.samples_adaptively or plan.objective.weights_gradients):  # the pool is the group
            return _trl.kept_training_batch(self, kept)
        return _trl.kept_training_batch(self, kept, self._pool_advantages(outcome))

    # ----------------------------------------------------------------------------------------------------------
    # The shared step finish
    # ----------------------------------------------------------------------------------------------------------

    def finish_step(self, outcome: StepOutcome, batch_inputs: list[dict], rounds: _trl.TRLRounds) -> KeptRows:
        """From a schedule's outcome: memory update, metrics, and this process's kept rows (its `batch_inputs` when
        the kept groups are the batch's own prompts in groups of n) with every process's kept rewards."""
        sampler = outcome.sampler
        self.reward_guard.end_step()
        self._remember_pass_rates(sampler, outcome.inputs)
        kept = outcome.kept()
        self.schedule.end_step(outcome)
        rank, num_local, n = self.accelerator.process_index, len(batch_inputs), self.args.num_generations
        local = slice(rank * num_local, (rank + 1) * num_local)
        samples = self._local_samples(outcome, kept, local)
        # a column some round did not log is None there, as in GRPOTrainer
        extra_logs = {column: [s.extra_logs.get(column) for s in samples] for column in sorted(outcome.columns)}
        kept_stats = np.stack([outcome.row_stats[key] for key in kept])
        rounds.log_step(self._step_metrics(outcome), kept_stats, extra_logs)
        row_prompts = [j for j, _ in kept]
        kept_inputs = batch_inputs
        if row_prompts != [j for j in range(len(outcome.inputs)) for _ in range(n)]:
            kept_inputs = [outcome.inputs[j] for j in row_prompts][local]  # other prompts, or groups of other sizes
        kept_rewards = np.stack([outcome.rewards_per_func[key] for key in kept])
        return KeptRows(
            kept_inputs,
            generated_rows(samples, with_tool_images=bool(self.tools)),
            torch.tensor(kept_rewards, dtype=torch.float32, device=self.accelerator.device),
        )

    def _step_metrics(self, outcome: StepOutcome) -> dict[str, float]:
        """The step's sampling metrics: the sampler's, the tokens it used, GRPO's flat fraction, the schedule's."""
        sampler = outcome.sampler
        metrics = sampler.metrics(prefix=METRIC_PREFIX)
        metrics[f"{METRIC_PREFIX}tokens"] = float(outcome.used_tokens())
        metrics[f"{METRIC_PREFIX}grpo_flat_fraction"] = grpo_flat_fraction(
            pooled_pass_rates(sampler), self.args.num_generations
        )
        metrics.update({METRIC_PREFIX + name: value for name, value in outcome.metrics.items()})
        return metrics

    def _local_samples(self, outcome: StepOutcome, kept: list[Key], local: slice) -> list[Sample]:
        """Exchange the kept samples once and return this process's slice, in TRL's row order."""
        mine = {g: outcome.samples[key] for g, key in enumerate(kept) if key in outcome.samples}
        if self.accelerator.num_processes > 1:
            merged = {}
            for part in gather_object([mine]):
                merged.update(part)
            mine = merged
        return [mine[g] for g in range(len(kept))[local]]

    # ----------------------------------------------------------------------------------------------------------
    # Run directory and checkpoints: one run per output_dir, no half-written checkpoint resumed (see run_dir.py)
    # ----------------------------------------------------------------------------------------------------------

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """TRL's `train` in a claimed run directory; a resumed run also restores the pass-rate memory and the
        schedule's state."""
        with claim_run_dir(self, resume_from_checkpoint) as checkpoint:
            if self.pass_rate_memory is not None and checkpoint is not None:
                self.pass_rate_memory = restored_memory(checkpoint, self.sampling_plan)
            if checkpoint is not None:
                self.schedule.load_state(checkpoint)
            return super().train(checkpoint, *args, **kwargs)

    def saving_checkpoint(self, folder: str, save: Callable[[], None], trial: Any) -> None:
        """TRL's checkpoint, completed by the sampling state (written inside: complete only with it)."""
        memory, schedule_state = self._resumable_sampling_state()
        with complete_checkpoint(self, folder):
            save()
            if memory is not None and self.args.should_save:
                memory.save(os.path.join(folder, MEMORY_FILE))
            if schedule_state is not None and self.args.should_save:
                self.schedule.save_state(schedule_state, folder)

    def _batch_spans_steps(self) -> bool:
        """A generation batch lasts more than one optimizer step (`steps_per_generation` or `num_iterations`)."""
        args = self.args
        return args.steps_per_generation * args.num_iterations > args.gradient_accumulation_steps

    def _resumable_sampling_state(self) -> tuple[PassRateMemory | None, dict[str, Any] | None]:
        """The memory and the schedule's state (the refill schedule's candidate stream) a resumed run must start from.
        TRL does not checkpoint a generation batch in progress: a run resumed inside one generates that batch again.
        So a checkpoint inside a batch holds the state as of the batch's start (the regenerated batch then visits its
        prompts once, as the uninterrupted run did); one at a batch boundary holds the current state."""
        if self._batch_start is not None and _trl.inside_generation_batch(self):
            return self._batch_start
        return self.pass_rate_memory, self.schedule.state_dict()

    def create_model_card(self, model_name=None, dataset_name=None, tags=None):
        """TRL's model card, with the resolved sampling settings of the run."""
        super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags)
        card = os.path.join(self.args.output_dir, "README.md")
        if self.is_world_process_zero() and os.path.isfile(card):
            with open(card, "a") as file:
                file.write(f"\n## Sampling\n\nTrained with Reinforce-Ada sampling: {sampling_summary(self.args)}.\n")

    # ----------------------------------------------------------------------------------------------------------
    # Pass-rate memory
    # ----------------------------------------------------------------------------------------------------------

    def _remember_pass_rates(self, sampler: PromptPools, inputs: list[dict]) -> None:
        """One visit per distinct prompt: every completion drawn in the step (gathered, so the same on all ranks)."""
        if self.pass_rate_memory is None:
            return
        sampled = [j for j in range(sampler.num_prompts) if sampler.pools[j]]  # a skipped candidate made no visit
        counts = np.array([sampler.counts(j) for j in sampled]).reshape(-1, 2)
        self.pass_rate_memory.update(prompt_keys([inputs[j]["prompt"] for j in sampled]), counts[:, 0], counts[:, 1])

    # ----------------------------------------------------------------------------------------------------------
    # Advantages
    # ----------------------------------------------------------------------------------------------------------

    def _pool_advantages(self, outcome: StepOutcome) -> tuple[np.ndarray, float]:
        """Advantages of every process's kept samples in TRL's row order, weighted by the objective, and the fraction
        of kept groups with zero reward std.

        A completion that every reward function declined (None) has no opinion: it is left out of the pool's mean
        and std and gets advantage 0, as in TRL. Groups may differ in size (Est): TRL's `frac_reward_zero_std`,
        which cuts the rows into blocks of n, is replaced by that fraction.
        """
        sampler, plan = outcome.sampler, self.sampling_plan
        kept_prompts, groups = sampler.kept_prompts(), sampler.select_groups()
        kept_rewards = [np.asarray(sampler.pools[j])[group] for j, group in zip(kept_prompts, groups, strict=True)]
        if self.multi_objective_aggregation == "normalize_then_sum":
            pool_rewards = outcome.pool_rewards_per_func(len(self.reward_funcs))
            pools = [pool_rewards[j] for j in kept_prompts]
            kept = [pool[group] for pool, group in zip(pools, groups, strict=True)]
            weights = self.reward_weights.cpu().numpy()
            advantages = ragged_advantages(kept, pools, baseline=plan.advantage_baseline, weights=weights)
        else:
            pools = [sampler.pools[j] for j in kept_prompts]
            advantages = ragged_advantages(
                kept_rewards, pools, baseline=plan.advantage_baseline, scale=self.scale_rewards
            )
        if plan.objective.weights_gradients:
            counts = [sampler.counts(j) for j in kept_prompts]
            pass_rates = [positives / max(positives + negatives, 1) for positives, negatives in counts]
            weights, metrics = advantage_weights(plan, pass_rates, advantages)
            advantages = [a * w for a, w in zip(advantages, weights, strict=True)]
            _trl.log_metrics(self, {f"{METRIC_PREFIX}objective/{name}": value for name, value in metrics.items()})
        return np.concatenate(advantages), zero_std_fraction(kept_rewards)


def generated_rows(samples: list[Sample], with_tool_images: bool) -> GeneratedRows:
    """Samples in the shape of TRL's `_generate`: one entry per row, a column a row lacks as GRPOTrainer has it."""
    fields = sorted({key for sample in samples for key in sample.extra_fields})
    return GeneratedRows(
        [s.prompt_ids for s in samples],
        [s.completion_ids for s in samples],
        None if any(s.tool_mask is None for s in samples) else [s.tool_mask for s in samples],
        [s.completion for s in samples],
        None if any(s.logprobs is None for s in samples) else [s.logprobs for s in samples],
        {key: [s.extra_fields.get(key) for s in samples] for key in fields},
        None if all(s.images is None for s in samples) else [s.images for s in samples],
        [s.tool_images for s in samples] if with_tool_images else [],
    )


def pooled_pass_rates(sampler: PromptPools) -> np.ndarray:
    """Each prompt's pass rate over every scored sample the step drew for it (NaN: none scored, or not sampled)."""
    counts = np.array([sampler.counts(j) for j in range(sampler.num_prompts)], dtype=np.float64).reshape(-1, 2)
    scored = counts.sum(axis=1)
    return np.divide(counts[:, 0], scored, out=np.full(len(scored), np.nan), where=scored > 0)


def new_memory(plan: SamplingPlan) -> PassRateMemory | None:
    """An empty pass-rate memory with the plan's decay and prior; None when the plan keeps none."""
    memory = plan.memory
    return PassRateMemory(decay=memory.decay, prior=memory.prior) if memory.enabled else None


def restored_memory(checkpoint: str, plan: SamplingPlan) -> PassRateMemory:
    """The pass-rate memory a checkpoint saved, under the plan's decay and prior (the config's apply on resume)."""
    return load_memory(checkpoint, decay=plan.memory.decay, prior=plan.memory.prior)


def sampling_summary(args: ReinforceAdaConfig) -> str:
    """The preset and the resolved sampling fields, one line (logged at start, written to the model card): the
    schedule's own fields and the shared ones, not a field the schedule has no use for."""
    plan = args.sampling_plan
    fields = {"num_generations": plan.n, **plan.fields()}
    resolved = ", ".join(f"{name}={value!r}" for name, value in fields.items())
    return f"sampling={args.sampling!r}: {resolved}"
