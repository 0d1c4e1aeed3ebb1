"""`eval select`'s samples carry their problem's fingerprint (`problem_digest`), as `eval code`
and `eval tests` rows do. Before, only problems.jsonl's judged rows had one, so a selection
interrupted between sampling and judging resumed on a changed problem without a word: the
candidates and suites sampled for the old question were judged against the new one. Rows
written before the fingerprint still resume. (tests/test_eval_select.py's scripted models.)"""

from __future__ import annotations

import json

import pytest
import test_eval_select

from codea1.data import Problem, save_problems
from codea1.eval.select import CODES_FILE, PROBLEMS_FILE, TESTS_FILE, ModelSpec, SelectConfig, evaluate_selection
from codea1.eval.store import problem_digest

#: tests/test_eval_select.py's problems, scripted models and sandbox, used here too
ADD, EVEN, scripted, executor = (test_eval_select.ADD, test_eval_select.EVEN, test_eval_select.scripted,
                                 test_eval_select.executor)
CONFIG, SPEC = SelectConfig(n_code=4, n_test=2, bootstrap=100), ModelSpec("base-model")


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def sampled(tmp_path, scripted, executor):
    """A selection whose samples are on disk and whose judging never ran (killed in between)."""
    data, out = tmp_path / "p.jsonl", tmp_path / "out"
    save_problems([ADD, EVEN], data)
    evaluate_selection(SPEC, SPEC, data, out, CONFIG, executor=executor)
    (out / PROBLEMS_FILE).unlink()
    return data, out


@pytest.mark.parametrize("name", [CODES_FILE, TESTS_FILE])
def test_each_sample_records_its_problem(sampled, name):
    _data, out = sampled
    rows = _rows(out / name)
    assert rows and all(r["problem_digest"] == problem_digest({"P/add": ADD, "P/even": EVEN}[r["problem_id"]])
                        for r in rows)


def test_samples_of_a_changed_question_are_not_judged(sampled, scripted, executor):
    data, out = sampled
    save_problems([ADD, Problem(**{**EVEN.to_dict(), "question": EVEN.question.replace("even", "odd")})], data)
    before = {name: (out / name).read_bytes() for name in (CODES_FILE, TESTS_FILE)}
    with pytest.raises(ValueError, match=r"problem 'P/even' is not the one its rows in codes.jsonl were scored on"):
        evaluate_selection(SPEC, SPEC, data, out, CONFIG, executor=executor)
    assert not (out / PROBLEMS_FILE).exists()
    assert {name: (out / name).read_bytes() for name in before} == before


def test_samples_written_before_the_fingerprint_still_resume(sampled, scripted, executor):
    data, out = sampled
    for name in (CODES_FILE, TESTS_FILE):
        rows = [{k: v for k, v in r.items() if k != "problem_digest"} for r in _rows(out / name)]
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    asked = len(scripted["code"]) + len(scripted["test"])
    summary = evaluate_selection(SPEC, SPEC, data, out, CONFIG, executor=executor)
    assert len(scripted["code"]) + len(scripted["test"]) == asked        # judged, nothing sampled again
    assert summary["sources"]["all"]["problems"] == 2 and summary["pending"] == []
