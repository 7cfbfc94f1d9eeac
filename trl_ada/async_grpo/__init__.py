"""Reinforce-Ada in TRL's asynchronous trainer (`trl.experimental.async_grpo`): generation decoupled from training.

`docs/async.md` explains what changes against the synchronous `ReinforceAdaTrainer`.
"""
