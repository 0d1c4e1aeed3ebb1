"""Plan and score a problem whose candidates run as one program each (`codea1.judge.one_program`).

The counts follow the reference's bookkeeping: a test whose CALL returned on the
reference and was new in its suite (the same CALL and value again is a duplicate) is
valid and run on the candidate; its written EXPECTED, when it disagrees with the
reference's value, also counts it invalid (a wrong expectation, still used in its
corrected form); a CALL that raised on the reference is invalid. A suite whose checks the
program never finished (it ended in them: an exit, a crash, its time) keeps its valid
tests but only its unreadable ones count invalid (the reference's count for it was never
printed); when the reference's module raised, no test of the candidate's suites was
checked (neither valid nor invalid). A test passes when the candidate's CALL returned a
value equal to the reference's (`ValueMemo.equal`, in this process).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from codea1.judge.outcomes import (
    DUPLICATE,
    REFERENCE_RAISED,
    UNPARSABLE,
    WRONG_EXPECTATION,
    ProblemJudgement,
    SuiteResult,
    TestOutcome,
)
from codea1.judge.one_program import ProgramLayout, RunFacts, program_job, read_run
from codea1.judge.parse import parse_tests, shortened
from codea1.judge.rewards import code_reward, nonprintable_share, score_suite, test_reward, valid_ratio
from codea1.sandbox import CallResult, encode

if TYPE_CHECKING:
    from codea1.judge.judge import Judge, ValueMemo, _Plan, _Suite

__all__ = ["plan_programs", "finish_programs"]

NOT_CHECKED = "not checked: the reference's checks of this suite never ran to their end"


def _literal(plan: _Plan, expected: str, literal: tuple | None) -> bool:
    """Whether EXPECTED is read here (a literal that encodes), keeping its encoding."""
    if expected in plan.expected_values:
        return True
    if literal is None:
        return False
    try:
        plan.expected_values[expected] = encode(literal[0])
    except ValueError:  # too large or too deep to encode here: the program evaluates it
        return False
    return True


def plan_programs(judge: Judge, plan: _Plan) -> None:
    """Fill `plan.mb_tests` and `plan.layouts` (one candidate program each)."""
    config = judge.config
    problem = plan.rollout.problem
    plan.mb_tests = []
    for _, test, call in plan.mb_calls:
        (parsed,) = parse_tests(test, problem.entry_point, strict=config.strict_tests,
                                require_entry_point=config.require_entry_point)
        read = parsed.expected is not None and _literal(plan, parsed.expected, parsed.expected_literal)
        plan.mb_tests.append((call, None if read else parsed.expected,
                              plan.expected_values[parsed.expected] if read else None))
    book = [(call, expected) for call, expected, _ in plan.mb_tests]
    assert plan.reference_module is not None
    plan.layouts = []
    for i, row in enumerate(plan.suites):
        suites = [[(t.call, t.expected, t.call is not None and _literal(plan, t.expected, t.expected_literal))
                   for t in s.parsed] for s in row]
        plan.layouts.append(program_job(problem.imports, plan.reference_module, plan.modules[i], suites, book,
                                        config.limits, problem.entry_point if config.require_definition else None))


def _result(facts: RunFacts, k: int | None) -> CallResult:
    if k is None or k >= len(facts.results):
        return CallResult(status="not-run")
    return facts.results[k]


def _failure(result: CallResult) -> str:
    if result.status == "error":
        return result.error or "raised an exception"
    if result.status == "timeout":
        return "timed out (the program's time budget ran out)"
    if result.error == "skipped":
        return "not run"
    return "not run (the program ended before it)"


class _SuiteCount:
    """A suite's tests as the reference counts them for one candidate."""

    def __init__(self, judge: Judge, plan: _Plan, facts: RunFacts, candidate_ok: bool, memo: ValueMemo) -> None:
        self.judge, self.plan, self.facts, self.candidate_ok, self.memo = judge, plan, facts, candidate_ok, memo

    def run(self, suite: _Suite, refs: list, exps: list, cands: list) -> tuple[list, Counter, int, list[bool]]:
        facts = self.facts
        placed = [k for k in refs + exps if k is not None]
        complete = facts.reference_ok and (not placed or facts.alive_until > max(placed) + 1)
        outcomes, kinds, valid, kept = [], Counter(), 0, []
        seen: set[tuple[str, str]] = set()
        for t, r, x, c in zip(suite.parsed, refs, exps, cands):
            if t.call is None:
                kinds[UNPARSABLE] += 1
                outcomes.append(TestOutcome(t.source, None, None, False, False, UNPARSABLE, t.reason))
                continue
            ref = _result(facts, r)
            if ref.status != "ok":
                if not complete:
                    outcomes.append(TestOutcome(t.source, t.normalized, t.call, False, False, None, NOT_CHECKED))
                    continue
                kinds[REFERENCE_RAISED] += 1
                outcomes.append(TestOutcome(t.source, t.normalized, t.call, False, False, REFERENCE_RAISED,
                                            f"reference: {_failure(ref)}"))
                continue
            if ref.value[0] == "unsupported":  # (a generator, a lambda: nothing here can compare it)
                kinds[REFERENCE_RAISED] += 1 if complete else 0
                outcomes.append(TestOutcome(t.source, t.normalized, t.call, False, False, REFERENCE_RAISED if complete
                                            else None, f"reference returned a value that cannot be compared "
                                            f"(a {ref.value[1]})"))
                continue
            key = (t.call, self.memo.key(ref.value))
            if key in seen:
                if complete:
                    kinds[DUPLICATE] += 1
                reason = "repeats an earlier test of this suite (same call, same value)"
                outcomes.append(TestOutcome(t.source, t.normalized, t.call, False, False,
                                            DUPLICATE if complete else None, reason))
                continue
            seen.add(key)
            outcome, right = self.kept(t, ref, _result(facts, x), _result(facts, c))
            valid += 1 if right or not self.judge.config.strict_validity else 0
            if not right and complete:
                kinds[WRONG_EXPECTATION] += 1
            if outcome.passed is not None:
                kept.append(outcome.passed)
            outcomes.append(outcome)
        return outcomes, kinds, valid, kept

    def kept(self, t, ref: CallResult, exp: CallResult, cand: CallResult):
        """The outcome of a kept test (valid, or a wrong expectation) and whether its
        written EXPECTED was right."""
        plan, memo = self.plan, self.memo
        expected = plan.expected_values.get(t.expected) if t.expected in plan.expected_values else (
            exp.value if exp.status == "ok" else None)
        right = expected is not None and memo.expectation(expected, ref.value)
        corrected = memo.corrected(t.call, ref.value)
        passed = failure = None
        if self.candidate_ok:
            passed = cand.status == "ok" and memo.equal(cand.value, ref.value)
            if not passed:
                failure = _failure(cand) if cand.status != "ok" else memo.wrong(cand.value)
        if right:
            return TestOutcome(t.source, corrected, t.call, True, True, passed=passed, failure=failure), True
        reason = (f"expected {shortened(str(t.expected))}, the reference returns {memo.shown(ref.value)}"
                  if exp.status in ("ok", "not-run") else
                  f"expected value does not evaluate (reference: {_failure(exp)})")
        return TestOutcome(t.source, corrected, t.call, False, True, WRONG_EXPECTATION, reason, passed, failure), False


def _suite_result(judge: Judge, suite: _Suite, counted: tuple, candidate_ok: bool, mb_passed: list[bool]) -> SuiteResult:
    outcomes, kinds, valid, kept = counted
    config = judge.config
    invalid = sum(kinds.values())
    nonprintable = nonprintable_share(suite.raw, config.unicode_printable) if config.nonprintable_penalty else 0.0
    g = config.suite_size
    if candidate_ok:
        s = score_suite(valid, invalid, kept, mb_passed, g)
        scores = (s.valid_ratio, s.gen_pass_rate, s.gen_fail_rate, s.mb_pass_rate, s.pass_score, s.attack)
    else:
        scores = (valid_ratio(valid, invalid, g), 0.0, 0.0, None, 0.0, 0.0)
    reward = test_reward(candidate_ok, scores[0], scores[5], config.alpha, nonprintable)
    return SuiteResult(valid, invalid, dict(kinds), *scores, nonprintable, reward, outcomes)


def _book_passed(plan: _Plan, layout: ProgramLayout, facts: RunFacts, memo: ValueMemo) -> list[bool]:
    passed = []
    for (b, e), (_, _, literal) in zip(layout.book, plan.mb_tests):
        got, exp = _result(facts, b), _result(facts, e)
        expected = literal if literal is not None else (exp.value if exp.status == "ok" else None)
        passed.append(got.status == "ok" and expected is not None and memo.equal(got.value, expected))
    return passed


def _candidate_ok(judge: Judge, layout: ProgramLayout, facts: RunFacts, entry: str) -> tuple[bool, str | None]:
    if not facts.candidate_ok:
        return False, facts.candidate_error
    if layout.defines is not None:
        defined = _result(facts, layout.defines)
        if not (defined.status == "ok" and defined.value == ["bool", True]):
            return False, f"the code does not define a function `{entry}`"
    return True, None


def finish_programs(judge: Judge, plan: _Plan) -> ProblemJudgement:
    """The problem's judgement from its candidates' runs."""
    rollout = plan.rollout
    broken = [r for r in plan.cand_runs if r is not None and r.status == "infra"]
    if broken:
        return judge._unjudged(plan, f"candidate run: {broken[0].infra_error}", None)
    code_valid, code_errors, code_rewards, test_rewards, rows, mb_results = [], [], [], [], [], []
    memo = judge.value_memo()
    for i, layout in enumerate(plan.layouts):
        run = plan.cand_runs[i]
        assert run is not None
        if layout.job is None:
            facts = RunFacts(False, False, False, layout.whole_program_error, 0, [])
        else:
            facts = read_run(layout, run)
        ok, error = _candidate_ok(judge, layout, facts, rollout.problem.entry_point)
        mb_passed = _book_passed(plan, layout, facts, memo) if ok else []
        count = _SuiteCount(judge, plan, facts, ok, memo)
        row = []
        for j, suite in enumerate(plan.suites[i]):
            refs = layout.ref[j] if layout.ref else [None] * len(suite.parsed)
            exps = layout.exp[j] if layout.exp else [None] * len(suite.parsed)
            cands = layout.cand[j] if layout.cand else [None] * len(suite.parsed)
            row.append(_suite_result(judge, suite, count.run(suite, refs, exps, cands), ok, mb_passed))
        code_valid.append(ok)
        code_errors.append(error)
        code_rewards.append(code_reward(ok, [s.pass_score for s in row]))
        test_rewards.append([s.reward for s in row])
        rows.append(row)
        mb_results.append(mb_passed if ok else None)
    return ProblemJudgement(rollout.problem.id, code_valid, code_errors, code_rewards, test_rewards, rows,
                            [test for _, test, _ in plan.mb_calls], mb_results, mistakes_skipped=sorted(plan.mb_skipped))
