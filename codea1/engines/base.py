"""Which rollout engine a run gets (`resolve_engine`, `make_engine`), and the names the
engines share, re-exported here: the contract (`codea1.engines.interface`) and the vLLM
settings (`codea1.configs`).

A rollout engine samples completions for a role (`code` or `test`) from prompts given as
token ids and returns `codea1.rollout.Sample`s: completion ids (with the final EOS when
the completion ended), finished/truncated flags and, where the engine reports them, the
sampler's per-token log-probabilities. The trainer tells the engine when weights change
(`weights_changed`) and when it needs the accelerator's memory back (`release_memory`);
the engine decides how to follow (nothing for `hf`, adapter reload or weight push and
sleep/wake for `vllm`).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Literal

import torch

# torch-free settings and checks, re-exported here
from codea1.configs import (  # noqa: F401
    ENGINE_NAMES,
    MAX_TEMPERATURE,
    VLLM_EXTRA_HINT,
    VLLM_UNSUPPORTED_LORA_MODULES,
    VLLMConfig,
    check_engine_name,
    check_vllm_lora_targets,
)
# the engines, looked up on their modules when called (tests replace `llamacpp_installed`)
from codea1.engines import hf_engine, llamacpp_engine, vllm_engine
from codea1.engines.interface import EngineUnavailable, RolloutEngine  # re-exported: their old home

if TYPE_CHECKING:
    from codea1.models import Policies


def vllm_installed() -> bool:
    """True when the `vllm` package can be imported (without importing it)."""
    return importlib.util.find_spec("vllm") is not None


def resolve_engine(name: str, device: "torch.device | str",
                   setting: str = "rollout.engine={}") -> Literal["hf", "vllm", "llamacpp"]:
    """The engine `name` stands for on `device`: `auto` is vllm when installed and on CUDA,
    else hf (llamacpp, which samples with quantised weights, is only ever asked for).
    `setting` spells the choice in the messages (`--engine {}` on the eval command line)."""
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
    if not llamacpp_engine.llamacpp_installed():
        raise EngineUnavailable(f"{setting.format('llamacpp')}: llama-cpp-python is not installed; "
                                f"{llamacpp_engine.LLAMACPP_EXTRA_HINT} (it compiles llama.cpp), or use {setting.format('hf')}")
    if kind != "cpu":
        raise EngineUnavailable(f"{setting.format('llamacpp')} runs on the CPU, but the model is on {kind!r}; "
                                f"use {setting.format('vllm')} or hf there")
    return "llamacpp"


def make_engine(name: str, policies: "Policies", vllm_cfg: VLLMConfig | None = None,
                dtype: "torch.dtype | None" = None, threads: int | None = None) -> RolloutEngine:
    """The engine `name` (auto/hf/vllm/llamacpp) resolves to for these policies. `dtype`:
    the dtype the engine samples in when it differs from the policies' (FSDP2 keeps float32
    master weights and computes in `model.dtype`: the engine takes the compute dtype).
    `threads`: llama.cpp's CPU threads (None: the cores this process may use)."""
    resolved = resolve_engine(name, policies.device)
    if resolved == "llamacpp":
        return llamacpp_engine.LlamaCppEngine(policies, threads=threads)
    if resolved == "vllm":
        return vllm_engine.VLLMEngine(policies, vllm_cfg or VLLMConfig(), dtype=dtype)
    return hf_engine.HFEngine(policies)
