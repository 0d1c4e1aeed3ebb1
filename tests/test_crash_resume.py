"""kill -9 at named moments of a tiny run, resume in a fresh process, compare bit for bit.

Each moment's hook (tests/crash_harness.py, MOMENTS) makes the training process SIGKILL
itself there. Runs start in a process with PYTHONHASHSEED=1 and are resumed with
`--resume` in processes with PYTHONHASHSEED=2; the uninterrupted reference runs with
PYTHONHASHSEED=1. Two runs go through several kills each, one after another:

    first:  book:1 (book at step 1, no checkpoint yet) -> checkpoint:2 (half written)
            -> config:0 (`--steps 3` being recorded) -> prune:3 (step-2 half deleted)
            -> resume to the end
    second: judge:2 -> book:3 (book ahead of checkpoint step-2) -> update:3 (one role
            updated) -> publish:3 (step-3 in place, step-2 not yet pruned) -> resume

after which the weights, optimiser, scheduler and RNG state of the last checkpoint, the
Mistake Book's rows in insertion order, metrics.jsonl, samples.jsonl, config.yaml and the
run directory's listing must equal the reference's. The jobs run in forked children of
two harness processes, so the module pays for two imports of torch, not one per process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crash_harness import FAST_OVERRIDES, Harness, differences
from tiny_run import tiny_overrides, tiny_paths

from codea1.train.config import check_run_config, config_to_yaml, load_config
from codea1.train.loop import train

STEPS = 3
FIRST = ["book:1", "checkpoint:2", "config:0", "prune:3", None]
SECOND = ["judge:2", "book:3", "update:3", "publish:3", None]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    a, b = Harness(1, root / "harness").start(), Harness(2, root / "harness").start()
    try:
        tiny = tiny_paths(root / "tiny")
        overrides = [*tiny_overrides(tiny, "a1", STEPS), *FAST_OVERRIDES]
        run = {"overrides": overrides}
        a.submit([{"make_tiny": str(root / "tiny")},
                  {**run, "run_dir": str(root / "reference")},
                  {**run, "run_dir": str(root / "first"), "steps": STEPS - 1, "crash_at": FIRST[0]},
                  {**run, "run_dir": str(root / "second"), "crash_at": SECOND[0]}])
        started = a.wait()
        resumed = [{"run_dir": str(root / "first"), "resume": True, "crash_at": at,
                    "steps": STEPS if at in ("config:0", "prune:3") else None} for at in FIRST[1:]]
        resumed += [{"run_dir": str(root / "second"), "resume": True, "crash_at": at} for at in SECOND[1:]]
        names = ("reference", "first", "second")
        resumed.append({"fingerprint": {n: str(root / n) for n in names}, "out": str(root / "prints.json")})
        b.submit(resumed)
        *results, prints = started + b.wait()
        assert prints["ended"] == "exit 0", prints["log"]
    finally:
        a.close()
        b.close()
    prints = json.loads((root / "prints.json").read_text())  # JSON: tuples are lists, as in `differences`
    by_run: dict[str, list[dict]] = {}
    for r in results[1:]:
        by_run.setdefault(Path(r["job"]["run_dir"]).name, []).append(r)
    return {"root": root, "overrides": overrides, "jobs": by_run, "prints": prints,
            "reference": prints["reference"]}


def _ended(runs, name, index):
    """The job's result, checked to have ended as planned (killed at its moment, or done)."""
    r = runs["jobs"][name][index]
    expected = "killed" if r["job"].get("crash_at") else "exit 0"
    assert r["ended"] == expected, f"{r['job']}: {r['ended']}, expected {expected}\n{r['log']}"
    return r


def _same_as_reference(runs, name):
    for i in range(len(runs["jobs"][name])):
        _ended(runs, name, i)
    got = runs["prints"][name]
    assert differences(runs["reference"], got) == [], name
    return got


def test_the_reference_is_a_meaningful_yardstick(runs):
    _ended(runs, "reference", 0)
    ref = runs["reference"]
    assert [r["step"] for r in ref["metrics"]] == [1, 2, 3]
    assert ref["state"]["step"] == STEPS
    assert [f for f in ref["files"] if f.count("/") == 1 and f.startswith("checkpoints/")] == ["checkpoints/step-3"]
    # several tests enter the book in one step for one problem, so their order is observable
    firsts = [(pid, first) for pid, _t, _f, _s, first, _l in ref["book"]["tests"]]
    assert any(firsts.count(k) > 1 for k in firsts), ref["book"]
    assert ref["book"] == ref["checkpoint_book"]


def test_kill_after_the_first_book_commit_before_any_checkpoint(runs):
    """Case 1: the book holds step 1 and no checkpoint exists; the resume starts as a new
    run does (an empty book) instead of failing on 'step 1 is not after ... step 1'."""
    killed = _ended(runs, "first", 0)
    assert "mistakes.sqlite" in killed["files"] and not any(f.startswith("checkpoints/step-") for f in killed["files"])
    resumed = _ended(runs, "first", 1)  # started again, killed at its step-2 checkpoint
    assert any(f.startswith("checkpoints/.tmp-step-2-") for f in resumed["files"])
    assert _ended(runs, "second", 1)["job"]["crash_at"] == "book:3"  # judge:2 left a book at step 1 too


def test_kill_after_a_book_commit_rolls_the_book_back_to_the_checkpoint(runs):
    """Step 3's commit is in the live book, the checkpoint is step 2's: the resume rolls
    the book back and applies step 3 again, once."""
    assert "checkpoints/step-2/state.json" in _ended(runs, "second", 1)["files"]
    _ended(runs, "second", 2)
    got = _same_as_reference(runs, "second")
    assert [s[0] for s in got["book"]["steps"]] == [1, 2, 3]


def test_kill_while_pruning_leaves_nothing_half_deleted(runs):
    """Case 2: the old checkpoint is renamed away before it is deleted (no `step-2`
    without its state.json), and the leftover goes when the run resumes."""
    killed = _ended(runs, "first", 3)
    ckpts = {f.split("/")[1] for f in killed["files"] if f.startswith("checkpoints/") and "/" in f}
    assert "step-3" in ckpts and "step-2" not in ckpts
    assert any(c.startswith(".deleting-step-2-") for c in ckpts), ckpts
    got = _same_as_reference(runs, "first")
    assert not any("/." in f for f in got["files"])


def test_a_checkpoint_renamed_but_not_yet_pruned(runs):
    killed = _ended(runs, "second", 3)
    assert {"checkpoints/step-2/state.json", "checkpoints/step-3/state.json"} <= set(killed["files"])
    _same_as_reference(runs, "second")  # step-2 pruned when the run resumed


def test_every_order_is_independent_of_the_hash_seed(runs):
    """Case 3: the first run's last attempt ran all three steps under PYTHONHASHSEED=2, the
    reference under 1: the same Mistake Book rows in the same insertion order, and the
    same everything else."""
    got = _same_as_reference(runs, "first")
    assert got["book"]["tests"] == runs["reference"]["book"]["tests"]


def test_a_kill_while_config_yaml_is_rewritten(runs):
    """Case 4: `--resume --steps 3` records 3 in config.yaml atomically; killed while doing
    so, the old config.yaml stands (its stray temporary goes later), and the next resume
    with the same override ends where a 3-step run does, with steps 3 recorded."""
    killed = _ended(runs, "first", 2)
    assert any(f.startswith(".config.yaml.tmp-") for f in killed["files"])
    assert "config.yaml" in killed["files"]
    got = _same_as_reference(runs, "first")
    assert "\nsteps: 3\n" in got["config"] and got["state"]["config"]["steps"] == STEPS


def _copy_run(runs, tmp_path) -> Path:
    import shutil

    dst = tmp_path / "run"
    shutil.copytree(runs["root"] / "reference", dst)
    return dst


def test_an_empty_config_yaml_is_refused(runs, tmp_path):
    from typer.testing import CliRunner

    from codea1.cli import app

    run = _copy_run(runs, tmp_path)
    (run / "config.yaml").write_text("")
    result = CliRunner().invoke(app, ["train", "--resume", str(run)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "config.yaml: empty" in lines[0], result.output


def test_a_changed_config_yaml_is_refused_with_the_key(runs, tmp_path):
    run = _copy_run(runs, tmp_path)
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text.replace("problems_per_step: 2", "problems_per_step: 3"))
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    with pytest.raises(ValueError, match=r"config\.yaml: 'data\.problems_per_step' is 3 but checkpoint "
                                         r"step-3 was trained with 2"):
        train(None, run, resume=True)
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before  # nothing touched


def test_a_config_yaml_cut_short_with_no_checkpoint_is_refused(tmp_path, runs):
    run = tmp_path / "run"
    run.mkdir()
    cfg = load_config(preset="cpu-demo", overrides=runs["overrides"])
    text = config_to_yaml(cfg)
    (run / "config.yaml").write_text(text[: text.index("\nlogging:")] + "\n")
    with pytest.raises(ValueError, match=r"config\.yaml: incomplete, logging\.samples_per_step"):
        train(None, run, resume=True)


def test_a_checkpoint_of_an_older_version_is_checked_by_its_digest(runs, tmp_path):
    """state.json without `config` (older checkpoints): config.yaml must match config_sha256."""
    run = _copy_run(runs, tmp_path)
    state_path = run / "checkpoints" / "step-3" / "state.json"
    state = json.loads(state_path.read_text())
    del state["config"]
    state_path.write_text(json.dumps(state))
    import yaml

    raw = yaml.safe_load((run / "config.yaml").read_text())
    check_run_config(raw, run / "config.yaml", state)  # unchanged: accepted
    raw["seed"] = 1
    with pytest.raises(ValueError, match="config_sha256"):
        check_run_config(raw, run / "config.yaml", state)
