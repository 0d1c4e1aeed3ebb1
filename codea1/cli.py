"""The `codea1` command line: a thin layer over the library API.

Each sub-command lives next to the code it drives; heavy imports (torch, transformers)
happen inside the commands so that `codea1 --help` stays instant.

This module is also the one error boundary of every command: bad input (a usage error,
a project error such as `ConfigError` or `ProblemFormatError`, a missing or unreadable
file, a file that is not UTF-8, JSON, YAML or parquet, a broken checkpoint given to
`--resume`) prints one line `error: ...` on stderr and exits 2; a failure at run time (a
model that does not load, a sandbox that fails, a full disk, no memory left) prints one
line and exits 1; a full disk prints the file it could not write and exits 3
(`EXIT_DISK_FULL`; what was written before is whole: files are replaced through a rename,
checkpoints are atomic, the Mistake Book's step is rolled back). `--debug` (anywhere on
the command line) or `CODEA1_DEBUG=1` shows the traceback instead. Any other exception is
a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from typer._click import exceptions as click_errors  # typer 0.29 vendors click as typer._click
from typer.core import TyperGroup

from codea1 import __version__
from codea1.data.cli import app as data_app
from codea1.eval.cli import app as eval_app
from codea1.export.cli import export_command
from codea1.judge.cli import judge_command
from codea1.mistakes.cli import app as mistakes_app
from codea1.output_files import disk_full
from codea1.plot import plot_command
from codea1.sandbox.cli import app as sandbox_app
from codea1.train.cli import train_command
from codea1.train.config_cli import app as config_app
from codea1.train.run_lock import RunLocked

DEBUG_ENV = "CODEA1_DEBUG"
_PACKAGE_DIR = str(Path(__file__).resolve().parent)

# OS errors that mean the user named a wrong path: bad input (exit 2). Other OS errors
# (a full disk, an I/O error) are failures at run time (exit 1).
_INPUT_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError)
EXIT_DISK_FULL = 3


class CommandFailed(click_errors.ClickException):
    """A known error of a command, already turned into its one line and exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def one_line(text: str) -> str:
    """Several lines (e.g. one per wrong config key) joined with '; '."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _raised_by_codea1(exc: BaseException) -> bool:
    """True when the innermost frame of `exc` is codea1's own code: the project raises
    ValueError with a message for the user; one from inside a library is unexpected."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR)


def _os_message(exc: OSError) -> str:
    if exc.filename is None:
        return str(exc)
    where = f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 is not None else "")
    return f"{where}: {exc.strerror or exc}"


def _validation_message(exc: Any) -> str:
    """A pydantic ValidationError as one line naming each field."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or exc.title
        got = err.get("input")
        got_text = f" (got {got!r})" if got is not None and not isinstance(got, (dict, list)) else ""
        parts.append(f"{loc}: {err['msg']}{got_text}")
    return "; ".join(parts)


def explain(exc: BaseException) -> tuple[int, str] | None:
    """(exit code, one-line message) for an expected error, None for a bug."""
    from codea1.models import ModelError
    from codea1.sandbox.executor import WorkerError
    from codea1.train.checkpoint import CheckpointError

    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(exc, pydantic.ValidationError):
        return 2, _validation_message(exc)
    if isinstance(exc, UnicodeDecodeError):
        return 2, f"not UTF-8 text: {exc.reason} at byte {exc.start}"
    if isinstance(exc, BrokenPipeError):
        return None  # `codea1 config keys | head`: typer ends quietly
    if isinstance(exc, _INPUT_OS_ERRORS):
        return 2, _os_message(exc)
    if disk_full(exc):
        where = exc.filename if isinstance(exc, OSError) and exc.filename else "a file"
        return EXIT_DISK_FULL, (f"{where}: no space left on device (the disk is full); what was written "
                                "before is whole: free some space and run the command again (a run: --resume)")
    if isinstance(exc, RunLocked):
        return 1, one_line(exc)
    if isinstance(exc, OSError):
        return 1, _os_message(exc)
    if isinstance(exc, json.JSONDecodeError):
        return 2, f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
    yaml = sys.modules.get("yaml")
    if yaml is not None and isinstance(exc, yaml.YAMLError):
        from codea1.train.config import yaml_error_text  # (torch-free)

        return 2, yaml_error_text(exc)  # "line L, column C: ...", not PyYAML's caret display
    arrow = sys.modules.get("pyarrow")
    if arrow is not None and isinstance(exc, arrow.ArrowException):
        return 2, f"not a readable parquet/arrow file: {one_line(exc)}"
    if isinstance(exc, ValueError) and _raised_by_codea1(exc):  # (ModelNotFound is one)
        return 2, one_line(exc)
    if isinstance(exc, CheckpointError):  # the run directory given to --resume is broken
        return 2, one_line(exc)
    engines = sys.modules.get("codea1.engines.base")
    if engines is not None and isinstance(exc, engines.EngineUnavailable):  # rollout.engine can't run here
        return 2, one_line(exc)
    if isinstance(exc, (ModelError, WorkerError)):
        return 1, one_line(exc)
    distributed = sys.modules.get("codea1.train.distributed")
    if distributed is not None and isinstance(exc, distributed.RankLost):  # another rank died
        return 1, one_line(exc)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError):
        return 1, f"out of GPU memory: {one_line(exc).split(';')[0]} (smaller batches or micro_batch_tokens help)"
    if isinstance(exc, MemoryError):
        return 1, "out of memory (smaller batches, fewer problems a step or fewer workers help)"
    return None


def _debug_requested(args: list[str]) -> bool:
    """Remove every `--debug` before a `--` from `args`; True if there was one (or the env says so)."""
    end = args.index("--") if "--" in args else len(args)
    found = "--debug" in args[:end]
    args[:end] = [a for a in args[:end] if a != "--debug"]
    return found or os.environ.get(DEBUG_ENV, "") not in ("", "0")


# `codea1 --help` lists the commands in the order a new user meets them; a command not
# named here comes after these, in the order it was added.
HELP_ORDER = ("train", "plot", "eval", "export", "mistakes", "judge", "config", "data", "sandbox")


class CodeA1Group(TyperGroup):
    """The top-level group: the error boundary of every command."""

    debug = False

    def list_commands(self, ctx: typer.Context) -> list[str]:
        names = list(super().list_commands(ctx))
        known = [n for n in HELP_ORDER if n in names]
        return known + [n for n in names if n not in known]

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click_errors.ClickException, typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:  # (train answers Ctrl-C itself, with a checkpoint)
            if CodeA1Group.debug:
                raise
            typer.echo("\ninterrupted (Ctrl-C): run the same command again to go on (an evaluation keeps the "
                       "problems it finished and resumes from there)", err=True)
            raise typer.Exit(130) from None
        except Exception as exc:
            known = explain(exc)
            if known is None or CodeA1Group.debug:
                raise
            raise CommandFailed(known[1], known[0]) from exc

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        args = list(sys.argv[1:] if args is None else args)
        CodeA1Group.debug = _debug_requested(args)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name or "codea1", complete_var, standalone_mode=False, **extra)
        except click_errors.NoArgsIsHelpError as exc:
            typer.echo(exc.format_message())
            sys.exit(exc.exit_code)
        except click_errors.UsageError as exc:
            path = exc.ctx.command_path.split()[1:] if exc.ctx is not None else []
            command = " ".join(["codea1", *path])  # as typed, whatever the program's name
            typer.echo(f"error: {one_line(exc.format_message())} (see '{command} --help')", err=True)
            sys.exit(exc.exit_code)
        except click_errors.ClickException as exc:
            typer.echo(f"error: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"codea1 {__version__}")
        raise typer.Exit(0)


app = typer.Typer(
    cls=CodeA1Group,
    help="Code-A1: train a code LLM and a test LLM against each other with RL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["--help", "-h"]},
)


@app.callback()
def _options(
    version: Optional[bool] = typer.Option(
        None, "--version", is_eager=True, callback=_show_version, help="Print codea1's version and exit."),
    debug: bool = typer.Option(
        False, "--debug", help=f"Show the traceback of an error (anywhere on the line; or {DEBUG_ENV}=1)."),
) -> None:
    """Code-A1: train a code LLM and a test LLM against each other with RL."""


app.command("train")(train_command)
app.command("plot")(plot_command)
app.add_typer(eval_app, name="eval", help="Evaluate code and test models.")
app.command("export")(export_command)
app.add_typer(mistakes_app, name="mistakes", help="Inspect a Mistake Book.")
app.command("judge")(judge_command)
app.add_typer(config_app, name="config", help="Show the resolved training config and every --set key.")
app.add_typer(data_app, name="data", help="Check and convert problem sets.")
app.add_typer(sandbox_app, name="sandbox", help="Run untrusted code in the sandboxed executor.")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
