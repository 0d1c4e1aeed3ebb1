"""Is the host unharmed after a run? Leftover processes, memory not given back.

Used by the attack tests and by ``codea1 sandbox check``: an attack only "fails" if the
host is also left as it was (nothing the run started survives it, its memory is freed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from codea1.sandbox.cgroups import children_of
from codea1.sandbox.executor import Executor


def _status_field(pid: str, field: str) -> str | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def run_uid_processes(executor: Executor) -> list[int]:
    """Host processes running as one of this executor's run uids (none between runs)."""
    uids = {w.hello.get("uid") for w in list(executor._all) if w.hello and w.hello.get("uid") is not None}
    if not uids:
        return []
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        uid = _status_field(pid, "Uid")
        if uid and int(uid.split()[0]) in uids:
            out.append(int(pid))
    return out


def run_processes(executor: Executor) -> list[int]:
    """Processes below the workers (launcher -> worker -> runs); empty when all runs are over."""
    found = []
    for w in list(executor._all):
        for worker in children_of(w.proc.pid):  # the launcher's child is the worker (pid 1 inside)
            stack = children_of(worker)
            while stack:
                p = stack.pop()
                found.append(p)
                stack += children_of(p)
    return found


def cgroup_usage_mb(executor: Executor) -> float:
    """Memory still charged to the runs' cgroups (0 when no cgroup is in use)."""
    total = 0
    for w in list(executor._all):
        for path in w.cgroups:
            for name in ("memory.usage_in_bytes", "memory.current"):  # v1, v2
                f = os.path.join(path, name)
                if os.path.exists(f):
                    with open(f) as fh:
                        total += int(fh.read())
    return total / 2**20


def mem_available_mb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class HostSnapshot:
    mem_available_mb: float
    cgroup_mb: float

    @classmethod
    def take(cls, executor: Executor) -> "HostSnapshot":
        return cls(mem_available_mb(), cgroup_usage_mb(executor))

    def harm(self, executor: Executor, mem_slack_mb: float = 256.0) -> list[str]:
        """What is wrong with the host now compared to this snapshot (empty: unharmed)."""
        problems = []
        procs = run_processes(executor)
        if procs:
            problems.append(f"processes of a finished run still alive: {procs}")
        strays = run_uid_processes(executor)
        if strays:
            problems.append(f"processes with a sandbox uid still alive: {strays}")
        cg = cgroup_usage_mb(executor)
        if cg > self.cgroup_mb + 32:
            problems.append(f"run cgroups still hold {cg:.0f} MiB (was {self.cgroup_mb:.0f})")
        avail = mem_available_mb()
        if avail < self.mem_available_mb - mem_slack_mb:
            problems.append(f"host MemAvailable fell by {self.mem_available_mb - avail:.0f} MiB")
        return problems
