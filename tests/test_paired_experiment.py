"""benchmarks/paired_experiment.py end to end in its --tiny mode (a tiny random-weight model,
a handful of bundled problems, one step a run), then again to show that a rerun resumes,
and its choice of training problems by measured pass rate."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "paired_experiment.py"


def _module():
    spec = importlib.util.spec_from_file_location("paired_experiment", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_training_problems_are_the_ones_solved_only_sometimes():
    pick = _module().pick_training
    rates = {"a": 0.0, "b": 0.25, "c": 0.5, "d": 1.0, "e": 0.75, "f": 0.5}
    assert pick(rates, 3) == (["c", "f", "b"], "3 of the pool solved only sometimes")
    picked, note = pick(rates, 5)
    assert picked == ["c", "f", "b", "e", "a"] and note.startswith("4 of the pool solved only sometimes; filled up to 5")


def _run(work: Path) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--work", str(work)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_tiny_experiment_runs_to_its_end_and_resumes(tmp_path):
    work = tmp_path / "paired"
    out = _run(work)
    assert "smallest difference in greedy pass@1" in out and f"wrote {work / 'report.md'}" in out
    for mode in ("golden", "a1"):
        assert (work / "runs" / mode / "checkpoints" / "step-1").is_dir()
    assert len((work / "train.jsonl").read_text().splitlines()) == 2
    names = {p.name for p in (work / "compare").iterdir()}
    assert names == {f"{kind}-{data}" for kind in ("code-greedy", "code-avg2", "tests", "select-a1-tests",
                                                    "select-a1-both") for data in ("mbpp", "heldout")}
    for name in names:
        result = json.loads((work / "compare" / name / "comparison.json").read_text())
        assert result["problems"] == 2 and (work / "compare" / name / "comparison.png").is_file()
    greedy = json.loads((work / "compare" / "code-greedy-mbpp" / "comparison.json").read_text())
    assert [e["models"].rsplit("/", 1)[-1] for e in greedy["evaluations"]] == ["tiny-model", "golden", "a1"]
    # the a1 test model judged exactly the base + base evaluation's candidate codes
    paired = json.loads((work / "compare" / "select-a1-tests-mbpp" / "comparison.json").read_text())
    assert paired["comparisons"][0]["same_candidates"] is True
    evals = work / "evals"
    assert ((evals / "select-mbpp-base-code-base-tests" / "codes.jsonl").read_text()
            == (evals / "select-mbpp-base-code-a1-step1-tests" / "codes.jsonl").read_text())
    assert json.loads((evals / "tests-mbpp-a1-step1" / "eval_config.json").read_text())["protocol"] == "answer"
    report = (work / "report.md").read_text()
    assert report.count("\n| code-greedy-mbpp | pass@1 |") == 2 and "| tests-heldout | Mul |" in report
    # a rerun does nothing again: no sample is added, no training step taken
    before = {p: p.stat().st_size for p in work.rglob("*.jsonl")}
    again = _run(work)
    assert "screen:" not in again and "data:" not in again
    assert {p: p.stat().st_size for p in work.rglob("*.jsonl")} == before
    assert not (work / "runs" / "a1" / "checkpoints" / "step-2").exists()


def test_a_sitting_with_other_sizes_is_refused_before_it_reuses_the_old_files(tmp_path):
    """The data and screening stages resume from their files: a second sitting with another
    --eval-problems would be told of 12 held-out problems and given the 4 made before."""
    module = _module()
    first = module.parse(["--work", str(tmp_path), "--pool", "5", "--eval-problems", "4"])
    module.check_setup(first)
    module.check_setup(first)                       # the same settings go on
    again = module.parse(["--work", str(tmp_path), "--pool", "5", "--eval-problems", "12", "--steps", "9"])
    with pytest.raises(SystemExit, match=r"other settings \(--eval-problems 4 there, 12 now\)"):
        module.check_setup(again)
    assert module.named(again, "a1") == "a1-step9" and module.named(again, "base") == "base"


def test_the_test_models_can_be_asked_as_the_papers_harness_asks():
    plan = _module().parse(["--work", "w", "--tests-protocol", "rounds"])
    assert plan.tests_protocol == "rounds"
    assert _module().parse(["--work", "w"]).tests_protocol == "answer"


def test_claims_choose_which_evaluations_run(monkeypatch, tmp_path):
    """`--claims code` runs the greedy code evaluations and their comparisons only; an
    unknown claim is refused by name; the default is every claim, in the cheap-first order."""
    module = _module()
    assert module.parse(["--work", "w"]).claims == ("code", "tests", "select", "avg")
    assert module.parse(["--work", "w", "--claims", "avg, code"]).claims == ("code", "avg")
    for bad in ("code,bogus", ",", "Code"):
        try:
            module.parse(["--work", "w", "--claims", bad])
        except SystemExit as stop:
            assert stop.code == 2
        else:
            raise AssertionError(f"--claims {bad!r} was accepted")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown: bogus"):
        module.parse_claims("code,bogus")

    ran: list[str] = []
    for name in ("eval_code", "eval_tests", "eval_select"):
        monkeypatch.setattr(module, name, lambda plan, *who, _n=name, **kw: ran.append(f"{_n}{who}{kw}") or tmp_path)
    compared: list[str] = []
    monkeypatch.setattr(module, "compare_into", lambda plan, name, dirs, rows: compared.append(name))
    for claims, expected in ((("code",), ["code-greedy-mbpp", "code-greedy-heldout"]),
                             (("tests", "avg"), ["tests-mbpp", "tests-heldout", "code-avg4-mbpp", "code-avg4-heldout"]),
                             (("select",), ["select-a1-tests-mbpp", "select-a1-both-mbpp",
                                            "select-a1-tests-heldout", "select-a1-both-heldout"])):
        ran.clear(), compared.clear()
        plan = module.parse(["--work", str(tmp_path), "--claims", ",".join(claims)])
        module.evaluate_and_compare(plan)
        assert compared == expected
        kinds = {r.split("(")[0] for r in ran}
        assert kinds == {"code": {"eval_code"}, "tests": {"eval_tests", "eval_code"},
                         "select": {"eval_select"}}[claims[0]]
