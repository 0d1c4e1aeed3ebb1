"""Pause Python's cyclic garbage collector while the judge or the sandbox's result reader
allocate many short-lived, acyclic objects.

Reference counting frees such objects anyway; the cyclic collector, triggered by the
allocations alone, walks every live container again and again for nothing. Measured: a
judge step spent some 12% of its own CPU in it, and reading the results of 300 runs of
200 calls took 0.87 s of CPU with the collector on and 0.23 s with it paused.

The pause is shared: it may be entered from several threads and nested, and the collector
resumes (if it was on when the first pause began) when the last one ends. Code that turns
the collector on or off by itself meanwhile is overridden when the last pause ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Within this block (and any overlapping one, in any thread) the collector is off."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
