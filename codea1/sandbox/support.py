"""Can the sandbox run on this machine at all? Asked before anything heavy is loaded.

The executor needs Linux: ``fork``, ``/proc`` (to find and kill a run's processes),
``pidfd_open`` (Linux 5.3+, to watch a run without races) and the ``resource`` module.
On macOS, Windows or an older kernel it would fail deep inside (an ``ImportError`` of
``fcntl``, an ``AttributeError`` on ``os.pidfd_open``, every run "infra"). `require`
says so in one line first. What merely weakens the sandbox (no root, no writable cgroup)
is not here: the executor runs and names each protection it lost. This module imports
nothing that a non-Linux Python lacks.
"""

from __future__ import annotations

import os
import platform
import sys


class WorkerError(RuntimeError):
    """A worker broke (died, hung, spoke nonsense): an infrastructure failure."""


class SandboxUnavailable(WorkerError):
    """The sandbox cannot run on this machine (see `missing`)."""


def missing() -> list[str]:
    """What of the sandbox's hard needs this machine lacks (empty: it can run)."""
    system = platform.system()
    if system != "Linux":
        return [f"the sandbox needs Linux (fork server, /proc, pidfd, namespaces); this is {system or sys.platform}"]
    out = []
    if not hasattr(os, "fork"):
        out.append("os.fork is missing")
    if not os.path.exists("/proc/self/task"):
        out.append("/proc is not mounted (needed to find and kill a run's processes)")
    if not hasattr(os, "pidfd_open"):
        out.append("this Python has no os.pidfd_open (needs Python 3.9+ built for Linux)")
    else:
        try:
            os.close(os.pidfd_open(os.getpid()))
        except OSError as e:
            out.append(f"pidfd_open fails ({e.strerror}): the kernel {platform.release()} is older than Linux 5.3")
    try:
        import fcntl  # noqa: F401
        import resource  # noqa: F401
    except ImportError as e:
        out.append(f"the {e.name} module is missing")
    return out


def how_to_proceed() -> str:
    if platform.system() in ("Darwin", "Windows"):
        return ("run it in a Linux container or VM, as root for the namespaces"
                + (" (WSL2 works)" if platform.system() == "Windows" else "")
                + "; docs/SANDBOX.md says what each setup protects")
    return "run it on Linux 5.3 or newer with /proc mounted (a current distribution, or a container on one)"


def require(what: str) -> None:
    """Raise `SandboxUnavailable` (one line: what is missing, how to proceed) if the
    sandbox cannot run here; ``what`` names the command or caller (``codea1 judge``)."""
    gaps = missing()
    if gaps:
        raise SandboxUnavailable(f"{what} runs model-written code in the sandbox, which cannot run here: "
                                 f"{'; '.join(gaps)}. To proceed, {how_to_proceed()}")
