"""`codea1 eval select`: the rule that picks a candidate, the sandbox runs behind it, and the
figures, on hand-made candidates and tests whose best pick is known."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from codea1.data import Problem
from codea1.eval.select import (
    ModelSpec,
    SelectConfig,
    bootstrap_interval,
    choose,
    evaluate_selection,
    generated_tests,
    run_generated_tests,
    summarize,
)
from codea1.sandbox import Executor

#: what a selection reads of scripted models' policies: the device and dtype it records
FAKE_POLICIES = SimpleNamespace(device="cpu", dtype="torch.float32")

torch.set_num_threads(1)

ADD = Problem(id="P/add", question='def add(a, b):\n    """Return a + b."""\n', entry_point="add",
              reference="def add(a, b):\n    return a + b\n",
              tests=["assert add(1, 2) == 3", "assert add(-4, 4) == 0"], source="toy")
EVEN = Problem(id="P/even", question='def is_even(n):\n    """Whether n is even."""\n', entry_point="is_even",
               reference="def is_even(n):\n    return n % 2 == 0\n",
               tests=["assert is_even(4) is True", "assert is_even(7) is False"], source="toy")


def _code(body: str) -> str:
    return f"Here it is:\n```python\n{body}```\n"


RIGHT_ADD, MINUS, TIMES = (_code("def add(a, b):\n    return a + b\n"), _code("def add(a, b):\n    return a - b\n"),
                           _code("def add(a, b):\n    return a * b\n"))
BROKEN = _code("def add(a, b)\n    return a + b\n")
SUITES = ["```python\nassert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 0) == 1\nassert add(1, 2) != 4\n```",
          "```python\nassert add(1, 1) == len([1, 2])\nassert add(1, 2) == 3\nassert abs(1) == 1\n```"]


# --------------------------------------------------------------------------- the rule


def test_the_most_passed_wins_even_against_a_larger_agreeing_group():
    # three codes agree on passing test 0 only; one code passes tests 0, 1 and 2
    passes = [[1, 0, 0], [1, 0, 0], [1, 0, 0], [1, 1, 1]]
    pick = choose(passes, ["a", "a", "a", "b"])
    assert (pick.index, pick.rule, pick.tied) == (3, "most-passed", 1)


def test_ties_go_to_the_largest_consensus_set():
    # candidates 0..3 each pass two tests; 1 and 3 pass the same two (a set of 2), 0 and 2 differ
    passes = [[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0]]
    pick = choose(passes, ["w", "x", "y", "z"])
    assert (pick.index, pick.rule, pick.tied) == (1, "dual-agreement", 4)


def test_then_the_most_common_behaviour_then_the_first():
    passes = [[0, 0], [0, 0], [0, 0], [0, 0]]   # nobody passes: equal counts and equal sets
    pick = choose(passes, [("1",), ("2",), ("2",), ("3",)])
    assert (pick.index, pick.rule) == (1, "behaviour")
    assert choose(passes, [("1",), ("2",), ("3",), ("4",)]).rule == "first"
    assert choose([[], []], [(), ()]) .index == 0       # no generated test at all
    with pytest.raises(ValueError, match="no candidates"):
        choose([], [])


# --------------------------------------------------------------------------- sandbox runs


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2) as ex:
        yield ex


def test_generated_tests_are_the_distinct_well_formed_asserts():
    tests = generated_tests(ADD, SUITES + [SUITES[0]])
    assert [t.text for t in tests] == ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 0) == 1",
                                       "assert add(1, 1) == len([1, 2])"]
    # dropped: abs(1) tests nothing; `!= 4` is no `==` test (the judge would read it as `== 4`)
    assert tests[0].expected_value is not None and tests[3].expected_value is None   # evaluated in the run


def test_each_candidate_against_every_generated_test(executor):
    from codea1.sandbox import Limits

    tests = generated_tests(ADD, SUITES)
    codes = [MINUS, RIGHT_ADD, TIMES, BROKEN, "no code at all", RIGHT_ADD]
    outcomes = run_generated_tests(executor, ADD, codes, tests, Limits(timeout_s=10, call_timeout_s=3))
    assert [o.passes for o in outcomes] == [
        [False, False, False, False],   # a - b: -1, 0, 0, 0
        [True, True, False, True],      # a + b: the wrong expectation add(0, 0) == 1 fails it
        [False, True, False, False],    # a * b: 2, 4, 0, 1
        [False, False, False, False],   # does not compile
        [False, False, False, False],   # no function
        [True, True, False, True],
    ]
    assert outcomes[3].behaviour == outcomes[4].behaviour == ("no-function",)
    assert "SyntaxError" in outcomes[3].error
    assert outcomes[1].behaviour == outcomes[5].behaviour == ("3", "4", "0", "2")
    pick = choose([o.passes for o in outcomes], [o.behaviour for o in outcomes])
    assert (pick.index, pick.rule, pick.tied) == (1, "first", 2)   # two copies of the best: the first


# --------------------------------------------------------------------------- figures


def test_bootstrap_interval_brackets_the_mean():
    assert bootstrap_interval([50.0] * 7, 500, 0) == (50.0, 50.0)
    low, high = bootstrap_interval([0.0, 100.0] * 20, 2000, 0)
    assert low < 50.0 < high and high - low < 40
    assert bootstrap_interval([0.0, 100.0] * 20, 2000, 0) == (low, high)   # seeded


def test_summary_per_source_and_all():
    rows = [{"source": "a", "golden": [True, False, False, False], "selected_correct": True, "rule": "most-passed"},
            {"source": "a", "golden": [False, False], "selected_correct": False, "rule": "first"},
            {"source": "b", "golden": [True, True], "selected_correct": True, "rule": "behaviour"}]
    s = summarize(rows, 200, 0)["sources"]
    assert list(s) == ["a", "b", "all"]
    assert s["a"]["selected"] == 50.0 and s["a"]["random"] == 12.5 and s["a"]["oracle"] == 50.0
    assert s["a"]["gain"] == 37.5
    assert s["all"]["problems"] == 3 and s["all"]["rules"] == {"most-passed": 1, "first": 1, "behaviour": 1}
    assert s["all"]["gain"] == pytest.approx((75 + 0 + 0) / 3)


# --------------------------------------------------------------------------- the evaluation


class _Sample:
    def __init__(self, text):
        self.text, self.truncated = text, False


SCRIPT = {("code", "P/add"): [MINUS, TIMES, RIGHT_ADD, BROKEN],
          ("test", "P/add"): SUITES,
          ("code", "P/even"): [_code("def is_even(n):\n    return n == 0\n")] * 2
          + [_code("def is_even(n):\n    return n % 2 == 1\n")] * 2,
          ("test", "P/even"): ["```python\nassert is_even(0) == True\n```", "nothing useful"]}


@pytest.fixture
def scripted(monkeypatch):
    """The models' samples replaced by SCRIPT; the prompts each role saw recorded."""
    import codea1.eval.loading as loading

    seen = {"code": [], "test": [], "loads": 0}

    def sample_problems(engine, policies, role, prompts, problem_ids, n, sampling, seed):
        seen[role].extend(prompts)
        return [[_Sample(t) for t in SCRIPT[(role, pid)][:n]] for pid in problem_ids]

    class Engine:
        name = "scripted"

        def close(self):
            pass

    def load_eval_policies(model, device="auto", dtype="auto", step=None):
        seen["loads"] += 1
        return FAKE_POLICIES, {"model": model}

    monkeypatch.setattr(loading, "sample_problems", sample_problems)
    monkeypatch.setattr(loading, "load_eval_policies", load_eval_policies)
    monkeypatch.setattr(loading, "eval_engine", lambda name, policies, threads=None: Engine())
    return seen


def test_a_test_prompt_the_model_cannot_read_skips_its_problem(tmp_path, scripted, executor, monkeypatch):
    """The test model's prompt of one problem is over its context: that problem is skipped
    and listed (its codes kept on disk), the other is judged. Before: the selection ended."""
    import codea1.eval.loading as loading
    from codea1.data import save_problems
    from codea1.rollout import PromptTooLong

    inner = loading.sample_problems

    def sample_problems(engine, policies, role, prompts, problem_ids, n, sampling, seed):
        if role == "test" and "P/even" in problem_ids:
            raise PromptTooLong("prompt: too long", problem_ids.index("P/even"), 700, 600)
        return inner(engine, policies, role, prompts, problem_ids, n, sampling, seed)

    monkeypatch.setattr(loading, "sample_problems", sample_problems)
    data = tmp_path / "p.jsonl"
    save_problems([ADD, EVEN], data)
    summary = evaluate_selection(ModelSpec("m"), ModelSpec("m"), data, tmp_path / "out",
                                 SelectConfig(n_code=4, n_test=2, bootstrap=200), executor=executor)
    assert summary["skipped"] == [{"id": "P/even", "reason": "its test prompt is 700 tokens, over the 600 the "
                                   "model may read (its context less --max-new-tokens)"}]
    assert summary["pending"] == [] and summary["sources"]["all"]["problems"] == 1


def test_selection_end_to_end(tmp_path, scripted, executor):
    from codea1.data import save_problems

    data = tmp_path / "p.jsonl"
    save_problems([ADD, EVEN], data)
    out = tmp_path / "out"
    config = SelectConfig(n_code=4, n_test=2, bootstrap=500)
    spec = ModelSpec("base-model")
    summary = evaluate_selection(spec, spec, data, out, config, executor=executor)
    assert scripted["loads"] == 1                   # one model serves both roles
    assert all("Code under test" not in m["content"] for p in scripted["test"] for m in p)   # black-box
    rows = {r["problem_id"]: r for r in map(json.loads, (out / "problems.jsonl").read_text().splitlines())}
    assert rows["P/add"]["selected"] == 2 and rows["P/add"]["rule"] == "most-passed"
    assert rows["P/add"]["golden"] == [False, False, True, False] and rows["P/add"]["selected_correct"]
    assert rows["P/even"]["golden"] == [False] * 4 and not rows["P/even"]["selected_correct"]
    toy = summary["sources"]["toy"]
    assert (toy["selected"], toy["random"], toy["oracle"], toy["gain"]) == (50.0, 12.5, 50.0, 37.5)
    assert toy["gain_low"] <= toy["gain"] <= toy["gain_high"]
    assert json.loads((out / "summary.json").read_text())["sources"]["all"] == summary["sources"]["all"]
    sampler = json.loads((out / "eval_config.json").read_text())["sampled_with"]
    assert sampler["code"] == sampler["test"] == {"engine": "scripted", "device": "cpu", "dtype": "float32"}
    # a second run resumes: nothing generated or judged again, the same figures
    before = len(scripted["code"])
    again = evaluate_selection(spec, spec, data, out, config, executor=executor)
    assert len(scripted["code"]) == before and again["sources"] == summary["sources"]


def test_a_problem_changed_since_it_was_judged_is_not_resumed(tmp_path, scripted, executor):
    from codea1.data import save_problems

    data, out = tmp_path / "p.jsonl", tmp_path / "out"
    save_problems([ADD, EVEN], data)
    config, spec = SelectConfig(n_code=4, n_test=2, bootstrap=100), ModelSpec("base-model")
    evaluate_selection(spec, spec, data, out, config, executor=executor)
    before = (out / "problems.jsonl").read_bytes()
    save_problems([ADD, Problem(**{**EVEN.to_dict(), "tests": EVEN.tests[:1]})], data)
    with pytest.raises(ValueError, match=r"problem 'P/even' is not the one its rows in problems.jsonl were scored on"):
        evaluate_selection(spec, spec, data, out, config, executor=executor)
    assert (out / "problems.jsonl").read_bytes() == before


def test_two_models_and_a_missing_step(tmp_path, scripted, executor):
    from typer.testing import CliRunner

    from codea1.cli import app
    from codea1.data import save_problems

    data = tmp_path / "p.jsonl"
    save_problems([ADD], data)
    evaluate_selection(ModelSpec("code-model"), ModelSpec("test-model"), data, tmp_path / "two",
                       SelectConfig(bootstrap=100), executor=executor)
    assert scripted["loads"] == 2
    run = tmp_path / "run"
    (run / "checkpoints" / "step-3").mkdir(parents=True)
    (run / "checkpoints" / "step-3" / "state.json").write_text("{}")
    out = tmp_path / "sel"
    result = CliRunner().invoke(app, ["eval", "select", "--code-model", str(run), "--code-step", "5",
                                      "--test-model", "base", "--data", str(data), "--out", str(out)])
    assert result.exit_code == 2
    assert [x for x in result.output.splitlines() if x.strip()] == [
        f"error: {run}: no checkpoint at step 5 (it has steps 3)"]
    assert not out.exists()


# --------------------------------------------------------------------------- paired candidates


def test_codes_from_judges_exactly_the_same_codes(tmp_path, scripted, executor):
    """A second test model judges the first evaluation's candidates: the code model is never
    asked again, the codes on disk and their fingerprints are the same, and the golden verdicts
    of the candidates agree, so `eval compare` pairs the two picks. Fault tried: copying the
    codes without their sample index (every row as sample 0) made the second evaluation sample
    new codes and failed here."""
    from codea1.data import save_problems
    from codea1.eval.compare import compare

    data = tmp_path / "p.jsonl"
    save_problems([ADD, EVEN], data)
    config = SelectConfig(n_code=4, n_test=2, bootstrap=100)
    first, second = tmp_path / "first", tmp_path / "second"
    evaluate_selection(ModelSpec("base"), ModelSpec("tests-a"), data, first, config, executor=executor)
    asked = len(scripted["code"])
    SCRIPT[("test", "P/add")], saved = ["```python\nassert add(2, 3) == 5\n```"] * 2, SCRIPT[("test", "P/add")]
    try:
        summary = evaluate_selection(None, ModelSpec("tests-b"), data, second, config, executor=executor,
                                     codes_from=first)
    finally:
        SCRIPT[("test", "P/add")] = saved
    assert len(scripted["code"]) == asked          # no code sampled for the second test model
    assert summary["code_model"] == "base" and summary["codes_from"] == str(first)

    def rows(out, name):
        return [json.loads(x) for x in (out / name).read_text().splitlines()]

    assert ([(r["problem_id"], r["sample"], r["completion"]) for r in rows(first, "codes.jsonl")]
            == [(r["problem_id"], r["sample"], r["completion"]) for r in rows(second, "codes.jsonl")])
    a, b = ({r["problem_id"]: r for r in rows(out, "problems.jsonl")} for out in (first, second))
    assert a["P/add"]["code_sha"] == b["P/add"]["code_sha"] and len(set(a["P/add"]["code_sha"])) == 4
    assert a["P/add"]["golden"] == b["P/add"]["golden"] == [False, False, True, False]
    assert a["P/add"]["tests"] != b["P/add"]["tests"]    # judged by other tests
    result = compare([first, second], resamples=200)
    assert result["comparisons"][0]["same_candidates"] is True and result["problems"] == 2
    random_row = next(r for r in result["comparisons"][0]["metrics"] if r["metric"] == "random")
    assert random_row["diff"] == 0.0 and random_row["ties"] == 2


def test_codes_from_a_selection_that_skipped_a_problem(tmp_path, scripted, executor):
    """A problem the first evaluation skipped (its reference fails its golden tests, as a few
    of every benchmark's do) has no candidate codes there, nor needs any: the second judges
    the same codes of the others. Fault seen: every problem of the data was asked for codes,
    so `--codes-from` refused any finished evaluation that had skipped a problem ("no 4
    candidate codes for P/bad; run that evaluation to its end first")."""
    from codea1.data import Problem, save_problems

    bad = Problem(id="P/bad", question='def one():\n    """Return 1."""\n', entry_point="one",
                  reference="def one():\n    return 2\n", tests=["assert one() == 1"], source="toy")
    data = tmp_path / "p.jsonl"
    save_problems([ADD, bad, EVEN], data)
    config = SelectConfig(n_code=4, n_test=2, bootstrap=100)
    first, second = tmp_path / "first", tmp_path / "second"
    summary = evaluate_selection(ModelSpec("base"), ModelSpec("tests-a"), data, first, config, executor=executor)
    assert [s["id"] for s in summary["skipped"]] == ["P/bad"]
    asked = len(scripted["code"])
    summary = evaluate_selection(None, ModelSpec("tests-b"), data, second, config, executor=executor,
                                 codes_from=first)
    assert len(scripted["code"]) == asked           # no code sampled for the second test model
    assert [s["id"] for s in summary["skipped"]] == ["P/bad"] and summary["sources"]["all"]["problems"] == 2
    assert (first / "codes.jsonl").read_text() == (second / "codes.jsonl").read_text()


def test_a_run_directory_stands_for_the_checkpoint_it_was_at(tmp_path, scripted, executor, monkeypatch):
    """A training run given as a model is its latest checkpoint when the selection begins:
    that step is loaded and recorded; once the run has saved a newer one, a resume is
    refused, and `--codes-from` takes the earlier codes with that step named (`--code-step`)
    or with no code model at all, never with the newer latest."""
    import codea1.eval.loading as loading
    from codea1.data import save_problems

    loads = []
    monkeypatch.setattr(loading, "load_eval_policies",
                        lambda model, device="auto", dtype="auto", step=None: loads.append((model, step))
                        or (FAKE_POLICIES, {"model": model}))
    data, run = tmp_path / "p.jsonl", tmp_path / "run"
    save_problems([ADD, EVEN], data)

    def checkpoint(step: int) -> None:
        (run / "checkpoints" / f"step-{step}").mkdir(parents=True)
        (run / "checkpoints" / f"step-{step}" / "state.json").write_text("{}")

    checkpoint(2)
    config = SelectConfig(n_code=4, n_test=2, bootstrap=100)
    first = tmp_path / "first"
    evaluate_selection(ModelSpec(str(run)), ModelSpec("tests-a"), data, first, config, executor=executor)
    assert (str(run), 2) in loads and json.loads((first / "eval_config.json").read_text())["code_step"] == 2
    checkpoint(3)
    with pytest.raises(ValueError, match=r"another checkpoint of the training run \(code step 2 on disk, 3 now"):
        evaluate_selection(ModelSpec(str(run)), ModelSpec("tests-a"), data, first, config, executor=executor)
    with pytest.raises(ValueError, match=r"come from step 2 of .*run \(its latest checkpoint then\), not step 3; "
                                         r"give --code-step 2, or no --code-model"):
        evaluate_selection(ModelSpec(str(run)), ModelSpec("tests-b"), data, tmp_path / "b", config,
                           executor=executor, codes_from=first)
    for code in (ModelSpec(str(run), step=2), None):
        out = tmp_path / f"paired-{code is None}"
        evaluate_selection(code, ModelSpec("tests-b"), data, out, config, executor=executor, codes_from=first)
        assert (out / "codes.jsonl").read_text() == (first / "codes.jsonl").read_text()


def test_codes_from_refuses_other_data_model_or_settings(tmp_path, scripted, executor):
    from codea1.data import save_problems

    data, other = tmp_path / "p.jsonl", tmp_path / "q.jsonl"
    save_problems([ADD, EVEN], data)
    save_problems([ADD], other)
    config = SelectConfig(n_code=4, n_test=2, bootstrap=100)
    first = tmp_path / "first"
    evaluate_selection(ModelSpec("base"), ModelSpec("tests-a"), data, first, config, executor=executor)
    cases = [
        (dict(data=other), rf"--codes-from {first}: its candidates are for other data \('{data}', not '{other}'\)"),
        (dict(config=SelectConfig(n_code=4, n_test=2, temperature=1.0)),
         r"sampled with other settings \(temperature 0.7 there vs 1.0 here\)"),
        (dict(code=ModelSpec("trained")), r"come from the code model 'base', not 'trained'"),
        (dict(codes_from=tmp_path), r"not an `eval select` directory"),
    ]
    for change, message in cases:
        args = dict(code=None, data=data, config=config, codes_from=first) | change
        out = tmp_path / "refused"
        with pytest.raises(ValueError, match=message):
            evaluate_selection(args["code"], ModelSpec("tests-b"), args["data"], out, args["config"],
                               executor=executor, codes_from=args["codes_from"])
        assert not out.exists()
    # the same file with other problems since (edited, or another --limit): said so, not "'x', not 'x'"
    save_problems([ADD], data)
    with pytest.raises(ValueError, match=r"its candidates are for other problems of '.*p\.jsonl' than these "
                                         r"\(another --limit, or the file changed\)"):
        evaluate_selection(None, ModelSpec("tests-b"), data, tmp_path / "refused", config, executor=executor,
                           codes_from=first)
    save_problems([ADD, EVEN], data)
    # an unfinished source: one problem's codes missing
    lines = (first / "codes.jsonl").read_text().splitlines()
    (first / "codes.jsonl").write_text("\n".join(x for x in lines if '"P/even"' not in x) + "\n")
    with pytest.raises(ValueError, match=r"no 4 candidate codes for P/even; run that evaluation to its end first"):
        evaluate_selection(None, ModelSpec("tests-b"), data, tmp_path / "refused", config, executor=executor,
                           codes_from=first)
