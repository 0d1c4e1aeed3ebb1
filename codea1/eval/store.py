"""An evaluation's directory: append-only samples, its settings, resuming.

Rows are appended one problem at a time and fsync'ed, so an evaluation killed at any
moment loses at most the problem it was writing; the next run cuts a torn last line,
reads what is there, and generates only what is missing. The settings that make samples
comparable are stored once and checked on every resume.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
RUN_FILE = "eval_config.json"



def read_samples(path: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Samples on disk by problem and sample index (a later row replaces an earlier one;
    a torn last line from an interrupted write is ignored)."""
    done: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    if not path.is_file():
        return done
    lines = path.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines):
                break
            raise ValueError(f"{path}:{lineno}: not a JSON sample row ({exc.msg}); move the file away to start over") from exc
        try:
            done[str(row["problem_id"])][int(row["sample"])] = row
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{lineno}: a sample row needs 'problem_id' and 'sample'") from exc
    return done


def repair_tail(path: Path) -> None:
    """Cut a torn last line (a write interrupted mid-row) so appending starts on a fresh line."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def check_identity(out: Path, identity: dict[str, Any]) -> None:
    run_file = out / RUN_FILE
    if run_file.is_file():
        old = json.loads(run_file.read_text())
        diff = {k: (old.get(k), v) for k, v in identity.items() if old.get(k) != v}
        if diff:
            detail = ", ".join(f"{k}: {a!r} on disk vs {b!r} now" for k, (a, b) in diff.items())
            raise ValueError(f"{out} holds an evaluation with other settings ({detail}); use another --out")
    else:
        run_file.write_text(json.dumps(identity, indent=2) + "\n")


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        fh.flush()
        os.fsync(fh.fileno())
