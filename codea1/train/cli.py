"""`codea1 train`: a thin command over `codea1.train.train`.

Heavy imports (torch, transformers) happen inside the command so `codea1 --help` is instant.
A new run's inputs (the config, the run directory's path, the model's path, every row of
the training and held-out sets) are checked before `train` creates or changes anything.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import List, Optional

import typer

from codea1.cli_options import CONFIG_OPTION, PRESET_OPTION, SET_OPTION, check_output_dir
from codea1.sandbox.support import require as require_sandbox


def check_new_run(cfg, run_dir: Path) -> None:
    """Everything a new run reads that can be wrong, checked before anything is written,
    and every problem reported at once (one line, '; ' between them): the run directory's
    path, the rollout engine, the data files a preset leaves to the user (with where the
    paper's come from), the problem files (their loaders name the file, row and field of
    a bad row; an empty set is an error), the model (a local path that exists, or a hub id
    in the local cache or answered by the hub within `model.hub_probe_timeout_s`), and that
    the run would not write over its inputs."""
    from codea1.engines import resolve_engine
    from codea1.models import ModelError, model_unavailable, resolve_device, resolve_model
    from codea1.train.config import REQUIRED, ConfigError, missing_data
    from codea1.train.training_data import load_training_data

    problems: list[str] = []

    def check(what: str, action) -> None:
        try:
            action()
        except typer.BadParameter as exc:  # its own message: format_message() would add "Invalid value for ..."
            problems.append(f"{what}: {exc.message}")
        except (ValueError, OSError) as exc:
            problems.append(str(exc))

    check("--run-dir", lambda: check_output_dir(run_dir, "--run-dir"))
    if cfg.rollout.engine != "auto":
        check("rollout.engine", lambda: resolve_engine(cfg.rollout.engine, resolve_device(cfg.model.device)))
    missing = missing_data(cfg)
    problems += missing
    # the files given are read whole, row by row, each on its own so that a bad training file
    # does not hide a bad held-out one
    if cfg.data.train not in (None, REQUIRED):
        train_only = cfg.data.model_copy(update={"heldout": None})
        check("data.train", lambda: load_training_data(cfg.model_copy(update={"data": train_only})))
    if cfg.data.heldout not in (None, REQUIRED):
        # the held-out set as the run reads it (`load_training_data`'s rules for data.heldout),
        # beside a training set that is always there: the bundled demo problems
        heldout_only = cfg.data.model_copy(update={"train": "bundled:demo", "include": None})
        check("data.heldout", lambda: load_training_data(cfg.model_copy(update={"data": heldout_only})))
    model = model_unavailable(cfg.model.name, cfg.model.hub_probe_timeout_s)
    if model is None and Path(str(cfg.model.name)).expanduser().exists():
        try:  # a local folder or file: that it is a model, found without loading it
            resolve_model(cfg.model.name)
        except ModelError as exc:
            model = str(exc)
    if model is not None:
        problems.append(f"model.name: {model}")
    check("--run-dir", lambda: check_run_dir_inputs(cfg, Path(run_dir)))
    if problems:
        raise ConfigError("; ".join(problems))


def check_run_dir_inputs(cfg, run_dir: Path) -> None:
    """A new run fills RUN_DIR, truncates its metrics.jsonl and samples.jsonl, deletes its
    mistakes.sqlite (what a crashed first attempt left) and prunes its checkpoints/: refuse
    a RUN_DIR that is not empty and not a run (no config.yaml that `is_run_config`), leaving it
    untouched, and
    a data file or model that is one of the files a run writes."""
    from codea1.output_files import input_named_as_output
    from codea1.train.checkpoint import BOOK_FILE, CONFIG_FILE
    from codea1.train.metrics import METRICS_FILE, SAMPLES_FILE
    from codea1.train.run_lock import LOCK_FILE

    written = [run_dir / name for name in (METRICS_FILE, SAMPLES_FILE, BOOK_FILE, BOOK_FILE + "-wal",
                                           BOOK_FILE + "-shm")]
    if run_dir.is_dir() and not is_run_config(run_dir / CONFIG_FILE):
        # not a run: only an empty folder (or what a run's first instant leaves) is taken
        found = sorted(p.name for p in run_dir.iterdir()
                       if p.name != LOCK_FILE and not p.name.startswith(f".{CONFIG_FILE}.tmp-"))
        if found:
            shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
            if CONFIG_FILE in found:
                shown += f"; its {CONFIG_FILE} is not a codea1 run's"
            raise typer.BadParameter(f"{run_dir} is not empty and not a codea1 run (it holds {shown}); a new run "
                                     "writes config.yaml, metrics.jsonl, mistakes.sqlite, checkpoints/... into its "
                                     "directory: use a new or empty --run-dir", param_hint="--run-dir")
    inputs = {"data.train": cfg.data.train, "data.heldout": cfg.data.heldout, "model.name": cfg.model.name}
    for key, value in inputs.items():
        if value is None or not Path(value).expanduser().exists():
            continue  # bundled problems, a hub id
        path = Path(value).expanduser()
        if any(input_named_as_output(w, [path]) for w in written) or \
                input_named_as_output(path, directories=[run_dir / "checkpoints"]) is not None:
            raise typer.BadParameter(f"{key}={value} is a file the new run in {run_dir} writes or deletes; "
                                     "use a new --run-dir or move the file", param_hint="--run-dir")

def is_run_config(path: Path) -> bool:
    """Whether `path` is a run's config.yaml: one that loads as a whole codea1 run config (as
    `codea1 train` writes it), or as part of one beside the run's checkpoints (a run of an
    earlier version, before keys were added), not any file of that name (a project's own,
    which a new run would overwrite)."""
    from codea1.train.checkpoint import CheckpointManager
    from codea1.train.config import ConfigError, check_run_config, read_run_config

    if not path.is_file():
        return False
    try:
        raw = read_run_config(path)[1]
    except ConfigError:
        return False
    try:
        check_run_config(raw, path, None)
    except ConfigError:
        return bool(CheckpointManager(path.parent).list())
    return True


def migrate_bare_stdin_run(run_dir: Path) -> str | None:
    """Before a resume: a run started when `data.train: bundled-stdin` named all the bundled
    stdin problems has its config.yaml say `bundled-stdin:all` instead, the same problems
    (`codea1.train.config.migrate_bare_stdin`, proven by its latest checkpoint), under the
    run's lock; returns the line that says so, or None (nothing to do, or nothing readable:
    the resume names what is wrong). A run it leaves alone is left as it was (no lock file)."""
    from codea1.train.checkpoint import CONFIG_FILE, CheckpointError, CheckpointManager, read_state
    from codea1.train.config import BARE_STDIN, ConfigError, migrate_bare_stdin, read_run_config
    from codea1.train.run_lock import RunLock

    try:
        if read_run_config(run_dir / CONFIG_FILE)[1].get("data", {}).get("train") != BARE_STDIN:
            return None
    except (ConfigError, AttributeError):
        return None
    lock = RunLock(run_dir, enabled=os.environ.get("RANK", "0") == "0")  # (rank 0's, as `train` takes it)
    with lock:
        said = None
        try:
            latest = CheckpointManager(run_dir).latest()
            said = None if latest is None else migrate_bare_stdin(run_dir / CONFIG_FILE, read_state(latest))
        except (CheckpointError, ConfigError):
            pass
        finally:
            if said is None:
                lock.discard()
    return said


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: Optional[str]) -> Optional[float]:
    """Seconds in '2h', '90m', '1h30m', '45s' or a plain number of seconds."""
    if text is None:
        return None
    value = text.strip().lower()
    try:
        seconds = float(value)
    except ValueError:
        match = _DURATION.fullmatch(value)
        if not value or match is None:
            raise typer.BadParameter(f"{text!r}: expected a duration such as 2h, 90m, 1h30m, 45s "
                                     "or a number of seconds") from None
        hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if not seconds > 0 or seconds == float("inf"):
        raise typer.BadParameter(f"{text!r}: expected a positive, finite duration")
    return seconds


def train_command(
    config: Optional[Path] = CONFIG_OPTION,
    preset: Optional[str] = PRESET_OPTION,
    set_: Optional[List[str]] = SET_OPTION,
    run_dir: Optional[Path] = typer.Option(
        None, "--run-dir", help="Where the run writes (default: runs/NAME-YYYYmmdd-HHMMSS)."),
    resume: Optional[Path] = typer.Option(
        None, "--resume", help="Continue the run in this directory from its latest checkpoint. With --set, "
        "only settings no figure depends on may change (threads, judge.workers, logging.progress, "
        "logging.tensorboard, logging.wandb.*, checkpoint.every/keep, distributed.timeout_s); they are "
        "recorded in its config.yaml."),
    steps: Optional[int] = typer.Option(
        None, "--steps", min=1, help="Total training steps (overrides the config). With --resume: a new total, above the "
        "step the run is at, recorded in its config.yaml (the one key a resume may change); the LR "
        "schedule spans the new total from the next step on."),
    time_limit: Optional[str] = typer.Option(
        None, "--time-limit", help="Wall-clock budget of this call, e.g. 2h, 90m, 1h30m or seconds: no step "
        "(or the update of one, or a validation) starts that would end past it, judged by the longest so "
        "far; at the budget's end the rollouts under way are dropped; then a checkpoint (resume with --resume).",
        callback=parse_duration),
) -> None:
    """Train a code model and a test model against each other (Code-A1)."""
    require_sandbox("codea1 train")
    from codea1.train.config import load_config

    if resume is not None:
        from codea1.train.checkpoint import CONFIG_FILE
        from codea1.train.config import changeable_text

        if config is not None or preset is not None:
            raise typer.BadParameter("--resume continues a run with its own config.yaml; only "
                                     f"{changeable_text()} may change", param_hint="--resume")
        if run_dir is not None and Path(run_dir) != Path(resume):
            raise typer.BadParameter("--resume RUN_DIR already names the run directory",
                                     param_hint="--run-dir")
        target = Path(resume)
        migrated = migrate_bare_stdin_run(target)
        if migrated is not None:
            typer.echo(migrated, err=True)
        # the run's config with the changes asked for (train refuses any key but the changeable)
        cfg = load_config(path=target / CONFIG_FILE, overrides=set_) if set_ else None
    else:
        if config is None and preset is None:
            raise typer.BadParameter("give --preset NAME or --config FILE.yaml (or --resume RUN_DIR)",
                                     param_hint="--preset")
        cfg = load_config(path=config, preset=preset, overrides=set_ or [])
        name = preset or (config.stem if config else "run")
        target = run_dir or Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        check_new_run(cfg, target)

    from codea1.train.loop import train

    try:
        result = train(cfg, target, resume=resume is not None, steps=steps, time_limit_s=time_limit)
    except KeyboardInterrupt:  # a second Ctrl-C: no checkpoint of the step under way
        typer.echo(f"aborted (a second Ctrl-C): {target} keeps its last checkpoint; resume with: "
                   f"codea1 train --resume {target}", err=True)
        raise typer.Exit(130) from None
    if os.environ.get("RANK", "0") == "0":  # under torchrun: rank 0 speaks for the run
        typer.echo(f"run directory: {result.run_dir} (step {result.step}{', stopped' if result.stopped else ''})")
