"""The stdin harness's exit (atexit handlers, threading's exit calls), the words it uses for
a program's process that died, and the float comparison the contest loaders set, each as
the dataset's own harness compares (audit C)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from codea1.data import load_problems
from codea1.data.check import check_problems
from codea1.data.stdin_io import outputs_match, tolerance_of
from codea1.sandbox import Executor, Limits, RunResult
from codea1.sandbox.stdio import program_outputs, stdin_job
from codea1.sandbox.types import CallResult

LIMITS = Limits(call_timeout_s=2)
SUM = "d = sys.stdin.read().split()\nprint(sum(map(int, d[1:])))\n"
SUM_INPUT = "3\n1 2 3\n"


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=1) as executor:
        yield executor


def _plain(source: str, stdin: str, tmp_path) -> tuple[str, int]:
    path = tmp_path / "p.py"
    path.write_text(source)
    done = subprocess.run([sys.executable, str(path)], check=False, input=stdin, capture_output=True, text=True, timeout=30)
    return done.stdout, done.returncode


def _one(ex, source: str, stdin: str = SUM_INPUT, limits: Limits = LIMITS):
    [out] = program_outputs(ex.run(stdin_job(source, [stdin], limits)), 1)
    return out


# 1 ---- atexit -------------------------------------------------------------------------------

FAST_OUTPUT = ("import atexit, io, sys\nbuffer = io.StringIO()\nsys.stdout = buffer\n@atexit.register\n"
               "def write():\n    sys.__stdout__.write(buffer.getvalue())\n" + SUM)


def test_what_atexit_handlers_print_is_the_programs_output_as_under_plain_python(ex, tmp_path):
    """The fast-output idiom (print into a StringIO, write it out from an atexit handler), and
    handlers that raise or exit: Python runs them last first after the program, prints their
    errors on stderr, ignores them, and keeps the exit status. Fault: the harness never ran
    them: '' printed, every expected output of a reference using the idiom ''."""
    handlers = ("import atexit, sys\n"
                "atexit.register(print, 'registered first, runs last')\n"
                "def boom():\n    raise ValueError('boom')\n"
                "atexit.register(boom)\n"
                "atexit.register(sys.exit, 3)\n"
                "def nested():\n    atexit.register(print, 'registered while exiting: not run')\n    print('nested')\n"
                "atexit.register(nested)\n" + SUM)
    for source in (FAST_OUTPUT, handlers):
        stdout, code = _plain(source, SUM_INPUT, tmp_path)
        out = _one(ex, source)
        assert (out.status, out.stdout) == ("ok" if code == 0 else "error", stdout), source
    assert _one(ex, FAST_OUTPUT).stdout == "6\n"
    # after an exception too (a failure either way, but what it printed is Python's)
    failing = "import atexit\natexit.register(print, 'at exit')\nprint('before')\nraise ValueError('x')\n"
    stdout, code = _plain(failing, "", tmp_path)
    out = _one(ex, failing, "")
    assert code == 1 and (out.status, out.stdout) == ("error", stdout) and stdout == "before\nat exit\n"


def test_an_atexit_handler_that_never_ends_is_a_timeout_of_its_input(ex):
    """Handlers run within the input's time limit: one that loops is that input's time-out."""
    source = "import atexit\nprint(int(input()) * 2)\n@atexit.register\ndef spin():\n    while True:\n        pass\n"
    run = ex.run(stdin_job(source, ["1\n"], Limits(call_timeout_s=1.0)))
    assert [o.status for o in program_outputs(run, 1)] == ["timeout"]


def test_handlers_registered_before_the_program_are_not_the_programs(ex):
    """What the run's process registered before the program (the worker's state, imitated
    here by a registration ahead of the harness) neither runs nor prints; the program's do."""
    job = stdin_job("import atexit, sys\natexit.register(print, 'program')\n" + SUM, [SUM_INPUT], LIMITS)
    job = replace(job, program="import atexit\natexit.register(print, 'HARNESS STATE')\n" + job.program)
    [out] = program_outputs(ex.run(job), 1)
    assert (out.status, out.stdout) == ("ok", "6\nprogram\n")


def test_an_executor_left_open_ends_as_at_pythons_exit(ex, tmp_path):
    """concurrent.futures' idle workers end in threading's exit calls, which Python makes
    before it waits for the threads. Fault: the harness only waited: every input timed out."""
    source = ("import sys\nfrom concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(2)\n"
              "d = sys.stdin.read().split()\nprint(sum(pool.map(int, d[1:])))\n")
    assert _plain(source, SUM_INPUT, tmp_path) == ("6\n", 0)
    out = _one(ex, source)
    assert (out.status, out.stdout) == ("ok", "6\n")


# 2 ---- what happened, in words --------------------------------------------------------------

def test_a_process_that_died_is_said_in_words(ex):
    """`os._exit` after a flush, a C stack overflow (recursion through lru_cache), and a kill
    by SIGKILL (read as the memory limit, as before). Fault: "IsolatedCallFailed: the call's
    process ended without a result (wait status 0)" (11, 9)."""
    os_exit = _one(ex, "import sys, os\n" + SUM + "sys.stdout.flush()\nos._exit(0)\n")
    assert os_exit.status == "error"
    assert "os._exit(0)" in os_exit.error and "before the harness collected its output" in os_exit.error
    deep = ("import sys\nfrom functools import lru_cache\nsys.setrecursionlimit(10 ** 6)\n@lru_cache(None)\n"
            "def f(k):\n    return 0 if k == 0 else 1 + f(k - 1)\nprint(f(200000))\n")
    crash = _one(ex, deep, "")
    assert crash.status == "error" and "killed by signal 11 (SIGSEGV: a crash" in crash.error, crash.error
    killed = _one(ex, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "")
    assert killed.status == "memory" and "signal 9 (SIGKILL" in killed.error


def test_wait_statuses_read_in_words_without_a_sandbox():
    def read(error):
        run = RunResult(status="ok", program_ok=True, calls=[CallResult("error", error=error)])
        return program_outputs(run, 1)[0]

    ended = "IsolatedCallFailed: the call's process ended without a result (wait status {})"
    out = read(ended.format(139))  # SIGSEGV, core dumped
    assert out.status == "error" and "signal 11 (SIGSEGV" in out.error
    out = read(ended.format(3 << 8))
    assert out.status == "error" and "os._exit(3)" in out.error
    assert read(ended.format(9)).status == "memory"
    assert read(ended.format(6)).error.startswith("the program was killed by signal 6 (SIGABRT")
    other = "IsolatedCallFailed: something else (wait status 9) trailing"
    assert (read(other).status, read(other).error) == ("error", other)


# 3 ---- each dataset's comparison ------------------------------------------------------------

def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _taco(outputs, **extra):
    io = {"inputs": ["3\n"] * len(outputs), "outputs": outputs}
    return {"question": "Print n/2.", "solutions": json.dumps(["print(int(input()) / 2)"]),
            "input_output": json.dumps(io), "starter_code": "", "url": "u", **extra}


def test_taco_and_apps_problems_that_print_reals_compare_as_apps_harness(tmp_path):
    """APPS's harness (and TACO's, derived from it) accepts a real number within np.allclose
    (rtol 1e-5): `1.5` for `1.500000`. Fault: no tolerance: the reference BROKEN, a right
    candidate failed. Integer answers stay exact (a relative bound would pass `100001` for
    `100000`)."""
    taco, apps, ints, lines = load_problems(_jsonl(tmp_path / "t.jsonl", [
        _taco(["1.500000\n"]), _taco(["1.500000\n"], problem_id=7, url=None), _taco(["100000\n"], url="i"),
        _taco([["1", "0.50"]], url="l")]))
    assert [p.id for p in (taco, apps)] == ["taco/u", "apps/7"]
    for p in (taco, apps, lines):
        assert p.meta["float_tolerance"] == 1e-5
        assert outputs_match("1.5\n", "1.500000\n", tolerance_of(p))
        assert outputs_match("1.5000049\n", "1.5\n", tolerance_of(p))
        assert not outputs_match("1.5001\n", "1.5\n", tolerance_of(p))
    assert "float_tolerance" not in ints.meta and not outputs_match("100001\n", "100000\n", tolerance_of(ints))
    assert [c.status for c in check_problems([taco, apps])] == ["ok", "ok"]


def _cc(outputs):
    return {"name": "A", "description": "Print n/2.", "public_tests": {"input": ["3\n"], "output": outputs[:1]},
            "private_tests": {"input": ["3\n"] * len(outputs[1:]), "output": outputs[1:]},
            "generated_tests": None,
            "solutions": {"language": [3], "solution": ["print(int(input()) / 2)"]}}


def test_codecontests_problems_that_print_reals_compare_as_its_harness():
    """CodeContests' harness (`OutputsMatch`): numbers within 1e-5 match. Fault: exact."""
    from codea1.data.formats import codecontests

    real = codecontests.convert(_cc(["1\n", "1.500000\n"]), "row 1")
    assert real.meta["float_tolerance"] == 1e-5 and outputs_match("1.5\n", "1.500000\n", tolerance_of(real))
    integer = codecontests.convert(_cc(["100000\n", "7\n"]), "row 2")
    assert "float_tolerance" not in integer.meta and not outputs_match("100001", "100000", tolerance_of(integer))


def test_livecodebench_stays_exact_as_its_decimal_comparison():
    """LiveCodeBench compares numbers as exact Decimals, no tolerance: the loader sets none."""
    from codea1.data.formats import livecodebench

    cases = json.dumps([{"input": "3\n", "output": "1.500000\n", "testtype": "stdin"}])
    p = livecodebench.convert({"question_id": "q1", "question_content": "Print n/2.", "public_test_cases": cases,
                               "private_test_cases": "[]", "metadata": "{}"}, "row 1")
    assert p.kind == "stdin" and "float_tolerance" not in p.meta
    assert not outputs_match("1.5000001\n", "1.500000\n", tolerance_of(p))


def test_which_outputs_hold_real_numbers():
    from codea1.data.formats.codecontests import prints_decimals

    assert all(prints_decimals([text]) for text in ["1.5", "x 2.\n", ".5", "-3.25 7", "1e-9", "4 +1.0E5\n"])
    assert not any(prints_decimals([text]) for text in ["", "12 -7\n", "v1.5", "1.2.3", "a.b", "1e", "YES", "3 . 4"])


def test_a_fork_made_at_exit_leaves_the_answer_to_the_program(ex):
    """A handler that forks: the copy ends, unflushed, where the harness takes over (as a fork
    the program made and did not end does), so one answer comes back, the original's. Tried:
    no such stop after the handlers: the copy went on as the harness and answered too."""
    source = ("import atexit, os\n@atexit.register\ndef fork():\n    pid = os.fork()\n    if pid:\n"
              "        os.waitpid(pid, 0)\nprint(int(input()) * 2)\n")
    out = _one(ex, source, "21\n")
    assert (out.status, out.stdout) == ("ok", "42\n")


def test_a_stdin_program_sees_the_names_a_script_has():
    """As `python program.py` runs it: `__file__` and `__cached__` are set."""
    from codea1.sandbox import Executor, Limits
    from codea1.sandbox.stdio import program_outputs, stdin_job

    with Executor(workers=1) as ex:
        run = ex.run(stdin_job("import os\nprint(os.path.basename(__file__), __cached__)\n", ["\n"],
                               Limits(call_timeout_s=2.0)))
    assert program_outputs(run, 1)[0].stdout == "program.py None\n"
