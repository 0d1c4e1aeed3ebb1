"""The executor's data types: what a caller asks for (Job, Limits) and what it gets back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence

RunStatus = Literal["ok", "error", "timeout", "memory", "output-limit", "infra"]
CallStatus = Literal["ok", "error", "timeout", "not-run"]

RUN_STATUSES = ("ok", "error", "timeout", "memory", "output-limit", "infra")
CALL_STATUSES = ("ok", "error", "timeout", "not-run")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run (defaults sized for short judge programs).

    ``timeout_s`` is the wall-clock budget of the whole run (program plus calls, enforced
    from outside with SIGKILL); ``cpu_s`` the CPU-time rlimit (``None``: ``timeout_s``);
    ``call_timeout_s`` the wall-clock budget of each call; ``memory_mb`` a hard cap on the
    memory charged to the run; ``max_procs`` the number of processes/threads it may have;
    ``max_output_bytes`` the stdout+stderr it may write before being stopped;
    ``max_file_bytes`` the size of any file it writes; ``max_value_bytes`` the encoded size
    of one call's value.
    """

    timeout_s: float = 10.0
    cpu_s: Optional[float] = None
    call_timeout_s: float = 3.0
    memory_mb: int = 1024
    max_procs: int = 32
    max_output_bytes: int = 65536
    max_file_bytes: int = 16 * 1024 * 1024
    max_value_bytes: int = 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("timeout_s", "call_timeout_s"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 0):
                raise ValueError(f"Limits.{name} must be a positive number of seconds, got {v!r}")
        if self.cpu_s is not None and not (isinstance(self.cpu_s, (int, float)) and self.cpu_s > 0):
            raise ValueError(f"Limits.cpu_s must be None or positive seconds, got {self.cpu_s!r}")
        for name in ("memory_mb", "max_procs", "max_output_bytes", "max_file_bytes", "max_value_bytes"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v > 0):
                raise ValueError(f"Limits.{name} must be a positive integer, got {v!r}")
        if self.memory_mb < 32:
            raise ValueError(f"Limits.memory_mb must be at least 32 (Python needs it), got {self.memory_mb}")

    def to_wire(self) -> dict:
        return {
            "timeout_s": float(self.timeout_s),
            "cpu_s": float(self.cpu_s if self.cpu_s is not None else self.timeout_s),
            "call_timeout_s": float(self.call_timeout_s),
            "memory_mb": self.memory_mb,
            "max_procs": self.max_procs,
            "max_output_bytes": self.max_output_bytes,
            "max_file_bytes": self.max_file_bytes,
            "max_value_bytes": self.max_value_bytes,
        }


@dataclass(frozen=True)
class Job:
    """One run: ``program`` executes first as ``__main__``; then each ``calls`` expression
    is evaluated in the program's globals with its own timeout. The calls whose indexes are
    in ``isolated`` are each evaluated in a fork of the run's process, so nothing they
    change (globals, modules, the function under test) is seen by any later call."""

    program: str
    calls: Sequence[str] = ()
    limits: Optional[Limits] = None
    isolated: Sequence[int] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.program, str):
            raise TypeError(f"Job.program must be str, got {type(self.program).__name__}")
        if isinstance(self.calls, str):
            raise TypeError("Job.calls must be a sequence of expression strings, not one string")
        calls = tuple(self.calls)
        for i, c in enumerate(calls):
            if not isinstance(c, str):
                raise TypeError(f"Job.calls[{i}] must be str, got {type(c).__name__}")
        object.__setattr__(self, "calls", calls)
        isolated = tuple(sorted(set(self.isolated)))
        for k in isolated:
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(calls):
                raise ValueError(f"Job.isolated must hold indexes of calls (0..{len(calls) - 1}), got {k!r}")
        object.__setattr__(self, "isolated", isolated)
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise TypeError(f"Job.limits must be a Limits or None, got {type(self.limits).__name__}")


@dataclass
class CallResult:
    """Outcome of one call: ``value`` is a plain-data encoding (see ``values``) when ``ok``."""

    status: CallStatus
    value: Optional[list] = None
    error: Optional[str] = None


@dataclass
class RunResult:
    """Outcome of one run. Only ``program_ok`` and ``calls`` are trusted verdicts; the
    exit code and the output are informative (a candidate controls them)."""

    status: RunStatus
    exit_code: Optional[int] = None
    stdout: str = ""
    stderr: str = ""
    cpu_s: float = 0.0
    wall_s: float = 0.0
    peak_mb: float = 0.0
    program_ok: bool = False
    program_error: Optional[str] = None
    calls: list = field(default_factory=list)
    infra_error: Optional[str] = None

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["calls"] = [dict(c.__dict__) for c in self.calls]
        return d
