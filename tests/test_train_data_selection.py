"""What a run trains on: bundled splits (the cpu-demo's `bundled:demo`) and `data.include`."""

from __future__ import annotations

import dataclasses

import pytest

from codea1.data import bundled_problems
from codea1.data.bundled import DEMO_IDS
from codea1.train.config import load_config
from codea1.train.loop import load_training_data, select_problems


def ids(problems):
    return [p.id for p in problems]


def test_the_demo_split_is_eight_training_problems_with_golden_tests():
    demo = bundled_problems("demo")
    train = ids(bundled_problems("train"))
    assert ids(demo) == [i for i in train if i in DEMO_IDS]          # file order
    assert len(demo) == len(DEMO_IDS) == 8
    assert not set(ids(demo)) & set(ids(bundled_problems("heldout")))  # never a held-out problem
    assert all(len(p.tests) >= 5 for p in demo)


def test_cpu_demo_trains_on_the_demo_split_and_bundled_still_means_all_72():
    train, heldout = load_training_data(load_config(preset="cpu-demo"))
    assert ids(train) == ids(bundled_problems("demo")) and len(heldout) == 18
    train, heldout = load_training_data(load_config(preset="cpu-demo", overrides=["data.train=bundled"]))
    assert len(train) == 72 and ids(heldout) == ids(bundled_problems("heldout"))
    train, heldout = load_training_data(load_config(
        preset="cpu-demo", overrides=["data.train=bundled:all", "data.heldout=bundled:demo"]))
    assert len(train) == 90 and len(heldout) == 8
    train, heldout = load_training_data(load_config(preset="cpu-demo", overrides=["data.heldout=null"]))
    assert heldout == []


def test_include_keeps_ids_and_patterns_in_file_order():
    problems = bundled_problems("train")
    picked = select_problems(problems, ["a1/087-longest-consecutive-run", "a1/00*"])
    assert ids(picked) == [i for i in ids(problems) if i.startswith("a1/00")] + ["a1/087-longest-consecutive-run"]
    cfg = load_config(preset="cpu-demo", overrides=["data.train=bundled", "data.include=[a1/01*, a1/002-*]"])
    train, _ = load_training_data(cfg)
    assert ids(train)[0].startswith("a1/002-") and all(i.startswith(("a1/01", "a1/002-")) for i in ids(train))


def test_include_refuses_a_pattern_that_matches_nothing_and_an_empty_list():
    problems = bundled_problems("demo")
    with pytest.raises(ValueError, match=r"data.include: no problem of 'x.jsonl' matches 'a1/001-\*', 'nope'"):
        select_problems(problems, ["a1/006-digit-sum", "a1/001-*", "nope"], source="x.jsonl")
    with pytest.raises(ValueError, match="data.include is empty"):
        select_problems(problems, [])
    with pytest.raises(ValueError, match=r"data.train: 'bundled:hard': unknown bundled split"):
        load_training_data(load_config(preset="cpu-demo", overrides=["data.train=bundled:hard"]))


def test_problems_without_a_reference_are_left_out_with_a_line(tmp_path):
    """A CodeContests file as it ships holds rows with no Python 3 solution: training leaves
    them out and says how many (after data.include), instead of refusing the whole file, so
    TRAINING.md's `data.train=code_contests_train.parquet` trains. Fault tried: the old
    refusal of any unreferenced row, taken before data.include."""
    from codea1.data import save_problems

    rows = bundled_problems("train")[:4]
    rows[1] = dataclasses.replace(rows[1], reference="", meta={"no_reference": True})
    path = tmp_path / "mixed.jsonl"
    save_problems(rows, path)
    said: list[str] = []
    train, _ = load_training_data(load_config(preset="cpu-demo", overrides=[f"data.train={path}"]), said.append)
    assert ids(train) == [rows[0].id, rows[2].id, rows[3].id]
    assert said == [f"data.train: left out 1 of 4 problems that have no reference solution (the judge needs one; "
                    f"they can be evaluated, not trained on): {rows[1].id}"]
    said.clear()   # include chosen first: the unreferenced row is not asked for, nothing is said
    train, _ = load_training_data(load_config(preset="cpu-demo", overrides=[
        f"data.train={path}", f"data.include=[{rows[0].id}]"]), said.append)
    assert ids(train) == [rows[0].id] and said == []
    with pytest.raises(ValueError, match="no problem has a reference solution"):
        load_training_data(load_config(preset="cpu-demo", overrides=[
            f"data.train={path}", f"data.include=[{rows[1].id}]"]))
