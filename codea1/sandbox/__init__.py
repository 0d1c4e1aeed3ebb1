"""Sandboxed fork-server executor of untrusted (model-written) Python code.

See docs/ARCHITECTURE.md (contract) and docs/SANDBOX.md (what is protected).
"""

from codea1.sandbox.executor import Executor, run
from codea1.sandbox.types import CallResult, Job, Limits, RunResult
from codea1.sandbox.values import values_equal, to_source, encode

__all__ = ["Executor", "Job", "Limits", "RunResult", "CallResult", "values_equal", "to_source",
           "encode", "run"]
