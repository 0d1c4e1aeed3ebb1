"""Trusted harness of one run, executed in the freshly forked child of a worker.

It confines the process (runs before any candidate code), writes a ``ready`` record, runs
the program and the calls, and writes one record per step on the result pipe (fd 3). The
worker parses those records strictly; the parent never sends expected values here, so a
record forged by the candidate can at most claim a value the candidate could have returned.
"""

from __future__ import annotations

import builtins
import io
import linecache
import os
import random
import resource
import signal
import sys
import types

import json.scanner
from codea1.sandbox.values import EncodingError, check_value, encode_to_send, plain_json

# The builtins pinned in values.py: patching ``builtins`` in the run changes nothing here.
from codea1.sandbox.values import (  # noqa: E402
    bool, bytes, compile, eval, exec, getattr, int, isinstance, len, list, memoryview, range, str, type)  # noqa: F401  (every pinned name, used or not)

#: Exit status of a child whose confinement failed before any candidate code ran.
SETUP_FAILED_EXIT = 121
#: The file a run's program and its statement steps are compiled as (its `__file__`, as
#: `python program.py` gives it): their text is this file's in the run's `linecache`.
PROGRAM_FILE = "program.py"
#: Sources longer than this are compiled inside the run (under its limits), not the worker.
MAX_PRECOMPILE_CHARS = 1 << 20


def _describe(exc: BaseException) -> str:
    """``"TypeName: message"`` without trusting the exception's own methods to behave."""
    try:
        name = type.__dict__["__qualname__"].__get__(type(exc))
    except Exception:
        name = "Exception"
    try:
        msg = str(exc)
        if type(msg) is not str:
            msg = ""
    except BaseException:  # a hostile __str__
        msg = "<unprintable>"
    text = f"{name}: {msg}" if msg else str(name)
    return text[:2000]


def _confine(plan: dict, out_fd: int, err_fd: int, res_fd: int) -> None:
    """Point stdio at the worker's pipes, apply rlimits, chroot and drop privileges.

    The environment and the pids cgroup are the worker's own (set once at its start), so
    the child inherits them for free."""
    os.setsid()
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    fd = plan["result_fd"]
    os.dup2(res_fd, fd)
    os.closerange(3, fd)
    os.closerange(fd + 1, 1 << 16)
    # Into the run's memory cgroup (the worker stays outside it, so the OOM killer can only
    # ever pick a process of the run, and the cap counts only the run).
    for path in plan["cgroup_procs"]:  # os.open, not open(): a text file object costs a
        fd = os.open(path, os.O_WRONLY)  # forked child ~0.3 ms of page faults
        os.write(fd, b"0")
        os.close(fd)
    cpu = plan["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (plan["max_file_bytes"], plan["max_file_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
    if plan.get("as_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (plan["as_bytes"], plan["as_bytes"]))
    if plan.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (plan["nproc"], plan["nproc"]))
    if plan.get("chroot"):
        os.chroot(plan["chroot"])
    os.chdir(plan["cwd"])
    uid = plan.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)


_STDIO: tuple = ()


def make_stdio() -> tuple:
    """Text streams on fds 0, 1, 2 for a run. The worker builds them once before forking
    (the child points fds 0-2 at its pipes), which saves every run their construction."""
    return (
        io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8"),
        io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                         errors="backslashreplace", line_buffering=True),
        io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                         errors="backslashreplace", line_buffering=True),
    )


def prepare_warm_state() -> None:
    global _STDIO
    _STDIO = make_stdio()


def compile_untrusted(source: str, filename: str, mode: str):
    """Compile in the worker (warm memory: a compile in the fresh child costs milliseconds of
    page faults). Returns a code object, the exception to raise in the child, or the
    source itself when it is too large to compile outside the run's limits."""
    if len(source) > MAX_PRECOMPILE_CHARS:
        return source
    try:
        return compile(source, filename, mode, dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        return e


def _code(obj, filename: str, mode: str):
    if isinstance(obj, BaseException):
        raise obj
    if isinstance(obj, str):
        return compile(obj, filename, mode, dont_inherit=True, optimize=0)
    return obj


_NO_FLOW = (frozenset(), {}, {}, False)
#: `linecache`'s own dict, taken before any run's code (a run that rebinds `linecache.cache`
#: only hides its own source from itself).
_LINES = linecache.cache


def _show_source(sources, k: int) -> None:
    """Make ``sources[k]`` (a text, or None) the text of `PROGRAM_FILE` in this process's
    `linecache`, in place of the one before, and drop it from ``sources``.

    Why: `inspect.getsource` of a function the run's program (or one of its statement
    steps: a one-program job's reference module, then the candidate's) defines reads its
    file's lines from `linecache`, as it reads the program file in the reference's run; no
    file holds them here. Registered in the run's own process (the worker's `linecache`
    never holds a job's text), one unit at a time: a one-program job's candidate module
    replaces the reference module's text before any of the candidate's code runs. Lines
    end where the compiler's do (``\n``, ``\r\n``, ``\r``), as its line numbers count."""
    source = None
    if sources is not None and k < len(sources):
        source, sources[k] = sources[k], None
    if type(source) is not str:
        _LINES.pop(PROGRAM_FILE, None)
        return
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    _LINES[PROGRAM_FILE] = (len(source), None, [line + "\n" for line in lines], PROGRAM_FILE)


def child_main(plan: dict, program, calls: list, start_at: int, fds: tuple, isolated: frozenset = frozenset(),
               flow: tuple = _NO_FLOW, sources: list | None = None) -> None:
    """Never returns: confine, run the program and calls from ``start_at``, then ``_exit``.

    ``program`` and each call are what ``compile_untrusted`` returned. ``calls`` is emptied
    as the run goes (each entry None once run: the reference module a one-program job runs
    first is then gone before the candidate's code runs; see docs/SANDBOX.md, "What a run
    can read of the harness"). A call whose index is in ``isolated`` is evaluated in a fork
    of this process (the state the program and the calls before it left), so nothing it
    does is seen by any later call. ``flow`` is the job's ``(statements, requires,
    distinct, one_process)`` (see ``Job``). ``sources`` holds the texts of the program
    (``sources[0]``) and of the statement calls (``sources[1 + i]``, None for the others),
    emptied as each is registered in the run's `linecache` (`_show_source`)."""
    if type(calls) is not list:
        calls = list(calls)
    out_fd, err_fd, res_fd = fds
    # Keep private references: a candidate that patches os/json/builtins later cannot
    # change what this function calls (the harness's helpers too: bound below, before the
    # program runs).
    _write, _exit, _dumps, _int_text = os.write, os._exit, plain_json, int.__repr__
    _fork, _pipe, _read, _close, _wait4, _pid = os.fork, os.pipe, os.read, os.close, os.wait4, os.getpid
    cpu_stop = _cpu_stop(plan["cpu_s"], signal.signal, os.kill, os.getpid)
    # The result pipe sits at a per-run random fd, and the program/end records carry a
    # per-run nonce: a record blindly forged by the candidate is rejected. (Code in this
    # interpreter that digs the nonce out of memory can still forge `program_ok`; call
    # values, compared in the parent, are what scores. See docs/SANDBOX.md.)
    _fd, _nonce = plan["result_fd"], plan["nonce"]
    try:
        g = _enter_run(plan, out_fd, err_fd, res_fd)
        max_value = plan["max_value_bytes"]
        plan = None  # noqa: F841 - the nonce lives on only in this frame's locals
    except BaseException:
        _exit(SETUP_FAILED_EXIT)

    record, line = _writers(_write, _fd, _dumps)
    flush = _flush
    statements, requires, distinct, one_process = flow
    last = [None, None]  # the last call's fate: its ok value's JSON, the exit status when it ends the run
    owner = [_pid()]  # the process whose records count: a fork of the run's code that returns here writes none
    base = _frames()
    # (`base + 1`: `_run_program`'s or `evaluate`'s frame; the module's frame is the reference's first)
    headroom, noted_encoding = _recursion_limits(base + 1)
    evaluate = _evaluator(calls, g, max_value, _dumps, flush, statements, last if one_process else None,
                          owner, noted_encoding)
    evaluate_apart = _apart(evaluate, _fd, max_value, _dumps, (_write, _exit, _fork, _pipe, _read, _close, _wait4),
                            cpu_stop, owner)
    fresh: dict = {}  # call -> whether it returned and its (key, value) was new (`Job.requires`)
    seen: set = set()  # emptied after the last call with a key: the reference's values are gone before a candidate runs
    last_keyed = max(distinct, default=-1)
    calls[:start_at] = [None] * min(start_at, len(calls))
    record(["ready"])
    show = _show_source
    show(sources, 0)
    headroom()
    program_ok, program_error, exit_code = _run_program(program, g)
    if _pid() != owner[0]:
        _exit(0)  # a fork the program made and did not end: the program's own process reports
    flush()
    record(["P", program_ok, program_error, _nonce])
    if program_ok:
        done = ""  # the last call's result record, written with the next record: one write
        for i in range(start_at, len(calls)):
            index = _int_text(i)
            if i in statements:  # (this step's text replaces the one before in `linecache`)
                show(sources, 1 + i)
            deps = requires.get(i)
            if deps is not None and not all(fresh.get(d, False) for d in deps):
                done += '["K",' + index + "]\n"
                calls[i] = None
                continue
            line(done + '["S",' + index + "]")
            last[0] = done = None
            if i > last_keyed and seen:
                seen.clear()
            headroom()
            done = (evaluate_apart(i, index) if i in isolated else evaluate(i, index)) + "\n"
            calls[i] = None
            if last[1] is not None:
                line(done[:-1])  # (a SystemExit in one process: the run ends after this call)
                _exit(last[1])
            value, last[0] = last[0], None
            if value is not None:
                key = distinct.get(i)
                pair = None if key is None else (key, value)
                fresh[i] = pair is None or pair not in seen
                if pair is not None:
                    seen.add(pair)
                value = pair = None
        line(done + _dumps(["E", _nonce]))  # the parent accepts nothing after a failed program's record
    _exit(exit_code)


#: The recursion limit of a plain ``python program.py`` (the reference's candidate program):
#: its module-level code runs in the first frame.
REFERENCE_RECURSION_LIMIT = 1000
_getframe, _getrecursionlimit, _setrecursionlimit = sys._getframe, sys.getrecursionlimit, sys.setrecursionlimit
_getpid = os.getpid
#: The largest limit `sys.setrecursionlimit` takes (a C int).
_MAX_RECURSION_LIMIT = (1 << 31) - 1


def _frames() -> int:
    """How many frames deep the caller runs."""
    n, frame = 0, _getframe(1)
    while frame is not None:
        n, frame = n + 1, frame.f_back
    return n


def _recursion_limits(depth: int) -> tuple:
    """``(headroom, noted_encoding)`` for code run from a frame `depth` deep.

    ``headroom()``, before the program and each call, gives the code the headroom a
    module-level statement of a plain ``python program.py`` has (the harness's own frames
    do not count against it): `REFERENCE_RECURSION_LIMIT`, or the limit the run's code
    set itself (``sys.setrecursionlimit(N)``: found as a limit other than the one the
    harness set last, and kept for every later call, as a plain program keeps it).
    ``noted_encoding(left)``, after a call returned or raised and the harness set the
    limit it encodes values under (`_ENCODING_RECURSION_LIMIT`, with builtin calls: the call
    may have left a limit barely above the harness's depth, too low for a frame more),
    notes `left`, the limit the call left, when the call set it."""
    offset = depth + RECURSION_CALIBRATION
    state = [REFERENCE_RECURSION_LIMIT, None]  # the run's limit as a plain program sets it; the limit set last here

    def note(now: int) -> int:
        """The run's limit, given the limit `now` in force: updated when the run's code set
        one since the harness last did."""
        if state[1] is not None and now != state[1]:
            state[0] = now
        return state[0]

    def headroom() -> None:
        limit = state[1] = min(note(_getrecursionlimit()) + offset, _MAX_RECURSION_LIMIT)
        _setrecursionlimit(limit)

    def noted_encoding(now: int) -> None:
        note(now)
        state[1] = _ENCODING_RECURSION_LIMIT

    return headroom, noted_encoding


#: Frames the interpreter counts between the harness's frame and the evaluated code that a
#: plain program does not (measured: tests/test_sandbox.py::test_recursion_headroom_is_the_plain_programs).
RECURSION_CALIBRATION = 1


#: The seed every run's random generators start from (Python's `random`, numpy's global
#: one): a program that draws random numbers, or tests that do, draw the same numbers each
#: time the job runs, so a job judged twice (a rerun, a resumed step) gets one verdict.
RUN_SEED = 0
_seed_random = random.seed  # (the module's own generator, bound before any run's code)


def _seed_generators() -> None:
    """Start the run's generators from `RUN_SEED`: at the run's start, and again in each
    call run apart (Python's `random` reseeds itself from the OS in every fork)."""
    try:
        _seed_random(RUN_SEED)
        nprandom = sys.modules.get("numpy.random")  # numpy is preloaded before a run that names it
        if nprandom is not None:
            nprandom.seed(RUN_SEED)
    except BaseException:  # in a call apart, after the program ran: its own run to break
        pass


def _enter_run(plan: dict, out_fd: int, err_fd: int, res_fd: int) -> dict:
    """Confine this process, give it the run's stdio and a fresh ``__main__``; returns the
    program's globals."""
    _confine(plan, out_fd, err_fd, res_fd)
    sys.stdin, sys.stdout, sys.stderr = _STDIO or make_stdio()
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.argv = [PROGRAM_FILE]
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    # what `python program.py` gives a script (a program may build paths from `__file__`)
    main.__dict__.update(__file__=PROGRAM_FILE, __cached__=None)
    sys.modules["__main__"] = main
    _seed_generators()
    return main.__dict__


def _writers(_write, _fd: int, _dumps):
    """``record(list)`` and ``line(text)``: one record on the result pipe, through the
    private references given."""

    def record(rec: list) -> None:
        line(_dumps(rec))

    def line(text: str) -> None:
        """Write one record already in JSON (the per-call records are built as text: the
        value's JSON is made once, for its size check and for the record)."""
        data = (text + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            n = _write(_fd, view)
            view = view[n:]

    return record, line


def _flush() -> None:
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:
            pass


def _run_program(program, g: dict) -> tuple:
    """Run the program in ``g``: ``(program_ok, program_error, exit_code)``."""
    exit_code = 0
    try:
        exec(_code(program, PROGRAM_FILE, "exec"), g)
        program_ok, program_error = True, None
    except BaseException as e:  # SystemExit included: exiting is not success
        program_ok, program_error = False, _describe(e)
        if isinstance(e, SystemExit):
            c = e.code
            exit_code = c if type(c) is int and 0 <= c < 256 else (0 if c is None else 1)
        else:
            exit_code = 1
            try:
                import traceback

                traceback.print_exception(e)
            except BaseException:
                pass
    return program_ok, program_error, exit_code


def _evaluator(calls: list, g: dict, max_value: int, _dumps, flush, statements: frozenset, last, owner: list,
               noted_encoding):
    """``evaluate(i, index)``: call ``i``'s result record (``index`` is ``i`` as text).

    A call in ``statements`` is executed (its value is None). With ``last`` (one process),
    ``last[0]`` gets an ok value's JSON and ``last[1]`` the exit status when the call raised
    what is not an ``Exception`` (``SystemExit``...: a plain program ends there). A call
    that returns in another process than ``owner[0]`` (a fork the run's code made and did
    not end) ends that process silently: as in a plain program, the original one reports.
    After the call, the limit a value is encoded under is set by builtin calls alone (a
    frame of the harness's own could fail under a limit the call left barely above its
    depth), and the limit the call left is handed to ``noted_encoding`` (`_recursion_limits`)."""
    _pid, _quit, _send = _getpid, os._exit, encode_to_send
    keep = last is not None
    _get, _set, _encoding = _getrecursionlimit, _setrecursionlimit, _ENCODING_RECURSION_LIMIT

    def evaluate(i: int, index: str) -> str:
        """Call ``i``'s result record."""
        try:
            if i in statements:
                exec(_code(calls[i], PROGRAM_FILE, "exec"), g)
                value = None
            else:
                value = eval(_code(calls[i], f"<call {i}>", "eval"), g)
            if _pid() != owner[0]:
                _quit(0)
            left = _get()
            _set(_encoding)  # (trusted code: its own depth bound)
            noted_encoding(left)
            # (a value encoded longer than `max_value` is sent as the digest of its canonical encoding)
            text, sent = _send(value, max_value, keep)
            if keep:
                last[0] = text
            text = '["R",' + index + ',"ok",' + sent + "]"
        except EncodingError as e:
            text = _dumps(["R", i, "error", f"ValueTooLarge: {e}"])
        except BaseException as e:
            if _pid() != owner[0]:
                _quit(0)
            left = _get()  # (the call raised: described under the harness's limit too)
            _set(_encoding)
            noted_encoding(left)
            text = _dumps(["R", i, "error", _describe(e)])
            if last is not None and not isinstance(e, Exception):
                last[1] = _exit_status(e)
        flush()
        return text

    return evaluate


#: The recursion limit while the harness encodes a value (it bounds the depth itself).
_ENCODING_RECURSION_LIMIT = 6000


def _exit_status(e: BaseException) -> int:
    """The exit status of a plain program ended by ``e`` (``SystemExit(code)`` or another)."""
    if isinstance(e, SystemExit):
        c = e.code
        return c if type(c) is int and 0 <= c < 256 else (0 if c is None else 1)
    return 1


_SIGXCPU, _SIGKILL = int(signal.SIGXCPU), int(signal.SIGKILL)


def cpu_limit_spent(status: int, cpu: float, cpu_limit: int) -> bool:
    """Whether a process with wait status `status` and `cpu` seconds of CPU time was ended
    by the kernel at a CPU rlimit of `cpu_limit` s: SIGXCPU at the soft limit, or SIGKILL at
    the hard one (soft + 1 s) for a process that ignores SIGXCPU. Either only after the
    limit's CPU time was spent: a process that signals itself or lowers its own limit has
    not spent the run's budget. (The worker reads its child by this rule; the child reads
    its calls' forks by it, only to trigger the same stop, which the worker checks again.)"""
    return status & 0x7F in (_SIGXCPU, _SIGKILL) and cpu >= cpu_limit - 0.05


def _cpu_stop(cpu_limit: int, _signal, _kill, _getpid):
    """``cpu_stop(status, cpu)``: when a call's fork was ended at the run's CPU limit
    (`cpu_limit_spent`), end this process the same way, with the call in progress: the
    worker then reads the run's CPU budget as spent, a timeout, as when this process
    itself reaches it. (A fork's CPU time starts at zero, so without this the call was an
    error and the run went on.) The default action is restored first: the program may
    have ignored SIGXCPU."""
    default = signal.SIG_DFL  # (before the program runs)

    def cpu_stop(status: int, cpu: float) -> None:
        if cpu_limit_spent(status, cpu, cpu_limit):
            try:
                _signal(_SIGXCPU, default)
            except BaseException:  # (only the main thread may; the kills below end it anyway)
                pass
            _kill(_getpid(), _SIGXCPU)
            _kill(_getpid(), _SIGKILL)  # (not reached unless the program blocked SIGXCPU: its CPU time still says why)

    return cpu_stop


def _apart(evaluate, _fd: int, max_value: int, _dumps, os_calls: tuple, cpu_stop, owner: list):
    """``evaluate_apart(i, index)``: ``evaluate`` in a fork, with the private ``os``
    references ``(write, _exit, fork, pipe, read, close, wait4)``; ``cpu_stop`` (see
    ``_cpu_stop``) sees how each fork ended. The fork is ``owner[0]`` (`_evaluator`) of
    its call."""
    _write, _exit, _fork, _pipe, _read, _close, _wait4 = os_calls
    _pid = _getpid

    def evaluate_apart(i: int, index: str) -> str:
        """Call ``i``'s result record, evaluated in a fork that ends with the call: it
        hands its record back on a private pipe; a fork that ends without one (it exited
        or was killed inside the call) or hands back anything else makes the call an error."""
        try:
            r, w = _pipe()
            pid = _fork()
        except BaseException as e:
            return _dumps(["R", i, "error", f"IsolationFailed: {_describe(e)}"])
        if pid == 0:
            try:
                owner[0] = _pid()
                _close(r)
                _close(_fd)  # its only way back is the private pipe, checked below
                _seed_generators()
                data = evaluate(i, index).encode("ascii")
                view = memoryview(data)
                while view:
                    view = view[_write(w, view):]
            finally:
                _exit(0)
        _close(w)
        chunks, size = [], 0
        while True:
            chunk = _read(r, 1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size <= max_value + 4096:
                chunks.append(chunk)
        _close(r)
        _, status, usage = _wait4(pid, 0)
        text = b"".join(chunks).decode("ascii", "replace")
        if size <= max_value + 4096 and _is_record(text, i):
            return text
        cpu_stop(status, usage.ru_utime + usage.ru_stime)
        return _dumps(["R", i, "error", "IsolatedCallFailed: the call's process ended without a result "
                                        f"(wait status {status})"])

    return evaluate_apart

#: json's C scanner, taken before any run's code: what an isolated call's fork hands back is
#: read with it (the worker checks every record again).
_scan = json.scanner.make_scanner(json.JSONDecoder())


def _is_record(text: str, i: int) -> bool:
    """Whether ``text`` is one well-formed result record of call ``i``."""
    try:
        record, end = _scan(text, 0)
        if end != len(text) or type(record) is not list or len(record) != 4 or record[0] != "R" or record[1] != i:
            return False
        if record[2] == "ok":
            check_value(record[3])
            return True
        return record[2] == "error" and type(record[3]) is str
    except BaseException:
        return False
