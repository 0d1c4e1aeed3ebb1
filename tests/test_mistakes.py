"""The Mistake Book: update rule, retrieval order, steps, snapshots, read-only access, CLI."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
from typer.testing import CliRunner

from codea1.mistakes import MistakeBook, MistakeUpdate
from codea1.cli import app


def upd(failed=(), passed=()):
    return MistakeUpdate(Counter(failed), Counter(passed))


@pytest.fixture
def book(tmp_path):
    with MistakeBook(tmp_path / "mistakes.sqlite") as b:
        yield b


def freqs(book, pid):
    return {e.test: e.frequency for e in book.entries(pid)}


def test_two_copies_of_a_problem_in_one_step_each_count(book):
    """Item 7 of the fidelity table: a step holding a problem twice loses neither update."""
    book.apply_step(1, {"p": upd(failed={"old": 3})})
    first = upd(failed={"t": 2, "u": 1}, passed={"old": 1})
    second = upd(failed={"t": 1}, passed={"old": 1})
    summary = book.apply_step(2, [("p", first), ("q", upd(failed={"x": 1})), ("p", second)])
    assert freqs(book, "p") == {"old": 1, "t": 3, "u": 1}  # 3 - 1 - 1; 2 + 1; 1
    assert freqs(book, "q") == {"x": 1}
    assert (summary.problems, summary.added, summary.decreased) == (2, 3, 1)
    with pytest.raises(ValueError, match="positive ints"):  # checked before the counts are added
        book.apply_step(3, [("p", upd(failed={"t": 2})), ("p", MistakeUpdate(Counter({"t": -1})))])
    with pytest.raises(TypeError, match="pairs"):
        book.apply_step(3, ["p"])
    assert upd(failed={"a": 1}) + upd(failed={"a": 2}, passed={"b": 1}) == upd(failed={"a": 3}, passed={"b": 1})


def test_failed_tests_enter_and_gain_once_per_failing_candidate(book):
    book.apply_step(1, {"p": upd(failed={"t1": 3, "t2": 1})})
    assert freqs(book, "p") == {"t1": 3, "t2": 1}
    book.apply_step(2, {"p": upd(failed={"t2": 2})})
    assert freqs(book, "p") == {"t1": 3, "t2": 3}


def test_passed_tests_lose_and_leave_at_zero(book):
    book.apply_step(1, {"p": upd(failed={"t1": 2, "t2": 1})})
    summary = book.apply_step(2, {"p": upd(passed={"t1": 1, "t2": 1})})
    assert freqs(book, "p") == {"t1": 1}
    assert (summary.decreased, summary.removed) == (1, 1)
    book.apply_step(3, {"p": upd(passed={"t1": 5})})
    assert freqs(book, "p") == {}
    assert book.top("p") == []


def test_decrements_and_removals_come_before_increments(book):
    # the reference: a test passed down to 0 is removed first, then its failures of the
    # same step bring it back as a new entry (last among equals)
    book.apply_step(1, {"p": upd(failed={"t": 1, "a": 1})})
    summary = book.apply_step(2, {"p": upd(failed={"t": 1}, passed={"t": 2})})  # 1 - 2: removed; then + 1
    assert freqs(book, "p") == {"t": 1, "a": 1}
    assert book.top("p") == ["a", "t"]  # t re-entered after a
    assert (summary.added, summary.removed) == (1, 1)
    book.apply_step(3, {"p": upd(failed={"t": 1, "u": 1})})
    book.apply_step(4, {"p": upd(failed={"t": 2}, passed={"t": 1})})  # 2 - 1 + 2 = 3: kept, not removed
    assert freqs(book, "p") == {"t": 3, "a": 1, "u": 1}


def test_net_changes_keep_the_projects_old_rule(tmp_path):
    # mistakes.net_changes: the net count is applied, a test keeps its place
    with MistakeBook(tmp_path / "net.sqlite") as book:
        book.apply_step(1, {"p": upd(failed={"t": 1, "a": 1})}, net=True)
        book.apply_step(2, {"p": upd(failed={"t": 1}, passed={"t": 2})}, net=True)  # 1 + 1 - 2 = 0
        assert freqs(book, "p") == {"a": 1}
        book.apply_step(3, {"p": upd(failed={"t": 1, "u": 1})}, net=True)
        book.apply_step(4, {"p": upd(failed={"t": 2, "a": 1}, passed={"t": 1, "a": 1})}, net=True)
        assert freqs(book, "p") == {"a": 1, "t": 2, "u": 1}
        assert book.top("p") == ["t", "a", "u"]  # a kept its place


def test_equal_frequencies_keep_the_order_of_the_ranking_before_the_update(book):
    # the reference sorts a problem's list by frequency when it retrieves it and rebuilds it
    # in that order: once y outranked x, it stays ahead of x at equal frequency
    book.apply_step(1, {"p": upd(failed={"x": 1, "y": 1})})
    book.apply_step(2, {"p": upd(failed={"y": 2})})
    assert book.top("p") == ["y", "x"]
    book.apply_step(3, {"p": upd(passed={"y": 2})})  # y: 3 - 2 = 1, as x
    assert freqs(book, "p") == {"x": 1, "y": 1} and book.top("p") == ["y", "x"]
    book.apply_step(4, {"q": upd(failed={"z": 1})})  # another problem's update leaves p's order alone
    assert book.top("p") == ["y", "x"]


def test_passing_an_unknown_test_changes_nothing(book):
    summary = book.apply_step(1, {"p": upd(passed={"ghost": 1})})
    assert freqs(book, "p") == {} and summary.removed == 0


def test_top_is_highest_frequency_first_ties_by_age_and_per_problem(book):
    book.apply_step(1, {"p": upd(failed={"a": 1, "b": 2, "c": 1}), "q": upd(failed={"x": 1})})
    book.apply_step(2, {"p": upd(failed={"d": 1, "e": 3})})
    assert book.top("p") == ["e", "b", "a", "c", "d"]
    assert book.top("p", k=2) == ["e", "b"]
    assert book.top("q") == ["x"]
    assert book.top("nobody") == []
    # a removed test that comes back is the youngest of its frequency
    book.apply_step(3, {"p": upd(passed={"a": 1})})
    book.apply_step(4, {"p": upd(failed={"a": 1})})
    assert book.top("p") == ["e", "b", "c", "d", "a"]
    assert book.top_many(["q", "p", "q"], k=1) == {"q": ["x"], "p": ["e"]}


def test_steps_must_increase_and_a_refused_step_changes_nothing(book):
    book.apply_step(5, {"p": upd(failed={"t": 1})})
    with pytest.raises(ValueError, match="not after the last applied step 5"):
        book.apply_step(5, {"p": upd(failed={"t": 1})})
    with pytest.raises(ValueError, match="not after"):
        book.apply_step(3, {"p": upd(failed={"u": 1})})
    assert freqs(book, "p") == {"t": 1} and book.last_step == 5


def test_bad_updates_are_rejected_before_writing(book):
    with pytest.raises(ValueError, match="positive ints"):
        book.apply_step(1, {"p": upd(failed={"t": 0})})
    with pytest.raises(TypeError, match="MistakeUpdate"):
        book.apply_step(1, {"p": {"failed": {"t": 1}}})
    with pytest.raises(TypeError, match="step must be an int"):
        book.apply_step("1", {})
    assert book.last_step is None and book.stats().tests == 0


def test_an_error_inside_the_transaction_rolls_back_everything(book, monkeypatch):
    book.apply_step(1, {"p": upd(failed={"t": 1})})

    class Boom(Exception):
        pass

    calls = []

    def handler():
        calls.append(1)
        if len(calls) == 2000:  # well inside the loop over the 200 new tests
            raise Boom  # sqlite3 turns this into an interrupt of the running statement
        return 0

    book._conn.set_progress_handler(handler, 1)
    with pytest.raises(sqlite3.OperationalError, match="^interrupted$"):  # the statement interrupted, re-raised as is
        book.apply_step(2, {"p": upd(failed={f"n{i}": 1 for i in range(200)}, passed={"t": 1})})
    book._conn.set_progress_handler(None, 1)
    assert len(calls) > 2000
    assert freqs(book, "p") == {"t": 1} and book.last_step == 1
    assert not book._conn.in_transaction


def test_persists_across_reopen_and_records_history(tmp_path):
    path = tmp_path / "run"
    path.mkdir()
    with MistakeBook(path) as b:  # a run directory resolves to run/mistakes.sqlite
        b.apply_step(1, {"p": upd(failed={"t": 2})})
        b.apply_step(2, {"p": upd(passed={"t": 1}), "q": upd()})
    assert (path / "mistakes.sqlite").is_file()
    with MistakeBook(path / "mistakes.sqlite") as b:
        assert freqs(b, "p") == {"t": 1}
        assert b.last_step == 2
        history = b.step_history()
        assert [(h.step, h.problems, h.added, h.decreased) for h in history] == [(1, 1, 1, 0), (2, 1, 0, 1)]
        stats = b.stats()
        assert (stats.problems, stats.tests, stats.total_frequency, stats.max_frequency, stats.steps_applied) == (
            1, 1, 1, 1, 2,
        )


def test_reader_sees_a_consistent_book_while_a_step_is_being_written(tmp_path):
    path = tmp_path / "m.sqlite"
    writer = MistakeBook(path)
    writer.apply_step(1, {"p": upd(failed={"old": 1})})
    reader = MistakeBook(path, readonly=True)
    seen = []

    def peek():
        if not seen:
            seen.append((reader.top("p"), reader.last_step))  # in the middle of step 2
        return 0

    writer._conn.set_progress_handler(peek, 50)
    writer.apply_step(2, {"p": upd(failed={f"new{i}": 1 for i in range(50)})})
    writer._conn.set_progress_handler(None, 50)
    assert seen == [(["old"], 1)]
    assert len(reader.top("p", k=100)) == 51 and reader.last_step == 2
    with pytest.raises(PermissionError):
        reader.apply_step(3, {})
    reader.close()
    writer.close()


def test_snapshot_and_restore_round_trip(tmp_path, book):
    book.apply_step(1, {"p": upd(failed={"a": 2, "b": 1})})
    snap = book.snapshot(tmp_path / "ckpt" / "mistakes.sqlite")
    book.apply_step(2, {"p": upd(failed={"c": 1}, passed={"a": 2})})
    assert freqs(book, "p") == {"b": 1, "c": 1}
    book.restore(snap)
    assert freqs(book, "p") == {"a": 2, "b": 1} and book.last_step == 1
    assert book.top("p") == ["a", "b"]
    book.apply_step(2, {"p": upd(failed={"b": 1})})  # resuming replays step 2 cleanly
    assert freqs(book, "p") == {"a": 2, "b": 2}
    assert book._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with MistakeBook(snap, readonly=True) as s:  # the snapshot is untouched and self-contained
        assert freqs(s, "p") == {"a": 2, "b": 1}
    assert not (tmp_path / "ckpt" / "mistakes.sqlite-wal").exists()


def test_opening_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.sqlite"):
        MistakeBook(tmp_path / "missing.sqlite", readonly=True)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ValueError, match="junk.sqlite: not a Mistake Book"):
        MistakeBook(junk)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE x (y)").connection.commit()
    with pytest.raises(ValueError, match="not a Mistake Book"):
        MistakeBook(other, readonly=True)


def test_export_jsonl(tmp_path, book):
    book.apply_step(1, {"p": upd(failed={"a": 1, "b": 2}), "q": upd(failed={"c": 1})})
    n = book.export_jsonl(tmp_path / "out.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert n == 3
    assert [(r["problem_id"], r["rank"], r["test"], r["frequency"]) for r in rows] == [
        ("p", 1, "b", 2), ("p", 2, "a", 1), ("q", 1, "c", 1),
    ]
    assert rows[0]["first_step"] == rows[0]["last_step"] == 1


def test_cli_stats_list_show_export(tmp_path):
    run = tmp_path / "run"
    with MistakeBook(run / "mistakes.sqlite") as b:
        b.apply_step(7, {"MBPP/2": upd(failed={"assert f(1) == 2": 3, "assert f(0) == 0": 1}), "MBPP/3": upd(failed={"assert g() == 1": 1})})
    runner = CliRunner()
    r = runner.invoke(app, ["mistakes", "stats", "--book", str(run), "--json"])
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output)
    assert (stats["problems"], stats["tests"], stats["total_frequency"], stats["last_step"]) == (2, 3, 5, 7)
    r = runner.invoke(app, ["mistakes", "list", "--book", str(run), "--json"])
    assert [json.loads(line)["problem_id"] for line in r.output.splitlines()] == ["MBPP/2", "MBPP/3"]
    r = runner.invoke(app, ["mistakes", "show", "MBPP/2", "--book", str(run / "mistakes.sqlite")])
    assert r.exit_code == 0 and "assert f(1) == 2" in r.output
    r = runner.invoke(app, ["mistakes", "show", "MBPP/9", "--book", str(run)])
    assert r.exit_code == 2 and "'MBPP/9': no such problem in the Mistake Book" in r.stderr  # bad input
    r = runner.invoke(app, ["mistakes", "export", str(tmp_path / "e.jsonl"), "--book", str(run)])
    assert r.exit_code == 0 and "wrote 3 tests" in r.output
    r = runner.invoke(app, ["mistakes", "stats", "--book", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "Invalid value for --book" in r.output
    # one figure a line, so even a 40-column terminal never splits a label from its value
    r = runner.invoke(app, ["mistakes", "stats", "--book", str(run)], env={"COLUMNS": "40"})
    assert r.exit_code == 0, r.output
    lines = [line.split() for line in r.output.splitlines()]
    for label, value in (("problems", "2"), ("tests", "3"), ("total frequency", "5"), ("last step", "7")):
        assert label.split() + [value] in lines, r.output


def test_commit_step_applies_the_step_and_reports_the_books_figures(book):
    """`commit_step`, a training step's commit point: the step applied (as `apply_step`)
    and the book's `mistakes/*` figures read after it. Fault tried: the book's stats read
    before the step is applied (size 2 instead of 3): this test failed."""
    book.apply_step(1, {"p": upd(failed={"a": 2, "b": 1})})
    figures = book.commit_step(2, [("p", upd(failed={"c": 1}, passed={"a": 1, "b": 1})),
                                   ("q", upd(failed={"x": 3}))])
    assert figures == {"mistakes/size": 3, "mistakes/problems": 2, "mistakes/added": 2,
                       "mistakes/increased": 0, "mistakes/decreased": 1, "mistakes/removed": 1}
    assert freqs(book, "p") == {"a": 1, "c": 1} and freqs(book, "q") == {"x": 3}
    assert book.last_step == 2
    with pytest.raises(ValueError, match="not after the last applied step"):   # apply_step's own refusal
        book.commit_step(2, [("p", upd(failed={"c": 1}))])


@pytest.fixture
def read_only_run(small_disk):
    """A run folder on a tmpfs that `seal()` remounts read-only (root only: the test skips
    elsewhere). Root ignores permission bits, so a chmod'ed folder would not show the
    fault; a read-only mount refuses root too."""
    import subprocess

    return small_disk, lambda: subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)


def test_a_finished_runs_book_reads_in_a_folder_not_writable(read_only_run, tmp_path):
    """A closed book (every step in the main file) is read without the `-shm` SQLite would
    create; a book whose steps are still in its `-wal` is named with why it cannot be read.
    Fault tried: `mode=ro` alone failed with "not a Mistake Book (unable to open database file)"."""
    run, seal = read_only_run
    with MistakeBook(run / "mistakes.sqlite") as b:
        b.apply_step(3, {"MBPP/2": upd(failed={"assert f(1) == 2": 2})})
    live = MistakeBook(tmp_path / "live" / "mistakes.sqlite")  # open: its step is in the -wal
    live.apply_step(1, {"p": upd(failed={"t": 1})})
    (run / "live").mkdir()
    for name in ("mistakes.sqlite", "mistakes.sqlite-wal"):
        (run / "live" / name).write_bytes((tmp_path / "live" / name).read_bytes())
    live.close()
    seal()
    runner = CliRunner()
    r = runner.invoke(app, ["mistakes", "stats", str(run), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["last_step"] == 3
    r = runner.invoke(app, ["mistakes", "show", str(run), "MBPP/2"])
    assert r.exit_code == 0 and "assert f(1) == 2" in r.output, r.output
    r = runner.invoke(app, ["mistakes", "stats", str(run / "live")])
    assert r.exit_code == 2, r.output
    assert "its folder is not writable" in r.output and "not a Mistake Book" not in r.output


def test_list_prints_each_problem_id_whole_at_80_columns(tmp_path):
    """`mistakes show` takes the id `mistakes list` printed: the id stays whole, on one line
    where it fits beside the figures, else folded over lines; a long test folds rather than
    being cut. Fault tried: the default columns cut both with an ellipsis."""
    ids = ["KodCode/Leetcode_12345_I_with_a_long_suffix", "LiveCodeBench/abc301_d_another_long_id"]
    test = "assert solve([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], target=55) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] and done"
    with MistakeBook(tmp_path / "mistakes.sqlite") as b:
        b.apply_step(1, {pid: upd(failed={test: 2}) for pid in ids})
    r = CliRunner().invoke(app, ["mistakes", "list", str(tmp_path)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "…" not in r.output
    lines = r.output.splitlines()
    assert all(any(pid in line for line in lines) for pid in ids), r.output
    column = "".join(line.split("│")[4] for line in lines if line.count("│") == 5)
    assert "".join(column.split()).count("".join(test.split())) == 2  # (the test wraps, whole)
    long_id = "LiveCodeBench/abc301_d_an_id_longer_than_an_80_column_table_has_room_for"
    with MistakeBook(tmp_path / "long" / "mistakes.sqlite") as b:
        b.apply_step(1, {long_id: upd(failed={test: 1})})
    r = CliRunner().invoke(app, ["mistakes", "list", str(tmp_path / "long")], env={"COLUMNS": "80"})
    assert r.exit_code == 0 and "…" not in r.output, r.output
    first = "".join(line.split("│")[1].strip() for line in r.output.splitlines() if line.count("│") == 5)
    assert first == long_id  # folded over lines, whole
