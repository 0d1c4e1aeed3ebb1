"""One trainer per run directory: an advisory lock held while `train` runs.

Two trainers in one run directory would interleave their steps, checkpoints and Mistake
Book commits. `RunLock(run_dir)` takes `fcntl.flock` on `RUN_DIR/train.lock` and writes
its pid there; a second trainer is refused in one line naming the holder's pid. The
kernel drops a flock when its process ends, however it ends (kill -9 too), so the lock
can never go stale: a leftover `train.lock` file holds no lock.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

LOCK_FILE = "train.lock"


class RunLocked(RuntimeError):
    """Another process is training in the run directory."""


class RunLock:
    """`with RunLock(run_dir):` holds the run directory for this process (no-op where
    `enabled` is false: the ranks of a distributed run other than rank 0)."""

    def __init__(self, run_dir: str | os.PathLike[str], enabled: bool = True) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self.enabled = enabled
        self._fd: int | None = None
        self.created: Path | None = None
        self.created_file = False

    def acquire(self) -> None:
        if not self.enabled or self._fd is not None:
            return
        import fcntl

        self.created = None if self.path.parent.exists() else self.path.parent  # a folder made here
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.created_file = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        st = os.fstat(fd)
        self._before = (os.pread(fd, 64, 0), st.st_atime_ns, st.st_mtime_ns)  # for `discard`
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise RunLocked(f"{self.path.parent}: another codea1 train (pid {holder}) is training in this run "
                            "directory; wait for it to end, or stop it (Ctrl-C) first") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def discard(self) -> None:
        """Release, and remove what `acquire` created (a refused run leaves nothing behind)."""
        if self._fd is None:
            return
        if self.created_file:
            self.path.unlink(missing_ok=True)
        else:  # a run's old lock file: as it was (its content and times)
            content, atime, mtime = self._before
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, content, 0)
            os.utime(self._fd, ns=(atime, mtime))
        self.release()
        if self.created:
            with contextlib.suppress(OSError):
                self.created.rmdir()

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
