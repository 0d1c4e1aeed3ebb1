"""End to end with the real offline 0.5B model (slow: minutes on a CPU)."""

from __future__ import annotations

import json

import pytest

from codea1.eval.code import CodeEvalConfig, evaluate_code
from codea1.eval.tests_eval import TestEvalConfig, evaluate_tests

pytestmark = pytest.mark.slow


def _no_model_here() -> str | None:
    """Why no 0.5B model can be had here (None when one can): only then may these tests
    skip. A model that is here but fails to load is a bug, and fails them."""
    from codea1.models import (OFFLINE_GGUF_NAME, QWEN_05B_HF_ID, ModelError, _in_hf_cache, cache_dir,
                               hub_reachable, offline_part_paths)

    try:
        offline_part_paths()
        return None
    except ModelError as exc:  # the offline-model extra is not installed
        if (cache_dir() / OFFLINE_GGUF_NAME).is_file() or _in_hf_cache(QWEN_05B_HF_ID) \
                or hub_reachable(QWEN_05B_HF_ID):
            return None
        return f"no 0.5B model here (none assembled, none cached, no hub): {exc}"


@pytest.fixture(scope="module")
def policies():
    from codea1.eval.loading import load_eval_policies

    absent = _no_model_here()
    if absent:
        pytest.skip(absent)
    policies, _ = load_eval_policies("qwen2.5-coder-0.5b-instruct", "cpu")
    return policies


def test_greedy_eval_code_on_bundled_problems(tmp_path, policies):
    cfg = CodeEvalConfig(greedy=True, limit=2, max_new_tokens=256)
    summary = evaluate_code("qwen2.5-coder-0.5b-instruct", "bundled", tmp_path, cfg, policies=policies)
    row = summary["sources"]["bundled"]
    rows = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["completion"] for r in rows)
    # one greedy sample a problem: pass@1 is the share of the two that passed, sample by sample
    assert row["problems"] == 2 and row["pass@1"] == 100.0 * sum(bool(r["passed"]) for r in rows) / 2
    # a real model solves at least one of two easy bundled problems greedily
    assert any(r["passed"] for r in rows), [r["detail"] for r in rows]


def test_eval_tests_on_a_bundled_problem(tmp_path, policies):
    cfg = TestEvalConfig(k=5, limit=1, max_new_tokens=384)
    summary = evaluate_tests("qwen2.5-coder-0.5b-instruct", "bundled", tmp_path, cfg, policies=policies)
    row = summary["sources"]["all"]
    assert row["functions"] == 1 and row["mutants"] > 0
    assert row["pass@5"] > 0, "the model wrote no test that holds on two_sum's reference"
    # the summary against the function's own record: its tests' passes, its kill count
    (fn,) = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert row["pass@5"] == fn["pass_at_k"] == 100.0 * sum(map(bool, fn["passes"])) / 5
    assert (row["mutants"], row["killed"]) == (fn["mutants"], fn["killed"]) and 0 <= fn["killed"] <= fn["mutants"]
    assert row["mut@5_all"] == 100.0 * fn["killed"] / fn["mutants"]
    if fn["baseline_passes"]:   # UnLeakedTestBench scores a function only when all its tests hold
        assert row["mut@5"] == row["mut@5_all"] and row["mut@5_tasks"] == 1
    else:
        assert row["mut@5"] is None and row["mut@5_tasks"] == 0


def test_greedy_eval_code_with_the_llamacpp_engine(tmp_path, policies):
    """`eval code --engine llamacpp`: llama.cpp samples from the model's own GGUF weights."""
    from codea1.engines.llamacpp_engine import llamacpp_installed

    if not llamacpp_installed():
        pytest.skip("llama-cpp-python is not installed (pip install 'codea1[llamacpp]')")
    from llamacpp_probe import llamacpp_crash

    if llamacpp_crash():
        pytest.skip(llamacpp_crash())
    cfg = CodeEvalConfig(greedy=True, limit=2, max_new_tokens=256, engine="llamacpp", threads=2)
    summary = evaluate_code("qwen2.5-coder-0.5b-instruct", "bundled", tmp_path, cfg, policies=policies)
    assert summary["sources"]["bundled"]["problems"] == 2
    assert json.loads((tmp_path / "model.json").read_text())["engine"] == "llamacpp"
    rows = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["completion"] for r in rows)
    assert any(r["passed"] for r in rows), [r["detail"] for r in rows]
