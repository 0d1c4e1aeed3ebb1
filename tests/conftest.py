"""Fixtures shared by the test files (pytest finds this file itself).

- `tiny`: the tiny random-weight model and the problem files of tests/tiny_run.py
  (`make_tiny`: paths and every problem), built once a test module;
- `tiny_model_dir`: the tiny model's directory alone (tests/tiny_model.py), once a module.

A test file with a fixture of its own shape names it for what it holds (`tiny_dist`,
`tiny_stdin`, `tiny_policies`).
"""

from __future__ import annotations

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
