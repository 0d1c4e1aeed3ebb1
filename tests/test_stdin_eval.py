"""`codea1 eval code`, `eval tests` and `eval select` on stdin problems, with the models'
samples scripted (the sandbox runs and the figures are real)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from codea1.data import Problem, bundled_problems, save_problems
from codea1.data.stdin_io import io_test
from codea1.sandbox import Executor, RunResult

PROBLEMS = {p.id: p for p in bundled_problems("stdin:all")}
SPREAD = PROBLEMS["stdin/002-max-minus-min"]     # naive: the largest starts at 0
PAIR = PROBLEMS["stdin/019-pair-with-sum"]       # a checker: any right pair
UNREFERENCED = Problem(id="lcb/x", question="Print A + B.", entry_point="", reference="",
                       tests=[io_test("1 2\n", "3\n"), io_test("-4 4\n", "0\n")], source="lcb", kind="stdin",
                       meta={"no_reference": True})


def _code(body: str) -> str:
    return f"```python\n{body}```"


ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
SCRIPT = {
    ("code", SPREAD.id): [_code(SPREAD.reference), _code(SPREAD.meta["naive"])] * 2,
    ("code", PAIR.id): [_code(PAIR.meta["naive"]), _code(PAIR.reference)] * 2,
    ("code", UNREFERENCED.id): [_code(ADD), _code("print(0)\n")] * 2,
    # two valid tests (the all-negative one kills the naive program), then a wrong one
    ("test", SPREAD.id): ["```input\n3\n-5 -2 -9\n```\n```output\n7\n```\n```input\n2\n1 4\n```\n```output\n3\n```\n"
                          "```input\n1\n5\n```\n```output\n1\n```"] * 2,
    # one valid test (any right pair is accepted: 2 3 is, though the reference prints 1 3), one wrong
    ("test", PAIR.id): ["```input\n3 5\n1 4 4\n```\n```output\n1 2\n```\n```input\n2 6\n3 3\n```\n```output\n-1\n```",
                        "```input\n2 6\n3 3\n```\n```output\n1 2\n```"],
}


class _Sample:
    def __init__(self, text):
        self.text, self.truncated, self.finished = text, False, True


@pytest.fixture
def scripted(monkeypatch):
    import codea1.eval.loading as loading

    def sample_problems(engine, policies, role, prompts, problem_ids, n, sampling, seed):
        for prompt in prompts:   # the stdin prompts, not the function ones
            text = prompt[-1]["content"]
            assert ("standard input" in text) if role == "code" else ("```input" in text)
        return [[_Sample(t) for t in SCRIPT[(role, pid)][:n]] for pid in problem_ids]

    class Engine:
        name = "scripted"

        def close(self):
            pass

    import codea1.eval.code as code_eval
    import codea1.eval.tests_eval as tests_eval

    # every module that looks these names up: eval.code and eval.tests_eval bind them at import,
    # so patching `loading` alone works only when they are first imported after it (test order)
    for module in (loading, code_eval, tests_eval):
        monkeypatch.setattr(module, "sample_problems", sample_problems)
        monkeypatch.setattr(module, "load_eval_policies", lambda model, device="auto", dtype="auto", step=None:
                            (SimpleNamespace(device="cpu", dtype="torch.float32"), {"model": model}))
        monkeypatch.setattr(module, "eval_engine", lambda name, policies, threads=None: Engine())


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2) as ex:
        yield ex


def test_eval_code_pass_at_k_on_stdin_problems(tmp_path, scripted, executor):
    """Half of each problem's programs are right: pass@1 50, pass@4 100; the problem without
    a reference (LiveCodeBench) is evaluated too; the checker accepts the other pair."""
    from codea1.eval.code import CodeEvalConfig, evaluate_code

    data = tmp_path / "p.jsonl"
    save_problems([SPREAD, PAIR, UNREFERENCED], data)
    summary = evaluate_code("fake", data, tmp_path / "out", CodeEvalConfig(n=4), executor=executor)
    assert summary["skipped"] == [] and summary["sources"]["all"]["problems"] == 3
    assert summary["sources"]["all"]["pass@1"] == pytest.approx(50.0)
    assert summary["sources"]["all"]["pass@4"] == pytest.approx(100.0)
    rows = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    naive = [r for r in rows if r["problem_id"] == SPREAD.id and r["sample"] == 1][0]
    assert naive["status"] == "fail" and "golden test 2" in naive["detail"]


def test_eval_tests_validity_and_mutation_scores(tmp_path, scripted, executor):
    """k = 2: SPREAD's two first tests are valid (pass@2 100, its mutants scored: some
    killed); PAIR's are one valid (the checker accepts 1 2), one wrong (pass@2 50, not scored)."""
    from codea1.eval.tests_eval import TestEvalConfig, evaluate_tests

    data = tmp_path / "p.jsonl"
    save_problems([SPREAD, PAIR], data)
    summary = evaluate_tests("fake", data, tmp_path / "out", TestEvalConfig(k=2), executor=executor)
    rows = {r["problem_id"]: r for r in map(json.loads, (tmp_path / "out" / "samples.jsonl").read_text().splitlines())}
    assert rows[SPREAD.id]["passes"] == [True, True] and rows[PAIR.id]["passes"] == [True, False]
    assert rows[SPREAD.id]["mutants"] > 0 and 0 < rows[SPREAD.id]["killed"] <= rows[SPREAD.id]["mutants"]
    assert rows[PAIR.id]["mut_at_k"] is None
    assert summary["sources"]["bundled-stdin"]["pass@2"] == pytest.approx(75.0)
    assert summary["sources"]["bundled-stdin"]["mut@2_tasks"] == 1


def test_eval_select_picks_with_generated_io_tests(tmp_path, scripted, executor):
    """No reference is involved: a program passes a generated test when it prints its
    output. SPREAD: the right programs pass the two right tests, the naive one only the
    second (the third test is wrong for everyone): a right one is picked. PAIR: both print
    1 2 on the first input; on "3 3" (target 6) only the reference prints the pair 1 2."""
    from codea1.eval.select import ModelSpec, SelectConfig, evaluate_selection

    data = tmp_path / "p.jsonl"
    save_problems([SPREAD, PAIR], data)
    spec = ModelSpec("base")
    evaluate_selection(spec, spec, data, tmp_path / "out", SelectConfig(n_code=4, n_test=2, bootstrap=100),
                       executor=executor)
    rows = {r["problem_id"]: r for r in map(json.loads, (tmp_path / "out" / "problems.jsonl").read_text().splitlines())}
    spread = rows[SPREAD.id]
    assert spread["golden"] == [True, False, True, False] and spread["selected_correct"]
    assert spread["passed_tests"] == [2, 1, 2, 1]
    pair = rows[PAIR.id]
    assert pair["golden"] == [False, True, False, True] and pair["passed_tests"] == [1, 2, 1, 2]
    assert pair["selected"] == 1 and pair["selected_correct"]


class _Lost:
    """The executor, but the runs it names are lost to the infrastructure."""

    def __init__(self, executor, single: bool, batch: bool):
        self.executor, self.single, self.batch = executor, single, batch

    def run(self, job):
        return RunResult(status="infra", infra_error="node lost") if self.single else self.executor.run(job)

    def run_many(self, jobs):
        return [RunResult(status="infra", infra_error="node lost") for _ in jobs] if self.batch else \
            self.executor.run_many(jobs)


def test_eval_tests_never_score_a_sandbox_failure(executor):
    """A mutant whose run is lost is neither killed nor counted (as for functions,
    `MutationReport.total`); a lost reference run raises instead of making the tests
    invalid. Fault: every lost mutant counted as killed (mut@k up) and a lost reference
    run scored every test invalid (pass@k 0)."""
    from codea1.eval.mutation import FAMILIES, generate_mutants
    from codea1.eval.stdin_tests import score_stdin_tests

    tests = [io_test("3\n-5 -2 -9\n", "7\n"), io_test("2\n1 4\n", "3\n")]
    uncompiled = sum(not m.compiles for m in generate_mutants(SPREAD.reference, FAMILIES, style="text"))
    row = score_stdin_tests(_Lost(executor, single=False, batch=True), SPREAD, tests, 2)
    assert row["passes"] == [True, True]
    assert (row["mutants"], row["killed"]) == (uncompiled, uncompiled)
    with pytest.raises(RuntimeError, match="node lost"):
        score_stdin_tests(_Lost(executor, single=True, batch=False), SPREAD, tests, 2)
