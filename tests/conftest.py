"""Fixtures shared by the test files (pytest finds this file itself).

- `tiny`: the tiny random-weight model and the problem files of tests/tiny_run.py
  (`make_tiny`: paths and every problem), built once a test module;
- `tiny_model_dir`: the tiny model's directory alone (tests/tiny_model.py), once a module;
- `small_disk`: a 2 MiB tmpfs (root only; the test skips elsewhere), which `fill_disk` fills.

A test file with a fixture of its own shape names it for what it holds (`tiny_dist`,
`tiny_stdin`, `tiny_policies`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    from tiny_run import make_tiny

    return make_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    from tiny_model import tiny_test_model

    return tiny_test_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 2 MiB (root only): a disk that fills."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_disk(disk: Path) -> Path:
    """Fill the disk to its last byte (a file of what is left)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (65536, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError:
                pass
    return filler
