"""`eval tests`: test selection, pass@k / mut@k / Mul, data formats, resume; generation
replaced by canned completions (the model is not what is under test here)."""

from __future__ import annotations

import json

import pytest

import codea1.engines.hf_engine as hf_engine

from codea1.data import Problem, save_problems
from codea1.eval.tests_eval import SCORING, TestEvalConfig, evaluate_tests, score_tests, select_tests
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


def test_an_assert_that_does_not_parse_takes_its_slot_and_fails(executor):
    """The model's second assert is broken: it is one of its first k tests and fails
    (under UnLeakedTestBench a test file that does not parse passes nothing), rather than
    dropping out and letting the sixth assert take its place. By hand: slots 1, 3, 4, 5
    pass, slot 2 fails: pass@5 = 80, and the baseline fails, so no mut@5."""
    completion = ("```python\nassert clamp(5, 0, 10) == 5\nassert clamp(2, 0, 10 == 2\n"
                  "assert clamp(-1, 0, 10) == 0\nassert clamp(11, 0, 10) == 10\nassert clamp(0, 0, 10) == 0\n"
                  "assert clamp(10, 0, 10) == 10\n```")
    tests = select_tests(completion, "clamp", 5)
    assert len(tests) == 5 and tests[1] == "assert clamp(2, 0, 10 == 2"
    score = score_tests(executor, CLAMP, tests, k=5)
    assert score.passes == [False if i == 1 else True for i in range(5)]
    assert score.pass_at_k == 80.0 and score.mut_at_k is None


def test_a_test_nested_too_deeply_to_parse_fails_without_ending_the_evaluation(executor):
    """A bare assert nested past what the parser (or the harness's own check) can take.
    Fault: `wrap_test` let the RecursionError or MemoryError out, and `eval tests` ended."""
    deep = ["assert clamp(" + "-" * n + "1, 0, 10) == 0" for n in (3000, 100000)]
    score = score_tests(executor, CLAMP, ["assert clamp(5, 0, 10) == 5", *deep], k=3)
    assert score.passes == [True, False, False]


def test_score_counts_missing_and_wrong_tests_against_pass_at_k(executor):
    tests = ["assert clamp(5, 0, 10) == 5", "assert clamp(5, 0, 10) == 6", "assert clamp(-1, 0, 10) == 0"]
    score = score_tests(executor, CLAMP, tests, k=5)
    assert score.passes == [True, False, True, False, False]
    assert score.pass_at_k == pytest.approx(40.0)
    assert 0 < score.killed < score.mutants
    # UnLeakedTestBench leaves a function whose tests fail its baseline out of mut@k;
    # codea1's all-function score counts the kills of the passing tests
    assert score.baseline_passes is False and score.mut_at_k is None
    assert score.mut_at_k_all == pytest.approx(100.0 * score.killed / score.mutants)
    # statements: def, if x < lo, return lo, if x > hi, return hi, return x; clamp(5, ...)
    # and clamp(-1, ...) reach all but `return hi` (the failing test runs too)
    assert (score.statements, score.covered_statements) == (6, 5)
    # the golden tests kill the `x > hi` mutants these tests miss: survivors are not all equivalent
    assert score.equivalent_looking < score.mutants - score.killed
    stronger = score_tests(executor, CLAMP, CLAMP.tests, k=5)
    assert stronger.pass_at_k == 100.0 and stronger.killed > score.killed
    assert stronger.mut_at_k == stronger.mut_at_k_all == pytest.approx(100.0 * stronger.killed / stronger.mutants)


ULT_STYLE = """```python
import math

LOW = 0

def test_clamp():
    result = clamp(-5, LOW, 10)
    assert result == 0
    assert clamp(15, LOW, 10) == 11
    assert math.isclose(clamp(3, 0, 10), 3)

def test_nothing():
    assert max(1, 2) == 2

@pytest.mark.parametrize("x, want", [(5, 5), pytest.param(12, 10)])
def test_cases(x, want):
    assert clamp(x, 0, 10) == want

def test_needs_a_fixture(capsys):
    assert clamp(1, 0, 10) == 1

assert clamp(0, 0, 10) == 0
```"""


def test_test_functions_are_read_as_unleakedtestbench_answers_them(executor):
    """UnLeakedTestBench's prompt asks for `def test_<name>():`: each assert written in a
    test function is a test, run after the function's set-up before it and the answer's
    imports and assignments above it; parametrize gives one test per case; a test that
    never names the function is not counted; one that needs a fixture fails. By hand on
    the reference: clamp(-5) is 0 (pass), clamp(15) is 10 not 11 (fail), isclose(3, 3)
    (pass), the cases 5 -> 5 and 12 -> 10 (pass, pass), the fixture test (fail), the bare
    assert (pass)."""
    tests = select_tests(ULT_STYLE, "clamp", 10)
    assert len(tests) == 7
    assert tests[0] == "import math\nLOW = 0\nresult = clamp(-5, LOW, 10)\nassert result == 0"
    assert tests[1].endswith("result = clamp(-5, LOW, 10)\nassert clamp(15, LOW, 10) == 11")
    assert tests[3].endswith("x, want = (5, 5)\nassert clamp(x, 0, 10) == want")
    assert tests[4].endswith("x, want = (12, 10)\nassert clamp(x, 0, 10) == want")
    assert tests[6] == "assert clamp(0, 0, 10) == 0"
    assert select_tests(ULT_STYLE, "clamp", 2) == tests[:2]
    score = score_tests(executor, CLAMP, tests, k=7)
    assert score.passes == [True, False, True, True, True, False, True]


def test_a_broken_test_function_keeps_its_slot_and_fails(executor):
    broken = "```python\ndef test_clamp():\n    assert clamp(1, 0, 10 == 1\n\nassert clamp(2, 0, 10) == 2\n```"
    tests = select_tests(broken, "clamp", 5)
    assert len(tests) == 2 and tests[1] == "assert clamp(2, 0, 10) == 2"
    assert score_tests(executor, CLAMP, tests, k=2).passes == [False, True]


def test_an_out_scored_by_another_version_is_not_resumed(tmp_path, executor, monkeypatch):
    """An OUT whose eval_config.json carries another `scoring` (or none: written before
    the number existed) is refused by name, and nothing in it is touched."""
    path, texts = three_tasks(tmp_path)
    monkeypatch.setattr(hf_engine, "generate", by_name(texts, []))
    out = tmp_path / "out"
    evaluate_tests("fake", path, out, TestEvalConfig(k=2), policies=ScriptedPolicies(), executor=executor)
    config = json.loads((out / "eval_config.json").read_text())
    assert config["scoring"] == SCORING
    del config["scoring"]
    (out / "eval_config.json").write_text(json.dumps(config))
    before = (out / "samples.jsonl").read_bytes()
    with pytest.raises(ValueError, match=r"scored by another version of codea1 \(scoring None on disk, 2 now"):
        evaluate_tests("fake", path, out, TestEvalConfig(k=2), policies=ScriptedPolicies(), executor=executor)
    assert (out / "samples.jsonl").read_bytes() == before


def test_a_function_changed_since_its_rows_were_scored_is_not_resumed(tmp_path, executor, monkeypatch):
    path, texts = three_tasks(tmp_path)
    monkeypatch.setattr(hf_engine, "generate", by_name(texts, []))
    out = tmp_path / "out"
    evaluate_tests("fake", path, out, TestEvalConfig(k=2), policies=ScriptedPolicies(), executor=executor)
    before = (out / "samples.jsonl").read_bytes()
    text = path.read_text().replace("return x + 1", "return 1 + x")   # inc's reference, mutants and all
    path.write_text(text)
    with pytest.raises(ValueError, match=r"problem 't/inc' is not the one its rows"):
        evaluate_tests("fake", path, out, TestEvalConfig(k=2), policies=ScriptedPolicies(), executor=executor)
    assert (out / "samples.jsonl").read_bytes() == before


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
    monkeypatch.setattr(hf_engine, "generate", canned(texts, calls))
    out = tmp_path / "out"
    summary = evaluate_tests("fake", data, out, TestEvalConfig(k=5), policies=ScriptedPolicies(), executor=executor)
    row = summary["sources"]["all"]
    assert row["functions"] == 2
    # clamp: 4 of 5 pass (one wrong); add: 2 of 5 (three missing)
    assert row["pass@5"] == pytest.approx((80.0 + 40.0) / 2)
    # neither function's 5 tests all pass: UnLeakedTestBench scores no mutation at all
    assert row["mut@5_tasks"] == 0 and row["mut@5"] is None and row["Mul"] is None
    assert row["Mul_all"] == pytest.approx(row["pass@5"] * row["mut@5_all"] / 100)
    assert 0 < row["mut@5_all"] <= 100 and row["killed"] <= row["mutants"]
    assert summary["sources"]["unleakedtestbench"]["functions"] == 2
    assert calls == [2]
    calls.clear()
    again = evaluate_tests("fake", data, out, TestEvalConfig(k=5), policies=ScriptedPolicies(), executor=executor)
    assert calls == [] and again["sources"] == summary["sources"]
    with pytest.raises(ValueError, match="other settings"):
        evaluate_tests("fake", data, out, TestEvalConfig(k=3), policies=ScriptedPolicies(), executor=executor)


def by_name(texts, calls):
    """Canned test completions chosen by the function the prompt shows."""
    def generate(policies, role, prompts, n=1, sampling=None, **kw):
        calls.append(len(prompts))
        out = []
        for prompt in prompts:
            user = prompt_text(prompt, policies)
            name = next(name for name in texts if f"def {name}(" in user)
            out.append([type("S", (), {"text": texts[name], "truncated": False, "finished": True})()])
        return out

    return generate


def three_tasks(tmp_path):
    problems = [
        Problem(id="t/inc", question="def inc(x):\n    \"\"\"x + 1\"\"\"", entry_point="inc",
                reference="def inc(x):\n    return x + 1\n"),
        Problem(id="t/f", question="def f(a, b, c):\n    \"\"\"a + b - c\"\"\"", entry_point="f",
                reference="def f(a, b, c):\n    return a + b - c\n"),
        Problem(id="t/g", question="def g(x):\n    \"\"\"x != -1\"\"\"", entry_point="g",
                reference="def g(x):\n    return x != -1\n"),
    ]
    path = tmp_path / "three.jsonl"
    save_problems(problems, path)
    texts = {"inc": "```python\nassert inc(0) == 1\nassert inc(2) == 3\n```",
             "f": "```python\nassert f(1, 2, 3) == 0\nassert f(2, 2, 4) == 0\n```",
             "g": "```python\nassert g(5) is True\nassert g(-1) is True\n```"}  # the second is wrong
    return path, texts


def test_aggregation_hand_counted_on_three_tasks_one_failing(tmp_path, executor, monkeypatch):
    """Mutants and kills counted on paper (tests/test_mutation_testing.py explains each):
    inc 13 mutants, 11 killed (x | 1 and x ^ 1 give 1 and 3 as x + 1 does); f 22, 20
    killed ((a + b) >> c and (a + b) ^ c are 0 on both tests); g 13 mutants, its first
    test kills 5 and its second test fails on the reference (g(-1) is False)."""
    path, texts = three_tasks(tmp_path)
    monkeypatch.setattr(hf_engine, "generate", by_name(texts, []))
    summary = evaluate_tests("fake", path, tmp_path / "out", TestEvalConfig(k=2), policies=ScriptedPolicies(),
                             executor=executor)
    row = summary["sources"]["all"]
    pass2 = (100.0 + 100.0 + 50.0) / 3
    ult = (100.0 * 11 / 13 + 100.0 * 20 / 22) / 2  # g is left out: its baseline fails
    mine = (100.0 * 11 / 13 + 100.0 * 20 / 22 + 100.0 * 5 / 13) / 3  # g by its one passing test
    assert row["functions"] == 3
    assert row["pass@2"] == pytest.approx(pass2)
    assert row["mut@2"] == pytest.approx(ult) and row["mut@2_tasks"] == 2
    assert row["Mul"] == pytest.approx(pass2 * ult / 100)
    assert row["mut@2_all"] == pytest.approx(mine)
    assert row["Mul_all"] == pytest.approx(pass2 * mine / 100)
    assert (row["mutants"], row["killed"]) == (13 + 22 + 13, 11 + 20 + 5)
    assert row["LineCov@2"] == 100.0  # def and return of each, all reached


def test_tree_style_and_dedupe_are_options(tmp_path, executor, monkeypatch):
    path, texts = three_tasks(tmp_path)
    monkeypatch.setattr(hf_engine, "generate", by_name(texts, []))
    cfg = TestEvalConfig(k=2, mutation_style="tree")
    row = evaluate_tests("fake", path, tmp_path / "out", cfg, policies=ScriptedPolicies(),
                         executor=executor)["sources"]["all"]
    # tree edits keep (a + b) % c, which is 0 on both of f's tests (3 % 3, 4 % 4): f loses
    # it besides (a + b) >> c and (a + b) ^ c; (a | b) - c and (a ^ b) - c are 0 on f(1, 2, 3)
    # only (-2 and -4 on f(2, 2, 4)). inc is unchanged.
    assert row["mut@2_tasks"] == 2 and row["mutants"] == 48
    assert row["mut@2"] == pytest.approx((100.0 * 11 / 13 + 100.0 * 19 / 22) / 2)
    with pytest.raises(ValueError, match="--mutation-style"):
        TestEvalConfig(mutation_style="ast")
    with pytest.raises(ValueError, match="--header"):
        TestEvalConfig(header="yes")


def test_functions_without_mutation_points_score_as_cosmic_ray_reports_them(tmp_path, executor, monkeypatch):
    ident = Problem(id="p/id", question="def ident(x):\n    \"\"\"x\"\"\"", entry_point="ident",
                    reference="def ident(x):\n    return x\n", tests=["assert ident(1) == 1"])
    path = tmp_path / "p.jsonl"
    save_problems([ident], path)
    monkeypatch.setattr(hf_engine, "generate", by_name({"ident": "assert ident(1) == 1\nassert ident(2) == 2"}, []))
    summary = evaluate_tests("fake", path, tmp_path / "out", TestEvalConfig(k=2), policies=ScriptedPolicies(),
                             executor=executor)
    row = summary["sources"]["all"]
    # Cosmic-Ray reports 0 survivors of 0 jobs: UnLeakedTestBench's score is 100; codea1's
    # all-function mean has nothing to average
    assert summary["skipped"] == []
    assert row["mut@2"] == 100.0 and row["mut@2_tasks"] == 1 and row["mutants"] == 0
    assert row["mut@2_all"] == 0.0


def test_ult_problems_run_after_its_import_header(tmp_path, executor, monkeypatch):
    data = tmp_path / "ult.json"
    data.write_text(json.dumps([
        {"task_id": "ULT/9", "func_name": "norm2", "code": "def norm2(v):\n    return float(np.sqrt(sum(x * x for x in v)))\n",
         "prompt": "Euclidean norm.", "test_list": ["assert norm2([3, 4]) == 5.0"]}]))
    monkeypatch.setattr(hf_engine, "generate", by_name({"norm2": "assert norm2([3, 4]) == 5.0"}, []))
    got = evaluate_tests("fake", data, tmp_path / "out", TestEvalConfig(k=1), policies=ScriptedPolicies(),
                         executor=executor)
    assert got["sources"]["all"]["pass@1"] == 100.0  # `np` comes from the header
    # LineCov counts the header's 14 import statements, as coverage.py does on ULT's mod.py
    assert got["sources"]["all"]["LineCov@1"] == 100.0
    row = json.loads((tmp_path / "out" / "samples.jsonl").read_text().splitlines()[0])
    assert (row["statements"], row["covered_statements"]) == (16, 16)
    monkeypatch.setattr(hf_engine, "generate", by_name({"norm2": "assert norm2([3, 4]) == 5.0"}, []))
    bare = evaluate_tests("fake", data, tmp_path / "bare", TestEvalConfig(k=1, header="none"),
                          policies=ScriptedPolicies(), executor=executor)
    assert bare["sources"]["all"]["pass@1"] == 0.0


def test_config_validation():
    with pytest.raises(ValueError, match="--k"):
        TestEvalConfig(k=0)


def test_line_coverage_counts_statements_as_coverage_py(executor):
    """Hand count, checked against coverage.py 7 (`coverage run --branch` under pytest,
    `covered_lines` / `num_statements` of mod.py: 7 / 6 with both tests): the import, def,
    two ifs (the second spanning two lines) and three returns are 7 statements; the
    docstring is none."""
    from codea1.eval.line_coverage import line_coverage

    module = ("import math\n\ndef clamp(x, lo, hi):\n    \"\"\"doc\"\"\"\n    if x < lo:\n        return lo\n"
              "    if (x >\n            hi):\n        return hi\n    return x\n")
    one = line_coverage(executor, module, ["assert clamp(5, 0, 10) == 5"])
    assert (one.statements, one.covered) == (7, 5)  # import, def, both ifs, return x
    two = line_coverage(executor, module, ["assert clamp(-1, 0, 10) == 1", "assert clamp(5, 0, 10) == 5"])
    assert (two.statements, two.covered) == (7, 6)  # the first test fails, and the second still runs
    assert line_coverage(executor, module, []).covered == 2  # the import and the def run at import
    assert line_coverage(executor, "raise ValueError\n" + module, []).covered == 0


def test_line_coverage_counts_what_runs_when_the_module_is_imported(executor):
    """What runs at import counts covered, as coverage.py measures from before pytest
    imports mod.py: the statements of a class body (its attribute and its three `def`
    lines) and of a module-level `if`, besides the top-level lines. coverage.py 7.18
    (`coverage run --branch` under pytest, Python 3.11) gives 14 statements, 12 covered:
    all but `return 0` (9) of the unused method and `LIMIT = 5` (14) of the else branch."""
    from codea1.eval.line_coverage import line_coverage

    module = ('import math\nclass Node:\n    """A node."""\n    kind = "n"\n    def __init__(self, v):\n'
              '        self.v = v\n    def value(self):\n        return self.v\n    def unused(self):\n'
              '        return 0\nif math.pi > 3:\n    LIMIT = 10\nelse:\n    LIMIT = 5\ndef f(x):\n'
              '    return min(Node(x).value(), LIMIT)\n')
    got = line_coverage(executor, module, ["assert f(3) == 3"])
    assert (got.statements, got.covered) == (14, 12)


def test_line_coverage_statements_are_the_lines_python_compiles_as_coverage_py_has_them(executor):
    """coverage.py's statements are the lines the compiled code has (its byte code's line
    table), not every `ast` statement: the decorator line is one besides the `def`, an
    `except` line and a `case` line are, `global`, a bare annotation and code after
    `return` compile to nothing and are none. coverage.py 7.18 (`coverage run --branch`
    under pytest, Python 3.11) on this module with both tests: 13 statements (1, 2, 3, 6, 7,
    8, 9, 11 to 16), 11 covered (all but the `except` line and its `return None`)."""
    from codea1.eval.line_coverage import line_coverage

    module = ('import functools\n@functools.lru_cache(maxsize=None)\ndef f(x):\n    global SEEN\n    y: int\n'
              '    try:\n        y = 10 // x\n    except ZeroDivisionError:\n        return None\n'
              '        print("never")\n    match y:\n        case 10:\n            return "ten"\n        case _:\n'
              '            y += 0\n    return y\n')
    got = line_coverage(executor, module, ["assert f(1) == 'ten'", "assert f(5) == 2"])
    assert (got.statements, got.covered) == (13, 11)
