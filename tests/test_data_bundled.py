"""The bundled problem set: shape, split, and every reference/naive pair run in the sandbox."""

from __future__ import annotations

import ast
from collections import Counter

import pytest

from codea1.data import bundled_problems
from codea1.data.bundled import BUNDLED_PATH
from codea1.data.check import golden_call
from codea1.sandbox import Executor, Job, Limits, values_equal

PROBLEMS = bundled_problems("all")


def split_golden(test: str) -> tuple[str, str]:
    """`assert CALL == EXPECTED` -> (CALL, EXPECTED) sources."""
    node = ast.parse(test).body[0]
    return ast.unparse(node.test.left), ast.unparse(node.test.comparators[0])


@pytest.fixture(scope="module")
def runs():
    """One sandbox run per reference and per naive variant, all in one batch.

    Reference runs evaluate each golden CALL and EXPECTED as separate calls (compared
    here with the trusted `values_equal`, exact types); naive runs execute each golden
    assert as written.
    """
    jobs = []
    for p in PROBLEMS:
        calls = [src for t in p.tests for src in split_golden(t)]
        jobs.append(Job(program=p.reference, calls=calls))
        jobs.append(Job(program=p.meta["naive"], calls=[golden_call(t, i) for i, t in enumerate(p.tests)]))
    with Executor(workers=2, limits=Limits(timeout_s=30.0, call_timeout_s=3.0)) as ex:
        results = ex.run_many(jobs)
    return {p.id: (results[2 * i], results[2 * i + 1]) for i, p in enumerate(PROBLEMS)}


def test_size_ids_and_split():
    assert len(PROBLEMS) >= 80
    ids = [p.id for p in PROBLEMS]
    assert len(set(ids)) == len(ids) and len({p.entry_point for p in PROBLEMS}) == len(PROBLEMS)
    train, heldout = bundled_problems("train"), bundled_problems("heldout")
    assert len(train) + len(heldout) == len(PROBLEMS)
    assert {p.id for p in train}.isdisjoint({p.id for p in heldout})
    by_level = Counter(p.meta["difficulty"] for p in PROBLEMS)
    held_level = Counter(p.meta["difficulty"] for p in heldout)
    assert set(by_level) == {"easy", "medium", "hard"} and min(by_level.values()) >= 20
    for level, n in by_level.items():  # stratified: each level's held-out share is 20% (+-1)
        assert abs(held_level[level] - n / 5) <= 1, (level, held_level[level], n)
    with pytest.raises(ValueError, match="unknown split"):
        bundled_problems("test")


def test_split_is_fixed_in_the_file():
    text = BUNDLED_PATH.read_text(encoding="utf-8")
    assert text.count('"split": "heldout"') == len(bundled_problems("heldout"))


def test_copies_are_independent():
    bundled_problems()[0].tests.append("assert False")
    assert "assert False" not in bundled_problems()[0].tests


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.id)
def test_problem_shape(problem):
    assert problem.source == "bundled" and problem.test_program is None
    assert problem.question.startswith(f"def {problem.entry_point}(")
    assert '"""' in problem.question and problem.tests[0] in problem.question  # one example
    assert 5 <= len(problem.tests) <= 10 and len(set(problem.tests)) == len(problem.tests)
    assert problem.meta["edge_case"] and problem.meta["naive"] != problem.reference
    for test in problem.tests:
        node = ast.parse(test).body[0]
        assert isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)
        assert len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)
        call = node.test.left
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        assert call.func.id == problem.entry_point
        for arg in [*call.args, *(k.value for k in call.keywords), node.test.comparators[0]]:
            ast.literal_eval(arg)  # plain literals only: usable as-is by the judge's parser


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.id)
def test_reference_passes_every_golden_test(problem, runs):
    run, _ = runs[problem.id]
    assert run.program_ok, run.program_error
    assert len(run.calls) == 2 * len(problem.tests)
    for i, test in enumerate(problem.tests):
        got, expected = run.calls[2 * i], run.calls[2 * i + 1]
        assert got.status == "ok", (test, got.error)
        assert expected.status == "ok"
        assert values_equal(got.value, expected.value), test


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.id)
def test_naive_variant_misses_an_edge_case(problem, runs):
    _, run = runs[problem.id]
    assert run.program_ok, run.program_error
    outcomes = [call.status == "ok" for call in run.calls]
    assert len(outcomes) == len(problem.tests)
    assert outcomes[0], "the naive variant should pass the question's example (a realistic mistake)"
    assert not all(outcomes), "some golden test must catch the naive variant"
