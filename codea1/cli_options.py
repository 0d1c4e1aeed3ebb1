"""Options that several `codea1` commands share, each defined once: one name, one default,
one help text, one range check, wherever it appears.

Also the checks of output paths that every command runs before it creates anything, so
that a command refused for a bad path leaves the disk as it found it.
"""

from __future__ import annotations

import math
import re
import typing
from pathlib import Path

import typer
from pydantic import ValidationError

from codea1.configs import ModelConfig, check_engine_name  # torch-free: --dtype, --device, --engine
from codea1.output_files import in_run_checkpoints
from codea1.sandbox.stdio import DEFAULT_MAX_OUTPUT_BYTES  # the stdin judge's output cap
from codea1.sandbox.types import GOLDEN_MEMORY_MB, GOLDEN_TIMEOUT_S  # the golden-run defaults

# --- the sandbox ---------------------------------------------------------------------------

def _positive(value: float) -> float:
    """A number of seconds: positive and finite (nan and inf are refused here, naming the option,
    not by the sandbox's `Limits` under its own field names)."""
    if not (value > 0 and math.isfinite(value)):
        raise typer.BadParameter(f"{value:g} is not a positive, finite number of seconds")
    return value


TIMEOUT_OPTION = typer.Option(
    GOLDEN_TIMEOUT_S, "--timeout", callback=_positive,
    help="Wall-clock seconds one sandbox run may take (a golden program of a real data set can take a minute).")
CALL_TIMEOUT_OPTION = typer.Option(
    3.0, "--call-timeout", callback=_positive, help="Seconds one golden test call may take.")
MEMORY_MB_OPTION = typer.Option(
    GOLDEN_MEMORY_MB, "--memory-mb", min=64,
    help="Memory cap of one sandbox run, in MiB (real golden programs need up to 4 GiB).")
WORKERS_OPTION = typer.Option(
    None, "--workers", min=1, help="Sandbox worker processes (default: the CPU count).")


def _judge_key(key: str):
    """A callback checking a value by the training judge's own rule for `judge.KEY`
    (`JudgeConfig`: positive, the output cap at most 64 MiB), and finite, so that an
    evaluation and training judge stdin programs under values either can be given."""

    def check(value: float) -> float:
        from codea1.judge.config import stdin_key_problem  # (here: `codea1 --help` stays light)

        if not math.isfinite(value):
            raise typer.BadParameter(f"{value:g} is not a finite number")
        problem = stdin_key_problem(key, value)
        if problem is not None:
            raise typer.BadParameter(f"{value:g}: {problem}")
        return value

    return check


STDIN_TIME_SCALE_OPTION = typer.Option(
    1.0, "--stdin-time-scale", callback=_judge_key("stdin_time_scale"),
    help="Stdin (contest) problems: multiply each problem's time limit per input by this, as training's "
         "judge.stdin_time_scale does (give a run's value to judge as it does).")
STDIN_MAX_OUTPUT_MB_OPTION = typer.Option(
    DEFAULT_MAX_OUTPUT_BYTES / 2**20, "--stdin-max-output-mb", callback=_judge_key("stdin_max_output_mb"),
    help="Stdin (contest) problems: MiB one run of a program may print (past it: a failed run), as training's "
         "judge.stdin_max_output_mb (at most 64).")

# --- problem sets ----------------------------------------------------------------------------

PROBLEMS_HELP = ("Problem file in any supported format, or 'bundled' for the problems shipped with codea1 "
                 "('bundled:train', 'bundled:heldout', 'bundled:demo', 'bundled:all'), or 'bundled-stdin' for "
                 "its stdin/stdout problems (with the same ':train', ':heldout', ':demo', ':all').")
LIMIT_OPTION = typer.Option(None, "--limit", min=1, help="Use only the first N problems.")

# --- output ----------------------------------------------------------------------------------

JSON_OPTION = typer.Option(False, "--json", help="Print JSON instead of a table or text.")
RUN_DIR_HELP = "Training run directory (holds metrics.jsonl, mistakes.sqlite, checkpoints/)."

# --- models (eval) ---------------------------------------------------------------------------


def _dtype_names() -> list[str]:
    return list(typing.get_args(ModelConfig.model_fields["dtype"].annotation))


def _check_dtype(value: str) -> str:
    names = _dtype_names()
    if value not in names:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(names)}")
    return value


def _check_device(value: str) -> str:
    """The device rule of `ModelConfig`, checked before anything is loaded or created."""

    try:
        ModelConfig(device=value)
    except ValidationError as exc:
        raise typer.BadParameter(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
    return value


MODEL_OPTION = typer.Option(
    ..., "--model",
    help="Model: a Hugging Face id, a local model directory, a .gguf file, or a training run / checkpoint directory.")
DEVICE_OPTION = typer.Option(
    "auto", "--device", callback=_check_device, help="auto (CUDA if present, else CPU), cpu, cuda, cuda:N or mps.")
DTYPE_OPTION = typer.Option(
    "auto", "--dtype", callback=_check_dtype,
    help="Weights' dtype: auto (bfloat16 on CUDA and on CPUs with bf16 units, else float32), bfloat16, float16, float32.")
def _check_engine(value: str) -> str:
    try:
        return check_engine_name(value, "--engine")
    except ValueError as exc:
        raise typer.BadParameter(str(exc).split(": ", 1)[1]) from None


ENGINE_OPTION = typer.Option(
    "auto", "--engine", callback=_check_engine,
    help="Sampler: auto (vLLM on a GPU where installed, else hf), hf (codea1's own), vllm, "
         "or llamacpp (llama.cpp on the CPU, the model's GGUF weights).")
THREADS_OPTION = typer.Option(
    None, "--threads", min=1, help="CPU threads for the model (default: torch's).")
TOP_P_HELP = "Nucleus sampling: keep the smallest set of tokens whose probability reaches this (1: all)."
TEMPERATURE_HELP = "Sampling temperature (0: greedy; at most 2, as vLLM takes)."
MAX_NEW_TOKENS_OPTION = typer.Option(1024, "--max-new-tokens", min=1, help="Tokens generated at most per completion.")
SEED_OPTION = typer.Option(0, "--seed", help="Seed of the sampling (same seed, same samples).")


def _read_stops(values: list[str] | None) -> list[str]:
    r"""--stop's strings with \n, \t and \\ read as a newline, a tab and a backslash (the
    evaluation's config checks them, `codea1.eval.setup.check_sampling`)."""
    escapes = {"n": "\n", "t": "\t", "\\": "\\"}
    return [re.sub(r"\\([nt\\])", lambda m: escapes[m.group(1)], v) for v in values or []]


STOP_OPTION = typer.Option(
    None, "--stop", callback=_read_stops, metavar="TEXT",
    help="End a completion once its text holds this string, the completing token kept (repeatable; "
         "\\n and \\t read as a newline and a tab). --stop '\\n```\\n' ends a code answer at its block's "
         "closing fence, as a run trained with rollout.code.stop samples.")
PROBLEMS_PER_BATCH_OPTION = typer.Option(
    8, "--problems-per-batch", min=1, help="Problems generated together, then judged and written to disk.")

# --- training config (train, config show) ----------------------------------------------------

CONFIG_OPTION = typer.Option(None, "--config", help="YAML config file (applied over --preset).")
PRESET_OPTION = typer.Option(
    None, "--preset", help="Bundled preset: cpu-demo, cpu-demo-stdin, paper-1.5b, paper-3b, paper-7b "
    "(`codea1 config show --preset P`).")
SET_OPTION = typer.Option(
    None, "--set", help="Override one config key, e.g. --set grpo.lr=2e-6 (repeatable; `codea1 config keys` lists them).")


# --- output paths ----------------------------------------------------------------------------


def _first_blocking_ancestor(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` that is not a directory, if any."""
    for parent in path.parents:  # relative ones end at '.', which exists
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _refuse_run_checkpoints(path: Path, option: str) -> None:
    run = in_run_checkpoints(path)
    if run is not None:
        raise typer.BadParameter(f"{path} lies in the checkpoints of the training run {run}, which training "
                                 "prunes and replaces whole; write it outside that folder", param_hint=option)


def check_output_dir(path: Path, option: str) -> None:
    """Refuse (before anything is created) a directory path that is a file, lies under one,
    or lies in a training run's checkpoints folder."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise typer.BadParameter(f"{path} is a file, expected a directory", param_hint=option)
    blocker = _first_blocking_ancestor(path)
    if blocker is not None:
        raise typer.BadParameter(f"{path}: {blocker} is a file, not a directory", param_hint=option)
    _refuse_run_checkpoints(path, option)


def check_output_file(path: Path, option: str, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse a file path that is a directory, lies under a file or in a training run's
    checkpoints folder, or lacks one of `suffixes`."""
    path = Path(path)
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a directory, expected a file name", param_hint=option)
    if suffixes and not path.name.lower().endswith(suffixes):
        raise typer.BadParameter(f"{path}: expected a file name ending in {' or '.join(suffixes)}", param_hint=option)
    blocker = _first_blocking_ancestor(path)
    if blocker is not None:
        raise typer.BadParameter(f"{path}: {blocker} is a file, not a directory", param_hint=option)
    _refuse_run_checkpoints(path, option)
