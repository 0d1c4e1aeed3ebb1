"""The fidelity table (docs/ARCHITECTURE.md, "Fidelity to the reference"): the reference's
semantics by default, each project alternative a key that is off by default."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from codea1.judge.judge import REFERENCE_SWITCHES, JudgeConfig
from codea1.train.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def _table_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Fidelity to the reference", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| key")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_every_test_the_table_names_exists():
    rows = _table_rows()
    assert len(rows) >= 4
    for row in rows:
        assert len(row) == 5, row
        names = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row[4])
        assert names, f"row {row[0]} names no test"
        for path, name in names:
            tree = ast.parse((ROOT / path).read_text())
            defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
            assert name in defined, f"{path}::{name} (named by the row {row[0]}) does not exist"


def test_every_judge_switch_is_a_trainer_key_with_the_same_default_and_a_row():
    keys = {cell for row in _table_rows() for cell in re.findall(r"`([\w.]+)`", row[0])}
    section = TrainConfig().judge
    defaults = JudgeConfig()
    for name in REFERENCE_SWITCHES:
        assert getattr(section, name) == getattr(defaults, name), name
        assert type(section).model_fields[name].description, name
    assert "mistakes.once_per_candidate" in keys
    assert TrainConfig().mistakes.once_per_candidate is False
    for key in keys:
        group, name = key.split(".", 1)
        assert name in type(getattr(TrainConfig(), group)).model_fields, f"{key} is no config key"
