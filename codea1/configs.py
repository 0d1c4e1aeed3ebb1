"""The run's typed settings that the compute modules take, in one torch-free module.

`ModelConfig` (which model, how the roles hold their weights; `codea1.models`),
`SamplingConfig` (how completions are sampled; `codea1.rollout`), `VLLMConfig` (the vLLM
rollout engine; `codea1.engines`) and `GRPOConfig` (the update's hyperparameters;
`codea1.grpo`), with the constants and checks their users validate settings with (the
role names, the engine names, vLLM's temperature cap and LoRA limits). Each derives from
`ConfigModel`, whose one rule every config model shares: a bool is no number.

This module imports only pydantic and the standard library, never torch or transformers,
so that `codea1.train.config` and the command-line modules can validate a config without
loading the compute stack. Each class is re-exported from its old home, so
`from codea1.grpo import GRPOConfig` and the like keep working.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Literal, Sequence

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "ConfigModel", "ROLES", "ENGINE_NAMES", "VLLM_EXTRA_HINT", "MAX_TEMPERATURE",
    "VLLM_UNSUPPORTED_LORA_MODULES", "ModelConfig", "SamplingConfig", "VLLMConfig", "GRPOConfig", "check_engine_name",
    "check_vllm_lora_targets",
]

ROLES: tuple[str, ...] = ("code", "test")


# --- the rule every config model shares -----------------------------------------------------


def _number_expected(annotation: Any, value: Any) -> str | None:
    """What a field of type `annotation` expects when `value` is (or holds, in a tuple or
    list of numbers) a bool where it takes a number, else None. pydantic's lax mode takes
    True as 1 (`--set grpo.lr=true` would run at lr 1.0): a bool is never a number here."""
    if annotation is bool or annotation is Any:
        return None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(value, bool):
        if annotation is int:
            return "an integer"
        if annotation is float:
            return "a number"
        if origin is Literal:
            if any(isinstance(a, bool) for a in args) or not any(isinstance(a, int) for a in args):
                return None
            return "one of " + ", ".join(repr(a) if isinstance(a, str) else str(a) for a in args)
        if origin in (typing.Union, types.UnionType) and bool not in args:
            return next((e for e in (_number_expected(a, value) for a in args) if e), None)
        return None
    if origin in (tuple, list) and isinstance(value, (list, tuple)):
        items = [a for a in args if a is not Ellipsis]
        for i, item in enumerate(value):
            if items and isinstance(item, bool):
                expected = _number_expected(items[min(i, len(items) - 1)], item)
                if expected:
                    return f"{expected} in each item"
    if origin in (typing.Union, types.UnionType):
        return next((e for e in (_number_expected(a, value) for a in args if a is not type(None)) if e), None)
    return None


def _refuse_bool(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    field = cls.model_fields.get(info.field_name or "")
    expected = None if field is None else _number_expected(field.annotation, value)
    if expected is not None:
        raise PydanticCustomError(
            "bool_for_number", "expected {expected}, not a boolean such as true, false, yes, no, on or off",
            {"expected": expected})
    return value


class ConfigModel(BaseModel):
    """The base of every config model: a bool is no number. Every int and float field
    (alone, optional, in a tuple, or an int Literal such as vllm.sleep_level) refuses true
    and false, which pydantic would take as 1 and 0; an int where a float goes (`lr: 1`)
    is still a number."""

    _no_bool = field_validator("*", mode="before")(classmethod(_refuse_bool))


# --- model (codea1.models) ------------------------------------------------------------------


class ModelConfig(ConfigModel):
    """Which model, how the two roles hold their weights, and how it runs."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("qwen2.5-coder-0.5b-instruct",
                      description="Hugging Face id, local model directory or .gguf file (the 0.5B name works offline)")
    mode: Literal["lora-shared", "full", "selfplay"] = Field(
        "lora-shared", description="lora-shared: one frozen base, a LoRA adapter per role; full: two full models; "
        "selfplay: one set of weights for both roles")
    selfplay_weights: Literal["lora", "full"] = Field(
        "lora", description="what self-play trains: one LoRA adapter or the full model")
    lora_r: int = Field(16, ge=1, description="LoRA rank")
    lora_alpha: float = Field(32.0, gt=0, description="LoRA scaling numerator (the update is scaled by alpha / r)")
    lora_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the LoRA input")
    lora_target_modules: str | list[str] = Field(
        "all-linear", description="layers given adapters: 'all-linear' (every linear layer but the output head) or names")
    dtype: Literal["auto", "bfloat16", "float32", "float16"] = Field(
        "auto", description="weights' dtype; auto: bfloat16 on CUDA and on CPUs with bf16 units, else float32")
    gradient_checkpointing: bool = Field(False, description="recompute activations in the backward pass (less memory)")
    device: str = Field("auto", description="auto (CUDA if present, else CPU), cpu, cuda, cuda:N or mps")
    hub_probe_timeout_s: float = Field(
        3.0, gt=0, description="seconds to wait for the Hugging Face hub before using the offline GGUF")

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str) -> str:
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", value):
            raise ValueError(f"device {value!r}: expected auto, cpu, cuda, cuda:N or mps")
        return value

    @field_validator("lora_target_modules")
    @classmethod
    def _check_targets(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not value:
            raise ValueError("lora_target_modules is empty: expected 'all-linear' or module names")
        return value

    @property
    def uses_lora(self) -> bool:
        return self.mode == "lora-shared" or (self.mode == "selfplay" and self.selfplay_weights == "lora")


# --- sampling (codea1.rollout) --------------------------------------------------------------


class SamplingConfig(ConfigModel):
    """How completions are sampled; the paper's rollout defaults (temperature 1, top_p 1)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(1.0, ge=0.0, le=2.0,
                               description="sampling temperature (0: greedy; at most 2, as vLLM takes)")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling share (1: all tokens)")
    max_new_tokens: int = Field(512, ge=1, description="tokens generated at most per completion")
    max_prompt_tokens: int | None = Field(
        None, ge=1, description="longest prompt, in tokens; null: the model's context minus max_new_tokens. "
        "A longer prompt is never cut from the left (the trainer drops such code prompts from the data and "
        "shortens the code a test prompt shows); `generate` refuses one")
    cut_prompts_left: bool = Field(
        False, description="cut a longer prompt from the left to fit, losing its system message and task "
        "(the project's older rule); off: as the reference, which never cuts a prompt")
    batch_size: int = Field(64, ge=1, description="rows (samples) decoded together")
    lean_forward: bool = Field(
        True, description="on a CPU, sample with codea1's lean forward (LoRA merged into a copy of the weights, "
        "fused projections, its own KV cache: codea1.lean_forward) where the architecture allows (Qwen2, "
        "Llama, Mistral); off: transformers' forward, as before")
    seed: int | None = Field(None, description="sampling seed when no generator is passed (training seeds from `seed`)")
    stop: list[str] = Field(
        default_factory=list,
        description="strings that end a completion as a stop token does, once its decoded text holds one "
        "(vLLM's `stop`); the token that completes the string is kept, trained on and judged. "
        "Empty (the default, the paper's): only the stop tokens end it. [\"\\n```\\n\"] ends a code answer "
        "that opens with ```python at its block's closing fence (the judge reads that block only), "
        "but one opening with a bare ``` fence after a line of prose at that opening. Not for tests, "
        "which are read from every block (validation's test answers ignore it)")

    @field_validator("stop", mode="before")
    @classmethod
    def _one_stop(cls, value):
        return [value] if isinstance(value, str) else value  # one string, as vLLM takes it

    @field_validator("stop")
    @classmethod
    def _check_stop(cls, value: list[str]) -> list[str]:
        empty = [i for i, s in enumerate(value) if not s]
        if empty:
            raise ValueError(f"stop[{empty[0]}] is empty: an empty string would end every completion "
                             "at its first token; expected non-empty strings")
        return value


# --- rollout engines (codea1.engines) -------------------------------------------------------

ENGINE_NAMES = ("auto", "hf", "vllm", "llamacpp")
VLLM_EXTRA_HINT = "pip install 'codea1[vllm]'"


# vLLM's SamplingParams refuses a temperature above 2 (`_verify_args`); at temperature 0 it
# decodes greedily and refuses n > 1 (`_verify_greedy_sampling`; a positive temperature below
# 0.01 is raised to 0.01 first, so only 0 is greedy). Settings are checked against both, so a
# run never depends on which engine it got.
MAX_TEMPERATURE = 2.0
# modules whose LoRA vLLM does not serve (it adapts linear layers only): the input embedding
# and the output head under the names of the model families codea1 loads
VLLM_UNSUPPORTED_LORA_MODULES = ("embed_tokens", "lm_head", "wte", "word_embeddings", "embed_in", "embed_out",
                                 "tok_embeddings")


def check_vllm_lora_targets(targets: "str | Sequence[str]", setting: str) -> None:
    """A ValueError naming `setting` when the LoRA targets include an embedding or the output
    head: vLLM would refuse the adapter when it loads it, after the model has loaded."""
    names = [targets] if isinstance(targets, str) else list(targets)
    bad = [n for n in names if any(module in n for module in VLLM_UNSUPPORTED_LORA_MODULES)]
    if bad:
        raise ValueError(f"{setting}={bad}: vLLM serves LoRA adapters on linear layers only, not on the "
                         "embedding or the output head; drop those modules (all-linear leaves them out) "
                         "or use rollout.engine=hf")


class VLLMConfig(ConfigModel):
    """Settings of the vLLM rollout engine (used when `rollout.engine` resolves to vllm)."""

    model_config = ConfigDict(extra="forbid")

    gpu_memory_utilization: float = Field(
        0.3, gt=0, le=1,
        description="share of the GPU's memory vLLM takes for weights and KV cache; the rest "
        "is training's (the engine shares the GPU with the trainer)")
    tensor_parallel_size: int = Field(
        1, ge=1, description="GPUs one engine spans; above 1 the run must be launched with torchrun")
    sleep_level: Literal["auto", 0, 1, 2] = Field(
        "auto",
        description="how the engine sleeps during the update: 0 never, 1 weights to CPU and KV "
        "cache freed, 2 everything freed (full fine-tuning only, whose weights are pushed anyway; refused "
        "with LoRA adapters, self-play's included); auto: 1 for LoRA modes, 2 for full")
    max_model_len: int | None = Field(
        None, ge=1, description="longest prompt + completion the engine takes; null = the model's context")
    enforce_eager: bool = Field(False, description="no CUDA graphs (slower, starts faster)")
    adapter_dir: str | None = Field(
        None,
        description="directory where LoRA adapters are written for the engine after each update "
        "(RAM-backed is best); null = /dev/shm where it exists, else the temp directory")
    seed: int = Field(0, description="the engine's own seed (each request also carries a seed drawn "
                      "from the run's rollout random stream)")


def check_engine_name(name: str, setting: str = "rollout.engine") -> str:
    """`name` if it names an engine, else a ValueError naming `setting` and the engines."""
    if name not in ENGINE_NAMES:
        raise ValueError(f"{setting} {name!r}: expected one of {', '.join(ENGINE_NAMES)}")
    return name


# --- GRPO (codea1.grpo) --------------------------------------------------------------------


class GRPOConfig(ConfigModel):
    """Hyperparameters of the update; the defaults are the paper's reference values."""

    model_config = ConfigDict(extra="forbid")

    adv_eps: float = Field(1e-6, ge=0, description="epsilon added to a group's std")
    std_unbiased: bool = Field(True, description="Bessel-corrected group std (as verl's GRPO)")
    clip_low: float = Field(0.2, ge=0, lt=1, description="ratio may fall to 1 - clip_low")
    clip_high: float = Field(0.28, ge=0, description="ratio may rise to 1 + clip_high")
    kl_coef: float = Field(0.001, ge=0, description="weight of the k3 KL to the reference")
    kl_clamp: float = Field(
        10.0, gt=0, description="the per-token k3 value is clamped to [-kl_clamp, kl_clamp] (verl's low_var_kl)")
    kl_log_ratio_clamp: float = Field(
        20.0, gt=0, description="the log-ratio ref - logp is clamped to this before exp (verl's low_var_kl)")
    clip_ratio_c: float | None = Field(
        10.0, gt=1.0,
        description="dual-clip: for a negative advantage the per-token loss is at most "
        "-A * clip_ratio_c (verl's clip_ratio_c); null turns dual-clip off",
    )
    filter_zero_variance: bool = Field(
        False,
        description="drop code and test groups whose rewards are all equal (DAPO's dynamic "
        "sampling); off: they train with advantage 0 and count in the token mean and KL, as in "
        "the reference",
    )
    update_n: int = Field(1, ge=1, description="test groups kept per problem (largest std, even 0)")
    tests_from_valid_candidates: bool = Field(
        False,
        description="choose the trained test groups only among suites of valid candidates; off: "
        "among all candidates of the problem, as in the reference",
    )
    tests_from_kept_problems: bool = Field(
        True,
        description="with filter_zero_variance, train the test model only on suites of problems "
        "the code filter kept; False keeps suites of every problem",
    )
    ppo_epochs: int = Field(1, ge=1, description="passes over each step's rollouts")
    mini_batches: int = Field(2, ge=1, description="optimiser steps per policy per step")
    micro_batch_tokens: int = Field(
        4096, ge=1, description="token budget of one packed micro-batch (gradient accumulation)"
    )
    pack_sequences: bool = Field(
        True,
        description="pack several sequences into one row (block-diagonal mask); False runs one "
        "sequence per micro-batch with plain causal attention (cheaper on CPUs, whose attention "
        "kernels materialise a packed row's full mask)",
    )
    shared_prompt_rows: bool = Field(
        True,
        description="compute a prompt once per micro-batch row with all its sampled responses after it "
        "(4D attention mask; same log-probs and gradients); False gives each response its own copy",
    )
    logprob_chunk_tokens: int = Field(
        1024, ge=0,
        description="response tokens per chunk of the vocabulary projection, taken a 2048-column tile of "
        "the vocabulary at a time and keeping only the sampled token's log-softmax (less memory, same "
        "numbers up to rounding); 0 uses the model's full logits",
    )
    reuse_old_logprobs: bool = Field(
        True,
        description="take the first mini-batch's old log-probs from its own forward pass, detached (the "
        "policy has not moved yet, so they are equal) instead of a separate pass",
    )
    fused_lora: bool = Field(
        True,
        description="on a CPU, compute each LoRA layer of the update as base + scale * (x A^T) B^T accumulated "
        "into the base's output, with a backward from the rank-r products (codea1.logprobs.fused_lora: "
        "the same function, float32 to rounding); False keeps peft's forward",
    )
    span_attention: bool = Field(
        True,
        description="on a CPU, with shared-prompt rows and sdpa, compute attention span by span (each prompt "
        "causal once, each response against its prompt and itself: codea1.logprobs.span_attention) instead "
        "of over the row's whole [L, L] mask; the same numbers up to rounding; False passes the mask to sdpa",
    )
    lr: float = Field(1e-6, gt=0, description="AdamW learning rate (peak, after warm-up)")
    weight_decay: float = Field(0.1, ge=0, description="AdamW weight decay")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas [beta1, beta2]")
    adam_eps: float = Field(1e-8, gt=0, description="AdamW epsilon")
    warmup_steps: int = Field(10, ge=0, description="training steps of linear warm-up")
    warmup_first_step_learns: bool = Field(
        False,
        description="warm-up multiplier (step + 1) / warmup_steps, so the first step already "
        "learns; off: step / warmup_steps from min_lr_ratio * lr (0 by default), as the reference's scheduler",
    )
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="cosine floor as a share of lr")
    grad_clip: float = Field(1.0, gt=0, description="max global grad norm")
    rollout_is: Literal["none", "tis"] = Field(
        "none",
        description="correction for a rollout engine (vLLM) sampling from slightly other "
        "probabilities than the trainer's: 'tis' multiplies each token's policy-gradient loss by "
        "min(exp(trainer old log-prob - engine log-prob), rollout_is_cap); 'none' as the paper")
    rollout_is_cap: float = Field(2.0, gt=0, description="cap of the truncated importance weight")

    @model_validator(mode="after")
    def _check_betas(self) -> "GRPOConfig":
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must lie in [0, 1), got {self.betas}")
        return self
