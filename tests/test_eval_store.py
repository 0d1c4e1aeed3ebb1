"""An evaluation directory's store (`codea1.eval.store`), without a model: what a resume
reads back after a crash, what it refuses, and what a failed command leaves behind.
`benchmarks/mutation_score.py --only store` runs these against the module's mutants."""

from __future__ import annotations

import json

import pytest

from codea1.data import Problem
from codea1.eval import store
from codea1.eval.store import (RUN_FILE, SAMPLES_FILE, SUMMARY_FILE, append_rows, check_identity, check_out_dir,
                               check_rows_current, data_digest, iter_jsonl, open_eval_dir, problem_digest,
                               read_samples, removed_if_failed, repair_tail, write_json)


def _problem(pid: str = "P/1", question: str = "add", tests=("assert f(1) == 2",)) -> Problem:
    return Problem(id=pid, question=question, entry_point="f", reference="def f(x):\n    return x + 1\n",
                   tests=list(tests))


def test_a_torn_last_line_is_skipped_and_any_other_bad_line_named(tmp_path):
    path = tmp_path / SAMPLES_FILE
    path.write_text('{"problem_id": "a", "sample": 0}\n\n{"problem_id": "b", "sample": 0}\n{"problem_id": "c", "sa')
    assert [(n, r["problem_id"]) for n, r in iter_jsonl(path)] == [(1, "a"), (3, "b")]
    path.write_text("".join(f'{{"problem_id": "p{i}", "sample": 0}}\n' for i in range(300)) + '{"problem_id": "t')
    assert len(list(iter_jsonl(path))) == 300               # the torn 301st line of a long file too
    path.write_text('{"problem_id": "a", "sample": 0}\n{"problem_id": \n{"problem_id": "b", "sample": 0}\n')
    with pytest.raises(ValueError, match=r"samples.jsonl:2: not a JSON object"):
        list(iter_jsonl(path))
    path.write_text('{"problem_id": "a", "sample": 0}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"samples.jsonl:2: expected a JSON object, got list"):
        list(iter_jsonl(path))


def test_samples_by_problem_and_index_a_later_row_replacing_an_earlier(tmp_path):
    path = tmp_path / SAMPLES_FILE
    assert read_samples(path) == {}
    append_rows(path, [{"problem_id": "a", "sample": 0, "passed": False}, {"problem_id": 7, "sample": "1"}])
    append_rows(path, [{"problem_id": "a", "sample": 0, "passed": True}])
    done = read_samples(path)
    assert sorted(done) == ["7", "a"] and done["a"][0]["passed"] is True and list(done["7"]) == [1]
    append_rows(path, [{"problem_id": "x"}])
    with pytest.raises(ValueError, match=r"samples.jsonl:4: a sample row needs 'problem_id' and 'sample'"):
        read_samples(path)


def test_rows_are_appended_whole_one_per_line(tmp_path):
    path = tmp_path / SAMPLES_FILE
    append_rows(path, [{"t": "é"}, {"t": 2}])
    append_rows(path, [])
    append_rows(path, [{"t": 3}])
    assert path.read_text(encoding="utf-8") == '{"t": "é"}\n{"t": 2}\n{"t": 3}\n'


def test_repair_cuts_only_a_torn_tail(tmp_path):
    path = tmp_path / SAMPLES_FILE
    repair_tail(path)                       # no file: nothing to do
    assert not path.exists()
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c"')
    repair_tail(path)
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    repair_tail(path)                       # whole: unchanged
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    path.write_bytes(b'{"only": "torn"')    # no whole line at all: emptied
    repair_tail(path)
    assert path.read_bytes() == b""


def test_reopening_checks_the_settings_and_reads_what_is_there(tmp_path):
    out = tmp_path / "evals" / "base" / "out"               # parents created as needed
    identity = {"model": "m", "n": 1, "scoring": 2}
    samples, done = open_eval_dir(out, identity)
    assert samples == out / SAMPLES_FILE and done == {}
    assert json.loads((out / RUN_FILE).read_text()) == identity
    samples.write_text('{"problem_id": "a", "sample": 0}\n{"problem_id": "b", "sa')
    _, done = open_eval_dir(out, identity)
    assert list(done) == ["a"] and samples.read_text() == '{"problem_id": "a", "sample": 0}\n'
    with pytest.raises(ValueError, match=r"other settings \(n: 1 on disk vs 4 now\); use another --out"):
        check_identity(out, {**identity, "n": 4})
    with pytest.raises(ValueError, match=r"scored by another version of codea1 \(scoring 2 on disk, 3 now"):
        check_identity(out, {**identity, "scoring": 3, "n": 4})
    with pytest.raises(ValueError, match=r"other settings \(extra: None on disk vs 'x' now\)"):
        check_identity(out, {**identity, "extra": "x"})
    assert json.loads((out / RUN_FILE).read_text()) == identity   # a refusal rewrites nothing


def test_settings_recorded_later_are_checked_only_where_the_directory_has_them(tmp_path):
    """The sandbox's limits decide verdicts and a run directory's checkpoint decides the
    samples, so a resume under others is refused; a directory written before they were
    recorded lacks them and still resumes."""
    old = tmp_path / "old"
    open_eval_dir(old, {"model": "m", "n": 1})
    check_identity(old, {"model": "m", "n": 1, "memory_mb": 256, "step": 2})
    new = tmp_path / "new"
    open_eval_dir(new, {"model": "m", "n": 1, "memory_mb": 4096, "step": 1})
    with pytest.raises(ValueError, match=r"other settings \(memory_mb: 4096 on disk vs 256 now\)"):
        check_identity(new, {"model": "m", "n": 1, "memory_mb": 256, "step": 1})
    with pytest.raises(ValueError, match=r"another checkpoint of the training run \(step 1 on disk, 2 now.*"
                                         r"use another --out"):
        check_identity(new, {"model": "m", "n": 1, "memory_mb": 4096, "step": 2})


@pytest.mark.parametrize("text, why", [("{oops", "not valid JSON"), ("[1, 2]", "expected a JSON object, found list"),
                                       (b"\xff\xfe{}", "not valid JSON")])
def test_a_damaged_settings_file_is_named(tmp_path, text, why):
    out = tmp_path / "out"
    out.mkdir()
    (out / RUN_FILE).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=rf"{RUN_FILE}: {why}"):
        open_eval_dir(out, {"model": "m"})
    assert (out / RUN_FILE).read_bytes() == (text if isinstance(text, bytes) else text.encode())


def test_a_changed_problem_is_refused_and_old_rows_are_taken_as_they_are(tmp_path):
    p = _problem()
    rows = {"P/1": {0: {"problem_digest": problem_digest(p)}, 1: {}}}   # row 1 from before rows had digests
    check_rows_current(tmp_path, [p, _problem("P/2")], rows)
    edited = _problem(tests=("assert f(1) == 3",))
    with pytest.raises(ValueError, match=r"problem 'P/1' is not the one its rows in samples.jsonl were scored on"):
        check_rows_current(tmp_path, [_problem("P/2"), edited], rows)   # past a problem with no rows yet
    with pytest.raises(ValueError, match=r"its rows in problems.jsonl"):
        check_rows_current(tmp_path, [edited], {"P/1": {0: {}, 1: {"problem_digest": "0" * 16}}}, "problems.jsonl")


def test_digests_tell_problems_apart_and_ignore_nothing_they_name():
    a, b = _problem(), _problem(question="add one")
    assert len(problem_digest(a)) == len(data_digest([a])) == 16
    assert problem_digest(a) == problem_digest(_problem()) != problem_digest(b)
    assert data_digest([a, b]) != data_digest([b, a]) != data_digest([a])
    assert problem_digest(a) != problem_digest(_problem("P/9"))


def test_a_json_file_is_written_whole(tmp_path):
    path = tmp_path / SUMMARY_FILE
    write_json(path, {"x": [1, 2]})
    assert path.read_text() == '{\n  "x": [\n    1,\n    2\n  ]\n}\n'
    store.write_summary(tmp_path, {"y": 1})
    assert json.loads(path.read_text()) == {"y": 1}


def test_an_out_that_would_overwrite_an_input_is_refused(tmp_path):
    data = tmp_path / "out" / SAMPLES_FILE
    data.parent.mkdir()
    data.write_text("{}\n")
    with pytest.raises(ValueError, match=r"would write over the --data file"):
        check_out_dir(tmp_path / "out", None, str(data))
    model = tmp_path / "run"
    model.mkdir()
    with pytest.raises(ValueError, match=r"lies in the model directory"):
        check_out_dir(model, str(model), "d.jsonl")
    with pytest.raises(ValueError, match=r"lies in the model directory .*put --out elsewhere"):
        check_out_dir(model / "eval", str(model), "d.jsonl")   # new or not: else its resume would be refused
    with pytest.raises(ValueError, match=rf"holds {SAMPLES_FILE} that no evaluation wrote"):
        check_out_dir(tmp_path / "out", None, "d.jsonl")
    (tmp_path / "out" / RUN_FILE).write_text("{}")
    check_out_dir(tmp_path / "out", None, "d.jsonl")     # an evaluation's own directory: resumable
    check_out_dir(tmp_path / "new", None, "d.jsonl")
    check_out_dir(tmp_path / "new", str(tmp_path / "no-such-model"), "d.jsonl")


def test_a_failed_command_leaves_no_directory_it_created(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with removed_if_failed(out):
            open_eval_dir(out, {"model": "m"})
            (out / SAMPLES_FILE).write_text("")
            raise RuntimeError("the model failed to load")
    assert not out.exists()
    kept = tmp_path / "kept"
    with pytest.raises(KeyboardInterrupt):
        with removed_if_failed(kept):
            samples, _ = open_eval_dir(kept, {"model": "m"})
            append_rows(samples, [{"problem_id": "a", "sample": 0}])
            raise KeyboardInterrupt
    assert (kept / SAMPLES_FILE).stat().st_size > 0         # a sample written: kept for --resume
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(RuntimeError):
        with removed_if_failed(existing):
            raise RuntimeError
    assert existing.is_dir()                                  # not created by the command: left
    other = tmp_path / "other"
    with pytest.raises(RuntimeError):
        with removed_if_failed(other):
            open_eval_dir(other, {"model": "m"})
            (other / "notes.txt").write_text("the user's")
            raise RuntimeError
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]   # the eval's files gone, the user's kept
    with removed_if_failed(tmp_path / "fine"):
        open_eval_dir(tmp_path / "fine", {"model": "m"})
    assert (tmp_path / "fine" / RUN_FILE).is_file()


def test_a_full_disk_names_the_samples_file_and_keeps_the_rows_before(small_disk):
    """`eval code|tests|select` append their rows here; on a full disk the error (exit 3)
    named no file ("a file: no space left on device"). Rows written before stay whole, and
    the torn row the full disk left is cut when the output is resumed."""
    from conftest import fill_disk

    from codea1.cli import EXIT_DISK_FULL, explain
    from codea1.output_files import DiskFull

    path = small_disk / "out" / SAMPLES_FILE
    path.parent.mkdir()
    first = [{"problem_id": "p/1", "sample": i, "passed": True} for i in range(3)]
    append_rows(path, first)
    filler = fill_disk(small_disk)
    with pytest.raises(DiskFull) as raised:
        append_rows(path, [{"problem_id": "p/2", "sample": i, "completion": "x" * 4000} for i in range(8)])
    code, message = explain(raised.value)
    assert code == EXIT_DISK_FULL and message.startswith(f"{path}: no space left on device"), message
    filler.unlink()
    repair_tail(path)
    assert [row for _, row in iter_jsonl(path)] == first
