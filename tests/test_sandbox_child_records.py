"""The exact bytes the run's harness (`_child.child_main`) writes on the result pipe: the
worker's `_RecordParser` reads these strictly, so a change here is a protocol change.

Run in a plain fork, without the worker's confinement (no chroot, no uid switch, no cgroup):
only the records are under test here; the attacks are in test_sandbox_attacks.py."""

import os
import select
import sys

import pytest

if sys.platform != "linux":
    pytest.skip("the sandbox runs on Linux", allow_module_level=True)

from codea1.sandbox._child import child_main, compile_untrusted  # noqa: E402

NONCE = "0123456789abcdef"


def _records(tmp_path, program: str, calls: list[str], start: int = 0, isolated=()) -> tuple[str, int]:
    pipes = [os.pipe() for _ in range(3)]
    plan = {"result_fd": 57, "nonce": NONCE, "cgroup_procs": [], "cpu_s": 5, "max_file_bytes": 1 << 20,
            "max_value_bytes": 4000, "as_bytes": None, "nproc": None, "chroot": None, "cwd": str(tmp_path),
            "uid": None}
    pid = os.fork()
    if pid == 0:
        try:
            child_main(plan, compile_untrusted(program, "program.py", "exec"),
                       tuple(compile_untrusted(c, "<call>", "eval") for c in calls), start,
                       tuple(w for _, w in pipes), frozenset(isolated))
        finally:
            os._exit(121)
    for _, w in pipes:
        os.close(w)
    got = {r: b"" for r, _ in pipes}
    reading = set(got)
    while reading:
        ready = select.select(list(reading), [], [], 10)[0]
        if not ready:
            os.kill(pid, 9)
            pytest.fail("the child wrote nothing for 10 s")
        for r in ready:
            data = os.read(r, 1 << 16)
            got[r] += data
            if not data:
                os.close(r)
                reading.discard(r)
    _, status = os.waitpid(pid, 0)
    return got[pipes[2][0]].decode("ascii"), os.waitstatus_to_exitcode(status)


def test_records_of_a_program_and_its_calls(tmp_path):
    text, code = _records(tmp_path, "def f(x):\n    return x * 2\n", ["f(2)", "f('a')", "{1, 2}", "1/0", "'x' * 5000"])
    assert code == 0
    assert text == (
        '["ready"]\n["P",true,null,"' + NONCE + '"]\n'
        '["S",0]\n["R",0,"ok",["int","4"]]\n["S",1]\n["R",1,"ok",["str","aa"]]\n'
        '["S",2]\n["R",2,"ok",["set",[["int","1"],["int","2"]]]]\n'
        '["S",3]\n["R",3,"error","ZeroDivisionError: division by zero"]\n'
        '["S",4]\n["R",4,"ok",["digest","8e6b87bafbe68649be3e2d72d37b4fc6c769697fdfe5e48b068ab2fcb6414c9e",5010]]\n'  # (over 4000 bytes: its digest)
        '["E","' + NONCE + '"]\n')


def test_records_from_a_later_call_with_isolated_calls(tmp_path):
    text, code = _records(tmp_path, "import os\nx = []\n", ["x.append(1) or len(x)", "os._exit(3)", "x.append(2) or x"],
                          start=1, isolated=(1, 2))
    assert code == 0
    assert text == (
        '["ready"]\n["P",true,null,"' + NONCE + '"]\n'
        '["S",1]\n["R",1,"error","IsolatedCallFailed: the call\'s process ended without a result (wait status 768)"]\n'
        '["S",2]\n["R",2,"ok",["list",[["int","2"]]]]\n'
        '["E","' + NONCE + '"]\n')


def test_records_of_a_failed_program(tmp_path):
    text, code = _records(tmp_path, "import sys\nsys.exit(7)\n", ["1"])
    assert (text, code) == ('["ready"]\n["P",false,"SystemExit: 7","' + NONCE + '"]\n', 7)
    text, code = _records(tmp_path, "raise ValueError('boom')\n", ["1"])
    assert (text, code) == ('["ready"]\n["P",false,"ValueError: boom","' + NONCE + '"]\n', 1)
