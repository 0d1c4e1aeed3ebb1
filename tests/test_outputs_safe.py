"""Nothing lost: no command writes its output over one of its inputs, and none writes a file
in place (a failed write keeps what was there). One test per command that writes a file,
each bad case checked with a byte-identical snapshot of the directory afterwards.

The audit (`codea1 --help`, each subcommand): files are written by `mistakes export` (OUT),
`data convert` (OUT), `eval code|tests|select` (--out DIR), `plot` (--out DIR) and `train`
(--run-dir); `judge`, `sandbox run|check`, `data check`, `eval mutants`, `mistakes
stats|list|show` and `config show|keys` print only, which the last test checks."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from test_cli_errors import inputs, run_bad, snapshot  # noqa: F401  (inputs: a fixture)
from typer.testing import CliRunner

from codea1.cli import app
from codea1.data import bundled_problems, save_problems
from codea1.mistakes import MistakeBook, MistakeUpdate
from codea1.output_files import atomic_output, atomic_write_text, input_named_as_output, remove_stray_temps


def _book(run: Path) -> Path:
    with MistakeBook(run / "mistakes.sqlite") as book:
        book.apply_step(3, {"MBPP/2": MistakeUpdate(Counter({"assert f(1) == 2": 2, "assert f(0) == 0": 1}),
                                                    Counter())})
    return run / "mistakes.sqlite"


def _no_temps(root: Path) -> bool:
    return not [p for p in root.rglob("*") if ".tmp" in p.name]


# --- the helpers ------------------------------------------------------------------------------


def test_atomic_output_replaces_whole_or_not_at_all(tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_text("previous\n")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert target.read_text() == "previous\n" and _no_temps(tmp_path)
    with atomic_output(target) as tmp:
        assert tmp.parent == target.parent and tmp.suffix == ".jsonl" and tmp != target
        tmp.write_text("new\n")
    assert target.read_text() == "new\n" and _no_temps(tmp_path)


def test_atomic_write_text_leaves_nothing_and_its_strays_are_cleared(tmp_path):
    """config.yaml's writer is the one atomic writer's text form: the text replaces the file
    whole with nothing left beside it, and `remove_stray_temps` clears what a kill mid-write
    leaves (`.NAME.tmp-*`, the writer's own names) and nothing of the user's. Fault tried:
    `remove_stray_temps` globbing `NAME.tmp*` (the user's `config.yaml.tmp` deleted, the
    stray kept): this test failed."""
    target = tmp_path / "config.yaml"
    atomic_write_text(target, "steps: 1\n")
    atomic_write_text(target, "steps: 2\n")
    assert target.read_text() == "steps: 2\n" and _no_temps(tmp_path)
    stray = tmp_path / f".config.yaml.tmp-{os.getpid()}"          # a kill between write and rename
    stray.write_text("steps: 3")
    (tmp_path / "config.yaml.tmp").write_text("mine\n")
    assert remove_stray_temps(target) == [stray]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "config.yaml.tmp"]


def test_an_output_naming_an_input_is_found_through_links_and_dots(tmp_path):
    book = tmp_path / "run" / "mistakes.sqlite"
    book.parent.mkdir()
    book.write_text("book")
    (tmp_path / "link.sqlite").symlink_to(book)
    os.link(book, tmp_path / "hard.sqlite")
    for alias in (book, tmp_path / "run" / ".." / "run" / "mistakes.sqlite", tmp_path / "link.sqlite",
                  tmp_path / "hard.sqlite"):
        assert input_named_as_output(alias, [book]) == book, alias
    assert input_named_as_output(tmp_path / "other.jsonl", [book]) is None
    assert input_named_as_output(tmp_path / "run" / "mistakes.sqlite-wal", [book.with_name("mistakes.sqlite-wal")])
    (tmp_path / "run" / "metrics.jsonl").write_text("{}\n")
    assert input_named_as_output(tmp_path / "run" / "metrics.jsonl", directories=[tmp_path / "run"])
    # a new path inside counts too: let through once, it would be refused when run again
    assert input_named_as_output(tmp_path / "run" / "new.jsonl", directories=[tmp_path / "run"])
    assert input_named_as_output(tmp_path / "new.jsonl", directories=[tmp_path / "run"]) is None


# --- mistakes export --------------------------------------------------------------------------


@pytest.mark.parametrize("out", [
    "run/mistakes.sqlite", "./run/../run/mistakes.sqlite", "book-link.sqlite", "run/mistakes.sqlite-wal",
    "run/metrics.jsonl", "run/checkpoints/step-2/state.json",
])
def test_mistakes_export_onto_the_book_or_its_run_is_refused(inputs, out):  # noqa: F811
    run = inputs / "run"
    (run / "mistakes.sqlite").unlink()
    _book(run)
    (run / "checkpoints" / "step-2").mkdir(parents=True)
    (run / "checkpoints" / "step-2" / "state.json").write_text("{}\n")
    (inputs / "book-link.sqlite").symlink_to(run / "mistakes.sqlite")
    for named in (["mistakes", "export", "run", out], ["mistakes", "export", "run/mistakes.sqlite", out]):
        line = run_bad(inputs, named)
        assert "Invalid value for OUT" in line and ("Mistake Book being exported" in line or "run directory" in line)
    with MistakeBook(run, readonly=True) as book:       # the book still reads
        assert book.stats().tests == 2


def test_mistakes_export_writes_through_a_temporary_file(tmp_path, monkeypatch):
    run = tmp_path / "run"
    _book(run)
    out = tmp_path / "mistakes.jsonl"
    out.write_text("an older export\n")
    runner = CliRunner()
    real = MistakeBook.export_jsonl

    def failing(self, path):
        Path(path).write_text('{"problem_id": "MBPP/2"')   # half a row, then the disk fills up
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(MistakeBook, "export_jsonl", failing)
    result = runner.invoke(app, ["mistakes", "export", str(run), str(out)])
    # a full disk: its own exit code, and the file named (issue 45)
    assert result.exit_code == 3 and f"{out}: no space left on device (the disk is full)" in result.stderr
    assert out.read_text() == "an older export\n" and _no_temps(tmp_path)
    monkeypatch.setattr(MistakeBook, "export_jsonl", real)
    result = runner.invoke(app, ["mistakes", "export", str(run), str(run / "mistakes.jsonl")])  # in the run: no
    assert result.exit_code == 2 and "run directory" in result.stderr and not (run / "mistakes.jsonl").exists()
    result = runner.invoke(app, ["mistakes", "export", str(run), str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["test"] for r in rows] == ["assert f(1) == 2", "assert f(0) == 0"] and _no_temps(tmp_path)


# --- data convert -----------------------------------------------------------------------------


def test_data_convert_onto_its_source_is_refused(inputs):  # noqa: F811
    (inputs / "ok-link.jsonl").symlink_to(inputs / "ok.jsonl")
    for out in ("ok.jsonl", "./ok.jsonl", "ok-link.jsonl"):
        line = run_bad(inputs, ["data", "convert", "ok.jsonl", out])
        assert "is the SOURCE file being converted" in line
    line = run_bad(inputs, ["data", "convert", "ok-link.jsonl", "ok.jsonl"])
    assert "SOURCE" in line


def test_data_convert_never_touches_a_file_beside_out(tmp_path):
    """The temporary file is a fresh name: a user's `out.jsonl.tmp` is neither clobbered nor removed."""
    save_problems(bundled_problems("train")[:2], tmp_path / "in.jsonl")
    (tmp_path / "out.jsonl.tmp").write_text("mine\n")
    result = CliRunner().invoke(app, ["data", "convert", str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.jsonl.tmp").read_text() == "mine\n"
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "in.jsonl").read_bytes()


# --- eval code / tests ------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["code", "tests"])
def test_eval_out_over_its_inputs_is_refused(inputs, command):  # noqa: F811
    (inputs / "run" / "samples.jsonl").write_text('{"step": 1, "code": "x"}\n')   # a training run's samples
    (inputs / "run" / "summary.json").write_text("{}\n")
    evaluation = inputs / "evaluation"
    evaluation.mkdir()
    save_problems(bundled_problems("train")[:2], evaluation / "samples.jsonl")   # --data named like a sample file
    cases = [
        (["--model", "run", "--data", "ok.jsonl", "--out", "run"], "lies in the model directory"),
        (["--model", ".", "--data", "ok.jsonl", "--out", "run"], "lies in the model directory"),
        (["--model", "x", "--data", "ok.jsonl", "--out", "run"], "holds samples.jsonl, summary.json that no "
                                                                   "evaluation wrote"),
        (["--model", "x", "--data", "evaluation/samples.jsonl", "--out", "evaluation"], "write over the --data file"),
        (["--model", "x", "--data", "evaluation/../evaluation/samples.jsonl", "--out", "./evaluation"],
         "write over the --data file"),
    ]
    for args, expected in cases:
        line = run_bad(inputs, ["eval", command, *args])
        assert expected in line, line


def test_eval_select_out_over_its_inputs_is_refused(inputs):  # noqa: F811
    """`eval select` writes problems.jsonl, codes.jsonl and tests.jsonl too: it once took none of
    the checks above, so `--data D/codes.jsonl --out D` cut the data file's last line (a
    torn-row repair) and appended rows to it."""
    (inputs / "run" / "samples.jsonl").write_text('{"step": 1, "code": "x"}\n')
    selection = inputs / "selection"
    selection.mkdir()
    (selection / "codes.jsonl").write_bytes(
        (inputs / "ok.jsonl").read_bytes().rstrip(b"\n"))   # --data named like a file it writes, no last newline
    (inputs / "foreign").mkdir()
    (inputs / "foreign" / "problems.jsonl").write_text("{}\n")
    select = ["eval", "select", "--test-model", "x"]
    cases = [
        (["--code-model", "x", "--data", "selection/codes.jsonl", "--out", "selection"],
         "write over the --data file"),
        (["--code-model", "run", "--data", "ok.jsonl", "--out", "run"], "lies in the model directory run"),
        (["--code-model", "x", "--test-model", "run", "--data", "ok.jsonl", "--out", "run"],
         "lies in the model directory run"),
        (["--codes-from", "selection", "--data", "ok.jsonl", "--out", "selection"],
         "lies in the --codes-from directory selection"),
        (["--code-model", "x", "--data", "ok.jsonl", "--out", "foreign"],
         "holds problems.jsonl that no evaluation wrote"),
    ]
    for args, expected in cases:
        line = run_bad(inputs, [*select, *args])
        assert expected in line, line


def test_eval_files_are_written_whole(tmp_path, monkeypatch):
    from codea1.eval import store

    out = tmp_path / "e"
    out.mkdir()
    store.write_summary(out, {"sources": {"all": {"pass@1": 0.5}}})

    def disk_full(self, text, *args, **kwargs):
        with open(self, "w") as handle:
            handle.write(text[:5])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError):
        store.write_summary(out, {"sources": {}})
    monkeypatch.undo()
    assert json.loads((out / store.SUMMARY_FILE).read_text()) == {"sources": {"all": {"pass@1": 0.5}}}
    assert _no_temps(tmp_path)


# --- plot -------------------------------------------------------------------------------------


def test_plot_into_the_run_directory_keeps_its_files_and_a_failed_figure_keeps_the_old(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "code_reward": s / 10}) + "\n"
                                               for s in range(1, 4)))
    before = snapshot(run)
    result = CliRunner().invoke(app, ["plot", str(run), "--out", str(run)])
    assert result.exit_code == 0, result.output
    after = snapshot(run)
    assert {k: v for k, v in after.items() if not k.endswith(".png")} == before
    old = (run / "rewards.png").read_bytes()
    import matplotlib.figure

    def failing(self, fname, **kwargs):
        Path(fname).write_bytes(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", failing)
    result = CliRunner().invoke(app, ["plot", str(run), "--out", str(run)])
    assert result.exit_code == 3 and "rewards.png: no space left on device" in result.stderr
    assert (run / "rewards.png").read_bytes() == old and _no_temps(tmp_path)


# --- train ------------------------------------------------------------------------------------


TRAIN = ["train", "--preset", "cpu-demo"]


def test_train_into_a_directory_of_inputs_is_refused(inputs, monkeypatch):  # noqa: F811
    def started(*args, **kwargs):
        raise AssertionError("the run started: nothing refused it")

    monkeypatch.setattr("codea1.train.loop.train", started)
    evaluation = inputs / "evaluation"
    evaluation.mkdir()
    (evaluation / "samples.jsonl").write_text('{"problem_id": "p", "sample": 0}\n')
    data_dir = inputs / "data"
    data_dir.mkdir()
    save_problems(bundled_problems("train")[:2], data_dir / "samples.jsonl")
    from codea1.train.config import TrainConfig, save_config

    save_config(TrainConfig(steps=1), inputs / "run" / "config.yaml")   # a run's own (crashed) directory
    save_problems(bundled_problems("train")[:2], inputs / "run" / "metrics.jsonl")
    cases = [
        (TRAIN + ["--run-dir", "evaluation"], "evaluation is not empty and not a codea1 run (it holds samples.jsonl)"),
        (TRAIN + ["--run-dir", "data", "--set", "data.train=data/samples.jsonl"], "data is not empty and not a codea1 run"),
        (TRAIN + ["--run-dir", "run", "--set", "data.train=run/metrics.jsonl"],
         "data.train=run/metrics.jsonl is a file the new run in run writes or deletes"),
        (TRAIN + ["--run-dir", "run", "--set", "data.heldout=./run/../run/metrics.jsonl"], "data.heldout="),
    ]
    for args, expected in cases:
        line = run_bad(inputs, args)
        assert expected in line, line


# --- a training run's checkpoints folder --------------------------------------------------------


def test_no_command_writes_into_a_runs_checkpoints_folder(inputs, monkeypatch):  # noqa: F811
    """Training deletes old checkpoints whole and renames new ones into place, so an output
    put there is lost at the next prune (one inside `step-4`), or costs a checkpoint (one
    named `step-9`, which the save of step 9 sets aside and deletes). Each command that
    writes refuses such a path in one line, through `..` and symlinks too; a folder named
    checkpoints that no run owns is an ordinary folder."""
    from codea1.output_files import in_run_checkpoints

    def started(*args, **kwargs):
        raise AssertionError("the run started: nothing refused it")

    monkeypatch.setattr("codea1.train.loop.train", started)
    run = inputs / "run"
    (run / "config.yaml").write_text("steps: 9\n")
    (run / "checkpoints" / "step-4").mkdir(parents=True)
    (run / "checkpoints" / "step-4" / "state.json").write_text('{"step": 4}\n')
    (inputs / "alias").symlink_to(run)
    inside = "lies in the checkpoints of the training run"
    cases = [
        ["mistakes", "export", "run", "run/checkpoints/step-4/book.jsonl"],
        ["data", "convert", "ok.jsonl", "alias/checkpoints/problems.jsonl"],
        ["eval", "code", "--model", "x", "--data", "ok.jsonl", "--out", "run/checkpoints/step-9"],
        ["eval", "tests", "--model", "x", "--data", "ok.jsonl", "--out", "run/checkpoints/../checkpoints/t"],
        ["eval", "select", "--code-model", "x", "--test-model", "x", "--data", "ok.jsonl",
         "--out", "alias/checkpoints/step-4/s"],
        ["eval", "compare", "run", "run", "--out", "run/checkpoints/cmp"],
        ["export", "run", "run/checkpoints/exported", "--role", "code"],
        ["plot", "run", "--out", "run/checkpoints/plots"],
        [*TRAIN, "--run-dir", "run/checkpoints/another-run"],
    ]
    for args in cases:
        line = run_bad(inputs, args)
        assert inside in line, (args, line)
    project = inputs / "project"  # a config.yaml and checkpoints/ of something else
    (project / "checkpoints").mkdir(parents=True)
    (project / "config.yaml").write_text("lr: 1\n")
    assert in_run_checkpoints(project / "checkpoints" / "eval") is None
    assert in_run_checkpoints(run / "checkpoints") == in_run_checkpoints(inputs / "alias" / "checkpoints" / "x") == run
    assert in_run_checkpoints(run / "evals") is None


# --- the commands that write nothing ----------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["config", "show", "--preset", "cpu-demo"], ["config", "keys"], ["eval", "mutants", "code.txt"],
    ["mistakes", "stats", "book"], ["mistakes", "list", "book"], ["mistakes", "show", "book", "MBPP/2"],
    ["data", "check", "ok.jsonl", "--workers", "1"],
    ["judge", "--problem", "problem.json", "--code", "code.txt", "--tests", "tests.txt", "--workers", "1"],
], ids=lambda a: " ".join(a[:2]))
def test_commands_that_print_leave_every_file_as_it_was(inputs, args):  # noqa: F811
    _book(inputs / "book")
    before = snapshot(inputs)
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    after = snapshot(inputs)
    # a reader of a WAL-mode book gets SQLite's empty -wal and its shared-memory index beside it;
    # the book's own bytes do not change
    sqlite_side = {"book/mistakes.sqlite-wal", "book/mistakes.sqlite-shm"}
    assert {k: v for k, v in after.items() if k not in sqlite_side} == before
