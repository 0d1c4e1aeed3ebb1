X

`make_engine(config.rollout.engine, policies, config.rollout.vllm)` gives the run's
engine; see `base.RolloutEngine` for the contract and `correction` for the check of the
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
