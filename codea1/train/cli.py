"""`codea1 train`: a thin command over `codea1.train.train`.

Heavy imports (torch, transformers) happen inside the command so `codea1 --help` is instant.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer


def train_command(
    config: Optional[Path] = typer.Option(None, "--config", help="YAML config file (applied over --preset)."),
    preset: Optional[str] = typer.Option(
        None, "--preset", help="Bundled preset: cpu-demo, paper-1.5b, paper-3b, paper-7b."),
    set_: Optional[List[str]] = typer.Option(
        None, "--set", help="Override one config key, e.g. --set grpo.lr=2e-6 (repeatable)."),
    run_dir: Optional[Path] = typer.Option(
        None, "--run-dir", help="Where the run writes (default: runs/NAME-YYYYmmdd-HHMMSS)."),
    resume: Optional[Path] = typer.Option(
        None, "--resume", help="Continue the run in this directory from its latest checkpoint."),
    steps: Optional[int] = typer.Option(None, "--steps", min=1, help="Total training steps (overrides the config)."),
) -> None:
    """Train a code model and a test model against each other (Code-A1)."""
    from codea1.train.config import ConfigError, load_config

    try:
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
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    from codea1.train.loop import train

    try:
        result = train(cfg, target, resume=resume is not None, steps=steps)
    except (ConfigError, FileExistsError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"run directory: {result.run_dir} (step {result.step})")
