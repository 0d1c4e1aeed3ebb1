"""`StepJudge`: what the trainer and validation ask of a judge, whichever runs the tests.

Two classes implement it: `codea1.judge.Judge` (the sandbox of this process) and
`codea1.judge.ray_backend.RayJudge` (sandbox actors on a Ray cluster, `judge.backend:
ray`). Callers hold a `StepJudge` and call its methods; none asks which one it has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    from codea1.judge.judge import JudgeProgress, ProblemRollout
    from codea1.judge.outcomes import ProblemJudgement


@runtime_checkable
class StepJudge(Protocol):
    """Judges the rollouts of a training step into rewards (`ProblemJudgement`s)."""

    #: How far the step being judged is, for a live display; None where the judge counts
    #: nothing this process can read (the Ray actors judge in their own processes).
    progress: JudgeProgress | None

    def judge_step(self, rollouts: Sequence[ProblemRollout]) -> list[ProblemJudgement]:
        """One judgement per rollout, in order."""
        ...

    def infra_failures(self, rollouts: Sequence[ProblemRollout], why: str) -> list[ProblemJudgement]:
        """Unusable judgements (no pass/fail claimed) for rollouts whose runs were lost."""
        ...

    def close(self) -> None:
        """Release what the judge owns (Ray actors); the caller's executor is left open."""
        ...
