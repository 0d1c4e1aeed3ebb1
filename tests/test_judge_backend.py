"""Both judges are `StepJudge`s, so the trainer calls them without asking which it has."""

from __future__ import annotations

from codea1.data import Problem
from codea1.judge import Judge, JudgeConfig, ProblemRollout, StepJudge
from codea1.judge.ray_backend import RayJudge


def test_the_local_and_the_ray_judge_implement_the_protocol():
    """Faults tried: dropping `Judge.close` and dropping `RayJudge.infra_failures` (each
    made this test fail, as the trainer's `self.judge.close()` would have)."""
    local = Judge(None, JudgeConfig())
    assert isinstance(local, StepJudge)
    ray_judge = object.__new__(RayJudge)  # (no cluster: the methods are what is checked)
    assert isinstance(ray_judge, StepJudge)
    assert ray_judge.progress is None  # the actors' counts are not readable here
    local.close()  # releases nothing: the executor is the caller's


def test_ray_judge_infra_failures_have_the_local_judges_shape():
    """A lost Ray batch is reported as the local judge reports lost runs: unusable, never
    a pass or fail. Fault tried: returning [] from `RayJudge.infra_failures` (fails)."""
    problem = Problem(id="t/add", question="", entry_point="add", reference="def add(a, b):\n    return a + b\n")
    rollouts = [ProblemRollout(problem, ["def add(a, b):\n    return a + b\n"], [["assert add(1, 2) == 3"]])]
    ray_judge = object.__new__(RayJudge)
    ray_judge._local = Judge(None, JudgeConfig())
    (got,) = ray_judge.infra_failures(rollouts, "sandbox node lost (RayActorError)")
    (want,) = Judge(None, JudgeConfig()).infra_failures(rollouts, "sandbox node lost (RayActorError)")
    assert not got.usable and got == want
