"""`codea1 judge`: the debugging CLI's JSON keys, table and input errors.

Kept apart from test_judge.py: the command starts its own executor, which must not live
alongside that module's shared one.
"""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from codea1.judge.cli import judge_command
from test_judge import ADD, BAD, SUITE


def _cli():
    app = typer.Typer()
    app.command()(judge_command)
    return app


def test_cli_json_has_the_documented_keys(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(ADD.to_dict()))
    (tmp_path / "code.txt").write_text(BAD)
    (tmp_path / "tests.txt").write_text(SUITE)
    (tmp_path / "mb.txt").write_text("# history\nassert add(3, 7) == 10\n\n")
    args = ["--problem", str(tmp_path / "p.json"), "--code", str(tmp_path / "code.txt"), "--tests", str(tmp_path / "tests.txt")]
    result = CliRunner().invoke(_cli(), args + ["--mistakes", str(tmp_path / "mb.txt"), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert {"code_valid", "code_reward", "test_reward", "valid_ratio", "tests"} <= set(record)
    assert record["code_valid"] is True
    assert record["valid_ratio"] == pytest.approx(3 / 8)  # 3 kept (2 corrected), 4 invalid
    assert record["test_reward"] == pytest.approx(0.5 * 3 / 8 + 0.5 * 1 / 16)
    assert record["code_reward"] == pytest.approx(1 / 3)
    assert len(record["tests"]) == 5  # (the print line is no test)
    for t in record["tests"]:
        assert {"source", "normalized", "valid", "reason", "passed"} <= set(t)
        assert t["passed"] is None or t["valid"]
    assert [t["passed"] for t in record["tests"]] == [True, None, None, None, None]
    assert record["tests"][1]["used_passed"] is False
    table = CliRunner().invoke(_cli(), args + ["--alpha", "0.3"])
    assert table.exit_code == 0 and "test reward" in table.output
    said = " ".join(table.output.split())  # (rich wraps at the terminal's width)
    assert "5 tests: 3 count as valid, 4 as invalid (1 duplicate, 1 reference raised, 2 wrong expectation)" in said
    assert "2 rewritten tests counted as both; valid ratio min(3/8, 1 - 4/8) = 0.375" in said
    assert "rewritten: the test's expected value was wrong" in said  # what 'rewritten' means
    rows = [line for line in table.output.splitlines() if line.startswith("│ 2 ")]
    assert rows and "rewritten" in rows[0] and "no" in rows[0]  # ran in its corrected form, and failed
    missing = CliRunner().invoke(_cli(), ["--problem", str(tmp_path / "nope.json")] + args[2:])
    assert missing.exit_code == 2 and "cannot read" in missing.output
    (tmp_path / "bad.json").write_text('{"id": "x"}')
    bad = CliRunner().invoke(_cli(), ["--problem", str(tmp_path / "bad.json")] + args[2:])
    assert bad.exit_code == 2 and "question" in bad.output


def test_cli_says_which_mistake_book_lines_it_did_not_replay(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(ADD.to_dict()))
    (tmp_path / "code.txt").write_text(BAD)
    (tmp_path / "tests.txt").write_text(SUITE)
    (tmp_path / "mb.txt").write_text(
        "# history\n"
        "assert add(3, 7) == 10\n"          # 2: replayed
        "add(1, 1)\n"                       # 3: not an assert
        "assert add('a', 1) == 'a1'\n"      # 4: the reference raises
        "assert add(1, 1) == 2; assert add(2, 2) == 4\n"  # 5: two tests on one line
        "assert add(0, 1) == 1\n"           # 6: beyond G=4
    )
    args = ["--problem", str(tmp_path / "p.json"), "--code", str(tmp_path / "code.txt"),
            "--tests", str(tmp_path / "tests.txt"), "--mistakes", str(tmp_path / "mb.txt"), "--suite-size", "4"]
    result = CliRunner().invoke(_cli(), args + ["--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    # (the reference replays a stored test on the candidate as it is, one the reference
    # itself would raise on too: it fails there, it is not skipped)
    assert [m["test"] for m in record["mistakes"]] == ["assert add(3, 7) == 10", "assert add('a', 1) == 'a1'"]
    skipped = {m["line"]: m["reason"] for m in record["mistakes_skipped"]}
    assert sorted(skipped) == [3, 5, 6]
    assert skipped[3].startswith("not a test")
    assert skipped[5] == "2 statements, not one test"
    assert skipped[6].startswith("beyond the first 4 tests")
    table = CliRunner().invoke(_cli(), args)
    assert table.exit_code == 0 and "why not replayed" in table.output


def test_the_table_shows_a_long_value_shortened_and_the_json_keeps_it_whole(tmp_path):
    """A reference returning a long list: the table printed the whole corrected test (7 MB
    seen); it shows 200 characters and the length, while --json keeps the test exact."""
    from codea1.data import Problem

    problem = Problem(id="big", question="def big(n):", entry_point="big",
                      reference="def big(n):\n    return list(range(n))\n", tests=["assert big(2) == [0, 1]"])
    (tmp_path / "p.json").write_text(json.dumps(problem.to_dict()))
    (tmp_path / "code.txt").write_text("```python\n" + problem.reference + "```\n")
    (tmp_path / "tests.txt").write_text("```python\nassert big(20000) == [0]\n```\n")
    args = ["--problem", str(tmp_path / "p.json"), "--code", str(tmp_path / "code.txt"),
            "--tests", str(tmp_path / "tests.txt")]
    record = json.loads(CliRunner().invoke(_cli(), args + ["--json"]).output)
    whole = record["tests"][0]["normalized"]
    assert whole == f"assert big(20000) == {list(range(20000))!r}"
    table = CliRunner().invoke(_cli(), args, env={"COLUMNS": "300"})
    assert table.exit_code == 0, table.output
    assert len(table.output) < 5000 and f"({len(whole):,} characters)" in " ".join(table.output.split())
