"""`eval tests`: test selection, pass@k / mut@k / Mul, data formats, resume; generation
replaced by canned completions (the model is not what is under test here)."""

from __future__ import annotations

import json

import pytest

import codea1.rollout as rollout
from codea1.data import Problem, save_problems
from codea1.eval.tests_eval import TestEvalConfig, evaluate_tests, score_tests, select_tests
from paper_rows import ScriptedPolicies, prompt_text

CLAMP = Problem(
    id="u/clamp", question="def clamp(x, lo, hi):\n    \"\"\"Clamp x into [lo, hi].\"\"\"", entry_point="clamp",
    reference="def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n",
    tests=["assert clamp(5, 0, 10) == 5", "assert clamp(-1, 0, 10) == 0", "assert clamp(11, 0, 10) == 10",
           "assert clamp(0, 0, 10) == 0", "assert clamp(10, 0, 10) == 10"],
    source="bundled-like",
)

COMPLETION = """Here are tests:
```python
assert clamp(5, 0, 10) == 5
x = -3
assert clamp(x, 0, 10) == 0
print("helper")
assert clamp(5, 0, 10) == 6
assert clamp(11, 0, 10) >= 10
assert abs(3) == 3
assert clamp(12, 0, 10) == 10
assert clamp(13, 0, 10) == 10
```"""


@pytest.fixture(scope="module")
def executor():
    from codea1.sandbox import Executor

    with Executor(workers=2) as ex:
        yield ex


def test_select_tests_keeps_the_first_k_asserts_on_the_function():
    got = select_tests(COMPLETION, "clamp", 5)
    assert got == [
        "assert clamp(5, 0, 10) == 5",
        "assert clamp(-3, 0, 10) == 0",  # the assignment is substituted
        "assert clamp(5, 0, 10) == 6",  # wrong, but a test
        "assert clamp(11, 0, 10) >= 10",  # not `==`: kept as written
        "assert clamp(12, 0, 10) == 10",  # `assert abs(3) == 3` tests nothing and is dropped
    ]
    assert select_tests("no code at all", "clamp", 5) == []


def test_score_counts_missing_and_wrong_tests_against_pass_at_k(executor):
    tests = ["assert clamp(5, 0, 10) == 5", "assert clamp(5, 0, 10) == 6", "assert clamp(-1, 0, 10) == 0"]
    score = score_tests(executor, CLAMP, tests, k=5)
    assert score.passes == [True, False, True, False, False]
    assert score.pass_at_k == pytest.approx(40.0)
    assert 0 < score.killed < score.mutants
    assert score.mut_at_k == pytest.approx(100.0 * score.killed / score.mutants)
    # the golden tests kill the `x > hi` mutants these tests miss: survivors are not all equivalent
    assert score.equivalent_looking < score.mutants - score.killed
    stronger = score_tests(executor, CLAMP, CLAMP.tests, k=5)
    assert stronger.pass_at_k == 100.0 and stronger.killed > score.killed


def canned(texts, calls):
    def generate(policies, role, prompts, n=1, sampling=None, **kw):
        assert role == "test" and n == 1
        calls.append(len(prompts))
        out = []
        for prompt in prompts:
            user = prompt_text(prompt, policies)
            assert "def clamp" in user or "def add" in user  # the function's code is shown
            text = texts["clamp" if "def clamp" in user else "add"]
            out.append([type("S", (), {"text": text, "truncated": False, "finished": True})()])
        return out

    return generate


def test_evaluate_tests_on_unleaked_json_and_resume(tmp_path, executor, monkeypatch):
    data = tmp_path / "ult.json"
    data.write_text(json.dumps([
        {"task_id": "ULT/1", "func_name": "clamp", "code": CLAMP.reference, "prompt": "Clamp x into [lo, hi].",
         "test_list": CLAMP.tests},
        {"task_id": "ULT/2", "func_name": "add", "code": "def add(a, b):\n    return a + b\n", "prompt": "Sum.",
         "test_list": ["assert add(1, 2) == 3"]},
    ]))
    texts = {"clamp": COMPLETION, "add": "```python\nassert add(2, 2) == 4\nassert add(0, 0) == 0\n```"}
    calls = []
    monkeypatch.setattr(rollout, "generate", canned(texts, calls))
    out = tmp_path / "out"
    summary = evaluate_tests("fake", data, out, TestEvalConfig(k=5), policies=ScriptedPolicies(), executor=executor)
    row = summary["sources"]["all"]
    assert row["functions"] == 2
    # clamp: 4 of 5 pass (one wrong); add: 2 of 5 (three missing)
    assert row["pass@5"] == pytest.approx((80.0 + 40.0) / 2)
    assert row["Mul"] == pytest.approx(row["pass@5"] * row["mut@5"] / 100)
    assert 0 < row["mut@5"] <= 100 and row["killed"] <= row["mutants"]
    assert summary["sources"]["unleakedtestbench"]["functions"] == 2
    assert calls == [2]
    calls.clear()
    again = evaluate_tests("fake", data, out, TestEvalConfig(k=5), policies=ScriptedPolicies(), executor=executor)
    assert calls == [] and again["sources"] == summary["sources"]
    with pytest.raises(ValueError, match="other settings"):
        evaluate_tests("fake", data, out, TestEvalConfig(k=3), policies=ScriptedPolicies(), executor=executor)


def test_functions_without_mutation_points_are_skipped(tmp_path, executor, monkeypatch):
    ident = Problem(id="p/id", question="def ident(x):\n    \"\"\"x\"\"\"", entry_point="ident",
                    reference="def ident(x):\n    return x\n", tests=["assert ident(1) == 1"])
    path = tmp_path / "p.jsonl"
    save_problems([ident], path)
    monkeypatch.setattr(rollout, "generate", canned({}, []))
    summary = evaluate_tests("fake", path, tmp_path / "out", policies=ScriptedPolicies(), executor=executor)
    assert summary["skipped"] == [{"id": "p/id", "reason": "the reference has no mutation point"}]
    assert summary["sources"] == {}


def test_config_validation():
    with pytest.raises(ValueError, match="--k"):
        TestEvalConfig(k=0)
