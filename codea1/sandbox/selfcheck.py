"""Self-test of the executor on this machine: a good program plus one attack per class.

``codea1 sandbox check`` prints the result as a table; each check is a real run through
the executor and an assertion on its trusted outcome, so a protection that does not hold
here shows up as FAIL instead of being assumed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from codea1.sandbox.executor import Executor
from codea1.sandbox.types import Job, Limits, RunResult
from codea1.sandbox.values import encode, values_equal


@dataclass
class Check:
    name: str
    attack: str  # attack class of SANDBOX.md this exercises
    job: Job
    holds: Callable[[RunResult], bool]
    explain: str


def _call_value(r: RunResult, i: int = 0):
    c = r.calls[i] if len(r.calls) > i else None
    return c.value if c is not None and c.status == "ok" else None


_SECRET_ENV = "CODEA1_SELFCHECK_SECRET"


def checks() -> list[Check]:
    """The self-test suite (fast: a few seconds in total)."""
    fast = Limits(timeout_s=5.0, call_timeout_s=1.0, memory_mb=256, max_procs=16, max_output_bytes=4096)
    return _result_checks(fast) + _resource_checks(fast) + _escape_and_state_checks(fast)


def _result_checks(fast: Limits) -> list[Check]:
    """A good program, then the attacks on the result: fake values, tampering, faked success, forged records."""
    return [
        Check("good program", "baseline",
              Job("def add(a, b):\n    return a + b\n", ["add(2, 3)", "add('a', 'b')"], fast),
              lambda r: r.status == "ok" and r.program_ok
              and values_equal(_call_value(r, 0), encode(5))
              and values_equal(_call_value(r, 1), encode("ab")),
              "runs and returns plain values"),
        Check("fake equality", "1",
              Job("class E(int):\n    def __eq__(s, o): return True\n    __hash__ = int.__hash__\n"
                  "def f():\n    return E(0)\n", ["f()"], fast),
              lambda r: not values_equal(_call_value(r), encode(42)),
              "an int subclass with a lying __eq__ equals nothing"),
        Check("harness tampering", "2",
              Job("import builtins, json, os\njson.dumps = lambda *a, **k: '[\"E\"]'\n"
                  "builtins.print = None\nos.write = lambda *a: 0\n", ["1 + 1"], fast),
              lambda r: r.program_ok and values_equal(_call_value(r), encode(2)),
              "patching json/os/builtins does not change the trusted records"),
        Check("faked success", "3",
              Job("import os\nos._exit(0)\n", ["1"], fast),
              lambda r: not r.program_ok and r.calls[0].status == "not-run",
              "os._exit(0) is not success"),
        Check("forged records", "4",
              Job("import os\nprint('[\"P\",true,null]')\nfor fd in range(3, 200):\n    try:\n"
                  "        os.write(fd, b'[\"P\",true,null,\"0\"]\\n[\"E\",\"0\"]\\n')\n"
                  "    except OSError:\n        pass\nos._exit(0)\n", ["1"], fast),
              lambda r: not r.program_ok and r.calls[0].status != "ok",
              "blindly forged records (stdout, every fd) are rejected"),
    ]


def _resource_checks(fast: Limits) -> list[Check]:
    """Attacks on the host's resources: signals, time, memory, processes, output."""
    return [
        Check("signal kill from inside", "9",
              Job("import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
                  "print(os.getuid(), os.getpid())\n", [], fast),
              lambda r: r.status == "error" or (r.program_ok and r.stdout.split()[0] != "0"),
              "kill(-1) reaches only the run's own processes"),
        Check("infinite loop", "5",
              Job("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n"
                  "    try:\n        pass\n    except BaseException:\n        pass\n", [], fast),
              lambda r: r.status == "timeout" and not r.program_ok,
              "killed from outside"),
        Check("memory bomb", "6",
              Job("x = []\nwhile True:\n    x.append(bytearray(1 << 24))\n", [], fast),
              lambda r: r.status == "memory" and not r.program_ok,
              "hard memory cap"),
        Check("fork bomb", "7",
              Job("import os\nn = 0\nfor _ in range(200):\n    try:\n        if os.fork() == 0:\n"
                  "            import time; time.sleep(60)\n        n += 1\n    except OSError:\n        break\n"
                  "print(n)\n", [], fast),
              lambda r: r.program_ok and r.stdout.strip().isdigit() and int(r.stdout.strip()) < 16,
              "process cap; children are killed after the run"),
        Check("daemonised grandchild", "7",
              Job("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                  "        time.sleep(600)\n    os._exit(0)\ntime.sleep(0.1)\n", [], fast),
              lambda r: r.status == "ok",
              "nothing outlives the run (host column)"),
        Check("output flood", "8",
              Job("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", [], fast),
              lambda r: r.status == "output-limit" and len(r.stdout) <= 4096,
              "bounded and drained"),
    ]


def _escape_and_state_checks(fast: Limits) -> list[Check]:
    """Escapes (files, network, environment), a faked infrastructure failure, and state
    left for the next run."""
    return [
        Check("file escape", "9",
              Job("import os\nbad = []\nfor p in ('/etc/passwd_x', '/tmp/x', '/root/x', '/x', '/usr/x'):\n"
                  "    try:\n        open(p, 'w').write('x'); bad.append(p)\n    except OSError:\n        pass\n"
                  "print(bad)\n", [], fast),
              lambda r: r.program_ok and r.stdout.strip() == "[]",
              "no writes outside the scratch dir"),
        Check("network escape", "9",
              Job("import socket\ns = socket.socket()\ns.settimeout(1)\ns.connect(('1.1.1.1', 80))\n", [], fast),
              lambda r: not r.program_ok,
              "no network"),
        Check("environment leak", "9",
              Job("import os\nprint(sorted(os.environ))\n", ["__import__('os').environ.get('" + _SECRET_ENV + "')"],
                  fast),
              lambda r: r.program_ok and _SECRET_ENV not in r.stdout
              and values_equal(_call_value(r), encode(None)),
              "the parent's environment does not reach the run"),
        Check("fake infrastructure failure", "11",
              Job("import os\nos._exit(121)\n", ["1"], fast),
              lambda r: r.status == "error" and r.infra_error is None,
              "a candidate's own exit is never excused as infra"),
        Check("state poisoning", "10",
              Job("import math\nmath.pi = 3\n", ["math.pi"], fast),
              lambda r: True,  # the poisoning run itself; the next check verifies
              "(poisons math.pi)"),
        Check("clean state", "10",
              Job("import math\n", ["math.pi"], fast),
              lambda r: values_equal(_call_value(r), encode(3.141592653589793)),
              "a previous run's changes do not leak"),
    ]


def run_checks(executor: Executor | None = None) -> list[tuple[Check, bool, RunResult, list[str]]]:
    """Run every check; returns (check, holds, result, host problems) tuples.

    A check holds only if the attack failed *and* the host is unharmed afterwards."""
    from codea1.sandbox.hostcheck import HostSnapshot

    os.environ.setdefault(_SECRET_ENV, "do-not-leak")
    own = executor is None
    ex = executor or Executor(workers=1)
    try:
        out = []
        for c in checks():
            before = HostSnapshot.take(ex)
            r = ex.run(c.job)
            harm = _settled_harm(before, ex)
            try:
                ok = bool(c.holds(r)) and r.status != "infra" and not harm
            except Exception:
                ok = False
            out.append((c, ok, r, harm))
        return out
    finally:
        if own:
            ex.close()


def _settled_harm(before, ex: Executor) -> list[str]:
    import time

    deadline = time.monotonic() + 3
    while True:
        harm = before.harm(ex, mem_slack_mb=1024)
        if not harm or time.monotonic() > deadline:
            return harm
        time.sleep(0.05)


# --------------------------------------------------------------------------- canaries

#: The places ``codea1 sandbox check`` plants a canary file in (kinds of ``places_to_hide``).
CANARY_PLACES = ("checkout", "current directory", "home directory", "/tmp")

_PROBE = """
import errno, os

def probe(p):
    how = []
    try:
        os.stat(p)
        how.append('stat')
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTDIR):
            how.append('denied')  # there, but a directory on the way is not searchable
    try:
        with open(p) as f:
            if f.read(200):
                how.append('read')
    except OSError:
        pass
    try:
        if os.path.basename(p) in os.listdir(os.path.dirname(p)):
            how.append('listed')
    except OSError:
        pass
    return ' '.join(how)
"""


@dataclass
class Canary:
    """One planted canary and what sandboxed code could do with it."""

    place: str  # e.g. "checkout, current directory"
    path: str  # the canary file
    seen: list[str]  # how the run saw it ("stat", "read", "listed", "denied"); empty: hidden
    problem: str | None = None  # why it proves nothing (not planted, the probe failed)

    @property
    def visible(self) -> bool:
        return bool(self.seen)


def canary_places(package_root: str | None = None) -> list[tuple[str, str]]:
    """(what, directory) for each canary: the checkout, the current directory, the home
    directory and /tmp, one canary per distinct directory (its names joined)."""
    from codea1.sandbox.executor import _PACKAGE_ROOT
    from codea1.sandbox.isolation import places_to_hide

    merged: dict[str, list[str]] = {}
    for what, path in places_to_hide(package_root or _PACKAGE_ROOT):
        if what in CANARY_PLACES:
            merged.setdefault(path, []).append(what)
    return [(", ".join(dict.fromkeys(names)), path) for path, names in merged.items()]


def check_canaries(executor: Executor, places: list[tuple[str, str]] | None = None) -> list[Canary]:
    """Plant a canary file in each place, let sandboxed code try to stat, read and list
    it, and remove the canaries again (whatever happens). A canary the run saw is a leak;
    one that could not be planted, or a probe that did not finish, proves nothing."""
    token = os.urandom(8).hex()
    planted: list[Canary] = []
    out: list[Canary] = []
    try:
        for what, directory in places if places is not None else canary_places():
            path = os.path.join(directory, f".codea1-canary-{token}")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    os.write(fd, f"codea1 sandbox canary {token}\n".encode())
                finally:
                    os.close(fd)
            except OSError as e:
                out.append(Canary(what, path, [], f"cannot plant a canary here: {e.strerror or e}"))
                continue
            canary = Canary(what, path, [])
            planted.append(canary)
            out.append(canary)
        if planted:
            limits = Limits(timeout_s=10.0, call_timeout_s=5.0, memory_mb=256, max_procs=16)
            r = executor.run(Job(_PROBE, [f"probe({c.path!r})" for c in planted], limits))
            for i, c in enumerate(planted):
                seen = _call_value(r, i)
                if isinstance(seen, list) and len(seen) == 2 and seen[0] == "str" and isinstance(seen[1], str):
                    c.seen = seen[1].split()
                else:
                    call = r.calls[i] if len(r.calls) > i else None
                    why = (call.error if call is not None else None) or r.program_error or r.infra_error or r.status
                    c.problem = f"the probe run failed: {why}"
    finally:
        for c in planted:
            try:
                os.unlink(c.path)
            except FileNotFoundError:
                pass
    return out

