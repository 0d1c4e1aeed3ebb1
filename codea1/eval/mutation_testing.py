"""Mutation testing on the sandboxed executor: which mutants of a reference do tests kill.

A test is a snippet of Python (setup statements, then one or more asserts) that passes
when it runs to its end. Every test is wrapped in a function appended to the program
under test. On the reference each test is its own call (its own verdict and time-out);
on a mutant all tests run in one call that stops at the first failure, since that is
all a kill needs and a hanging mutant then costs one time-out. The untrusted test code
and the mutants only ever run inside the sandbox.

A test that fails on the reference itself would "kill" every mutant, so only the tests
that pass on the reference count as killers (Cosmic-Ray likewise refuses to run on a
failing baseline). A mutant survives when none of them fails on it; when the problem's
golden tests (asserts or test program, where the problem has them) do not kill it either,
it is reported as *equivalent-looking*: most likely a mutant no test could tell apart.

A mutant whose text does not compile (a ``text``-style edit such as ``x != not 1``) is
killed without a run: Cosmic-Ray's pytest run fails at collection on it, and
UnLeakedTestBench counts that as killed.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from codea1.eval.mutation import Mutant, generate_mutants
from codea1.sandbox import Job, Limits

MutantStatus = Literal["killed", "survived", "equivalent-looking", "infra"]

_FN = "__codea1_test_{}"


@dataclass(frozen=True)
class MutationConfig:
    """Time budgets of mutant runs; a mutant that loops forever counts as killed once its
    call has used ``call_timeout_s`` (or ``slowdown`` times the reference's time, if larger)."""

    call_timeout_s: float = 1.0
    program_timeout_s: float = 5.0
    slowdown: float = 10.0
    memory_mb: int = 1024


@dataclass
class MutantOutcome:
    """``killed_by``: index (among the scored tests) of the first test that failed on the
    mutant; None when it survived, or when it was killed by a hang or a crash at import."""

    mutant: Mutant
    status: MutantStatus
    killed_by: int | None = None
    detail: str | None = None


@dataclass
class MutationReport:
    """The mutation analysis of one program under one set of tests."""

    tests: list[str]
    test_passes_reference: list[bool]
    test_errors: list[str | None]
    outcomes: list[MutantOutcome]

    @property
    def total(self) -> int:
        """Mutants that ran (infrastructure failures are neither killed nor survived)."""
        return sum(o.status != "infra" for o in self.outcomes)

    @property
    def killed(self) -> int:
        return sum(o.status == "killed" for o in self.outcomes)

    @property
    def equivalent_looking(self) -> int:
        return sum(o.status == "equivalent-looking" for o in self.outcomes)

    @property
    def score(self) -> float:
        """Killed mutants in percent of all mutants (Cosmic-Ray's mutation score)."""
        return 100.0 * self.killed / self.total if self.total else 0.0


def wrap_test(index: int, test: str) -> str:
    """The test snippet as a function the executor can call; raises ValueError when the
    snippet is not a plain block of statements (or is nested too deeply for the parser or
    for this check to read: a test model's answer may be built to be)."""
    body = textwrap.dedent(test).strip("\n")
    try:
        tree = ast.parse(body)
        if not tree.body:
            raise ValueError("test is empty")
        if _own_scope_has(tree, (ast.Yield, ast.YieldFrom, ast.Await, ast.Return)):
            raise ValueError("a test may not return, yield or await")
        text = f"def {_FN.format(index)}():\n" + textwrap.indent(body, "    ") + "\n"
        ast.parse(text)  # a snippet using `nonlocal`/`global` oddly fails here, not in the sandbox
    except (SyntaxError, RecursionError, MemoryError, OverflowError) as exc:
        raise ValueError(f"test does not parse: {getattr(exc, 'msg', None) or type(exc).__name__}") from exc
    return text


def _own_scope_has(node: ast.AST, kinds: tuple[type, ...]) -> bool:
    """Whether ``node`` holds one of ``kinds`` outside nested functions and classes."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, kinds):
            return True
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if _own_scope_has(child, kinds):
            return True
    return False


def harness(program: str, tests: Sequence[str]) -> tuple[str, list[str], list[str | None]]:
    """``program`` with every parseable test appended as a function, the call running each
    (``""`` for a test that does not parse), and the parse error per test."""
    parts, calls, errors = [program.rstrip("\n"), ""], [], []
    for i, test in enumerate(tests):
        try:
            parts.append(wrap_test(i, test))
        except ValueError as exc:
            calls.append("")
            errors.append(str(exc))
            continue
        calls.append(f"{_FN.format(i)}()")
        errors.append(None)
    return "\n\n".join(parts) + "\n", calls, errors


def quiet(limits):
    """``limits`` (default ones for None) letting a run print as much as it likes: pytest,
    under which UnLeakedTestBench runs the tests, captures the output whole, so how much
    the reference or a mutant prints must never fail a test or kill a mutant (past the
    bound the output is read and dropped, see ``Limits.stop_on_output``)."""

    return replace(limits or Limits(), stop_on_output=False)


def _limits(base, call_timeout: float, n_calls: int, cfg: MutationConfig, program_s: float | None = None):
    """Limits of one mutant run: the program's own budget plus one call budget per test."""

    return replace(
        quiet(base),
        call_timeout_s=call_timeout,
        timeout_s=(program_s or cfg.program_timeout_s) + call_timeout * n_calls,
        memory_mb=cfg.memory_mb,
    )


def _call_failed(run, pos: int) -> bool:
    if not run.program_ok:
        return True
    if pos >= len(run.calls):
        return True
    return run.calls[pos].status != "ok"


#: The call that runs a first_failure_program's tests: the index of the first failing one, -1 if none.
FIRST_FAILURE_CALL = "__codea1_first_failure()"
_ALL_CALL = FIRST_FAILURE_CALL


def first_failure_program(program: str, tests: Sequence[str]) -> str:
    """``program`` with the tests appended and one function running them in order that
    returns the index of the first failing one (-1: all pass).

    Whether a mutant is killed needs only its first failing test, so all tests run in
    one call: a mutant that hangs costs one time-out, not one per test (hangs are
    common: `i += 1` -> `i += 0`, `break` -> `continue`).
    """
    text, calls, errors = harness(program, tests)
    if any(e is not None for e in errors):
        raise ValueError(f"tests must parse to be run as killers: {[e for e in errors if e][0]}")
    names = ", ".join(c[:-2] for c in calls)
    return text + (
        f"\n\ndef {_ALL_CALL[:-2]}():\n"
        f"    for index, test in enumerate(({names},)):\n"
        "        try:\n"
        "            test()\n"
        "        except Exception:\n"
        "            return index\n"
        "    return -1\n"
    )


def _outcome(mutant: Mutant, run, killers: list[int], call_timeout: float) -> MutantOutcome:
    if run.status == "infra":
        return MutantOutcome(mutant, "infra", detail=run.infra_error)
    if not run.program_ok:
        return MutantOutcome(mutant, "killed", None, f"the mutant does not run: {run.program_error or run.status}")
    call = run.calls[0] if run.calls else None
    if call is None or call.status != "ok":
        why = "no result" if call is None else (
            f"hangs (over {call_timeout:.1f} s)" if call.status == "timeout" else (call.error or call.status))
        return MutantOutcome(mutant, "killed", None, why)
    value = call.value
    if not (isinstance(value, list) and len(value) == 2 and value[0] == "int"):
        return MutantOutcome(mutant, "killed", None, f"the test runner returned {value!r}")
    index = int(value[1])
    if index < 0:
        return MutantOutcome(mutant, "survived")
    return MutantOutcome(mutant, "killed", killers[index], "a test failed")


def run_tests(executor, program: str, tests: Sequence[str], limits=None) -> tuple[list[bool], list[str | None], float]:
    """Run each test on ``program``: whether it passed, why not, and the run's wall time."""

    text, calls, errors = harness(program, tests)
    runnable = [c for c in calls if c]
    run = executor.run(Job(program=text, calls=runnable, limits=quiet(limits)))
    if run.status == "infra":
        raise RuntimeError(f"sandbox infrastructure failure while running tests: {run.infra_error}")
    passed: list[bool] = []
    pos = 0
    for call, err in zip(calls, errors):
        if not call:
            passed.append(False)
            continue
        ok = not _call_failed(run, pos)
        if not ok and err is None:
            if not run.program_ok:
                errors[len(passed)] = f"program failed: {run.program_error or run.status}"
            else:
                res = run.calls[pos] if pos < len(run.calls) else None
                errors[len(passed)] = (res.error if res else None) or (res.status if res else "not run")
        passed.append(ok)
        pos += 1
    return passed, errors, run.wall_s


def analyse(
    executor,
    reference: str,
    tests: Sequence[str],
    *,
    mutants: Sequence[Mutant] | None = None,
    golden_tests: Sequence[str] = (),
    golden_program: str | None = None,
    config: MutationConfig = MutationConfig(),
    limits=None,
    header: str = "",
) -> MutationReport:
    """Score ``tests`` by the mutants of ``reference`` they kill.

    ``golden_tests`` (snippets) and ``golden_program`` (a program that raises on failure
    when run after the code) are only used to tell survived mutants from
    equivalent-looking ones; they never count towards the score. ``header`` (imports a
    benchmark assumes, e.g. UnLeakedTestBench's) runs before the reference and before
    every mutant; it is not mutated.
    """

    tests = list(tests)
    if mutants is None:
        mutants = generate_mutants(reference)
    prefix = header.rstrip("\n") + "\n\n" if header.strip() else ""
    passes, errors, ref_wall = run_tests(executor, prefix + reference, tests, limits)
    killers = [i for i, ok in enumerate(passes) if ok]
    call_timeout = max(config.call_timeout_s, config.slowdown * ref_wall)
    outcomes: dict[int, MutantOutcome] = {}
    for pos, m in enumerate(mutants):
        if not m.compiles:
            outcomes[pos] = MutantOutcome(m, "killed", None, "the mutant does not compile (syntax error)")
    runnable = [(pos, m) for pos, m in enumerate(mutants) if pos not in outcomes]

    if killers:
        killer_tests = [tests[i] for i in killers]
        jobs = []
        for _, m in runnable:
            text = first_failure_program(prefix + m.source, killer_tests)
            jobs.append(Job(program=text, calls=[_ALL_CALL], limits=_limits(limits, call_timeout, 1, config)))
        for (pos, m), run in zip(runnable, executor.run_many(jobs)):
            outcomes[pos] = _outcome(m, run, killers, call_timeout)
    else:
        outcomes.update({pos: MutantOutcome(m, "survived") for pos, m in runnable})
    ordered = [outcomes[pos] for pos in range(len(mutants))]

    survivors = [o for o in ordered if o.status == "survived"]
    if survivors:
        _classify_survivors(executor, prefix, reference, survivors, golden_tests, golden_program,
                            call_timeout, config, limits)
    return MutationReport(tests, passes, errors, ordered)


def _classify_survivors(executor, prefix, reference, survivors, golden_tests, golden_program,
                        call_timeout, config, limits) -> None:
    """Mark survivors that no golden test kills either as equivalent-looking."""

    golden_ok: list[str] = []
    golden_s = 0.0
    reference = prefix + reference
    if golden_tests:
        passes, _, golden_s = run_tests(executor, reference, golden_tests, limits)
        golden_ok = [t for t, ok in zip(golden_tests, passes) if ok]
    use_program = False
    if golden_program:
        program_limits = _limits(limits, call_timeout, 0, config,
                                 program_s=max(config.program_timeout_s, 60.0))
        base = executor.run(Job(program=reference.rstrip("\n") + "\n\n" + golden_program, limits=program_limits))
        use_program = base.program_ok
        program_limits = _limits(limits, call_timeout, 0, config,
                                 program_s=max(config.program_timeout_s, config.slowdown * base.wall_s))
    if not golden_ok and not use_program:
        return  # nothing else to ask: a survivor stays "survived", equivalence unknown
    still = list(survivors)
    if golden_ok:
        budget = max(call_timeout, config.slowdown * golden_s)
        jobs = [Job(program=first_failure_program(prefix + o.mutant.source, golden_ok), calls=[_ALL_CALL],
                    limits=_limits(limits, budget, 1, config)) for o in still]
        runs = executor.run_many(jobs)
        golden_idx = list(range(len(golden_ok)))
        still = [o for o, r in zip(still, runs) if _outcome(o.mutant, r, golden_idx, budget).status == "survived"]
    if use_program and still:
        jobs = [Job(program=prefix + o.mutant.source.rstrip("\n") + "\n\n" + golden_program, limits=program_limits)
                for o in still]
        runs = executor.run_many(jobs)
        still = [o for o, r in zip(still, runs) if r.status != "infra" and r.program_ok]
    for o in still:
        o.status = "equivalent-looking"
