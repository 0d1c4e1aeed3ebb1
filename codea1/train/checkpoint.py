"""Checkpoints a run can resume from exactly, written so that a crash never spoils one.

A checkpoint is a directory `RUN_DIR/checkpoints/step-N/`. It is written into a hidden
temporary directory next to it, every file fsync'ed, then renamed into place in one
atomic `rename` (and the parent directory fsync'ed): a crash mid-write leaves at most a
stray temporary directory, and the last good checkpoint stays as it was. The oldest
checkpoints beyond `keep` are removed after a save, each first renamed out of the way
(`.deleting-step-N-PID`) and only then deleted, so a crash while pruning never leaves a
half-deleted `step-N`. Saving a step that has a checkpoint already (a resume that completed
the row its checkpoint held pending) renames the old one aside (`.replaced-step-N`) before
the new one takes its name, and deletes it after. `CheckpointManager.clean()` (run when a
run starts or resumes) removes what a crash can leave behind: temporary and half-deleted
directories, and an old checkpoint set aside, unless its replacement never took its name:
until then `list()` counts it as step N's.

What goes in it is the loop's business (`Trainer.save_checkpoint` fills a
`CheckpointContents`); this module writes it (`write_checkpoint`: weights, optimisers,
schedules, random state, Mistake Book copy, state.json) and provides the atomic
directory, the listing, the capture/restore of every random number generator, and the
reading of the trainer's weights and optimisers.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

from codea1.data.sampler import position_error
from codea1.output_files import CHECKPOINTS_DIR, RUN_BOOK_FILE, RUN_CONFIG_FILE, fsync_path, naming_full_disk
from codea1.output_files import atomic_write_text  # noqa: F401  (config.py's save_config takes it from here)

_STEP_DIR = re.compile(r"^step-(\d+)$")
STATE_FILE = "state.json"
CONFIG_FILE = RUN_CONFIG_FILE      # a run directory's config (beside checkpoints/)
BOOK_FILE = RUN_BOOK_FILE          # a run directory's Mistake Book (and each checkpoint's copy)
TMP_PREFIX = ".tmp-step-"      # a checkpoint being written
TRASH_PREFIX = ".deleting-"    # a checkpoint being removed
REPLACED_PREFIX = ".replaced-step-"  # a checkpoint set aside while its step is saved again


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or does not fit the run."""


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))


class CheckpointManager:
    """The `checkpoints/` directory of a run: atomic saves, listing, pruning."""

    def __init__(self, run_dir: str | os.PathLike[str], keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.root = Path(run_dir) / CHECKPOINTS_DIR
        self.keep = keep

    def list(self) -> list[tuple[int, Path]]:
        """Complete checkpoints as (step, path), oldest first."""
        if not self.root.is_dir():
            return []
        found = {}
        for child in self.root.iterdir():
            m = _STEP_DIR.match(child.name)
            if m and child.is_dir() and (child / STATE_FILE).is_file():
                found[int(m.group(1))] = child
        for step, path in self._replaced():  # a crash while its step was saved again
            found.setdefault(step, path)
        return sorted(found.items())

    def _replaced(self) -> list[tuple[int, Path]]:
        """Complete checkpoints set aside by a save of their step (`.replaced-step-N`): step
        N's checkpoint as long as no complete `step-N` took their place."""
        return sorted((int(c.name[len(REPLACED_PREFIX):]), c) for c in self.root.iterdir()
                      if c.name.startswith(REPLACED_PREFIX) and c.name[len(REPLACED_PREFIX):].isdigit()
                      and c.is_dir() and (c / STATE_FILE).is_file())

    def path(self, step: int) -> Path:
        """Where step `step`'s checkpoint lives (once written)."""
        return self.root / f"step-{step}"

    def latest(self) -> Path | None:
        items = self.list()
        return items[-1][1] if items else None

    def save(self, step: int, write: Callable[[Path], None]) -> Path:
        """Create `step-N` atomically: `write(tmp_dir)` fills it, `state.json` must be among it."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.clean()
        tmp = self.root / f"{TMP_PREFIX}{step}-{os.getpid()}"
        tmp.mkdir()
        try:
            with naming_full_disk(self.path(step)):  # (the last good checkpoint stays)
                write(tmp)
            if not (tmp / STATE_FILE).is_file():
                raise CheckpointError(f"checkpoint writer left no {STATE_FILE} in {tmp}")
            _fsync_tree(tmp)
            final, replaced = self.path(step), self.root / f"{REPLACED_PREFIX}{step}"
            if final.exists():  # saving a step again: the old one aside, still listed, until replaced
                os.replace(final, replaced)
                fsync_path(self.root)
            os.replace(tmp, final)
            fsync_path(self.root)
            if replaced.exists():  # (also one a crash left, which this save has now replaced)
                shutil.rmtree(self._move_to_trash(replaced), ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.prune()
        return final

    def prune(self) -> list[Path]:
        """Remove all but the newest `keep` checkpoints; returns what was removed."""
        items = self.list()
        removed = []
        for _step, path in items[: max(len(items) - self.keep, 0)]:
            shutil.rmtree(self._move_to_trash(path), ignore_errors=True)
            removed.append(path)
        return removed

    def clean(self) -> list[Path]:
        """Remove what a crash left: checkpoints half-written (`.tmp-step-*`), half-deleted
        (`.deleting-*`), set aside by a save of their step that completed (`.replaced-step-N`
        beside a complete `step-N`), and `step-N` directories without a `state.json`
        (half-deleted by an older version, which deleted in place). Returns what was removed."""
        if not self.root.is_dir():
            return []
        removed = []
        for step, path in self._replaced():
            if (self.path(step) / STATE_FILE).is_file():  # its replacement is in place
                shutil.rmtree(self._move_to_trash(path), ignore_errors=True)
                removed.append(path)
        for child in sorted(self.root.iterdir()):
            if not child.is_dir():
                continue
            if child.name.startswith((TMP_PREFIX, TRASH_PREFIX)):
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
            elif _STEP_DIR.match(child.name) and not (child / STATE_FILE).exists():
                shutil.rmtree(self._move_to_trash(child), ignore_errors=True)
                removed.append(child)
        if removed:
            fsync_path(self.root)
        return removed

    def _move_to_trash(self, path: Path) -> Path:
        """Rename a checkpoint out of the listing in one atomic step (made durable), so that
        a crash during the slow delete that follows leaves nothing that looks like one."""
        trash = self.root / f"{TRASH_PREFIX}{path.name}-{os.getpid()}"
        if trash.exists():
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(path, trash)
        fsync_path(self.root)
        return trash


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_state(checkpoint: Path) -> dict[str, Any]:
    path = Path(checkpoint) / STATE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; {checkpoint} is not a complete checkpoint") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from None


# --------------------------------------------------------------------------- RNG


def capture_rng() -> dict[str, Any]:
    """Every random state a step consumes: python's, numpy's and torch's (CPU and CUDA).
    The loop owns no generator of its own: rollouts seed each sample's stream from its
    place in the step (`codea1.rollout.sample_seeds`), so nothing else carries state from
    step to step. (`generators` stays in the record, empty, as older checkpoints hold it.)"""
    import numpy as np
    import torch

    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "generators": {},
    }


def restore_rng(state: dict[str, Any]) -> None:
    """Put back what `capture_rng` took."""
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_rng(path: Path, state: dict[str, Any] | None = None) -> None:
    import torch

    torch.save(state if state is not None else capture_rng(), path)


def load_rng(path: Path) -> dict[str, Any]:
    import torch

    # python's and numpy's states are tuples/dicts of plain values; weights_only=False is
    # needed for numpy's state tuple and is safe for our own checkpoint files.
    return torch.load(path, weights_only=False)


# --------------------------------------------------------------------------- verification


def verify_checkpoint(checkpoint: Path, book_file: str = BOOK_FILE) -> dict[str, Any]:
    """Read every file of a checkpoint before a model is loaded, so a broken one is named
    in seconds instead of after minutes of loading: `state.json` (its keys, the data position), `optim.pt` and
    `rng.pt` (loadable), the weights (`policies/policies.json` and each safetensors file it
    lists, header and size), the Mistake Book snapshot (SQLite's integrity check).
    Returns the state; raises `CheckpointError` naming the broken file."""
    import sqlite3

    import torch

    checkpoint = Path(checkpoint)
    state = read_state(checkpoint)
    missing = [k for k in ("step", "data", "metrics_offsets") if k not in state]
    if not isinstance(state, dict) or missing:
        raise CheckpointError(f"{checkpoint / STATE_FILE}: expected the keys step, data and "
                              f"metrics_offsets (missing {', '.join(missing)})")
    if (problem := position_error(state["data"])) is not None:
        raise CheckpointError(f"{checkpoint / STATE_FILE}: data (the data position): {problem}")
    for name, expect in (("optim.pt", ("optimizers", "schedulers")), ("rng.pt", ("python", "numpy", "torch"))):
        path = checkpoint / name
        try:
            # mmap: the archive and its index are read and checked, the tensors' bytes are
            # not copied (a full model's optimiser state is loaded once, by the resume itself)
            data = torch.load(path, weights_only=False, map_location="cpu", mmap=True)
        except FileNotFoundError:
            raise CheckpointError(f"{path}: missing") from None
        except Exception as exc:  # truncated zip, unpickling error, ...: name the file
            first = str(exc).splitlines()[0].split(". ")[0] if str(exc) else ""
            raise CheckpointError(f"{path}: unreadable, truncated or not a torch file ({first})") from None
        if not isinstance(data, dict) or any(k not in data for k in expect):
            raise CheckpointError(f"{path}: expected a dict with {', '.join(expect)}")
    _verify_weights(checkpoint / "policies")
    book = checkpoint / book_file
    if not book.is_file():
        raise CheckpointError(f"{book}: missing")
    try:
        conn = sqlite3.connect(f"file:{book}?mode=ro", uri=True)
        try:
            verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise CheckpointError(f"{book}: not a readable SQLite file ({exc})") from None
    if verdict != "ok":
        raise CheckpointError(f"{book}: SQLite integrity check failed ({verdict})")
    return state


def _verify_weights(directory: Path) -> None:
    """The manifest and each safetensors file it lists: a readable header whose tensors
    cover the file (a truncated file fails here)."""
    manifest_path = directory / "policies.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{manifest_path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{manifest_path}: not valid JSON ({exc})") from None
    weights = manifest.get("weights") if isinstance(manifest, dict) else None
    if not isinstance(weights, list) or not weights:
        raise CheckpointError(f"{manifest_path}: expected a non-empty 'weights' list")
    from safetensors import SafetensorError, safe_open

    for key in weights:
        path = directory / f"{key}.safetensors"
        if not path.is_file():
            raise CheckpointError(f"{path}: missing")
        try:  # reads the header and checks that the tensors cover the file exactly
            with safe_open(str(path), "pt"):
                pass
        except SafetensorError as exc:
            raise CheckpointError(f"{path}: not a readable safetensors file ({exc})") from None


# --------------------------------------------------------------------------- the trainer's state


@dataclass
class CheckpointContents:
    """Everything one checkpoint holds, as the loop hands it over (`write_checkpoint`)."""

    policies: Any                  # `codea1.models.Policies`: the weights (`policies/`)
    optimizers: dict[str, Any]     # per set of weights: AdamW (`optim.pt`)
    schedulers: dict[str, Any]     # per set of weights: the LR schedule (`optim.pt`)
    book: Any                      # the Mistake Book: its `snapshot` is the checkpoint's copy
    state: dict[str, Any]          # state.json: step, data position, metrics offsets, config...
    weights: dict | None = None            # whole weights gathered from FSDP2 shards, or None
    optimizer_states: dict | None = None   # whole optimiser states gathered likewise, or None
    metrics: Any = None            # the run's `MetricsLog`: how far its files go (`metrics_offsets`)


def write_checkpoint(manager: CheckpointManager, step: int, contents: CheckpointContents) -> Path:
    """Write `step-N` atomically (`CheckpointManager.save`): the weights, optimisers and
    schedules, the random state (`rng.pt`), the Mistake Book's copy, then state.json.

    The metrics files are on disk whole before state.json records their offsets (a resume
    cuts them back to those); a full disk while syncing them names this checkpoint."""
    if contents.metrics is not None:
        with naming_full_disk(manager.path(step)):
            contents.metrics.sync()
        contents.state["metrics_offsets"] = contents.metrics.offsets()
    return manager.save(step, partial(_write_contents, contents))


def _write_contents(contents: CheckpointContents, tmp: Path) -> None:
    write_training_state(tmp, contents.policies, contents.optimizers, contents.schedulers, contents.weights,
                         contents.optimizer_states)
    save_rng(tmp / "rng.pt")
    contents.book.snapshot(tmp / BOOK_FILE)
    write_json(tmp / STATE_FILE, contents.state)



def write_training_state(directory: Path, policies, optimizers: dict, schedulers: dict,
                         weights: dict | None = None, optimizer_states: dict | None = None) -> None:
    """The policies' weights, the optimisers' moments and the LR schedules into a checkpoint
    directory (`weights` / `optimizer_states`: whole ones gathered from FSDP2 shards)."""
    import torch

    policies.save(directory / "policies", states=weights)
    torch.save({
        "optimizers": optimizer_states or {k: o.state_dict() for k, o in optimizers.items()},
        "schedulers": {k: s.state_dict() for k, s in schedulers.items()},
    }, directory / "optim.pt")


def read_training_state(directory: Path, policies, optimizers: dict, schedulers: dict, *,
                        steps_changed: bool, load_sharded: Callable[[dict, dict], None] | None = None) -> None:
    """`write_training_state`'s inverse. `load_sharded(weights, optimizer_states)` puts whole
    ones into FSDP2 shards; `steps_changed` (`--resume --steps N`): the next step already
    follows the N-step schedule."""
    import torch

    opt = torch.load(directory / "optim.pt", weights_only=False)
    if load_sharded is not None:
        load_sharded(policies.read_weights(directory / "policies"), opt["optimizers"])
    else:
        policies.load(directory / "policies")
        for key, o in optimizers.items():
            o.load_state_dict(opt["optimizers"][key])
    for key, s in schedulers.items():
        s.load_state_dict(opt["schedulers"][key])
        if steps_changed:
            for group, base, rate in zip(s.optimizer.param_groups, s.base_lrs, s.lr_lambdas):
                group["lr"] = base * rate(s.last_epoch)
