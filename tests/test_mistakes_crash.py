"""A process killed in the middle of `apply_step` leaves the book exactly before the step.

The child applies step 1, then starts step 2 with a small page cache (so uncommitted pages
spill into the WAL file on disk), signals from inside the transaction and is SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

from codea1.mistakes import MistakeBook, MistakeUpdate

CHILD = textwrap.dedent(
    """
    import os, sys, time
    from collections import Counter
    from codea1.mistakes import MistakeBook, MistakeUpdate

    path, marker = sys.argv[1], sys.argv[2]
    book = MistakeBook(path)
    book.apply_step(1, {"p": MistakeUpdate(Counter({"keep": 2, "drop": 1}))})
    book._conn.execute("PRAGMA cache_size=5")  # spill uncommitted pages into the WAL
    wal = path + "-wal"
    start = os.path.getsize(wal)
    calls = [0]

    def handler():
        calls[0] += 1
        if calls[0] == 4000:
            with open(marker + ".tmp", "w") as f:
                f.write(f"{start} {os.path.getsize(wal)}")
            os.replace(marker + ".tmp", marker)
            time.sleep(600)  # killed here, inside the transaction
        return 0

    book._conn.set_progress_handler(handler, 10)
    updates = {
        f"q{j}": MistakeUpdate(Counter({f"assert f({i}) == {i * j}" + "x" * 200: 1 for i in range(2000)}))
        for j in range(5)
    }
    updates["p"] = MistakeUpdate(Counter({"new": 1}), Counter({"drop": 1, "keep": 1}))
    book.apply_step(2, updates)
    print("step 2 finished: the kill came too late", flush=True)
    """
)


def test_killed_during_apply_step_leaves_the_book_before_the_step(tmp_path):
    path = tmp_path / "mistakes.sqlite"
    marker = tmp_path / "inside-step-2"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(marker)], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, f"child ended early: {child.stdout.read()}"
            assert time.monotonic() < deadline, "child never reached the middle of step 2"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    wal_before, wal_mid = map(int, marker.read_text().split())
    assert wal_mid > wal_before, "no uncommitted page reached the disk: the test would prove nothing"

    with MistakeBook(path) as book:  # recovery happens on open
        assert book.last_step == 1
        assert {e.test: e.frequency for e in book.entries()} == {"keep": 2, "drop": 1}
        assert book.top("p") == ["keep", "drop"]
        assert [h.step for h in book.step_history()] == [1]
        # and the book keeps working: the step can be applied again, completely
        book.apply_step(2, {"p": MistakeUpdate(Counter({"new": 1}), Counter({"drop": 1, "keep": 1}))})
        assert {e.test: e.frequency for e in book.entries()} == {"keep": 1, "new": 1}
        assert book._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_killed_after_apply_step_returns_keeps_the_whole_step(tmp_path):
    path = tmp_path / "mistakes.sqlite"
    script = textwrap.dedent(
        """
        import os, signal, sys
        from collections import Counter
        from codea1.mistakes import MistakeBook, MistakeUpdate
        book = MistakeBook(sys.argv[1])
        book.apply_step(1, {"p": MistakeUpdate(Counter({"a": 1}))})
        book.apply_step(2, {"p": MistakeUpdate(Counter({"b": 3}), Counter({"a": 1}))})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = subprocess.run([sys.executable, "-c", script, str(path)], timeout=60)
    assert result.returncode == -signal.SIGKILL
    with MistakeBook(path, readonly=True) as book:
        assert book.last_step == 2
        assert {e.test: e.frequency for e in book.entries()} == {"b": 3}
