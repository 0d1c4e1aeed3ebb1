"""The hint for an unknown config key: the key a Hugging Face / TRL user most likely meant.

`GRPOTrainer` users type `learning_rate`, `num_generations`, `beta`,
`max_completion_length`; the spelling closest to a Code-A1 key (difflib) would not find
those, so the names of transformers' `TrainingArguments` and TRL's `GRPOConfig` are
looked up first, by the last part of the key (`training.learning_rate` finds it too).
"""

from __future__ import annotations

import difflib
from typing import Any

# TrainingArguments / GRPOConfig name -> what to write in Code-A1.
FAMILIAR_KEYS: dict[str, str] = {
    # optimiser and schedule
    "learning_rate": "grpo.lr",
    "weight_decay": "grpo.weight_decay",
    "adam_beta1": "grpo.betas (a pair: [0.9, 0.999])",
    "adam_beta2": "grpo.betas (a pair: [0.9, 0.999])",
    "adam_epsilon": "grpo.adam_eps",
    "max_grad_norm": "grpo.grad_clip",
    "warmup_steps": "grpo.warmup_steps",
    "warmup_ratio": "grpo.warmup_steps (a number of steps)",
    "lr_scheduler_type": "grpo.min_lr_ratio (the schedule is warm-up then cosine)",
    "num_train_epochs": "steps (training runs a number of steps)",
    "max_steps": "steps",
    # GRPO
    "beta": "grpo.kl_coef",
    "epsilon": "grpo.clip_low",
    "epsilon_high": "grpo.clip_high",
    "num_iterations": "grpo.ppo_epochs",
    "scale_rewards": "grpo.std_unbiased / grpo.adv_eps (advantages are always divided by the group's std)",
    "num_generations": "rollout.n_code (and rollout.n_test for the test model)",
    "max_completion_length": "rollout.code.max_new_tokens / rollout.test.max_new_tokens",
    "max_new_tokens": "rollout.code.max_new_tokens / rollout.test.max_new_tokens",
    "max_prompt_length": "rollout.code.max_prompt_tokens / rollout.test.max_prompt_tokens",
    "temperature": "rollout.code.temperature / rollout.test.temperature",
    "top_p": "rollout.code.top_p / rollout.test.top_p",
    "stop": "rollout.code.stop / rollout.test.stop (strings that end a completion)",
    "stop_strings": "rollout.code.stop / rollout.test.stop (strings that end a completion)",
    "stop_sequences": "rollout.code.stop / rollout.test.stop (strings that end a completion)",
    "generation_batch_size": "rollout.code.batch_size / rollout.test.batch_size",
    # batches
    "per_device_train_batch_size": "data.problems_per_step (problems a step; each gives rollout.n_code completions)",
    "train_batch_size": "data.problems_per_step",
    "gradient_accumulation_steps": "grpo.micro_batch_tokens (gradients accumulate over token-budget micro-batches)",
    # model
    "model_name_or_path": "model.name",
    "model_name": "model.name",
    "torch_dtype": "model.dtype",
    "dtype": "model.dtype",
    "bf16": "model.dtype=bfloat16",
    "fp16": "model.dtype=float16",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "lora_r": "model.lora_r",
    "lora_alpha": "model.lora_alpha",
    "lora_dropout": "model.lora_dropout",
    "lora_target_modules": "model.lora_target_modules",
    # data, saving, logging
    "dataset_name": "data.train",
    "train_file": "data.train",
    "eval_dataset": "data.heldout",
    "validation_file": "data.heldout",
    "data_seed": "seed",
    "save_steps": "checkpoint.every",
    "save_total_limit": "checkpoint.keep",
    "eval_steps": "validation.every",
    "report_to": "logging.tensorboard",
    "output_dir": "the --run-dir option of `codea1 train` (not a config key)",
    "resume_from_checkpoint": "the --resume RUN_DIR option of `codea1 train` (not a config key)",
    "logging_dir": "the --run-dir option of `codea1 train` (TensorBoard logs go to RUN_DIR/tb)",
}


def _leaves(value: Any, prefix: str) -> list[str]:
    if not isinstance(value, dict):
        return [prefix]
    return [leaf for k, v in value.items() for leaf in _leaves(v, f"{prefix}.{k}")]


def key_hint(key: str, known: list[str], value: Any = None) -> str:
    """' (did you mean ...?)' for an unknown dotted `key` (holding `value`), or ''.

    An unknown section (`training:` holding `learning_rate`) is judged by its keys first.
    """
    for leaf in _leaves(value, key) if isinstance(value, dict) else []:
        name = leaf.rsplit(".", 1)[-1]
        if name in FAMILIAR_KEYS:
            return f" (did you mean {FAMILIAR_KEYS[name]} for {leaf}?)"
    last = key.rsplit(".", 1)[-1]
    if last in FAMILIAR_KEYS and key not in known:
        return f" (did you mean {FAMILIAR_KEYS[last]}?)"
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:  # `seeds` finds `seed`, `kl_coeff` finds `grpo.kl_coef`
        by_last = {k.rsplit(".", 1)[-1]: k for k in known}
        near = difflib.get_close_matches(last, list(by_last), n=1, cutoff=0.75)
        close = [by_last[near[0]]] if near else []
    return f" (did you mean {close[0]!r}?)" if close else ""
