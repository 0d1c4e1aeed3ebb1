"""`codea1 train`: a thin command over `codea1.train.train`.

Heavy imports (torch, transformers) happen inside the command so `codea1 --help` is instant.
A new run's inputs (the config, the run directory's path, the model's path, every row of
the training and held-out sets) are checked before `train` creates or changes anything.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List, Optional

import typer

from codea1.cli_options import CONFIG_OPTION, PRESET_OPTION, SET_OPTION, check_output_dir


def check_new_run(cfg, run_dir: Path) -> None:
    """Everything a new run reads that can be wrong, checked before anything is written:
    the run directory's path, the model's path, and the problem files (their loaders name
    the file, row and field of a bad row; an empty set is an error)."""
    from codea1.models import check_model_name
    from codea1.train.loop import load_training_data

    check_output_dir(run_dir, "--run-dir")
    check_model_name(cfg.model.name)
    load_training_data(cfg)


def train_command(
    config: Optional[Path] = CONFIG_OPTION,
    preset: Optional[str] = PRESET_OPTION,
    set_: Optional[List[str]] = SET_OPTION,
    run_dir: Optional[Path] = typer.Option(
        None, "--run-dir", help="Where the run writes (default: runs/NAME-YYYYmmdd-HHMMSS)."),
    resume: Optional[Path] = typer.Option(
        None, "--resume", help="Continue the run in this directory from its latest checkpoint."),
    steps: Optional[int] = typer.Option(
        None, "--steps", min=1, help="Total training steps (overrides the config; with --resume the one "
        "key that may change, recorded in the run's config.yaml)."),
) -> None:
    """Train a code model and a test model against each other (Code-A1)."""
    from codea1.train.config import load_config

    if resume is not None:
        if config is not None or preset is not None or set_:
            raise typer.BadParameter("--resume continues a run with its own config.yaml; "
                                     "only --steps may change", param_hint="--resume")
        if run_dir is not None and Path(run_dir) != Path(resume):
            raise typer.BadParameter("--resume RUN_DIR already names the run directory",
                                     param_hint="--run-dir")
        cfg, target = None, Path(resume)
    else:
        if config is None and preset is None:
            raise typer.BadParameter("give --preset NAME or --config FILE.yaml (or --resume RUN_DIR)",
                                     param_hint="--preset")
        cfg = load_config(path=config, preset=preset, overrides=set_ or [])
        name = preset or (config.stem if config else "run")
        target = run_dir or Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        check_new_run(cfg, target)

    from codea1.train.loop import train

    result = train(cfg, target, resume=resume is not None, steps=steps)
    if os.environ.get("RANK", "0") == "0":  # under torchrun: rank 0 speaks for the run
        typer.echo(f"run directory: {result.run_dir} (step {result.step})")
