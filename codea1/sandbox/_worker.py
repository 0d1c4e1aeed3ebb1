"""The fork server: one warm interpreter per worker, confined once, forking a child per run.

Started by ``Executor`` with ``python -s`` and a scrubbed environment. As root it enters
new pid/net/mount/ipc/uts namespaces (becoming pid 1 of its pid namespace, so after each
run ``kill(-1)`` removes everything the run started), builds a read-only root of only
what Python needs, and creates cgroups for the memory and process caps. Then it serves
runs: a message ``{"id": n, "job": ...}`` on stdin, ``{"id": n, "result": ...}`` on
stdout (4-byte length + JSON each), or ``{"returned": n}`` for a job it gives back
unstarted because the run before it is long. It reports which protections hold in a
first ``hello`` message.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import fcntl
import gc
import json
import json.scanner
import math
import os
import resource
import select
import signal
import struct
import sys
import time
import types

from codea1.sandbox import cgroups, isolation
from codea1.sandbox._child import (
    PROGRAM_FILE, SETUP_FAILED_EXIT, child_main, compile_untrusted, cpu_limit_spent, prepare_warm_state,
)
from codea1.sandbox.values import allow_deep_values, check_value

ROOT_DIR = "/tmp/.codea1-sandbox-root"
SCRATCH_IN_ROOT = "/scratch"
_HEADER = struct.Struct(">I")
#: Extra slack above ``max_value_bytes`` for one record line (tags, indices).
_RECORD_SLACK = 4096
#: How often (ms) a running child's result records are read while nothing else happens.
_TICK_MS = 50
#: A run this long gives back the jobs queued behind it (see `Worker.return_queued`).
_RETURN_QUEUED_AFTER_S = 0.05
_F_SETPIPE_SZ = 1031
#: Bytes asked of one `os.read`: a buffer that size is allocated first (keep it below
#: malloc's 128 KiB mmap threshold).
_READ_SIZE = 1 << 16
#: The worker's own ``GLIBC_TUNABLES`` (set by the executor): malloc marks its large
#: allocations for transparent huge pages, one page fault per 2 MB instead of per 4 kB.
HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb=1"
# The worker's own malloc between forks: glibc's defaults (the trim threshold stays fixed
# once set, where glibc would raise it after freeing large blocks; the worker's heap is small).
_WORKER_MMAP_MAX, _WORKER_TRIM_THRESHOLD = 65536, 128 * 1024
#: A run's malloc: no allocation in its own mmap (0) and no heap given back below 2 GiB
#: of free space. Memory a call frees is then reused by the next call as it is, already
#: faulted in, where glibc would unmap every block over 32 MB on free and the kernel zero
#: it again on the next call: a mutant that built 120 MB ints call after call took 4-5x
#: less CPU (0.20 -> 0.04 s). Memory caps count the heap as they counted the mappings.
RUN_MMAP_MAX, RUN_TRIM_THRESHOLD = 0, 2**31 - 1
#: The same for a process started afresh (``GLIBC_TUNABLES``; glibc < 2.35 ignores hugetlb).
RUN_MALLOC_TUNABLES = (f"{HUGE_PAGES_TUNABLE}:glibc.malloc.mmap_max={RUN_MMAP_MAX}"
                       f":glibc.malloc.trim_threshold={RUN_TRIM_THRESHOLD}")


# --------------------------------------------------------------------------- channel


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))


def send(fd: int, msg: dict, inbox: "_Inbox | None" = None) -> None:
    _send_text(fd, _dumps(msg), inbox)


def _send_text(fd: int, text: str, inbox: "_Inbox | None" = None) -> None:
    """Write a message; with `inbox`, on a non-blocking channel, read the parent's
    messages while the channel is full. (The parent may be writing its next job meanwhile,
    and it reads nothing until that is written: a large job and a large result would
    otherwise each wait for the other.)"""
    data = text.encode("ascii")
    buf = memoryview(_HEADER.pack(len(data)) + data)
    while buf:
        try:
            n = os.write(fd, buf)
        except BlockingIOError:
            readable = [inbox.fd] if inbox is not None and not inbox.closed else []
            ready, _, _ = select.select(readable, [fd], [])
            if ready:
                inbox.pump()  # type: ignore[union-attr]
            continue
        buf = buf[n:]


def send_result(fd: int, msg_id, result: dict, inbox: "_Inbox | None" = None) -> None:
    """Send ``{"result": result, "id": msg_id}``, where ``result["calls"]`` may hold call
    results already in JSON (the `_RecordParser`'s, spliced in as they are: encoding every
    value again cost the worker more than reading it)."""
    calls = result.get("calls")
    if calls is None:
        _send_text(fd, _dumps({"result": result, "id": msg_id}), inbox)
        return
    rest = _dumps({k: v for k, v in result.items() if k != "calls"})
    items = ",".join(c if type(c) is str else _dumps(c) for c in calls)
    _send_text(fd, '{"id":' + _dumps(msg_id) + ',"result":' + rest[:-1] + (',' if len(rest) > 2 else '')
               + '"calls":[' + items + ']}}', inbox)


#: Submodules a preload brings into the warm state with it: numpy imports `numpy.random`
#: lazily, and each run seeds its global generator (`_child._seed_generators`) only if
#: it is already there.
_WARM_WITH = {"numpy": ("numpy.random",)}


class _Inbox:
    """Messages from the parent, read without blocking, also while a run is in progress.

    The parent queues the next job on a worker before the current run ends (so the worker
    never waits for it). Reading it early lets the worker give it back when the current run
    turns out to be long: another worker may be idle (see `Worker.return_queued`).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.buf = bytearray()
        self.messages: collections.deque = collections.deque()  # whole messages, as bytes
        self.closed = False

    def pump(self) -> None:
        """Read what has arrived; complete messages join `messages`."""
        while not self.closed:
            try:
                # (64 KiB, a pipe's default size: `os.read` allocates what it is asked for,
                # and glibc put a 1 MiB buffer in a fresh mapping on huge pages, which the
                # kernel zeroed, 2 MiB at a time, for every job: 0.2 ms of the worker's 1.4 ms)
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                break
            if not data:
                self.closed = True
                break
            self.buf.extend(data)
        while len(self.buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buf)
            if len(self.buf) < _HEADER.size + size:
                break
            self.messages.append(bytes(self.buf[_HEADER.size:_HEADER.size + size]))
            del self.buf[:_HEADER.size + size]

    def next(self) -> dict | None:
        """The next message, waiting for it; None once the parent has closed the channel."""
        while not self.messages:
            if self.closed:
                return None
            select.select([self.fd], [], [])
            self.pump()
        return json.loads(self.messages.popleft())

    def forget(self) -> None:
        """Drop the messages read and not yet taken (in a run's child: other jobs). They are
        kept as bytes until taken, so that this frees a few blocks, not a job's objects."""
        self.messages.clear()
        del self.buf[:]


# --------------------------------------------------------------------------- set-up


class Worker:
    def __init__(self, cfg: dict, chan_in: int, chan_out: int) -> None:
        self.cfg = cfg
        self.chan_in, self.chan_out = chan_in, chan_out
        self.inbox: _Inbox | None = None  # (set when it starts serving)
        self.run_started = 0.0
        self.protections: dict[str, str | bool] = {}
        self.pid_ns = os.getpid() == 1
        self.root: str | None = None
        self.scratch_host = ""  # scratch as the worker sees it
        self.scratch_child = ""  # scratch as the child sees it (after chroot)
        self.uid: int | None = None
        self.cg: cgroups.V1Groups | cgroups.V2Group | None = None  # the runs' cgroups
        self.base_vsz = 0
        self.oom_seen = 0
        self.last_maxrss_mb = 0.0
        self.scratch_dirty = True
        self.host_tmp: str | None = None
        self.view: isolation.View | None = None  # what of the host the runs see (None: no root of their own)
        self.mallopt = isolation.mallopt()  # None: the runs keep the worker's malloc, only slower
        self.isolated: frozenset = frozenset()  # the current job's calls evaluated each in a fork of its own
        self.one_process = False  # the current job's `Job.one_process`
        self.flow: tuple = (frozenset(), {}, {}, False)  # its statements, requires, distinct, one_process

    def lost(self, name: str, why: str) -> None:
        self.protections[name] = f"LOST: {why}"

    def setup(self, ns_error: str | None) -> None:
        """Confine the worker once, one protection after another (this order: the hello
        message lists them in it), then prepare the warm state every run is forked from."""
        is_root = os.geteuid() == 0
        self.protections["fork-server"] = True
        self.setup_namespaces(ns_error)
        self.setup_subreaper()
        self.setup_read_only_root(ns_error)
        self.setup_host_scratch()
        self.setup_uid(is_root)
        # cgroups (created by the parent, see cgroups.make_run_groups).
        self.cgroup_protections(is_root)
        self.setup_no_new_privs()
        self.protections["rlimits"] = True if is_root else "partial: no process-count limit (shared per uid)"
        self.protections["scrubbed-env"] = True
        self.protections["result-channel"] = True
        self.setup_preloads()
        self.base_vsz = _vsz_bytes()
        self.setup_environment()
        # v1: join the pids cgroup now: children inherit membership at fork, cheaper than
        # moving each child. (Each child moves itself into the memory cgroup, or the v2
        # group: see _child._confine.)
        if self.cg is not None:
            self.cg.worker_joins()
        self.setup_warm_state()

    def setup_namespaces(self, ns_error: str | None) -> None:
        """The pid, net and ipc/uts namespaces `main` entered (or why it could not)."""
        if ns_error is None and self.pid_ns:
            self.protections["pid-namespace"] = True
            self.protections["net-namespace"] = True
            try:
                isolation.sethostname("sandbox")
                self.protections["ipc-uts-namespace"] = True
            except OSError as e:
                self.lost("ipc-uts-namespace", str(e))
        else:
            why = ns_error or "not started in a pid namespace"
            for name in ("pid-namespace", "net-namespace", "ipc-uts-namespace"):
                self.lost(name, why)

    def setup_subreaper(self) -> None:
        """Outside a pid namespace, orphans of a run re-parent to us, so we can still find
        and kill them."""
        if not self.pid_ns:
            try:
                isolation.libc().prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
            except Exception:
                pass

    def setup_read_only_root(self, ns_error: str | None) -> None:
        """A private mount namespace and the runs' read-only root, with scratch inside it."""
        if ns_error is None:
            try:
                isolation.mount("none", "/", None, isolation.MS_REC | isolation.MS_PRIVATE)
                self.protections["mount-namespace"] = True
                # An empty host dir shared by all workers as a mount point: each worker mounts
                # its own tmpfs there in its private namespace. Host /tmp itself stays visible
                # to the (trusted) worker, so a virtual environment under /tmp can be bound
                # into the run's root; the run only ever sees that root.
                os.makedirs(ROOT_DIR, 0o755, exist_ok=True)
                isolation.mount("tmpfs", ROOT_DIR, "tmpfs", isolation.MS_NOSUID | isolation.MS_NODEV,
                                f"size={self.cfg.get('scratch_mb', 1024)}m,mode=755")
                self.view = isolation.current_view(self.cfg.get("hide", ()))
                isolation.build_root(ROOT_DIR, self.view, SCRATCH_IN_ROOT.lstrip("/"))
                self.root = ROOT_DIR
                self.scratch_host = ROOT_DIR + SCRATCH_IN_ROOT
                self.scratch_child = SCRATCH_IN_ROOT
                self.protections["read-only-root"] = True
            except OSError as e:
                self.protections.setdefault("mount-namespace", f"LOST: {e}")
                self.lost("read-only-root", str(e))
        else:
            self.lost("mount-namespace", ns_error)
            self.lost("read-only-root", "needs a mount namespace (root)")

    def setup_host_scratch(self) -> None:
        """Without a root of the runs' own: scratch in a private dir of the host's /tmp."""
        if self.root is None:
            base = f"/tmp/codea1-sbx-{os.getpid()}"
            os.makedirs(base, mode=0o700, exist_ok=True)
            self.host_tmp = base  # removed when the worker stops
            self.scratch_host = self.scratch_child = base + "/scratch"

    def setup_uid(self, is_root: bool) -> None:
        """The unprivileged uid the runs switch to (root only)."""
        if is_root:
            self.uid = int(self.cfg["uid"])
            self.protections["unprivileged-uid"] = True
        else:
            self.lost("unprivileged-uid", "not root: runs keep the caller's uid and its file access")

    def setup_no_new_privs(self) -> None:
        """Inherited by every child (a ctypes call per child would cost milliseconds): no
        execve of the run can gain privileges (setuid binaries, file capabilities)."""
        try:
            isolation.set_no_new_privs()
            self.protections["no-new-privs"] = True
        except OSError as e:
            self.lost("no-new-privs", str(e))

    def setup_preloads(self) -> None:
        """Warm state: the preload modules test programs commonly need, imported on first
        mention by a job (see warm_up): until a run needs numpy, forks stay cheaper without it."""
        import importlib.util

        self.preload_errors = {}
        self.codes = _CodeCache()
        self.lazy: list[str] = []
        for mod in self.cfg.get("preload", []):
            try:
                if importlib.util.find_spec(mod) is None:
                    raise ImportError(f"no module named {mod!r}")
                self.lazy.append(mod)
            except Exception as e:  # an optional convenience, never a protection
                self.preload_errors[mod] = f"{type(e).__name__}: {e}"

    def setup_environment(self) -> None:
        """The runs' environment, set once here and inherited by every child: nothing of the
        parent's environment was passed to this process in the first place."""
        os.environ.clear()
        os.environ.update({
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": self.scratch_child,
            "TMPDIR": self.scratch_child,
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        })

    def setup_warm_state(self) -> None:
        """Objects of the warm state are never collected again: a collection in a child would
        otherwise write to every one of them and copy the whole heap page by page."""
        prepare_warm_state()
        gc.collect()
        gc.freeze()

    # ----------------------------------------------------------------------- limits

    def cgroup_protections(self, is_root: bool) -> None:
        """Take the groups the parent made and say how memory and processes are capped:
        held (a cgroup, swap counted), degraded (by what) or lost."""
        why = self.cfg.get("cgroup_why") or {}
        try:
            self.cg = cgroups.groups_from_config(self.cfg)
            for path in ([self.cg.path] if isinstance(self.cg, cgroups.V2Group)
                         else [self.cg.memory, self.cg.pids] if self.cg is not None else []):
                if path and not os.path.isdir(path):  # the parent creates it; never re-create one it removed
                    raise OSError(f"cgroup {path} does not exist")
        except OSError as e:
            self.cg = None
            why = {"memory": str(e), "pids": str(e)}
        cg = self.cg
        if cg is not None and cg.has_memory and cg.swap:
            self.protections["memory-cgroup"] = True
        elif cg is not None and cg.has_memory:
            self.protections["memory-cgroup"] = (
                f"DEGRADED: {cg.where()} caps memory without swap accounting "
                f"({'memory.swap.max' if cg.kind == 'v2' else 'memory.memsw'} absent): a run may also fill swap")
        else:
            self.protections["memory-cgroup"] = (
                f"DEGRADED: no memory cgroup ({why.get('memory') or 'none made for this executor'}): "
                "RLIMIT_AS caps each process's virtual memory instead")
        if cg is not None and cg.has_pids:
            self.protections["pids-cgroup"] = True
        elif is_root:
            self.protections["pids-cgroup"] = (
                f"DEGRADED: no pids cgroup ({why.get('pids') or 'none made for this executor'}): "
                "RLIMIT_NPROC of the run's own uid caps processes and threads instead")
        else:
            self.lost("pids-cgroup", f"no pids cgroup ({why.get('pids') or 'none made for this executor'}), and not root: "
                                     "RLIMIT_NPROC would count every process of the caller's uid")

    def apply_limits(self, lim: dict) -> None:
        if self.cg is not None:
            self.cg.set_limits(lim["memory_mb"] * 1024 * 1024, lim["max_procs"])

    def oom_kills(self) -> int:
        return self.cg.oom_kills() if self.cg is not None else 0

    def _oom_happened(self, status: int | None) -> bool:
        """Did the cgroup OOM killer fire since the last look? (read only after a SIGKILL: an
        earlier victim among a run's grandchildren can only relabel a SIGKILL as "memory")."""
        if self.cg is None or not self.cg.has_memory or status is None or not (
                os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9):
            return False
        now = self.oom_kills()
        fired = now > self.oom_seen
        self.oom_seen = now
        return fired

    def plan(self, lim: dict) -> dict:
        return {
            "cgroup_procs": self.cg.procs_files() if self.cg is not None else [],
            "cpu_s": max(1, math.ceil(lim["cpu_s"])),
            "max_file_bytes": lim["max_file_bytes"],
            "max_value_bytes": lim["max_value_bytes"],
            "as_bytes": (None if self.cg is not None and self.cg.has_memory
                         else self.base_vsz + (lim["memory_mb"] + 256) * 1024 * 1024),
            "nproc": lim["max_procs"] if self.uid is not None else None,
            "chroot": self.root,
            "cwd": self.scratch_child,
            "uid": self.uid,
        }

    def fresh_scratch(self) -> None:
        """An empty scratch dir owned by the run's uid (reused when the last run left it untouched)."""
        try:
            st = os.lstat(self.scratch_host)
            if (st.st_mode == 0o40700 and st.st_uid == (self.uid if self.uid is not None else os.getuid())
                    and st.st_nlink == 2 and not os.listdir(self.scratch_host)):
                return
        except OSError:
            pass
        try:
            isolation.remove_tree(self.scratch_host)
        except OSError:
            pass
        os.mkdir(self.scratch_host, 0o700)
        if self.uid is not None:
            os.chown(self.scratch_host, self.uid, self.uid)

    # ----------------------------------------------------------------------- cleanup

    def kill_everything(self, pid: int | None) -> tuple[float, int | None]:
        """SIGKILL every process the run started and reap them. Returns (cpu_s, status of pid);
        the largest resident size seen is left in ``self.last_maxrss_mb``."""
        cpu = 0.0
        self.last_maxrss_mb = 0.0
        status = None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL) if not self.pid_ns else None
            except ProcessLookupError:
                pass
        while True:
            if self.cg is not None:
                self.cg.kill()  # v2: every process of the run, wherever it went
            if self.pid_ns:
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            else:
                for child in _children():
                    try:
                        os.kill(child, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            try:
                wpid, wstatus, ru = os.wait4(-1, 0)
            except ChildProcessError:
                break
            cpu += ru.ru_utime + ru.ru_stime
            self.last_maxrss_mb = max(self.last_maxrss_mb, ru.ru_maxrss / 1024)
            if wpid == pid:
                status = wstatus
        return cpu, status

    # ----------------------------------------------------------------------- runs

    def serve(self) -> None:
        send(self.chan_out, {
            "hello": True,
            "protections": self.protections,
            "preload_errors": self.preload_errors,
            "uid": self.uid,
            "view": self.view._asdict() if self.view is not None else None,
        })
        self.inbox = _Inbox(self.chan_in)
        os.set_blocking(self.chan_out, False)  # (sends read the inbox while the channel is full)
        while True:
            msg = self.inbox.next()
            if msg is None:
                return
            self.serve_one(msg)

    def serve_one(self, msg: dict) -> None:
        """Run one job and send its result. (A method of its own: its result, the reference's
        values in a reference run, is gone from every frame before the next job's child forks.)"""
        try:
            result = self.run_job(msg["job"])
        except Exception as e:  # the worker's own failure: infrastructure, not the candidate
            import traceback

            result = {"status": "infra", "infra_error": f"worker error: {type(e).__name__}: {e}",
                      "trace": traceback.format_exc()[-2000:]}
            try:
                self.kill_everything(None)
            except Exception:
                pass
        send_result(self.chan_out, msg.get("id"), result, self.inbox)

    def return_queued(self) -> None:
        """Give back the jobs queued here while the current run is long (a job queued behind
        a long run would wait for it while another worker may be idle). The parent queues
        them again and queues nothing more here until the run ends."""
        inbox = self.inbox
        assert inbox is not None
        inbox.pump()
        while inbox.messages:
            send(self.chan_out, {"returned": json.loads(inbox.messages.popleft()).get("id")}, inbox)

    def warm_up(self, job: dict) -> None:
        """Import a preload module into the warm state the first time a job mentions it, so
        this and every later run inherit it instead of importing it themselves."""
        texts = [job["program"], *job["calls"]]
        for mod in list(self.lazy):
            if any(mod in t for t in texts):
                self.lazy.remove(mod)
                try:
                    __import__(mod)
                    for sub in _WARM_WITH.get(mod, ()):
                        __import__(sub)
                except Exception:  # the run will raise the ImportError itself
                    continue
                gc.collect()
                gc.freeze()
                self.base_vsz = _vsz_bytes()

    def run_job(self, job: dict) -> dict:
        """Run `job`. Its source texts leave it once compiled: the frames above the run's
        child hold only `sources`, the texts of the program and its statement steps, a list
        the child empties as it registers each in its `linecache`, as its calls are a list
        the child empties as it runs them (see `_child.child_main`)."""
        if self.lazy:
            self.warm_up(job)
        lim = job["limits"]
        statements = frozenset(job.get("statements", ()))
        # the texts of the program and its statement steps, for the run's `linecache`: the child
        # empties this list as it registers each (`_child._show_source`); the eval calls' texts go
        sources = [job.pop("program"), *(c if k in statements else None for k, c in enumerate(job["calls"]))]
        program = self.codes.get(sources[0], PROGRAM_FILE, "exec")
        calls = [self.codes.get(c, PROGRAM_FILE, "exec") if k in statements else self.codes.get(c, "<call>", "eval")
                 for k, c in enumerate(job.pop("calls"))]
        self.codes.untrack_new()
        self.isolated = frozenset(job.get("isolated", ()))
        self.one_process = bool(job.get("one_process"))
        self.flow = (statements, {k: tuple(deps) for k, deps in job.get("requires", ())},
                     {d: key for d, key in job.get("distinct", ())}, self.one_process)
        self.apply_limits(lim)
        plan = self.plan(lim)
        t0 = self.run_started = time.monotonic()
        res = {
            "status": "ok", "exit_code": None, "program_ok": False, "program_error": None,
            "cpu_s": 0.0, "peak_mb": 0.0, "infra_error": None,
        }
        out = _Output(lim["max_output_bytes"], lim.get("stop_on_output", True))
        call_res: list = [None] * len(calls)
        peak_rss = self.run_segments(program, calls, plan, lim, t0 + lim["timeout_s"], out, res, call_res, sources)
        return self.finish_job(res, call_res, out, t0, peak_rss)

    def run_segments(self, program, calls: list, plan: dict, lim: dict, deadline: float,
                     out: _Output, res: dict, call_res: list, sources: list | None = None) -> float:
        """Run the job in segments, each a child of its own: after a call that ended its
        process, the next child runs the program again and the calls after that one.
        Fills `res` and `call_res`; returns the largest peak RSS of a run process."""
        start = 0
        peak_rss = 0.0
        while True:
            # The CPU budget is the run's, like its wall-clock one: a later segment gets what
            # the earlier ones left (whole seconds, as RLIMIT_CPU counts them).
            left = lim["cpu_s"] - res["cpu_s"]
            if start and left <= 0:
                res["status"] = "timeout"
                break
            seg_plan = plan if not start else dict(plan, cpu_s=max(1, min(plan["cpu_s"], math.ceil(left))))
            seg = self.segment(program, calls, start, seg_plan, lim, deadline, out, sources)
            peak_rss = max(peak_rss, self.last_maxrss_mb)
            res["cpu_s"] += seg["cpu"]
            res["exit_code"] = seg["exit_code"]
            k = self.take_segment(seg, start, lim, res, call_res)
            if k is None or self.one_process:  # (one process: a call that ended it ends the run)
                break
            start = k + 1
            if start >= len(calls):
                break
            if time.monotonic() >= deadline:
                res["status"] = "timeout"
                break
        return peak_rss

    def take_segment(self, seg: dict, start: int, lim: dict, res: dict, call_res: list) -> int | None:
        """Record what a segment that started at call `start` did. Returns the call that
        ended its process (the next segment starts after it), or None: the job is over."""
        if not seg["ready"]:  # no candidate code ran: the failure is ours
            res.update(status="infra", infra_error=f"child set-up failed ({seg['how'] or seg['kill']})")
            return None
        if seg["violation"]:
            res.update(status="error", program_ok=False,
                       program_error=f"ProtocolViolation: {seg['violation']}")
            call_res[:] = [{"status": "error", "error": "ProtocolViolation: forged or malformed result record"}
                           for _ in call_res]
            return None
        if not self.take_program(seg, start, lim, res, call_res):
            return None
        for i, r in seg["results"].items():
            call_res[i] = r
        if seg["ended"]:
            if seg["kill"] == "output":  # the flood outran the end record
                res["status"] = "output-limit"
            return None
        return self.take_stopped_call(seg, start, lim, res, call_res)

    def take_program(self, seg: dict, start: int, lim: dict, res: dict, call_res: list) -> bool:
        """Record the segment's program outcome; False when no call of it counts (the
        program failed: in the first segment, the run's verdict; in a later one, a re-run
        that failed fails the calls left)."""
        prog = seg["program"]
        if start == 0:
            if prog is None or not prog[0]:
                res["program_ok"] = False
                if prog is not None:
                    res["program_error"] = prog[1]
                    res["status"] = "memory" if (prog[1] or "").startswith("MemoryError") else "error"
                else:
                    res["status"], res["program_error"] = self._death_status(seg, lim)
                if seg["kill"] == "output":
                    res["status"] = "output-limit"
                return False
            res["program_ok"] = True
        elif prog is None or not prog[0]:
            if seg["kill"] in ("run", "cpu", "output"):
                res["status"] = "output-limit" if seg["kill"] == "output" else "timeout"
                return False
            why = prog[1] if prog is not None else self._death_status(seg, lim)[1]
            for i in range(start, len(call_res)):
                call_res[i] = {"status": "error",
                               "error": f"ProgramRerunFailed: the program failed when re-run for "
                                        f"the remaining calls: {why}"}
            return False
        return True

    def take_stopped_call(self, seg: dict, start: int, lim: dict, res: dict, call_res: list) -> int | None:
        """The segment ended before its end record: give the call in progress (or the first
        one not run) its verdict. Returns that call, or None when the job is over."""
        k = seg["in_call"]
        if k is None:
            k = next((i for i in range(start, len(call_res)) if call_res[i] is None), None)
            if k is None:
                return None
            started = False
            if self.one_process and seg["kill"] is None:  # it ended between calls (a SystemExit
                return None  # recorded as its call's error): the calls after it never ran
        else:
            started = True
        if seg["kill"] in ("run", "cpu"):  # the run's budget is spent: no call after this one runs
            call_res[k] = {"status": "timeout", "error": (f"run exceeded {lim['timeout_s']} s" if seg["kill"] == "run"
                                                          else f"run exceeded its CPU time ({lim['cpu_s']} s)")}
            res["status"] = "timeout"
            return None
        if seg["kill"] == "output":
            call_res[k] = {"status": "error", "error": "OutputLimit: output exceeded "
                           f"{lim['max_output_bytes']} bytes"}
            res["status"] = "output-limit"
            return None
        if seg["kill"] == "call":
            call_res[k] = {"status": "timeout", "error": f"call exceeded {lim['call_timeout_s']} s"}
        elif started:
            call_res[k] = {"status": "error", "error": self._death_status(seg, lim)[1]}
        else:
            call_res[k] = {"status": "error",
                           "error": "ProcessExited: the process ended before the call ran "
                                    f"({self._death_status(seg, lim)[1]})"}
        return k

    def finish_job(self, res: dict, call_res: list, out: _Output, t0: float, peak_rss: float) -> dict:
        """Clean scratch for the next run and complete the result."""
        try:
            self.fresh_scratch()  # files a run wrote are memory (tmpfs): give it back now
        except OSError:
            self.scratch_dirty = True  # retried before the next run starts
        res["calls"] = [r if r is not None else {"status": "not-run"} for r in call_res]
        res["stdout"], res["stderr"] = out.text()
        res["wall_s"] = time.monotonic() - t0
        peak = peak_rss  # without a memory cgroup: the largest peak RSS of a run process
        group_peak = self.cg.peak_mb() if self.cg is not None and self.cg.has_memory else None
        if group_peak is not None:
            peak = group_peak
        res["peak_mb"] = round(peak, 2)
        res["cpu_s"] = round(res["cpu_s"], 6)
        res["wall_s"] = round(res["wall_s"], 6)
        return res

    def _death_status(self, seg: dict, lim: dict) -> tuple[str, str]:
        if seg["kill"] == "run":
            return "timeout", f"Timeout: run exceeded {lim['timeout_s']} s"
        if seg["kill"] == "call":
            return "timeout", f"Timeout: call exceeded {lim['call_timeout_s']} s"
        if seg["kill"] == "cpu":
            return "timeout", f"Timeout: CPU time exceeded {lim['cpu_s']} s"
        if seg["kill"] == "output":
            return "output-limit", f"OutputLimit: output exceeded {lim['max_output_bytes']} bytes"
        if seg["oom"]:
            return "memory", f"MemoryError: killed at the memory limit ({lim['memory_mb']} MB)"
        st = seg["status"]
        if st is not None and os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            if sig == signal.SIGXFSZ:
                return "error", f"FileSizeLimit: a file exceeded {lim['max_file_bytes']} bytes"
            return "error", f"ProcessKilled: killed by signal {signal.Signals(sig).name}"
        code = os.WEXITSTATUS(st) if st is not None else None
        return "error", f"ProcessExited: exited with code {code} without a result record"

    def segment(self, program, calls: list, start: int, plan: dict, lim: dict,
                deadline: float, out: "_Output", sources: list | None = None) -> dict:
        """Fork one child that runs the program, then calls from ``start``; watch it."""
        if start or self.scratch_dirty:  # a continuation starts from the clean state, files included
            self.fresh_scratch()
            self.scratch_dirty = False
        pipes, high = _run_pipes(bool(calls))
        nonce = os.urandom(8).hex()
        plan = dict(plan, nonce=nonce, result_fd=10 + int.from_bytes(os.urandom(2), "little") % 180)
        # Everything that needs no pid is made before the fork: while the child lives, each
        # page the worker writes is copied (and most runs end within milliseconds).
        seg = {"ready": False, "program": None, "results": {}, "ended": False, "in_call": None,
               "kill": None, "violation": None, "status": None, "cpu": 0.0, "exit_code": None,
               "oom": False, "how": ""}
        parser = _RecordParser(start, len(calls), lim["max_value_bytes"] + _RECORD_SLACK, nonce)
        for fd in pipes:
            os.set_blocking(fd, False)
        poller = select.poll()
        for fd in pipes[:2]:
            poller.register(fd, select.POLLIN)
        open_fds = set(pipes)
        pid = self.fork_child(plan, program, calls, start, high, sources)
        pidfd = os.pidfd_open(pid)
        # Result records are read lazily (on a tick, at exit, before any kill decision), and
        # the parent's next job only once the run is long (see `return_queued`): a short run
        # costs the worker a single wake-up, the child's exit.
        poller.register(pidfd, select.POLLIN)
        self.watch(seg, parser, poller, pidfd, pipes, open_fds, lim, deadline, out)
        # Stop everything the run started, then read what is left in the pipes.
        cpu, status = self.kill_everything(pid)
        _drain_rest(seg, parser, pipes, open_fds, out)
        for fd in (*pipes, pidfd):
            os.close(fd)
        seg.update(ready=parser.ready, program=parser.program, results=parser.results,
                   ended=parser.ended, in_call=parser.call_started, status=status, cpu=cpu,
                   oom=self._oom_happened(status))
        if (seg["kill"] is None and not seg["oom"] and status is not None
                and cpu_limit_spent(status, cpu, plan["cpu_s"])):
            seg["kill"] = "cpu"  # the kernel ended it at the run's CPU budget: a timeout, as "run" is
        if status is not None:
            seg["exit_code"] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
            seg["how"] = (f"exit code {os.WEXITSTATUS(status)}" if os.WIFEXITED(status)
                          else f"signal {os.WTERMSIG(status)}")
        return seg

    def fork_child(self, plan: dict, program, calls: list, start: int, high: list, sources: list | None = None) -> int:
        """Fork the run's child (under the run's malloc settings) and close the write ends
        of its pipes here; returns its pid. The child first forgets the other jobs
        (`forget_other_jobs`): its harness runs below this frame, so the run can reach it."""
        mallopt = self.mallopt
        if mallopt is not None:  # the child inherits the run's malloc; the worker keeps its own
            mallopt(isolation.M_MMAP_MAX, RUN_MMAP_MAX)
            mallopt(isolation.M_TRIM_THRESHOLD, RUN_TRIM_THRESHOLD)
        pid = os.fork()
        if pid == 0:
            try:
                self.forget_other_jobs()
                child_main(plan, program, calls, start, tuple(high), self.isolated, self.flow, sources)
            finally:
                os._exit(SETUP_FAILED_EXIT)
        if mallopt is not None:
            mallopt(isolation.M_MMAP_MAX, _WORKER_MMAP_MAX)
            mallopt(isolation.M_TRIM_THRESHOLD, _WORKER_TRIM_THRESHOLD)
        for fd in high:
            os.close(fd)
        return pid

    def forget_other_jobs(self) -> None:
        """In a run's child, before any of the run's code: drop what the worker holds of other
        jobs (references, other candidates, tests), which the run could otherwise read
        through its frames or `gc`: the compiled code of recent jobs and the jobs queued
        behind this one. See docs/SANDBOX.md, "What a run can read of the harness"."""
        self.codes.hide()
        self.inbox.forget()

    def watch(self, seg: dict, parser: _RecordParser, poller, pidfd: int, pipes: tuple,
              open_fds: set, lim: dict, deadline: float, out: _Output) -> None:
        """Watch the child until it exits or must be stopped (``seg["kill"]`` says why):
        its records, the call and run deadlines, its output bound, and, once the run is
        long, the jobs queued behind it."""
        inbox = self.inbox
        watch_inbox = inbox is not None and not inbox.closed
        exited = inbox_polled = False
        while True:
            if seg["kill"] == "output":
                # stop before reading more records: the call in progress is the flooder
                break
            data = _drain(pipes[2])
            if data:
                parser.feed(data)
            if parser.violation:
                seg["violation"] = parser.violation
                seg["kill"] = "violation"
                break
            call_deadline = (parser.call_started_at + lim["call_timeout_s"]
                             if parser.call_started is not None else None)
            limit_at = deadline if call_deadline is None else min(deadline, call_deadline)
            now = time.monotonic()
            if now >= limit_at:
                seg["kill"] = "call" if call_deadline is not None and call_deadline < deadline else "run"
                break
            if exited or seg["kill"]:
                break
            if watch_inbox and now - self.run_started >= _RETURN_QUEUED_AFTER_S:
                if not inbox_polled:  # from now on, a job queued here is given back as it comes
                    poller.register(inbox.fd, select.POLLIN)
                    inbox_polled = True
                self.return_queued()
            wait_ms = min(_TICK_MS, max(1, int((limit_at - now) * 1000) + 1))
            exited, watch_inbox = self.wait_events(seg, poller, wait_ms, pidfd, pipes, open_fds, out,
                                                   exited, watch_inbox)

    def wait_events(self, seg: dict, poller, wait_ms: int, pidfd: int, pipes: tuple, open_fds: set,
                    out: _Output, exited: bool, watch_inbox: bool) -> tuple[bool, bool]:
        """One poll: note the child's exit, read the parent's messages, capture output
        (``seg["kill"] = "output"`` past its bound). Returns the new (exited, watch_inbox)."""
        inbox = self.inbox
        for fd, ev in poller.poll(wait_ms):
            if fd == pidfd:
                exited = True
                continue
            if watch_inbox and fd == inbox.fd:
                inbox.pump()
                if inbox.closed:
                    poller.unregister(fd)
                    watch_inbox = False
                continue
            if fd not in open_fds:
                continue
            # Read no further than one byte past the bound: a flooder then blocks on its
            # full pipe inside the flooding call, and that call is the one that fails.
            data = _drain(fd, cap=max(1, out.limit - out.total + 1) if out.stop else 1 << 20)
            if data is None:  # EOF
                poller.unregister(fd)
                open_fds.discard(fd)
            elif not out.add(fd == pipes[1], data):
                seg["kill"] = "output"
                break
        return exited, watch_inbox


class _CodeCache:
    """Code objects of recently run programs and calls, by source text.

    The judge sends the same call to the reference and to every candidate of a problem;
    compiling it once per worker instead of once per run saves most of the worker's own
    CPU. Code objects are immutable (a list literal is built afresh by each evaluation),
    so sharing one between runs is the same as compiling again. Only successful compiles
    of modest size are kept, up to `max_chars` of source in all: the worker's heap is
    copied into every run, so it must stay small. A code object takes about 10 bytes per
    character of its source, so the default is some 2.5 MB, about what the calls of a whole
    judge step need. (At 2 M characters the worker grew from 17 to 51 MB and its forks made
    a judge step 10-35% slower.)

    Two generations instead of an exact LRU order: what is compiled or used goes into the
    young one; when it holds half of `max_chars`, the old one is dropped and the young one
    becomes old. A hit in the young generation writes nothing: keeping an LRU order wrote
    to scattered list nodes on every hit, and each write after a fork is a page fault (the
    worker takes 12-30% fewer of them a judge step without it).

    A generation maps a source, behind its mode's letter (``"e"`` or ``"x"``), to its code,
    so that it holds no object the garbage collector tracks and is itself untracked;
    `untrack_new` untracks the constants of new code that hold anything (tuples, frozen
    sets). `hide` relies on both.
    """

    def __init__(self, max_chars: int = 250_000, max_source: int = 20_000) -> None:
        self.max_chars, self.max_source = max_chars, max_source
        self.young: dict[str, object] = {}
        self.old: dict[str, object] = {}
        self.young_chars = 0
        self.new: list = []  # code kept since `untrack_new`

    @staticmethod
    def _key(mode: str, source: str) -> str:
        return ("e" if mode == "eval" else "x") + source

    @property
    def chars(self) -> int:
        """Characters of source kept (a source in both generations counts once)."""
        return self.young_chars + sum(len(key) - 1 for key in self.old if key not in self.young)

    def __contains__(self, mode_source: tuple[str, str]) -> bool:
        key = self._key(*mode_source)
        return key in self.young or key in self.old

    def __len__(self) -> int:
        return len(self.young) + sum(1 for key in self.old if key not in self.young)

    def get(self, source: str, filename: str, mode: str):
        """What `compile_untrusted` returns for `source`, from the cache when possible."""
        key = self._key(mode, source)
        code = self.young.get(key)
        if code is not None:
            return code
        code = self.old.get(key)
        if code is None:
            code = compile_untrusted(source, filename, mode)
            if type(code) is not types.CodeType or len(source) > self.max_source:
                return code
        self.young[key] = code
        self.new.append(code)
        self.young_chars += len(source)
        if self.young_chars > self.max_chars // 2:
            self.old, self.young, self.young_chars = self.young, {}, 0
        return code

    def untrack_new(self) -> None:
        """After new code was kept: untrack its constants that the collector tracks. A
        tracked tuple or frozen set is listed by `gc.get_objects()`, and a module's
        constants hold the code of its functions (a frozen set, as `x in {1, 2}` compiles
        to, is always tracked, and keeps the tuple holding it tracked). Constants are
        immutable and hold no reference cycle, so the collector need not see them; the walk
        runs once per new code, in the worker (a child that wrote to them would copy pages)."""
        if not self.new:
            return
        todo, self.new = self.new, []
        while todo:
            code = todo.pop()
            _untrack(code.co_consts)
            todo.extend(c for c in code.co_consts if type(c) is types.CodeType)
        gc.collect(0)  # (some 4 us: the code's other tuples, of names, which hold only strings)

    def hide(self) -> None:
        """In a run's child: leave the cached code (other jobs' programs and calls) where
        the run's Python cannot reach it, neither through this object nor through `gc`
        (the generations are untracked). Freeing it would fault in every page it holds:
        3.5 ms of the child's CPU for a full cache, more than a whole run costs. So each
        generation keeps a reference Python does not see (the child never returns)."""
        _keep_alive(self.young)
        _keep_alive(self.old)
        self.young, self.old = {}, {}


def _keep_alive(obj: object) -> None:
    """Add a reference to `obj` that no Python object holds (never given back)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


_GC_UNTRACK = ctypes.pythonapi.PyObject_GC_UnTrack
_GC_UNTRACK.argtypes, _GC_UNTRACK.restype = [ctypes.py_object], None


def _untrack(const: tuple | frozenset) -> None:
    """Take a code object's constants (and the tuples and frozen sets inside them) out of
    the collector's lists: they are immutable, so in no cycle the collector must break."""
    if gc.is_tracked(const):
        _GC_UNTRACK(const)
    for item in const:
        if type(item) in (tuple, frozenset):
            _untrack(item)


class _Output:
    """Bounded capture of stdout and stderr together; reports when the bound is crossed
    (`stop`), or keeps the first `limit` bytes and counts the rest, which is discarded."""

    def __init__(self, limit: int, stop: bool = True) -> None:
        self.limit = limit
        self.stop = stop
        self.total = 0
        self.out = bytearray()
        self.err = bytearray()

    def add(self, is_err: bool, data: bytes) -> bool:
        room = self.limit - len(self.out) - len(self.err)
        if room > 0:
            (self.err if is_err else self.out).extend(data[:room])
        self.total += len(data)
        return self.total <= self.limit or not self.stop

    def text(self) -> tuple[str, str]:
        return (self.out.decode("utf-8", "replace"), self.err.decode("utf-8", "replace"))


class _RecordParser:
    """Strict state machine over the child's result records.

    Expected, in order: ``["ready"]``, ``["P", ok, error, nonce]``, then for each call
    ``i`` from ``start``: ``["S", i]`` and ``["R", i, "ok", value] | ["R", i, "error", text]``,
    then ``["E", nonce]`` (only after a program that succeeded). Anything else (a duplicate, a gap, an unknown tag, a malformed value, a
    record after the end, an over-long line) is a violation: the candidate's failure.
    """

    def __init__(self, start: int, n: int, max_line: int, nonce: str) -> None:
        self.nonce = nonce
        self.buf = bytearray()
        self.max_line = max_line
        self.next_call = start
        self.n = n
        self.ready = False
        self.program: tuple | None = None
        self.results: dict[int, dict] = {}
        self.ended = False
        self.call_started: int | None = None
        self.call_started_at = 0.0
        self.violation: str | None = None
        self.checked: set[str] = set()  # large value texts read and checked in this run

    def feed(self, data: bytes) -> None:
        if self.violation:
            return
        self.buf.extend(data)
        if b"\n" in data:
            # (split once: taking lines off the front one by one moved the rest each time)
            *lines, rest = self.buf.split(b"\n")
            self.buf = rest
            # (the collector off while records are read: a value of 5 MB is a million lists,
            # acyclic and dropped once checked, and the collections their allocation set off
            # walked them again and again: 0.6 s to read a set of 100,000 tuples, 0.1 s without)
            collecting = gc.isenabled()
            gc.disable()
            try:
                self.read_lines(lines)
            finally:
                if collecting:
                    gc.enable()
            if self.violation:
                return
        if len(self.buf) > self.max_line:
            self.violation = "over-long result record"

    def read_lines(self, lines: list) -> None:
        """Take whole records; the first bad one is the run's violation."""
        for line in lines:
            if len(line) > self.max_line:
                self.violation = "over-long result record"
                return
            try:
                if not self.call_record(line):
                    self.step(json.loads(line))
            except Exception as e:  # any surprise in untrusted input is the candidate's failure
                self.violation = f"malformed result record ({type(e).__name__}: {str(e)[:200]})"
                return

    def call_record(self, line: bytes) -> bool:
        """Take a call's start record or ok-result record written exactly as the harness
        writes them, without the general parser (they are nearly all the records); False
        for any other line, which `step` then judges. An ok value is checked here and kept as
        the child's JSON text, which `send_result` passes on as it is."""
        i = self.call_started
        if i is None:
            if self.program is None or self.ended or self.next_call >= self.n or line != b'["S",%d]' % self.next_call:
                return False
            self.call_started = self.next_call
            self.call_started_at = time.monotonic()
            return True
        head = b'["R",%d,"ok",' % i
        if not (line.startswith(head) and line.endswith(b"]")):
            return False
        try:
            text = line[len(head):-1].decode("ascii")
            known = text in self.checked  # (read and checked before in this run: as good now)
            if not known:
                value, end = _scan_json(text, 0)
        except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
            return False  # (the general path finds what is wrong)
        if not known:
            if end != len(text):
                return False
            check_value(value)
            if len(text) >= _REMEMBERED_TEXT:
                self.checked.add(text)
        self.results[i] = '{"status":"ok","value":' + text + "}"
        self.call_started = None
        self.next_call = i + 1
        return True

    def finish(self) -> None:
        if self.buf and not self.violation:
            self.violation = "truncated result record"

    def step(self, rec) -> None:
        if type(rec) is not list or not rec or type(rec[0]) is not str:
            raise ValueError("record is not a tagged list")
        tag = rec[0]
        if self.ended:
            raise ValueError(f"record {tag!r} after the end record")
        if not self.ready:
            if rec != ["ready"]:
                raise ValueError("first record must be 'ready'")
            self.ready = True
            return
        if self.program is None:
            if (tag != "P" or len(rec) != 4 or type(rec[1]) is not bool
                    or not (rec[2] is None or type(rec[2]) is str) or rec[3] != self.nonce):
                raise ValueError("expected the program record (with this run's nonce)")
            self.program = (rec[1], rec[2])
            if not rec[1]:
                self.ended = True  # nothing may follow a failed program
            return
        if tag == "S":
            if (len(rec) != 2 or type(rec[1]) is not int or rec[1] != self.next_call or rec[1] >= self.n
                    or self.call_started is not None):
                raise ValueError("call-start record out of order")
            self.call_started = rec[1]
            self.call_started_at = time.monotonic()
            return
        if tag == "R":
            if (len(rec) != 4 or type(rec[1]) is not int or rec[1] != self.call_started
                    or rec[2] not in ("ok", "error")):
                raise ValueError("call-result record out of order or malformed")
            i = rec[1]
            if rec[2] == "ok":
                self.results[i] = {"status": "ok", "value": check_value(rec[3])}
            else:
                if type(rec[3]) is not str:
                    raise ValueError("call error must be text")
                self.results[i] = {"status": "error", "error": rec[3][:2000]}
            self.call_started = None
            self.next_call = i + 1
            return
        if tag == "K":  # a call skipped by the job's flow (`Job.requires`)
            if len(rec) != 2 or type(rec[1]) is not int or rec[1] != self.next_call or rec[1] >= self.n \
                    or self.call_started is not None:
                raise ValueError("skip record out of order")
            self.results[rec[1]] = {"status": "not-run", "error": "skipped"}
            self.next_call = rec[1] + 1
            return
        if tag == "E":
            if len(rec) != 2 or rec[1] != self.nonce or self.call_started is not None or self.next_call != self.n:
                raise ValueError("end record before all calls finished")
            self.ended = True
            return
        raise ValueError(f"unknown record tag {tag!r}")


#: The length from which a value's text, once read and checked, is remembered for the rest of
#: its run: the same text again (the reference's value, evaluated in each suite, returned
#: by a right candidate) is then known good by one hash and one comparison. Reading and
#: checking a set of 100,000 tuples (5.6 MB) took 0.3-0.5 s, and a run may return it five times.
_REMEMBERED_TEXT = 1 << 16

#: json's C scanner: one JSON value at an index of a str, as ``json.loads`` reads it.
_scan_json = json.scanner.make_scanner(json.JSONDecoder())


def _run_pipes(has_calls: bool) -> tuple[tuple[int, int, int], list[int]]:
    """The pipes of one run: read ends (stdout, stderr, results) for the worker, and the
    write ends for the child, moved to high close-on-exec fds."""
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    r_res, w_res = os.pipe()
    if has_calls:
        try:  # room for many records between ticks
            fcntl.fcntl(r_res, _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 200) for fd in (w_out, w_err, w_res)]
    for fd in (w_out, w_err, w_res):
        os.close(fd)
    return (r_out, r_err, r_res), high


def _drain_rest(seg: dict, parser: _RecordParser, pipes: tuple, open_fds: set, out: _Output) -> None:
    """After the kill: read what is left in the pipes still open (the results into
    `parser`, output up to its bound), then end the parser."""
    r_out, r_err, r_res = pipes
    for fd in list(open_fds):
        while True:
            data = _drain(fd)
            if not data:
                break
            if fd == r_res:
                parser.feed(data)
            elif fd in (r_out, r_err) and not out.add(fd == r_err, data) and seg["kill"] is None:
                seg["kill"] = "output"
    parser.finish()
    if parser.violation and not seg["violation"]:
        seg["violation"] = parser.violation


def _drain(fd: int, cap: int = 1 << 20) -> bytes | None:
    """Read what is available now, up to about `cap` bytes; b'' if nothing, None at EOF."""
    chunks = []
    got = 0
    while got < cap:
        try:
            b = os.read(fd, min(_READ_SIZE, cap - got))
        except BlockingIOError:
            break
        except OSError as e:
            if e.errno == errno.EINTR:
                continue
            raise
        if not b:
            return b"".join(chunks) if chunks else None
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _children() -> list[int]:
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return pids


def _vsz_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        return 0


# --------------------------------------------------------------------------- entry


def main() -> None:
    cfg = json.loads(sys.argv[1])
    allow_deep_values()  # (its runs set their own limit: the plain program's headroom)
    # The parent channel moves to high fds; stdin/stdout become /dev/null so a stray
    # print can never corrupt the channel.
    chan_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 100)
    chan_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 100)
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    ns_error = None
    if cfg.get("isolate", True) and os.geteuid() == 0:
        try:
            isolation.unshare(isolation.CLONE_NEWNS | isolation.CLONE_NEWNET | isolation.CLONE_NEWIPC
                              | isolation.CLONE_NEWUTS | isolation.CLONE_NEWPID)
        except OSError as e:
            ns_error = f"unshare failed: {e}"
        if ns_error is None:
            pid = os.fork()
            if pid:  # the launcher: wait for the worker (pid 1 of the new namespace)
                os.close(chan_in)
                os.close(chan_out)
                _, status = os.waitpid(pid, 0)
                os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
            isolation.set_parent_death_signal(signal.SIGKILL)
    elif not cfg.get("isolate", True):
        ns_error = "isolation disabled by configuration"
    else:
        ns_error = "not root: namespaces, chroot and uid switch need root"
    w = Worker(cfg, chan_in, chan_out)
    try:
        w.setup(ns_error)
    except Exception as e:
        send(chan_out, {"hello": False, "error": f"{type(e).__name__}: {e}"})
        raise
    try:
        w.serve()
    finally:
        if w.host_tmp:
            try:
                w.kill_everything(None)
                isolation.remove_tree(w.host_tmp)
            except OSError:
                pass


if __name__ == "__main__":
    main()
