"""The Code-A1 game on standard-input problems (`Problem.kind == "stdin"`).

The same game and the same reward formulas as for functions (`codea1.judge.rewards`), with
a program instead of a function and input/output pairs instead of asserts:

1. **Tests.** Each suite is read by `codea1.data.stdin_io.parse_io_tests`; a test the
   reader cannot take is `unparsable`; a test whose input (normalized) repeats an earlier
   one of its suite is a `duplicate`. An input runs as written (blank lines kept: a
   problem may read an empty line), and so enters the Mistake Book.
2. **References** - one run per problem: the reference program on every distinct input
   of every suite and of the Mistake Book. An input on which it fails (error, time,
   memory, output limit) makes its tests `reference raised`. Otherwise its output is the
   test's expected output: a model-written output that does not match it (tokens; floats
   within `meta.float_tolerance`; the problem's checker where it has one) is a `wrong
   expectation`, used in its corrected form, as for functions (`strict_validity` leaves it
   out of `valid`).
3. **Candidates** - one run per distinct program (same syntax tree: one run): each input,
   in a fork of its own with the problem's time limit per input. The code is valid when
   it compiles. A test passes when the candidate ran clean and printed the reference's
   output (same comparison); an error, a time-out, the memory cap or the output cap fails.
4. **Rewards, Mistake Book** - `score_suite`, `code_reward`, `test_reward`; a failed test
   enters the Mistake Book as `stdin_io.io_test(input, reference output)`.

Every output is compared in this process: no expected output enters a sandbox that runs a
candidate (a problem's checker runs apart, on outputs already printed).
"""

from __future__ import annotations

import queue
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from codea1.data.problem import read_io_test
from codea1.data.stdin_io import (
    ParsedIOTest,
    checker_of,
    input_as_run,
    io_test,
    outputs_match,
    parse_io_tests,
    tolerance_of,
)
from codea1.judge.golden import StdinSettings, stdin_limits  # (re-exported: their old home)
from codea1.judge.judge import (
    DUPLICATE,
    KIND_JUDGES,
    REFERENCE_RAISED,
    UNPARSABLE,
    WRONG_EXPECTATION,
    JudgeConfig,
    JudgeProgress,
    ProblemJudgement,
    ProblemRollout,
    SuiteResult,
    TestOutcome,
    _program_key,  # programs with one syntax tree share a run, as for functions
)
from codea1.judge.rewards import code_reward, nonprintable_share, score_suite, test_reward, valid_ratio
from codea1.sandbox import Job, Limits, RunResult
from codea1.sandbox.stdio import ProgramOutput, checker_job, checker_verdicts, program_outputs, stdin_job

__all__ = ["StdinJudge", "StdinSettings", "stdin_limits"]


@dataclass
class _Plan:
    rollout: ProblemRollout
    suites: list[list[tuple[str, list[ParsedIOTest], list[bool]]]]  # (raw, tests, duplicate?) per suite
    mb: list[tuple[int, str, str]]  # (index in the rollout's mistakes, stored test, input)
    mb_skipped: list[tuple[int, str]]
    inputs: list[str]  # the reference run's inputs
    limits: Limits
    codes: list[str] = field(default_factory=list)
    ref_out: dict[str, str] = field(default_factory=dict)  # input -> the reference's output
    ref_errors: dict[str, str] = field(default_factory=dict)
    ref_run: RunResult | None = None
    cand_inputs: list[list[str]] = field(default_factory=list)
    cand_outputs: list[list[ProgramOutput] | None] = field(default_factory=list)
    cand_errors: list[str | None] = field(default_factory=list)
    infra: str | None = None
    checks: dict[tuple[str, str], bool] = field(default_factory=dict)  # (input, output) -> checker's verdict


class StdinJudge:
    """Judges steps of stdin problems on a sandboxed executor (see the module docstring)."""

    def __init__(self, executor, config: JudgeConfig | None = None, settings: StdinSettings | None = None) -> None:
        self.executor = executor
        self.config = config or JudgeConfig()
        self.settings = settings or StdinSettings.of(self.config)
        self.progress = JudgeProgress()

    # -- planning -----------------------------------------------------------------------
    def _plan(self, rollout: ProblemRollout) -> _Plan:
        suites = []
        for row in rollout.tests:
            parsed_row = []
            for raw in row:
                tests = parse_io_tests(raw)
                seen: set[str] = set()
                duplicate = []
                for t in tests:  # the normalized input is the key; the input is run as written
                    duplicate.append(t.key is not None and t.key in seen)
                    if t.key is not None:
                        seen.add(t.key)
                parsed_row.append((raw, tests, duplicate))
            suites.append(parsed_row)
        mb, skipped = [], []
        g = self.config.suite_size
        for k, text in enumerate(rollout.mistakes):
            if k >= g:
                skipped.append((k, f"beyond the first {g} tests: a step replays at most G of a problem's book"))
                continue
            try:
                mb.append((k, text, input_as_run(read_io_test(text).input)))  # replayed as it was run
            except ValueError as err:
                skipped.append((k, f"not a stdin test ({err})"))
        ordered: list[str] = []
        flat = [s for row in suites for s in row]
        for depth in range(max((len(s[1]) for s in flat), default=0)):  # interleaved, as for functions
            for _, tests, duplicate in flat:
                if depth < len(tests) and tests[depth].input is not None and not duplicate[depth]:
                    ordered.append(tests[depth].input)
        ordered.extend(inp for _, _, inp in mb)
        limits = stdin_limits(rollout.problem, self.config.limits, self.settings)
        plan = _Plan(rollout, suites, mb, skipped, list(dict.fromkeys(ordered)), limits)
        plan.codes = [self.config.code_of(text) for text in rollout.codes]
        return plan

    def _job(self, plan: _Plan, source: str, inputs: Sequence[str], reference: bool = False) -> Job:
        """A program's run on `inputs`. As for functions, a program has one time budget
        (`limits.timeout_s`, the reference `reference_limits`' plus one input's limit): once
        it is spent, the input running and every later one fail, so a program that hangs on
        every input costs seconds, not inputs x limit. `per_call_timeouts`: every input
        gets its own limit and the run lasts as long as they need. The reference's memory
        is `reference_limits`', as for functions."""
        limits = plan.limits
        if reference:
            limits = replace(limits, memory_mb=self.config.effective_reference_limits.memory_mb)
        if self.config.per_call_timeouts:
            budget = None
        elif reference:
            budget = self.config.effective_reference_limits.timeout_s + plan.limits.call_timeout_s
        else:
            budget = self.config.limits.timeout_s + plan.limits.call_timeout_s
        return stdin_job(source, inputs, limits, self.settings.max_output_bytes, budget_s=budget)

    def _absorb_reference(self, plan: _Plan, run: RunResult) -> None:
        plan.ref_run = run
        if run.status == "infra" or not run.program_ok:
            return
        for inp, out in zip(plan.inputs, program_outputs(run, len(plan.inputs))):
            if out.ok:
                plan.ref_out[inp] = out.stdout
            else:
                plan.ref_errors[inp] = f"reference: {out.status}" + (f" ({out.error})" if out.error else "")

    def _candidate_jobs(self, plan: _Plan) -> list[tuple[Job, list[int]]]:
        groups: dict[tuple[str, str], tuple[str, list[str], list[int], str | None]] = {}
        for i, code in enumerate(plan.codes):
            key, syntax_error = _program_key(code)
            _, inputs, members, _ = groups.setdefault(key, (code, [], [], syntax_error))
            members.append(i)
            inputs.extend(inp for _, _, inp in plan.mb if inp in plan.ref_out)
            for _, tests, duplicate in plan.suites[i]:
                inputs.extend(t.input for t, dup in zip(tests, duplicate)
                              if t.input is not None and not dup and t.input in plan.ref_out)
        n = len(plan.codes)
        plan.cand_inputs, plan.cand_outputs, plan.cand_errors = [[] for _ in range(n)], [None] * n, [None] * n
        jobs = []
        for code, inputs, members, syntax_error in groups.values():
            distinct = list(dict.fromkeys(inputs))
            for i in members:
                plan.cand_inputs[i] = distinct
            if syntax_error is not None:
                for i in members:
                    plan.cand_errors[i] = f"the code does not compile: {syntax_error}"
                continue
            jobs.append((self._job(plan, code, distinct), members))
        return jobs

    def _candidate_done(self, plan: _Plan, members: list[int], run: RunResult) -> None:
        if run.status == "infra":
            plan.infra = f"candidate run: {run.infra_error}"
        for i in members:
            if run.status != "infra" and not run.program_ok:
                plan.cand_errors[i] = f"the code does not run: {run.program_error or run.status}"
            else:
                plan.cand_outputs[i] = program_outputs(run, len(plan.cand_inputs[i]))

    # -- comparing outputs --------------------------------------------------------------
    def _matches(self, plan: _Plan, inp: str, output: str) -> bool:
        """Whether `output` is a right answer on `inp`: the checker's verdict where the
        problem has one, else the tokens of the reference's output."""
        if checker_of(plan.rollout.problem) is not None:
            return plan.checks.get((inp, output), False)
        return outputs_match(output, plan.ref_out[inp], tolerance_of(plan.rollout.problem))

    def _checks_needed(self, plan: _Plan) -> list[tuple[str, str]]:
        """The (input, output) pairs a checker must decide: written and printed outputs."""
        if checker_of(plan.rollout.problem) is None or plan.ref_run is None:
            return []
        pairs = [(t.input, t.output) for row in plan.suites for _, tests, _ in row for t in tests
                 if t.input in plan.ref_out and t.output is not None]
        for inputs, outputs in zip(plan.cand_inputs, plan.cand_outputs):
            pairs.extend((inp, out.stdout) for inp, out in zip(inputs, outputs or []) if out.ok)
        return list(dict.fromkeys(pairs))

    def _run_checkers(self, plans: Sequence[_Plan]) -> None:
        """One checker run per problem that has a checker: `check(input, expected, output)`
        on each pair, in a fork of its own; anything but True is a rejection."""
        work = [(plan, self._checks_needed(plan)) for plan in plans]
        work = [(plan, pairs) for plan, pairs in work if pairs]
        if not work:
            return
        jobs = [checker_job(checker_of(plan.rollout.problem) or "",
                            [(inp, plan.ref_out[inp], out) for inp, out in pairs], plan.limits)
                for plan, pairs in work]
        for (plan, pairs), run in zip(work, self.executor.run_many(jobs)):
            if run.status == "infra":
                plan.infra = f"checker run: {run.infra_error}"
            plan.checks.update(zip(pairs, checker_verdicts(run, len(pairs))))

    # -- scoring ------------------------------------------------------------------------
    def _outcome_of(self, plan: _Plan, i: int) -> dict[str, tuple[bool, str | None]]:
        outputs = plan.cand_outputs[i] or []
        result = {}
        for inp, out in zip(plan.cand_inputs[i], outputs):
            if not out.ok:
                result[inp] = (False, f"{out.status}" + (f": {out.error}" if out.error else ""))
            elif self._matches(plan, inp, out.stdout):
                result[inp] = (True, None)
            else:
                shown = out.stdout if len(out.stdout) <= 200 else out.stdout[:197] + "..."
                result[inp] = (False, f"wrong output: {shown!r}")
        return result

    def _judge_suite(self, plan: _Plan, suite, ok: bool, outcome_of, mb_passed: list[bool]) -> SuiteResult:
        raw, tests, duplicate = suite
        outcomes: list[TestOutcome] = []
        kinds: Counter[str] = Counter()
        valid, kept_passed = 0, []
        for t, dup in zip(tests, duplicate):
            if t.input is None:
                kinds[UNPARSABLE] += 1
                outcomes.append(TestOutcome(t.source, None, None, False, False, UNPARSABLE, t.reason))
                continue
            written = io_test(t.input, t.output or "")
            if dup:
                kinds[DUPLICATE] += 1
                outcomes.append(TestOutcome(t.source, written, t.input, False, False, DUPLICATE,
                                            "repeats an earlier test of this suite (same input)"))
                continue
            if t.input not in plan.ref_out:
                kinds[REFERENCE_RAISED] += 1
                reason = plan.ref_errors.get(t.input, "reference: not run")
                outcomes.append(TestOutcome(t.source, written, t.input, False, False, REFERENCE_RAISED, reason))
                continue
            corrected = io_test(t.input, plan.ref_out[t.input])
            right = self._matches(plan, t.input, t.output or "")
            passed, failure = outcome_of.get(t.input, (False, "not run")) if ok else (None, None)
            if passed is not None:
                kept_passed.append(passed)
            if right or not self.config.strict_validity:
                valid += 1
            if right:
                outcomes.append(TestOutcome(t.source, corrected, t.input, True, True, passed=passed, failure=failure))
            else:
                kinds[WRONG_EXPECTATION] += 1
                reason = f"expected {t.output!r:.100}, the reference prints {plan.ref_out[t.input]!r:.100}"
                outcomes.append(TestOutcome(t.source, corrected, t.input, False, True, WRONG_EXPECTATION, reason,
                                            passed, failure))
        invalid = sum(kinds.values())
        nonprintable = (nonprintable_share(raw, self.config.unicode_printable)
                        if self.config.nonprintable_penalty else 0.0)
        g = self.config.suite_size
        if ok:
            s = score_suite(valid, invalid, kept_passed, mb_passed, g)
            scores = (s.valid_ratio, s.gen_pass_rate, s.gen_fail_rate, s.mb_pass_rate, s.pass_score, s.attack)
        else:
            scores = (valid_ratio(valid, invalid, g), 0.0, 0.0, None, 0.0, 0.0)
        reward = test_reward(ok, scores[0], scores[5], self.config.alpha, nonprintable)
        return SuiteResult(valid, invalid, dict(kinds), *scores, nonprintable, reward, outcomes)

    def _finish(self, plan: _Plan) -> ProblemJudgement:
        ref = plan.ref_run
        assert ref is not None
        if ref.status == "infra":
            return self._unjudged(plan, f"reference run: {ref.infra_error}", None)
        if not plan.rollout.problem.reference.strip():
            return self._unjudged(plan, None, "the problem has no reference solution (meta.no_reference)")
        if not ref.program_ok:
            return self._unjudged(plan, None, f"the reference solution does not run: {ref.program_error or ref.status}")
        if plan.infra is not None:
            return self._unjudged(plan, plan.infra, None)
        mb_usable = [(text, inp) for _, text, inp in plan.mb if inp in plan.ref_out]
        mb_skipped = sorted(plan.mb_skipped + [(k, plan.ref_errors.get(inp, "reference: not run"))
                                               for k, _, inp in plan.mb if inp not in plan.ref_out])
        valid_codes, errors, code_rewards, test_rewards, suites, mb_results = [], [], [], [], [], []
        for i in range(len(plan.codes)):
            ok = plan.cand_errors[i] is None and plan.cand_outputs[i] is not None
            outcome_of = self._outcome_of(plan, i) if ok else {}
            mb_passed = [outcome_of.get(inp, (False, None))[0] for _, inp in mb_usable] if ok else []
            row = [self._judge_suite(plan, s, ok, outcome_of, mb_passed) for s in plan.suites[i]]
            valid_codes.append(ok)
            errors.append(plan.cand_errors[i])
            code_rewards.append(code_reward(ok, [s.pass_score for s in row]))
            test_rewards.append([s.reward for s in row])
            suites.append(row)
            mb_results.append(mb_passed if ok else None)
        mistakes = [text for text, _ in mb_usable]
        return ProblemJudgement(plan.rollout.problem.id, valid_codes, errors, code_rewards, test_rewards, suites,
                                mistakes, mb_results, mistakes_skipped=mb_skipped)

    def _unjudged(self, plan: _Plan, infra: str | None, reference_error: str | None) -> ProblemJudgement:
        n = len(plan.rollout.codes)
        why = infra or reference_error
        suites = [[SuiteResult(0, 0, {}, 0.0, 0.0, 0.0, None, 0.0, 0.0, 0.0, 0.0, [
            TestOutcome(t.source, None, t.input, False, False, None, why) for t in tests])
            for _, tests, _ in row] for row in plan.suites]
        return ProblemJudgement(plan.rollout.problem.id, [False] * n, [why] * n, [0.0] * n,
                                [[0.0] * len(row) for row in plan.suites], suites, [], [None] * n,
                                infra_error=infra, reference_error=reference_error)

    # -- public -------------------------------------------------------------------------
    def judge_step(self, rollouts: Sequence[ProblemRollout]) -> list[ProblemJudgement]:
        """Judge every problem: reference runs first, each problem's candidates queued as
        soon as its reference run is back, checkers last; one judgement per rollout."""
        progress = self.progress  # (reset in place: a `Judge` handing this kind over shows the same object)
        progress.problems, progress.judged, progress.runs_queued, progress.runs_done = len(rollouts), 0, 0, 0
        plans = [self._plan(r) for r in rollouts]
        done: queue.SimpleQueue = queue.SimpleQueue()
        pending = 0

        def submit(job: Job, priority: float, then) -> None:
            nonlocal pending
            pending += 1
            self.progress.runs_queued += 1
            future = self.executor.submit(job, priority=priority)
            future.add_done_callback(lambda f, then=then: done.put((then, f)))

        for plan in plans:
            submit(self._job(plan, plan.rollout.problem.reference, plan.inputs, reference=True), 1e9,
                   lambda run, plan=plan: self._reference_back(plan, run, submit))
        while pending:
            then, future = done.get()
            pending -= 1
            self.progress.runs_done += 1
            then(future.result())
        self._run_checkers([p for p in plans if p.infra is None])
        results = [self._finish(plan) for plan in plans]
        self.progress.judged = len(results)
        return results

    def _reference_back(self, plan: _Plan, run: RunResult, submit) -> None:
        self._absorb_reference(plan, run)
        if run.status == "infra" or not run.program_ok:
            return
        for job, members in self._candidate_jobs(plan):
            submit(job, float(len(job.calls)), lambda result, members=members: self._candidate_done(plan, members,
                                                                                                   result))

    def infra_failures(self, rollouts: Sequence[ProblemRollout], why: str) -> list[ProblemJudgement]:
        """Judgements of problems whose runs were lost: unusable, never trained on."""
        return [self._unjudged(self._plan(r), f"infra: {why}", None) for r in rollouts]


KIND_JUDGES["stdin"] = StdinJudge
