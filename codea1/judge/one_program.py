"""One program per candidate, as the Code-A1 reference runs it (the judge's default).

The reference writes one program for each candidate and runs it once: the import lines of
the reference and the candidate, then (in one `try`) the reference module and, suite by
suite, every test's CALL on the reference (a repeat of the same CALL with the same value
in a suite is a duplicate; a CALL that raises makes its test invalid) and its EXPECTED
next to it; then the reference's functions are deleted and the candidate's module runs;
then the Mistake Book's tests and every kept test of every suite run on the candidate,
in that order. So a stateful function (a counter, a cache, a mutable default) sees every
call in order, the reference's time counts against the candidate's budget, and a
`sys.exit()`, `os._exit()` or crash in one call ends the program: the calls after it fail.
(One deviation: the EXPECTED of a Mistake Book test that is not a literal, which the
reference evaluates after the candidate's module, is evaluated here with the reference's
checks, before the candidate's code can rebind what it uses.)

`program_job` builds that program as one sandbox `Job` (`Job.one_process`, with the
modules as statement steps and the candidate's calls gated on their reference call:
`Job.requires`, `Job.distinct`); `read_run` reads the run back into per-test facts. The
values still cross to this process and are compared here (`python_equal`): the
candidate's `__eq__` is never trusted (a documented deviation).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field, replace

from codea1.judge.programs import HoistedModule
from codea1.sandbox import CallResult, Job, Limits, RunResult

__all__ = ["ProgramLayout", "RunFacts", "program_job", "read_run"]

_COMPILE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


def _compile_error(code: str) -> str | None:
    """Why `code` does not compile (a statement the parser accepts but the compiler does
    not: `return` outside a function, a late `from __future__`), or None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(code, "<program>", "exec", dont_inherit=True)
        except _COMPILE_ERRORS as err:
            return f"{type(err).__name__}: {getattr(err, 'msg', err)}"
    return None


@dataclass
class ProgramLayout:
    """Where each piece of a candidate's program sits in its job's calls.

    Per suite and test (`None` for a piece that is no test): `ref[j][k]` the CALL on the
    reference, `exp[j][k]` its EXPECTED when that is not a literal, `cand[j][k]` the CALL
    on the candidate. `book[m]`: (CALL on the candidate, EXPECTED evaluated before the
    candidate's module, or None when the parent reads it) of the m-th replayed Mistake
    Book test. `whole_program_error`: the reference would not compile the program at all
    (nothing runs: no job).
    """

    job: Job | None
    reference_module: int = -1
    candidate_module: int | None = None
    defines: int | None = None
    ref: list[list[int | None]] = field(default_factory=list)
    exp: list[list[int | None]] = field(default_factory=list)
    cand: list[list[int | None]] = field(default_factory=list)
    book: list[tuple[int, int | None]] = field(default_factory=list)
    candidate_error: str | None = None  # why the candidate's module cannot run (no run needed)
    whole_program_error: str | None = None


class _Calls:
    """The job's calls as they are added, with their flow."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.statements: list[int] = []
        self.requires: list[tuple[int, tuple[int, ...]]] = []
        self.distinct: list[tuple[int, str]] = []

    def add(self, text: str, needs: tuple[int, ...] = (), statement: bool = False, key: str | None = None) -> int:
        k = len(self.texts)
        self.texts.append(text)
        if statement:
            self.statements.append(k)
        if needs:
            self.requires.append((k, needs))
        if key is not None:
            self.distinct.append((k, key))
        return k


def _guarded_deletes(functions: set[str]) -> str:
    lines = []
    for name in sorted(functions):
        lines += ["try:", f"    del {name}", "except Exception:", "    pass"]
    return "\n".join(lines) or "pass"


def program_job(assumed_imports: str, reference: HoistedModule, candidate: HoistedModule,
                suites: list[list[tuple[str | None, str | None, bool]]], book: list[tuple[str, str | None]],
                limits: Limits, entry_point: str | None = None) -> ProgramLayout:
    """The candidate's one program (module docstring).

    `suites[j]` lists the tests of suite j as `(CALL, EXPECTED, expected_is_literal)`
    (CALL None: no test); `book` the replayed Mistake Book tests as `(CALL, EXPECTED or
    None when the parent reads it)`; `entry_point`: add a check that the candidate defines
    it (`judge.require_definition`)."""
    imports = [assumed_imports.strip()] if assumed_imports.strip() else []
    imports += sorted(reference.imports | candidate.imports)
    program = "\n".join(imports) + "\n"
    if reference.body is None or not reference.parsed:
        return ProgramLayout(None, whole_program_error="the reference's module does not parse once its imports "
                                                       "are moved to the top of the program")
    calls = _Calls()
    layout = ProgramLayout(None)
    layout.reference_module = calls.add(reference.body, statement=True)
    for j, suite in enumerate(suites):
        refs, exps = [], []
        for call, expected, literal in suite:
            r = None if call is None else calls.add(call, (layout.reference_module,), key=f"{j}\x00{call}")
            refs.append(r)
            exps.append(calls.add(expected, (r,)) if r is not None and expected is not None and not literal else None)
        layout.ref.append(refs)
        layout.exp.append(exps)
    runs = candidate.parsed and candidate.body is not None
    # (before the candidate's code, which could otherwise rebind what the expected value uses)
    book_expected = [None if expected is None or not runs else calls.add(expected) for _, expected in book]
    calls.add(_guarded_deletes(reference.functions), statement=True)
    if not runs:
        layout.candidate_error = "the code does not run: SyntaxError: the module does not parse" + (
            " once its imports are moved to the top of the program" if candidate.parsed else "")
    else:
        c = layout.candidate_module = calls.add(candidate.body, statement=True)
        if entry_point is not None:
            layout.defines = calls.add(f"callable(globals().get({entry_point!r}))", (c,))
        layout.book = [(calls.add(call, (c,)), e) for (call, _), e in zip(book, book_expected)]
        layout.cand = [[None if r is None else calls.add(suite[k][0], (c, r))  # type: ignore[arg-type]
                        for k, r in enumerate(refs)] for suite, refs in zip(suites, layout.ref)]
    limits = replace(limits, call_timeout_s=limits.timeout_s, stop_on_output=False)
    layout.job = Job(program=program, calls=calls.texts, limits=limits, statements=calls.statements,
                     requires=calls.requires, distinct=calls.distinct, one_process=True)
    return layout


@dataclass
class RunFacts:
    """What one candidate's run says, per piece (see `read_run`)."""

    program_ran: bool  # the import lines ran (else nothing did)
    reference_ok: bool  # the reference module ran to its end
    candidate_ok: bool  # the candidate module ran to its end
    candidate_error: str | None
    alive_until: int  # the first call the program never reached (it ended there)
    results: list[CallResult]


def _dead(result: CallResult) -> bool:
    """The program ended before this call (not skipped by the flow)."""
    return result.status == "timeout" or (result.status == "not-run" and result.error != "skipped")


def _not_compiled(layout: ProgramLayout, run: RunResult) -> str | None:
    """Why the reference would not have compiled the whole program, or None. A module
    step that failed with a SyntaxError may be one the parser accepts and the compiler
    refuses (`return` outside a function): then the reference's program, one file, never
    starts (checked here only for such a failure: compiling costs the judge time)."""
    job = layout.job
    assert job is not None
    for k in (layout.reference_module, layout.candidate_module):
        if k is not None and (run.calls[k].error or "").startswith("SyntaxError"):
            error = _compile_error(job.calls[k])
            if error is not None:
                return f"the program does not compile: {error}"
    return None


def read_run(layout: ProgramLayout, run: RunResult) -> RunFacts:
    """The facts of a candidate's run; `alive_until` is where the program ended (the
    call that timed out, or the first one it never reached)."""
    results = list(run.calls)
    why = None if not run.program_ok else _not_compiled(layout, run)
    if not run.program_ok or why is not None:
        why = why or f"the program does not run: {run.program_error or run.status}"
        return RunFacts(False, False, False, why, 0, results)
    alive_until = next((k for k, r in enumerate(results) if _dead(r)), len(results))
    ref_ok = results[layout.reference_module].status == "ok"
    c = layout.candidate_module
    if c is None:
        return RunFacts(True, ref_ok, False, layout.candidate_error, alive_until, results)
    module = results[c]
    cand_ok = module.status == "ok"
    error = None
    if not cand_ok and _dead(module):
        error = ("the program's time budget ran out before the code ran (the reference's checks of its tests)"
                 if run.status == "timeout" else "the program ended before the code ran")
    elif not cand_ok:
        error = f"the code does not run: {module.error or module.status}"
    return RunFacts(True, ref_ok, cand_ok, error, alive_until, results)


def value_key(value: list) -> str:
    """A value's identity, its JSON text, which tells apart every two encodings (plain JSON
    data) that differ: what `ValueMemo.key` falls back to among many values of one shape
    (for the reference's duplicate rule, the same CALL and the same value in one suite)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)
