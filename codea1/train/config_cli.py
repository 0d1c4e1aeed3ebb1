"""`codea1 config show|keys`: the resolved training config, and every key `--set` takes.

So that no one has to read the preset files or the pydantic classes to know what a run
will do: `show` prints exactly what `codea1 train` would write to RUN_DIR/config.yaml,
`keys` lists each key with its type, default and the one line of its field description.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, List, Literal, Optional

import typer
from pydantic import BaseModel

from codea1.cli_options import CONFIG_OPTION, PRESET_OPTION, SET_OPTION

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)


def type_name(annotation: Any) -> str:
    """A config field's type as a user writes it: 'int', 'float or null', 'one of a|b'."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + "|".join(str(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin in (list, tuple):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        inner = ", ".join(type_name(a) for a in args)
        return f"{origin.__name__}[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


def config_keys(model: type[BaseModel], defaults: dict[str, Any], prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """(dotted key, type, default, description) of every leaf field of `model`, in order.

    `defaults` is the model's dumped default instance: a nested section's default
    (rollout.code.max_new_tokens is 1024, SamplingConfig's own default 512) comes from
    its parent, as the config really resolves it.
    """
    from codea1.train.config import config_fields

    rows = []
    for name, info in config_fields(model).items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            rows.extend(config_keys(ann, defaults.get(name) or {}, f"{prefix}{name}."))
        else:
            rows.append((prefix + name, type_name(ann), defaults.get(name), info.description or ""))
    return rows


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


@app.command("show")
def show_command(
    config: Optional[Path] = CONFIG_OPTION,
    preset: Optional[str] = PRESET_OPTION,
    set_: Optional[List[str]] = SET_OPTION,
) -> None:
    """Print the resolved config (defaults <- --preset <- --config <- --set) as YAML."""
    from codea1.train.config import config_to_yaml, load_config

    typer.echo(config_to_yaml(load_config(path=config, preset=preset, overrides=set_ or [])), nl=False)


@app.command("keys")
def keys_command() -> None:
    """List every key `--set` takes: type, default (the paper's value) and what it does."""
    from codea1.train.config import TrainConfig

    rows = [(key, kind, _value(default), help_) for key, kind, default, help_ in
            config_keys(TrainConfig, TrainConfig().model_dump(mode="json"))]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    typer.echo(f"{'key':{widths[0]}}  {'type':{widths[1]}}  {'default':{widths[2]}}  help")
    for key, kind, default, help_ in rows:
        typer.echo(f"{key:{widths[0]}}  {kind:{widths[1]}}  {default:{widths[2]}}  {help_}")
