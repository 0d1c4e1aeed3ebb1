"""Interpreter-wide settings held while a judge step runs or the sandbox's results are read.

Both settings are process-wide, so they are shared: blocks may be entered from several
threads and nested, the setting takes effect when the first block begins, and what was in
force then comes back when the last one ends (a change made by other code meanwhile is
overridden at that point).

`gc_paused`: the cyclic garbage collector is off. The judge and the result reader
allocate many short-lived, acyclic objects, which reference counting frees anyway; the
collector, triggered by the allocations alone, walks every live container again and
again for nothing. Measured: a judge step spent some 12% of its own CPU in it, and
reading the results of 300 runs of 200 calls took 0.87 s of CPU with the collector on and
0.23 s with it paused.

`quick_handoff`: threads switch at least every millisecond. The executor keeps each
worker fed from a driver thread, which reads a finished run off the worker's pipe and
queues the next job, and needs the interpreter lock to do so. The judge's own thread
meanwhile parses test suites, pure Python that never waits. A driver woken by its worker
then waits for the lock up to Python's switch interval (5 ms by default), and its worker,
done with the jobs queued on it, sits idle: most runs of a step take 1-5 ms. Measured on
2 cores with `benchmarks/handoff.py` (the step of `benchmarks/judge_step.py` repeated,
settings interleaved): until the last reference run returned, the workers were busy 71%
of the time at 5 ms and 86-87% at 0.5-1 ms, and a step took 1.095 s at 1 ms against
1.150 s at 5 ms.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

__all__ = ["HANDOFF_INTERVAL_S", "gc_paused", "quick_handoff"]

#: The switch interval within `quick_handoff` (seconds); 0.5-2 ms measured alike.
HANDOFF_INTERVAL_S = 0.001


class _Shared:
    """One process-wide setting held by any number of overlapping blocks."""

    def __init__(self, save: Callable[[], object], restore: Callable[[object], None]) -> None:
        self.save, self.restore = save, restore
        self.lock = threading.Lock()
        self.depth = 0
        self.saved: object = None

    @contextmanager
    def held(self, apply: Callable[[], None]) -> Iterator[None]:
        with self.lock:
            if self.depth == 0:
                self.saved = self.save()
            apply()
            self.depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.depth -= 1
                if self.depth == 0:
                    self.restore(self.saved)


_collector = _Shared(gc.isenabled, lambda on: gc.enable() if on else gc.disable())
_switching = _Shared(sys.getswitchinterval, sys.setswitchinterval)


def gc_paused() -> AbstractContextManager[None]:
    """Within this block (and any overlapping one, in any thread) the collector is off."""
    return _collector.held(gc.disable)


def quick_handoff(interval_s: float = HANDOFF_INTERVAL_S) -> AbstractContextManager[None]:
    """Within this block (and any overlapping one) the interpreter switches threads at
    least every `interval_s` seconds; a shorter interval already in force is kept."""
    if not interval_s > 0:
        raise ValueError(f"interval_s must be a positive number of seconds, not {interval_s!r}")

    def apply() -> None:
        if interval_s < sys.getswitchinterval():
            sys.setswitchinterval(interval_s)

    return _switching.held(apply)
