"""`codea1 eval tests` on stdin problems: the test model's input/output tests, scored on
the reference program and its mutants.

- a test *passes* (is valid) when the reference, run on its input, prints its output
  (tokens; the problem's float tolerance; its checker where it has one): `pass@k` is the
  share of the k slots holding a valid test, as for functions;
- a mutant of the reference program (the same Cosmic-Ray operators, `codea1.eval.mutation`)
  is *killed* when, on the input of a valid test, it fails (error, time, memory, output
  cap) or prints something other than the reference's output: `mut@k` is the killed share
  (UnLeakedTestBench's rule: scored only where all k tests are valid), the attack rate of
  the tests on plausible wrong programs. A mutant whose run the sandbox lost is neither
  killed nor counted; a lost reference or checker run raises (no verdict on the tests).
Line coverage is not measured for programs (`statements` 0).

`codea1 eval select` reads the generated suites' distinct input/output pairs
(`stdin_generated_tests`) and runs each candidate program on their inputs
(`run_stdin_generated_tests`): a candidate passes a test when it prints the test's output
(tokens; the float tolerance; the problem's checker where it has one, as in training).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codea1.data.problem import read_io_test
from codea1.data.stdin_io import checker_of, io_test, outputs_match, parse_io_tests, time_limit_of, tolerance_of
from codea1.eval.mutation import FAMILIES, generate_mutants
from codea1.judge.extract import extract_code
from codea1.judge.golden import StdinSettings, stdin_limits
from codea1.eval.mutation_testing import MutationConfig
from codea1.sandbox import Limits, RunResult
from codea1.sandbox.stdio import checker_job, checker_verdicts, program_outputs, stdin_job

if TYPE_CHECKING:
    from codea1.data import Problem

__all__ = ["StdinCandidateResult", "StdinGeneratedTest", "run_stdin_generated_tests", "score_stdin_tests",
           "select_stdin_tests", "stdin_generated_tests"]


def select_stdin_tests(completion: str, k: int) -> list[str]:
    """The first `k` readable input/output tests of a completion, canonical
    (`stdin_io.io_test`); unreadable ones are skipped, as non-assert lines are for functions."""
    return [io_test(t.input, t.output or "") for t in parse_io_tests(completion) if t.input is not None][:k]


def _right(executor, problem: Problem, pairs: list[tuple[str, str, str]], limits: Limits) -> list[bool]:
    """Whether each (input, expected, printed) is a right answer, by the training judge's rule
    (`StdinJudge._matches`): the checker (one run of `checker_job`) or tokens."""
    checker = checker_of(problem)
    if checker is None:
        return [outputs_match(out, exp, tolerance_of(problem)) for _, exp, out in pairs]
    if not pairs:
        return []
    return checker_verdicts(_ran(executor.run(checker_job(checker, pairs, limits))), len(pairs))


def _ran(run: RunResult) -> RunResult:
    """`run`, unless the sandbox lost it: a sandbox failure is no verdict on the tests."""
    if run.status == "infra":
        raise RuntimeError(f"sandbox infrastructure failure while running tests: {run.infra_error}")
    return run


def score_stdin_tests(executor, problem: Problem, tests: Sequence[str], k: int, *,
                      families: Sequence[str] = FAMILIES, config: MutationConfig = MutationConfig(),
                      style: str = "text", dedupe: bool = False, settings: StdinSettings = StdinSettings()) -> dict:
    """pass@k and mut@k of `tests` (canonical stdin tests, at most k) on `problem`'s reference:
    the fields of `codea1.eval.tests_eval.FunctionScore`. `settings`: the problem's time
    limit per input is scaled by its time scale (at least the mutation budget's
    `call_timeout_s`), and a run may print its output cap."""
    tests = list(tests)[:k]
    parsed = [read_io_test(t, f"problem {problem.id}, test {i}") for i, t in enumerate(tests)]
    per_input = max(config.call_timeout_s, time_limit_of(problem, config.call_timeout_s) * settings.time_scale)
    limits = Limits(timeout_s=config.program_timeout_s, call_timeout_s=per_input, memory_mb=config.memory_mb)
    cap = settings.max_output_bytes
    inputs = [t.input for t in parsed]
    ref = program_outputs(_ran(executor.run(stdin_job(problem.reference, inputs, limits, cap))), len(inputs))
    right = _right(executor, problem, [(t.input, r.stdout, t.output) for t, r in zip(parsed, ref)], limits)
    passes = [r.ok and ok for r, ok in zip(ref, right)]
    mutants = generate_mutants(problem.reference, families, style=style, dedupe=dedupe)
    valid = [(t.input, r.stdout) for t, r, ok in zip(parsed, ref, passes) if ok]
    killed, lost, survivors = 0, 0, []
    runnable = [m for m in mutants if m.compiles]
    killed += len(mutants) - len(runnable)  # a mutant that does not compile is killed without a run
    runs = executor.run_many([stdin_job(m.source, [i for i, _ in valid], limits, cap) for m in runnable]) if valid else []
    for mutant, run in zip(runnable, runs):
        if run.status == "infra":  # neither killed nor survived, as for functions (MutationReport.total)
            lost += 1
            continue
        outs = program_outputs(run, len(valid))
        same = _right(executor, problem, [(i, exp, o.stdout) for (i, exp), o in zip(valid, outs)], limits)
        if all(o.ok for o in outs) and all(same):
            survivors.append(mutant.description)
        else:
            killed += 1
    if not valid:
        survivors = [m.description for m in runnable]
    return {"problem_id": problem.id, "tests": tests, "passes": passes + [False] * (k - len(tests)),
            "mutants": len(mutants) - lost, "killed": killed, "equivalent_looking": 0, "survivors": survivors, "k": k}


# ---- `codea1 eval select` with generated input/output tests ------------------------------


@dataclass(frozen=True)
class StdinGeneratedTest:
    """One distinct input/output pair of a problem's generated suites (`text`: canonical)."""

    text: str
    input: str
    output: str


@dataclass
class StdinCandidateResult:
    passes: list[bool]   # per generated test: printed a right output (`_right`: tokens or the checker)
    behaviour: tuple     # what it printed on every input (tokens), or how its run failed
    error: str | None = None


def stdin_generated_tests(suites: Sequence[str]) -> list[StdinGeneratedTest]:
    """The distinct readable tests of all suites (same input and output: one test)."""
    seen: dict[tuple[str, tuple[str, ...]], StdinGeneratedTest] = {}
    for raw in suites:
        for t in parse_io_tests(raw):
            if t.input is None:
                continue
            key = (t.key, tuple((t.output or "").split()))  # (the first one's input is run, as written)
            seen.setdefault(key, StdinGeneratedTest(io_test(t.input, t.output or ""), t.input, t.output or ""))
    return list(seen.values())


def run_stdin_generated_tests(executor, problem: Problem, codes: Sequence[str],
                              tests: Sequence[StdinGeneratedTest], limits: Limits,
                              settings: StdinSettings = StdinSettings()) -> list[StdinCandidateResult]:
    """Each candidate (a raw completion) on every generated input; its output compared with
    the test's (no reference is involved: the tests are the model's), with the problem's
    checker where it has one (one run for all candidates). Identical programs share one run,
    under the training judge's limits of a run (`stdin_limits`: `settings`' time scale, the
    problem's time limit per input, else `limits.call_timeout_s`) and output cap."""
    programs = [extract_code(c) for c in codes]
    distinct = list(dict.fromkeys(programs))
    inputs = list(dict.fromkeys(t.input for t in tests))
    limits = stdin_limits(problem, limits, settings)
    runs = executor.run_many([stdin_job(p, inputs, limits, settings.max_output_bytes) for p in distinct]) \
        if distinct and inputs else []
    printed_by = []
    for run in runs:
        if run.status == "infra":
            raise RuntimeError(f"sandbox failure: {run.infra_error}")
        printed_by.append(dict(zip(inputs, program_outputs(run, len(inputs)))))
    triples = list(dict.fromkeys((t.input, t.output, printed[t.input].stdout) for printed in printed_by
                                 for t in tests if printed[t.input].ok))
    right = dict(zip(triples, _right(executor, problem, triples, limits)))
    by_program = {}
    for program, run, printed in zip(distinct, runs, printed_by):
        passes = [printed[t.input].ok and right[(t.input, t.output, printed[t.input].stdout)] for t in tests]
        behaviour = tuple(tuple(o.stdout.split()) if o.ok else ("!" + o.status,) for o in printed.values())
        by_program[program] = StdinCandidateResult(passes, behaviour, None if run.program_ok else run.program_error)
    empty = StdinCandidateResult([], ())
    return [by_program.get(p, empty) for p in programs]
