"""Rollout engines: `hf` (codea1's own sampler, any device), `vllm` (CUDA, optional extra) and
`llamacpp` (CPU, optional extra, `codea1.engines.llamacpp_engine`).

`make_engine(config.rollout.engine, policies, config.rollout.vllm)` gives the run's
engine; see `interface.RolloutEngine` for the contract and `correction` for the check of the
engine's log-probabilities against the trainer's.
"""

from codea1.engines.base import (
    ENGINE_NAMES,
    VLLM_EXTRA_HINT,
    EngineUnavailable,
    RolloutEngine,
    VLLMConfig,
    make_engine,
    resolve_engine,
    vllm_installed,
)

__all__ = [
    "ENGINE_NAMES", "VLLM_EXTRA_HINT", "EngineUnavailable", "RolloutEngine", "VLLMConfig",
    "make_engine", "resolve_engine", "vllm_installed",
]
