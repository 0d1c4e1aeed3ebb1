"""Files a command writes for the user: never over one of its inputs, never half-written.

- `input_named_as_output(out, inputs)`: the input that OUT would destroy (OUT resolves to
  it through `..`, symlinks or a hard link, or lies inside an input directory whose files
  the command reads), or None. The commands refuse such an OUT in one line before they
  read or write anything.
- `atomic_output(path)`: a temporary file next to `path`, renamed over it only once it is
  written whole and fsync'ed (and the folder fsync'ed after the rename, so the rename
  survives a power cut); a failure (a crash, a full disk, an error while exporting)
  leaves `path` as it was and no temporary file behind. The project's one atomic writer:
  `atomic_write_text` (config.yaml) and the exported files go through it; a kill -9 can
  leave a stray `.NAME.tmp-*`, which `remove_stray_temps(path)` clears.
- `in_run_checkpoints(out)`: the training run whose `checkpoints/` folder OUT lies in:
  training prunes and replaces what is there, so no command writes into it.
- `refuse_output_in_run(out, is_run_config)`: a ValueError naming the training run
  directory OUT lies in (any run, not only the command's own input). `data convert` and
  `mistakes export` refuse such an OUT, so no command's output replaces a run's
  metrics.jsonl, config.yaml, Mistake Book or checkpoint.
- `fsync_path(path)`: fsync a file or a folder (the checkpoints' durability).
- `DiskFull`: the error of a write that found the file system full, naming the file
  (`disk_full(exc, path)` tells one from another error; the command line gives it its own
  exit code, `codea1.cli.EXIT_DISK_FULL`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

_FULL_ERRNOS = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
# a training run directory holds these (`codea1.train.checkpoint`'s CONFIG_FILE, BOOK_FILE, CheckpointManager)
RUN_CONFIG_FILE, RUN_BOOK_FILE, CHECKPOINTS_DIR = "config.yaml", "mistakes.sqlite", "checkpoints"


class DiskFull(OSError):
    """A write found the file system full (or the user's quota spent); names the file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(errno.ENOSPC, "no space left on device (the disk is full)", str(path))


def _nearly_full(where: str | os.PathLike[str]) -> bool:
    """The file system holding `where` has under 1 MiB left (its nearest existing folder)."""
    path = Path(where)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bfree * st.f_frsize < 2**20


def disk_full(exc: BaseException, where: str | os.PathLike[str] | None = None) -> bool:
    """Whether `exc` is a write that failed on a full disk: ENOSPC/EDQUOT, SQLite's
    "database or disk is full", or (libraries that report a failed write in their own
    words: torch.save, safetensors) any error while the file system at `where` is full."""
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    if type(exc).__module__ == "sqlite3" and ("disk is full" in str(exc) or
                                              getattr(exc, "sqlite_errorcode", None) == 13):  # SQLITE_FULL
        return True
    return where is not None and isinstance(exc, Exception) and _nearly_full(where)


@contextlib.contextmanager
def naming_full_disk(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn a full-disk error inside the block into `DiskFull(path)` (a write's own
    ENOSPC names no file)."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as exc:
        if disk_full(exc, Path(path).parent):
            raise DiskFull(path) from exc
        raise


def _same(a: Path, b: Path) -> bool:
    """True when `a` and `b` name one file: the same resolved path, or the same inode."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def input_named_as_output(out: str | os.PathLike[str],
                          files: Iterable[str | os.PathLike[str]] = (),
                          directories: Iterable[str | os.PathLike[str]] = ()) -> Path | None:
    """The input `out` would overwrite: one of `files` (existing or not: a SQLite book's
    `-wal` file counts before it exists), or `out` itself when it is or lies inside one of
    `directories` (a run directory, a model directory), existing yet or not: a path let
    through while it is new would be refused once the command has created it, so the same
    command could not be run again (an evaluation not resumed). None when `out` is safe to
    write."""
    out = Path(out)
    for f in files:
        if _same(out, Path(f)):
            return Path(f)
    resolved = out.resolve()
    for d in directories:
        root = Path(d).resolve()
        if root.is_dir() and (resolved == root or resolved.is_relative_to(root)):
            return out
    return None


def in_run_checkpoints(out: str | os.PathLike[str]) -> Path | None:
    """The training run directory whose `checkpoints/` folder `out` is or lies in (through
    `..` or symlinks), or None. Training deletes old checkpoints whole and renames new ones
    into place there, so a file written into it would be lost, or lose a checkpoint."""
    resolved = Path(out).resolve()
    for folder in (resolved, *resolved.parents):
        run = folder.parent
        if folder.name == CHECKPOINTS_DIR and (run / RUN_CONFIG_FILE).is_file() and (run / RUN_BOOK_FILE).exists():
            return run
    return None


def in_run_directory(out: str | os.PathLike[str], is_run_config: Callable[[Path], bool]) -> Path | None:
    """The training run directory that `out` is or lies in, at any depth, or None. Both the
    path `out` resolves to and the directory entry a rename over `out` replaces (`out`
    itself a symlink) count. `is_run_config(path)` decides whether a `config.yaml` is a
    run's: the caller passes `codea1.train.cli.is_run_config`, which this module (the
    lowest layer) cannot import; a folder with no config.yaml is never asked about."""
    out = Path(out)
    for where in (out.resolve(), out.parent.resolve() / out.name):
        for folder in (where, *where.parents):
            config = folder / RUN_CONFIG_FILE
            if config.is_file() and is_run_config(config):
                return folder
    return None


def refuse_output_in_run(out: str | os.PathLike[str], is_run_config: Callable[[Path], bool]) -> None:
    """Raise a ValueError naming the run when `out`, a file a command is about to write, is
    or lies in a training run directory (`in_run_directory`).

    Every path in a run directory is refused, new or not, and not only the run's own files
    (config.yaml, metrics.jsonl, samples.jsonl, mistakes.sqlite and its -wal/-shm,
    checkpoints/, tb/, train.lock): a new name let through once would be refused when the
    same command is run again (it is then an existing file of the run), a name that is new
    today may be one the run writes later (samples.jsonl, tb/), and `train --resume`,
    `plot` and `mistakes` read the directory as the run's. One rule, always the same
    answer: a command's output goes outside the run directory."""
    run = in_run_directory(out, is_run_config)
    if run is not None:
        raise ValueError(f"{out} lies in the training run directory {run}, whose files (config.yaml, "
                         "metrics.jsonl, mistakes.sqlite, checkpoints/...) training, `train --resume` and `plot` "
                         "read; no command writes into a run's directory: give a path outside it")


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file or a directory (directories: so a rename inside it is durable)."""
    path = Path(path)
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if path.is_dir() else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; nothing more we can do
    finally:
        os.close(fd)


def _temporary_name(path: Path) -> Path:
    """A fresh hidden name next to `path` with its suffix (a writer that reads the format
    from the name still works): `.NAME.tmp-PID-RANDOM.SUFFIX`, never a user's file."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}{path.suffix}")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to `path`; when the block ends without error it is
    fsync'ed and renamed over `path` (the folder fsync'ed after), else removed. `path` is
    never opened for writing in place."""
    path = Path(path)
    tmp = _temporary_name(path)
    try:
        with naming_full_disk(path):
            yield tmp
            with open(tmp, "rb+") as written:
                os.fsync(written.fileno())
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace `path` by `text` in one step (`atomic_output`): a crash leaves the old file
    or the new, never a part (at most a stray `.NAME.tmp-*`, which `remove_stray_temps`
    clears)."""
    with atomic_output(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def remove_stray_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporary files a kill inside `atomic_output(path)` left."""
    path = Path(path)
    removed = []
    for stray in path.parent.glob(f".{path.name}.tmp-*"):
        stray.unlink(missing_ok=True)
        removed.append(stray)
    return removed


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) per line of a JSONL file that is appended to while it is
    read or was cut short: a torn last line is skipped, any other bad line is an error."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines):
                return  # the row being written when the writer stopped
            raise ValueError(f"{path}:{lineno}: not a JSON object ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        yield lineno, row
