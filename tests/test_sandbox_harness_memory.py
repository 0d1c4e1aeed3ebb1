"""What a run can read of its harness and its worker through Python (frames, `gc`), how a
program's own recursion limit holds, and what a fork the run's code makes and does not end
does to the verdict. See docs/SANDBOX.md, "What a run can read of the harness"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/self"),
                                reason="the sandbox needs Linux (fork, /proc)")

from codea1.sandbox import Executor, Job, Limits, encode, values_equal  # noqa: E402
from codea1.sandbox.stdio import program_outputs, stdin_job  # noqa: E402

LIM = Limits(timeout_s=10.0, call_timeout_s=5.0)
#: A reference whose code and values hold 79193 (its source, its constant, f(1)).
REFERENCE = "def f(a):\n    return a * 79193\n"

#: Run code that looks for 79193 in every string, byte string and code object it can reach
#: from its frames (locals, closures, containers, objects' attributes) and through `gc`
#: (after `gc.unfreeze()`, so the worker's frozen heap too); `found` says where.
SCAN = r'''
import gc, sys, types
S = "".join(["7919", "3"])  # (not a constant of this code: "7919" + "3" would be folded into one)
N = int(S)
B = S.encode()
found = []
def hit(x):
    t = type(x)
    if t is str:
        return x is not S and S in x
    if t in (bytes, bytearray):
        return x is not B and B in x
    if t is types.CodeType:
        return N in x.co_consts or any(hit(c) for c in x.co_consts)
    return False
def parts(x):
    t = type(x)
    if t in (list, tuple, set, frozenset) or t.__name__ == "deque":
        return list(x)
    if t is dict:
        return [*x.keys(), *x.values()]
    if t is types.FunctionType:
        return [c.cell_contents for c in (x.__closure__ or ()) if c.cell_contents is not c] + [x.__defaults__]
    if t is types.MethodType:
        return [x.__self__]
    d = getattr(x, "__dict__", None) if not isinstance(x, type) and t is not types.ModuleType else None
    return list(d.values()) if type(d) is dict else []
def walk(x, where, seen, depth=0):
    if id(x) in seen or depth > 8:
        return
    seen.add(id(x))
    if hit(x):
        found.append(where)
        return
    try:
        for y in parts(x):
            walk(y, where, seen, depth + 1)
    except Exception:
        pass
seen = set()
frame = sys._getframe()
while frame is not None:
    walk(dict(frame.f_locals), "frame " + frame.f_code.co_name, seen)
    frame = frame.f_back
gc.unfreeze()
mine = {id(found), id(seen), id(S), id(B)}
for obj in gc.get_objects():
    if id(obj) in mine:
        continue
    try:
        for y in [obj] + parts(obj):
            if hit(y):
                found.append("gc " + type(obj).__name__)
                break
    except Exception:
        pass
del frame, obj, y, seen, mine
'''


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=1, limits=LIM, preload=()) as e:
        yield e


@pytest.mark.parametrize("reference", [REFERENCE, REFERENCE + "OK = 1 in {1, 2}\n"], ids=["plain", "a-set-constant"])
def test_a_run_cannot_read_other_jobs_code_or_values_in_its_worker(ex, reference):
    """The worker keeps other jobs' compiled code (its cache), the jobs queued behind the
    run and, until the next job, the last result. Fault: a candidate read the reference's
    source from the cache through the frame of `Worker.fork_child` (`self.codes`) and
    scored 1.0 without solving anything. Fault: a module with a set constant (a frozen set,
    which the collector always tracks) kept its tuple of constants, and so the code of its
    functions, in `gc.get_objects()`."""
    for _ in range(2):
        assert ex.run(Job(reference, ["f(1)", "f"])).calls[0].status == "ok"
        assert ex.run(Job("pass\n", [reference, "f(1)"], statements=[0])).calls[1].status == "ok"
    r = ex.run(Job(SCAN, ["found"]))
    assert r.status == "ok" and r.program_ok, r.program_error
    assert values_equal(r.calls[0].value, encode([])), r.calls[0].value


def test_a_candidate_cannot_read_the_reference_run_before_it_in_its_program(ex):
    """A one-program job runs the reference module and the reference's calls before the
    candidate's module, in the same process. Fault: the candidate found the reference's
    code in the harness's `calls` (`exec(calls[0], ns)` and a delegating entry point
    scored 1.0) and its values in `seen`."""
    calls = [REFERENCE, "f(1)", "f(2)", "f(1)", "del f", SCAN, "found"]
    job = Job("pass\n", calls, statements=[0, 4, 5], requires=[(1, (0,)), (2, (0,)), (3, (0,))],
              distinct=[(1, "0\x00f(1)"), (2, "0\x00f(2)"), (3, "0\x00f(1)")], one_process=True)
    r = ex.run(job)
    assert [c.status for c in r.calls] == ["ok", "ok", "ok", "ok", "ok", "ok", "ok"], r.calls
    assert values_equal(r.calls[1].value, encode(79193))
    assert values_equal(r.calls[6].value, encode([])), r.calls[6].value


def test_a_programs_own_recursion_limit_holds_for_its_calls(ex, tmp_path):
    """`sys.setrecursionlimit(N)` in the program (or in a call) holds for the calls after
    it, as in `python program.py`. Fault: the harness reset the limit before every call
    (a reference that sets 100000 raised RecursionError at depth 5000: its test invalid)."""
    program = "import sys\nsys.setrecursionlimit(100000)\ndef depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
    path = tmp_path / "p.py"
    path.write_text(program + "assert depth(5000) == 5000\n")
    assert subprocess.run([sys.executable, str(path)], capture_output=True).returncode == 0
    for isolated in ((), (1,)):
        r = ex.run(Job(program, ["depth(10)", "depth(5000)", "sys.getrecursionlimit() >= 100000"], isolated=isolated))
        assert [c.status for c in r.calls] == ["ok", "ok", "ok"], r.calls
        assert values_equal(r.calls[1].value, encode(5000))
    # set by a call: it holds for the calls after it; a program that sets nothing keeps the plain headroom
    rec = "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
    r = ex.run(Job("import sys\n" + rec, ["depth(2000)", "sys.setrecursionlimit(50000)", "depth(2000)"]))
    assert [c.status for c in r.calls] == ["error", "ok", "ok"], r.calls
    assert "RecursionError" in r.calls[0].error


FORKS = "import os\ndef add(a, b):\n    if a == 2:\n        os.fork()\n    return a + b\n"


@pytest.mark.parametrize("isolated", [(), (1,)])
def test_a_fork_the_run_makes_and_does_not_end_writes_no_records(ex, isolated):
    """A call (or the program) that forks and returns in both processes: only the run's
    own process reports, as the original process of a plain program decides its exit
    status. Fault: the copy returned into the harness's loop and wrote records too: 3 of
    12 runs were a ProtocolViolation (the candidate invalid), 9 passed."""
    for _ in range(4):
        r = ex.run(Job(FORKS, ["add(1, 2)", "add(2, 2)", "add(5, 5)"], isolated=isolated))
        assert r.status == "ok" and r.program_ok, r.program_error
        assert [c.value for c in r.calls] == [encode(3), encode(4), encode(10)], r.calls
        r = ex.run(Job("import os\nos.fork()\nx = 1\n", ["x + 1", "x"], isolated=isolated))
        assert r.status == "ok" and r.program_ok, r.program_error
        assert [c.value for c in r.calls] == [encode(2), encode(1)], r.calls
        # a test can fork too, where the reference imports os
        r = ex.run(Job("import os\ndef add(a, b):\n    return a + b\n", ["add(1, 2)", "add(os.fork() * 0, 2)", "add(5, 5)"],
                       isolated=isolated))
        assert [c.value for c in r.calls] == [encode(3), encode(2), encode(10)], r.calls


def test_a_stdin_program_that_forks_and_does_not_end_gets_its_own_output(ex):
    """A standard-input program that forks without ending: the copy leaves the harness as
    its program ends, without flushing its output or touching the output file the
    original reads (their offset is shared). Faults: the copy handed back a record too, and
    the input failed (IsolatedCallFailed); with only that mended, the copy flushed into the
    original's output file: "42\n" or "42\n42\n", as the two processes' timing fell."""
    source = "import os\nn = int(input())\nos.fork()\nprint(n * 2)\n"
    for _ in range(6):
        outs = program_outputs(ex.run(stdin_job(source, ["21\n", "5\n"], Limits(call_timeout_s=2))), 2)
        assert [(o.status, o.stdout) for o in outs] == [("ok", "42\n"), ("ok", "10\n")], outs
