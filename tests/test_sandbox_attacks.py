"""One test per attack class of ../shared/SANDBOX.md.

Each asserts both that the attack fails (the trusted outcome is not what the attacker
wanted) and that the host is unharmed afterwards: nothing the run started is still alive,
its memory is given back, no file appeared outside the scratch dir.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/self"),
                                reason="the sandbox needs Linux (fork, /proc)")

from codea1.sandbox import Executor, Job, Limits, RunResult, encode, values_equal  # noqa: E402
from codea1.sandbox._child import SETUP_FAILED_EXIT  # noqa: E402
from codea1.sandbox.decode import python_equal  # noqa: E402
from codea1.sandbox.hostcheck import HostSnapshot  # noqa: E402
from codea1.sandbox.stdio import program_outputs, stdin_job  # noqa: E402

LIM = Limits(timeout_s=5.0, call_timeout_s=1.0, memory_mb=256, max_procs=16, max_output_bytes=8192,
             max_file_bytes=1 << 20)
SECRET = "codea1-test-secret-6f1d"


@pytest.fixture(scope="module")
def ex():
    os.environ["CODEA1_TEST_API_KEY"] = SECRET  # must never reach a run
    try:
        with Executor(workers=2, limits=LIM) as e:
            yield e
    finally:
        os.environ.pop("CODEA1_TEST_API_KEY", None)


@pytest.fixture
def host(ex):
    """Snapshot before the test; after it, assert the host is as it was."""
    before = HostSnapshot.take(ex)
    yield before
    deadline = time.monotonic() + 5
    while True:  # memory accounting settles asynchronously
        problems = before.harm(ex, mem_slack_mb=1024)
        if not problems or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert problems == [], problems
    assert ex.run(Job("x = 1\n", ["x"])).calls[0].status == "ok", "the executor must still work"


def need(ex: Executor, *names: str) -> None:
    lost = {n: ex.protections.get(n) for n in names if ex.protections.get(n) is not True}
    if lost:
        pytest.skip(f"protection not available on this machine: {lost}")


def val(r: RunResult, i: int = 0):
    return r.calls[i].value if r.calls[i].status == "ok" else None


# 1 ------------------------------------------------------------------------------------
def test_fake_equality_objects_equal_nothing(ex, host):
    program = """
import numpy as np
class LyingInt(int):
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    __hash__ = int.__hash__
class Anything:
    def __eq__(self, o): return True
    def __bool__(self): return True
    def __hash__(self): return 0
class Spoof:
    __class__ = property(lambda self: int)
    def __eq__(self, o): return True
class S(str):
    def __eq__(self, o): return True
    __hash__ = str.__hash__
class L(list):
    def __eq__(self, o): return True
def f(kind):
    return {"int": LyingInt(0), "any": Anything(), "spoof": Spoof(), "str": S("no"),
            "list": L([0]), "key": {Anything(): 1}, "np": np.int64(3), "nested": [1, Anything()]}[kind]
"""
    kinds = ["int", "any", "spoof", "str", "list", "key", "np", "nested"]
    r = ex.run(Job(program, [f"f({k!r})" for k in kinds]))
    assert r.program_ok
    for i, expected in enumerate([3, 3, 3, "yes", [1], {1: 1}, 3, [1, 2]]):
        assert r.calls[i].status == "ok"
        assert not values_equal(val(r, i), encode(expected)), kinds[i]
        # Python's `==` on trusted decoded values: only numpy's honest int64(3) == 3 holds
        assert python_equal(val(r, i), encode(expected)) == (kinds[i] == "np"), kinds[i]
    # a program's int subclass crosses as its data, its own __eq__ noted (never run): equal to no plain value
    assert val(r, 0) == ["subclass", "__main__.LyingInt", ["int", "0"], [], True]
    assert val(r, 2) == ["object", "__main__.Spoof", []]  # a program's class: its attributes, never its __eq__


def test_lying_values_of_the_new_types_equal_nothing(ex, host):
    """The standard-library and numpy types are compared, not refused; none lets a lying
    `__eq__`, `__getattr__`, `__dict__` or a cycle decide in the parent."""
    program = """
import numpy as np
from collections import Counter, OrderedDict, namedtuple
from decimal import Decimal
P = namedtuple("P", "x y")
class EvilCounter(Counter):
    def __eq__(self, o): return True
    __hash__ = None
class EvilDecimal(Decimal):
    def __eq__(self, o): return True
    __hash__ = Decimal.__hash__
class EvilP(P):
    def __eq__(self, o): return True
    __hash__ = tuple.__hash__
class Anything:
    def __eq__(self, o): return True
    def __getattr__(self, name): return Anything()
class DictTrick:
    @property
    def __dict__(self): return {"val": 3}
    def __eq__(self, o): return True
class Node:
    def __init__(self): self.me = self
class WrongKeys:
    def __init__(self): self.__dict__[1] = 2
def f(kind):
    if kind == "counter": return EvilCounter("ab")
    if kind == "decimal": return EvilDecimal("1")
    if kind == "namedtuple": return EvilP(1, 2)
    if kind == "anything": return Anything()
    if kind == "dict-trick": return DictTrick()
    if kind == "cycle": return Node()
    if kind == "keys": return WrongKeys()
    if kind == "object-array":
        items = np.empty(2, dtype=object)
        items[0], items[1] = Anything(), 1
        return items
    if kind == "huge-array": return np.zeros(3_000_000)
    if kind == "patched-counter":
        Counter.__eq__ = lambda self, o: True
        return Counter("zz")
"""
    cases = [("counter", {"a": 1, "b": 1}), ("decimal", 1), ("namedtuple", (1, 2)), ("anything", 0),
             ("dict-trick", 3), ("object-array", [0, 1]), ("patched-counter", {"a": 1})]
    calls = [f"f({k!r})" for k, _ in cases] + ["f('cycle')", "f('keys')", "f('huge-array')"]
    r = ex.run(Job(program, calls))
    assert r.program_ok
    for i, (kind, expected) in enumerate(cases):
        assert r.calls[i].status == "ok", (kind, r.calls[i])
        assert not python_equal(val(r, i), encode(expected)), kind
        assert not values_equal(val(r, i), encode(expected)), kind
    # a subclass of a standard-library type has no tag of its own; of a program's namedtuple (a tuple),
    # its data with its own __eq__ noted (never run)
    assert [val(r, i)[0] for i in range(3)] == ["unsupported", "unsupported", "subclass"] and val(r, 2)[4] is True
    assert val(r, 4) == ["object", "__main__.DictTrick", [["val", ["int", "3"]]]]  # data only
    assert not python_equal(val(r, 4), ["object", "__main__.Other", [["val", ["int", "3"]]]])
    assert val(r, 6)[0] == "counter"  # a patched Counter.__eq__ runs in the run, never here
    cycle, keys, huge = r.calls[7:]
    assert cycle.status == "error" and "cycle" in cycle.error
    assert keys.status == "ok" and keys.value[0] == "unsupported"
    assert huge.status == "error" and "ValueTooLarge" in huge.error  # (over the node budget)


# 2 ------------------------------------------------------------------------------------
def test_harness_tampering_in_the_same_interpreter(ex, host):
    # Patching what the harness uses changes nothing it reports.
    patch = ("import builtins, json, os, sys\njson.dumps = lambda *a, **k: '[\"E\"]'\n"
             "os.write = lambda *a: 0\nbuiltins.repr = builtins.type = None\nsys.stdout = None\n"
             "def f():\n    return 2\n")
    r = ex.run(Job(patch, ["f()", "f() + 1"]))
    assert r.program_ok and values_equal(val(r, 0), encode(2)) and values_equal(val(r, 1), encode(3))
    # Reaching the harness's record function through gc to add a result of its own choosing
    # is caught: two results for one call is a protocol violation, the candidate's failure.
    forge = ("import gc\ndef f():\n    for o in gc.get_objects():\n"
             "        if getattr(o, '__name__', '') == 'record' and callable(o):\n"
             "            o(['R', 0, 'ok', ['int', '42']])\n    return 1\n")
    r = ex.run(Job(forge, ["f()", "2"]))
    assert r.status == "error" and not r.program_ok and "ProtocolViolation" in r.program_error
    assert all(c.status == "error" for c in r.calls)
    # Nothing of the parent (its environment, what it expects) is in the run's memory: a scan
    # of every object's strings (and the environment) finds what the run planted, not the secret.
    expected = "expected-" + SECRET  # held by the parent while the run scans  # noqa: F841
    half = len(SECRET) // 2
    r = ex.run(Job(_HEAP_SCAN, ["find('plant', 'ed-x1')", f"find({SECRET[:half]!r}, {SECRET[half:]!r})"],
                   Limits(timeout_s=20.0, call_timeout_s=10.0, memory_mb=256, max_procs=16)))
    assert values_equal(val(r, 0), encode("planted-x1")), r.calls[0]  # the scan finds what is there
    assert values_equal(val(r, 1), encode(None)), r.calls[1]


_HEAP_SCAN = """
import gc, os
planted = {"v": "".join(["plant", "ed-x1"])}  # (joined at run time: no such constant in any code)
def find(*parts):
    target = "".join(parts)
    gc.unfreeze()  # the worker's warm state is frozen: get_objects() would not list it
    def hit(x):
        return type(x) is str and x is not target and target in x
    for x in os.environ.values():
        if target in x:
            return x
    for o in gc.get_objects():
        for x in gc.get_referents(o):
            if hit(x):
                return x
            if type(x) is dict:  # (a dict of strings only is not tracked itself)
                for y in (*x.keys(), *x.values()):
                    if hit(y):
                        return y
    return None
"""


# 3 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("exit_path", [
    "import sys\nsys.exit(0)",
    "raise SystemExit(0)",
    "import os\nos._exit(0)",
    "import atexit, os\natexit.register(lambda: os._exit(0))\nraise RuntimeError('x')",
    "import sys\nsys.excepthook = lambda *a: None\nraise RuntimeError('x')",
    "import signal, os\nos.kill(os.getpid(), signal.SIGTERM)",
    "raise KeyboardInterrupt",
    "assert __debug__ is False, 'asserts must run'",
    "assert False",
])
def test_faked_success_via_every_exit_path(ex, host, exit_path):
    r = ex.run(Job(exit_path + "\ndef f():\n    return 1\n", ["f()"]))
    assert not r.program_ok and r.status != "ok" and r.status != "infra"
    assert [c.status for c in r.calls] == ["not-run"]


def test_optimize_flags_of_the_parent_do_not_strip_asserts(host):
    os.environ["PYTHONOPTIMIZE"] = "2"
    try:
        with Executor(workers=1, limits=LIM, preload=()) as e:
            r = e.run(Job("assert 1 == 2\n"))
            r2 = e.run(Job("x = 0\n", ["__debug__"]))
    finally:
        os.environ.pop("PYTHONOPTIMIZE")
    assert not r.program_ok and r.program_error.startswith("AssertionError")
    assert values_equal(val(r2), encode(True))


# 4 ------------------------------------------------------------------------------------
_WRITE_EVERY_FD = ("import os\nfor fd in range(3, 200):\n    try:\n        os.write(fd, {data!r}.encode())\n"
                   "    except OSError:\n        pass\n")


def test_forged_output_and_records(ex, host):
    # Markers printed on stdout/stderr mean nothing.
    printed = ("import sys\nprint('[\"ready\"]\\n[\"P\",true,null]\\n[\"E\"]')\n"
               "sys.stderr.write('[\"P\",true,null]\\n')\nraise ValueError('fails')\n")
    r = ex.run(Job(printed))
    assert not r.program_ok and r.status == "error" and r.program_error == "ValueError: fails"
    # Records written on the result pipe that clash with the harness's are violations.
    for forged in (b'["P",true,null]\\n["E"]\\n', b'garbage\\n', b'["R",0,"ok",["int","1"]]\\n',
                   b'["P",true,null]\\n', b'[' * 10000 + b'\\n', b'["S",0]\\n["R",0,"ok",["float","0x1p99999"]]\\n'):
        prog = _WRITE_EVERY_FD.format(data=forged.decode()) + "raise ValueError('x')\n"
        r = ex.run(Job(prog, ["1"]))
        assert not r.program_ok and r.status == "error", forged[:40]
        assert r.calls[0].status != "ok"
    # A blindly forged "program finished" transcript followed by a silent exit: the
    # records lack the run's nonce, so no program_ok (nor any fd number to guess right).
    blind = ("import os\nfor fd in range(3, 200):\n    try:\n"
             "        os.write(fd, b'[\"ready\"]\\n[\"P\",true,null]\\n[\"P\",true,null,\"0\"]\\n[\"E\"]\\n')\n"
             "    except OSError:\n        pass\nos._exit(0)\nassert False\n")
    r = ex.run(Job(blind, ["1"]))
    assert not r.program_ok and r.status == "error" and r.calls[0].status != "ok"
    # A forged value for a later call, followed by the real result, is a duplicate.
    forge = textwrap.indent(_WRITE_EVERY_FD.format(data='["R",0,"ok",["int","7"]]\n'), "    ")
    r = ex.run(Job("def forge():\n" + forge + "def f():\n    forge()\n    return 1\n", ["f()"]))
    assert r.status == "error" and "ProtocolViolation" in (r.program_error or "")
    # An over-long record is refused, never buffered without bound.
    big = Limits(timeout_s=5, max_value_bytes=1000)
    r = ex.run(Job(_WRITE_EVERY_FD.format(data="x" * 3000), [], big))
    assert not r.program_ok


# 5 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("program", [
    "while True:\n    pass",
    "import signal\nfor s in (signal.SIGALRM, signal.SIGXCPU, signal.SIGTERM, signal.SIGINT):\n"
    "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    try:\n        pass\n    except BaseException:\n        pass",
    "import time\ntime.sleep(1000)",
    "import threading\ndef spin():\n    while True: pass\nfor _ in range(4):\n    threading.Thread(target=spin).start()\n"
    "import time\ntime.sleep(1000)",
    "def g():\n    try:\n        while True: pass\n    finally:\n        g()\ng()",
])
def test_time_is_enforced_from_outside(ex, host, program):
    t = time.monotonic()
    r = ex.run(Job(program, ["1"], Limits(timeout_s=1.0, memory_mb=256, max_procs=16)))
    assert r.status == "timeout" and not r.program_ok
    assert time.monotonic() - t < 4


def test_cpu_limit_and_call_timeouts(ex, host):
    r = ex.run(Job("while True: pass\n", [], Limits(timeout_s=20.0, cpu_s=1.0)))
    assert r.status == "timeout" and r.wall_s < 10
    r = ex.run(Job("def hang():\n    while True: pass\n", ["hang()", "2"], Limits(timeout_s=10, call_timeout_s=0.5)))
    assert [c.status for c in r.calls] == ["timeout", "ok"]


_SPIN = "import os, time\ndef spin(s):\n    t = time.process_time()\n    while time.process_time() - t < s:\n        pass\n"


def test_the_cpu_budget_is_the_runs_not_each_call_or_process(ex, host):
    # a call the kernel stops at the CPU limit spent the run's budget, as a wall-clock stop
    # does: that call timed out, the run timed out, and no later call runs (it did before:
    # the call was an error and the next process started with a fresh budget)
    r = ex.run(Job(_SPIN, ["spin(5)", "2"], Limits(timeout_s=20.0, cpu_s=1.0)))
    assert r.status == "timeout" and [c.status for c in r.calls] == ["timeout", "not-run"]
    # a call that ends its process starts a new one for the calls after it: the new one
    # gets what the run's budget has left (0.5 s, a whole second as RLIMIT_CPU counts), not
    # the whole of it again, so 1.5 + 1.5 s of CPU cannot fit a 2 s budget
    r = ex.run(Job(_SPIN, ["spin(1.5) or os._exit(0)", "spin(1.5)", "3"], Limits(timeout_s=20.0, cpu_s=2.0)))
    assert r.status == "timeout" and [c.status for c in r.calls] == ["error", "timeout", "not-run"]
    assert r.cpu_s < 3.3


@pytest.mark.parametrize("ignore", [False, True])
def test_a_call_in_a_fork_of_its_own_spends_the_same_cpu_budget(ex, host, ignore):
    # an isolated call's fork starts its CPU time at zero; the kernel's stop of it (SIGXCPU,
    # or SIGKILL at the hard limit when the program ignores SIGXCPU) is the run's timeout,
    # as in the run's own process: it was an error ("IsolatedCallFailed ... wait status 24"
    # or "9", which standard-input programs read as memory) and the run went on
    program = ("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n" if ignore else "") + _SPIN
    r = ex.run(Job(program, ["1", "spin(5)", "2"], Limits(timeout_s=20.0, cpu_s=1.0), isolated=[1]))
    assert r.status == "timeout" and [c.status for c in r.calls] == ["ok", "timeout", "not-run"]
    job = stdin_job(program + "spin(5)\nprint(1)\n", ["a", "b"], Limits(timeout_s=20.0, call_timeout_s=10.0, cpu_s=1.0))
    assert [o.status for o in program_outputs(ex.run(job), 2)] == ["timeout", "timeout"]


@pytest.mark.parametrize("isolated", [[], [1], [1, 2]])
def test_a_call_that_signals_itself_or_lowers_its_own_cpu_limit_fails_alone(ex, host, isolated):
    # only the run's budget, spent, ends the run: a SIGXCPU the program sends itself, or
    # earns under a limit it lowered, is that call's error and the next call runs
    program = ("import os, signal, resource\ndef me():\n    os.kill(os.getpid(), signal.SIGXCPU)\n"
               "def low():\n    resource.setrlimit(resource.RLIMIT_CPU, (0, 1))\n    while True: pass\n")
    r = ex.run(Job(program, ["1", "me()", "low()", "2"], Limits(timeout_s=20.0, cpu_s=5.0), isolated=isolated))
    assert r.status == "ok" and [c.status for c in r.calls] == ["ok", "error", "error", "ok"]


# 6 ------------------------------------------------------------------------------------
def test_memory_bomb_is_capped_and_others_keep_working(ex, host):
    bomb = Job("x = []\nwhile True:\n    x.append(bytearray(1 << 24))\n")
    np_bomb = Job("import numpy as np\na = np.ones((1 << 30,), dtype=np.float64)\n")
    call_bomb = Job("def eat():\n    return [0] * (1 << 31)\n", ["eat()", "1 + 1"])
    good = [Job(f"x = {i}\n", ["x"]) for i in range(6)]
    results = ex.run_many([bomb, *good[:3], np_bomb, *good[3:], call_bomb])
    assert results[0].status == "memory" and not results[0].program_ok
    assert results[4].status in ("memory", "error") and not results[4].program_ok
    assert results[4].program_error and "MemoryError" in results[4].program_error
    assert results[-1].calls[0].status == "error" and "MemoryError" in results[-1].calls[0].error
    assert values_equal(val(results[-1], 1), encode(2))
    for i, r in enumerate(results[1:4] + results[5:8]):
        assert values_equal(val(r), encode(i)), "a neighbour's memory bomb must not hurt other runs"
    assert results[0].peak_mb <= LIM.memory_mb + 16


# 7 ------------------------------------------------------------------------------------
def need_process_cap(ex: Executor) -> None:
    """The run's tasks are capped by a pids cgroup or by RLIMIT_NPROC of its own uid (root)."""
    if ex.protections.get("pids-cgroup") is not True and ex.protections.get("rlimits") is not True:
        pytest.skip(f"no process cap here: {ex.protections.get('pids-cgroup')}")


PROCS = Limits(timeout_s=5.0, memory_mb=256, max_procs=16)


_TASK_BOMB = """
import os, threading, time
n = 0
while n < 200:
    try:
        {start}
    except (OSError, RuntimeError) as e:
        print(n, type(e).__name__, getattr(e, "errno", None))
        break
    {then}
    n += 1
"""


@pytest.mark.parametrize("kind", ["processes", "threads"])
def test_processes_and_threads_are_capped_at_max_procs(ex, host, kind):
    """The run (its main thread included) gets exactly `max_procs` tasks: the next fork or
    thread fails with EAGAIN, inside the run, where it can see it."""
    need_process_cap(ex)
    if kind == "processes":
        prog = _TASK_BOMB.format(start="pid = os.fork()", then="if pid == 0:\n        time.sleep(100)\n        os._exit(0)")
    else:
        prog = _TASK_BOMB.format(start="threading.Thread(target=time.sleep, args=(100,), daemon=True).start()",
                                 then="pass")
    r = ex.run(Job(prog, [], PROCS))
    assert r.program_ok, (r.program_error, r.stderr)
    n, error, code = r.stdout.split()
    assert int(n) == PROCS.max_procs - 1, r.stdout  # one task is the run's main thread
    assert (error, code) == (("BlockingIOError", str(errno.EAGAIN)) if kind == "processes" else ("RuntimeError", "None"))


@pytest.mark.parametrize("program", [
    # fork bomb
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    # daemonised grandchild that outlives the run, plus zombies
    "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(1000)\n    os._exit(0)\n"
    "for _ in range(5):\n    if os.fork() == 0:\n        os._exit(0)\ntime.sleep(0.2)",
])
def test_nothing_outlives_the_run(ex, host, program):
    r = ex.run(Job(program, [], Limits(timeout_s=2.0, memory_mb=256, max_procs=16)))
    assert r.status == ("timeout" if "while True" in program else "ok"), (r.status, r.program_error)
    # the host fixture asserts no process of the run survives it


# 8 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("program", [
    "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    "import os\nwhile True:\n    os.write(2, b'y' * 65536)",
    "import os, threading\nt = threading.Thread(target=lambda: [os.write(1, b'a' * 4096) for _ in iter(int, 1)])\n"
    "t.start()\nwhile True:\n    os.write(2, b'b' * 4096)",
])
def test_output_floods_are_bounded_and_drained(ex, host, program):
    t = time.monotonic()
    r = ex.run(Job(program))
    assert r.status == "output-limit" and not r.program_ok
    assert len(r.stdout) + len(r.stderr) <= LIM.max_output_bytes
    assert time.monotonic() - t < 4


def test_file_floods_are_bounded(ex, host):
    r = ex.run(Job("f = open('big', 'wb')\nwhile True:\n    f.write(b'z' * 65536)\n"))
    assert not r.program_ok and "FileSizeLimit" in (r.program_error or "") + r.stderr + str(r.exit_code) \
        or r.program_error.startswith("OSError")



def test_open_files_are_capped(ex, host):
    prog = ("files = []\ntry:\n    while len(files) < 10000:\n        files.append(open('/dev/null'))\n"
            "except OSError as e:\n    print(len(files), e.errno)\n")
    r = ex.run(Job(prog))
    assert r.program_ok, (r.program_error, r.stderr)
    n, code = map(int, r.stdout.split())
    # RLIMIT_NOFILE 128: fds 0-2 and the result pipe are taken (the pipe's fd may lie above 127)
    assert code == errno.EMFILE and 124 <= n <= 125, r.stdout


def test_scratch_files_count_against_the_memory_cap(ex, host):
    """Files in the scratch dir live in memory (tmpfs): writing them without end is a
    memory verdict, not a wall-clock one."""
    need(ex, "memory-cgroup", "read-only-root")
    r = ex.run(Job("i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'z' * 500000)\n    i += 1\n"))
    assert r.status == "memory" and not r.program_ok, (r.status, r.program_error)


# 9 ------------------------------------------------------------------------------------
def test_escapes_to_host_files(ex, host, tmp_path):
    need(ex, "mount-namespace", "read-only-root", "unprivileged-uid")
    target = tmp_path / "escape"
    target.mkdir()
    os.chmod(target, 0o777)
    repo_file = os.path.abspath(__file__)
    checkout = os.path.dirname(os.path.dirname(repo_file))
    # The checkout's other files, and the venv's files besides its packages, wherever it is
    # (inside the checkout in the README's layout).
    others = [os.path.join(checkout, n) for n in ("README.md", "pyproject.toml", ".git/HEAD", ".git")]
    if sys.prefix != sys.base_prefix:
        others += [os.path.join(sys.prefix, "bin", "activate"), os.path.join(sys.prefix, "bin", "pip")]
    others += [os.path.join(os.path.expanduser("~"), n) for n in (".bashrc", ".profile")]
    prog = f"""
import os
wrote, read = [], []
for p in ({str(target / 'x')!r}, '/tmp/codea1-escape', '/root/codea1-escape', '/codea1-escape',
          '/usr/codea1-escape', '/etc/codea1-escape', '/dev/shm/codea1-escape', '/scratch/../x'):
    try:
        with open(p, 'w') as f:
            f.write('x')
        wrote.append(p)
    except OSError:
        pass
for p in ({repo_file!r}, '/etc/shadow', '/proc/1/environ', '/proc/self/environ', '/root/.bashrc',
          '/work/shared/SANDBOX.md'):
    try:
        open(p).read(1)
        read.append(p)
    except OSError:
        pass
read += [p for p in {others!r} if os.path.lexists(p)]
open('mine.txt', 'w').write('scratch is fine')
print(wrote, read, os.listdir('/'))
"""
    r = ex.run(Job(prog, ["open('mine.txt').read()"]))
    assert r.program_ok, r.stderr
    assert r.stdout.startswith("[] []"), r.stdout
    assert values_equal(val(r), encode("scratch is fine"))
    assert not (target / "x").exists() and not os.path.exists("/tmp/codea1-escape")
    assert not os.path.exists("/codea1-escape") and not os.path.exists("/root/codea1-escape")


def test_the_package_is_hidden_and_the_harness_needs_nothing_from_it(ex, host):
    """The checkout (the codea1 package root: on PYTHONPATH or an editable install) is not
    in a run's view; the worker imported the harness before forking, so every path of a
    run (a program that raises and prints its traceback, values of every kind, numpy, a
    call that fails, a call that runs into its timeout) still works."""
    need(ex, "mount-namespace", "read-only-root")
    import codea1.sandbox._child as child

    prog = ("import sys, os\nimport numpy as np\n"
            "files = [m.__file__ for n, m in list(sys.modules.items())\n"
            "         if n.startswith('codea1') and getattr(m, '__file__', None)]\n")
    calls = ["len(files) > 3", "[f for f in files if os.path.exists(f)]",
             f"os.path.exists({os.path.dirname(child.__file__)!r})",
             "({1, 2}, frozenset('a'), {'k': (1.5, b'x', None)}, complex(1, 2), 10**30)",
             "np.arange(4).tolist()", "1/0", "__import__('time').sleep(5)", "'after'"]
    r = ex.run(Job(prog, calls))
    assert r.program_ok, r.stderr
    assert [c.status for c in r.calls] == ["ok"] * 5 + ["error", "timeout", "ok"], r.calls
    assert values_equal(val(r, 0), encode(True))
    assert values_equal(val(r, 1), encode([])) and values_equal(val(r, 2), encode(False))
    assert values_equal(val(r, 3), encode(({1, 2}, frozenset("a"), {"k": (1.5, b"x", None)}, complex(1, 2), 10**30)))
    assert values_equal(val(r, 4), encode([0, 1, 2, 3])) and values_equal(val(r, 7), encode("after"))
    r = ex.run(Job("raise ValueError('shown')\n"))
    assert r.program_error == "ValueError: shown" and "Traceback" in r.stderr and "ValueError: shown" in r.stderr


def test_escapes_to_network(ex, host):
    need(ex, "net-namespace")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        prog = (f"import socket\ns = socket.socket()\ns.settimeout(1)\ns.connect(('127.0.0.1', {port}))\n")
        r = ex.run(Job(prog))
        assert not r.program_ok and r.program_error.split(":")[0] in (
            "ConnectionRefusedError", "OSError", "TimeoutError", "PermissionError")
        r = ex.run(Job("import socket\nsocket.getaddrinfo('example.com', 80)\n"))
        assert not r.program_ok
    finally:
        server.close()


def test_escapes_to_other_processes_and_the_environment(ex, host):
    need(ex, "pid-namespace", "unprivileged-uid", "scrubbed-env")
    sentinel = subprocess.Popen(["sleep", "60"])  # a host process, the test's own
    try:
        prog = f"""
import os, signal
hits = []
for pid in ({os.getpid()}, 1, {os.getppid()}, {sentinel.pid}):
    try:
        os.kill(pid, 0)
        hits.append(pid)
    except OSError:
        pass
for pid in ({sentinel.pid}, -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print(hits)
"""
        r = ex.run(Job(prog))
        assert r.program_ok, (r.program_error, r.stderr)
        # Nothing could be signalled: not the test, its parent, its sentinel, nor the worker
        # (pid 1 of the run's namespace, root's); and kill(-1) left the sentinel alive.
        assert r.stdout == "[]\n", r.stdout
        assert sentinel.poll() is None
    finally:
        sentinel.kill()
        sentinel.wait()
    r = ex.run(Job("import os\nprint(os.getppid(), os.getuid())\n",
                   ["sorted(__import__('os').environ)", "str(dict(__import__('os').environ))"]))
    assert r.program_ok
    ppid, uid = map(int, r.stdout.split())
    assert ppid == 1  # its parent is the worker, init of a pid namespace of its own
    assert uid != 0 and uid in {w.hello["uid"] for w in ex._all if w.hello}
    assert SECRET not in str(r.calls[1].value) and "CODEA1_TEST_API_KEY" not in str(r.calls[0].value)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs switch to a uid of their own only as root")
def test_every_live_worker_of_a_process_runs_under_a_uid_of_its_own(ex):
    """RLIMIT_NPROC counts per uid over the machine: two workers on one uid would share a
    run's process budget (and its runs could signal each other's). The uid was
    `pid % 100000 * 64 + index % 64`: two executors of one process (index 0 twice), or a
    65th worker, shared one."""
    def uid_of_a_run(executor) -> int:
        r = executor.run(Job("import os\nprint(os.getuid())\n"))
        assert r.program_ok, (r.program_error, r.stderr)
        return int(r.stdout)

    with Executor(workers=1, limits=LIM) as one, Executor(workers=1, limits=LIM) as other:
        workers = [w for e in (ex, one, other) for w in e._all if w.hello]
        uids = [w.hello["uid"] for w in workers]
        assert len(uids) == 4 and len(set(uids)) == 4, uids
        assert uid_of_a_run(one) != uid_of_a_run(other)
    from codea1.sandbox.executor import _UID_SLOTS, _UidSlots, run_uid

    slots = _UidSlots()
    taken = [slots.take() for _ in range(100)]   # (more than 64 workers: one host's CPUs)
    assert len({run_uid(os.getpid(), s) for s in taken}) == 100
    slots.give_back(taken[7])
    assert slots.take() == taken[7]               # an ended worker's slot serves its replacement
    assert run_uid(4_194_303, _UID_SLOTS - 1) < 2**31   # (Linux's largest pid)


# 10 -----------------------------------------------------------------------------------
def test_state_poisoning_does_not_leak_between_runs(ex, host):
    poison = ("import math, builtins, sys, os, json\nmath.pi = 3\nbuiltins.len = lambda x: 0\n"
              "sys.modules['json'] = None\nos.environ['POISON'] = '1'\nos.chdir('/')\n"
              "open('/scratch/left-behind', 'w').write('x') if os.path.isdir('/scratch') else None\n"
              "import random\nrandom.seed(0)\n")
    check = ("import math, json, os\n", ["math.pi", "len([1, 2])", "json.dumps(1)", "os.environ.get('POISON')",
                                         "os.listdir('.')"])
    results = ex.run_many([Job(poison, ["math.pi"])] * 4 + [Job(*check)] * 8)
    assert values_equal(val(results[0]), encode(3))
    for r in results[4:]:
        assert values_equal(val(r, 0), encode(3.141592653589793))
        assert values_equal(val(r, 1), encode(2))
        assert values_equal(val(r, 2), encode("1"))
        assert values_equal(val(r, 3), encode(None))
        assert values_equal(val(r, 4), encode([]))


# 11 -----------------------------------------------------------------------------------
def test_a_candidate_cannot_pass_itself_off_as_infrastructure_noise(ex, host):
    for prog in (f"import os\nos._exit({SETUP_FAILED_EXIT})\n", "import os\nos.close(3)\nos._exit(1)\n",
                 "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"):
        r = ex.run(Job(prog, ["1"]))
        assert r.status == "error" and r.infra_error is None and not r.program_ok


def test_worker_death_is_infra_not_a_verdict(host):
    with Executor(workers=1, limits=LIM, preload=()) as e:
        stop = threading.Event()

        def killer():
            while not stop.is_set():
                for w in list(e._all):
                    try:
                        os.killpg(w.proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                stop.wait(0.05)

        t = threading.Thread(target=killer)
        t.start()
        try:
            r = e.run(Job("import time\ntime.sleep(1)\nassert False\n"))
        finally:
            stop.set()
            t.join()
        assert r.status == "infra" and not r.program_ok and r.infra_error
