"""cgroups for the sandbox's hard caps: which hierarchy this process lives in, where it
may make groups, and one group per worker for its runs.

Three layouts exist: **v1** (one mount per controller, ``memory`` and ``pids`` each with
its own tree), **v2** (one unified tree, current Ubuntu, Debian, Fedora and most clouds)
and **hybrid** (v1 controllers plus a unified mount, usually without controllers).
`detect` only reads (``/proc/self/cgroup``, ``/proc/self/mountinfo``); `prepare`
decides where run groups go and may enable controllers or move this process into a leaf
of its own group (cgroup v2 lets a group hand controllers to sub-groups only while it
holds no process itself). `V1Groups` and `V2Group` are what a worker drives per run.

The worker imports this module: it uses only ``os`` and ``errno`` at run time.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from dataclasses import dataclass, field

#: The controllers the sandbox caps runs with.
CONTROLLERS = ("memory", "pids")
#: Name of every group this package makes: ``codea1-sbx-<pidns>-<pid>-<index>-<serial>``
#: (a worker's runs) and ``codea1-caller-<pidns>-<pid>`` (the caller, moved out of its v2
#: group); ``pidns`` (the pid namespace's inode) tells whose ``pid`` it is.
RUN_PREFIX = "codea1-sbx-"
CALLER_PREFIX = "codea1-caller-"
#: Paths of the unified mount, best first, when several are mounted.
_V2_USUAL = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")


# --------------------------------------------------------------------------- detection


@dataclass(frozen=True)
class Mount:
    root: str  # the directory of the hierarchy mounted here ("/" unless a sub-tree is bound)
    point: str  # where it is mounted
    fstype: str  # "cgroup" (v1) or "cgroup2"
    options: frozenset  # super options: for v1 the controllers, e.g. {"rw", "memory"}
    read_only: bool


def _unescape(text: str) -> str:
    """Mount points in mountinfo spell space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup and cgroup2 mounts of a ``/proc/self/mountinfo`` text."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        mount_opts = set(fields[5].split(","))
        super_opts = frozenset(tail[2].split(","))
        out.append(Mount(_unescape(fields[3]), _unescape(fields[4]), tail[0], super_opts,
                         "ro" in mount_opts or "ro" in super_opts))
    return out


def _own_dir(mount: Mount, path: str) -> str | None:
    """Where the group ``path`` (as /proc/self/cgroup names it) lies under ``mount``; None
    when that mount does not show it (a sub-tree of the hierarchy bound elsewhere)."""
    root = mount.root.rstrip("/")
    if root and not (path == root or path.startswith(root + "/")):
        return None
    rel = path[len(root):].lstrip("/")
    return os.path.join(mount.point, rel) if rel else mount.point


@dataclass(frozen=True)
class Hierarchy:
    """This process's cgroups: ``kind`` is "v1", "v2", "hybrid" or "none"."""

    kind: str
    v1: dict = field(default_factory=dict)  # controller -> this process's directory in its v1 tree
    v1_read_only: frozenset = frozenset()  # controllers whose v1 mount is read-only
    v2: str | None = None  # this process's directory in the unified tree
    v2_mount: str | None = None  # the unified tree's mount point
    v2_read_only: bool = False

    def describe(self) -> str:
        """One line: the layout and where this process sits in it."""
        parts = []
        for ctl in CONTROLLERS:
            if ctl in self.v1:
                parts.append(f"v1 {ctl} at {self.v1[ctl]}" + (" (read-only)" if ctl in self.v1_read_only else ""))
        if self.v2:
            ctls = read_words(os.path.join(self.v2, "cgroup.controllers"))
            parts.append(f"v2 at {self.v2}" + (" (read-only)" if self.v2_read_only else "")
                         + f", controllers: {' '.join(ctls) or 'none'}")
        return f"{self.kind}" + (f" ({'; '.join(parts)})" if parts else ": no cgroup mount found")


def detect(proc_cgroup: str | None = None, mountinfo: str | None = None) -> Hierarchy:
    """The cgroup layout of this process (or of the texts given: tests pass their own)."""
    try:
        if proc_cgroup is None:
            with open("/proc/self/cgroup") as f:
                proc_cgroup = f.read()
        if mountinfo is None:
            with open("/proc/self/mountinfo") as f:
                mountinfo = f.read()
    except OSError:
        return Hierarchy("none")
    mounts = parse_mountinfo(mountinfo)
    v1: dict[str, str] = {}
    v1_ro: set[str] = set()
    v1_any = False
    v2 = v2_mount = None
    v2_ro = False
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hier_id, ctls, path = parts
        if hier_id == "0" and ctls == "":
            cands = [m for m in mounts if m.fstype == "cgroup2" and _own_dir(m, path)]
            cands.sort(key=lambda m: (m.point not in _V2_USUAL, _V2_USUAL.index(m.point) if m.point in _V2_USUAL else 0))
            if cands:
                v2, v2_mount, v2_ro = _own_dir(cands[0], path), cands[0].point, cands[0].read_only
            continue
        for ctl in ctls.split(","):
            if not ctl or ctl.startswith("name="):
                continue
            for m in mounts:
                if m.fstype == "cgroup" and ctl in m.options:
                    v1_any = True
                    own = _own_dir(m, path)
                    if ctl in CONTROLLERS and own:
                        v1[ctl] = own
                        if m.read_only:
                            v1_ro.add(ctl)
                    break
    kind = ("hybrid" if v1_any and v2 else "v1" if v1_any else "v2" if v2 else "none")
    return Hierarchy(kind, v1, frozenset(v1_ro), v2, v2_mount, v2_ro)


# --------------------------------------------------------------------------- file access


def read_words(path: str) -> list[str]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    try:
        return os.read(fd, 65536).decode().split()
    except OSError:
        return []
    finally:
        os.close(fd)


def write_text(path: str, value: str) -> None:
    """Write a control file (os-level: a Python file object costs a forking worker page faults)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def read_int(path: str) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return int(os.read(fd, 4096).split()[0])
    finally:
        os.close(fd)


def read_keyed(path: str, key: str) -> int:
    """The number after ``key`` in a flat keyed file (``memory.events``, ``memory.oom_control``); 0 if absent."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0
    try:
        for line in os.read(fd, 65536).decode().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    finally:
        os.close(fd)
    return 0


def _writable(directory: str) -> bool:
    return os.access(directory, os.W_OK) and os.access(os.path.join(directory, "cgroup.procs"), os.W_OK)


def remove_group(path: str) -> None:
    """rmdir a group (missing is fine; still busy raises, to be retried)."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno not in (errno.EBUSY, errno.ENOTEMPTY):
            raise


def _pid_alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def children_of(pid: int) -> list[int]:
    """The children of ``pid`` (of every thread of it), from /proc."""
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack += children_of(p)
    return out


def kill_group(path: str, *, use_kill_file: bool = True) -> int:
    """SIGKILL every process in a v2 group: one write to ``cgroup.kill`` (Linux 5.14+), or
    else by walking ``cgroup.procs`` until a pass finds no process left to signal (a run
    forking meanwhile lands in the same group and is met on the next pass). Returns the
    number of passes made (0 with ``cgroup.kill``)."""
    kill_file = os.path.join(path, "cgroup.kill")
    if use_kill_file and os.path.exists(kill_file):
        try:
            write_text(kill_file, "1")
            return 0
        except OSError as e:
            if e.errno == errno.ENOENT:
                return 0  # the group is gone: nothing left in it
    passes = 0
    while passes < 1000:
        passes += 1
        signalled = False
        for word in read_words(os.path.join(path, "cgroup.procs")):
            pid = int(word)
            if pid <= 0 or pid == os.getpid():
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                signalled = True
            except (ProcessLookupError, PermissionError):
                pass
        if not signalled:
            break
    return passes


# --------------------------------------------------------------------------- where groups go


@dataclass
class Setup:
    """Where this process makes its run groups, and why a cap is not a cgroup's."""

    hierarchy: Hierarchy
    backend: str | None = None  # "v2", "v1" or None
    parent: str | None = None  # v2: the group the run groups are made in
    controllers: tuple = ()  # v2: controllers the run groups get
    v1: dict = field(default_factory=dict)  # v1: controller -> writable directory
    why: dict = field(default_factory=dict)  # controller -> why no cgroup caps it
    caller_leaf: str | None = None  # v2: the leaf this process moved into (put back at release)
    enabled: tuple = ()  # v2: controllers this process enabled in parent's subtree_control

    def summary(self) -> str:
        """One line for ``codea1 sandbox check``: the layout and what the sandbox uses of it."""
        if self.backend == "v2":
            use = (f"using v2: one group per worker under {self.parent}"
                   + (f" with {', '.join(self.controllers)}" if self.controllers else " (no controllers: kill only)"))
        elif self.backend == "v1":
            use = "using v1: " + ", ".join(f"{c} under {p}" for c, p in self.v1.items())
        else:
            use = "no cgroup used"
        return f"cgroup hierarchy: {self.hierarchy.describe()}; {use}"


_lock = threading.Lock()
_shared: Setup | None = None
_users = 0


def acquire(euid: int | None = None) -> Setup:
    """The process's `Setup`, prepared by the first caller and shared until the last `release`."""
    global _shared, _users
    with _lock:
        if _shared is None:
            remove_stale(detect())
            _shared = prepare(detect(), os.geteuid() if euid is None else euid)
        _users += 1
        return _shared


def release() -> None:
    """One user fewer; the last one undoes what `prepare` changed (see `undo`)."""
    global _shared, _users
    with _lock:
        _users = max(0, _users - 1)
        if _users == 0 and _shared is not None:
            undo(_shared)
            _shared = None


def prepare(h: Hierarchy, euid: int) -> Setup:
    """Choose the backend: v2 where its memory controller can be handed to run groups, else
    v1 where its controller directories are writable (root), else a v2 group without
    controllers (it still kills a whole run), else none. May enable controllers and move
    this process into a leaf of its own group (v2 keeps processes only in leaves)."""
    s = Setup(h)
    v2_why = _v2_prepare(s, h, euid) if h.v2 else None
    if not (s.backend == "v2" and "memory" in s.controllers):
        v1 = {}
        for ctl in CONTROLLERS:
            d = h.v1.get(ctl)
            if d and euid == 0 and ctl not in h.v1_read_only and os.path.isdir(d) and _writable(d):
                v1[ctl] = d
        if v1:
            _v2_undo_prepare(s)
            s.backend, s.parent, s.controllers, s.v1 = "v1", None, (), v1
    for ctl in CONTROLLERS:
        if s.backend == "v1" and ctl in s.v1 or s.backend == "v2" and ctl in s.controllers:
            continue
        s.why[ctl] = _why_not(ctl, h, euid, v2_why)
    return s


def _why_not(ctl: str, h: Hierarchy, euid: int, v2_why: str | None) -> str:
    if h.kind == "none":
        return "no cgroup mounted here"
    reasons = []
    if h.v2:
        available = read_words(os.path.join(h.v2, "cgroup.controllers"))
        reasons.append(f"v2 group {h.v2} offers no {ctl} controller (cgroup.controllers: {' '.join(available) or 'none'})"
                       if ctl not in available and not h.v2_read_only else v2_why or f"v2 group {h.v2} is not usable")
    if ctl in h.v1:
        reasons.append(f"v1 {ctl} at {h.v1[ctl]} is read-only" if ctl in h.v1_read_only
                       else f"v1 {ctl} at {h.v1[ctl]} needs root" if euid != 0
                       else f"v1 {ctl} at {h.v1[ctl]} is not writable")
    elif h.kind in ("v1", "hybrid"):
        reasons.append(f"no v1 {ctl} controller mounted")
    return "; ".join(reasons)


def _v2_prepare(s: Setup, h: Hierarchy, euid: int) -> str | None:
    """Set ``s`` up for v2 if a group can hold run groups; else return why not."""
    assert h.v2 is not None and h.v2_mount is not None
    if h.v2_read_only:
        return f"the v2 mount {h.v2_mount} is read-only (a default container)"
    tried = []
    # Root on a host: a parent at the top of the tree, so the caller stays where it is.
    if euid == 0 and os.path.realpath(h.v2) != os.path.realpath(h.v2_mount):
        why = _v2_use(s, h.v2_mount, move_caller=False)
        if why is None:
            return None
        tried.append(why)
    why = _v2_use(s, h.v2, move_caller=True)
    if why is None:
        return None
    tried.append(why)
    return "; ".join(tried)


def _v2_use(s: Setup, parent: str, move_caller: bool) -> str | None:
    """Make ``parent`` hand memory (and pids) to its sub-groups and record it in ``s``;
    None on success, else why not. A writable group without the memory controller is
    recorded only as a last resort (run groups there still kill a whole run)."""
    if not os.path.isdir(parent) or not _writable(parent):
        return f"v2 group {parent} is not writable by uid {os.geteuid()} (not delegated)"
    available = read_words(os.path.join(parent, "cgroup.controllers"))
    if "memory" not in available:
        if s.backend is None:
            s.backend, s.parent, s.controllers = "v2", parent, ()
        return f"v2 group {parent} offers no memory controller (cgroup.controllers: {' '.join(available) or 'none'})"
    want = tuple(c for c in CONTROLLERS if c in available)
    enabled_before = read_words(os.path.join(parent, "cgroup.subtree_control"))
    missing = [c for c in want if c not in enabled_before]
    leaf = None
    if missing:
        err = _enable(parent, missing)
        if err == errno.EBUSY and move_caller:
            leaf, why = _move_caller_out(parent)
            if leaf is None:
                if s.backend is None:
                    s.backend, s.parent, s.controllers = "v2", parent, ()
                return why
            err = _enable(parent, missing)
            if err is not None:
                _move_back(parent, leaf)
                leaf = None
        if err is not None:
            return (f"cannot enable {' '.join(missing)} in {parent}/cgroup.subtree_control "
                    f"({os.strerror(err)})")
    s.backend, s.parent, s.controllers = "v2", parent, want
    s.caller_leaf, s.enabled = leaf, tuple(missing)
    return None


def _enable(parent: str, ctls: list[str]) -> int | None:
    try:
        write_text(os.path.join(parent, "cgroup.subtree_control"), " ".join("+" + c for c in ctls))
        return None
    except OSError as e:
        return e.errno or errno.EIO


def _move_caller_out(parent: str) -> tuple[str | None, str]:
    """Move this process and its descendants into ``parent/codea1-caller-<pid>``, if they
    are all ``parent`` holds (moving anyone else's processes is not ours to do)."""
    held = {int(w) for w in read_words(os.path.join(parent, "cgroup.procs"))}
    mine = set(_descendants(os.getpid()))
    others = held - mine
    if others:
        return None, (f"the caller's v2 group {parent} holds {len(others)} other process(es), so it cannot hand "
                      "controllers to sub-groups (v2 keeps processes only in leaves): start codea1 in a "
                      "group of its own, e.g. `systemd-run --user --scope -p Delegate=yes codea1 ...`")
    leaf = os.path.join(parent, caller_leaf_name())
    try:
        os.makedirs(leaf, exist_ok=True)
        for pid in sorted(held & mine):
            try:
                write_text(os.path.join(leaf, "cgroup.procs"), str(pid))
            except ProcessLookupError:
                pass
    except OSError as e:
        _move_back(parent, leaf)
        return None, f"cannot move the caller into {leaf}: {e.strerror or e}"
    return leaf, ""


def _move_back(parent: str, leaf: str) -> None:
    for word in read_words(os.path.join(leaf, "cgroup.procs")):
        try:
            write_text(os.path.join(parent, "cgroup.procs"), word)
        except OSError:
            pass
    try:
        remove_group(leaf)
    except OSError:
        pass


def _v2_undo_prepare(s: Setup) -> None:
    """Leave v2 as it was when v1 is used after all (hybrid)."""
    _undo(s)
    s.caller_leaf, s.enabled = None, ()


def undo(s: Setup) -> None:
    """Give back what `prepare` changed: disable the controllers it enabled and move this
    process back from its leaf (best effort: a process of ours still in the leaf, or a
    group another user made meanwhile, keeps things as they are; `remove_stale` cleans up
    on a later start)."""
    _undo(s)


def _undo(s: Setup) -> None:
    if s.parent is None:
        return
    if s.enabled:
        try:
            write_text(os.path.join(s.parent, "cgroup.subtree_control"), " ".join("-" + c for c in s.enabled))
        except OSError:
            return
    if s.caller_leaf:
        _move_back(s.parent, s.caller_leaf)


def remove_stale(h: Hierarchy) -> list[str]:
    """Remove the groups of codea1 processes that are gone (killed before they could clean
    up): run groups and callers' leaves. What is left in a run group under the caller's own
    v2 group is killed first (a run without a pid namespace can outlive its worker); at the
    top of the tree, or in v1, a group still busy is left alone. Returns what was removed."""
    parents = [(d, False) for c, d in h.v1.items() if c in CONTROLLERS]
    if h.v2:
        parents.append((h.v2, True))
        if h.v2_mount and h.v2_mount != h.v2:
            parents.append((h.v2_mount, False))
    removed = []
    for parent, may_kill in dict.fromkeys(parents):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            pid = _owner_pid(name)
            if pid is None or _pid_alive(pid):
                continue
            path = os.path.join(parent, name)
            try:
                if may_kill and name.startswith(RUN_PREFIX):  # (a caller's leaf: only if empty)
                    kill_group(path)
                remove_group(path)
                if not os.path.exists(path):
                    removed.append(path)
            except OSError:
                pass
    return removed


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def run_group_name(index: int, serial: int) -> str:
    return f"{RUN_PREFIX}{_pid_namespace()}-{os.getpid()}-{index}-{serial}"


def caller_leaf_name() -> str:
    return f"{CALLER_PREFIX}{_pid_namespace()}-{os.getpid()}"


def _owner_pid(name: str) -> int | None:
    """The pid of the codea1 process that made group ``name``; None for a group that is not
    ours, or was made in another pid namespace (whether its maker lives is not known here)."""
    for prefix, fields in ((RUN_PREFIX, 4), (CALLER_PREFIX, 2)):
        if name.startswith(prefix):
            parts = name[len(prefix):].split("-")
            if not all(p.isdigit() for p in parts):
                return None
            if len(parts) == fields and parts[0] == _pid_namespace():
                return int(parts[1])
            if prefix == RUN_PREFIX and len(parts) == 3:  # named before 2026-12 (v1 only): pid-index-serial
                return int(parts[0])
    return None


# --------------------------------------------------------------------------- run groups


def make_run_groups(s: Setup, tag: str) -> tuple[dict, list[str]]:
    """Create a worker's groups named ``tag``: the worker configuration that names them, and
    their paths (to remove when the worker stops). v2: one group with ``memory.swap.max``
    = 0 (no swap beyond the cap) and ``memory.oom.group`` = 1 (an OOM kill takes the whole
    run); the worker sets ``memory.max`` and ``pids.max`` per run."""
    cfg: dict = {"cgroup_why": dict(s.why)}
    paths: list[str] = []
    if s.backend == "v1":
        for ctl, base in s.v1.items():
            path = os.path.join(base, tag)
            try:
                os.mkdir(path)
            except OSError as e:
                cfg["cgroup_why"][ctl] = f"cannot create {path}: {e.strerror or e}"
                continue
            cfg[f"{ctl}_cgroup"] = path
            paths.append(path)
    elif s.backend == "v2" and s.parent:
        path = os.path.join(s.parent, tag)
        try:
            os.mkdir(path)
        except OSError as e:
            for ctl in CONTROLLERS:
                cfg["cgroup_why"][ctl] = f"cannot create {path}: {e.strerror or e}"
            return cfg, paths
        paths.append(path)
        swap = False
        if "memory" in s.controllers:
            for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                try:
                    write_text(os.path.join(path, name), value)
                    swap = swap or name == "memory.swap.max"
                except OSError:
                    pass
        cfg.update(v2_cgroup=path, v2_controllers=list(s.controllers), v2_swap=swap)
    return cfg, paths


def remove_run_group(path: str, tries: int = 50) -> bool:
    """Kill what is left in a run group (v2) and remove it; False if it stayed busy."""
    import time

    for _ in range(tries):
        if not os.path.exists(os.path.join(path, "tasks")):
            kill_group(path)
        try:
            remove_group(path)
        except OSError:
            pass
        if not os.path.exists(path):
            return True
        time.sleep(0.02)
    return False


class V1Groups:
    """A worker's v1 groups: its runs join ``memory`` (the worker stays out: the OOM killer
    can only pick a run's process); the worker itself joins ``pids`` (children inherit it)."""

    kind = "v1"

    def __init__(self, memory: str | None, pids: str | None) -> None:
        self.memory, self.pids = memory, pids
        self.has_memory, self.has_pids = memory is not None, pids is not None
        self.swap = bool(memory) and os.path.exists(os.path.join(memory, "memory.memsw.limit_in_bytes"))
        self.limits: dict = {}

    def where(self) -> str:
        return ", ".join(f"v1 {n} {p}" for n, p in (("memory", self.memory), ("pids", self.pids)) if p)

    def worker_joins(self) -> None:
        if self.pids:
            write_text(os.path.join(self.pids, "cgroup.procs"), str(os.getpid()))

    def procs_files(self) -> list[str]:
        return [os.path.join(self.memory, "cgroup.procs")] if self.memory else []

    def set_limits(self, memory_bytes: int, max_procs: int) -> None:
        if self.memory:
            if self.limits.get("mem") != memory_bytes:
                files = ["memory.limit_in_bytes"] + (["memory.memsw.limit_in_bytes"] if self.swap else [])
                try:  # memsw must stay >= limit: lowering sets limit first, raising memsw first
                    for name in files:
                        write_text(os.path.join(self.memory, name), str(memory_bytes))
                except OSError:
                    for name in reversed(files):
                        write_text(os.path.join(self.memory, name), str(memory_bytes))
                self.limits["mem"] = memory_bytes
            try:
                write_text(os.path.join(self.memory, "memory.max_usage_in_bytes"), "0")
            except OSError:
                pass
        if self.pids and self.limits.get("pids") != max_procs:
            # +1: the worker itself lives in the group (children inherit it at fork for free).
            write_text(os.path.join(self.pids, "pids.max"), str(max_procs + 1))
            self.limits["pids"] = max_procs

    def oom_kills(self) -> int:
        return read_keyed(os.path.join(self.memory, "memory.oom_control"), "oom_kill") if self.memory else 0

    def peak_mb(self) -> float | None:
        try:
            return read_int(os.path.join(self.memory, "memory.max_usage_in_bytes")) / 2**20 if self.memory else None
        except OSError:
            return None

    def kill(self) -> None:
        """(v1 groups cannot kill: the worker's pid namespace or subreaper does.)"""


class V2Group:
    """A worker's v2 group: each run joins it at fork, the worker stays outside. It caps
    memory (``memory.max``, swap 0) and tasks (``pids.max``, threads included) where those
    controllers were handed to it, and kills a whole run in one write (``cgroup.kill``)."""

    kind = "v2"

    def __init__(self, path: str, controllers: list | tuple, swap: bool) -> None:
        self.path = path
        self.has_memory, self.has_pids = "memory" in controllers, "pids" in controllers
        self.swap = swap
        self.limits: dict = {}
        self.peak_fd: int | None = None
        if self.has_memory:
            try:  # fd-local reset of memory.peak (Linux 6.12+): a write, then reads see this run's peak
                fd = os.open(os.path.join(path, "memory.peak"), os.O_RDWR | os.O_CLOEXEC)
                try:
                    os.write(fd, b"reset\n")
                    self.peak_fd = fd
                except OSError:
                    os.close(fd)
            except OSError:
                pass

    def where(self) -> str:
        return f"v2 {self.path}"

    def worker_joins(self) -> None:
        """(The worker stays outside: v2 keeps processes only in leaves, and the run's OOM
        kill and ``cgroup.kill`` must never reach the worker.)"""

    def procs_files(self) -> list[str]:
        return [os.path.join(self.path, "cgroup.procs")]

    def set_limits(self, memory_bytes: int, max_procs: int) -> None:
        if self.has_memory and self.limits.get("mem") != memory_bytes:
            write_text(os.path.join(self.path, "memory.max"), str(memory_bytes))
            self.limits["mem"] = memory_bytes
        if self.has_pids and self.limits.get("pids") != max_procs:
            write_text(os.path.join(self.path, "pids.max"), str(max_procs))
            self.limits["pids"] = max_procs
        if self.peak_fd is not None:
            try:
                os.write(self.peak_fd, b"reset\n")
            except OSError:
                os.close(self.peak_fd)
                self.peak_fd = None

    def oom_kills(self) -> int:
        return read_keyed(os.path.join(self.path, "memory.events"), "oom_kill") if self.has_memory else 0

    def peak_mb(self) -> float | None:
        if self.peak_fd is None:
            return None
        try:
            return int(os.pread(self.peak_fd, 64, 0).split()[0]) / 2**20
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        kill_group(self.path)


def groups_from_config(cfg: dict) -> "V1Groups | V2Group | None":
    """The worker's groups, as `make_run_groups` named them in its configuration."""
    if cfg.get("v2_cgroup"):
        return V2Group(cfg["v2_cgroup"], cfg.get("v2_controllers") or (), bool(cfg.get("v2_swap")))
    if cfg.get("memory_cgroup") or cfg.get("pids_cgroup"):
        return V1Groups(cfg.get("memory_cgroup"), cfg.get("pids_cgroup"))
    return None
