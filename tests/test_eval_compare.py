"""`codea1 eval compare`: hand-made evaluation directories whose answer is known (a certain
improvement, a certain null, a decline), the statistics behind the verdict on hand-computed
values, and directories that cannot be compared refused in one line naming the directory."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from codea1.cli import app
from codea1.eval.compare import (CompareError, K_MIN, Z_SUM, binary_mde, compare, mde, read_evaluation, sign_test,
                                 verdict)

CODE_SETTINGS = {"n": 1, "temperature": 0.0, "top_p": 0.95, "max_new_tokens": 512}


def code_dir(root: Path, name: str, passed: dict[str, bool], *, data: str = "mbpp-eval.jsonl", digest: str = "d1",
             settings: dict | None = None, reverse: bool = False, n: int = 1) -> Path:
    """An `eval code` directory as the command writes it: settings, one row per sample, a summary.
    `passed[pid]` is the one greedy verdict (n=1), or the number of passing samples of n."""
    out = root / name
    out.mkdir()
    identity = {"model": f"model-{name}", "data": data, **(settings or CODE_SETTINGS)}
    (out / "eval_config.json").write_text(json.dumps(identity))
    rows = []
    for pid, ok in passed.items():
        c = int(ok) if n == 1 else ok
        rows += [{"problem_id": pid, "sample": i, "passed": i < c, "status": "ok"} for i in range(n)]
    if reverse:  # pairing must go by problem id, never by position in the file
        rows.reverse()
    (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "summary.json").write_text(json.dumps({"skipped": [], "data_digest": digest}))
    return out


IDS = [f"MBPP/{i}" for i in range(40)]


def outcomes(solved: set[int]) -> dict[str, bool]:
    return {pid: i in solved for i, pid in enumerate(IDS)}


# --------------------------------------------------------------------------- statistics by hand


def test_exact_sign_test_on_hand_computed_values():
    """Fault tried: a one-sided p (no doubling) gave 0.015625 for 6-0 and failed here."""
    assert sign_test(6, 0) == pytest.approx(2 / 64)       # the smallest split that reaches p < 0.05
    assert sign_test(5, 0) == pytest.approx(2 / 32) and sign_test(5, 0) > 0.05
    assert sign_test(1, 9) == pytest.approx(2 * (1 + 10) / 1024)   # C(10,0) + C(10,1)
    assert sign_test(9, 1) == sign_test(1, 9)
    assert sign_test(3, 3) == 1.0 and sign_test(0, 0) == 1.0
    assert K_MIN == 6


def test_sign_test_with_over_a_thousand_changed_problems():
    """1025 or more problems changed (avg@n or a valid-test rate over a benchmark of 1100+
    problems changes on nearly every problem) overflowed 2.0 ** m and `eval compare` failed
    with OverflowError. Expected values from scipy.stats.binomtest(k, m, 0.5).pvalue."""
    assert sign_test(520, 505) == pytest.approx(0.6619244473642976, rel=1e-9)
    assert sign_test(500, 600) == pytest.approx(0.0028195449914364284, rel=1e-9)
    assert sign_test(620, 480) == pytest.approx(2.7131381093006878e-05, rel=1e-9)
    assert sign_test(1024, 0) == pytest.approx(1.1125369292536007e-308, rel=1e-9)
    assert sign_test(600, 600) == 1.0


def test_minimal_detectable_effect():
    assert Z_SUM == pytest.approx(1.95996 + 0.84162, abs=1e-4)
    assert mde(5, 50.0) is None                          # the sign test can never reach p < 0.05
    assert mde(40, 0.0) == pytest.approx(100 * 6 / 40)   # nothing changed: the sign test's floor
    assert mde(40, 60.0) == pytest.approx(Z_SUM * 60 / math.sqrt(40))
    # planning a 0/1 outcome: 20% of 100 problems expected to change -> sd 44.7 -> 12.5 points
    assert binary_mde(100, 0.2) == pytest.approx(Z_SUM * 100 * math.sqrt(0.2) / 10)


# --------------------------------------------------------------------------- known answers


def test_a_certain_improvement_and_a_certain_decline(tmp_path):
    """B solves A's 10 problems and 15 more; C loses 8 of A's 10. Fault tried: pairing rows by
    their position in samples.jsonl (B's file is written in reverse order) made B's 15-0 look
    like a mix of changes both ways and failed here."""
    a = code_dir(tmp_path, "a", outcomes(set(range(10))))
    b = code_dir(tmp_path, "b", outcomes(set(range(25))), reverse=True)
    c = code_dir(tmp_path, "c", outcomes({0, 1}))
    result = compare([a, b, c], resamples=2000)
    assert result["problems"] == 40 and result["kind"] == "code" and result["unpaired"] == {}
    (rb,), (rc,) = (cmp["metrics"] for cmp in result["comparisons"])
    assert rb["metric"] == "pass@1"
    assert (rb["a"], rb["b"], rb["diff"]) == (25.0, 62.5, 37.5)
    assert (rb["improved"], rb["worsened"], rb["ties"]) == (15, 0, 25)
    assert rb["p_sign"] == pytest.approx(2 * 0.5 ** 15)
    assert 20 < rb["low"] < 37.5 < rb["high"] < 55
    assert rb["verdict"] == "B better than A"
    assert (rc["diff"], rc["improved"], rc["worsened"]) == (-20.0, 0, 8)
    assert rc["high"] < 0 and rc["verdict"] == "C worse than A"


def test_a_certain_null(tmp_path):
    """8 problems gained and 8 lost: no difference, and the smallest detectable one is said."""
    a = code_dir(tmp_path, "a", outcomes(set(range(0, 20))))
    b = code_dir(tmp_path, "b", outcomes(set(range(8, 28))))
    (row,) = compare([a, b], resamples=2000)["comparisons"][0]["metrics"]
    assert row["diff"] == 0.0 and (row["improved"], row["worsened"]) == (8, 8) and row["p_sign"] == 1.0
    assert row["low"] < 0 < row["high"]
    sd = 100 * math.sqrt(16 / 39)   # 16 of 40 differences are +-100, mean 0 (ddof 1)
    assert row["mde"] == pytest.approx(Z_SUM * sd / math.sqrt(40))
    assert row["verdict"] == f"no difference detected at this size (it could detect about {row['mde']:.1f} points)"
    # identical results: the interval is [0, 0], and what could be detected is the sign test's floor
    same = code_dir(tmp_path, "same", outcomes(set(range(0, 20))))
    (row,) = compare([a, same])["comparisons"][0]["metrics"]
    assert (row["low"], row["high"], row["mde"]) == (0.0, 0.0, pytest.approx(15.0))
    assert row["verdict"].startswith("no difference detected")


def test_a_lopsided_interval_without_the_sign_test_is_no_verdict(tmp_path):
    """5 gains and no loss: the bootstrap interval excludes 0, but 5-0 gives p = 0.0625, so
    the verdict stays "no difference" (the percentile bootstrap alone is too eager)."""
    a = code_dir(tmp_path, "a", outcomes(set()))
    b = code_dir(tmp_path, "b", outcomes(set(range(5))))
    (row,) = compare([a, b], resamples=4000)["comparisons"][0]["metrics"]
    assert row["low"] > 0 and row["p_sign"] == pytest.approx(0.0625)
    assert row["verdict"].startswith("no difference detected")


def test_a_sign_test_against_the_interval_is_no_verdict(tmp_path):
    """avg@16 on 400 problems: 200 problems gain one sample of 16 (+6.25 points each), 30 lose
    all 16 (-100 each): the mean falls by (200 * 6.25 - 30 * 100) / 400 = 4.375 points and its
    interval lies below 0, while the sign test (200 up, 30 down) is far below 0.05 the other
    way. Fault seen: the verdict asked only that the sign test be significant, not that it
    point the same way, and said "B worse than A" with "200 up / 30 down, sign p 5e-32"."""
    settings = {"n": 16, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 512}
    a = code_dir(tmp_path, "a", {f"P/{i}": 8 if i < 200 or i >= 230 else 16 for i in range(400)}, n=16,
                 settings=settings)
    b = code_dir(tmp_path, "b", {f"P/{i}": 9 if i < 200 else 0 if i < 230 else 8 for i in range(400)}, n=16,
                 settings=settings)
    row = compare([a, b], resamples=2000)["comparisons"][0]["metrics"][0]
    assert row["diff"] == pytest.approx(-4.375) and (row["improved"], row["worsened"]) == (200, 30)
    assert row["high"] < 0 and row["p_sign"] < 1e-20
    assert row["verdict"] == "mixed: the mean went down but more problems went up (200 up / 30 down)"


def test_too_few_problems_and_unpaired_ones(tmp_path):
    a = code_dir(tmp_path, "a", {f"P/{i}": i < 2 for i in range(5)})
    b = code_dir(tmp_path, "b", {f"P/{i}": True for i in range(4)})   # P/4 still pending in B
    result = compare([a, b])
    assert result["problems"] == 4 and result["unpaired"] == {"A": ["P/4"]}
    assert result["comparisons"][0]["metrics"][0]["verdict"] == "too few problems to tell (4; at least 6 needed)"


def test_no_problem_in_common_names_the_directory_that_has_none(tmp_path):
    """A and B share their 40 problems, C (just started) has evaluated none of them: the
    refusal names C. Fault seen: it always named the second directory, here B, with
    "(first: 40 problems, this: 40)"."""
    a = code_dir(tmp_path, "a", outcomes({1}))
    b = code_dir(tmp_path, "b", outcomes({2}))
    c = code_dir(tmp_path, "c", {"MBPP/900": True})
    with pytest.raises(CompareError, match=rf"^{c}: none of its 1 problems is among the 40 evaluated in "
                                           rf"every directory before it"):
        compare([a, b, c])
    with pytest.raises(CompareError, match=rf"^{c}: none of its 1 problems is among the 40 evaluated in "):
        compare([a, c, b])
    empty = code_dir(tmp_path, "empty", {})
    with pytest.raises(CompareError, match=rf"^{empty}: no problem evaluated yet"):
        compare([empty, a, b])


def test_sampled_evaluations_compare_avg_and_pass_at_k(tmp_path):
    settings = {"n": 4, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 512}
    a = code_dir(tmp_path, "a", {f"P/{i}": 1 for i in range(8)}, n=4, settings=settings)
    b = code_dir(tmp_path, "b", {f"P/{i}": 3 for i in range(8)}, n=4, settings=settings)
    rows = {r["metric"]: r for r in compare([a, b])["comparisons"][0]["metrics"]}
    assert list(rows) == ["pass@1", "pass@4"]   # the ks `eval code` reports for n = 4
    assert (rows["pass@1"]["a"], rows["pass@1"]["b"]) == (25.0, 75.0)   # avg@4
    assert (rows["pass@4"]["a"], rows["pass@4"]["diff"]) == (100.0, 0.0)
    assert rows["pass@1"]["verdict"] == "B better than A"   # 8-0, p 0.0078


def test_the_detectable_size_of_avg_at_n_is_not_the_floor_of_a_0_1_outcome(tmp_path):
    """avg@4 on 30 problems, 6 of them one more sample of 4 right (+25 points each): the
    difference, 5 points, is detected (6-0, p 0.031; a resample misses all 6 with probability
    (24/30)^30 = 0.001). Fault seen: the smallest detectable size was floored at 6 problems
    moving by 100 points (20 points here), a bound of 0/1 outcomes, so the row said "B better
    than A" at +5.0 beside a detectable size of 20.0. For avg@4 the floor is 6 problems moving
    by one sample (25 points): 5.0, under the normal-theory figure."""
    settings = {"n": 4, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 512}
    a = code_dir(tmp_path, "a", {f"P/{i}": 2 for i in range(30)}, n=4, settings=settings)
    b = code_dir(tmp_path, "b", {f"P/{i}": 3 if i < 6 else 2 for i in range(30)}, n=4, settings=settings)
    row = compare([a, b])["comparisons"][0]["metrics"][0]
    assert row["diff"] == pytest.approx(5.0) and row["p_sign"] == pytest.approx(2 / 64)
    assert row["verdict"] == "B better than A"
    sd = math.sqrt((6 * 20 ** 2 + 24 * 5 ** 2) / 29)   # differences 25 (6) and 0 (24), mean 5, ddof 1
    assert row["mde"] == pytest.approx(Z_SUM * sd / math.sqrt(30))   # 5.20, above the floor 6 * 25 / 30
    assert mde(30, 0.0, step=25.0) == pytest.approx(5.0) and mde(30, 0.0) == pytest.approx(20.0)


def ult_dir(root: Path, name: str, rows: list[dict], digest: str = "t1") -> Path:
    out = root / name
    out.mkdir()
    identity = {"model": name, "data": "ult.json", "k": 2, "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 512,
                "white_box": True, "families": ["x"], "mutation_style": "text", "dedupe_mutants": False,
                "header": "auto"}
    (out / "eval_config.json").write_text(json.dumps(identity))
    (out / "samples.jsonl").write_text("".join(json.dumps({"sample": 0, **r}) + "\n" for r in rows))
    (out / "summary.json").write_text(json.dumps({"skipped": [], "data_digest": digest}))
    return out


def _fn(pid: str, passes: list[bool], written: int, killed: int, mutants: int = 4) -> dict:
    ok = len(passes) == 2 and all(passes)
    return {"problem_id": pid, "tests": ["t"] * written, "passes": passes, "pass_at_k": 50.0 * sum(passes),
            "mut_at_k": (100.0 * killed / mutants) if ok else None,
            "mut_at_k_all": 100.0 * killed / mutants}


def test_test_model_figures_mul_and_valid_rate(tmp_path):
    """mut@k over the functions whose k tests pass, Mul as the product of the averages, the
    valid-test rate over the tests written (not over k slots)."""
    a = ult_dir(tmp_path, "a", [_fn("F/1", [True, False], 2, 1), _fn("F/2", [True, False], 1, 0),
                                  _fn("F/3", [True, True], 2, 2)])
    b = ult_dir(tmp_path, "b", [_fn("F/1", [True, True], 2, 4), _fn("F/2", [True, True], 2, 3),
                                  _fn("F/3", [True, True], 2, 2)])
    rows = {r["metric"]: r for r in compare([a, b])["comparisons"][0]["metrics"]}
    assert list(rows) == ["pass@2", "mut@2", "Mul", "valid", "mut@2_all"]
    assert rows["pass@2"]["a"] == pytest.approx(200 / 3) and rows["pass@2"]["b"] == 100.0
    assert rows["mut@2"]["a"] == 50.0 and rows["mut@2"]["b"] == pytest.approx(100 * 9 / 12)
    assert rows["mut@2"]["paired"] == 1           # F/3 alone has mut@2 on both sides
    assert rows["Mul"]["a"] == pytest.approx(200 / 3 * 50 / 100)
    assert rows["Mul"]["improved"] is None and rows["Mul"]["p_sign"] is None
    assert rows["valid"]["a"] == pytest.approx((50 + 100 + 100) / 3) and rows["valid"]["b"] == 100.0


def test_a_figure_undefined_on_every_problem_is_shown_as_such(tmp_path):
    """No function's k tests all pass on either side, so mut@k is undefined throughout: the
    table, the JSON and the plot say so instead of failing (the plot failed on it before)."""
    a = ult_dir(tmp_path, "a", [_fn(f"F/{i}", [True, False], 2, 1) for i in range(7)])
    b = ult_dir(tmp_path, "b", [_fn(f"F/{i}", [False, False], 2, 0) for i in range(7)])
    result = CliRunner().invoke(app, ["eval", "compare", str(a), str(b), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    rows = {r["metric"]: r for r in json.loads((tmp_path / "cmp" / "comparison.json").read_text())
            ["comparisons"][0]["metrics"]}
    assert rows["mut@2"]["a"] is None and rows["mut@2"]["paired"] == 0
    assert rows["mut@2"]["verdict"] == "too few problems to tell (0; at least 6 needed)"
    # Mul (pass@k x mut@k) is then undefined too: not "no difference detected (it could detect
    # about 85.7 points)", as it read, since there is nothing to compare
    assert rows["Mul"]["a"] is None and rows["Mul"]["b"] is None
    assert rows["Mul"]["verdict"] == "undefined on A and B"
    assert rows["pass@2"]["verdict"] == "B worse than A"   # 7-0 down, p 0.016
    assert (tmp_path / "cmp" / "comparison.png").stat().st_size > 1000


def select_dir(root: Path, name: str, picks: list[tuple[bool, list[bool], list[str]]]) -> Path:
    out = root / name
    out.mkdir()
    identity = {"code_model": "base", "test_model": name, "data": "d.jsonl", "n_code": 4, "n_test": 2,
                "tests_per_suite": 8, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 512, "seed": 0,
                "codes_from": None}
    (out / "eval_config.json").write_text(json.dumps(identity))
    rows = [{"problem_id": f"S/{i}", "golden": golden, "selected_correct": sel, "code_sha": sha}
            for i, (sel, golden, sha) in enumerate(picks)]
    (out / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_selections_and_whether_they_judged_the_same_candidates(tmp_path):
    golden = [True, False, False, False]
    a = select_dir(tmp_path, "a", [(False, golden, ["x", "y", "z", "w"])] * 7)
    b = select_dir(tmp_path, "b", [(True, golden, ["x", "y", "z", "w"])] * 7)
    c = select_dir(tmp_path, "c", [(True, golden, ["x", "y", "z", "v"])] * 7)
    result = compare([a, b, c])
    rows = {r["metric"]: r for r in result["comparisons"][0]["metrics"]}
    assert (rows["selected"]["diff"], rows["random"]["diff"], rows["gain"]["diff"]) == (100.0, 0.0, 100.0)
    assert rows["selected"]["verdict"] == "B better than A"   # 7-0
    assert [c["same_candidates"] for c in result["comparisons"]] == [True, False]


# --------------------------------------------------------------------------- refusals


def test_mismatched_directories_are_refused_naming_the_directory(tmp_path):
    a = code_dir(tmp_path, "a", outcomes({1}))
    other_data = code_dir(tmp_path, "other", outcomes({1}), data="humaneval.jsonl", digest="d2")
    with pytest.raises(CompareError, match=rf"^{other_data}: evaluated on other data \('humaneval.jsonl'\)"):
        compare([a, other_data])
    # the same file, other problems (an evaluation run with --limit): the message must not
    # read "other data ('mbpp-eval.jsonl') than a ('mbpp-eval.jsonl')", as it did
    limited = code_dir(tmp_path, "limited", outcomes({1}), digest="d3")
    with pytest.raises(CompareError, match=rf"^{limited}: evaluated on other problems of 'mbpp-eval.jsonl' than {a} "
                                           r"\(another --limit, or the file changed\)"):
        compare([a, limited])
    moved = code_dir(tmp_path, "moved", outcomes({1}), data="/elsewhere/mbpp-eval.jsonl")   # same digest
    assert compare([a, moved])["problems"] == 40
    sampled = code_dir(tmp_path, "sampled", outcomes({1}), settings={**CODE_SETTINGS, "max_new_tokens": 256})
    with pytest.raises(CompareError, match=rf"^{sampled}: evaluated with other settings .*max_new_tokens 256 vs 512"):
        compare([a, sampled])
    t = ult_dir(tmp_path, "t", [_fn("F/1", [True, True], 2, 1)])
    with pytest.raises(CompareError, match=rf"^{t}: an `eval tests` directory, but {a} is `eval code`"):
        compare([a, t])
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="empty: not an evaluation directory"):
        read_evaluation(tmp_path / "empty")
    with pytest.raises(CompareError, match="at least two"):
        compare([a])


def test_limits_and_checkpoints_are_compared_where_both_sides_recorded_them(tmp_path):
    """The sandbox's memory cap decides verdicts: evaluations under two caps are not a pair.
    A side written before the cap was recorded is taken as it is; the checkpoint a run
    directory stood for is the model's, so it may differ."""
    capped = {**CODE_SETTINGS, "memory_mb": 4096}
    a = code_dir(tmp_path, "a", outcomes({1}), settings={**capped, "step": 3})
    small = code_dir(tmp_path, "small", outcomes({1, 2}), settings={**capped, "memory_mb": 256})
    with pytest.raises(CompareError, match=rf"^{small}: evaluated with other settings than {a} \(memory_mb 256 vs 4096\)"):
        compare([a, small])
    older = code_dir(tmp_path, "older", outcomes({1}))
    later = code_dir(tmp_path, "later", outcomes({1}), settings={**capped, "step": 7})
    assert compare([a, older])["problems"] == compare([a, later])["problems"] == 40


def test_another_sampler_is_compared_and_noted(tmp_path):
    """Two models sampled in other dtypes (or engines, or device kinds) are still a pair
    (how a model ran is the model's side), but the headline says so for each role both
    recorded; a role one side copied (`--codes-from`) or did not record is not noted."""
    from codea1.eval.compare import headline

    bf16 = {"engine": "hf", "device": "cpu", "dtype": "bfloat16"}
    a = code_dir(tmp_path, "a", outcomes({1}), settings={**CODE_SETTINGS, "sampled_with": {"code": bf16}})
    b = code_dir(tmp_path, "b", outcomes({1, 2}),
                 settings={**CODE_SETTINGS, "sampled_with": {"code": {**bf16, "dtype": "float32"}}})
    same = code_dir(tmp_path, "same", outcomes({1}), settings={**CODE_SETTINGS, "sampled_with": {"code": bf16}})
    older = code_dir(tmp_path, "older", outcomes({1}))
    result = compare([a, b, same, older])
    assert [c["other_sampler"] for c in result["comparisons"]] == [
        {"code": [bf16, {**bf16, "dtype": "float32"}]}, {}, {}]
    lines = headline(result)
    assert lines[1] == ("  note: B's code samples were made with engine hf, device cpu, dtype float32, A's with "
                        "engine hf, device cpu, dtype bfloat16: part of the difference may be the sampler's")
    assert not any("note" in line for line in lines[2:])


@pytest.mark.parametrize("name, text, why", [
    ("eval_config.json", "{oops", "not valid JSON"), ("eval_config.json", "[1]", "expected a JSON object"),
    ("summary.json", "[1]", "expected a JSON object"), ("summary.json", "{oops", "not valid JSON"),
    ("eval_config.json", '{"model": "m", "n": "abc"}', "n is 'abc', expected a whole number")])
def test_a_damaged_file_of_a_directory_is_named(tmp_path, name, text, why):
    a = code_dir(tmp_path, "a", outcomes({1}))
    (a / name).write_text(text)
    with pytest.raises(CompareError, match=rf"^{a / name}: {why}"):
        read_evaluation(a)


def test_cli_table_json_plot_and_one_line_refusal(tmp_path):
    a = code_dir(tmp_path, "a", outcomes(set(range(10))))
    b = code_dir(tmp_path, "b", outcomes(set(range(25))))
    out_json, out_png = tmp_path / "cmp" / "comparison.json", tmp_path / "cmp" / "comparison.png"
    result = CliRunner().invoke(app, ["eval", "compare", str(a), str(b), "--out", str(tmp_path / "cmp"),
                                      "--per-problem"])
    assert result.exit_code == 0, result.output
    assert "B vs A on pass@1: B better than A (+37.5 points [" in result.output
    assert "15 up / 0 down, sign p 6.1e-05, 40 problems)" in result.output
    assert "MBPP/24: pass@1 0.0 -> 100.0" in result.output and "MBPP/30:" not in result.output
    saved = json.loads(out_json.read_text())
    assert saved["comparisons"][0]["metrics"][0]["verdict"] == "B better than A"
    assert saved["per_problem"]["MBPP/12"] == {"A": {"pass@1": 0.0}, "B": {"pass@1": 100.0}}
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = CliRunner().invoke(app, ["eval", "compare", str(a), str(b), "--json"])
    assert printed.exit_code == 0 and json.loads(printed.output)["comparisons"] == saved["comparisons"]
    other = code_dir(tmp_path, "other", outcomes({1}), data="x.jsonl", digest="zz")
    refused = CliRunner().invoke(app, ["eval", "compare", str(a), str(other), "--out", str(tmp_path / "r")])
    assert refused.exit_code == 2
    assert [x for x in refused.output.splitlines() if x.strip()] == [
        f"error: {other}: evaluated on other data ('x.jsonl') than {a} ('mbpp-eval.jsonl'); "
        "compare evaluations of the same problems"]
    assert not (tmp_path / "r").exists()


def test_a_full_disk_names_the_file_and_leaves_no_empty_out(tmp_path, small_disk):
    from conftest import fill_disk

    a = code_dir(tmp_path, "a", outcomes(set(range(10))))
    b = code_dir(tmp_path, "b", outcomes(set(range(25))))
    fill_disk(small_disk)
    result = CliRunner().invoke(app, ["eval", "compare", str(a), str(b), "--out", str(small_disk / "cmp")])
    assert result.exit_code == 3, result.output
    assert result.output.splitlines()[-1].startswith(f"error: {small_disk / 'cmp' / 'comparison.json'}: no space")
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


# --------------------------------------------------------------------------- edges a mutation run found
# `python benchmarks/mutation_score.py --only compare` left these behaviours untested: each
# test below names the mutants it kills (docs/BENCHMARKS.md, "Mutation score").


def test_the_detectable_size_at_its_edges():
    """Six problems is the first size the sign test can call (`n < K_MIN`, not `<=`); the
    floor is a true division (600 / 7, not 600 // 7); a planned share of changes below 0
    is read as none."""
    assert mde(6, 0.0) == pytest.approx(100.0) and mde(6, 0.0, step=25.0) == pytest.approx(25.0)
    assert mde(7, 0.0) == pytest.approx(600 / 7)
    assert binary_mde(40, -0.1) == binary_mde(40, 0.0) == pytest.approx(15.0)


def test_the_interval_is_the_percentile_bootstrap_of_the_same_resampled_problems(tmp_path):
    """The interval recomputed from its definition: `resamples` draws of the problems with
    replacement (numpy's default_rng(seed).integers(0, n)), the same draw for both sides, the
    2.5th and 97.5th percentiles of mean(B) - mean(A). Kills: averaging over the resamples
    instead of the problems (axis 0), other percentiles, a draw that never picks the first
    problem or picks the last twice as often."""
    settings = {"n": 16, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 512}
    passed_a = {f"P/{i:02d}": (i * 7) % 17 for i in range(37)}   # samples passed of 16
    passed_b = {f"P/{i:02d}": 16 if i == 0 else (i * 5) % 17 for i in range(37)}
    a = code_dir(tmp_path, "a", passed_a, n=16, settings=settings)
    b = code_dir(tmp_path, "b", passed_b, n=16, settings=settings)
    row = compare([a, b], resamples=500, seed=3)["comparisons"][0]["metrics"][0]
    ids = sorted(passed_a)
    va = np.array([100 / 16 * passed_a[p] for p in ids])
    vb = np.array([100 / 16 * passed_b[p] for p in ids])
    idx = np.random.default_rng(3).integers(0, len(ids), size=(500, len(ids)))
    diffs = vb[idx].mean(axis=1) - va[idx].mean(axis=1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    assert (row["low"], row["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    # the next percentiles out and in are other values: the check tells them apart
    assert len({*np.percentile(diffs, [1.5, 2.5, 3.5]), *np.percentile(diffs, [96.5, 97.5, 98.5])}) == 6
    assert row["diff"] == pytest.approx(vb.mean() - va.mean())


def test_an_interval_that_hangs_on_the_first_problem(tmp_path):
    """Only the first problem (by id) changed: some resamples hold it, so the interval's top
    is above 0. A draw from 1 (never index 0) gave [0, 0]."""
    a = code_dir(tmp_path, "a", {f"P/{i}": False for i in range(10)})
    b = code_dir(tmp_path, "b", {f"P/{i}": i == 0 for i in range(10)})
    row = compare([a, b], resamples=200)["comparisons"][0]["metrics"][0]
    assert row["low"] == 0.0 and row["high"] > 0.0
    assert (row["improved"], row["worsened"], row["ties"]) == (1, 0, 9)


def test_changes_under_one_point_count_and_ties_are_what_is_left(tmp_path):
    """avg@200 moves by half a point a sample: such a move is a change (not `d > 1`), down
    as well as up, and ties are the problems left (paired - up - down)."""
    settings = {"n": 200, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 512}
    a = code_dir(tmp_path, "a", {f"P/{i}": 100 for i in range(8)}, n=200, settings=settings)
    b = code_dir(tmp_path, "b", {f"P/{i}": 101 if i < 3 else 99 if i < 5 else 100 for i in range(8)}, n=200,
                 settings=settings)
    row = compare([a, b], resamples=200)["comparisons"][0]["metrics"][0]
    assert row["metric"] == "pass@1"
    assert (row["improved"], row["worsened"], row["ties"]) == (3, 2, 3)


def test_the_floor_of_a_graded_metric_is_its_smallest_move_either_way(tmp_path):
    """avg@4 on 30 problems. One problem up a sample (+25): the normal-theory figure (2.3)
    is under the floor of 6 problems moving 25 points (5.0), so 5.0 (a floor from the ties'
    zero moves would be 0 and give 2.3). One up two samples (+50) and one down a sample
    (-25): the smallest move is 25 (a floor from the gains alone would be 10.0), here under
    the normal-theory figure, which is given."""
    settings = {"n": 4, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 512}
    a = code_dir(tmp_path, "a", {f"P/{i}": 2 for i in range(30)}, n=4, settings=settings)
    one_up = code_dir(tmp_path, "one_up", {f"P/{i}": 3 if i == 0 else 2 for i in range(30)}, n=4, settings=settings)
    both = code_dir(tmp_path, "both", {f"P/{i}": 4 if i == 0 else 1 if i == 1 else 2 for i in range(30)}, n=4,
                    settings=settings)
    rows = [cmp["metrics"][0] for cmp in compare([a, one_up, both], resamples=200)["comparisons"]]
    assert rows[0]["mde"] == pytest.approx(5.0)
    d = np.array([50.0, -25.0] + [0.0] * 28)
    assert rows[1]["mde"] == pytest.approx(Z_SUM * d.std(ddof=1) / math.sqrt(30))
    assert 5.0 < rows[1]["mde"] < 10.0


def test_the_floor_of_a_metric_with_a_fixed_step_holds_when_nothing_changed(tmp_path):
    """avg@8 and pass@5 of 8 samples, and a test model's pass@2, on 30 problems with no
    change: the detectable size is 6 problems moving by the metric's least step (12.5,
    1/56 and 50 points), not by 100 as though they were 0/1 outcomes (20.0 each)."""
    settings = {"n": 8, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 512}
    a = code_dir(tmp_path, "a", {f"P/{i}": 4 for i in range(30)}, n=8, settings=settings)
    b = code_dir(tmp_path, "b", {f"P/{i}": 4 for i in range(30)}, n=8, settings=settings)
    rows = {r["metric"]: r for r in compare([a, b], resamples=200)["comparisons"][0]["metrics"]}
    assert rows["pass@1"]["mde"] == pytest.approx(6 * 12.5 / 30)
    # pass@5 of 8 = 1 - C(8 - c, 5) / C(8, 5): 3 right -> 4 right moves it by 1/56, the least
    assert rows["pass@5"]["mde"] == pytest.approx(6 * (100 / 56) / 30)
    t_a = ult_dir(tmp_path, "ta", [_fn(f"F/{i}", [True, False], 2, 1) for i in range(30)])
    t_b = ult_dir(tmp_path, "tb", [_fn(f"F/{i}", [True, False], 2, 1) for i in range(30)])
    rows = {r["metric"]: r for r in compare([t_a, t_b], resamples=200)["comparisons"][0]["metrics"]}
    assert rows["pass@2"]["mde"] == pytest.approx(6 * 50 / 30)


def test_mul_is_the_product_of_the_averages_and_its_detectable_size_is_from_the_bootstrap(tmp_path):
    """Mul = mean(pass@k) x mean(mut@k) / 100 (not modulo 100), resampled as defined; with no
    per-problem value its detectable size takes the bootstrap's standard error for sd/sqrt(n):
    max(Z_SUM * se, 600 / n)."""
    rows_a = [_fn(f"F/{i:02d}", [True, i % 3 == 0], 2, i % 5) for i in range(40)]
    rows_b = [_fn(f"F/{i:02d}", [True, True], 2, (i * 2) % 5) for i in range(40)]
    a = ult_dir(tmp_path, "a", rows_a)
    b = ult_dir(tmp_path, "b", rows_b)
    result = compare([a, b], resamples=400, seed=1)
    mul = {r["metric"]: r for r in result["comparisons"][0]["metrics"]}["Mul"]

    def side(rows):
        passk = np.array([r["pass_at_k"] for r in rows])
        mut = np.array([np.nan if r["mut_at_k"] is None else r["mut_at_k"] for r in rows])
        return passk, mut

    (pa, ma), (pb, mb) = side(rows_a), side(rows_b)
    assert mul["a"] == pytest.approx(pa.mean() * np.nanmean(ma) / 100)
    assert mul["b"] == pytest.approx(pb.mean() * np.nanmean(mb) / 100)
    assert mul["b"] != pytest.approx(pb.mean() * np.nanmean(mb) % 100)   # where "% 100" would differ
    idx = np.random.default_rng(1).integers(0, 40, size=(400, 40))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        boot = (pb[idx].mean(1) * np.nanmean(mb[idx], 1) - pa[idx].mean(1) * np.nanmean(ma[idx], 1)) / 100
    boot = boot[np.isfinite(boot)]
    assert mul["mde"] == pytest.approx(max(Z_SUM * boot.std(), 600 / 40))
    assert Z_SUM * boot.std() > 600 / 40   # the bootstrap's figure, not the floor, decides here


@pytest.mark.parametrize("low, high, p, up_down, expected", [
    (0.5, 9.0, 0.01, (7, 0), "B better than A"),          # a low end under 1 point still excludes 0
    (0.0, 9.0, 0.01, (7, 0), "no difference"),            # an interval touching 0 does not exclude it
    (-0.5, 9.0, 0.01, (7, 0), "no difference"),
    (-9.0, -0.5, 0.01, (0, 7), "B worse than A"),
    (-9.0, 0.0, 0.01, (0, 7), "no difference"),
    (-9.0, 0.5, 0.01, (0, 7), "no difference"),
    (-3.0, 5.0, 0.01, (7, 0), "no difference"),
    (0.5, 9.0, 0.05, (7, 0), "no difference"),            # p must be under the level, not at it
    (0.5, 9.0, 0.01, (2, 30), "mixed: the mean went up but more problems went down (2 up / 30 down)"),
])
def test_the_verdict_at_its_boundaries(low, high, p, up_down, expected):
    row = {"mde": 5.0, "paired": 40, "a": 50.0, "b": 55.0, "low": low, "high": high, "p_sign": p,
           "improved": up_down[0], "worsened": up_down[1]}
    assert verdict(row).startswith(expected)


def test_more_evaluations_than_letters(tmp_path):
    """A to Z, then E26, E27 (the 27th and 28th directories), each against A."""
    dirs = [code_dir(tmp_path, f"e{i:02d}", {f"P/{j}": j < i % 7 for j in range(6)}) for i in range(28)]
    result = compare(dirs, resamples=50)
    labels = [e["label"] for e in result["evaluations"]]
    assert labels[:2] == ["A", "B"] and labels[25:] == ["Z", "E26", "E27"]
    assert [c["b"] for c in result["comparisons"]] == labels[1:]


def test_comparability_is_checked_whichever_directory_comes_first(tmp_path):
    """Each refusal with the directories the other way round, and the data judged by name
    when a side has no digest yet (an evaluation still running has no summary.json)."""
    a = code_dir(tmp_path, "a", outcomes({1}), digest="d1")
    earlier = code_dir(tmp_path, "earlier", outcomes({1}), digest="d0")
    with pytest.raises(CompareError, match=rf"^{earlier}: evaluated on other problems"):
        compare([a, earlier])
    t = ult_dir(tmp_path, "t", [_fn("F/1", [True, True], 2, 1)])
    with pytest.raises(CompareError, match=rf"^{a}: an `eval code` directory, but {t} is `eval tests`"):
        compare([t, a])
    longer = code_dir(tmp_path, "longer", outcomes({1}), settings={**CODE_SETTINGS, "max_new_tokens": 1024})
    with pytest.raises(CompareError, match=rf"^{longer}: evaluated with other settings .*max_new_tokens 1024 vs 512"):
        compare([a, longer])
    running = code_dir(tmp_path, "running", outcomes({2}))
    (running / "summary.json").unlink()
    assert compare([a, running])["problems"] == 40 and compare([running, a])["problems"] == 40
    elsewhere = code_dir(tmp_path, "elsewhere", outcomes({2}), data="humaneval.jsonl")
    (elsewhere / "summary.json").unlink()
    for pair in ([running, elsewhere], [elsewhere, running]):
        with pytest.raises(CompareError, match=r"evaluated on other data"):
            compare(pair)


def test_the_data_named_is_the_first_directory_s(tmp_path):
    a = code_dir(tmp_path, "a", outcomes({1}))
    moved = code_dir(tmp_path, "moved", outcomes({1}), data="/elsewhere/mbpp-eval.jsonl")   # same digest
    assert compare([a, moved])["data"] == "mbpp-eval.jsonl"


def test_same_candidates_is_asked_of_the_first_directory_and_only_when_both_recorded_them(tmp_path):
    """B judged other candidates than A, C the same as B: both differ from A. Selections
    written without `code_sha` (an older eval select) cannot say: None."""
    golden = [True, False, False, False]
    a = select_dir(tmp_path, "a", [(False, golden, ["x", "y", "z", "w"])] * 7)
    b = select_dir(tmp_path, "b", [(True, golden, ["x", "y", "z", "a"])] * 7)
    c = select_dir(tmp_path, "c", [(True, golden, ["x", "y", "z", "a"])] * 7)
    assert [x["same_candidates"] for x in compare([a, b, c])["comparisons"]] == [False, False]
    d = select_dir(tmp_path, "d", [(True, golden, ["x", "y", "z", "zz"])] * 7)
    assert [x["same_candidates"] for x in compare([a, d])["comparisons"]] == [False]
    old = select_dir(tmp_path, "old", [(True, golden, ["x", "y", "z", "w"])] * 7)
    rows = [json.loads(line) for line in (old / "problems.jsonl").read_text().splitlines()]
    (old / "problems.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "code_sha"}) + "\n"
                                                for r in rows))
    assert [x["same_candidates"] for x in compare([old, a])["comparisons"]] == [None]
    assert [x["same_candidates"] for x in compare([a, old])["comparisons"]] == [None]
