"""The `hf` rollout engine: codea1's own batched sampler on the training model itself.

It samples with the very weights the trainer updates, so nothing needs syncing and there
is no second copy of the model; it reports no per-token log-probabilities (the update
recomputes them with the same weights).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from codea1 import rollout  # `rollout.generate` is looked up when called (tests replace it)
from codea1.engines.interface import RolloutEngine

if TYPE_CHECKING:
    import torch

    from codea1.models import Policies
    from codea1.rollout import GenerationStats, Sample, SamplingConfig


class HFEngine(RolloutEngine):
    """`codea1.rollout.generate` behind the `RolloutEngine` interface."""

    name = "hf"
    reports_logprobs = False

    def __init__(self, policies: "Policies") -> None:
        self.policies = policies

    def generate(self, role: str, prompt_ids: Sequence[Sequence[int]], n: int = 1,
                 sampling: "SamplingConfig | None" = None, *,
                 generator: "torch.Generator | None" = None,
                 seeds: Sequence[int] | None = None,
                 stats: "GenerationStats | None" = None,
                 should_stop: Callable[[], bool] | None = None) -> list[list["Sample"]]:
        return rollout.generate(self.policies, role, [list(p) for p in prompt_ids], n=n, sampling=sampling,
                                generator=generator, seeds=seeds, stats=stats, should_stop=should_stop)

    def release_memory(self) -> None:
        """Drop the merged sampling weights (`rollout.lean_model`) before the update needs the memory."""
        for role in self.policies.roles:
            rollout.release_lean(self.policies.module(role))
