"""Stopping a run: Ctrl-C, SIGTERM and the time limit, answered at once.

`StopFlag` is installed before the models load (`loop._train`), so a stop at any moment
of a run ends it with a message and, once a trainer exists, a checkpoint:

- the first SIGINT/SIGTERM, or SIGALRM when the time limit (`deadline`) is reached, sets
  `requested` and says on the display at once what happens next;
- inside a part of the run that has changed nothing yet (`abandonable()`: loading the
  models, a step's rollouts and judge, a validation) it also raises `StopRequested`
  there and then, so the part is abandoned within one torch operation instead of at the
  end of its phase (the loop rewinds the step's random and data state);
- elsewhere (the Mistake Book commit, the update, a checkpoint) the flag is read at the
  next safe point; a second Ctrl-C raises KeyboardInterrupt at once.

Several ranks (torchrun) never raise from a handler: a rank leaving a collective alone
would hang the others; they poll the flag together at the points of the step they share.

`TimeBudget` is the time limit's arithmetic: what is left, and whether a step, the part
of a step after its commit point, or a validation can still finish, estimated from the
longest such part measured so far (this call's and the run's earlier steps in
metrics.jsonl).
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping


class StopRequested(BaseException):
    """A stop was asked for in a part of the run that has not changed anything yet.

    A BaseException, like KeyboardInterrupt: raised from a signal handler in the middle of
    a rollout or the judge, it must not be taken for an error of the code it lands in."""


class StopFlag:
    """Set by SIGINT/SIGTERM or the deadline (SIGALRM); a second SIGINT raises KeyboardInterrupt."""

    def __init__(self, deadline: float | None = None, *, asynchronous: bool = True,
                 say: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 checkpoints: bool = True) -> None:
        self.requested = False
        self.checkpoints = checkpoints  # whether a stop now ends with a checkpoint (not before the models load)
        self.reason = ""
        self.deadline = deadline          # on `clock`; None: no time limit
        self.asynchronous = asynchronous  # raise in abandonable parts (one process only)
        self.say = say
        self.clock = clock
        self._abandonable = 0
        self._old: dict[int, Any] = {}
        self._timer = False

    # -- signals ------------------------------------------------------------------------
    def _handler(self, signum, _frame) -> None:
        if self.requested:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return  # (the deadline after a Ctrl-C, a second SIGTERM: one stop is enough)
        self.request("time limit" if signum == signal.SIGALRM else signal.Signals(signum).name)

    def request(self, reason: str) -> None:
        """Ask the run to stop; raises `StopRequested` where the run may be abandoned now."""
        if self.requested:
            return
        self.requested = True
        self.reason = reason
        now = self._abandonable > 0 and self.asynchronous
        what = ("stopping now: the work under way has changed nothing yet and is dropped"
                if now else "stopping at the next safe point (the step under way finishes: it has "
                "changed the Mistake Book)")
        self._say(f"{reason}: {what}{self._follows()}" +
                  ("; Ctrl-C again aborts at once (the last checkpoint on disk stays whole)"
                   if reason == "SIGINT" else ""))
        if now:
            raise StopRequested(reason)

    def _follows(self) -> str:
        return "; a checkpoint follows" if self.checkpoints else ""

    def _say(self, text: str) -> None:
        if self.say is not None:
            # (from a signal handler: a display busy writing in this thread refuses a nested write)
            with contextlib.suppress(Exception):
                self.say(text)

    def poll(self) -> bool:
        """True once a stop was asked for, or the deadline has passed (where no timer runs)."""
        if not self.requested and self.deadline is not None and self.clock() >= self.deadline:
            self.requested, self.reason = True, "time limit"
            self._say(f"time limit: stopping{self._follows()}")
        return self.requested

    @contextlib.contextmanager
    def abandonable(self) -> Iterator[None]:
        """A part of the run that a stop may cut short with `StopRequested` (it changes
        nothing that a checkpoint holds, or the caller rewinds what it changes)."""
        self._abandonable += 1
        try:
            if self.poll() and self.asynchronous:
                raise StopRequested(self.reason)
            yield
        finally:
            self._abandonable -= 1

    def __enter__(self) -> "StopFlag":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
                self._old[sig] = signal.signal(sig, self._handler)
            if self.deadline is not None:
                left = self.deadline - self.clock()
                if left > 0:
                    signal.setitimer(signal.ITIMER_REAL, left)
                    self._timer = True
                else:
                    self.poll()
        return self

    def __exit__(self, *exc) -> None:
        if self._timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._timer = False
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()


# --------------------------------------------------------------------------- the time limit


def _fmt(seconds: float) -> str:
    seconds = max(0, int(math.ceil(seconds)))
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


class TimeBudget:
    """How long the parts of a step take, and whether one still fits before the deadline.

    Estimates are the longest of each part measured so far (a step's time varies with
    what the models write); a new run's first step, with nothing measured, is assumed to
    need after its commit point (Mistake Book, update, checkpoint) as long as it took
    before it (rollouts and judge): on the cpu-demo the update took 0.5-0.7 of that."""

    def __init__(self, deadline: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.deadline = deadline
        self.clock = clock
        self.step_s = 0.0        # a whole step with its checkpoint
        self.after_commit_s = 0.0
        self.validation_s = 0.0
        self.checkpoint_s = 0.0

    def learn(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """The time figures of steps already logged (metrics.jsonl rows)."""
        for row in rows:
            self.record_step(row)

    def record_step(self, row: Mapping[str, Any]) -> None:
        def get(key: str) -> float:
            value = row.get(key)
            return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0

        self.validation_s = max(self.validation_s, get("time/validation_s"))
        if row.get("step", 0):
            self.step_s = max(self.step_s, get("time/step_s"))
            self.after_commit_s = max(self.after_commit_s, get("time/mistake_book_s") + get("time/update_s"))

    def record(self, what: str, seconds: float) -> None:
        setattr(self, what, max(getattr(self, what), seconds))

    def left(self) -> float:
        return math.inf if self.deadline is None else self.deadline - self.clock()

    def refuse(self, what: str, needed: float) -> str | None:
        """Why `what` must not start (it would end past the deadline), or None."""
        if self.deadline is None or needed <= 0 or needed + self.checkpoint_s <= self.left():
            return None
        return (f"time limit: {what} needs about {_fmt(needed + self.checkpoint_s)} and "
                f"{_fmt(math.floor(self.left()))} are left")  # (what is left rounded down, what is needed up)

    def refuse_step(self, step: int, validates: bool) -> str | None:
        need = self.step_s + (self.validation_s if validates else 0.0)
        return self.refuse(f"step {step}", need) if self.step_s else None

    def refuse_commit(self, step: int, before_commit_s: float) -> str | None:
        need = self.after_commit_s or before_commit_s
        return self.refuse(f"the rest of step {step} (Mistake Book and update)", need)
