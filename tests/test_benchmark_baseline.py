"""The judge benchmark's process-per-run baseline does the same work as the sandbox.

`benchmarks/judge_step.py` compares the fork-server judge with `ProcessPerRun`, which starts
a fresh Python for every run and encodes values with a standalone copy of the sandbox's
encoder. If that copy stopped loading (say `values.py` gained a package import), every
baseline run would fail fast and the benchmark would compare against nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from codea1.sandbox import Executor, Job, Limits

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "judge_step.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("judge_step_bench", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_process_per_run_gives_the_sandbox_values(bench):
    limits = Limits(timeout_s=10.0, call_timeout_s=2.0)
    job = Job(
        "def f(x):\n    return {'k': [x, (x, 1.5)], 's': {x}}\n",
        ["f(1)", "f('a')", "1 // 0", "f(None)", "print('noise') or 3"],
    )
    baseline = bench.ProcessPerRun(1, limits).run(job)
    with Executor(workers=1, limits=limits, preload=()) as ex:
        sandbox = ex.run(job)
    assert baseline.program_ok and sandbox.program_ok
    assert [c.status for c in baseline.calls] == [c.status for c in sandbox.calls] == ["ok", "ok", "error", "ok", "ok"]
    assert [c.value for c in baseline.calls] == [c.value for c in sandbox.calls]
    assert "ZeroDivisionError" in baseline.calls[2].error


def test_process_per_run_uses_the_runs_malloc_settings(bench):
    from codea1.sandbox._worker import RUN_MALLOC_TUNABLES

    assert bench._BASELINE_ENV["GLIBC_TUNABLES"] == RUN_MALLOC_TUNABLES
