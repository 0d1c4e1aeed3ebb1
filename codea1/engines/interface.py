"""The rollout engine contract: what every engine (`hf_engine`, `vllm_engine`,
`llamacpp_engine`) implements, and the error an engine that cannot run here raises.

It sits below the engines and `codea1.engines.base` (which chooses and builds one), so an
engine imports its contract without importing the module that imports every engine.
Both names are re-exported from `codea1.engines.base` and `codea1.engines`.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

if TYPE_CHECKING:
    import torch

    from codea1.rollout import GenerationStats, Sample, SamplingConfig


class EngineUnavailable(RuntimeError):
    """The rollout engine asked for cannot run here; the message says why and what to do."""


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

    @abc.abstractmethod
    def weights_changed(self, keys: Iterable[str]) -> None:
        """The weight sets `keys` (`code`, `test` or `shared`) were just updated.

        Abstract: every engine says what keeping up takes (an engine that forgot would
        sample with stale weights without a word)."""

    def release_memory(self) -> None:
        """Training is about to run: give back what accelerator memory the engine can."""

    def close(self) -> None:
        """Free the engine (and any files it wrote)."""
