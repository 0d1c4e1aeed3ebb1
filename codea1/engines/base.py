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

if TYPE_CHECKING:
    import torch

    from codea1.models import Policies
    from codea1.rollout import GenerationStats, Sample, SamplingConfig

# torch-free settings and checks, re-exported here
from codea1.configs import (
    ENGINE_NAMES,
    MAX_TEMPERATURE,
    VLLM_EXTRA_HINT,
    VLLM_UNSUPPORTED_LORA_MODULES,
    VLLMConfig,
    check_engine_name,
    check_vllm_lora_targets,
)


class EngineUnavailable(RuntimeError):
    """The rollout engine asked for cannot run here; the message says why and what to do."""


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
