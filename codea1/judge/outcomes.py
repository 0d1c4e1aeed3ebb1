"""What the judge decides about a problem: its tests' outcomes, each suite's scores, the
judgement (re-exported by `codea1.judge.judge`, where they are documented for users)."""

from __future__ import annotations

from dataclasses import dataclass, field

from codea1.mistakes.book import MistakeUpdate

__all__ = ["DUPLICATE", "INVALID_KINDS", "REFERENCE_RAISED", "UNPARSABLE", "WRONG_EXPECTATION",
           "ProblemJudgement", "SuiteResult", "TestOutcome"]

# Why a test is invalid (the spec's four kinds).
UNPARSABLE = "unparsable"
REFERENCE_RAISED = "reference raised"
WRONG_EXPECTATION = "wrong expectation"
DUPLICATE = "duplicate"
INVALID_KINDS = (UNPARSABLE, REFERENCE_RAISED, WRONG_EXPECTATION, DUPLICATE)


@dataclass(slots=True)
class TestOutcome:
    """One parsed test of a suite, after validation and attack.

    `normalized` is the corrected test `assert CALL == <reference value>` when the reference
    ran it, the model's substituted assert otherwise (None when unparsable). `kind` is one
    of the invalid kinds or None; `used` says whether it was run on the candidate (valid or
    wrong expectation); `passed` is None when it was not run or the candidate is invalid;
    `failure` says how a failed test failed (wrong value, the exception, timed out).
    """

    __test__ = False  # not a pytest class

    source: str
    normalized: str | None
    call: str | None
    valid: bool
    used: bool
    kind: str | None = None
    reason: str | None = None
    passed: bool | None = None
    failure: str | None = None


@dataclass(slots=True)
class SuiteResult:
    """One (candidate, suite) pair: counts, every intermediate score, and its tests."""

    valid: int
    invalid: int
    invalid_kinds: dict[str, int]
    valid_ratio: float
    gen_pass_rate: float
    gen_fail_rate: float
    mb_pass_rate: float | None
    pass_score: float
    attack: float
    nonprintable: float
    reward: float
    tests: list[TestOutcome]


@dataclass
class ProblemJudgement:
    """Everything the judge decided about one problem in one step.

    When `infra_error` or `reference_error` is set, the problem could not be judged (a
    sandbox failure, or a reference solution that does not run): all rewards are 0 and the
    trainer should leave the problem out of the step (`usable` is False).
    """

    problem_id: str
    code_valid: list[bool]
    code_errors: list[str | None]
    code_rewards: list[float]
    test_rewards: list[list[float]]
    suites: list[list[SuiteResult]]
    mistakes: list[str]  # the Mistake Book tests replayed (usable ones only)
    mistakes_passed: list[list[bool] | None]  # per candidate (None: invalid candidate)
    infra_error: str | None = None
    reference_error: str | None = None
    # the rollout's Mistake Book tests not replayed: (index in `ProblemRollout.mistakes`, why)
    mistakes_skipped: list[tuple[int, str]] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.infra_error is None and self.reference_error is None

    def mistake_update(self, once_per_candidate: bool = False) -> MistakeUpdate:
        """The Mistake Book change this problem asks for (empty when not usable).

        Per valid candidate: each corrected generated test it failed counts once for every
        suite in which it failed (the reference: a test that breaks a candidate in five
        suites gains five); with `once_per_candidate` (`mistakes.once_per_candidate`),
        once per candidate however many suites hold it. Each Mistake Book test it passed
        counts once in `passed`. Counts are built in candidate, suite and test order, so
        the update does not depend on hashing (PYTHONHASHSEED).
        """
        update = MistakeUpdate()
        if not self.usable:
            return update
        for i, valid in enumerate(self.code_valid):
            if not valid:
                continue
            failed_by_suite = [
                # (a suite runs a call once: a repeat is a duplicate, never used)
                list(dict.fromkeys(
                    t.normalized for t in suite.tests if t.used and t.passed is False and t.normalized is not None))
                for suite in self.suites[i]
            ]
            if once_per_candidate:
                update.failed.update(list(dict.fromkeys(test for tests in failed_by_suite for test in tests)))
            else:
                for tests in failed_by_suite:
                    update.failed.update(tests)
            passed = self.mistakes_passed[i] or []
            update.passed.update(test for test, ok in zip(self.mistakes, passed) if ok)
        return update

