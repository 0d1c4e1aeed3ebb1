"""The rollout engine interface, its vLLM settings, and which engine a run gets.

A rollout engine samples completions for a role (`code` or `test`) from prompts given as
token ids and returns `codea1.rollout.Sample`s: completion ids (with the final EOS when
the completion ended), finished/truncated flags and, where the engine reports them, the
sampler's per-token log-probabilities. The trainer tells the engine when weights change
(`weights_changed`) and when it needs the accelerator's memory back (`release_memory`);
the engine decides how to follow (nothing for `hf`, adapter reload or weight push and
sleep/wake for `vllm`).
"""

from __future__ import annotations

import abc
import importlib.util
from typing import TYPE_CHECKING, Callable, Iterable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import torch

    from codea1.models import Policies
    from codea1.rollout import GenerationStats, Sample, SamplingConfig

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


class EngineUnavailable(RuntimeError):
    """The rollout engine asked for cannot run here; the message says why and what to do."""


class VLLMConfig(BaseModel):
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
        "cache freed, 2 everything freed (full/selfplay only: their weights are pushed anyway); "
        "auto: 1 for LoRA modes, 2 for full")
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


def vllm_installed() -> bool:
    """True when the `vllm` package can be imported (without importing it)."""
    return importlib.util.find_spec("vllm") is not None


def resolve_engine(name: str, device: "torch.device | str",
                   setting: str = "rollout.engine={}") -> Literal["hf", "vllm", "llamacpp"]:
    """The engine `name` stands for on `device`: `auto` is vllm when installed and on CUDA,
    else hf (llamacpp, which samples with quantised weights, is only ever asked for).
    `setting` spells the choice in the messages (`--engine {}` on the eval command line)."""
    import torch

    check_engine_name(name, setting.format("").rstrip("= "))
    kind = torch.device(device).type
    if name == "auto":
        return "vllm" if kind == "cuda" and vllm_installed() else "hf"
    if name == "hf":
        return "hf"
    if name == "vllm":
        if not vllm_installed():
            raise EngineUnavailable(
                f"{setting.format('vllm')}: vLLM is not installed; install it on a CUDA machine with "
                f"{VLLM_EXTRA_HINT}, or use {setting.format('hf')}")
        if kind != "cuda":
            raise EngineUnavailable(
                f"{setting.format('vllm')}: vLLM needs a CUDA GPU but the model is on {kind!r}; "
                f"use {setting.format('hf')} (or auto)")
        return "vllm"
    from codea1.engines.llamacpp_engine import LLAMACPP_EXTRA_HINT, llamacpp_installed

    if not llamacpp_installed():
        raise EngineUnavailable(f"{setting.format('llamacpp')}: llama-cpp-python is not installed; "
                                f"{LLAMACPP_EXTRA_HINT} (it compiles llama.cpp), or use {setting.format('hf')}")
    if kind != "cpu":
        raise EngineUnavailable(f"{setting.format('llamacpp')} runs on the CPU, but the model is on {kind!r}; "
                                f"use {setting.format('vllm')} or hf there")
    return "llamacpp"


class RolloutEngine(abc.ABC):
    """Samples completions for a role; keeps its copy of the weights in step with training."""

    name: str = ""
    #: True when `Sample.logprobs` is filled (what `rollout/logp_mismatch` and TIS need)
    reports_logprobs: bool = False

    @abc.abstractmethod
    def generate(self, role: str, prompt_ids: Sequence[Sequence[int]], n: int = 1,
                 sampling: "SamplingConfig | None" = None, *,
                 generator: "torch.Generator | None" = None,
                 seeds: Sequence[int] | None = None,
                 stats: "GenerationStats | None" = None,
                 should_stop: Callable[[], bool] | None = None) -> list[list["Sample"]]:
        """`n` samples per prompt with `role`'s current weights, per prompt in order.

        A prompt longer than the sampling config allows is refused, never cut (cut from the
        left only under `cut_prompts_left`: `codea1.rollout.fit_prompts`). `seeds` (one a prompt) make each prompt's samples
        depend only on its seed, not on the batch it is in (what training passes, so that
        any number of ranks samples alike); else `generator` drives the draws.
        Raises `GenerationInterrupted` when `should_stop`
        returns true (how often it is polled depends on the engine).
        """

    def weights_changed(self, keys: Iterable[str]) -> None:
        """The weight sets `keys` (`code`, `test` or `shared`) were just updated."""

    def release_memory(self) -> None:
        """Training is about to run: give back what accelerator memory the engine can."""

    def close(self) -> None:
        """Free the engine (and any files it wrote)."""


def make_engine(name: str, policies: "Policies", vllm_cfg: VLLMConfig | None = None,
                dtype: "torch.dtype | None" = None, threads: int | None = None) -> RolloutEngine:
    """The engine `name` (auto/hf/vllm/llamacpp) resolves to for these policies. `dtype`:
    the dtype the engine samples in when it differs from the policies' (FSDP2 keeps float32
    master weights and computes in `model.dtype`: the engine takes the compute dtype).
    `threads`: llama.cpp's CPU threads (None: the cores this process may use)."""
    resolved = resolve_engine(name, policies.device)
    if resolved == "llamacpp":
        from codea1.engines.llamacpp_engine import LlamaCppEngine

        return LlamaCppEngine(policies, threads=threads)
    if resolved == "vllm":
        from codea1.engines.vllm_engine import VLLMEngine

        return VLLMEngine(policies, vllm_cfg or VLLMConfig(), dtype=dtype)
    from codea1.engines.hf_engine import HFEngine

    return HFEngine(policies)
