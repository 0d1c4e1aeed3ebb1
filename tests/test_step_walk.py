"""The files a training step runs, as docs/ARCHITECTURE.md's walk lists them.

One a1 step of the tiny run (one process, the hf engine) and its checkpoint are traced:
every call into a codea1 file is attributed to the nearest codea1 frame that made it. The
walk starts in train/loop.py and follows each call out of a file it has reached, except
out of a subsystem's door: a file of `codea1.engines`, `codea1.judge`, `codea1.mistakes` or
`codea1.sandbox` is counted when the step calls into it, and what it calls in turn (the
decode loop, the judge's programs, SQLite, the sandbox's workers) is behind that door. The
walk ends at the checkpoint: train/checkpoint.py is counted, and what it writes with (the
weights' files, the Mistake Book's copy, the atomic directory) is behind it, with its
contract in docs/ARCHITECTURE.md's "Crashes and `--resume`".
Threads a door starts (the sandbox's drivers) have no codea1 caller and are not followed.

Nothing the step calls calls back into train/loop.py (the loop is re-entered only between
phases), and the set found must be the walk's list (`STEP_FILES`, with the command's two files before
it): a change that makes the step touch another file, or no longer touch one, fails here
and says which, so the documented walk cannot drift from the code.
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest
from tiny_run import make_scripted, tiny_overrides

import codea1

ROOT = Path(codea1.__file__).resolve().parent
DOORS = ("engines/", "judge/", "mistakes/", "sandbox/", "train/checkpoint.py")
#: docs/ARCHITECTURE.md, "From `codea1 train` to the checkpoint, file by file", after the
#: command's codea1/cli.py and codea1/train/cli.py (which run before the first step)
STEP_FILES = {
    "train/loop.py", "train/stopping.py", "data/sampler.py", "rollout.py", "engines/hf_engine.py",
    "judge/config.py", "train/one_process.py", "mistakes/book.py", "judge/judge.py", "judge/outcomes.py",
    "grpo.py", "logprobs.py", "models.py", "train/metrics.py", "train/checkpoint.py",
}


def _relative(filename: str) -> str | None:
    path = Path(filename)
    return path.relative_to(ROOT).as_posix() if path.is_absolute() and path.is_relative_to(ROOT) else None


def _traced_step(tiny, run_dir: Path, monkeypatch) -> dict[str, set[str]]:
    """callee file -> the codea1 files that called into it, during run_step and save_checkpoint."""
    import codea1.engines.hf_engine as hf_engine
    from codea1.train import loop
    from codea1.train.config import load_config

    callers: dict[str, set[str]] = defaultdict(set)

    def profile(frame, event, arg):
        if event != "call" or (callee := _relative(frame.f_code.co_filename)) is None:
            return
        back = frame.f_back
        while back is not None and _relative(back.f_code.co_filename) is None:
            back = back.f_back
        caller = _relative(back.f_code.co_filename) if back is not None else None
        if caller is not None and caller != callee:
            callers[callee].add(caller)

    def traced(method):
        def run(*args, **kwargs):
            sys.setprofile(profile)
            threading.setprofile(profile)
            try:
                return method(*args, **kwargs)
            finally:
                sys.setprofile(None)
                threading.setprofile(None)
        return run

    monkeypatch.setattr(hf_engine, "generate", make_scripted(hf_engine.generate, tiny["problems"]))
    monkeypatch.setattr(loop.Trainer, "run_step", traced(loop.Trainer.run_step))
    monkeypatch.setattr(loop.Trainer, "save_checkpoint", traced(loop.Trainer.save_checkpoint))
    cfg = load_config(preset="cpu-demo", overrides=[*tiny_overrides(tiny, "a1", 1), "validation.every=0",
                                                    "logging.tensorboard=false"])
    assert loop.train(cfg, run_dir).step == 1
    return callers


def _walk(callers: dict[str, set[str]]) -> set[str]:
    reached, grew = {"train/loop.py"}, True
    while grew:
        found = {callee for callee, by in callers.items()
                 if any(c in reached and not c.startswith(DOORS) for c in by)}
        grew = not found <= reached
        reached |= found
    return reached


@pytest.mark.filterwarnings("ignore")
def test_a_step_touches_the_files_the_walk_lists(tiny, tmp_path, monkeypatch):
    callers = _traced_step(tiny, tmp_path / "run", monkeypatch)
    # loop.py is re-entered only between phases: nothing a phase calls calls back into it
    assert not callers.get("train/loop.py"), f"called back into loop.py from {callers['train/loop.py']}"
    reached = _walk(callers)
    assert not reached - STEP_FILES, f"the step now runs code of {sorted(reached - STEP_FILES)}: walk them"
    assert not STEP_FILES - reached, f"the step no longer runs {sorted(STEP_FILES - reached)}"
    assert len(STEP_FILES) + 2 == 17   # with codea1/cli.py and codea1/train/cli.py
