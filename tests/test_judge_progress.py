"""`Judge.progress`: how far a step's judging is, for the live display."""

from __future__ import annotations

from codea1.data import Problem
from codea1.judge import Judge, JudgeConfig, JudgeProgress, ProblemRollout
from codea1.sandbox import Executor, Limits

LIMITS = Limits(timeout_s=10.0, call_timeout_s=0.5)
ADD = Problem(id="t/add", question="def add(a, b): ...", entry_point="add",
              reference="def add(a, b):\n    return a + b\n", tests=["assert add(1, 2) == 3"])
NEG = Problem(id="t/neg", question="", entry_point="neg", reference="def neg(x):\n    return -x\n")
BROKEN = Problem(id="t/broken", question="", entry_point="f", reference="raise SystemExit(3)\n")


class Watching:
    """An executor that records the judge's counters each time a run is submitted."""

    def __init__(self, inner, judge_of) -> None:
        self.inner, self.judge_of, self.seen = inner, judge_of, []

    def submit(self, job, priority=0.0):
        self.seen.append(str(self.judge_of().progress))
        return self.inner.submit(job, priority=priority)


def test_progress_counts_problems_judged_and_runs_back():
    with Executor(workers=2, limits=LIMITS) as ex:
        holder: list[Judge] = []
        watching = Watching(ex, lambda: holder[0])
        judge = Judge(watching, JudgeConfig(limits=LIMITS, reference_limits=LIMITS))
        holder.append(judge)
        assert str(judge.progress) == "0 of 0 problems judged, 0 of 0 sandbox runs back"
        judge.judge_step([
            ProblemRollout(ADD, ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"],
                           [["assert add(1, 2) == 3"], ["assert add(2, 2) == 4"]]),
            ProblemRollout(NEG, ["def neg(x): return -x"], [["assert neg(1) == -1"]]),
            ProblemRollout(BROKEN, ["def f(): pass"], [["assert f() is None"]]),  # no candidate runs
        ])
    p = judge.progress
    assert (p.problems, p.judged) == (3, 3)
    # one program per candidate (the reference's checks inside it), the broken reference's too
    assert p.runs_queued == len(watching.seen) == p.runs_done == 2 + 1 + 1
    assert watching.seen[0] == "0 of 3 problems judged, 0 of 0 sandbox runs back"
    assert str(p) == "3 of 3 problems judged, 4 of 4 sandbox runs back"
    assert JudgeProgress(2, 1, 5, 4).judged == 1
