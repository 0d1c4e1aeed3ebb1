"""The Code-A1 training loop: typed config, the step, checkpoints, metrics and the CLI.

`from codea1.train import train, load_config` is the library entry; `codea1 train` is
the command over it. The loop module (torch, transformers) is imported on first use.
"""

from __future__ import annotations

from typing import Any

from codea1.train.config import ConfigError, TrainConfig, load_config

__all__ = ["ConfigError", "TrainConfig", "load_config", "train"]


def __getattr__(name: str) -> Any:
    if name == "train":
        from codea1.train.loop import train

        return train
    raise AttributeError(f"module 'codea1.train' has no attribute {name!r}")
