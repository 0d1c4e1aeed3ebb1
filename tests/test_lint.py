"""Pyflakes' checks (ruff's F rules) over the package, the benchmarks and the tests.

A name a module uses but never defines or imports fails only when that line runs, and some
lines run only on a machine this suite does not have (llama.cpp, vLLM, CUDA): an undefined
`StopStrings` in the llama.cpp engine once passed the whole suite here. This reads every
file instead, so such a line fails on any machine. Unused imports and the like are held to
the same zero.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> list[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]' installs it)")
    return [exe]


def test_no_undefined_names_or_dead_imports_anywhere():
    done = subprocess.run([*_ruff(), "check", "--isolated", "--select", "F", "--output-format", "concise",
                           "codea1", "benchmarks", "tests"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_sees_an_undefined_name(tmp_path):
    """The check itself: a module using a name it never defines fails it."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return StopStrings()\n")
    done = subprocess.run([*_ruff(), "check", "--isolated", "--select", "F", str(bad)], capture_output=True, text=True)
    assert done.returncode == 1 and "F821" in done.stdout and "StopStrings" in done.stdout
