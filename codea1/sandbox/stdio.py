"""Standard-input programs in the sandbox: one run per program, one fork per input.

A contest program reads its input from standard input and prints its answer. It runs
here as the executor's ordinary `Job`: the job's program is a small harness that compiles
the untrusted source (a syntax error fails the run's program, so the code is invalid);
each call `_codea1_stdin(INPUT)` is evaluated in a fork of its own (`Job.isolated`), which
puts INPUT on file descriptor 0 (an in-memory file: `input()`, `sys.stdin`,
`sys.stdin.buffer` and `open(0)` all read it), points descriptors 1 and 2 at in-memory
files, runs the program as `__main__` (ending as Python's exit does: it waits for the
threads that are not daemons, runs the `atexit` handlers the program registered, flushes
standard output, then clears the program's globals, so a file it opened on descriptor 1
flushes too), and returns `[status, stdout, error]`. The handlers registered before the
program (the worker's own) are dropped first: only the program's run, in the reverse order
of registration, within the input's time limit; one that raises is reported on standard
error and ignored, and the exit status stays the program's, as in CPython.
So the warm interpreter is reused, every input gets a fresh copy of the same state, and
nothing one input's run does (globals, files, `sys.exit`) is seen by another's.

The call's time limit (`Limits.call_timeout_s`) is the per-input time limit, enforced
from outside by the executor; a run killed by it resumes the remaining inputs in a fresh
run. Output beyond `max_output_bytes` is the status `output-limit` (written to memory,
never to the worker's pipes, so an output flood costs only its own input). Expected
outputs never enter the sandbox: the caller compares in its own process.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass, replace
from typing import Sequence

from codea1.sandbox.types import CallResult, Job, Limits, RunResult

__all__ = ["DEFAULT_MAX_OUTPUT_BYTES", "ProgramOutput", "checker_job", "checker_verdicts", "harness",
           "program_outputs", "stdin_job"]

#: What one run of a program may print before it counts as `output-limit`.
DEFAULT_MAX_OUTPUT_BYTES = 4 << 20
#: The function each call invokes in the harness.
RUN_NAME = "_codea1_stdin"

_HARNESS = '''\
import atexit as _codea1_atexit, builtins as _codea1_builtins, io as _codea1_io, os as _codea1_os, sys as _codea1_sys
# taken before any program runs: Python's exit calls its own, not what a program puts in the module
_codea1_exitfuncs = (_codea1_atexit._clear, _codea1_atexit._run_exitfuncs)
_codea1_source = {source!r}
_codea1_code = compile(_codea1_source, "program.py", "exec", dont_inherit=True)
# the program's text is program.py's in the run's linecache (inspect.getsource), in place of this harness's
__import__("codea1.sandbox._child", fromlist=["_show_source"])._show_source([_codea1_source], 0)
del _codea1_source
_codea1_cap = {cap!r}
# the frames between the call and the program's code that a plain `python program.py` does not
# count (the harness's own; measured: tests/test_stdin_judge.py, the recursion headroom test)
_CODEA1_FRAMES = 4


def _codea1_exits_zero(code):
    # python program.py's exit status is 0: None, or an int (bool included) that is 0 modulo 256
    # and fits a C long; any other object exits 1 (no method of the program's is called)
    if code is None:
        return True
    if not isinstance(code, int):
        return False
    value = int.__int__(code)
    return -(1 << 63) <= value < (1 << 63) and value & 0xFF == 0


def _codea1_text(value):
    # str() of the program's object, which may raise: its type's name then
    try:
        return str(value)
    except BaseException:
        return "<" + type(value).__name__ + ">"


def _codea1_memfile(name):
    try:
        return _codea1_os.memfd_create(name)
    except (AttributeError, OSError):
        fd = _codea1_os.open("." + name, _codea1_os.O_RDWR | _codea1_os.O_CREAT | _codea1_os.O_TRUNC, 0o600)
        _codea1_os.unlink("." + name)
        return fd


def _codea1_stdin(data):
    os, io, sys = _codea1_os, _codea1_io, _codea1_sys
    me = os.getpid()
    fd = _codea1_memfile("stdin")
    view = memoryview(data.encode("utf-8"))
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, 0)
    os.dup2(fd, 0)
    os.close(fd)
    out, err = _codea1_memfile("stdout"), _codea1_memfile("stderr")
    os.dup2(out, 1)
    os.dup2(err, 2)
    stdout = io.open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stdin = sys.__stdin__ = io.open(0, "r", encoding="utf-8", errors="replace", closefd=False)
    sys.stdout = sys.__stdout__ = stdout
    sys.stderr = sys.__stderr__ = io.open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    status, error = "ok", None
    clear_exitfuncs, run_exitfuncs = _codea1_exitfuncs
    clear_exitfuncs()  # what was registered before the program (the worker's) is not the program's to run
    sys.setrecursionlimit(sys.getrecursionlimit() + _CODEA1_FRAMES)
    program_globals = {{"__name__": "__main__", "__builtins__": _codea1_builtins, "__file__": "program.py",
                       "__cached__": None}}
    try:
        exec(_codea1_code, program_globals)
    except SystemExit as e:
        if not _codea1_exits_zero(e.code):
            status, error = "error", "SystemExit: " + _codea1_text(e.code)[:200]
    except MemoryError as e:
        status, error = "memory", ("MemoryError: " + _codea1_text(e))[:500]
    except BaseException as e:
        status, error = "error", (type(e).__name__ + ": " + _codea1_text(e))[:500]
    if os.getpid() != me:  # a fork the program made and did not end: leave the output to the original
        os._exit(0)
    threading = sys.modules.get("threading")
    if status == "ok" and threading is not None:
        # as Python's exit does (threading._shutdown): the threading module's exit calls first (an
        # executor of concurrent.futures ends its idle workers there: else the wait below never ends)
        for call in reversed(list(getattr(threading, "_threading_atexits", ()))):
            try:
                call()
            except BaseException:
                pass
        try:  # then wait for the threads that are not daemons (what they print counts)
            current = threading.current_thread()
            while True:
                waiting = [t for t in threading.enumerate() if t is not current and not t.daemon]
                if not waiting:
                    break
                for t in waiting:
                    t.join()
        except BaseException:
            pass
    try:  # then, as Python's exit does whatever the program's status: its atexit handlers, last first
        # (one that raises is printed on stderr and ignored: the status stays the program's)
        run_exitfuncs()
    except BaseException:
        pass
    if os.getpid() != me:  # a fork made by an exit call or handler: it too leaves the output to the original
        os._exit(0)
    for stream in (sys.stdout, stdout):
        try:
            stream.flush()
        except BaseException:
            pass
    if status == "ok":
        try:  # then, as Python's exit clears the modules: a file the program opened on fd 1 flushes
            program_globals.clear()
        except BaseException:
            pass
    size = os.lseek(out, 0, 2)
    if size > _codea1_cap:
        return ["output-limit", "", "printed " + str(size) + " bytes, over the limit of " + str(_codea1_cap)]
    os.lseek(out, 0, 0)
    chunks = []
    while size > 0:
        chunk = os.read(out, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return [status, b"".join(chunks).decode("utf-8", "replace"), error]
'''


def harness(source: str, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> str:
    """The job program that runs `source` once per call on the call's input."""
    return _HARNESS.format(source=source, cap=int(max_output_bytes))


def stdin_job(source: str, inputs: Sequence[str], limits: Limits,
              max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES, budget_s: float | None = None) -> Job:
    """One run of `source` on each input, each in a fork of its own with `limits.call_timeout_s`.

    The run's budget is `budget_s` (the inputs it leaves unrun are `not-run`, failures), or
    with None enough for every input at its limit; the encoded-value cap is raised to hold
    the largest output allowed (JSON escapes make text up to six times longer)."""
    inputs = list(inputs)
    for i, text in enumerate(inputs):
        if not isinstance(text, str):
            raise TypeError(f"stdin_job: input {i} must be str, got {type(text).__name__}")
    if budget_s is None:
        budget_s = max(limits.timeout_s, limits.call_timeout_s * max(1, len(inputs)) + 5.0)
    limits = replace(limits, timeout_s=budget_s,
                     max_value_bytes=max(limits.max_value_bytes, 6 * max_output_bytes + 4096))
    calls = [f"{RUN_NAME}({text!r})" for text in inputs]
    return Job(program=harness(source, max_output_bytes), calls=calls, limits=limits,
               isolated=list(range(len(calls))))


@dataclass(frozen=True)
class ProgramOutput:
    """What one run of a program on one input did: `status` is ok, error, timeout,
    memory, output-limit, not-run or infra; `stdout` is what it printed (ok and error)."""

    status: str
    stdout: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


#: The executor's error for an isolated call whose process ended without handing back a result
#: (`codea1.sandbox._child`): here the process that ran the program on one input.
_ENDED = re.compile(r"IsolatedCallFailed: the call's process ended without a result \(wait status (\d{1,10})\)")

#: What the signals a program's process dies of mean, in words.
_SIGNAL_MEANINGS = {
    signal.SIGSEGV: "a crash, e.g. a stack overflow from deep recursion",
    signal.SIGABRT: "an abort, e.g. os.abort() or a fatal error of the interpreter",
    signal.SIGBUS: "a crash on a bad memory access",
    signal.SIGFPE: "an arithmetic fault",
    signal.SIGILL: "a crash on an illegal instruction",
    signal.SIGKILL: "the memory limit's OOM killer",
    signal.SIGXCPU: "a CPU time limit",
    signal.SIGXFSZ: "the file size limit",
    signal.SIGPIPE: "a write to a closed pipe",
}


def _ended(status: int) -> ProgramOutput:
    """The output of an input whose process ended with wait status `status` before the harness
    collected what it printed (which is lost): killed by a signal, or ended by `os._exit`
    (or a C-level exit) that skips the harness. SIGKILL is the memory cgroup's OOM killer
    (time limits end the whole run and read as `timeout`): `memory`; the rest `error`."""
    why = f"(wait status {status})"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        meaning = _SIGNAL_MEANINGS.get(number)
        text = f"{name}: {meaning}" if meaning else name
        return ProgramOutput("memory" if number == signal.SIGKILL else "error",
                             error=f"the program was killed by signal {number} ({text}) {why}")
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        return ProgramOutput("error", error=f"the program ended with os._exit({code}) (or another exit that skips "
                                            "Python's) before the harness collected its output, which is lost: "
                                            f"end it with sys.exit, or let it end {why}")
    return ProgramOutput("error", error=f"the program's process ended before the harness collected its output {why}")


def _one(call: CallResult | None, run: RunResult) -> ProgramOutput:
    if run.status == "infra":
        return ProgramOutput("infra", error=run.infra_error)
    if call is None or call.status == "not-run":
        status = run.status if run.status in ("timeout", "memory", "output-limit") else "not-run"
        return ProgramOutput(status, error=f"not run (run ended: {run.status})")
    if call.status == "timeout":
        return ProgramOutput("timeout", error="timed out")
    if call.status == "error":
        error = call.error or "error"
        ended = _ENDED.fullmatch(error)
        if ended is not None:  # the input's process ended inside its call, without the harness's answer
            return _ended(int(ended.group(1)))
        return ProgramOutput("memory" if "MemoryError" in error else "error", error=error)
    value = call.value
    # ["list", [["str", S], ["str", OUT], ["str", ERR] | ["NoneType"]]]: anything else is forged
    try:
        kind, items = value[0], value[1]
        if kind != "list" or len(items) != 3 or items[0][0] != "str" or items[1][0] != "str":
            raise ValueError
        status, out = items[0][1], items[1][1]
        error = items[2][1] if items[2][0] == "str" else None
        if status not in ("ok", "error", "memory", "output-limit") or not isinstance(out, str):
            raise ValueError
    except (ValueError, TypeError, IndexError, KeyError):
        return ProgramOutput("error", error="the run handed back something that is not a program's output")
    return ProgramOutput(status, out, error)


def program_outputs(run: RunResult, n: int) -> list[ProgramOutput]:
    """The `n` inputs' outputs of a `stdin_job` run, in order. A run whose harness failed
    (the source does not compile) gives `error` for every input."""
    if run.status != "infra" and not run.program_ok:
        why = run.program_error or run.status
        return [ProgramOutput("error", error=f"the program does not run: {why}") for _ in range(n)]
    calls = list(run.calls) + [None] * (n - len(run.calls))
    return [_one(calls[i], run) for i in range(n)]


def checker_job(checker: str, triples: Sequence[tuple[str, str, str]], limits: Limits) -> Job:
    """One run of a problem's checker: `check(input, expected, output)` on each triple, in
    a fork of its own. What it prints is read and discarded (`stop_on_output` off): a
    checker that prints as it checks must not reach the output cap, which would stop the
    run and reject every later pair. The run's time grows with the pairs, 2 s each and 5
    more, whatever `limits` allows less: the checker is the problem's own, and a loaded
    machine must not reject right outputs for the time it took to check them."""
    calls = [f"check({i!r}, {e!r}, {o!r})" for i, e, o in triples]
    timeout_s = max(limits.timeout_s, 2.0 * len(calls) + 5)
    return Job(program=checker, calls=calls, limits=replace(limits, stop_on_output=False, timeout_s=timeout_s),
               isolated=list(range(len(calls))))


def checker_verdicts(run: RunResult, n: int) -> list[bool]:
    """The `n` verdicts of a `checker_job` run: True only where `check` returned True."""
    calls = list(run.calls)[:n]
    return [c.status == "ok" and c.value == ["bool", True] for c in calls] + [False] * (n - len(calls))
