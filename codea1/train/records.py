"""What one training step carries from phase to phase, with the shapes written down.

P is the number of this rank's problems in the step (all of them with one process);
`n_code` and `n_test` are `rollout.n_code` and `rollout.n_test`. The rollout phases fill
a `StepRollout`, the judge turns it into `StepRewards`; `codea1.grpo.select_batches`
turns both into the `RoleBatch`es the update trains on; `Trainer.run_step` hands the loop
a `StepResult`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from codea1.data import Problem
from codea1.grpo import StepBatches
from codea1.judge import ProblemJudgement
from codea1.rollout import GenerationStats, Sample


@dataclass
class StepRollout:
    """The step's problems and everything the two models wrote for them."""

    step: int                        # the step being run (1-based)
    step_problems: list[Problem]     # every rank's problems of the step, in slot order
    slots: list[int]                 # [P] this rank's slots among them
    problems: list[Problem]          # [P] this rank's problems: step_problems[slots[p]]
    code_samples: list[list[Sample]] = field(default_factory=list)  # [P][n_code]
    codes: list[list[str]] = field(default_factory=list)            # [P][n_code] code extracted from each
    suites: list[list[list[Sample]]] = field(default_factory=list)  # [P][n_code][n_test] ([P][] in golden mode)
    code_stats: GenerationStats = field(default_factory=GenerationStats)
    test_stats: GenerationStats = field(default_factory=GenerationStats)


@dataclass
class StepRewards:
    """The judge's verdict on a `StepRollout`."""

    code: torch.Tensor                 # [P, n_code] float64: each candidate's reward
    test: torch.Tensor | None          # [P, n_code, n_test] float64: each suite's reward (None in golden mode)
    judgements: list[ProblemJudgement | None]  # [P] the judge's record per problem (None in golden mode)
    metrics: dict[str, Any]            # judge/*, code/reward_*, test/reward_*


@dataclass
class StepResult:
    """What one finished step hands back to the loop (`Trainer.run_step`)."""

    step: int                          # the step just run (1-based)
    metrics: dict[str, Any] | None     # the step's metrics over every rank (on rank 0; None elsewhere)
    samples: list[dict[str, Any]]      # samples.jsonl's records of the step (on rank 0)
    batches: StepBatches               # this rank's trajectories the update trained on, per set of weights
