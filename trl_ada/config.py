"""`ReinforceAdaConfig`: TRL's `GRPOConfig` plus the adaptive-sampling fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from .plan import BASE_FIELDS, PLAN_DEFAULTS, PRESET_FIELDS, SamplingPlan, config_fields, validate_transport

__all__ = ["ReinforceAdaConfig", "RunDirArguments", "SamplingArguments"]


def _preset_field(help: str, name: str) -> Any:
    """A preset-settable field: None (unset) until the preset or the base default fills it."""
    return field(default=None, metadata={"help": f"{help} Default: the preset's, else {BASE_FIELDS[name]!r}."})


def _plan_field(help: str, name: str) -> Any:
    """A plan field no preset sets, with the plan's default (`trl_ada.plan.PLAN_DEFAULTS`)."""
    return field(default=PLAN_DEFAULTS[name], metadata={"help": help})


@dataclass
class SamplingArguments:
    """The adaptive-sampling fields shared by `ReinforceAdaConfig` and the asynchronous
    `trl_ada.async_grpo.AsyncReinforceAdaConfig` (each field is documented in `ReinforceAdaConfig`). Defaults are
    written once, in `trl_ada.plan.SamplingPlan`; the fields a preset sets are None here ("unset")."""

    sampling: str | None = field(
        default=None,
        metadata={
            "help": "A preset that fills the sampling fields you leave unset: 'grpo', 'balance', 'pos', 'dapo', "
            "'est' or 'budgeted_balance' (docs/configuration.md). A field you set wins over it, or is refused when "
            "the preset's schedule has no use for it."
        },
    )
    exit_rule: str | None = _preset_field(
        "When a prompt stops sampling: 'balance' (at least n/2 positives and n/2 negatives in its pool), 'pos' (at "
        "least one positive), 'mixed' (one positive and one negative: DAPO's filter), or 'none' (plain GRPO sampling "
        "through the same code path).",
        "exit_rule",
    )
    samples_per_round: int | None = _preset_field(
        "M: completions drawn for every active prompt in each round.", "samples_per_round"
    )
    max_rounds: int | None = _preset_field(
        "N: the round cap; a prompt draws at most samples_per_round * max_rounds completions.", "max_rounds"
    )
    positive_threshold: float = _plan_field(
        "A completion is positive when its weighted reward is strictly greater than this value.", "positive_threshold"
    )
    advantage_baseline: str = _plan_field(
        "'pool': advantage = reward - mean of every reward drawn for the prompt this step (the paper's). 'group': "
        "reward - mean of the kept num_generations (GRPO's).",
        "advantage_baseline",
    )
    generation_schedule: str | None = _preset_field(
        "'rounds' (one batched call per round), 'streaming' (vLLM server mode: per-completion requests, exits as "
        "results arrive, unneeded requests cancelled) or 'est' (Reinforce-Ada-Est: one round per step, samples "
        "allocated from the pass-rate memory).",
        "generation_schedule",
    )
    streaming_chunk: int = _plan_field(
        "Streaming: completions per request (1: finest cancellation; more: fewer requests).", "streaming_chunk"
    )
    streaming_window: int | None = _plan_field(
        "Streaming: completions of a prompt in flight at most (None = samples_per_round).", "streaming_window"
    )
    streaming_max_retries: int = field(
        default=2,
        metadata={"help": "Streaming: times a failed or timed-out request is sent again before the step fails."},
    )
    streaming_request_timeout: float = field(
        default=600.0,
        metadata={"help": "Streaming: seconds one request may wait for the server's answer."},
    )
    pass_rate_memory: bool | None = _preset_field(
        "Keep a decayed Beta posterior of each prompt's pass rate across steps (Reinforce-Ada-Est).",
        "pass_rate_memory",
    )
    memory_decay: float | None = _preset_field(
        "λ in (0, 1]: weight factor applied to a prompt's earlier evidence at each of its visits.", "memory_decay"
    )
    memory_prior_alpha: float = _plan_field(
        "α of the Beta(α, β) prior of a prompt the memory has not seen (> 0).", "memory_prior_alpha"
    )
    memory_prior_beta: float = _plan_field(
        "β of the Beta(α, β) prior of a prompt the memory has not seen (> 0).", "memory_prior_beta"
    )
    est_min_samples: int = _plan_field(
        "Est: the fewest samples one prompt is allocated in a step (N_min, 2..num_generations).", "est_min_samples"
    )
    est_max_samples: int | None = _plan_field(
        "Est: the most samples one prompt is allocated in a step (N_max >= n; None = 4n).", "est_max_samples"
    )
    objective: str | None = _preset_field(
        "What training maximises: 'linear' (E[p], GRPO's), 'log' (E[log p]: weight 1/p) or 'power' "
        "(E[p^objective_alpha]).",
        "objective",
    )
    objective_alpha: float = _plan_field("The exponent of objective='power' (> 0).", "objective_alpha")
    objective_weighting: str | None = _preset_field(
        "Where the objective's weight goes: 'explicit' (advantages), 'implicit' (samples per prompt, Est only), "
        "'hybrid' (its square root in both, Est only) or 'variance' (log objective, Est only).",
        "objective_weighting",
    )
    objective_epsilon: float = _plan_field(
        "The floor ε added to a pass rate before weighting, in (0, 1]: w(0) = f'(ε) at most.", "objective_epsilon"
    )
    first_round: str | None = _preset_field(
        "'fixed' (samples_per_round) or 'prior' (sized from the pass-rate memory) first round.", "first_round"
    )
    later_rounds: str | None = _preset_field(
        "'fixed' (samples_per_round) or 'prior' (sized from the posterior) rounds after the first.", "later_rounds"
    )
    round_confidence: float = _plan_field(
        "Probability with which a prior-sized round should meet the exit rule, in (0, 1).", "round_confidence"
    )
    futility_threshold: float | None = _preset_field(
        "Stop a prompt whose chance to meet its exit rule within its cap is below this; 0 = off.", "futility_threshold"
    )
    sample_budget: float | None = _preset_field(
        "Average completions per prompt a step may draw (>= num_generations); None = no budget.", "sample_budget"
    )

    prompt_oversampling: float | None = _preset_field(
        "Candidate prompts drawn per trained prompt (>= 1.0); the batch keeps exactly B of them.",
        "prompt_oversampling",
    )
    rounds_per_prompt: int | None = _preset_field(
        "Rounds one candidate may sample (1 = DAPO); None = max_rounds.", "rounds_per_prompt"
    )
    skip_threshold: float | None = _plan_field(
        "Skip a remembered candidate whose chance of a group all right (or unsolvable) is >= this; None = off.",
        "skip_threshold",
    )
    skip_exploration: float = _plan_field(
        "Probability in [0, 1] that a skippable candidate is sampled anyway.", "skip_exploration"
    )
    skip_unsolvable_draws: int | None = _plan_field(
        "Skip as unsolvable when this many completions would all be wrong; None = never.", "skip_unsolvable_draws"
    )
    skip_max_consecutive: int = _plan_field(
        "A candidate skipped this many times in a row is sampled at its next turn (>= 1).", "skip_max_consecutive"
    )

    def apply_preset(self, base: dict[str, Any] | None = None) -> None:
        """Fill the preset-settable fields: an explicit value, else the preset's, else `base` (a trainer's own
        defaults), else the base default; a field the resolved schedule has no use for stays None, and an explicit
        one is refused (`trl_ada.plan.config_fields`)."""
        given = {name: getattr(self, name) for name in PRESET_FIELDS}
        for name, value in config_fields(self.sampling, self.num_generations, given, base).items():
            setattr(self, name, value)

    def resolve_sampling(self) -> SamplingPlan:
        """`apply_preset`, then `checked_plan`."""
        self.apply_preset()
        return self.checked_plan()

    def checked_plan(self) -> SamplingPlan:
        """The plan of the filled fields, every sampling field validated once (and the request transport's)."""
        plan = self.sampling_plan
        validate_transport(self.streaming_max_retries, self.streaming_request_timeout)
        return plan

    @property
    def sampling_plan(self) -> SamplingPlan:
        """The sampling parameters of every step, resolved and validated (`trl_ada.plan.SamplingPlan`)."""
        return SamplingPlan.from_config(self)


@dataclass
class RunDirArguments:
    """`overwrite_output_dir`, shared by `ReinforceAdaConfig` and `AsyncReinforceAdaConfig` (one run per
    `output_dir`, `trl_ada.run_dir`)."""

    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Delete the checkpoint-* folders of an earlier run in output_dir before training (without it, "
            "training refuses such a directory unless resuming)."
        },
    )


@dataclass
class ReinforceAdaConfig(SamplingArguments, RunDirArguments, GRPOConfig):
    r"""
    Configuration class for [`ReinforceAdaTrainer`]: every field of TRL's [`~trl.GRPOConfig`] plus the fields below.

    Defaults that differ from `GRPOConfig` reproduce the paper's runs: `num_generations=4`, `scale_rewards="none"`,
    `loss_type="dapo"`, `epsilon=0.2`, `epsilon_high=0.28`, `beta=0.0`.

    Parameters:
        > Parameters that control adaptive sampling (Reinforce-Ada, arXiv 2510.04996)

        sampling (`str` or `None`, *optional*, defaults to `None`):
            A preset: one name per variant, filling the fields it needs (`docs/configuration.md` has the table).
            `"grpo"`: plain GRPO (`exit_rule="none"`). `"balance"` and `"pos"`: the paper's Reinforce-Ada-Seq
            variants (M=8, N=4). `"est"`: the paper's Reinforce-Ada-Est (Algorithm 1: one round allocated
            ∝ 1/√(p̂ + ε) from the pass-rate memory, every sample trained, `objective="log"` with hybrid weighting).
            `"dapo"`: DAPO's dynamic sampling (`exit_rule="mixed"`, M=n, one round per candidate, 3x candidates, up
            to 4 refill rounds). `"budgeted_balance"`: balance rounds sized from a pass-rate memory, with a futility
            stop and a budget of 2n completions per prompt (this package's design, not the paper's Est).
            A field left unset (None) takes the preset's value, or else its default below. A field you set is
            explicit whatever its value: it wins over the preset when the resolved schedule uses it, and is refused
            when the schedule has no use for it (Est: `exit_rule`, `samples_per_round`, `max_rounds`, ...; plain
            GRPO: rounds other than one of n); such fields stay None in the config. `None`: no preset.
        exit_rule (`str`, *optional*, defaults to `"balance"`):
            When a prompt stops sampling. `"balance"`: its pool holds at least ⌊n/2⌋ positives and n − ⌊n/2⌋
            negatives. `"pos"`: at least one positive. `"mixed"`: at least one positive and one negative (DAPO's
            filter). `"none"`: plain GRPO sampling (one round of exactly `num_generations` per prompt) through the
            same code path, for ablations. Rules registered with `trl_ada.register_exit_rule` are accepted by name.
        samples_per_round (`int`, *optional*, defaults to `8`):
            M: completions drawn for every still-active prompt in each round (one batched generation call per round).
        max_rounds (`int`, *optional*, defaults to `4`):
            N: the round cap. A prompt draws at most `samples_per_round * max_rounds` completions per step.
        positive_threshold (`float`, *optional*, defaults to `0.7`):
            A completion is positive when its weighted reward is strictly greater than this value.
        advantage_baseline (`str`, *optional*, defaults to `"pool"`):
            `"pool"`: A = r − mean of every reward drawn for the prompt in this step (the paper's estimator).
            `"group"`: A = r − mean of the kept `num_generations` rewards (GRPO's baseline). With
            `scale_rewards="group"` the matching std (pool or group) divides the advantage. With
            `multi_objective_aggregation="normalize_then_sum"` each reward function is normalised by the mean and std
            of the same set before the weighted sum, which is then normalised over the batch (as TRL does).

        > Parameters that control the pass-rate memory and budgeted rounds (all off by default)

        pass_rate_memory (`bool`, *optional*, defaults to `False`):
            Keep a Beta posterior over each prompt's pass rate from its earlier visits (keyed by a hash of the prompt),
            saved with every checkpoint: the paper's Ada-EMA estimator. It feeds Est's allocation,
            `first_round="prior"`, `later_rounds="prior"`, the futility stop and the budget's priorities.
        memory_decay (`float`, *optional*, defaults to `0.5`):
            λ in (0, 1]: at each visit the evidence of earlier visits is multiplied by λ (the policy moves).
            `sampling="est"` sets 0.9.
        memory_prior_alpha (`float`, *optional*, defaults to `1.0`):
            α of the Beta(α, β) prior of a prompt's pass rate before any visit: p̂ = (N_pos + α) / (N_total + α + β).
        memory_prior_beta (`float`, *optional*, defaults to `1.0`):
            β of that prior. Beta(1, 16) (most prompts hard) is the alternative the reference code's experimental Est
            uses.
        first_round (`str`, *optional*, defaults to `"fixed"`):
            `"fixed"`: the first round draws `samples_per_round` per prompt. `"prior"`: the smallest size in
            [`num_generations`, `samples_per_round * max_rounds`] that meets the exit rule with probability
            `round_confidence` under the prompt's posterior. Needs `pass_rate_memory=True`.
        later_rounds (`str`, *optional*, defaults to `"fixed"`):
            The same choice for rounds 2..N, sized from the memory (if on) and the step's pool.
        round_confidence (`float`, *optional*, defaults to `0.5`):
            Probability with which a prior-sized round should meet the exit rule.
        futility_threshold (`float`, *optional*, defaults to `0.0`):
            In [0, 1); 0 = off. A prompt whose pool can fill its group and whose posterior chance to meet the exit rule
            within its remaining cap is below this value stops sampling; its group is formed like any unresolved one.
        sample_budget (`float` or `None`, *optional*, defaults to `None`):
            Average completions per prompt one step may draw (>= `num_generations`); `None` = no budget (or, with a
            preset that sets one, the preset's). Each round first fills every group, then spends an equal share of
            what is left over the rounds left, one completion at a time where it most raises the posterior
            probability of a mixed group.

        > Parameters that control dynamic sampling: candidates, refill and pre-rollout skipping (all off by default)

        prompt_oversampling (`float`, *optional*, defaults to `1.0`):
            >= 1: a generation batch of B prompts samples over C = ⌈prompt_oversampling · B⌉ candidate prompts and
            keeps exactly B (the batch keeps TRL's shape B × n). Round 1 admits the first B candidates not skipped;
            before each later round every free slot (its prompt finished without signal) admits the next candidate.
            The kept B are the candidates with an effective (mixed) group first, then the others, each in draw order.
            1.0 = today, bit for bit.
        rounds_per_prompt (`int` or `None`, *optional*, defaults to `None`):
            Rounds one candidate may sample (its cap is `samples_per_round * rounds_per_prompt`); `max_rounds` stays
            the cap of the step. `None` = `max_rounds` (or, with a preset that sets it, the preset's). DAPO's dynamic
            sampling (`sampling="dapo"`) is `exit_rule="mixed"`, `samples_per_round=num_generations`,
            `rounds_per_prompt=1` with `prompt_oversampling` > 1.
        skip_threshold (`float` or `None`, *optional*, defaults to `None`):
            In (0, 1]; `None` = never skip. A candidate the pass-rate memory has seen is skipped before any completion
            only on evidence that it is easy (posterior probability that `num_generations` completions are all right
            at least this value) or unsolvable (the same for `skip_unsolvable_draws` completions all wrong). A prompt
            that is only hard is never skipped. Needs `pass_rate_memory=True`.
        skip_exploration (`float`, *optional*, defaults to `0.05`):
            In [0, 1]: the probability that a skippable candidate is sampled anyway (a seeded draw, the same on every
            process), so that a prompt the policy has learned since is seen again.
        skip_unsolvable_draws (`int` or `None`, *optional*, defaults to `64`):
            >= 1: a candidate is skipped as unsolvable when its posterior probability that this many completions are
            all wrong is at least `skip_threshold` (with `memory_decay=0.5` only all-wrong visits of 32 completions or
            more build that evidence, 48 at `skip_threshold=0.6`). `None` = never skip a prompt for being hard.
        skip_max_consecutive (`int`, *optional*, defaults to `4`):
            >= 1: a candidate skipped this many times in a row (the memory's skip streak, kept in checkpoints) is
            sampled at its next turn, so no prompt is skipped for good.

        > Parameters that control how generation is scheduled

        generation_schedule (`str`, *optional*, defaults to `"rounds"`):
            `"rounds"`: each round is one batched generation call for the active prompts, and the next round waits
            for its longest completion. `"est"` (Reinforce-Ada-Est, every backend): one batched call per step; the
            step's B·n samples are split over its B prompts ∝ the objective's sample weight at the memory's
            estimate p̂, within [`est_min_samples`, `est_max_samples`], and every sample is trained.
            `"streaming"` (needs `use_vllm=True` and `vllm_mode="server"`): completions are requested one by one,
            up to `streaming_window` of each active prompt in flight; exits are decided as results arrive, in the
            order each prompt's completions were requested (no bias towards short completions), and the requests of
            a prompt that exits are cancelled on the server.
        streaming_chunk (`int`, *optional*, defaults to `1`):
            With `generation_schedule="streaming"`: completions asked for per request. 1 cancels at the finest grain;
            larger values send fewer requests (less HTTP overhead), but a request's completions return together.
        streaming_window (`int` or `None`, *optional*, defaults to `None`):
            With `generation_schedule="streaming"`: completions of one prompt requested and not yet used, at most;
            `None` = `samples_per_round`. Up to `samples_per_round * max_rounds`: a wider window shortens the chain of
            completions a hard prompt waits for one after another, at the price of tokens spent on requests that
            its exit cancels (worth it on an engine with spare batch capacity).
        streaming_max_retries (`int`, *optional*, defaults to `2`):
            With `generation_schedule="streaming"`: times a failed or timed-out request is sent again before the
            step fails.
        streaming_request_timeout (`float`, *optional*, defaults to `600.0`):
            With `generation_schedule="streaming"`: seconds one request may wait for the server's answer.

        est_min_samples (`int`, *optional*, defaults to `2`):
            Est: N_min, the fewest samples a prompt is allocated (2 to `num_generations`).
        est_max_samples (`int` or `None`, *optional*, defaults to `None`):
            Est: N_max, the most samples a prompt is allocated (at least `num_generations`); `None` = 4n.

        > Parameters that control the objective (arXiv 2510.04996v3: J_f = E[f(p)], prompt weight f'(p))

        objective (`str`, *optional*, defaults to `"linear"`):
            `"linear"`: E[p], GRPO's (weight 1). `"log"`: E[log p] (weight 1/p). `"power"`: E[p^α] (weight
            α·p^(α−1), α = `objective_alpha`). Every weight reads p + `objective_epsilon`.
        objective_alpha (`float`, *optional*, defaults to `0.5`):
            α > 0 of `objective="power"`.
        objective_weighting (`str`, *optional*, defaults to `"explicit"`):
            `"explicit"`: the advantages of a prompt are multiplied by its weight at the pass rate of its samples in
            the step (every schedule; for Seq this is the paper's 1/p̂). With `generation_schedule="est"` also
            `"implicit"` (samples ∝ weight), `"hybrid"` (samples and advantages ∝ √weight) and `"variance"` (log
            objective: samples ∝ √((1−p)/p), advantages ∝ 1/√(p(1−p))). Advantage weights are normalised so that
            their mean over the step's trained samples with signal is 1.
        objective_epsilon (`float`, *optional*, defaults to `0.05`):
            The floor ε in (0, 1] added to a pass rate before weighting: no weight exceeds f'(ε).

        > Parameters that control the run directory

        overwrite_output_dir (`bool`, *optional*, defaults to `False`):
            Training refuses an `output_dir` that holds `checkpoint-*` folders of another run unless it resumes from
            them (`resume_from_checkpoint`). With `True`, those folders are deleted before training starts.

    Rewards that no reward function scores (every function returns `None`) have no opinion: such a completion is
    neither positive nor negative for the exit rule, is left out of the pool mean and std, and gets advantage 0.
    With `exit_rule="none"` the trainer computes exactly what [`~trl.GRPOTrainer`] computes.
    """

    # Paper defaults where TRL's differ
    num_generations: int | None = field(
        default=4,
        metadata={"help": "n: the fixed group size that reaches the loss (completions kept per prompt)."},
    )
    scale_rewards: str = field(
        default="none",
        metadata={
            "help": "'none' (paper): advantages are not divided by a std. 'group': divided by the std of the "
            "advantage baseline's set (pool or group). 'batch': divided by the std of all kept rewards."
        },
    )
    loss_type: str = field(default="dapo", metadata={"help": "TRL's loss formulation; the paper uses 'dapo'."})
    epsilon: float = field(default=0.2, metadata={"help": "Lower clipping epsilon."})
    epsilon_high: float | None = field(default=0.28, metadata={"help": "Upper clipping epsilon (clip-higher)."})
    beta: float = field(default=0.0, metadata={"help": "KL coefficient; the paper uses no KL (0.0)."})

    def __post_init__(self) -> None:
        plan = self.resolve_sampling()
        if plan.generation_schedule == "streaming":
            self._validate_streaming_backend()
        if self.scale_rewards not in ("none", "group", "batch", True, False):
            raise ValueError(f"scale_rewards={self.scale_rewards!r}: choose one of ['none', 'group', 'batch'].")
        super().__post_init__()

    @property
    def samples_adaptively(self) -> bool:
        """True unless `exit_rule="none"` (plain GRPO sampling)."""
        return self.sampling_plan.samples_adaptively

    @property
    def uses_candidates(self) -> bool:
        """True when a step samples over candidates beyond its batch or may skip some (the refill schedule)."""
        return self.sampling_plan.uses_candidates

    def _validate_streaming_backend(self) -> None:
        if not self.use_vllm or self.vllm_mode != "server":
            raise ValueError(
                f"generation_schedule='streaming' sends requests to a vLLM server, but use_vllm={self.use_vllm!r} and "
                f"vllm_mode={self.vllm_mode!r}. Set use_vllm=True and vllm_mode='server', or use "
                "generation_schedule='rounds' (the default, which every backend supports)."
            )
