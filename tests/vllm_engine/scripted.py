"""Scripted rewards, the prompts they script and the trainer configs shared by the real-engine tests."""

from __future__ import annotations

from collections import Counter

from tiny import CountingReward
from trl import GRPOConfig
from vllm_support.server import MAX_MODEL_LEN

from trl_ada import ReinforceAdaConfig

STEPS = 3
TOLERANCE = 1e-4
RIGHT, WRONG, ALTERNATING, ONE_IN_FOUR = "always right", "always wrong", "alternating", "one in four"
PROMPTS = (RIGHT, WRONG, ALTERNATING, ONE_IN_FOUR)
EVERY_PROMPT = Counter(dict.fromkeys(PROMPTS, 4))

# Per step, with n = M = 4 and N = 3: the completions requested for each prompt in each round (one engine call each).
# balance: alternating balances in round 1, one-in-four (1 right in 4) in round 2, right/wrong never.
# pos: all but "always wrong" have a positive in round 1.
ROUNDS = {
    "balance": [EVERY_PROMPT, Counter({RIGHT: 4, WRONG: 4, ONE_IN_FOUR: 4}), Counter({RIGHT: 4, WRONG: 4})],
    "pos": [EVERY_PROMPT, Counter({WRONG: 4}), Counter({WRONG: 4})],
    "none": [EVERY_PROMPT],
    "grpo": [EVERY_PROMPT],
}
# Per step: one call per round, the same rounds every step. Est draws one round per step, allocated from the memory
# (λ = 0.9, Beta(1, 1), N ∝ 1/√(p̂ + 0.05), 16 in all). Step 1: p̂ = 1/2 each, so 4 each. Rewards are scripted over
# the whole run (always right; never; 2 of 4 alternating; 1 of 4), so after step 1 p̂ = 5/6, 1/6, 3/6, 2/6 and
# 16 · w / Σw = 2.76, 5.57, 3.49, 4.18: floors 2, 5, 3, 4 and the two missing to the largest fractions (.76, .57).
# Step 3: p̂ = 7.6/8.6, 1/11.6, 4.8/8.6, 2.9/9.6 give 2.47, 6.46, 3.06, 4.02: 2, 6, 3, 4 and one more to .47.
EST_ALLOCATION = Counter({RIGHT: 3, WRONG: 6, ALTERNATING: 3, ONE_IN_FOUR: 4})
REQUESTS = {method: rounds * STEPS for method, rounds in ROUNDS.items()}
REQUESTS["est"] = [EVERY_PROMPT, EST_ALLOCATION, EST_ALLOCATION]
# Pilot-Commit with n = 4 and no oversampling (the 4 prompts are the candidates): a pilot of 2 per prompt, then the
# commit of 2 more to each of the B = 4 (the two mixed pilots pass the band, the two others fill it).
REQUESTS["pilot_commit"] = [Counter(dict.fromkeys(PROMPTS, 2))] * 2 * STEPS


class ScriptedReward(CountingReward):
    """1 always, 0 always, 1/0/1/0..., or 1/0/0/0/1... by prompt, whatever the completion; counts what it scored."""

    __name__ = "scripted"

    def rule(self, prompt: str, k: int) -> float:
        return {RIGHT: 1.0, WRONG: 0.0, ALTERNATING: float(k % 2 == 0), ONE_IN_FOUR: float(k % 4 == 0)}[prompt]


def make_config(method: str, mode: str, output_dir, server_url: str | None = None, **overrides):
    fields = dict(
        output_dir=str(output_dir),
        num_generations=4,
        per_device_train_batch_size=16,  # 4 distinct prompts per step
        max_completion_length=8,
        max_steps=STEPS,
        learning_rate=1e-2,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,  # float32 on both sides: TRL's default bf16 autocast alone moves log-probs by ~1e-3
        save_strategy="no",
        seed=0,
        use_vllm=True,
        vllm_mode=mode,
        vllm_importance_sampling_correction=True,
    )
    if mode == "server":
        fields.update(vllm_server_base_url=server_url, vllm_server_timeout=30)
    else:
        fields.update(vllm_max_model_length=MAX_MODEL_LEN)
    fields.update(overrides)
    if method == "grpo":
        return GRPOConfig(**fields)
    if method == "est":
        return ReinforceAdaConfig(sampling="est", **fields)
    if method == "pilot_commit":
        return ReinforceAdaConfig(sampling="pilot_commit", pilot_oversampling=1.0, **fields)
    if method == "none":  # plain GRPO through our trainer, no exit rule: it refuses rounds it never draws
        return ReinforceAdaConfig(sampling="grpo", **fields)
    return ReinforceAdaConfig(samples_per_round=4, max_rounds=3, exit_rule=method, **fields)
