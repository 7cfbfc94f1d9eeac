"""Sampling-based evaluation (avg@k, pass@k), pass-rate estimation and the paper's prompt selection.

```python
from trl_ada.data import load_prompt_dataset
from trl_ada.evaluation import SamplingSettings, avg_at_k, select_prompts

report = avg_at_k("Qwen/Qwen2.5-Math-1.5B", {"math500": load_prompt_dataset("HuggingFaceH4/MATH-500", "test")}, k=32)
print(report.table())
kept = select_prompts("Qwen/Qwen2.5-Math-1.5B", load_prompt_dataset("data/train.jsonl"), num_samples=16)
```

Both sample with [`generate_completions`] (vLLM when it is installed and a GPU is present, else transformers
`generate`, or a running vLLM server) under one [`SamplingSettings`], and score with
[`~trl_ada.rewards.math_reward`] (the selection takes another reward as `reward_func`). A sample is *correct*
when its reward exceeds `CORRECT_THRESHOLD` (math_reward is 0/1). The commands `trl-ada evaluate` and
`trl-ada select-prompts` (`trl_ada.cli`) are thin layers over this package.

Every name is importable from `trl_ada.evaluation`; the modules follow the steps:

- `trl_ada.evaluation.generation`: [`SamplingSettings`] and the backends behind [`generate_completions`].
- `trl_ada.evaluation.scoring`: [`score_completions`] and [`estimate_pass_rates`].
- `trl_ada.evaluation.report`: [`DatasetScore`], [`EvalReport`] and [`avg_at_k`].
- `trl_ada.evaluation.selection`: [`select_prompts`] ([`score_prompts`], then [`keep_in_band`]) and
  [`save_selection`].
"""

from .generation import BACKENDS as BACKENDS
from .generation import Prompt as Prompt
from .generation import SamplingSettings, generate_completions, load_tokenizer
from .generation import encode_prompts as encode_prompts
from .generation import resolve_backend as resolve_backend
from .generation import vllm_available as vllm_available
from .report import DatasetScore, EvalReport, avg_at_k
from .report import weighted_average as weighted_average
from .scoring import CORRECT_THRESHOLD, estimate_pass_rates, score_completions
from .scoring import SCORE_CHUNK_SIZE as SCORE_CHUNK_SIZE
from .selection import DEFAULT_MAX_PASS_RATE, keep_in_band, save_selection, score_prompts, select_prompts

__all__ = [
    "CORRECT_THRESHOLD",
    "DEFAULT_MAX_PASS_RATE",
    "DatasetScore",
    "EvalReport",
    "SamplingSettings",
    "avg_at_k",
    "estimate_pass_rates",
    "generate_completions",
    "keep_in_band",
    "load_tokenizer",
    "save_selection",
    "score_completions",
    "score_prompts",
    "select_prompts",
]
