"""Where the sandbox cannot run (macOS, Windows, an old kernel), the commands that need it
say so in one line, with how to proceed, before loading anything; nothing is written."""

from __future__ import annotations

import errno
import os
import platform

import pytest
from typer.testing import CliRunner

# imported before `platform.system` is faked below: torch's import (on "Darwin": a .dylib) and the
# hub client's (truststore: the macOS version) ask it too, so run alone this file failed where the
# whole suite, having imported them earlier, passed
import codea1.models  # noqa: F401

from codea1.cli import app
from codea1.sandbox import support


def test_this_machine_can_run_the_sandbox():
    assert support.missing() == []
    support.require("codea1 judge")  # does not raise


@pytest.mark.parametrize("system, hint", [("Darwin", "Linux container or VM"), ("Windows", "WSL2")])
def test_other_systems_are_refused_with_how_to_proceed(monkeypatch, system, hint):
    monkeypatch.setattr(platform, "system", lambda: system)
    assert support.missing() == [f"the sandbox needs Linux (fork server, /proc, pidfd, namespaces); this is {system}"]
    with pytest.raises(support.SandboxUnavailable, match=f"codea1 train runs model-written code.*this is {system}.*{hint}"):
        support.require("codea1 train")


def test_a_kernel_without_pidfd_is_named(monkeypatch):
    def no_pidfd(pid, flags=0):
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    gaps = support.missing()
    assert len(gaps) == 1 and "pidfd_open fails (Function not implemented)" in gaps[0] and "Linux 5.3" in gaps[0]
    monkeypatch.delattr(os, "pidfd_open")
    assert "no os.pidfd_open" in support.missing()[0]


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args", [
    ["judge", "--problem", "p.json", "--code", "c.txt", "--tests", "t.txt"],
    ["train", "--preset", "cpu-demo", "--run-dir", "new-run"],
    ["eval", "code", "--model", "m", "--data", "d.jsonl", "--out", "e"],
    ["eval", "tests", "--model", "m", "--data", "d.jsonl", "--out", "e"],
], ids=lambda a: " ".join(a[:2]) if a[0] == "eval" else a[0])
def test_judge_train_eval_say_in_one_line_what_is_missing(monkeypatch, tmp_path, args):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)  # no traceback
    lines = result.stderr.splitlines()
    command = "codea1 " + " ".join(args[:2] if args[0] == "eval" else args[:1])
    assert len(lines) == 1 and lines[0].startswith(f"error: {command} runs model-written code in the sandbox"), lines
    assert "this is Darwin" in lines[0] and "To proceed, run it in a Linux container or VM, as root" in lines[0]
    assert _files(tmp_path) == []  # refused before anything was loaded or written
