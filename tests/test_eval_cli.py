"""`codea1 eval code|tests|mutants` end to end with a tiny random model (seconds); where a test checks
scores, scripted samples stand in for the model so that the expected scores are known and non-zero."""

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


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "p.jsonl"
    save_problems(PROBLEMS, path)
    return path


def invoke(*args):
    return CliRunner().invoke(app, ["eval", *(str(a) for a in args)])


def scripted(role: str, texts: dict[str, list[str]]):
    """A stand-in for `codea1.engines.hf_engine.generate`: for the prompt of function f, the texts
    `texts[f]` (one a sample), so the scores are known by hand."""
    from paper_rows import ScriptedSample, prompt_text

    def generate(policies, asked_role, prompts, n=1, sampling=None, **kw):
        assert asked_role == role
        out = []
        for prompt in prompts:
            user = prompt_text(prompt, policies)
            fn = next(f for f in texts if f"def {f}(" in user)
            assert len(texts[fn]) == n
            out.append([ScriptedSample(f"```python\n{t}```") for t in texts[fn]])
        return out

    return generate


def test_eval_code_cli(tmp_path, tiny_model_dir, data, monkeypatch):
    import codea1.engines.hf_engine as hf_engine

    # add: 1 of 2 samples right (pass@1 50, pass@2 100); neg: none right
    monkeypatch.setattr(hf_engine, "generate", scripted("code", {
        "add": ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"],
        "neg": ["def neg(x):\n    return x\n", "def neg(x):\n    return abs(x)\n"]}))
    out = tmp_path / "out"
    result = invoke("code", "--model", tiny_model_dir, "--data", data, "--n", 2, "--max-new-tokens", 8,
                    "--device", "cpu", "--out", out)
    assert result.exit_code == 0, result.output
    assert "pass@1" in result.output and "summary.json" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sources"]["all"] == {"problems": 2, "pass@1": 25.0, "pass@2": 50.0, "avg@2": 25.0}
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert sorted((r["problem_id"], r["passed"]) for r in rows) == [
        ("p/add", False), ("p/add", True), ("p/neg", False), ("p/neg", False)]


def test_eval_code_stop_strings_reach_the_sampler_and_belong_to_the_evaluation(tmp_path, tiny_model_dir, data,
                                                                               monkeypatch):
    """--stop (repeatable, \\n read as a newline) is the sampling config's `stop`; samples on
    disk drawn under other strings are not resumed as this evaluation's; an empty one is refused."""
    import codea1.engines.hf_engine as hf_engine

    inner = scripted("code", {"add": ["def add(a, b):\n    return a + b\n"], "neg": ["def neg(x):\n    return -x\n"]})
    seen = []

    def generate(policies, role, prompts, n=1, sampling=None, **kw):
        seen.append(list(sampling.stop))
        return inner(policies, role, prompts, n=n, sampling=sampling, **kw)

    monkeypatch.setattr(hf_engine, "generate", generate)
    out = tmp_path / "out"
    common = ("--model", tiny_model_dir, "--data", data, "--greedy", "--device", "cpu", "--engine", "hf")
    result = invoke("code", *common, "--stop", "\\n```\\n", "--stop", "END", "--out", out)
    assert result.exit_code == 0, result.output
    assert seen and all(s == ["\n```\n", "END"] for s in seen)
    assert json.loads((out / "summary.json").read_text())["sources"]["all"]["pass@1"] == 100.0
    result = invoke("code", *common, "--out", out)   # the same --out, no strings
    assert result.exit_code != 0 and "stop" in result.output, result.output
    result = invoke("code", *common, "--stop", "", "--out", tmp_path / "empty")
    assert result.exit_code == 2 and "--stop" in result.output and "empty string" in result.output
    assert not (tmp_path / "empty").exists()


def test_eval_code_cli_from_a_checkpoint_directory(tmp_path, tiny_model_dir, data):
    from codea1.models import ModelConfig, load_policies

    policies = load_policies(ModelConfig(name=str(tiny_model_dir), device="cpu", dtype="float32"))
    ckpt = tmp_path / "run" / "checkpoints" / "step-3"
    policies.save(ckpt)
    out = tmp_path / "out"
    result = invoke("code", "--model", tmp_path / "run", "--data", data, "--greedy", "--max-new-tokens", 4,
                    "--device", "cpu", "--out", out)
    assert result.exit_code == 0, result.output
    assert json.loads((out / "model.json").read_text())["checkpoint"] == str(ckpt)


def test_an_evaluation_of_a_run_keeps_to_the_checkpoint_it_began_with(tmp_path, tiny_model_dir, data):
    """A run directory stands for its latest checkpoint; once the run has saved a newer one,
    resuming the evaluation would score its other problems with other weights: refused."""
    from codea1.models import ModelConfig, load_policies

    policies = load_policies(ModelConfig(name=str(tiny_model_dir), device="cpu", dtype="float32"))
    run = tmp_path / "run"

    def checkpoint(step: int) -> None:
        policies.save(run / "checkpoints" / f"step-{step}")
        (run / "checkpoints" / f"step-{step}" / "state.json").write_text("{}")

    checkpoint(1)
    out = tmp_path / "out"
    common = ("--model", run, "--data", data, "--greedy", "--max-new-tokens", 4, "--device", "cpu", "--out", out)
    result = invoke("code", *common, "--limit", 1)
    assert result.exit_code == 0, result.output
    assert json.loads((out / "eval_config.json").read_text())["step"] == 1
    assert json.loads((out / "model.json").read_text())["checkpoint"] == str(run / "checkpoints" / "step-1")
    checkpoint(2)
    result = invoke("code", *common)
    assert result.exit_code == 2 and "step 1 on disk, 2 now" in result.output, result.output
    assert len((out / "samples.jsonl").read_text().splitlines()) == 1     # nothing scored with step 2
    result = invoke("code", *common[:-1], tmp_path / "fresh")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "fresh" / "model.json").read_text())["checkpoint"].endswith("step-2")


def test_eval_tests_cli(tmp_path, tiny_model_dir, data, monkeypatch):
    import codea1.engines.hf_engine as hf_engine

    monkeypatch.setattr(hf_engine, "generate", scripted("test", {
        "add": ["assert add(1, 2) == 3\nassert add(0, 0) == 0\n"],   # both hold
        "neg": ["assert neg(2) == -2\nassert neg(0) == 1\n"]}))      # the second is wrong
    out = tmp_path / "out"
    result = invoke("tests", "--model", tiny_model_dir, "--data", data, "--k", 2, "--max-new-tokens", 8,
                    "--device", "cpu", "--out", out)
    assert result.exit_code == 0, result.output
    row = json.loads((out / "summary.json").read_text())["sources"]["all"]
    # Counted by hand. add's 11 mutants (+ -> - * / // % ** >> << | & ^): add(1, 2) == 3 and
    # add(0, 0) == 0 kill all but a | b and a ^ b (3 and 0 both times): 9 of 11. neg's 7
    # (condition negated; unary - -> +, ~, not, deleted; 0 -> 1, -1): neg(2) == -2, the one
    # test that holds, kills the five that change neg(2): 5 of 7.
    assert row["functions"] == 2 and row["pass@2"] == pytest.approx((100.0 + 50.0) / 2)
    assert (row["mutants"], row["killed"]) == (11 + 7, 9 + 5)
    # UnLeakedTestBench's mut@2 averages over the functions whose 2 tests both pass their
    # baseline (add only); codea1's all-function mean scores neg's passing test too.
    assert row["mut@2_tasks"] == 1 and row["mut@2"] == pytest.approx(100 * 9 / 11)
    assert row["Mul"] == pytest.approx(75.0 * (100 * 9 / 11) / 100)
    assert row["mut@2_all"] == pytest.approx((100 * 9 / 11 + 100 * 5 / 7) / 2)
    assert "mut@2_tasks" in result.output and "mut@2_all" in result.output


def test_bad_inputs_exit_with_a_message(tmp_path, tiny_model_dir):
    result = invoke("code", "--model", tiny_model_dir, "--data", tmp_path / "missing.jsonl", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "no such file" in result.output
    result = invoke("tests", "--model", tiny_model_dir, "--data", "bundled", "--k", 0, "--out", tmp_path / "o2")
    assert result.exit_code == 2 and "Invalid value for '--k'" in result.stderr
    result = invoke("tests", "--model", tiny_model_dir, "--data", "bundled", "--protocol", "chat", "--out", tmp_path / "o3")
    assert result.exit_code == 2 and "--protocol must be one of ['answer', 'rounds'], got 'chat'" in result.output
    assert not (tmp_path / "o3").exists()
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


def test_eval_code_cli_reports_humaneval_plus_and_mbpp_plus_apart(tmp_path, tiny_model_dir, monkeypatch):
    """`eval code --data <Code-A1 validation parquet>`: one table row per benchmark."""
    import codea1.engines.hf_engine as hf_engine
    from paper_rows import scripted_generate, validation_file

    counts = {"running_max": 2, "vowel_runs": 0, "round_half_up": 2, "second_smallest": 1}
    monkeypatch.setattr(hf_engine, "generate", scripted_generate(counts))
    data = validation_file(tmp_path / "validation_data_mix.parquet")
    result = invoke("code", "--model", tiny_model_dir, "--data", data, "--n", 2, "--device", "cpu",
                    "--workers", 2, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") > 3}
    assert "50.00" in rows["HumanEval+ (humanevalplus)"] and "50.00" in rows["MBPP+ (mbppplus)"]
    assert "HumanEvalStyle/2: the reference fails its golden tests" in result.output


def test_eval_samples_each_problem_from_its_own_stream(tmp_path, tiny_model_dir, data):
    """Sampled evaluation through the rollout engine: a problem's samples depend on the
    seed and the problem, not on the problems batched with it (so a resumed or re-batched
    evaluation draws the same samples), and the engine is recorded in model.json."""
    runs = {}
    for per_batch in (1, 2):
        out = tmp_path / f"out{per_batch}"
        result = invoke("code", "--model", tiny_model_dir, "--data", data, "--n", 3, "--temperature", 1.0, "--top-p", 1.0,
                        "--max-new-tokens", 6, "--problems-per-batch", per_batch, "--seed", 5,
                        "--engine", "hf", "--device", "cpu", "--out", out)
        assert result.exit_code == 0, result.output
        assert json.loads((out / "model.json").read_text())["engine"] == "hf"
        runs[per_batch] = [(r["problem_id"], r["sample"], r["completion"])
                           for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())]
    assert runs[1] == runs[2]
    texts = [c for _p, _s, c in runs[1]]
    assert len(set(texts)) > 1   # sampled, not one text repeated
    result = invoke("code", "--model", tiny_model_dir, "--data", data, "--n", 3, "--temperature", 1.0, "--top-p", 1.0,
                    "--max-new-tokens", 6, "--seed", 6, "--device", "cpu", "--out", tmp_path / "seed6")
    assert result.exit_code == 0, result.output
    other = [r["completion"] for r in map(json.loads, (tmp_path / "seed6" / "samples.jsonl").read_text().splitlines())]
    assert other != texts


@pytest.mark.parametrize("command", ["code", "tests"])
def test_an_engine_that_cannot_run_here_is_one_line_and_writes_nothing(tmp_path, tiny_model_dir, data, command, monkeypatch):
    out = tmp_path / "out"
    result = invoke(command, "--model", tiny_model_dir, "--data", data, "--engine", "vllm", "--device", "cpu", "--out", out)
    assert result.exit_code == 2, result.output
    assert "--engine vllm" in result.output and "Traceback" not in result.output
    assert not out.exists()
    result = invoke(command, "--model", tiny_model_dir, "--data", data, "--engine", "vlm", "--out", out)
    assert result.exit_code == 2 and "--engine" in result.stderr and "llamacpp" in result.stderr
    assert not out.exists()


def test_stop_strings_are_refused_where_tests_are_sampled():
    """`eval tests` and `eval select` read tests from every block of a completion, so the
    library refuses `stop` there, naming where stop strings belong."""
    from codea1.eval.select import SelectConfig
    from codea1.eval.tests_eval import TestEvalConfig

    for config in (TestEvalConfig, SelectConfig):
        with pytest.raises(ValueError, match=r"stop=\['END'\]: .*eval code --stop"):
            config(stop=["END"])
        assert config().stop == []
