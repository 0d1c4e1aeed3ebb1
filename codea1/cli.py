"""The `codea1` command line: a thin layer over the library API.

Each sub-command lives next to the code it drives; heavy imports (torch, transformers)
happen inside the commands so that `codea1 --help` stays instant.
"""

from __future__ import annotations

import typer

from codea1.data.cli import app as data_app
from codea1.eval.cli import app as eval_app
from codea1.judge.cli import judge_command
from codea1.mistakes.cli import app as mistakes_app
from codea1.plot import plot_command
from codea1.sandbox.cli import app as sandbox_app
from codea1.train.cli import train_command

app = typer.Typer(
    help="Code-A1: train a code LLM and a test LLM against each other with RL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(sandbox_app, name="sandbox", help="Run untrusted code in the sandboxed executor.")
app.add_typer(data_app, name="data", help="Check and convert problem sets.")
app.command("judge")(judge_command)
app.add_typer(mistakes_app, name="mistakes", help="Inspect a Mistake Book.")
app.command("train")(train_command)
app.add_typer(eval_app, name="eval", help="Evaluate code and test models.")
app.command("plot")(plot_command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
