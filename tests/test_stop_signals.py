"""A real trainer (the tiny model, in a subprocess) stopped by a real SIGINT: at start-up,
mid-phase, twice; a second trainer in the same run directory. tests/signal_harness.py
makes one part of the run slow (torch work a signal can land in) so the signal lands where
the test says.

A stop during the data check, before the models load, ends the call with one line.

Faults tried, each failing these tests: the stop handler installed after the start-up
validation (exit 130, no message, no checkpoint); a handler that only sets the flag (the
slow rollout ran its 60 s to the end); the start-up validation rerun on resume at step 0
(a second step-0 row); no lock on the run directory (the second trainer ran).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tiny_run import tiny_overrides

from codea1.train.metrics import read_metrics

HARNESS = Path(__file__).with_name("signal_harness.py")


class Trainer:
    """`codea1 ARGS` under the harness, its stderr read line by line as it comes."""

    def __init__(self, slow: str, args: list[str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, str(HARNESS), slow, "--", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[tuple[float, str]] = []
        self.out = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, text: str, timeout: float = 240.0) -> float:
        """When a stderr line holding `text` came (waits for it)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for at, line in list(self.lines):
                if text in line:
                    return at
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} in:\n" + "\n".join(line for _, line in self.lines))

    def finish(self, timeout: float = 120.0) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(10)
        self.out = self.proc.stdout.read()
        return code

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _args(tiny, run: Path, steps: int = 3) -> list[str]:
    sets = [x for o in tiny_overrides(tiny, "a1", steps) if not o.startswith("logging.progress")
            for x in ("--set", o)]
    return ["train", "--preset", "cpu-demo", "--run-dir", str(run), *sets, "--set", "logging.progress=plain"]


def _stable(rows):
    return [{k: v for k, v in r.items() if not k.startswith("time/") and not k.endswith("tokens_per_s")}
            for r in rows]


def test_ctrl_c_during_the_start_up_validation_checkpoints_and_resume_logs_step_0_once(tiny, tmp_path):
    """SIGINT while the start-up validation samples: said at once, the validation dropped,
    a step-0 checkpoint whose row is pending; the resume validates once and ends as an
    uninterrupted run (one step-0 row)."""
    from codea1.train.checkpoint import read_state
    from codea1.train.config import load_config
    from codea1.train.loop import train

    run = tmp_path / "run"
    t = Trainer("generate:code:1:300", _args(tiny, run))
    t.wait_for("harness: slow code rollout")
    time.sleep(1.0)
    sent = time.monotonic()
    t.proc.send_signal(signal.SIGINT)
    said = t.wait_for("SIGINT: stopping now")
    code = t.finish()
    ended = time.monotonic()
    assert code == 0, t.text()
    assert said - sent < 3.0, t.text()
    assert ended - sent < 60.0, t.text()  # (the slow part alone is 300 s)
    assert "stopped during the start-up validation (SIGINT); checkpoint saved" in t.text()
    state = read_state(run / "checkpoints" / "step-0")
    assert state["step"] == 0 and state["pending"]["step"] == 0 and state["pending"]["validate"]
    assert read_metrics(run) == []
    print(f"start-up Ctrl-C: said after {said - sent:.2f} s, exited after {ended - sent:.2f} s")

    assert train(None, run, resume=True).step == 3
    straight = tmp_path / "straight"
    train(load_config(preset="cpu-demo", overrides=tiny_overrides(tiny, "a1", 3)), straight)
    assert [r["step"] for r in read_metrics(run)] == [0, 1, 2, 3]
    assert _stable(read_metrics(run)) == _stable(read_metrics(straight))


def test_ctrl_c_mid_rollout_is_answered_at_once_and_a_second_trainer_is_refused(tiny, tmp_path):
    """SIGINT in step 1's test rollout (300 s of torch work): the stop is on screen within
    seconds and the process ends soon after, step 0 checkpointed with its validation row;
    meanwhile a second `train --resume` of the run is refused naming the first's pid; the
    resume logs step 0 once."""
    from codea1.train.loop import train

    run = tmp_path / "run"
    t = Trainer("generate:test:2:300", _args(tiny, run))
    t.wait_for("harness: slow test rollout")
    config_before = (run / "config.yaml").read_bytes()
    second = subprocess.run([sys.executable, "-c", "from codea1.cli import main; main()", "train", "--resume", str(run)],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 1, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {t.proc.pid}" in lines[0] and "another codea1 train" in lines[0], lines
    assert (run / "config.yaml").read_bytes() == config_before

    sent = time.monotonic()
    t.proc.send_signal(signal.SIGINT)
    said = t.wait_for("SIGINT: stopping now")
    code = t.finish()
    ended = time.monotonic()
    assert code == 0, t.text()
    assert said - sent < 3.0 and ended - sent < 60.0, (said - sent, ended - sent, t.text())
    assert "stopped at step 0 (SIGINT); checkpoint saved" in t.text()
    assert [r["step"] for r in read_metrics(run)] == [0]
    print(f"mid-rollout Ctrl-C: said after {said - sent:.2f} s, exited after {ended - sent:.2f} s")

    assert train(None, run, resume=True).step == 3
    assert [r["step"] for r in read_metrics(run)] == [0, 1, 2, 3]


def test_a_second_ctrl_c_during_the_book_commit_aborts_and_keeps_the_last_checkpoint(tiny, tmp_path):
    """The first SIGINT during step 2's Mistake Book commit (past the commit point) says the
    step will finish; a second aborts at once (exit 130, one line), and step 1's checkpoint
    is whole (verify_checkpoint reads every file)."""
    from codea1.train.checkpoint import verify_checkpoint

    run = tmp_path / "run"
    t = Trainer("book:2:300", _args(tiny, run))
    t.wait_for("harness: slow book commit")
    time.sleep(0.5)
    t.proc.send_signal(signal.SIGINT)
    t.wait_for("SIGINT: stopping at the next safe point")
    time.sleep(0.5)
    sent = time.monotonic()
    t.proc.send_signal(signal.SIGINT)
    code = t.finish()
    assert code == 130, t.text()
    assert time.monotonic() - sent < 60.0  # (the commit alone would take 300 s)
    assert "aborted (a second Ctrl-C)" in t.text() and f"codea1 train --resume {run}" in t.text()
    assert verify_checkpoint(run / "checkpoints" / "step-1")["step"] == 1
    assert json.loads((run / "train.lock").read_text() or "0") == t.proc.pid  # the lock file stays, unheld
    from codea1.train.run_lock import RunLock

    with RunLock(run):  # kill or abort: the kernel dropped the lock
        pass


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_during_the_data_check_ends_at_once_and_leaves_a_run_to_start(tiny, tmp_path, sig):
    """The data check runs every training reference in the sandbox before the models load
    (minutes for a large file). A stop there ends the call at once with one line, as a stop
    while the models load does: the new run holds its config and nothing else, and
    `--resume` starts it. Faults: the stop handler installed only after the check (SIGINT:
    "aborted (a second Ctrl-C) ... resume with" and exit 130, with the run directory
    removed, so the --resume it suggested failed; SIGTERM: killed with no word)."""
    from codea1.data import Problem, save_problems

    slow = [Problem(id=f"slow/{i}", question="Return x.", entry_point="f",
                    reference="def f(x):\n    import time\n    time.sleep(4)\n    return x\n",
                    tests=["assert f(1) == 1"]) for i in range(6)]
    save_problems(slow, tmp_path / "slow.jsonl")
    run = tmp_path / "run"
    t = Trainer("none", [*_args(tiny, run), "--set", f"data.train={tmp_path / 'slow.jsonl'}",
                         "--set", "judge.workers=2"])
    try:
        end = time.monotonic() + 60
        while not (run / "train.lock").exists() and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(2.0)   # the check's sandbox workers are up and running the references (4 s each)
        sent = time.monotonic()
        t.proc.send_signal(sig)
        said = t.wait_for("stopped before the models loaded")
        code = t.finish()
    finally:
        t.proc.kill()
    name = signal.Signals(sig).name
    assert code == 0, t.text()
    assert said - sent < 3.0, t.text()
    assert (f"stopped before the models loaded ({name}); nothing trained yet; start it again with: "
            f"codea1 train --resume {run}") in t.text()
    assert "Traceback" not in t.text(), t.text()
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "train.lock"]


def test_stop_lines_are_said_with_progress_none_and_promise_no_checkpoint_while_loading(tiny, tmp_path, capsys,
                                                                                        monkeypatch):
    """`logging.progress=none` quiets the progress, not why the run stopped: a SIGINT while
    the models load says it drops the loading (no "a checkpoint follows": nothing is
    trained) and how to start the run again; a stop after a step says where the checkpoint
    is. Faults tried: the stop lines went through the progress display (nothing printed with
    none), and the acknowledgement promised a checkpoint that a stop while loading never wrote."""
    import codea1.models as models
    from codea1.train.config import load_config
    from codea1.train.loop import train

    cfg = load_config(preset="cpu-demo", overrides=[*tiny_overrides(tiny, "a1", 2), "validation.every=0",
                                                    "logging.tensorboard=false", "logging.progress=none"])
    real_load = models.load_policies

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # (the handler raises in this thread, here)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(models, "load_policies", interrupted)
    run = tmp_path / "run"
    assert train(cfg, run).stopped
    said = capsys.readouterr().err
    assert "SIGINT: stopping now: the work under way has changed nothing yet and is dropped; Ctrl-C again" in said
    assert "a checkpoint follows" not in said
    assert f"stopped while loading the models (SIGINT); nothing trained yet; start it again with: " \
           f"codea1 train --resume {run}" in said
    monkeypatch.setattr(models, "load_policies", real_load)
    assert train(None, run, resume=True, stop_after=1).step == 1
    said = capsys.readouterr().err
    assert f"stopped at step 1 (stop_after); checkpoint saved; resume with: codea1 train --resume {run}" in said
