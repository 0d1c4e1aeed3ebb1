"""`codea1 eval code|tests|mutants` end to end with a tiny random model (seconds)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from codea1.data import Problem, save_problems
from codea1.cli import app

PROBLEMS = [
    Problem(id="p/add", question="def add(a, b):\n    \"\"\"Sum.\"\"\"", entry_point="add",
            reference="def add(a, b):\n    return a + b\n", tests=["assert add(1, 2) == 3"], source="s1"),
    Problem(id="p/neg", question="def neg(x):\n    \"\"\"Negate.\"\"\"", entry_point="neg",
            reference="def neg(x):\n    return -x if x else 0\n", tests=["assert neg(2) == -2"], source="s2"),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from codea1.models import tiny_test_model

    return tiny_test_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "p.jsonl"
    save_problems(PROBLEMS, path)
    return path


def invoke(*args):
    return CliRunner().invoke(app, ["eval", *(str(a) for a in args)])


def test_eval_code_cli(tmp_path, tiny, data):
    out = tmp_path / "out"
    result = invoke("code", "--model", tiny, "--data", data, "--n", 2, "--max-new-tokens", 8,
                    "--device", "cpu", "--out", out)
    assert result.exit_code == 0, result.output
    assert "pass@1" in result.output and "summary.json" in result.output
    summary = json.loads((out / "summary.json").read_text())
    # a random 2-layer model writes no working function
    assert summary["sources"]["all"] == {"problems": 2, "pass@1": 0.0, "pass@2": 0.0, "avg@2": 0.0}
    assert len((out / "samples.jsonl").read_text().splitlines()) == 4


def test_eval_code_cli_from_a_checkpoint_directory(tmp_path, tiny, data):
    from codea1.models import ModelConfig, load_policies

    policies = load_policies(ModelConfig(name=str(tiny), device="cpu", dtype="float32"))
    ckpt = tmp_path / "run" / "checkpoints" / "step-3"
    policies.save(ckpt)
    out = tmp_path / "out"
    result = invoke("code", "--model", tmp_path / "run", "--data", data, "--greedy", "--max-new-tokens", 4,
                    "--device", "cpu", "--out", out)
    assert result.exit_code == 0, result.output
    assert json.loads((out / "model.json").read_text())["checkpoint"] == str(ckpt)


def test_eval_tests_cli(tmp_path, tiny, data):
    out = tmp_path / "out"
    result = invoke("tests", "--model", tiny, "--data", data, "--k", 2, "--max-new-tokens", 8,
                    "--device", "cpu", "--out", out)
    assert result.exit_code == 0, result.output
    row = json.loads((out / "summary.json").read_text())["sources"]["all"]
    assert row["functions"] == 2 and row["pass@2"] == 0.0 and row["mutants"] > 0
    # no function's tests pass their baseline: UnLeakedTestBench's mut@2 has no function to
    # average (printed "-"), codea1's all-function mean counts each as 0
    assert row["mut@2"] is None and row["mut@2_tasks"] == 0 and row["Mul"] is None and row["mut@2_all"] == 0.0
    assert "mut@2_tasks" in result.output and "mut@2_all" in result.output


def test_bad_inputs_exit_with_a_message(tmp_path, tiny):
    result = invoke("code", "--model", tiny, "--data", tmp_path / "missing.jsonl", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "no such file" in result.output
    result = invoke("tests", "--model", tiny, "--data", "bundled", "--k", 0, "--out", tmp_path / "o2")
    assert result.exit_code == 2 and "Invalid value for '--k'" in result.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    result = invoke("mutants", bad)
    assert result.exit_code == 2 and "does not parse" in result.output


def test_mutants_cli_lists_families(tmp_path):
    src = tmp_path / "f.py"
    src.write_text("def f(x):\n    return x + 1 if x > 0 else -x\n")
    result = invoke("mutants", src)
    assert result.exit_code == 0
    assert "25 mutants" in result.output and "binary 11" in result.output


def test_eval_code_cli_reports_humaneval_plus_and_mbpp_plus_apart(tmp_path, tiny, monkeypatch):
    """`eval code --data <Code-A1 validation parquet>`: one table row per benchmark."""
    import codea1.rollout as rollout
    from paper_rows import scripted_generate, validation_file

    counts = {"running_max": 2, "vowel_runs": 0, "round_half_up": 2, "second_smallest": 1}
    monkeypatch.setattr(rollout, "generate", scripted_generate(counts))
    data = validation_file(tmp_path / "validation_data_mix.parquet")
    result = invoke("code", "--model", tiny, "--data", data, "--n", 2, "--device", "cpu",
                    "--workers", 2, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") > 3}
    assert "50.00" in rows["HumanEval+ (humanevalplus)"] and "50.00" in rows["MBPP+ (mbppplus)"]
    assert "HumanEvalStyle/2: the reference fails its golden tests" in result.output


def test_eval_samples_each_problem_from_its_own_stream(tmp_path, tiny, data):
    """Sampled evaluation through the rollout engine: a problem's samples depend on the
    seed and the problem, not on the problems batched with it (so a resumed or re-batched
    evaluation draws the same samples), and the engine is recorded in model.json."""
    runs = {}
    for per_batch in (1, 2):
        out = tmp_path / f"out{per_batch}"
        result = invoke("code", "--model", tiny, "--data", data, "--n", 3, "--temperature", 1.0, "--top-p", 1.0,
                        "--max-new-tokens", 6, "--problems-per-batch", per_batch, "--seed", 5,
                        "--engine", "hf", "--device", "cpu", "--out", out)
        assert result.exit_code == 0, result.output
        assert json.loads((out / "model.json").read_text())["engine"] == "hf"
        runs[per_batch] = [(r["problem_id"], r["sample"], r["completion"])
                           for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())]
    assert runs[1] == runs[2]
    texts = [c for _p, _s, c in runs[1]]
    assert len(set(texts)) > 1   # sampled, not one text repeated
    result = invoke("code", "--model", tiny, "--data", data, "--n", 3, "--temperature", 1.0, "--top-p", 1.0,
                    "--max-new-tokens", 6, "--seed", 6, "--device", "cpu", "--out", tmp_path / "seed6")
    assert result.exit_code == 0, result.output
    other = [r["completion"] for r in map(json.loads, (tmp_path / "seed6" / "samples.jsonl").read_text().splitlines())]
    assert other != texts


@pytest.mark.parametrize("command", ["code", "tests"])
def test_an_engine_that_cannot_run_here_is_one_line_and_writes_nothing(tmp_path, tiny, data, command, monkeypatch):
    out = tmp_path / "out"
    result = invoke(command, "--model", tiny, "--data", data, "--engine", "vllm", "--device", "cpu", "--out", out)
    assert result.exit_code == 2, result.output
    assert "--engine vllm" in result.output and "Traceback" not in result.output
    assert not out.exists()
    result = invoke(command, "--model", tiny, "--data", data, "--engine", "vlm", "--out", out)
    assert result.exit_code == 2 and "--engine" in result.stderr and "llamacpp" in result.stderr
    assert not out.exists()
