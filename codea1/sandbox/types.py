"""The executor's data types: what a caller asks for (Job, Limits) and what it gets back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence

RunStatus = Literal["ok", "error", "timeout", "memory", "output-limit", "infra"]
CallStatus = Literal["ok", "error", "timeout", "not-run"]

RUN_STATUSES = ("ok", "error", "timeout", "memory", "output-limit", "infra")
CALL_STATUSES = ("ok", "error", "timeout", "not-run")

# Limits of a run of a problem's golden tests (`codea1 data check`, the judge's golden
# verdicts, `eval code`, the `--timeout` / `--memory-mb` defaults of the commands): golden
# test programs of real data sets are big (MBPP+ up to ~800 KB, hundreds of inputs).
GOLDEN_TIMEOUT_S = 120.0  # MBPP/599's program alone takes ~55 s on two busy cores
GOLDEN_MEMORY_MB = 4096  # MBPP/255's program needs more than 2 GiB


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run (defaults sized for short judge programs).

    ``timeout_s`` is the wall-clock budget of the whole run (program plus calls, enforced
    from outside with SIGKILL); ``cpu_s`` the run's CPU-time budget (``None``: ``timeout_s``;
    an rlimit in whole seconds, spent across the run's processes; spending it is a timeout);
    ``call_timeout_s`` the wall-clock budget of each call; ``memory_mb`` a hard cap on the
    memory charged to the run; ``max_procs`` the number of processes/threads it may have;
    ``max_output_bytes`` the stdout+stderr it may write before being stopped (with
    ``stop_on_output`` False: the stdout+stderr kept; the rest is read and discarded, so
    how much a run prints never decides its verdict and never grows the worker's memory);
    ``max_file_bytes`` the size of any file it writes; ``max_value_bytes`` the encoded size
    of one call's value sent whole (a larger value is sent as a digest of its encoding,
    see ``values``).
    """

    timeout_s: float = 10.0
    cpu_s: Optional[float] = None
    call_timeout_s: float = 3.0
    memory_mb: int = 1024
    max_procs: int = 32
    max_output_bytes: int = 65536
    max_file_bytes: int = 16 * 1024 * 1024
    max_value_bytes: int = 16 * 1024 * 1024
    stop_on_output: bool = True

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
        if not isinstance(self.stop_on_output, bool):
            raise ValueError(f"Limits.stop_on_output must be a bool, got {self.stop_on_output!r}")
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
            "stop_on_output": self.stop_on_output,
        }


@dataclass(frozen=True)
class Job:
    """One run: ``program`` executes first as ``__main__``; then each ``calls`` expression
    is evaluated in the program's globals with its own timeout. The calls whose indexes are
    in ``isolated`` are each evaluated in a fork of the run's process, so nothing they
    change (globals, modules, the function under test) is seen by any later call.

    Flow (all optional; the judge builds one program per candidate with them):
    ``statements`` are indexes of calls that are statement blocks, executed (value None);
    ``requires`` holds ``(k, (d, ...))``: call ``k`` runs only when each call ``d`` (before
    it) ran, returned and was *fresh*, else it is skipped (``not-run``, error "skipped");
    ``distinct`` holds ``(d, key)``: call ``d``'s value is fresh only the first time the
    pair (key, its encoding) is met in the run; ``one_process``: the run is one process,
    as a plain ``python program.py`` is: a call that ends it (``os._exit``, a signal, a
    limit) or raises what is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``)
    ends the run, and every later call is ``not-run`` (without it such a call fails alone
    and the next calls run in a fresh process)."""

    program: str
    calls: Sequence[str] = ()
    limits: Optional[Limits] = None
    isolated: Sequence[int] = ()
    statements: Sequence[int] = ()
    requires: Sequence[tuple] = ()
    distinct: Sequence[tuple] = ()
    one_process: bool = False

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
        self._check_flow(len(calls))
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise TypeError(f"Job.limits must be a Limits or None, got {type(self.limits).__name__}")


    def _check_flow(self, n: int) -> None:
        """Normalise and check the flow fields (see the class docstring)."""
        def index(k, what: str, below: int = n) -> int:
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < below:
                raise ValueError(f"Job.{what} must hold indexes of calls (0..{below - 1}), got {k!r}")
            return k

        object.__setattr__(self, "statements", tuple(sorted({index(k, "statements") for k in self.statements})))
        requires = []
        for item in self.requires:
            k, deps = item
            index(k, "requires")
            requires.append((k, tuple(index(d, f"requires[{k}]", k) for d in deps)))
        object.__setattr__(self, "requires", tuple(requires))
        distinct = []
        for item in self.distinct:
            d, key = item
            if not isinstance(key, str):
                raise TypeError(f"Job.distinct keys must be str, got {type(key).__name__}")
            distinct.append((index(d, "distinct"), key))
        object.__setattr__(self, "distinct", tuple(distinct))
        if not isinstance(self.one_process, bool):
            raise TypeError(f"Job.one_process must be a bool, got {self.one_process!r}")
        if self.one_process and self.isolated:
            raise ValueError("Job.one_process and Job.isolated exclude each other (isolated calls run in forks)")

    def flow(self) -> dict:
        """The flow fields as the worker reads them (empty when none is set)."""
        out: dict = {}
        if self.statements:
            out["statements"] = list(self.statements)
        if self.requires:
            out["requires"] = [[k, list(deps)] for k, deps in self.requires]
        if self.distinct:
            out["distinct"] = [[d, key] for d, key in self.distinct]
        if self.one_process:
            out["one_process"] = True
        return out


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
