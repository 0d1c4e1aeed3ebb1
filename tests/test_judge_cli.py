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
    assert record["valid_ratio"] == pytest.approx(1 / 8)
    assert record["test_reward"] == pytest.approx(0.5 * 1 / 8 + 0.5 * 1 / 16)
    assert record["code_reward"] == pytest.approx(1 / 3)
    assert len(record["tests"]) == 6
    for t in record["tests"]:
        assert {"source", "normalized", "valid", "reason", "passed"} <= set(t)
        assert t["passed"] is None or t["valid"]
    assert [t["passed"] for t in record["tests"]] == [True, None, None, None, None, None]
    assert record["tests"][1]["used_passed"] is False
    table = CliRunner().invoke(_cli(), args + ["--alpha", "0.3"])
    assert table.exit_code == 0 and "test reward" in table.output and "valid_ratio 0.125" in table.output
    missing = CliRunner().invoke(_cli(), ["--problem", str(tmp_path / "nope.json")] + args[2:])
    assert missing.exit_code == 2 and "cannot read" in missing.output
    (tmp_path / "bad.json").write_text('{"id": "x"}')
    bad = CliRunner().invoke(_cli(), ["--problem", str(tmp_path / "bad.json")] + args[2:])
    assert bad.exit_code == 2 and "question" in bad.output
