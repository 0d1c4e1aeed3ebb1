"""The parent side: a pool of confined fork-server workers, and the public ``Executor``.

The parent never runs candidate code and never sends expected values to a worker; it
receives plain-data results and leaves comparison to ``values_equal``. A worker that
crashes, hangs past its deadline or answers nonsense is an infrastructure failure: it is
replaced, the run is retried once, and a second failure is reported as ``status="infra"``.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import json
import logging
import math
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Iterable, Sequence

from codea1.interpreter import gc_paused
from codea1.sandbox import cgroups, isolation
from codea1.sandbox._worker import HUGE_PAGES_TUNABLE
from codea1.sandbox.support import WorkerError, require  # (WorkerError is public here)
from codea1.sandbox.types import RUN_STATUSES, CallResult, Job, Limits, RunResult
from codea1.sandbox.values import allow_deep_values

log = logging.getLogger("codea1.sandbox")

_HEADER = struct.Struct(">I")
#: Seconds a worker may take beyond a run's own deadline before it is declared broken.
_GRACE_S = 20.0
#: Seconds a worker may take to start (imports, namespaces, root, preload).
_START_TIMEOUT_S = 120.0
#: The uids runs switch to (root only): `_UID_BASE + (pid % _UID_PIDS) * _UID_SLOTS + slot`,
#: where `slot` is held by one live worker of this process. RLIMIT_NPROC counts processes
#: per uid over the whole machine, so two workers on one uid would share a run's process
#: budget: a run's fork could fail for another's. (The highest is under 2**31.)
_UID_BASE = 2_000_000
_UID_SLOTS = 4096
_UID_PIDS = 500_000


class _UidSlots:
    """The slots of this process's live workers: the lowest free one is taken."""

    def __init__(self) -> None:
        self._held: set[int] = set()
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            slot = next(i for i in itertools.count() if i not in self._held)
            if slot >= _UID_SLOTS:
                raise WorkerError(f"more than {_UID_SLOTS} sandbox workers alive in one process")
            self._held.add(slot)
            return slot

    def give_back(self, slot: int) -> None:
        with self._lock:
            self._held.discard(slot)


_UIDS = _UidSlots()


def run_uid(pid: int, slot: int) -> int:
    """The uid of the runs of the worker holding `slot` in process `pid`."""
    return _UID_BASE + (pid % _UID_PIDS) * _UID_SLOTS + slot


_SERIAL = itertools.count(1)  # unique cgroup names across every Executor of this process
#: Why a run that never started resolves as infra after `close()`.
_CLOSED = "the executor was closed before the run started"
#: Jobs queued at once on one worker (it starts the next as soon as one ends).
_PIPELINE_DEPTH = 2


#: Directory holding the ``codea1`` package this parent runs: the worker runs the same code.
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# `-s` (no user site) and a scrubbed environment instead of `-I`: `-I` would also ignore
# PYTHONHASHSEED, which must be the same in every worker (see `_Worker`). The `-c` entry of
# sys.path (the cwd, "/") is dropped.
_WORKER_BOOT = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
                "sys.path.insert(0, {root}); from codea1.sandbox._worker import main; main()")




class _Worker:
    """One fork-server process and its channel."""

    def __init__(self, index: int, gen: int, preload: Sequence[str], isolate: bool,
                 cgroup_setup: "cgroups.Setup | None" = None) -> None:
        self.index = index
        tag = cgroups.run_group_name(index, next(_SERIAL))
        self.cgroups: list[str] = []
        self.uid_slot: int | None = None
        cfg: dict = {
            "preload": list(preload),
            "isolate": isolate,
            # The checkout, the caller's directory, home, /tmp: never in a run's view.
            "hide": [path for _, path in isolation.places_to_hide(_PACKAGE_ROOT)],
        }
        if cgroup_setup is not None:  # (none by default with isolate=False)
            # Created here, not by the worker, so that removal cannot race creation.
            groups, self.cgroups = cgroups.make_run_groups(cgroup_setup, tag)
            cfg.update(groups)
        env = {
            # One hash seed for every worker: a reference and a candidate that build the
            # same set of strings must iterate it in the same order (`tuple(set(words))`),
            # whichever worker runs them. Random per-process seeds made such tests flaky.
            "PYTHONHASHSEED": "0",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            # Large allocations (a big int, a stress input's list) on transparent huge
            # pages: one page fault per 2 MB instead of one per 4 kB. A mutant that builds
            # 120 MB ints ran 3-5x faster. glibc < 2.35 ignores it. (Each run also gets
            # malloc settings of its own around its fork: see _worker.RUN_MMAP_MAX.)
            "GLIBC_TUNABLES": HUGE_PAGES_TUNABLE,
        }
        debug = os.environ.get("CODEA1_SANDBOX_DEBUG")
        self.uid_slot = _UIDS.take()  # given back once the worker is gone (`_release`)
        cfg["uid"] = run_uid(os.getpid(), self.uid_slot)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-c", _WORKER_BOOT.format(root=repr(_PACKAGE_ROOT)), json.dumps(cfg)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None if debug else subprocess.DEVNULL,
                env=env,
                cwd="/",
                close_fds=True,
                start_new_session=True,
            )
        except BaseException:
            _UIDS.give_back(self.uid_slot)
            raise
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        self.hello: dict | None = None

    def handshake(self) -> dict:
        msg = self.recv(time.monotonic() + _START_TIMEOUT_S)
        if not msg.get("hello"):
            raise WorkerError(f"worker failed to start: {msg.get('error', msg)}")
        self.hello = msg
        return msg

    def send(self, msg: dict) -> None:
        if self.proc.stdin.closed:  # (its fd number may belong to another file by now)
            raise WorkerError("worker is gone")
        data = json.dumps(msg, separators=(",", ":")).encode()
        buf = memoryview(_HEADER.pack(len(data)) + data)
        try:
            while buf:
                buf = buf[os.write(self.wfd, buf):]
        except OSError as e:
            raise WorkerError(f"cannot write to worker: {e}") from e

    def _read(self, n: int, deadline: float) -> bytes:
        if self.proc.stdout.closed:
            raise WorkerError("worker is gone")
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerError("worker did not answer in time")
            r, _, _ = select.select([self.rfd], [], [], left)
            if not r:
                continue
            b = os.read(self.rfd, n - got)
            if not b:
                raise WorkerError(f"worker exited (status {self.proc.poll()})")
            chunks.append(b)
            got += len(b)
        return b"".join(chunks)

    def recv(self, deadline: float) -> dict:
        (size,) = _HEADER.unpack(self._read(_HEADER.size, deadline))
        try:
            msg = json.loads(self._read(size, deadline))
        except ValueError as e:
            raise WorkerError(f"malformed message from worker: {e}") from e
        if not isinstance(msg, dict):
            raise WorkerError("malformed message from worker")
        return msg

    def close(self, timeout: float = 3.0) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        try:
            self.proc.stdout.close()
        except OSError:
            pass
        self._release()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self._release()

    def _release(self) -> None:
        """What the ended worker held: its uid slot and its runs' cgroups."""
        if self.uid_slot is not None:  # (the worker has ended: its runs' uid is free for another)
            _UIDS.give_back(self.uid_slot)
            self.uid_slot = None
        for path in self.cgroups:
            if not cgroups.remove_run_group(path):
                log.warning("sandbox: cgroup %s is still busy; a later start removes it", path)
        self.cgroups = []


def _lost(protections: dict) -> dict:
    return {k: v for k, v in protections.items() if v is not True}


class Executor:
    """A pool of sandboxed fork-server workers (``workers=None``: one per CPU core).

    Use as a context manager (or call ``close()``): once it has run something, its driver
    threads keep it and its workers alive until it is closed or the process exits.
    ``submit``, ``run`` and ``run_many`` are thread-safe; all runs share one priority
    queue, fed to the workers by one driver thread each. ``preload``
    modules are imported into a worker's warm state the first time a job mentions them
    (every later run inherits them: ``import numpy`` then costs nothing). ``protections``
    maps each protection of ``isolation.PROTECTIONS`` to ``True`` (held),
    ``"DEGRADED: why, and what holds instead"`` or ``"LOST: why"``; the last two are also
    logged as a warning at start-up. ``cgroup_setup`` says where run cgroups go (default:
    `cgroups.acquire`, this process's hierarchy as detected, shared by its executors).
    """

    def __init__(self, workers: int | None = None, limits: Limits = Limits(), *,
                 preload: Sequence[str] = ("numpy",), isolate: bool = True,
                 cgroup_setup: cgroups.Setup | None = None) -> None:
        require("the sandboxed executor")
        if not isinstance(limits, Limits):
            raise TypeError(f"limits must be a Limits, got {type(limits).__name__}")
        n = workers if workers is not None else (os.cpu_count() or 1)
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"workers must be a positive integer or None, got {workers!r}")
        self.limits = limits
        allow_deep_values()  # (results are read here: values nest up to values._MAX_DEPTH)
        self.preload = tuple(preload)
        self.isolate = isolate
        self.n_workers = n
        self._gen = 0
        self._lock = threading.Lock()
        self._closed = False
        self._stopping = threading.Event()  # set by close() and by the finalizer at exit
        self._queue: list = []  # heap of (-priority, sequence number, _Task)
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._drivers: list[threading.Thread] = []
        self._all: list[_Worker] = []
        self._owns_setup = isolate and cgroup_setup is None
        self.cgroup_setup = cgroups.acquire() if self._owns_setup else cgroup_setup
        started = []
        try:
            started += [self._spawn(i) for i in range(n)]
            for w in started:
                w.handshake()
        except BaseException:
            for w in started:
                w.kill()
            if self._owns_setup:
                cgroups.release()
            raise
        self.protections: dict = dict(started[0].hello["protections"])
        self.preload_errors: dict = dict(started[0].hello.get("preload_errors") or {})
        self._started = started
        lost = _lost(self.protections)
        log.info("sandbox: %d workers; protections holding: %s", n,
                 ", ".join(k for k, v in self.protections.items() if v is True))
        if lost:
            log.warning("sandbox protections lost or degraded on this machine: %s",
                        "; ".join(f"{k}: {v}" for k, v in lost.items()))
        self._finalizer = weakref.finalize(self, Executor._shutdown, self._all, self._cv, self._queue, self._stopping,
                                           self._owns_setup)

    # ------------------------------------------------------------------ lifecycle

    def _spawn(self, index: int) -> _Worker:
        with self._lock:
            self._gen += 1
            w = _Worker(index, self._gen, self.preload, self.isolate, self.cgroup_setup)
            self._all.append(w)
        return w

    def _replace(self, w: _Worker) -> _Worker:
        w.kill()
        with self._lock:
            if w in self._all:
                self._all.remove(w)
        fresh = self._spawn(w.index)
        try:
            fresh.handshake()
        except BaseException:
            fresh.kill()
            with self._lock:
                if fresh in self._all:
                    self._all.remove(fresh)
            raise
        return fresh

    @staticmethod
    def _drop_queued(cv: threading.Condition, pending: list) -> None:
        """Resolve every run still queued as ``infra`` and wake the drivers."""
        with cv:
            left = [task for _, _, task in pending]
            pending.clear()
            cv.notify_all()
        for task in left:
            task.resolve(_infra(_CLOSED, len(task.job.calls)))

    @staticmethod
    def _shutdown(workers: list, cv: threading.Condition, pending: list, stopping: threading.Event,
                  release_cgroups: bool) -> None:
        stopping.set()
        Executor._drop_queued(cv, pending)
        for w in list(workers):
            w.close()
        workers.clear()
        if release_cgroups:
            cgroups.release()

    def close(self) -> None:
        """Stop every worker (and every process a run started) and remove cgroups.

        Runs in progress finish; runs still queued resolve as ``infra``.
        """
        with self._cv:
            if self._closed:
                return
            self._closed = True
        self._drop_queued(self._cv, self._queue)  # drivers finish what they hold
        for t in self._drivers:
            t.join()
        self._finalizer()

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def lost_protections(self) -> dict:
        """The protections that do not hold here, with the reason."""
        return _lost(self.protections)

    # ------------------------------------------------------------------ runs

    def submit(self, job: Job, priority: float = 0.0) -> Future:
        """Queue one job; the returned future holds its ``RunResult``.

        Higher ``priority`` runs first; equal priorities run in the order submitted. A
        scheduler that knows which runs are long (the judge does, from the reference's
        times) submits them with higher priority, so no worker is left with a long run at
        the end while the others idle. Infrastructure failures are retried once; the future
        never raises for anything a run does.
        """
        if not isinstance(job, Job):
            raise TypeError(f"submit() takes a Job, got {type(job).__name__}")
        task = _Task(job, Future())
        with self._cv:
            task.key = (-float(priority), next(self._seq))
            if self._closed:
                raise RuntimeError("Executor is closed")
            if not self._drivers:
                for w in self._started:
                    t = threading.Thread(target=self._drive, args=(w,), daemon=True,
                                         name=f"codea1-sandbox-{w.index}")
                    t.start()
                    self._drivers.append(t)
            heapq.heappush(self._queue, (*task.key, task))
            self._cv.notify()
        return task.future

    def run(self, job: Job) -> RunResult:
        """Run one job in a fresh fork of a warm worker; infra failures retried once."""
        return self.run_many([job])[0]

    def run_many(self, jobs: Iterable[Job]) -> list[RunResult]:
        """Run jobs in parallel on all workers; results in the order of ``jobs``.

        The cyclic garbage collector is paused meanwhile (`codea1.interpreter`): decoding
        results allocates many acyclic objects, and the collector cost 3-4x the reading."""
        jobs = list(jobs)
        for i, job in enumerate(jobs):
            if not isinstance(job, Job):
                raise TypeError(f"run_many() takes Jobs; item {i} is a {type(job).__name__}")
        with gc_paused():
            return [f.result() for f in [self.submit(job) for job in jobs]]

    def _take(self, block: bool) -> "_Task | None":
        """The most urgent queued task; None when there is none (or, blocking, on close)."""
        with self._cv:
            while True:
                while self._queue:
                    task = heapq.heappop(self._queue)[2]
                    if task.claimed or task.future.set_running_or_notify_cancel():
                        task.claimed = True  # (a retried or given-back task is running already)
                        return task
                if not block or self._closed or self._stopping.is_set():
                    return None
                self._cv.wait()

    def _retry(self, task: "_Task", error: str) -> None:
        """A run lost to a broken worker: queue it again first, or report it as infra."""
        task.attempts += 1
        if task.attempts >= 2:
            task.resolve(_infra(error, len(task.job.calls)))
            return
        self._queue_again(task, error, first=True)

    def _queue_again(self, task: "_Task", error: str, first: bool) -> None:
        """Put a task back in the queue: `first`, or in its old place (a job a worker gave
        back unstarted). Once the executor is closed it resolves as infra (`error`)."""
        with self._cv:
            if not self._closed:
                heapq.heappush(self._queue, ((-math.inf, next(self._seq)) if first else task.key) + (task,))
                self._cv.notify()
                return
        task.resolve(_infra(error, len(task.job.calls)))

    def _drive(self, w: _Worker) -> None:
        """Feed one worker from the queue until the executor closes (a driver thread).

        Up to ``_PIPELINE_DEPTH`` jobs are queued on the worker at once, so it starts the
        next run as soon as one ends instead of waiting for this process to answer. A job
        queued behind a run that turns out to be long comes back (the worker returns it
        unstarted) and goes back into the queue for any worker; nothing more is queued
        behind that run.
        """
        inflight: collections.deque[_Task] = collections.deque()
        wire_ids = itertools.count()
        hold = False  # the running job is long: queue nothing behind it
        while True:
            try:
                while len(inflight) < _PIPELINE_DEPTH and not (hold and inflight):
                    task = self._take(block=not inflight)
                    if task is None:
                        break
                    task.wire_id = next(wire_ids)
                    inflight.append(task)
                    w.send(task.message(self.limits))
                if not inflight:
                    return  # closed and nothing left
                task = inflight[0]
                limits = task.job.limits or self.limits
                msg = w.recv(time.monotonic() + limits.timeout_s + _GRACE_S)
                if "returned" in msg:
                    back = next((t for t in list(inflight)[1:] if t.wire_id == msg["returned"]), None)
                    if back is None:
                        raise WorkerError(f"worker gave back a job it does not hold: {msg['returned']!r}")
                    inflight.remove(back)
                    hold = True
                    self._queue_again(back, _CLOSED, first=False)
                    back = None  # (not held: see below)
                    continue
                if msg.get("id") != task.wire_id:
                    raise WorkerError(f"worker answered job {msg.get('id')!r}, expected {task.wire_id}")
                raw = msg.get("result") or {}
                inflight.popleft()
                hold = False
                result = _to_result(raw, len(task.job.calls))
                if result.status == "infra":
                    self._retry(task, result.infra_error or "infrastructure failure")
                else:
                    task.resolve(result)
                # (not held while this thread waits for the next job: a run's values can be a
                # few million objects, which the collector would walk again and again)
                msg = raw = result = task = None  # type: ignore[assignment]
            except Exception as e:  # noqa: BLE001 - a driver must never die with runs in hand
                if not isinstance(e, WorkerError):
                    log.exception("sandbox driver error")
                for task in inflight:
                    self._retry(task, str(e))
                inflight.clear()
                hold = False
                if self._stopping.is_set():
                    return
                try:
                    w = self._replace(w)
                except Exception as e2:  # a later run retries the start (and fails as infra)
                    log.error("sandbox worker restart failed: %s", e2)


class _Task:
    """One queued job, its future and how often a broken worker lost it."""

    __slots__ = ("job", "future", "attempts", "key", "claimed", "wire_id")

    def __init__(self, job: Job, future: Future) -> None:
        self.job, self.future, self.attempts = job, future, 0
        self.key: tuple[float, int] = (0.0, 0)  # its place in the queue: (-priority, order)
        self.claimed = False  # taken from the queue once (its future is running)
        self.wire_id = -1  # its number on the worker it was last sent to

    def message(self, default: Limits) -> dict:
        job = {"program": self.job.program, "calls": list(self.job.calls),
               "limits": (self.job.limits or default).to_wire()}
        if self.job.isolated:
            job["isolated"] = list(self.job.isolated)
        job.update(self.job.flow())
        return {"id": self.wire_id, "job": job}

    def resolve(self, result: RunResult) -> None:
        if not self.future.done():
            self.future.set_result(result)


def _infra(error: str, n_calls: int) -> RunResult:
    return RunResult(status="infra", infra_error=error,
                     calls=[CallResult(status="not-run") for _ in range(n_calls)])


def _to_result(raw: dict, n_calls: int) -> RunResult:
    """Turn a worker's answer into a RunResult; anything unexpected is infra."""
    try:
        status = raw["status"]
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown status {status!r}")
        if status == "infra":
            return _infra(raw.get("infra_error") or "worker reported an infrastructure failure", n_calls)
        calls = [CallResult(status=c["status"], value=c.get("value"), error=c.get("error"))
                 for c in raw["calls"]]
        if len(calls) != n_calls:
            raise ValueError(f"{len(calls)} call results for {n_calls} calls")
        return RunResult(
            status=status,
            exit_code=raw.get("exit_code"),
            stdout=raw.get("stdout", ""),
            stderr=raw.get("stderr", ""),
            cpu_s=float(raw.get("cpu_s", 0.0)),
            wall_s=float(raw.get("wall_s", 0.0)),
            peak_mb=float(raw.get("peak_mb", 0.0)),
            program_ok=raw.get("program_ok") is True,
            program_error=raw.get("program_error"),
            calls=calls,
        )
    except (KeyError, TypeError, ValueError) as e:
        return _infra(f"malformed result from worker: {e}", n_calls)


def run(program: str, calls: Sequence[str] = (), limits: Limits | None = None) -> RunResult:
    """One-off convenience: start a one-worker executor, run one job, stop it."""
    with Executor(workers=1, limits=limits or Limits()) as ex:
        return ex.run(Job(program=program, calls=calls))
