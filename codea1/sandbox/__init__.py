"""Sandboxed fork-server executor of untrusted (model-written) Python code.

See docs/ARCHITECTURE.md (contract) and docs/SANDBOX.md (what is protected). Names are
loaded lazily so that the worker process, which imports this package, stays small (the
cost of every fork grows with the worker's memory).
"""

from typing import TYPE_CHECKING

__all__ = ["Executor", "Job", "Limits", "RunResult", "CallResult", "values_equal", "to_source",
           "encode", "run"]

_WHERE = {
    "Executor": "executor", "run": "executor",
    "Job": "types", "Limits": "types", "RunResult": "types", "CallResult": "types",
    "values_equal": "values", "to_source": "values", "encode": "values",
}

if TYPE_CHECKING:  # pragma: no cover
    from codea1.sandbox.executor import Executor, run
    from codea1.sandbox.types import CallResult, Job, Limits, RunResult
    from codea1.sandbox.values import encode, to_source, values_equal


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(f"codea1.sandbox.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'codea1.sandbox' has no attribute {name!r}")
