"""`eval code`: verdicts, pass@k per source, skips, resume; generation replaced by canned
completions so the judging and bookkeeping are tested without a model."""

from __future__ import annotations

import json

import pytest

import codea1.engines.hf_engine as hf_engine

from codea1.data import Problem, save_problems
from codea1.eval.code import CodeEvalConfig, evaluate_code
from codea1.eval.store import read_samples
from paper_rows import ScriptedPolicies, prompt_text

ADD = Problem(id="p/add", question="def add(a, b):\n    \"\"\"Sum.\"\"\"", entry_point="add",
              reference="def add(a, b):\n    return a + b\n",
              tests=["assert add(1, 2) == 3", "assert add(-1, 1) == 0"], source="setA")
SQUARE = Problem(id="p/square", question="def square(x):\n    \"\"\"Square.\"\"\"", entry_point="square",
                 reference="def square(x):\n    return x * x\n",
                 test_program="def check(f):\n    for i in range(5):\n        assert f(i) == i * i\n\ncheck(square)\n",
                 source="setB")
NEEDS_LIB = Problem(id="bcb/1", question="def g():\n    \"\"\"x\"\"\"", entry_point="g",
                    reference="def g():\n    return 1\n", tests=["assert g() == 1"], source="bigcodebench",
                    meta={"libs": ["codea1_surely_missing_lib", "json"]})
NO_TESTS = Problem(id="p/none", question="def h():\n    \"\"\"x\"\"\"", entry_point="h",
                   reference="def h():\n    return 1\n", source="setA")
BROKEN_REF = Problem(id="p/broken", question="def k():\n    \"\"\"x\"\"\"", entry_point="k",
                     reference="def k():\n    return 2\n", tests=["assert k() == 1"], source="setA")

WRONG = {"add": "def add(a, b):\n    return a - b\n", "square": "def square(x):\n    return x + x\n"}


class FakeSample:
    def __init__(self, text):
        self.text, self.truncated, self.finished = text, False, True


def canned(calls):
    """A stand-in for hf_engine.generate: even samples right, odd ones wrong."""

    def generate(policies, role, prompts, n=1, sampling=None, **kw):
        assert role == "code"
        calls.append(len(prompts))
        out = []
        for prompt in prompts:
            user = prompt_text(prompt, policies)
            fn = "add" if "def add" in user else "square"
            right = ADD.reference if fn == "add" else SQUARE.reference
            out.append([FakeSample(f"```python\n{right if i % 2 == 0 else WRONG[fn]}```") for i in range(n)])
        return out

    return generate


@pytest.fixture(scope="module")
def executor():
    from codea1.sandbox import Executor

    with Executor(workers=2) as ex:
        yield ex


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "problems.jsonl"
    save_problems([ADD, SQUARE, NEEDS_LIB, NO_TESTS, BROKEN_REF], path)
    return path


def test_pass_at_k_per_source_with_skips(tmp_path, data, executor, monkeypatch):
    calls = []
    monkeypatch.setattr(hf_engine, "generate", canned(calls))
    out = tmp_path / "out"
    summary = evaluate_code("fake", data, out, CodeEvalConfig(n=4), policies=ScriptedPolicies(), executor=executor)
    assert summary["ks"] == [1, 4]
    for source in ("setA", "setB", "all"):
        row = summary["sources"][source]
        assert row["pass@1"] == pytest.approx(50.0)
        assert row["pass@4"] == pytest.approx(100.0)
        assert row["avg@4"] == pytest.approx(50.0)
    assert summary["sources"]["all"]["problems"] == 2
    reasons = {s["id"]: s["reason"] for s in summary["skipped"]}
    assert reasons["bcb/1"] == "libraries not installed: codea1_surely_missing_lib"
    assert reasons["p/none"] == "no golden tests"
    assert "reference fails its golden tests" in reasons["p/broken"]
    rows = read_samples(out / "samples.jsonl")
    assert sorted(rows) == ["p/add", "p/square"]
    assert [rows["p/add"][i]["passed"] for i in range(4)] == [True, False, True, False]
    assert rows["p/square"][1]["status"] == "error" and "AssertionError" in rows["p/square"][1]["detail"]
    assert json.loads((out / "summary.json").read_text())["sources"]["all"]["problems"] == 2


def test_resume_skips_done_problems_and_survives_a_torn_line(tmp_path, data, executor, monkeypatch):
    calls = []
    monkeypatch.setattr(hf_engine, "generate", canned(calls))
    out = tmp_path / "out"
    cfg = CodeEvalConfig(n=2, problems_per_batch=1)
    first = evaluate_code("fake", data, out, cfg, policies=ScriptedPolicies(), executor=executor)
    assert calls == [1, 1]
    # interrupted: only the first problem's rows made it, plus half a line
    lines = (out / "samples.jsonl").read_text().splitlines()
    (out / "samples.jsonl").write_text("\n".join(lines[:2]) + '\n{"problem_id": "p/squ')
    calls.clear()
    again = evaluate_code("fake", data, out, cfg, policies=ScriptedPolicies(), executor=executor)
    assert calls == [1]  # only the missing problem is generated again
    assert again["sources"] == first["sources"]
    # nothing left to do: no generation at all
    calls.clear()
    evaluate_code("fake", data, out, cfg, policies=None, executor=executor)
    assert calls == []


def test_other_settings_in_the_same_directory_are_refused(tmp_path, data, executor, monkeypatch):
    monkeypatch.setattr(hf_engine, "generate", canned([]))
    out = tmp_path / "out"
    evaluate_code("fake", data, out, CodeEvalConfig(n=2, limit=1), policies=ScriptedPolicies(), executor=executor)
    with pytest.raises(ValueError, match="other settings.*n: 2 on disk vs 3 now"):
        evaluate_code("fake", data, out, CodeEvalConfig(n=3, limit=1), policies=ScriptedPolicies(), executor=executor)


def test_the_sandbox_limits_belong_to_the_evaluation(tmp_path, data, executor, monkeypatch):
    """A memory cap decides verdicts (a golden program over it fails), so resuming under
    another would score the problems left with other rules than those done."""
    monkeypatch.setattr(hf_engine, "generate", canned([]))
    out = tmp_path / "out"
    evaluate_code("fake", data, out, CodeEvalConfig(n=2, limit=1), policies=ScriptedPolicies(), executor=executor)
    with pytest.raises(ValueError, match="other settings.*memory_mb: [0-9]+ on disk vs 256 now"):
        evaluate_code("fake", data, out, CodeEvalConfig(n=2, memory_mb=256), policies=ScriptedPolicies(),
                      executor=executor)
    with pytest.raises(ValueError, match="other settings.*slowdown: 5.0 on disk vs 2.0 now"):
        evaluate_code("fake", data, out, CodeEvalConfig(n=2, slowdown=2.0), policies=ScriptedPolicies(),
                      executor=executor)


def test_samples_made_by_another_sampler_are_not_resumed(tmp_path, data, executor, monkeypatch):
    """The dtype (`--dtype auto` is bf16 on one CPU, float32 on another), device kind and
    engine change what a seed samples: a resume that would sample the rest otherwise is
    refused before any row is written; one written before this record resumes and records."""
    monkeypatch.setattr(hf_engine, "generate", canned([]))
    out = tmp_path / "out"
    cfg = CodeEvalConfig(n=2, problems_per_batch=1)
    evaluate_code("fake", data, out, cfg, policies=ScriptedPolicies(), executor=executor)
    record = json.loads((out / "eval_config.json").read_text())
    assert record["sampled_with"] == {"code": {"engine": "hf", "device": "cpu", "dtype": "float32"}}
    lines = (out / "samples.jsonl").read_text().splitlines(keepends=True)
    (out / "samples.jsonl").write_text("".join(lines[:2]))   # interrupted after the first problem

    class InBF16(ScriptedPolicies):
        dtype = "torch.bfloat16"

    with pytest.raises(ValueError, match="code samples made with engine hf, device cpu, dtype float32; these "
                                         "would be made with engine hf, device cpu, dtype bfloat16"):
        evaluate_code("fake", data, out, cfg, policies=InBF16(), executor=executor)
    assert (out / "samples.jsonl").read_text() == "".join(lines[:2])   # nothing written

    del record["sampled_with"]   # as a directory written before the record
    (out / "eval_config.json").write_text(json.dumps(record))
    evaluate_code("fake", data, out, cfg, policies=InBF16(), executor=executor)
    assert json.loads((out / "eval_config.json").read_text())["sampled_with"]["code"]["dtype"] == "bfloat16"


def test_a_prompt_longer_than_the_model_reads_skips_its_problem(tmp_path, data, executor, monkeypatch):
    """An engine refuses a prompt over the model's context (before sampling anything):
    that problem is skipped and listed, as training drops it, and the others in its batch
    are evaluated. Before: the whole evaluation ended on "prompt 1: ... tokens"."""
    from codea1.rollout import PromptTooLong

    inner = canned([])

    def generate(policies, role, prompts, n=1, sampling=None, **kw):
        for i, prompt in enumerate(prompts):
            if "def square" in prompt_text(prompt, policies):
                raise PromptTooLong(f"prompt {i}: 900 tokens, over the limit of 500", i, 900, 500)
        return inner(policies, role, prompts, n, sampling, **kw)

    monkeypatch.setattr(hf_engine, "generate", generate)
    summary = evaluate_code("fake", data, tmp_path / "out", CodeEvalConfig(n=2), policies=ScriptedPolicies(),
                            executor=executor)
    reasons = {s["id"]: s["reason"] for s in summary["skipped"]}
    assert reasons["p/square"] == ("its code prompt is 900 tokens, over the 500 the model may read "
                                   "(its context less --max-new-tokens)")
    assert summary["sources"]["all"]["problems"] == 1 and summary["sources"]["setA"]["pass@1"] == 50.0


def test_a_problem_changed_since_its_rows_were_scored_is_not_resumed(tmp_path, executor, monkeypatch):
    """The data file changed under the same path (a golden test edited, or a loader that
    now writes it otherwise): resuming would mix rows scored on the old problem with new
    ones, so it is refused naming the problem, and samples.jsonl is left as it was.
    Problems that did not change resume as before."""
    monkeypatch.setattr(hf_engine, "generate", canned([]))
    data, out = tmp_path / "p.jsonl", tmp_path / "out"
    save_problems([ADD, SQUARE], data)
    cfg = CodeEvalConfig(n=2, limit=1)
    evaluate_code("fake", data, out, cfg, policies=ScriptedPolicies(), executor=executor)
    before = (out / "samples.jsonl").read_bytes()
    assert all(json.loads(line)["problem_digest"] for line in before.decode().splitlines())
    evaluate_code("fake", data, out, CodeEvalConfig(n=2), policies=ScriptedPolicies(), executor=executor)  # grows
    grown = (out / "samples.jsonl").read_bytes()
    changed = Problem(**{**ADD.to_dict(), "tests": [*ADD.tests, "assert add(5, 5) == 10"]})
    save_problems([changed, SQUARE], data)
    with pytest.raises(ValueError, match=r"problem 'p/add' is not the one its rows in samples.jsonl were scored on"):
        evaluate_code("fake", data, out, CodeEvalConfig(n=2), policies=ScriptedPolicies(), executor=executor)
    assert (out / "samples.jsonl").read_bytes() == grown


def test_greedy_is_one_sample_at_temperature_zero():
    cfg = CodeEvalConfig(greedy=True)
    assert (cfg.n, cfg.temperature) == (1, 0.0)
    with pytest.raises(ValueError, match="--n"):
        CodeEvalConfig(n=0)
    with pytest.raises(ValueError, match="--top-p"):
        CodeEvalConfig(top_p=0)


def test_verdicts_for_missing_function_and_hangs(executor):
    from codea1.eval.code import golden_job, verdict_of
    from codea1.sandbox import Limits

    limits = Limits(timeout_s=3.0, call_timeout_s=1.0)
    runs = executor.run_many([
        golden_job(ADD, "def plus(a, b):\n    return a + b\n", limits),
        golden_job(ADD, "def add(a, b):\n    while True:\n        pass\n", limits),
        golden_job(ADD, "def add(a, b)\n    return a + b\n", limits),
        golden_job(SQUARE, "import sys\nsys.exit(0)\n", limits),
        golden_job(ADD, ADD.reference, limits),
    ])
    verdicts = [verdict_of(r) for r in runs]
    assert [v.status for v in verdicts] == ["no-function", "timeout", "error", "error", "pass"]
    assert [v.passed for v in verdicts] == [False, False, False, False, True]


def test_missing_data_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        evaluate_code("fake", tmp_path / "nope.jsonl", tmp_path / "out", policies=ScriptedPolicies())


def test_assumed_imports_come_before_the_code(executor):
    from codea1.eval.code import golden_job, verdict_of
    from codea1.sandbox import Limits

    root = Problem(id="p/root", question="def root(x):\n    \"\"\"sqrt\"\"\"", entry_point="root",
                   reference="import math\ndef root(x):\n    return math.sqrt(x)\n",
                   tests=["assert root(4) == 2.0"], imports="import math")
    code = "def root(x):\n    return math.sqrt(x)\n"  # relies on the problem's imports
    assert root.program(code).startswith("import math\n")
    limits = Limits(timeout_s=5.0)
    assert verdict_of(executor.run(golden_job(root, root.program(code), limits))).passed
    assert not verdict_of(executor.run(golden_job(root, code, limits))).passed


def test_golden_runs_get_the_memory_cap_of_data_check(tmp_path, executor, monkeypatch):
    # MBPP+'s MBPP/255 needs > 2 GiB; eval code caps a run at 4096 MB by default (`--memory-mb`)
    big = Problem(id="p/big", question="def add(a, b):\n    \"\"\"Sum.\"\"\"", entry_point="add",
                  reference="def add(a, b):\n    return a + b\n",
                  test_program="buf = bytearray(400 * 2**20)\nassert add(1, 2) == 3\n", source="setA")
    path = tmp_path / "big.jsonl"
    save_problems([big], path)
    monkeypatch.setattr(hf_engine, "generate", canned([]))
    assert CodeEvalConfig().memory_mb == 4096
    summary = evaluate_code("fake", path, tmp_path / "a", CodeEvalConfig(n=2), policies=ScriptedPolicies(), executor=executor)
    assert summary["sources"]["all"]["problems"] == 1 and not summary["skipped"]
    summary = evaluate_code("fake", path, tmp_path / "b", CodeEvalConfig(n=2, memory_mb=256), policies=ScriptedPolicies(),
                            executor=executor)
    assert [s["id"] for s in summary["skipped"]] == ["p/big"] and "MemoryError" in summary["skipped"][0]["reason"]
    with pytest.raises(ValueError, match="memory-mb"):
        CodeEvalConfig(memory_mb=10)


def test_code_a1_validation_file_reports_each_benchmark(tmp_path, executor, monkeypatch):
    """The reference's validation file mixes HumanEval+ and MBPP+ rows: one row per source,
    as the paper's table; a row whose reference fails its own tests is skipped by id."""
    from paper_rows import scripted_generate, validation_file

    counts = {"running_max": 4, "vowel_runs": 1, "round_half_up": 4, "second_smallest": 2}
    monkeypatch.setattr(hf_engine, "generate", scripted_generate(counts))
    data = validation_file(tmp_path / "validation_data_mix.parquet")
    summary = evaluate_code("fake", data, tmp_path / "out", CodeEvalConfig(n=4), policies=ScriptedPolicies(),
                            executor=executor)
    he, mbpp, both = (summary["sources"][s] for s in ("humanevalplus", "mbppplus", "all"))
    assert he == {"problems": 2, "pass@1": pytest.approx(62.5), "pass@4": 100.0, "avg@4": pytest.approx(62.5)}
    assert mbpp == {"problems": 1, "pass@1": pytest.approx(50.0), "pass@4": 100.0, "avg@4": pytest.approx(50.0)}
    assert both["avg@4"] == pytest.approx(100 * 7 / 12)
    assert [s["id"] for s in summary["skipped"]] == ["HumanEvalStyle/2"]
    assert "the reference fails its golden tests" in summary["skipped"][0]["reason"]
