"""cgroup v1/v2/hybrid detection and the sandbox's v2 groups.

Detection is tested on the texts of /proc/self/cgroup and /proc/self/mountinfo of each
layout; the controller files (memory.max, pids.max, memory.events, subtree_control) on a
fake directory tree; the core files (cgroup.procs, cgroup.kill) and the executor's use of
a v2 group on a real cgroup2 mount where this machine allows one (root; skipped otherwise).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/self"),
                                reason="the sandbox needs Linux (fork, /proc)")

from codea1.sandbox import Executor, Job, Limits, cgroups  # noqa: E402

FAST = Limits(timeout_s=5.0, call_timeout_s=2.0, memory_mb=256, max_procs=16)

# ---------------------------------------------------------------------------- detection

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
"""
V1_CGROUP = "9:name=systemd:/user.slice\n8:pids:/user.slice/u\n4:memory:/job/42\n2:cpu,cpuacct:/\n"
HYBRID_MOUNTS = V1_MOUNTS + "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
HYBRID_CGROUP = V1_CGROUP + "0::/user.slice/session-3.scope\n"
V2_MOUNTS = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
V2_CGROUP = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope\n"
# Docker's default: a private cgroup namespace, the tree mounted read-only at its root.
CONTAINER_MOUNTS = "700 690 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup ro\n"
CONTAINER_CGROUP = "0::/\n"


def test_detect_names_each_layout_and_where_this_process_sits():
    v1 = cgroups.detect(V1_CGROUP, V1_MOUNTS)
    assert v1.kind == "v1" and v1.v2 is None
    assert v1.v1 == {"pids": "/sys/fs/cgroup/pids/user.slice/u", "memory": "/sys/fs/cgroup/memory/job/42"}
    hybrid = cgroups.detect(HYBRID_CGROUP, HYBRID_MOUNTS)
    assert hybrid.kind == "hybrid" and hybrid.v1 == v1.v1
    assert hybrid.v2 == "/sys/fs/cgroup/unified/user.slice/session-3.scope"
    assert hybrid.v2_mount == "/sys/fs/cgroup/unified"
    v2 = cgroups.detect(V2_CGROUP, V2_MOUNTS)
    assert v2.kind == "v2" and v2.v1 == {} and not v2.v2_read_only
    assert v2.v2 == "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope"
    box = cgroups.detect(CONTAINER_CGROUP, CONTAINER_MOUNTS)
    assert box.kind == "v2" and box.v2 == "/sys/fs/cgroup" and box.v2_read_only
    assert cgroups.detect("", "").kind == "none"
    # a v2 line but no cgroup2 mount (the tree is not visible here): nothing usable
    assert cgroups.detect(V2_CGROUP, V1_MOUNTS).kind == "none"


def test_detect_maps_a_bound_subtree_and_escaped_mount_points():
    # A sub-tree of the hierarchy bound at the mount point (a container without cgroupns).
    mounts = ("50 40 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
              "51 40 0:26 /docker/abc /mnt/my\\040cgroup rw - cgroup2 cgroup2 rw\n")
    h = cgroups.detect("4:memory:/docker/abc/inner\n0::/docker/abc\n", mounts)
    assert h.v1["memory"] == "/sys/fs/cgroup/memory/inner"
    assert h.v2 == "/mnt/my cgroup" and h.kind == "hybrid"
    # A group outside the bound sub-tree is not visible through that mount.
    assert "memory" not in cgroups.detect("4:memory:/elsewhere\n", mounts).v1


def test_detect_reads_this_machine():
    h = cgroups.detect()
    assert h.kind in ("v1", "v2", "hybrid", "none")
    assert h.kind in h.describe()


# ---------------------------------------------------------------------------- fake trees


def fake_group(path, controllers=("cpu", "memory", "pids"), procs=(), files=()):
    """A directory shaped like a cgroup v2 group (regular files: writes are recorded, not obeyed)."""
    os.makedirs(path, exist_ok=True)
    for name, text in {"cgroup.controllers": " ".join(controllers), "cgroup.subtree_control": "",
                       "cgroup.procs": "".join(f"{p}\n" for p in procs), **dict(files)}.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
    return str(path)


def read(path, name):
    with open(os.path.join(path, name)) as f:
        return f.read()


def test_prepare_v2_delegated_enables_memory_and_pids_in_the_callers_group(tmp_path):
    top = fake_group(tmp_path / "cg")
    own = fake_group(tmp_path / "cg" / "user.slice" / "run.scope")
    s = cgroups.prepare(cgroups.Hierarchy("v2", v2=own, v2_mount=top), euid=1000)
    assert (s.backend, s.parent, s.controllers, s.why) == ("v2", own, ("memory", "pids"), {})
    assert read(own, "cgroup.subtree_control") == "+memory +pids"
    assert read(top, "cgroup.subtree_control") == ""  # not root: the top is not touched
    cgroups.undo(s)
    assert read(own, "cgroup.subtree_control") == "-memory -pids"


def test_prepare_v2_as_root_uses_the_top_and_leaves_the_caller_where_it_is(tmp_path):
    top = fake_group(tmp_path / "cg")
    own = fake_group(tmp_path / "cg" / "user.slice" / "session.scope", procs=[os.getpid()])
    s = cgroups.prepare(cgroups.Hierarchy("v2", v2=own, v2_mount=top), euid=0)
    assert (s.backend, s.parent, s.controllers) == ("v2", top, ("memory", "pids"))
    assert read(own, "cgroup.subtree_control") == "" and s.caller_leaf is None


def test_prepare_moves_the_caller_into_a_leaf_when_its_group_holds_processes(tmp_path, monkeypatch):
    own = fake_group(tmp_path / "cg" / "app.scope", procs=[os.getpid()])
    leaf = fake_group(tmp_path / "cg" / "app.scope" / cgroups.caller_leaf_name())
    answers = [errno.EBUSY, None]  # v2: no controllers for sub-groups while the group holds a process
    real_enable = cgroups._enable
    monkeypatch.setattr(cgroups, "_enable", lambda parent, ctls: answers.pop(0) if answers else real_enable(parent, ctls))
    s = cgroups.prepare(cgroups.Hierarchy("v2", v2=own, v2_mount=str(tmp_path / "cg")), euid=1000)
    assert (s.backend, s.parent, s.controllers, s.caller_leaf) == ("v2", own, ("memory", "pids"), leaf)
    assert read(leaf, "cgroup.procs").split() == [str(os.getpid())]
    with open(os.path.join(own, "cgroup.procs"), "w"):
        pass  # (what the kernel does: the process has left the group)
    cgroups.undo(s)  # controllers off again, and the caller back where it was
    assert read(own, "cgroup.subtree_control") == "-memory -pids"
    assert read(own, "cgroup.procs").split() == [str(os.getpid())]


def test_prepare_never_moves_other_processes_and_says_how_to_proceed(tmp_path, monkeypatch):
    own = fake_group(tmp_path / "cg" / "session.scope", procs=[1, os.getpid()])
    monkeypatch.setattr(cgroups, "_enable", lambda parent, ctls: errno.EBUSY)
    s = cgroups.prepare(cgroups.Hierarchy("v2", v2=own, v2_mount=str(tmp_path / "cg")), euid=1000)
    # Still a group per worker (it kills a whole run), but no cap: and why, in one line.
    assert (s.backend, s.controllers, s.caller_leaf) == ("v2", (), None)
    assert "holds 1 other process(es)" in s.why["memory"] and "Delegate=yes" in s.why["memory"]
    assert not os.path.exists(os.path.join(own, cgroups.caller_leaf_name()))


def test_prepare_in_a_default_container_falls_back_and_says_so(tmp_path):
    top = fake_group(tmp_path / "cg")
    s = cgroups.prepare(cgroups.Hierarchy("v2", v2=top, v2_mount=top, v2_read_only=True), euid=0)
    assert s.backend is None
    assert "read-only (a default container)" in s.why["memory"] and "read-only" in s.why["pids"]
    assert "no cgroup mounted" in cgroups.prepare(cgroups.Hierarchy("none"), euid=0).why["memory"]


def test_prepare_hybrid_prefers_v1_when_v2_has_no_memory_controller(tmp_path):
    uni = fake_group(tmp_path / "unified", controllers=("hugetlb",))
    mem = fake_group(tmp_path / "memory" / "job", controllers=())
    s = cgroups.prepare(cgroups.Hierarchy("hybrid", v1={"memory": mem}, v2=uni, v2_mount=uni), euid=0)
    assert (s.backend, s.v1) == ("v1", {"memory": mem})
    assert "offers no pids controller" in s.why["pids"] and "no v1 pids" in s.why["pids"]
    s = cgroups.prepare(cgroups.Hierarchy("hybrid", v1={"memory": mem}, v2=uni, v2_mount=uni), euid=1000)
    assert s.backend == "v2" and s.controllers == ()  # not root: only the unified group is writable
    assert "offers no memory controller" in s.why["memory"] and "needs root" in s.why["memory"]


def test_v2_group_writes_the_caps_and_reads_oom_kills(tmp_path):
    path = fake_group(tmp_path / "run", files={"memory.max": "", "pids.max": "",
                                               "memory.events": "low 0\nhigh 0\nmax 4\noom 5\noom_kill 2\n"})
    g = cgroups.V2Group(path, ["memory", "pids"], swap=True)
    g.set_limits(256 * 2**20, 16)
    assert read(path, "memory.max") == str(256 * 2**20) and read(path, "pids.max") == "16"
    assert g.procs_files() == [os.path.join(path, "cgroup.procs")] and g.oom_kills() == 2
    only_pids = cgroups.V2Group(path, ["pids"], swap=False)
    assert not only_pids.has_memory and only_pids.oom_kills() == 0


def test_make_run_groups_sets_no_swap_and_group_oom_kills(tmp_path, monkeypatch):
    parent = fake_group(tmp_path / "cg")
    real_mkdir = os.mkdir

    def mkdir_group(path, mode=0o777):  # the kernel makes a new group's files with it
        real_mkdir(path, mode)
        fake_group(path, files={"memory.swap.max": "", "memory.oom.group": ""})

    monkeypatch.setattr(cgroups.os, "mkdir", mkdir_group)
    s = cgroups.Setup(cgroups.Hierarchy("v2", v2=parent, v2_mount=parent), backend="v2", parent=parent,
                      controllers=("memory", "pids"), why={})
    cfg, paths = cgroups.make_run_groups(s, "codea1-sbx-1-0-1")
    assert paths == [os.path.join(parent, "codea1-sbx-1-0-1")]
    assert cfg == {"cgroup_why": {}, "v2_cgroup": paths[0], "v2_controllers": ["memory", "pids"], "v2_swap": True}
    assert read(paths[0], "memory.swap.max") == "0" and read(paths[0], "memory.oom.group") == "1"


def test_a_v2_oom_kill_stays_a_memory_verdict(tmp_path):
    """The worker reads memory.events after a SIGKILL: a kill by the OOM killer is
    "memory", a SIGKILL without one is not."""
    from codea1.sandbox._worker import Worker

    path = fake_group(tmp_path / "run", files={"memory.events": "oom 0\noom_kill 0\n"})
    w = Worker({}, -1, -1)
    w.cg = cgroups.V2Group(path, ["memory", "pids"], swap=True)
    killed = signal.SIGKILL  # (the wait status of a process killed by SIGKILL is the signal number)
    lim = {"memory_mb": 256, "timeout_s": 5, "call_timeout_s": 1, "cpu_s": 5}
    seg = {"kill": None, "oom": w._oom_happened(killed), "status": killed, "cpu": 0.0}
    assert not seg["oom"] and w._death_status(seg, lim)[0] == "error"
    with open(os.path.join(path, "memory.events"), "w") as f:
        f.write("oom 1\noom_kill 1\n")
    seg["oom"] = w._oom_happened(killed)
    assert seg["oom"] and w._death_status(seg, lim) == ("memory", "MemoryError: killed at the memory limit (256 MB)")
    assert not w._oom_happened(killed)  # counted once


def test_worker_reports_each_cap_as_held_degraded_or_lost(tmp_path):
    from codea1.sandbox._worker import Worker

    path = fake_group(tmp_path / "run")
    for cfg, root, memory, pids in [
        ({"v2_cgroup": path, "v2_controllers": ["memory", "pids"], "v2_swap": True}, True, True, True),
        ({"v2_cgroup": path, "v2_controllers": ["memory", "pids"], "v2_swap": False}, True, "DEGRADED", True),
        ({"v2_cgroup": path, "v2_controllers": [], "cgroup_why": {"memory": "m-why", "pids": "p-why"}},
         True, "DEGRADED", "DEGRADED"),
        ({"cgroup_why": {"memory": "m-why", "pids": "p-why"}}, False, "DEGRADED", "LOST"),
    ]:
        w = Worker(cfg, -1, -1)
        w.cgroup_protections(root)
        got = [w.protections["memory-cgroup"], w.protections["pids-cgroup"]]
        assert [g if g is True else g.split(":")[0] for g in got] == [memory, pids], got
        if memory == "DEGRADED" and "m-why" in str(cfg):
            assert "m-why" in got[0] and "RLIMIT_AS" in got[0]
        if pids == "LOST":
            assert "p-why" in got[1]


# ---------------------------------------------------------------------------- a real cgroup2 mount


@pytest.fixture
def cgroup2(tmp_path_factory):
    """A fresh mount of the unified hierarchy (root only): its core files are real."""
    if os.geteuid() != 0:
        pytest.skip("mounting cgroup2 needs root")
    point = tempfile.mkdtemp(prefix="codea1-cg2-")
    done = subprocess.run(["mount", "-t", "cgroup2", "none", point], capture_output=True, text=True)
    if done.returncode != 0:
        os.rmdir(point)
        pytest.skip(f"this kernel refuses a cgroup2 mount: {done.stderr.strip()}")
    base = os.path.join(point, f"codea1-test-{os.getpid()}")
    os.mkdir(base)
    try:
        yield base
    finally:
        for d, _, _ in sorted(os.walk(base), key=lambda t: -len(t[0])):
            cgroups.kill_group(d)
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.02)
        subprocess.run(["umount", point])
        os.rmdir(point)


_TREE = """
import os, sys, time
sys.stdin.readline()  # moved into the group by now
pids = [os.getpid()]
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # daemonised grandchild: not our child any more
        os.write(w, b"%d\\n" % os.getpid())
        time.sleep(600)
    os._exit(0)
os.wait()
pids.append(int(os.read(r, 64)))
print(*pids, flush=True)
time.sleep(600)
"""


def _start_tree_in(group: str) -> tuple[subprocess.Popen, list[int]]:
    p = subprocess.Popen([sys.executable, "-c", _TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cgroups.write_text(os.path.join(group, "cgroup.procs"), str(p.pid))
    p.stdin.write("go\n")
    p.stdin.flush()
    pids = [int(x) for x in p.stdout.readline().split()]
    assert len(pids) == 2 and sorted(map(int, cgroups.read_words(os.path.join(group, "cgroup.procs")))) == sorted(pids)
    return p, pids


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("use_kill_file", [True, False], ids=["cgroup.kill", "walk cgroup.procs"])
def test_kill_group_kills_every_process_daemonised_ones_included(cgroup2, use_kill_file):
    group = os.path.join(cgroup2, "codea1-sbx-1-0-1")
    os.mkdir(group)
    p, pids = _start_tree_in(group)
    passes = cgroups.kill_group(group, use_kill_file=use_kill_file)
    if use_kill_file:
        assert passes == 0
    else:  # a pass that signalled someone, then one that found nobody left
        assert passes >= 2
    p.wait(5)
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(_gone(pid) for pid in pids), pids
    assert cgroups.remove_run_group(group) and not os.path.exists(group)


def test_remove_stale_cleans_up_after_a_killed_codea1(cgroup2):
    dead = _dead_pid()
    ns = os.stat("/proc/self/ns/pid").st_ino
    stale_run = os.path.join(cgroup2, f"codea1-sbx-{ns}-{dead}-0-7")
    stale_leaf = os.path.join(cgroup2, f"codea1-caller-{ns}-{dead}")
    mine = os.path.join(cgroup2, cgroups.run_group_name(0, 7))
    elsewhere = os.path.join(cgroup2, f"codea1-sbx-{ns + 1}-{dead}-0-7")  # another pid namespace's
    other = os.path.join(cgroup2, "someone-elses")
    for d in (stale_run, stale_leaf, mine, elsewhere, other):
        os.mkdir(d)
    p, pids = _start_tree_in(stale_run)  # a run that outlived its executor
    h = cgroups.Hierarchy("v2", v2=cgroup2, v2_mount=os.path.dirname(cgroup2))
    deadline = time.monotonic() + 5
    removed: list[str] = []
    while os.path.exists(stale_run) and time.monotonic() < deadline:
        removed += cgroups.remove_stale(h)
        time.sleep(0.02)
    p.wait(5)
    assert sorted(removed) == sorted([stale_run, stale_leaf])
    # a live executor's, one whose maker's pid means nothing here, and one not ours at all
    assert os.path.isdir(mine) and os.path.isdir(elsewhere) and os.path.isdir(other)
    assert all(_gone(pid) for pid in pids)


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_prepare_on_a_real_unified_tree_without_controllers(cgroup2):
    """This kernel's unified tree has no memory controller here (hybrid layout): prepare
    keeps a kill-only group and says why no cap is a cgroup's."""
    h = cgroups.Hierarchy("v2", v2=cgroup2, v2_mount=os.path.dirname(cgroup2))
    if "memory" in cgroups.read_words(os.path.join(cgroup2, "cgroup.controllers")):
        pytest.skip("this machine's unified tree offers memory: the fake-tree tests cover the rest")
    s = cgroups.prepare(h, euid=0)
    assert s.backend == "v2" and s.controllers == () and "offers no memory controller" in s.why["memory"]
    cfg, paths = cgroups.make_run_groups(s, cgroups.run_group_name(0, 99))
    assert cfg["v2_cgroup"] == paths[0] and os.path.isdir(paths[0]) and cfg["v2_controllers"] == []
    assert cgroups.remove_run_group(paths[0])
    # A memory controller claimed where the kernel has none: no swap.max to write, so the
    # cap is reported without swap accounting rather than as held.
    s.controllers = ("memory",)
    cfg, paths = cgroups.make_run_groups(s, cgroups.run_group_name(0, 98))
    assert cfg["v2_swap"] is False
    assert cgroups.remove_run_group(paths[0])


@pytest.mark.parametrize("isolate", [True, False], ids=["namespaces", "no namespaces"])
def test_executor_runs_each_run_in_its_v2_group_and_leaves_no_group(cgroup2, isolate):
    s = cgroups.Setup(cgroups.Hierarchy("v2", v2=cgroup2, v2_mount=os.path.dirname(cgroup2)),
                      backend="v2", parent=cgroup2, controllers=())
    with Executor(workers=1, limits=FAST, preload=(), isolate=isolate, cgroup_setup=s) as ex:
        group = ex._all[0].cgroups[0]
        procs = os.path.join(group, "cgroup.procs")
        assert os.path.dirname(group) == cgroup2
        daemon = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                  "        time.sleep(600)\n    os._exit(0)\ntime.sleep(1.0)\n")
        future = ex.submit(Job(daemon, [], FAST))
        seen: set[str] = set()
        deadline = time.monotonic() + 3
        while not future.done() and time.monotonic() < deadline:
            seen.update(cgroups.read_words(procs))
            time.sleep(0.01)
        assert future.result().status == "ok"
        assert len(seen) >= 2, seen  # the run and its daemonised grandchild were in the group
        assert cgroups.read_words(procs) == []  # and nothing of them is left
        assert ex.run(Job("x = 1\n", ["x"])).calls[0].status == "ok"
    assert [n for n in os.listdir(cgroup2) if os.path.isdir(os.path.join(cgroup2, n))] == []


def test_executor_shares_one_setup_and_undoes_it_after_the_last_close(monkeypatch):
    calls = []
    real_prepare, real_undo = cgroups.prepare, cgroups.undo
    monkeypatch.setattr(cgroups, "prepare", lambda h, euid: calls.append("prepare") or real_prepare(h, euid))
    monkeypatch.setattr(cgroups, "undo", lambda s: calls.append("undo") or real_undo(s))
    with Executor(workers=1, limits=FAST, preload=()) as a:
        with Executor(workers=1, limits=FAST, preload=()) as b:
            assert a.cgroup_setup is b.cgroup_setup
        assert calls == ["prepare"]
    assert calls == ["prepare", "undo"]
    with Executor(workers=1, limits=FAST, preload=(), isolate=False) as c:
        assert c.cgroup_setup is None and c._all[0].cgroups == []
    assert calls == ["prepare", "undo"]


def test_sandbox_check_names_the_hierarchy_and_each_state():
    from codea1.sandbox.cli import protection_state

    assert protection_state(True) == ("held", "")
    assert protection_state("DEGRADED: no memory cgroup (x): RLIMIT_AS") == ("degraded", "no memory cgroup (x): RLIMIT_AS")
    assert protection_state("partial: no process-count limit") == ("degraded", "no process-count limit")
    assert protection_state("LOST: unshare failed") == ("missing", "unshare failed")
    s = cgroups.prepare(cgroups.detect(), os.geteuid())
    try:
        line = s.summary()
    finally:
        cgroups.undo(s)
    assert line.startswith(f"cgroup hierarchy: {cgroups.detect().kind}")
    assert ("using " + (s.backend or "")) in line if s.backend else "no cgroup used" in line


def test_group_names_say_whose_they_are():
    ns = os.stat("/proc/self/ns/pid").st_ino
    assert cgroups.run_group_name(3, 9) == f"codea1-sbx-{ns}-{os.getpid()}-3-9"
    assert cgroups._owner_pid(cgroups.run_group_name(3, 9)) == os.getpid()
    assert cgroups._owner_pid(f"codea1-caller-{ns}-42") == 42
    assert cgroups._owner_pid(f"codea1-sbx-{ns + 1}-42-0-1") is None  # another pid namespace: unknown
    assert cgroups._owner_pid("codea1-sbx-42-0-1") == 42  # the older v1 name (pid-index-serial)
    assert cgroups._owner_pid("codea1-sbx-x-0-1") is None and cgroups._owner_pid("user.slice") is None
