"""Validation on the reference, attack on the candidates, and the rewards of one step.

A step is judged in two kinds of sandbox runs, all on the executor's one priority queue:

1. **References** - one run per problem: the reference program, then every distinct CALL
   of every suite of the problem, every distinct model-written EXPECTED expression, and the
   Mistake Book CALLs. A test whose CALL raises on the reference is invalid; otherwise its
   expected value becomes the reference's value (rendered by `parse.corrected_test`), and a
   model-written EXPECTED that differs makes the test a "wrong expectation" (invalid, but
   still used in its corrected form).
2. **Candidates** - one run per candidate (identical programs share one), queued as soon
   as its problem's reference run returns (see `Judge.judge_step` for the order): its code
   in the reference's namespace (`codea1.judge.programs`), then the Mistake Book CALLs and
   every distinct corrected CALL of its suites, under one time budget for the whole run
   (the reference's; `per_call_timeouts` for the project's limit per call). The code is
   valid when its module runs (`require_definition`: when it also defines the function).
   A test passes when the call returns a value equal (trusted
   `python_equal`, Python's `==` on values decoded in this process; `values_equal` with
   `exact_types`) to the reference's value; an exception, a time-out or
   a run killed by a limit is a failure.

No expected value ever travels into a sandbox, and no test is a process of its own.
"""

from __future__ import annotations

import ast
import queue
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from codea1.interpreter import gc_paused, quick_handoff
from codea1.judge.config import JudgeConfig
from codea1.judge.golden import GoldenResult, StdinSettings, golden_item, golden_results, has_golden
from codea1.judge.one_program import value_key
from codea1.judge.parse import (ParsedTest, completion_cache, corrected_of, parse_completion, parse_tests, rendered,
                                shortened, shown_of, wrong_of)
from codea1.judge import program_scoring as programs
from codea1.judge.outcomes import (
    DUPLICATE,
    REFERENCE_RAISED,
    UNPARSABLE,
    WRONG_EXPECTATION,
    ProblemJudgement,
    SuiteResult,
    TestOutcome,
)
from codea1.judge.programs import HoistedModule, candidate_program, hoist_imports, reference_program
from codea1.judge.reading import read_reference_tests
from codea1.judge.rewards import code_reward, nonprintable_share, score_suite, test_reward, valid_ratio
from codea1.sandbox import CallResult, Job, RunResult, encode, values_equal
from codea1.sandbox.decode import decode_reflexive, python_equal
from codea1.sandbox.values import check_value

if TYPE_CHECKING:
    from codea1.data import Problem
    from codea1.sandbox import Executor

__all__ = [
    "Judge",
    "JudgeConfig",
    "ProblemJudgement",
    "ProblemRollout",
    "SuiteResult",
    "TestOutcome",
    "UNPARSABLE",
    "REFERENCE_RAISED",
    "WRONG_EXPECTATION",
    "DUPLICATE",
]



#: Judges of the other problem kinds (`Problem.kind`), by kind: a class built as
#: `cls(executor, config)` with `judge_step` and `infra_failures` (golden verdicts of every
#: kind are `codea1.judge.golden`'s).
#: `codea1.judge.stdin` registers "stdin" (the package imports it). `Judge` hands each
#: problem of such a kind to its judge and keeps the function-level ones.
KIND_JUDGES: dict[str, type] = {}


def _kind(rollout_or_problem) -> str:
    problem = getattr(rollout_or_problem, "problem", rollout_or_problem)
    return getattr(problem, "kind", "function")


@dataclass
class ProblemRollout:
    """What the models produced for one problem in one step.

    `codes[i]`: the raw completion of candidate i; `tests[i][j]`: the raw completion of
    suite j written against candidate i; `mistakes`: the problem's Mistake Book tests
    (normalized asserts, most frequent first; at most G are used).
    """

    problem: Problem
    codes: Sequence[str]
    tests: Sequence[Sequence[str]]
    mistakes: Sequence[str] = ()

    def __post_init__(self) -> None:
        for name, value in (("codes", self.codes), ("mistakes", self.mistakes)):
            if isinstance(value, str) or not all(isinstance(x, str) for x in value):
                raise TypeError(f"problem {self.problem.id!r}: ProblemRollout.{name} must be a list of strings")
        for i, suites in enumerate(self.tests):
            if isinstance(suites, str) or not all(isinstance(x, str) for x in suites):
                raise TypeError(
                    f"problem {self.problem.id!r}: ProblemRollout.tests[{i}] must be a list of raw test completions"
                )
        if len(self.tests) != len(self.codes):
            raise ValueError(
                f"problem {self.problem.id!r}: {len(self.codes)} codes but {len(self.tests)} lists of test suites "
                "(expected one list per candidate code)"
            )


# --------------------------------------------------------------------------------------
# planning the runs


def _defines(entry_point: str) -> str:
    """A call expression true when the program defined a callable `entry_point`."""
    return f"callable(globals().get({entry_point!r}))"


def _program_key(program: str) -> tuple[tuple[str, str], str | None]:
    """What makes two candidate programs the same run, and the syntax error if any.

    Programs with the same syntax tree (they differ only in comments, blank lines and
    layout, as sampled completions often do) behave the same and share one run; the key
    is the tree's dump. A program that certainly does not compile keys on its text and
    gets `SyntaxError: ...`. Parsing runs nothing; anything but a plain syntax error (a
    recursion limit, a null byte) is left to the sandbox to judge.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ("tree", ast.dump(ast.parse(program))), None
        except SyntaxError as err:
            return ("text", program.strip()), f"SyntaxError: {err.msg} (line {err.lineno})"
        except Exception:  # noqa: BLE001 - the sandbox decides about anything else
            return ("text", program.strip()), None


def _call_error(result: CallResult | None, run: RunResult) -> str:
    if result is None:
        return "not run"
    if result.status == "error":
        return result.error or "raised an exception"
    if result.status == "timeout":
        return "timed out"
    return f"not run (run ended: {run.status})"


@dataclass
class _Suite:
    raw: str
    parsed: list[ParsedTest]
    duplicate: list[bool]


@dataclass
class _Plan:
    """The parsed suites of one problem and the calls its reference run evaluates."""

    rollout: ProblemRollout
    suites: list[list[_Suite]]
    mb_calls: list[tuple[int, str, str]]  # (index in the rollout's mistakes, test as given, its CALL)
    ref_calls: list[str]
    expected_values: dict[str, list]  # literal EXPECTED text -> its encoding (read in the parent)
    mb_skipped: list[tuple[int, str]] = field(default_factory=list)  # (index, why not replayed)
    apart: set[str] = field(default_factory=set)  # expressions evaluated in a fork of their own
    ref_run: RunResult | None = None
    codes: list[str] = field(default_factory=list)  # the code extracted from each candidate's completion
    reference_module: HoistedModule | None = None  # (None with `own_namespace`)
    modules: list[HoistedModule] = field(default_factory=list)  # each candidate's, split as the reference does
    # filled after wave 1
    ref_timed_out: set[str] = field(default_factory=set)  # calls that used the reference's whole budget
    ref_values: dict[str, list] = field(default_factory=dict)  # call -> encoded reference value
    ref_errors: dict[str, str] = field(default_factory=dict)  # call -> why it is unusable
    right_expectations: dict[tuple[str, str | None], bool] = field(default_factory=dict)  # (call, EXPECTED) -> right?
    cand_calls: list[list[str]] = field(default_factory=list)
    cand_runs: list[RunResult | None] = field(default_factory=list)
    # one program per candidate (`JudgeConfig.one_program`): each candidate's layout, and
    # the replayed Mistake Book tests as (CALL, EXPECTED text or None, its encoding or None)
    layouts: list = field(default_factory=list)
    mb_tests: list[tuple[str, str | None, list | None]] = field(default_factory=list)


@dataclass
class JudgeProgress:
    """How far `Judge.judge_step` is in its step, for a live display (read from another
    thread: plain counters, each written by the judging thread alone)."""

    problems: int = 0      # the step's problems
    judged: int = 0        # problems scored so far
    runs_queued: int = 0   # sandbox runs queued so far (references, candidates, resumed runs)
    runs_done: int = 0     # of which returned

    def __str__(self) -> str:
        return (f"{self.judged} of {self.problems} problems judged, "
                f"{self.runs_done:,} of {self.runs_queued:,} sandbox runs back")


class ValueMemo:
    """The values of one problem's judgement, each distinct one checked, decoded, compared
    and written out once.

    The same value comes back many times while a problem is scored: each candidate's
    program evaluates the reference's calls again (`one_program`), suite by suite, right
    candidates return equal values, and a test recurs in several suites. Checking,
    decoding, comparing or writing out a value walks all of it (0.2-0.6 s a walk for one of
    6 MB), and it was done again for every copy. Here each answer is worked out once per
    distinct encoding and reused: every answer is a function of the encodings alone.

    A value is known by a key (`key`) that two values share exactly when their encodings
    are equal; it is found by comparing the value with those seen before (Python's `==` on
    the plain data, by C code, stopping at the first difference) that have the same
    `_shape`, a summary of a few of its nodes. The values are checked encodings (each one a
    run returns was checked by its worker; `encode` makes the rest), whose every number
    and flag has the type its place requires: two such lists are `==` exactly when their
    JSON texts are equal. No digest or text from a run is trusted for it.

    The rules are the judge's: the candidate's value against the reference's by Python's
    `==` on values decoded here (`python_equal`) or `values_equal` (`exact_types`), with
    the configured float tolerance; the model's EXPECTED against the reference's value
    likewise (`_exact_expectation_matches` under `exact_types`). With Python's `==` and no
    tolerance (the default) each distinct value is decoded once and compared decoded; one
    compared with an equal encoding is decoded afresh for it, as `python_equal` would (one
    object on both sides is equal by identity inside a container, where `[nan] == [nan]`
    is false for two decodings), unless nothing in it can be unequal to itself
    (`decode_reflexive`). A corrected test's text serves its reason too where it writes no
    instance differently (`_rendered`).
    """

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._keys: dict[int, tuple[list, int]] = {}  # id(value) -> (value, key); holding it keeps its id
        self._shapes: dict = {}  # `_shape` -> [(value, key)...], or {JSON text: key} once crowded
        self._distinct = 0  # keys given so far
        self._well_formed: dict[int, bool] = {}
        self._decoded: dict[int, tuple[object, bool]] = {}  # key -> (decoded, equal to a second decoding)
        self._verdicts: dict[tuple[str, int, int], bool] = {}
        self._sources: dict[tuple[int, bool], str | None] = {}  # (key, build_objects) -> `rendered`
        self._texts: dict[tuple, str | None] = {}

    def key(self, value: list) -> int:
        """The value's identity: equal for two values with the same encoding only."""
        known = self._keys.get(id(value))
        if known is None:
            known = self._keys[id(value)] = (value, self._identify(value))
        return known[1]

    def _identify(self, value: list) -> int:
        """The key of the value seen before that equals `value`, else a new one. A shape
        shared by many distinct values (`_CROWDED`) tells them apart by their JSON texts."""
        shape = _shape(value, 0)
        same = self._shapes.setdefault(shape, [])
        if type(same) is list:
            for seen, key in same:
                if seen == value:
                    return key
            if len(same) < _CROWDED:
                same.append((value, self._distinct))
                self._distinct += 1
                return same[-1][1]
            same = self._shapes[shape] = {value_key(seen): key for seen, key in same}
        key = same.setdefault(value_key(value), self._distinct)
        if key == self._distinct:
            self._distinct += 1
        return key

    def equal(self, candidate: list, reference: list) -> bool:
        """Whether a candidate's value equals the reference's."""
        config = self.config
        if config.exact_types:
            tol = (config.float_rtol, config.float_atol)
            return self._verdict("exact", candidate, reference, lambda a, b: values_equal(a, b, *tol))
        return self._python_equal(candidate, reference)

    def expectation(self, expected: list, reference: list) -> bool:
        """Whether the model's EXPECTED agrees with the reference's value."""
        config = self.config
        if config.exact_types:
            tol = (config.float_rtol, config.float_atol)
            return self._verdict("expectation", expected, reference,
                                 lambda a, b: _exact_expectation_matches(a, b, tol))
        return self._python_equal(expected, reference)

    def corrected(self, call: str, value: list) -> str | None:
        """`corrected_test(call, value)` (one text object for every test that repeats it)."""
        return self._text(("corrected", call), value, lambda v: corrected_of(call, self._rendered(v, True)))

    def shown(self, value: list) -> str:
        """`shown_value(value)`, for a reason."""
        return self._text(("shown",), value, lambda v: shown_of(self._rendered(v, False)))  # type: ignore[return-value]

    def wrong(self, value: list) -> str:
        """`wrong_value(value)`, for a failure."""
        return self._text(("wrong",), value, lambda v: wrong_of(v, self._rendered(v, False)))  # type: ignore[return-value]

    def _text(self, what: tuple, value: list, render) -> str | None:
        key = (*what, self.key(value))
        if key not in self._texts:
            self._texts[key] = render(value)
        return self._texts[key]

    def _checked(self, value: list) -> bool:
        """Whether the value is well-formed (`check_value`, once per distinct value): the
        walks after it need not check it again."""
        key = self.key(value)
        good = self._well_formed.get(key)
        if good is None:
            try:
                check_value(value)
                good = True
            except ValueError:
                good = False
            self._well_formed[key] = good
        return good

    def _rendered(self, value: list, build: bool) -> str | None:
        """`rendered(value, build_objects=build)`, once per distinct value. Its text with
        instances built is the same text as without where it builds none (each way of
        building one writes `__new__(`): then it is not written out again."""
        key = self.key(value)
        if (key, build) not in self._sources:
            built = self._sources.get((key, True))
            if not build and built is not None and "__new__(" not in built:
                self._sources[key, build] = built
            else:  # (a malformed value is checked again, to raise as it did)
                self._sources[key, build] = rendered(value, build, check=not self._checked(value))
        return self._sources[key, build]

    def _verdict(self, rule: str, a: list, b: list, decide) -> bool:
        key = (rule, self.key(a), self.key(b))
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._verdicts[key] = decide(a, b)
        return verdict

    def _python_equal(self, a: list, b: list) -> bool:
        rtol, atol = self.config.float_rtol, self.config.float_atol
        if rtol or atol:
            return self._verdict("python", a, b, lambda x, y: python_equal(x, y, rtol, atol))
        return self._verdict("python", a, b, self._decoded_equal)

    def _decoded_equal(self, a: list, b: list) -> bool:
        """`python_equal(a, b)` with no tolerance, on the memo's decoded values."""
        x, reflexive = self._decode(a)
        if self.key(a) != self.key(b):
            y = self._decode(b)[0]
        elif reflexive or x is _UNDECODABLE:  # (equal to a second decoding of its encoding, or to nothing)
            return x is not _UNDECODABLE
        else:
            y = _decoded(b, self._checked(b))[0]
        if x is _UNDECODABLE or y is _UNDECODABLE:
            return False
        try:
            return bool(x == y)
        except _COMPARE_ERRORS:
            return False

    def _decode(self, value: list) -> tuple[object, bool]:
        key = self.key(value)
        if key not in self._decoded:
            self._decoded[key] = _decoded(value, self._checked(value))
        return self._decoded[key]


#: What `python_equal` counts as "equals nothing" when it raises while decoding or comparing.
_COMPARE_ERRORS = (ValueError, TypeError, ArithmeticError, RecursionError, OverflowError, MemoryError)
_UNDECODABLE = object()
#: How many distinct values of one `_shape` a `ValueMemo` compares a new one with; beyond,
#: it tells them apart by their JSON texts (a text takes 0.1-0.2 s for a value of 6 MB,
#: a comparison some 0.02 s).
_CROWDED = 8


_PLAIN = (str, int, bool, float, type(None))


def _shape(value, depth: int):
    """A summary of an encoding that equal encodings share, from a few of its nodes: the
    whole of a small one, the length and three items (first, middle, last) of a long list,
    to depth 4. Values that differ elsewhere only share it (`ValueMemo` compares them)."""
    if type(value) is not list:
        return value if type(value) in _PLAIN else type(value).__name__
    n = len(value)
    if depth > 4:
        return n
    if n <= 4:
        return tuple([_shape(x, depth + 1) for x in value])
    return n, _shape(value[0], depth + 1), _shape(value[n // 2], depth + 1), _shape(value[-1], depth + 1)


def _decoded(value: list, checked: bool = False) -> tuple[object, bool]:
    """`decode_reflexive(value)`, with `_UNDECODABLE` for a value `python_equal` would find
    equal to nothing."""
    try:
        return decode_reflexive(value, check=not checked)
    except _COMPARE_ERRORS:
        return _UNDECODABLE, False


class Judge:
    """Judges steps of Code-A1 on a sandboxed `Executor` (see module docstring); the
    in-process `codea1.judge.backend.StepJudge`."""

    def __init__(self, executor: Executor, config: JudgeConfig | None = None) -> None:
        self.executor = executor
        self.config = config or JudgeConfig()
        self.progress = JudgeProgress()  # the step being judged (`judge_step`)

    # -- comparing values -------------------------------------------------------------
    def value_memo(self) -> ValueMemo:
        """A fresh `ValueMemo` for the values of one problem's judgement, under this config."""
        return ValueMemo(self.config)

    # -- wave 1 -----------------------------------------------------------------------
    def _plan(self, rollout: ProblemRollout) -> _Plan:
        problem = rollout.problem
        entry = problem.entry_point
        config = self.config
        options = {"strict": config.strict_tests, "require_entry_point": config.require_entry_point}
        reading = {"strict_lines": config.strict_lines, "strict_operator": config.strict_operator}
        by_statement = config.statement_reading or config.strict_lines
        # the suites of a problem repeat each other's lines: each distinct line is parsed once
        cache = completion_cache(entry, **options, **reading) if by_statement else {}
        suites: list[list[_Suite]] = []
        for suite_texts in rollout.tests:
            row = []
            for raw in suite_texts:
                if by_statement:
                    parsed = parse_completion(raw, entry, **options, **reading, cache=cache)
                else:
                    parsed = read_reference_tests(raw, entry, **options, strict_operator=config.strict_operator,
                                                  cache=cache)
                seen: set[str] = set()
                duplicate = []
                for t in parsed:
                    duplicate.append(t.call is not None and t.call in seen)
                    if t.call is not None:
                        seen.add(t.call)
                row.append(_Suite(raw, parsed, duplicate))
            suites.append(row)

        mb_calls, mb_skipped = [], []
        # Outside strict mode a test may use any name (the reference's classes and imports,
        # helpers): each expression that uses more than the function, safe builtins and
        # modules runs in a fork of its own, so no test can change what another one sees.
        apart = {text for row in suites for s in row for t in s.parsed
                 for text, flag in ((t.call, t.call_apart), (t.expected, t.expected_apart)) if flag and text}
        g = self.config.suite_size
        for k, test in enumerate(rollout.mistakes):
            if k >= g:
                mb_skipped.append((k, f"beyond the first {g} tests: a step replays at most G of a problem's book"))
                continue
            # stored tests passed these checks when they entered; one that does not now is skipped
            parsed = parse_tests(test, entry, **options)  # (stored as `assert CALL == LITERAL`)
            if len(parsed) == 1 and parsed[0].call is not None:
                mb_calls.append((k, test, parsed[0].call))
                if parsed[0].call_apart:
                    apart.add(parsed[0].call)
            elif len(parsed) != 1:
                mb_skipped.append((k, "not a test" if not parsed else f"{len(parsed)} statements, not one test"))
            else:
                mb_skipped.append((k, parsed[0].reason or "not a test"))

        # Interleave suites (first test of every suite, then the second, ...) so that a few
        # slow calls late in one suite cannot starve the others of the run's time budget.
        ordered: list[str] = []
        flat = [s for row in suites for s in row]
        depth = max((len(s.parsed) for s in flat), default=0)
        for k in range(depth):
            for s in flat:
                if k < len(s.parsed) and s.parsed[k].call is not None and not s.duplicate[k]:
                    ordered.append(s.parsed[k].call)  # type: ignore[arg-type]
        ordered.extend(call for _, _, call in mb_calls)
        # Model-written expected values: literals are read here, anything else is evaluated
        # in the reference run (`float('inf')`, `sorted([2, 1])`, ...).
        expected_values: dict[str, list] = {}
        for s in flat:
            for t, dup in zip(s.parsed, s.duplicate):
                if t.expected is None or dup or t.expected in expected_values:
                    continue
                if t.expected_literal is not None:
                    try:
                        expected_values[t.expected] = encode(t.expected_literal[0])
                        continue
                    except ValueError:  # too large or too deep to encode here
                        pass
                ordered.append(t.expected)
        ref_calls = list(dict.fromkeys(ordered))
        plan = _Plan(rollout, suites, mb_calls, ref_calls, expected_values, mb_skipped, apart)
        plan.codes = [config.code_of(text) for text in rollout.codes]
        if not config.own_namespace:
            plan.reference_module = hoist_imports(problem.reference)
            plan.modules = [hoist_imports(code) for code in plan.codes]
        return plan

    def _reference_job(self, plan: _Plan) -> Job:
        problem = plan.rollout.problem
        limits = self.config.effective_reference_limits
        if not self.config.per_call_timeouts:  # a reference call may use a candidate program's whole budget
            limits = replace(limits, call_timeout_s=max(limits.call_timeout_s, self.config.limits.timeout_s))
        if plan.reference_module is None:
            program = problem.program(problem.reference)
        else:
            program = reference_program(problem.imports, problem.reference, plan.reference_module, plan.modules)
        return Job(
            program=program,
            calls=plan.ref_calls,
            limits=limits,
            isolated=[k for k, call in enumerate(plan.ref_calls) if call in plan.apart],
        )

    def _absorb_reference(self, plan: _Plan, run: RunResult) -> None:
        plan.ref_run = run
        if run.status == "infra" or not run.program_ok:
            return
        for call, result in zip(plan.ref_calls, run.calls):
            if result.status == "timeout":
                plan.ref_timed_out.add(call)
            if result.status != "ok":
                plan.ref_errors[call] = f"reference: {_call_error(result, run)}"
                continue
            if result.value[0] == "unsupported":  # (a generator, a lambda: nothing here can compare it)
                plan.ref_errors[call] = f"reference returned a value that cannot be compared (a {result.value[1]})"
                continue
            plan.ref_values[call] = result.value

    # -- wave 2 -----------------------------------------------------------------------
    def _candidate_jobs(self, plan: _Plan) -> list[tuple[Job, list[int]]]:
        """One job per distinct candidate program, with the candidates it stands for.

        Sampled candidates often repeat each other; programs with the same syntax tree
        share one run with the union of their calls (each candidate then reads the calls of
        its own suites). The calls run in the reference's order: the Mistake Book's, then
        each suite's.
        """
        problem = plan.rollout.problem
        groups: dict[tuple[str, str], tuple[str, list[str], list[int], str | None]] = {}
        keys: dict[str, tuple[tuple[str, str], str | None]] = {}  # program text -> its key
        for i, code in enumerate(plan.codes):
            if plan.reference_module is None:
                program: str | None = problem.program(code)
            else:
                program = candidate_program(problem.imports, plan.reference_module, plan.modules[i])
            if program is None:  # the reference does not run it: its module does not parse
                program = code
                if plan.modules[i].parsed:  # (it did before its imports were moved)
                    keys.setdefault(program, (("unrunnable", code), "SyntaxError: the module does not parse "
                                               "once its imports are moved to the top of the program"))
            if program not in keys:
                keys[program] = _program_key(program)
            key, syntax_error = keys[program]
            _, calls, members, _ = groups.setdefault(key, (program, [_defines(problem.entry_point)], [], syntax_error))
            members.append(i)
            calls.extend(call for _, _, call in plan.mb_calls if call in plan.ref_values)
            for s in plan.suites[i]:
                for t, dup in zip(s.parsed, s.duplicate):
                    if t.call is not None and not dup and t.call in plan.ref_values:
                        calls.append(t.call)
        plan.cand_calls = [[] for _ in plan.rollout.codes]
        jobs = []
        for program, calls, members, syntax_error in groups.values():
            distinct = list(dict.fromkeys(calls))
            for i in members:
                plan.cand_calls[i] = distinct
            if syntax_error is not None:  # no run needed to know it cannot define the function
                failed = RunResult(status="error", program_error=syntax_error,
                                   calls=[CallResult(status="not-run") for _ in distinct])
                for i in members:
                    plan.cand_runs[i] = failed
                continue
            isolated = [k for k, call in enumerate(distinct) if call in plan.apart]
            limits = self.config.limits
            if not self.config.per_call_timeouts:  # one budget for the whole program, none per call
                limits = replace(limits, call_timeout_s=limits.timeout_s)
            jobs.append((Job(program=program, calls=distinct, limits=limits, isolated=isolated), members))
        return jobs

    # -- scoring ----------------------------------------------------------------------
    def _judge_suite(
        self,
        plan: _Plan,
        suite: _Suite,
        candidate_ok: bool,
        outcome_of: dict[str, tuple[bool, str | None]],
        mb_passed: list[bool],
        memo: ValueMemo,
    ) -> SuiteResult:
        outcomes: list[TestOutcome] = []
        kinds: Counter[str] = Counter()
        valid = 0
        kept_passed: list[bool] = []
        for t, dup in zip(suite.parsed, suite.duplicate):
            if t.call is None:
                kinds[UNPARSABLE] += 1
                outcomes.append(TestOutcome(t.source, None, None, False, False, UNPARSABLE, t.reason))
                continue
            if dup:
                kinds[DUPLICATE] += 1
                reason = "repeats an earlier test of this suite (same call)"
                outcomes.append(TestOutcome(t.source, t.normalized, t.call, False, False, DUPLICATE, reason))
                continue
            if t.call not in plan.ref_values:
                kinds[REFERENCE_RAISED] += 1
                reason = plan.ref_errors.get(t.call, "reference: not run")
                outcomes.append(TestOutcome(t.source, t.normalized, t.call, False, False, REFERENCE_RAISED, reason))
                continue
            ref_value = plan.ref_values[t.call]
            corrected = memo.corrected(t.call, ref_value)
            right = plan.right_expectations.get((t.call, t.expected))
            if right is None:  # the same test recurs across suites: decide it once
                expected_value = None
                if t.expected is not None:
                    expected_value = plan.expected_values.get(t.expected, plan.ref_values.get(t.expected))
                right = expected_value is not None and memo.expectation(expected_value, ref_value)
                plan.right_expectations[(t.call, t.expected)] = right
            passed, failure = outcome_of.get(t.call, (False, "not run")) if candidate_ok else (None, None)
            if passed is not None:
                kept_passed.append(passed)
            if right or not self.config.strict_validity:
                valid += 1  # (the reference counts every kept test, a corrected one too)
            if right:
                outcomes.append(TestOutcome(t.source, corrected, t.call, True, True, passed=passed, failure=failure))
            else:
                kinds[WRONG_EXPECTATION] += 1
                if t.expected in plan.ref_errors:
                    reason = f"expected value does not evaluate ({plan.ref_errors[t.expected]})"
                else:
                    reason = f"expected {shortened(str(t.expected))}, the reference returns {memo.shown(ref_value)}"
                outcomes.append(
                    TestOutcome(t.source, corrected, t.call, False, True, WRONG_EXPECTATION, reason, passed, failure)
                )
        invalid = sum(kinds.values())
        nonprintable = (nonprintable_share(suite.raw, self.config.unicode_printable)
                        if self.config.nonprintable_penalty else 0.0)
        g = self.config.suite_size
        if candidate_ok:
            s = score_suite(valid, invalid, kept_passed, mb_passed, g)
            ratio, gen_pass, gen_fail, mb_pass, pass_score, attack = (
                s.valid_ratio, s.gen_pass_rate, s.gen_fail_rate, s.mb_pass_rate, s.pass_score, s.attack,
            )
        else:
            ratio, gen_pass, gen_fail, mb_pass, pass_score, attack = valid_ratio(valid, invalid, g), 0.0, 0.0, None, 0.0, 0.0
        reward = test_reward(candidate_ok, ratio, attack, self.config.alpha, nonprintable)
        return SuiteResult(
            valid, invalid, dict(kinds), ratio, gen_pass, gen_fail, mb_pass, pass_score, attack, nonprintable, reward,
            outcomes,
        )

    def _finish(self, plan: _Plan) -> ProblemJudgement:
        rollout = plan.rollout
        n = len(rollout.codes)
        ref = plan.ref_run
        assert ref is not None
        infra = None
        reference_error = None
        if ref.status == "infra":
            infra = f"reference run: {ref.infra_error}"
        elif not ref.program_ok:
            reference_error = f"the reference solution does not run: {ref.program_error or ref.status}"
        else:
            broken = [r for r in plan.cand_runs if r is not None and r.status == "infra"]
            if broken:
                infra = f"candidate run: {broken[0].infra_error}"
        if infra or reference_error:
            return self._unjudged(plan, infra, reference_error)

        mb_usable = [(test, call) for _, test, call in plan.mb_calls if call in plan.ref_values]
        mb_skipped = sorted(plan.mb_skipped + [
            (k, plan.ref_errors.get(call, "reference: not run"))
            for k, _, call in plan.mb_calls if call not in plan.ref_values
        ])
        code_valid, code_errors, code_rewards, test_rewards, suites, mb_results = [], [], [], [], [], []
        outcomes: dict[int, dict[str, tuple[bool, str | None]]] = {}  # candidates sharing a run share these
        memo = self.value_memo()
        for i in range(n):
            run = plan.cand_runs[i]
            assert run is not None
            calls = plan.cand_calls[i]
            results = dict(zip(calls, run.calls))
            defined = results.get(calls[0])
            ok = run.program_ok
            error = None
            if not run.program_ok:
                error = f"the code does not run: {run.program_error or run.status}"
            elif self.config.require_definition and not (
                    defined is not None and defined.status == "ok" and defined.value == ["bool", True]):
                ok, error = False, f"the code does not define a function `{rollout.problem.entry_point}`"
            elif not self.config.per_call_timeouts and any(
                    t.call in plan.ref_timed_out for s in plan.suites[i] for t in s.parsed):
                ok, error = False, ("validating its tests on the reference used the program's whole time budget "
                                    f"({self.config.limits.timeout_s:g} s): the code never ran")
            outcome_of = outcomes.get(id(run))
            if outcome_of is None:
                outcome_of = {call: _attack_outcome(r, run, plan.ref_values.get(call), memo)
                              for call, r in results.items()}
                outcomes[id(run)] = outcome_of
            mb_passed = [outcome_of.get(call, (False, None))[0] for _, call in mb_usable] if ok else []
            row = [self._judge_suite(plan, s, ok, outcome_of, mb_passed, memo) for s in plan.suites[i]]
            code_valid.append(ok)
            code_errors.append(error)
            code_rewards.append(code_reward(ok, [s.pass_score for s in row]))
            test_rewards.append([s.reward for s in row])
            suites.append(row)
            mb_results.append(mb_passed if ok else None)
        return ProblemJudgement(
            rollout.problem.id, code_valid, code_errors, code_rewards, test_rewards, suites,
            [test for test, _ in mb_usable], mb_results, mistakes_skipped=mb_skipped,
        )

    def _unjudged(self, plan: _Plan, infra: str | None, reference_error: str | None) -> ProblemJudgement:
        rollout = plan.rollout
        n = len(rollout.codes)
        why = infra or reference_error
        suites = [
            [
                SuiteResult(0, 0, {}, 0.0, 0.0, 0.0, None, 0.0, 0.0, 0.0, 0.0, [
                    TestOutcome(t.source, t.normalized, t.call, False, False, None, why) for t in s.parsed
                ])
                for s in row
            ]
            for row in plan.suites
        ]
        return ProblemJudgement(
            rollout.problem.id, [False] * n, [why] * n, [0.0] * n,
            [[0.0] * len(row) for row in plan.suites], suites, [], [None] * n,
            infra_error=infra, reference_error=reference_error,
        )

    # -- public -----------------------------------------------------------------------
    def judge_step(self, rollouts: Sequence[ProblemRollout]) -> list[ProblemJudgement]:
        """Judge every problem of a step, pipelined on the executor's queue.

        Reference runs are queued first, each as soon as its problem is parsed (the workers
        start while this process parses the rest). When a problem's reference run returns
        (checked between problems while parsing, then continuously),
        its candidate runs are queued at once. Queued candidates start in the order they
        were queued, except that one expected to take long moves ahead by its expected
        time (the reference's time scaled by its share of the calls). So there is no
        barrier between references and candidates, no worker finishes the step alone on a
        run known to be long, and a run that is long against all expectation (a mutant
        that builds huge numbers) still starts early instead of last. A problem is scored
        as soon as its last run returns.
        """
        if any(_kind(r) != "function" for r in rollouts):
            return self._by_kind(rollouts, lambda judge, part: judge.judge_step(part))
        self.progress = JudgeProgress(problems=len(rollouts))
        runs = _Runs(self.executor, self.config.resume_rounds, self.progress)
        results: list[ProblemJudgement | None] = [None] * len(rollouts)
        # (a step's own objects hold no reference cycles, only `ast.dump`'s helper closures
        # do, a few hundred, collected once when the collector resumes, in 15-18 ms with the
        # step's survivors; the executor's threads must not wait long for the lock while this
        # one parses: see codea1.interpreter)
        interval = self.config.switch_interval_s
        with gc_paused(), (quick_handoff(interval) if interval is not None else nullcontext()):
            self._judge_all(rollouts, runs, results)
        assert all(r is not None for r in results)
        return results  # type: ignore[return-value]

    def _judge_all(self, rollouts: Sequence[ProblemRollout], runs: "_Runs",
                   results: list[ProblemJudgement | None]) -> None:
        try:
            for index, rollout in enumerate(rollouts):
                plan = self._plan(rollout)
                if self.config.one_program:
                    self._submit_programs(runs, plan, index, results)
                    runs.drain(block=False)
                    continue
                runs.submit(self._reference_job(plan), _REFERENCE_PRIORITY,
                            lambda run, plan=plan, index=index: self._reference_done(runs, plan, index, run, results))
                runs.drain(block=False)  # queue the candidates of references already back
            runs.drain()
        finally:
            runs.cancel()

    def _scored(self, results: list[ProblemJudgement | None], index: int, plan: _Plan) -> None:
        results[index] = self._finish(plan)
        self.progress.judged += 1

    def _reference_done(self, runs: "_Runs", plan: _Plan, index: int, run: RunResult,
                        results: list[ProblemJudgement | None]) -> None:
        """Read the reference's values and queue the problem's candidate runs."""
        self._absorb_reference(plan, run)
        plan.cand_runs = [None] * len(plan.rollout.codes)
        if run.status == "infra" or not run.program_ok:
            self._scored(results, index, plan)
            return
        jobs = self._candidate_jobs(plan)
        if not jobs:
            self._scored(results, index, plan)
            return
        outstanding = [len(jobs)]
        per_call = run.cpu_s / max(1, len(plan.ref_calls))

        def candidate_done(result: RunResult, members: list[int]) -> None:
            for i in members:
                plan.cand_runs[i] = result
            outstanding[0] -= 1
            if outstanding[0] == 0:
                self._scored(results, index, plan)

        queued_at = runs.elapsed()
        resume = self.config.per_call_timeouts  # (the reference's budget runs out once, for good)
        for job, members in jobs:
            # higher first: earlier queued first, a run expected to take t seconds t seconds earlier
            runs.submit(job, per_call * len(job.calls) - queued_at,
                        lambda result, members=members: candidate_done(result, members), resume=resume)

    # -- one program per candidate (the reference's execution) ------------------------------
    def _submit_programs(self, runs: "_Runs", plan: _Plan, index: int,
                         results: list[ProblemJudgement | None]) -> None:
        """Queue each candidate's one program (candidates whose jobs are identical share a
        run); score the problem when the last returns."""
        programs.plan_programs(self, plan)
        plan.ref_run = RunResult(status="ok", program_ok=True)  # (no reference run of its own)
        plan.cand_runs = [None] * len(plan.rollout.codes)
        jobs: dict[Job, list[int]] = {}
        for i, layout in enumerate(plan.layouts):
            if layout.job is None:
                plan.cand_runs[i] = RunResult(status="error", program_error=layout.whole_program_error)
            else:
                jobs.setdefault(layout.job, []).append(i)
        if not jobs:
            self._scored_programs(results, index, plan)
            return
        outstanding = [len(jobs)]

        def done(result: RunResult, members: list[int]) -> None:
            for i in members:
                plan.cand_runs[i] = result
            outstanding[0] -= 1
            if outstanding[0] == 0:
                self._scored_programs(results, index, plan)

        queued_at = runs.elapsed()
        for job, members in jobs.items():  # (first queued, first run: each problem's runs together)
            runs.submit(job, -queued_at, lambda result, members=members: done(result, members), resume=False)

    def _scored_programs(self, results: list[ProblemJudgement | None], index: int, plan: _Plan) -> None:
        results[index] = programs.finish_programs(self, plan)
        self.progress.judged += 1

    def infra_failures(self, rollouts: Sequence[ProblemRollout], why: str) -> list[ProblemJudgement]:
        """Judgements of problems whose runs were lost (a sandbox node died): unusable, so
        they never train, and no pass/fail is claimed for them. Needs no executor."""
        if any(_kind(r) != "function" for r in rollouts):
            return self._by_kind(rollouts, lambda judge, part: judge.infra_failures(part, why))
        return [self._unjudged(self._plan(r), f"infra: {why}", None) for r in rollouts]

    def close(self) -> None:
        """Nothing to release (`StepJudge.close`): the executor belongs to whoever made it."""

    def judge(self, rollout: ProblemRollout) -> ProblemJudgement:
        """Judge a single problem (the debugging CLI's entry)."""
        return self.judge_step([rollout])[0]

    def evaluate_golden(self, problem: Problem, code: str) -> GoldenResult:
        """Whether `code` (a raw completion or plain code) passes the problem's golden tests."""
        return self.evaluate_golden_many([(problem, code)])[0]

    def evaluate_golden_many(self, items: Sequence[tuple[Problem, str]]) -> list[GoldenResult]:
        """Golden-test results of (problem, raw completion or code) pairs, in parallel runs:
        the code (`lenient_code_fences` as configured) after the problem's imports, under
        `golden_limits`, by the one golden path (`codea1.judge.golden`) that training's
        golden reward, validation and `codea1 eval code` take too."""
        for problem, _code in items:
            if not has_golden(problem):
                raise ValueError(f"problem {problem.id!r} has no golden tests (neither `tests` nor `test_program`)")
        programs = [golden_item(p, self.config.code_of(code)) for p, code in items]
        return golden_results(self.executor, programs, self.config.golden_limits, StdinSettings.of(self.config))

    def _by_kind(self, items: Sequence[ProblemRollout], work) -> list:
        """`work(judge, rollouts of one kind)` for each problem kind among `items`, this
        judge doing the function-level ones; results in order."""
        kinds = [_kind(item) for item in items]
        results: list = [None] * len(items)
        for kind in dict.fromkeys(kinds):
            if kind == "function":
                judge = self
            elif kind in KIND_JUDGES:
                judge = KIND_JUDGES[kind](self.executor, self.config)
                judge.progress = self.progress  # (the training display reads this judge's)
            else:
                raise ValueError(f"no judge for problems of kind {kind!r} (known: function, {', '.join(KIND_JUDGES)})")
            places = [k for k, item_kind in enumerate(kinds) if item_kind == kind]
            for k, result in zip(places, work(judge, [items[k] for k in places])):
                results[k] = result
        return results


#: Reference runs go before every candidate run: each one unblocks eight candidates.
_REFERENCE_PRIORITY = 1e9


class _Runs:
    """The sandbox runs of one step in flight: queue, resume cut-short runs, hand back.

    `submit(job, priority, on_done)` queues a run; `drain()` calls each `on_done(result)` in
    this thread as runs finish (an `on_done` may submit more). A run cut short (its run
    time budget, an output flood) left calls unrun: they are queued again in a fresh run,
    up to `rounds` times, so that one suite's hanging test cannot decide the fate of
    another suite's tests. A resumed run that hits a sandbox failure makes the whole
    result `infra`, never a failed call.
    """

    def __init__(self, executor, rounds: int, progress: JudgeProgress | None = None) -> None:
        self.executor, self.rounds = executor, rounds
        self.progress = progress if progress is not None else JudgeProgress()
        self.started = time.monotonic()
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        self.flight: dict = {}  # future -> _Track

    def elapsed(self) -> float:
        """Seconds since the step started."""
        return time.monotonic() - self.started

    def submit(self, job: Job, priority: float, on_done, resume: bool = True) -> None:
        """Queue `job`; `resume` False: calls its run left unrun stay "not-run"."""
        self._send(_Track(job, priority, on_done, rounds=self.rounds if resume else 0), job)

    def _send(self, track: "_Track", job: Job) -> None:
        future = self.executor.submit(job, priority=track.priority)
        self.progress.runs_queued += 1
        self.flight[future] = track
        future.add_done_callback(self.done.put)

    def drain(self, block: bool = True) -> None:
        """Hand back finished runs: all of them (`block`), or those finished by now."""
        while self.flight:
            try:
                future = self.done.get(block=block)
            except queue.Empty:
                return
            track = self.flight.pop(future, None)
            if track is not None:
                self.progress.runs_done += 1
                self._arrived(track, future.result())

    def cancel(self) -> None:
        for future in self.flight:
            future.cancel()
        self.flight.clear()

    def _arrived(self, track: "_Track", run: RunResult) -> None:
        if track.result is None:
            track.result = run
        elif run.status == "infra":  # never let a sandbox failure count as a failed call
            track.result = replace(track.result, status="infra", infra_error=run.infra_error)
        elif run.program_ok:
            calls = list(track.result.calls)
            for k, call in zip(track.pending, run.calls):
                calls[k] = call
            track.result = replace(track.result, calls=calls)
        result = track.result
        if result.status != "infra" and result.program_ok and track.round < track.rounds:
            pending = [k for k, call in enumerate(result.calls) if call.status == "not-run"]
            if pending:
                track.round += 1
                track.pending = pending
                apart = set(track.job.isolated)
                self._send(track, replace(track.job, calls=[track.job.calls[k] for k in pending],
                                          isolated=[j for j, k in enumerate(pending) if k in apart]))
                return
        track.on_done(result)


@dataclass
class _Track:
    job: Job
    priority: float
    on_done: object
    result: RunResult | None = None
    pending: list[int] = field(default_factory=list)  # indexes of the calls resumed last
    round: int = 0
    rounds: int = 0  # how many times its unrun calls may be resumed


def _exact_expectation_matches(expected: list, actual: list, tol: tuple[float, float]) -> bool:
    """Whether the model's EXPECTED agrees with the reference's value under `exact_types`.

    As in Python's `==`, an int and a float of the same value agree (`== 2` for a function
    returning 2.0 is a right expectation), also inside lists and tuples; everything else is
    the trusted `values_equal`. (The attack itself compares with `values_equal` only.)
    """
    if values_equal(expected, actual, *tol):
        return True
    try:
        kinds = {expected[0], actual[0]}
        if kinds == {"int", "float"}:
            as_float = [
                ["float", float(int(v[1])).hex()] if v[0] == "int" else v for v in (expected, actual)
            ]
            return values_equal(as_float[0], as_float[1], *tol)
        if expected[0] == actual[0] and expected[0] in ("list", "tuple"):
            xs, ys = expected[1], actual[1]
            return len(xs) == len(ys) and all(_exact_expectation_matches(x, y, tol) for x, y in zip(xs, ys))
    except (TypeError, ValueError, IndexError, OverflowError):
        return False
    return False


def _attack_outcome(result: CallResult, run: RunResult, ref_value: list | None,
                    memo: ValueMemo) -> tuple[bool, str | None]:
    """Whether a candidate's call passed (its value equals the reference's, `memo.equal`)
    and, if not, why."""
    if result.status != "ok":
        return False, _call_error(result, run)
    if ref_value is not None and memo.equal(result.value, ref_value):
        return True, None
    return False, memo.wrong(result.value)
