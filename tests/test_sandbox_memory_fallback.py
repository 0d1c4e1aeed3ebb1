"""The memory cap where no cgroup can be had: RLIMIT_AS, met by memory bombs.

As root a memory cgroup always exists in the other tests, so the fallback (a machine
where no cgroup is writable: unprivileged containers, some CI runners) never met a bomb.
Here the executor is handed a cgroup set-up with no backend, the path such a machine
takes, and each kind of bomb must still be stopped at the cap.

Fault tried: the RLIMIT_AS fallback dropped (`plan()` giving `as_bytes` None without a
memory cgroup): every bomb below then allocated its 1.5-4 GiB and ran `ok`, and this test
failed on each.
"""

from __future__ import annotations

import pytest

from codea1.sandbox import Executor, Job, Limits, cgroups, support

LIMITS = Limits(timeout_s=10.0, call_timeout_s=5.0, memory_mb=256, max_procs=16)
BIG = 1536 << 20  # 1.5 GiB: far over the 256 MB cap, small enough not to hurt the machine if it went through


@pytest.fixture(scope="module")
def ex():
    support.require("the sandbox's memory fallback")
    none = cgroups.Setup(cgroups.Hierarchy("none"),
                         why={"memory": "none offered (the test)", "pids": "none offered (the test)"})
    with Executor(workers=1, limits=LIMITS, preload=(), cgroup_setup=none) as ex:
        yield ex


def test_no_cgroup_is_used_and_the_fallback_is_announced(ex):
    assert ex.protections["memory-cgroup"].startswith("DEGRADED: no memory cgroup (none offered (the test))")
    assert "RLIMIT_AS" in ex.protections["memory-cgroup"]


def test_a_program_that_allocates_past_the_cap_is_a_memory_failure(ex):
    r = ex.run(Job(f"x = bytearray({BIG})\n", ["len(x)"]))
    assert (r.status, r.program_ok, r.program_error) == ("memory", False, "MemoryError")
    assert [c.status for c in r.calls] == ["not-run"]
    assert r.peak_mb < LIMITS.memory_mb   # stopped before it touched the memory


def test_a_call_that_allocates_past_the_cap_fails_alone(ex):
    r = ex.run(Job(f"def eat():\n    return bytearray({BIG})\n", ["len(eat())", "1 + 1"]))
    assert r.status == "ok" and r.program_ok
    assert (r.calls[0].status, r.calls[0].error) == ("error", "MemoryError")
    assert (r.calls[1].status, r.calls[1].value) == ("ok", ["int", "2"])


def test_address_space_is_capped_not_only_touched_memory(ex):
    """An untouched 4 GiB mapping: nothing but RLIMIT_AS refuses it."""
    r = ex.run(Job("import mmap\nm = mmap.mmap(-1, 4 << 30)\n", ["len(m)"]))
    assert r.status == "error" and not r.program_ok
    assert r.program_error.startswith("OSError: [Errno 12]")


def test_what_fits_under_the_cap_still_runs(ex):
    r = ex.run(Job("x = bytearray(64 << 20)\n", ["len(x)"]))
    assert r.status == "ok" and r.calls[0].value == ["int", str(64 << 20)]
    assert 64 <= r.peak_mb < LIMITS.memory_mb
