"""The fidelity table (docs/ARCHITECTURE.md, "Fidelity to the reference"): the reference's
semantics by default, each project alternative a key that is off by default."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from codea1.judge.config import REFERENCE_SWITCHES, JudgeConfig
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


def test_reference_defects_not_reproduced_have_rows_with_a_test():
    defects = [row for row in _table_rows() if row[0] == "reference defect, not reproduced"]
    assert len(defects) >= 3  # NameError in `!=`, an object without __eq__, repr()[1:-1]
    for row in defects:
        assert "`" in row[1] and row[2], row  # a concrete input and both outcomes


def test_every_judge_switch_is_a_trainer_key_with_the_same_default_and_a_row():
    keys = {cell for row in _table_rows() for cell in re.findall(r"`([\w.]+)`", row[0])}
    section = TrainConfig().judge
    defaults = JudgeConfig()
    for name in REFERENCE_SWITCHES:
        assert getattr(section, name) == getattr(defaults, name), name
        assert type(section).model_fields[name].description, name
    assert "mistakes.once_per_candidate" in keys
    assert TrainConfig().mistakes.once_per_candidate is False
    for name in REFERENCE_SWITCHES:  # every switch has its row
        if name not in ("float_rtol", "float_atol", "unicode_printable", "exact_types"):
            assert getattr(defaults, name) is False, f"judge.{name} must be off by default"
        assert f"judge.{name}" in keys, f"judge.{name} has no row in the fidelity table"
    assert "mistakes.net_changes" in keys and TrainConfig().mistakes.net_changes is False
    for key in keys:  # dotted paths of any depth (rollout.code.cut_prompts_left)
        node = TrainConfig()
        for part in key.split("."):
            assert part in type(node).model_fields, f"{key} is no config key"
            node = getattr(node, part)


# -- one hand-made step through every rule of the table -----------------------------------

from collections import Counter  # noqa: E402

import pytest  # noqa: E402

from codea1.data import Problem  # noqa: E402
from codea1.judge import Judge, ProblemRollout  # noqa: E402
from codea1.mistakes import MistakeBook, MistakeUpdate  # noqa: E402
from codea1.sandbox import Executor, Limits  # noqa: E402

TALLY = Problem(
    id="t/tally", question="def tally(box): ...", entry_point="tally",
    reference=("from collections import Counter\nclass Box:\n    def __init__(self, items):\n"
               "        self.items = items\ndef tally(box):\n    return Counter(box.items)\n"),
)
BOX = "from collections import Counter\nclass Box:\n    def __init__(self, items):\n        self.items = items\n"
RIGHT = "```python\n" + BOX + "def tally(box):\n    return dict(Counter(box.items))\n```"  # a dict, not a Counter
WRONG = "```python\n" + BOX + "def tally(box):\n    return Counter(set(box.items))\n```"  # counts every item once
SUITE_1 = (
    "```python\n"
    "print('checking')\n"                                # not a test: ignored (item 2)
    "assert tally(Box([1, 1, 2])) == {1: 2, 2: 1}\n"     # Counter == dict (item 5), Box is the reference's (item 4)
    "assert tally(Box([3])) != {3: 1}\n"                 # reads as == {3: 1} (item 3): right
    "assert tally(Box([4, 4])) == {4: 1}\n"              # wrong expectation: valid and invalid (item 1)
    "```\n"
)
SUITE_2 = (
    "Tests (é):\n"                                       # one non-ASCII character (item 8)
    "assert tally(Box([1, 1, 2])) == Counter({1: 2, 2: 1})\n"
    "assert tally(Box([]))\n"                            # no python block: an unreadable assert line is invalid
    "assert tally(Box([5, 5, 5])) == {5: 3}\n"
)
MISTAKE = "assert tally(Box([9, 9])) == {9: 2}"


def test_a_hand_made_step_follows_every_reference_rule(tmp_path):
    limits = Limits(timeout_s=10.0, call_timeout_s=2.0)
    rollout = ProblemRollout(TALLY, [RIGHT, WRONG], [[SUITE_1, SUITE_2]] * 2, [MISTAKE])
    with Executor(workers=2, limits=limits) as executor:
        judge = Judge(executor, JudgeConfig(limits=limits, reference_limits=limits))
        first, second = judge.judge_step([rollout, rollout])  # the problem twice in one step (item 7)
    np2 = 1 / len(SUITE_2)
    for r in (first, second):
        assert r.usable and r.code_valid == [True, True]
        s1, s2 = r.suites[0]
        assert (s1.valid, s1.invalid, s2.valid, s2.invalid) == (3, 1, 2, 1)
        assert (s1.valid_ratio, s2.valid_ratio) == (3 / 8, 2 / 8)
        assert (s1.nonprintable, s2.nonprintable) == (0.0, pytest.approx(np2))
        # RIGHT passes all: pass = (mb 1 + gen 1) / 2, attack = (0 - 0 + 1) / 2
        assert r.code_rewards[0] == pytest.approx(1.0)
        assert r.test_rewards[0] == pytest.approx([0.5 * 3 / 8 + 0.25, 0.5 * 2 / 8 + 0.25 - np2])
        # WRONG: suite 1 passes 1 of 3 ({3: 1}), suite 2 none of 2, the Mistake Book test fails
        w1, w2 = r.suites[1]
        assert [t.passed for t in w1.tests] == [False, True, False] and [t.passed for t in w2.tests] == [False, None, False]
        assert (w1.pass_score, w1.attack) == (pytest.approx((0 + 1 / 3) / 2), pytest.approx((2 / 8 - 1 + 1) / 2))
        assert (w2.pass_score, w2.attack) == (0.0, pytest.approx((2 / 8 - 1 + 1) / 2))
        assert r.code_rewards[1] == pytest.approx((1 / 6 + 0) / 2)
        assert r.test_rewards[1] == pytest.approx([0.5 * 3 / 8 + 0.5 / 8, 0.5 * 2 / 8 + 0.5 / 8 - np2])
    # Mistake Book: +1 per (valid candidate, suite) pair in which a test failed (item 6)
    counter = "__import__('collections').Counter"
    t1 = f"assert tally(Box([1, 1, 2])) == {counter}({{1: 2, 2: 1}})"
    t4 = f"assert tally(Box([4, 4])) == {counter}({{4: 2}})"
    t5 = f"assert tally(Box([5, 5, 5])) == {counter}({{5: 3}})"
    update = first.mistake_update()
    assert update == MistakeUpdate(Counter({t1: 2, t4: 1, t5: 1}), Counter({MISTAKE: 1}))
    with MistakeBook(tmp_path / "book.sqlite") as book:
        book.apply_step(1, {TALLY.id: MistakeUpdate(Counter({MISTAKE: 3}))})
        book.apply_step(2, [(TALLY.id, first.mistake_update()), (TALLY.id, second.mistake_update())])
        assert {e.test: e.frequency for e in book.entries(TALLY.id)} == {t1: 4, t4: 2, t5: 2, MISTAKE: 1}
