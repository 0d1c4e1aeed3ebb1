"""A one-process run runs nothing of `codea1.train.distributed` but deciding it is one.

The step talks to its ranks through `OneProcess` (`codea1.train.one_process`); what several
ranks add (collectives, FSDP2 filler passes, gradient sums) lives in distributed.py and is
reached only when there are several. Every function and method of that module is wrapped
to record its calls, then a tiny run trains two steps (validation and checkpoints included).
"""

from __future__ import annotations

import inspect

import pytest
import torch
from tiny_run import make_scripted, tiny_overrides

import codea1.train.distributed as D
from codea1.train.config import load_config
from codea1.train.loop import train

torch.set_num_threads(1)


def _record_calls(monkeypatch) -> list[str]:
    calls: list[str] = []

    def wrap(name, fn):
        def recorded(*args, **kwargs):
            calls.append(name)
            return fn(*args, **kwargs)
        return recorded

    for name, obj in list(vars(D).items()):
        if inspect.isfunction(obj) and obj.__module__ == D.__name__:
            monkeypatch.setattr(D, name, wrap(name, obj))
        elif inspect.isclass(obj) and obj.__module__ == D.__name__:
            for attr, member in list(vars(obj).items()):
                if inspect.isfunction(member):
                    monkeypatch.setattr(obj, attr, wrap(f"{name}.{attr}", member))
    return calls


@pytest.mark.parametrize("mode", ["a1", "selfplay"])
def test_a_one_process_run_calls_nothing_of_distributed_after_start(tmp_path, tiny, monkeypatch, mode):
    import codea1.engines.hf_engine as hf_engine

    monkeypatch.setattr(hf_engine, "generate", make_scripted(hf_engine.generate, tiny["problems"]))
    calls = _record_calls(monkeypatch)
    assert calls == [] and D.init_ranks.__name__ == "recorded"   # the wrappers are in place
    result = train(load_config(preset="cpu-demo", overrides=tiny_overrides(tiny, mode, 2)), tmp_path / "run")
    assert result.step == 2
    # at start, `init_ranks` reads the launcher's environment and finds one process; no step calls the module
    assert calls == ["init_ranks", "slurm_environment", "launched_world_size"]


def test_the_recorder_sees_a_call_into_distributed(monkeypatch):
    """The check above can fail: a call into the module is recorded."""
    calls = _record_calls(monkeypatch)
    D.global_keys([(0, 0), (0, 0)], None)
    D.Ranks().slots(3)
    assert calls == ["global_keys", "Ranks.__init__", "Ranks.slots"]
