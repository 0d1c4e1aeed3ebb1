"""The Mistake Book: per problem, the tests that once broke a candidate, with frequencies.

It is the framework's memory (../shared/CODE_A1_SPEC.md, "Mistake Book"), so it lives in
SQLite in WAL mode: a training step's whole update is one transaction (a crash leaves the
book exactly before or after the step, never in between), readers such as
`codea1 mistakes` see a consistent book while a training run writes, and checkpoints take
a consistent copy with SQLite's backup API.

Update rule, per problem and step (the reference's): every Mistake Book test a candidate
passed loses 1 per passing candidate, and one at 0 or below is removed; then every
generated test a valid candidate failed gains 1 for every (candidate, suite) pair in which
it failed (the judge's `mistake_update` counts them), a test not in the book (a new one, or
one just removed) entering last with that count. Retrieval returns the most frequent tests
first; equal frequencies keep the book's order, which each updated problem's tests take
from their ranking before the update (the reference sorts its list in place when it
retrieves, and rebuilds it in that order). Two copies of a problem in one step each add
their counts. `apply_step(..., net=True)` (`mistakes.net_changes`, the project's old rule)
applies the net change instead (a test removed and failed again in the same step keeps its
place and the difference of the counts), ties going to the test that entered first.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from codea1.output_files import DiskFull, disk_full, naming_full_disk

__all__ = ["BookStats", "MistakeBook", "MistakeEntry", "MistakeUpdate", "StepSummary", "resolve_book_path"]

SCHEMA_VERSION = 1
BOOK_FILENAME = "mistakes.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tests (
    problem_id TEXT NOT NULL,
    test TEXT NOT NULL,
    freq INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    first_step INTEGER NOT NULL,
    last_step INTEGER NOT NULL,
    PRIMARY KEY (problem_id, test)
);
CREATE INDEX IF NOT EXISTS tests_rank ON tests (problem_id, freq DESC, seq);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY,
    applied_at REAL NOT NULL,
    problems INTEGER NOT NULL,
    added INTEGER NOT NULL,
    increased INTEGER NOT NULL,
    decreased INTEGER NOT NULL,
    removed INTEGER NOT NULL
);
"""


@dataclass
class MistakeUpdate:
    """One problem's change in one step: test -> count of failing / passing candidates.

    `failed` holds normalized generated tests that valid candidates failed (one count per
    failing candidate); `passed` holds Mistake Book tests (as the book returned them) that
    candidates passed (one count per passing candidate).
    """

    failed: Counter[str] = field(default_factory=Counter)
    passed: Counter[str] = field(default_factory=Counter)

    def __bool__(self) -> bool:
        return bool(self.failed) or bool(self.passed)

    def __add__(self, other: "MistakeUpdate") -> "MistakeUpdate":
        """Both updates' counts (two copies of a problem in one step: each one counts)."""
        if not isinstance(other, MistakeUpdate):
            return NotImplemented
        return MistakeUpdate(self.failed + other.failed, self.passed + other.passed)


@dataclass(frozen=True)
class MistakeEntry:
    problem_id: str
    test: str
    frequency: int
    first_step: int
    last_step: int


@dataclass(frozen=True)
class StepSummary:
    step: int
    problems: int
    added: int
    increased: int
    decreased: int
    removed: int


@dataclass(frozen=True)
class BookStats:
    problems: int
    tests: int
    total_frequency: int
    max_frequency: int
    last_step: int | None
    steps_applied: int


def resolve_book_path(path: str | os.PathLike[str]) -> Path:
    """A book file, or a run directory holding `mistakes.sqlite`."""
    p = Path(path)
    return p / BOOK_FILENAME if p.is_dir() else p


def _merged_updates(updates: Mapping[str, MistakeUpdate] | Iterable[tuple[str, MistakeUpdate]]) -> dict[str, MistakeUpdate]:
    """The step's updates checked, and merged per problem (a step may hold a problem twice)."""
    pairs = updates.items() if isinstance(updates, Mapping) else updates
    merged: dict[str, MistakeUpdate] = {}
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"updates must be (problem id, MistakeUpdate) pairs, got {pair!r}")
        pid, update = pair
        if not isinstance(pid, str) or not isinstance(update, MistakeUpdate):
            raise TypeError(f"updates must map problem ids (str) to MistakeUpdate, got {pid!r}: {update!r}")
        for name, counter in (("failed", update.failed), ("passed", update.passed)):
            for test, n in counter.items():
                if not isinstance(test, str) or isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                    raise ValueError(f"problem {pid!r}: {name} counts must be positive ints, got {test!r}: {n!r}")
        merged[pid] = merged[pid] + update if pid in merged else update
    return merged


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK)


def _read_only_uri(path: Path) -> str:
    """The URI a reader opens the book with. A WAL book is read through a `-shm` file SQLite
    creates beside it: in a folder this user may not write (a finished run on a read-only
    mount, another user's run) the book is opened `immutable`, which needs none, when every
    committed step is in the main file (no `-wal`, or an empty one: the trainer closed it)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    wal = path.with_name(path.name + "-wal")
    if _writable(path.parent) or (wal.is_file() and wal.stat().st_size > 0):
        return uri
    return uri + "&immutable=1"


class MistakeBook:
    """A Mistake Book stored in one SQLite file (created when missing, unless read-only)."""

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False, timeout_s: float = 60.0) -> None:
        self.path = resolve_book_path(path)
        self.readonly = readonly
        if readonly:
            if not self.path.is_file():
                raise FileNotFoundError(f"{self.path}: no Mistake Book here (expected a file written by `codea1 train`)")
            self._conn = sqlite3.connect(_read_only_uri(self.path), uri=True, timeout=timeout_s,
                                         isolation_level=None)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
        try:
            self._setup()
        except sqlite3.DatabaseError as err:
            self._conn.close()
            if disk_full(err):
                raise DiskFull(self.path) from err
            if readonly and not _writable(self.path.parent):
                raise ValueError(f"{self.path}: cannot be read: its folder is not writable, and the book has "
                                 f"steps in {self.path.name}-wal that SQLite reads only through a "
                                 f"{self.path.name}-shm it must create there ({err}); read a copy of the run "
                                 "directory in a writable place") from err
            raise ValueError(f"{self.path}: not a Mistake Book ({err})") from err

    def _setup(self) -> None:
        conn = self._conn
        if self.readonly:
            version = self._meta("schema")
            if version is None:
                raise sqlite3.DatabaseError("no `meta` schema record")
        else:
            # WAL: readers never block the writer; FULL: a committed step survives a crash.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    conn.execute(statement)
                version = self._meta("schema")
                if version is None:
                    conn.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
                    version = str(SCHEMA_VERSION)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # (a full disk can end the transaction itself)
                    conn.execute("ROLLBACK")
                raise
        if version != str(SCHEMA_VERSION):
            raise sqlite3.DatabaseError(f"schema version {version}, this code reads version {SCHEMA_VERSION}")

    def _meta(self, key: str) -> str | None:
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError as err:
            if "no such table" in str(err):
                return None
            raise
        return None if row is None else row[0]

    # -- life cycle -------------------------------------------------------------------
    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> MistakeBook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------
    @property
    def last_step(self) -> int | None:
        """The last step applied, so a resumed trainer can tell whether the book is ahead."""
        value = self._meta("last_step")
        return None if value is None else int(value)

    def top(self, problem_id: str, k: int = 8) -> list[str]:
        """Up to `k` tests of the problem, highest frequency first, ties by age (oldest first)."""
        rows = self._conn.execute(
            "SELECT test FROM tests WHERE problem_id = ? ORDER BY freq DESC, seq ASC LIMIT ?", (problem_id, k)
        ).fetchall()
        return [row[0] for row in rows]

    def top_many(self, problem_ids: Iterable[str], k: int = 8) -> dict[str, list[str]]:
        """`top` for several problems, read in one consistent snapshot."""
        ids = list(dict.fromkeys(problem_ids))
        with self._read_transaction():
            return {pid: self.top(pid, k) for pid in ids}

    def entries(self, problem_id: str | None = None) -> list[MistakeEntry]:
        """All tests (of one problem, or of all), ranked within each problem."""
        query = "SELECT problem_id, test, freq, first_step, last_step FROM tests"
        args: tuple[str, ...] = ()
        if problem_id is not None:
            query += " WHERE problem_id = ?"
            args = (problem_id,)
        query += " ORDER BY problem_id, freq DESC, seq ASC"
        return [MistakeEntry(*row) for row in self._conn.execute(query, args)]

    def iter_entries(self) -> Iterator[MistakeEntry]:
        cursor = self._conn.execute(
            "SELECT problem_id, test, freq, first_step, last_step FROM tests ORDER BY problem_id, freq DESC, seq ASC"
        )
        for row in cursor:
            yield MistakeEntry(*row)

    def problems(self) -> list[tuple[str, int, int]]:
        """`(problem_id, number of tests, total frequency)`, most total frequency first."""
        rows = self._conn.execute(
            "SELECT problem_id, COUNT(*), SUM(freq) FROM tests GROUP BY problem_id ORDER BY SUM(freq) DESC, problem_id"
        )
        return [(pid, int(n), int(total)) for pid, n, total in rows]

    def stats(self) -> BookStats:
        with self._read_transaction():
            problems, tests, total, biggest = self._conn.execute(
                "SELECT COUNT(DISTINCT problem_id), COUNT(*), COALESCE(SUM(freq), 0), COALESCE(MAX(freq), 0) FROM tests"
            ).fetchone()
            steps = self._conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
            return BookStats(problems, tests, total, biggest, self.last_step, steps)

    def step_history(self) -> list[StepSummary]:
        rows = self._conn.execute(
            "SELECT step, problems, added, increased, decreased, removed FROM steps ORDER BY step"
        )
        return [StepSummary(*row) for row in rows]

    def export_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write one JSON object a test (`problem_id`, `rank`, `test`, `frequency`, steps); returns the count."""
        count = 0
        rank = 0
        previous = None
        with self._read_transaction(), open(path, "w", encoding="utf-8") as out:
            for entry in self.iter_entries():
                rank = rank + 1 if entry.problem_id == previous else 1
                previous = entry.problem_id
                record = {
                    "problem_id": entry.problem_id,
                    "rank": rank,
                    "test": entry.test,
                    "frequency": entry.frequency,
                    "first_step": entry.first_step,
                    "last_step": entry.last_step,
                }
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
        return count

    def _read_transaction(self) -> _ReadTransaction:
        return _ReadTransaction(self._conn)

    # -- writing ----------------------------------------------------------------------
    def apply_step(
        self, step: int, updates: Mapping[str, MistakeUpdate] | Iterable[tuple[str, MistakeUpdate]],
        net: bool = False,
    ) -> StepSummary:
        """Apply one training step's updates in one transaction (the module docstring's
        rule; `net`: the net change, `mistakes.net_changes`).

        `updates` maps problem ids to updates, or lists `(problem id, update)` pairs in
        which a problem may occur more than once (a step that holds two copies of a
        problem): the counts of all its updates are added, so none is lost.

        Refuses a step not after the last one applied: applying a step twice would count
        its failures twice (a resumed run restores the book from its checkpoint instead).
        """
        if self.readonly:
            raise PermissionError(f"{self.path}: opened read-only")
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"step must be an int, got {step!r}")
        updates = _merged_updates(updates)
        with naming_full_disk(self.path):  # the transaction is rolled back: the book stays as it was
            return self._apply_step(step, updates, net)

    def commit_step(self, step: int, updates: Iterable[tuple[str, MistakeUpdate]], net: bool = False) -> dict[str, int]:
        """A training step's commit point: `apply_step`, then the book's `mistakes/*` metrics
        (its size after the step and what the step changed)."""
        summary = self.apply_step(step, updates, net=net)
        stats = self.stats()
        return {
            "mistakes/size": stats.tests, "mistakes/problems": stats.problems,
            "mistakes/added": summary.added, "mistakes/increased": summary.increased,
            "mistakes/decreased": summary.decreased, "mistakes/removed": summary.removed,
        }

    def _apply_step(self, step: int, updates: dict[str, MistakeUpdate], net: bool) -> StepSummary:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            last = self.last_step
            if last is not None and step <= last:
                raise ValueError(f"{self.path}: step {step} is not after the last applied step {last}")
            totals = [0, 0, 0, 0]  # added, increased, decreased, removed
            next_seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM tests").fetchone()[0]
            for pid, update in updates.items():
                if net:
                    counts = self._apply_net(pid, update, step, next_seq)
                elif update:
                    counts = self._apply_in_order(pid, update, step, next_seq)
                else:
                    continue
                next_seq += counts[0]
                totals = [x + y for x, y in zip(totals, counts[1:])]
            summary = StepSummary(step, sum(1 for u in updates.values() if u), *totals)
            self._record_step(summary)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return summary

    def _apply_net(self, pid: str, update: MistakeUpdate, step: int, next_seq: int) -> tuple[int, int, int, int, int]:
        """One problem's update as its net change per test (`mistakes.net_changes`); returns
        (seq numbers used, added, increased, decreased, removed)."""
        conn = self._conn
        used = added = increased = decreased = removed = 0
        for test in dict.fromkeys([*update.failed, *update.passed]):
            delta = update.failed.get(test, 0) - update.passed.get(test, 0)
            row = conn.execute("SELECT freq FROM tests WHERE problem_id = ? AND test = ?", (pid, test)).fetchone()
            if row is None:
                if delta > 0:
                    conn.execute(
                        "INSERT INTO tests (problem_id, test, freq, seq, first_step, last_step) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (pid, test, delta, next_seq + used, step, step),
                    )
                    used += 1
                    added += 1
                continue
            freq = row[0] + delta
            if freq <= 0:
                conn.execute("DELETE FROM tests WHERE problem_id = ? AND test = ?", (pid, test))
                removed += 1
            elif delta != 0:
                conn.execute("UPDATE tests SET freq = ?, last_step = ? WHERE problem_id = ? AND test = ?",
                             (freq, step, pid, test))
                if delta > 0:
                    increased += 1
                else:
                    decreased += 1
        return used, added, increased, decreased, removed

    def _record_step(self, summary: StepSummary) -> None:
        """The step's row in `steps`, and `last_step` (inside apply_step's transaction)."""
        self._conn.execute(
            "INSERT INTO steps (step, applied_at, problems, added, increased, decreased, removed) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (summary.step, time.time(), summary.problems, summary.added, summary.increased, summary.decreased,
             summary.removed),
        )
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES ('last_step', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(summary.step),),
        )

    def _apply_in_order(self, pid: str, update: MistakeUpdate, step: int, next_seq: int) -> tuple[int, int, int, int, int]:
        """One problem's update, decrements first (the reference's order); returns (seq
        numbers used, added, increased, decreased, removed). Its tests are renumbered in
        their ranking before the update, new ones after them."""
        conn = self._conn
        rows = conn.execute(
            "SELECT test, freq, first_step, last_step FROM tests WHERE problem_id = ? ORDER BY freq DESC, seq ASC",
            (pid,),
        ).fetchall()
        old = {test: (freq, first, last) for test, freq, first, last in rows}
        freq = {test: f for test, f, _, _ in rows}  # (a dict keeps the order)
        for test, n in update.passed.items():
            if test in freq:
                freq[test] -= n
                if freq[test] <= 0:
                    del freq[test]
        for test, n in update.failed.items():
            freq[test] = freq.get(test, 0) + n
        survived = {test for test, (f, _, _) in old.items() if f > update.passed.get(test, 0)}
        added = increased = decreased = 0
        conn.execute("DELETE FROM tests WHERE problem_id = ?", (pid,))
        for k, (test, f) in enumerate(freq.items()):
            if test in survived:
                before, first, last = old[test]
                last = last if f == before else step
                increased += f > before
                decreased += f < before
            else:  # new, or removed and failed again in this step: a new entry
                first, last = step, step
                added += 1
            conn.execute(
                "INSERT INTO tests (problem_id, test, freq, seq, first_step, last_step) VALUES (?, ?, ?, ?, ?, ?)",
                (pid, test, f, next_seq + k, first, last),
            )
        removed = len(old) - len(survived)
        return len(freq), added, increased, decreased, removed

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self, path: str | os.PathLike[str]) -> Path:
        """Write a consistent copy of the book to `path` (atomically replaced), for a checkpoint."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
        tmp.unlink(missing_ok=True)
        try:
            with naming_full_disk(target):
                dst = sqlite3.connect(tmp)
                try:
                    self._conn.backup(dst)
                    dst.execute("PRAGMA journal_mode=DELETE")  # a self-contained single file
                finally:
                    dst.close()
                os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return target

    def restore(self, snapshot: str | os.PathLike[str]) -> None:
        """Replace the whole book by a snapshot taken with `snapshot` (resuming a run)."""
        if self.readonly:
            raise PermissionError(f"{self.path}: opened read-only")
        source = Path(snapshot)
        if not source.is_file():
            raise FileNotFoundError(f"{source}: no Mistake Book snapshot here")
        with MistakeBook(source, readonly=True) as snap, naming_full_disk(self.path):  # validates the schema first
            snap._conn.backup(self._conn)
        self._conn.execute("PRAGMA journal_mode=WAL")


class _ReadTransaction:
    """A deferred read transaction, so several reads see one consistent book."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.owned = False

    def __enter__(self) -> None:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN")
            self.owned = True

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            self.conn.execute("COMMIT")
