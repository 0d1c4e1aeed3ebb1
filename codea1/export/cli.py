"""`codea1 export`: a thin command over `codea1.export.export_run`."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Optional

import typer

from codea1.cli_options import RUN_DIR_HELP, check_output_dir

# the units `save_pretrained` reads a shard size in (huggingface_hub's parse_size_to_int: decimal)
SIZE_UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]B)\s*", re.IGNORECASE)


def check_shard_size(value: str) -> str:
    """--max-shard-size as `save_pretrained` reads it (a positive number and a unit: KB, MB, GB or
    TB), checked before the run's model is loaded and merged, which takes minutes."""
    match = _SIZE.fullmatch(value)
    size = float(match.group(1)) * SIZE_UNITS[match.group(2).upper()] if match else math.nan
    if not (math.isfinite(size) and int(size) >= 1):
        raise typer.BadParameter(f"{value!r} is not a shard size: expected a positive number and a unit "
                                 "(KB, MB, GB or TB), e.g. 5GB or 500MB")
    return value


def export_command(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help=RUN_DIR_HELP),
    out: Path = typer.Argument(..., metavar="OUT", help="New directory to write (must not exist, or be empty)."),
    role: str = typer.Option(..., "--role", help="Which model: code or test."),
    step: Optional[int] = typer.Option(None, "--step", min=0, help="Checkpoint step (default: the latest)."),
    fmt: str = typer.Option(
        "merged", "--format",
        help="merged (a Hugging Face model, the role merged into the base), peft (the LoRA adapter) or "
             "gguf-lora (the LoRA adapter for llama.cpp over the run's GGUF base)."),
    dtype: Optional[str] = typer.Option(
        None, "--dtype", help="bfloat16, float16 or float32 (default: the base's for merged, float32 for adapters)."),
    max_shard_size: str = typer.Option(
        "5GB", "--max-shard-size", callback=check_shard_size,
        help="Largest safetensors shard (merged): a number and a unit (KB, MB, GB, TB), e.g. 5GB or 500MB."),
) -> None:
    """Export one role of a training run as a model other tools load (transformers, vLLM, peft, llama.cpp)."""
    from rich.console import Console

    from codea1.export import check_out, export_run

    check_output_dir(out, "OUT")
    check_out(out)
    try:
        result = export_run(run_dir, out, role, step=step, fmt=fmt, dtype=dtype, max_shard_size=max_shard_size)
    except KeyboardInterrupt:  # export_run removes what it had written
        typer.echo(f"interrupted: nothing exported, {out} not written", err=True)
        raise typer.Exit(130) from None
    Console(soft_wrap=True).print(
        f"wrote {result.out} ({result.format}, {result.dtype}, step {result.step}): {', '.join(result.files)}",
        markup=False)
