"""An evaluation's directory: append-only samples, its settings, resuming.

Rows are appended one problem at a time and fsync'ed, so an evaluation killed at any
moment loses at most the problem it was writing; the next run cuts a torn last line,
reads what is there, and generates only what is missing. The settings that make samples
comparable are stored once and checked on every resume.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator, Sequence

from codea1.output_files import atomic_output, input_named_as_output, iter_jsonl, naming_full_disk
from codea1.sandbox.stdio import DEFAULT_MAX_OUTPUT_BYTES

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
RUN_FILE = "eval_config.json"
MODEL_FILE = "model.json"
WRITTEN = (SAMPLES_FILE, SUMMARY_FILE, RUN_FILE, MODEL_FILE)  # every file an evaluation writes in --out


def check_out_dir(out: Path, model: str | Sequence[str] | None, data: str, written: Sequence[str] = WRITTEN,
                  codes_from: str | os.PathLike[str] | None = None) -> None:
    """Refuse an --out whose files would overwrite an input, before anything is created: the
    --data file under one of the names the evaluation writes (`written`), a path in the
    directory of a model (a training run holds a samples.jsonl too) or of `eval select
    --codes-from`, existing yet or not (a new one let through would be refused as soon as
    the evaluation had created it, so it could never be resumed), or a directory holding
    those names that no evaluation wrote (no eval_config.json beside them)."""
    out = Path(out)
    if any(input_named_as_output(out / name, [data]) for name in written):
        raise ValueError(f"--out {out}: the evaluation would write over the --data file {data}; use another --out")
    models = [] if model is None else [model] if isinstance(model, str) else list(model)
    # a --codes-from holding none of an evaluation's files is refused by `eval select` itself, in its own words
    source = None if codes_from is None else Path(codes_from).expanduser()
    inputs = [(f"the model directory {m}", m) for m in models] + \
        ([] if source is None or not any((source / name).is_file() for name in written)
         else [(f"the --codes-from directory {codes_from}", str(codes_from))])
    for what, given in inputs:
        if Path(given).expanduser().is_dir() and \
                input_named_as_output(out, directories=[Path(given).expanduser()]) is not None:
            raise ValueError(f"--out {out} lies in {what}, an input of the evaluation, which writes nothing "
                             f"into what it reads: put --out elsewhere, outside {given}")
    if out.is_dir() and not (out / RUN_FILE).is_file():
        found = [name for name in written if (out / name).exists()]
        if found:
            raise ValueError(f"--out {out} holds {', '.join(found)} that no evaluation wrote (a training run's?); "
                             "use another --out")


def _fields(p) -> bytes:
    return json.dumps([p.id, p.question, p.reference, p.tests, p.test_program]).encode()


def data_digest(problems) -> str:
    """A short fingerprint of a problem set (ids, questions, references, golden tests), kept
    in summary.json so that `eval compare` and `eval select --codes-from` recognise the
    same problems under another path."""
    h = hashlib.sha256()
    for p in problems:
        h.update(_fields(p))
    return h.hexdigest()[:16]


def problem_digest(problem) -> str:
    """One problem's fingerprint (the fields of `data_digest`), kept in each row scored on
    it (`problem_digest`), so that a resumed evaluation can tell a changed problem."""
    return hashlib.sha256(_fields(problem)).hexdigest()[:16]


def check_rows_current(out: Path, problems, done: dict[str, dict[int, dict[str, Any]]],
                       rows_file: str = SAMPLES_FILE) -> None:
    """Refuse to resume rows scored on a problem that has changed since (the data file was
    edited, or codea1 now reads it otherwise): the evaluation would mix two scorings. Rows
    written before rows carried `problem_digest` are taken as they are."""
    for p in problems:
        rows = done.get(p.id)
        if not rows:
            continue
        now = problem_digest(p)
        if any(row.get("problem_digest", now) != now for row in rows.values()):
            raise ValueError(f"{out}: problem {p.id!r} is not the one its rows in {rows_file} were scored on "
                             "(its question, reference or golden tests differ: the data file changed, or codea1 "
                             "reads it otherwise now); resuming would mix the two, so use another --out")


def write_json(path: Path, data: Any) -> None:
    """A JSON file written whole or not at all (an interrupted write keeps the previous one)."""
    with atomic_output(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2) + "\n")



def read_samples(path: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Samples on disk by problem and sample index (a later row replaces an earlier one)."""
    done: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    if not path.is_file():
        return done
    for lineno, row in iter_jsonl(path):
        try:
            done[str(row["problem_id"])][int(row["sample"])] = row
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{lineno}: a sample row needs 'problem_id' and 'sample'") from exc
    return done


def open_eval_dir(out: Path, identity: dict[str, Any]) -> tuple[Path, dict[str, dict[int, dict[str, Any]]]]:
    """Create or reopen an evaluation directory: its samples file and the samples in it."""
    out.mkdir(parents=True, exist_ok=True)
    check_identity(out, identity)
    samples_path = out / SAMPLES_FILE
    repair_tail(samples_path)
    return samples_path, read_samples(samples_path)


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    write_json(out / SUMMARY_FILE, summary)


def repair_tail(path: Path) -> None:
    """Cut a torn last line (a write interrupted mid-row) so appending starts on a fresh line."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


#: settings an evaluation records only when they are set (so that directories written before
#: them still resume): one on disk and absent now differs as much as two values do
OPTIONAL_SETTINGS = ("stop",)
#: settings recorded since a later version (the sandbox's limits, which decide verdicts, and
#: the checkpoint step a training run directory resolved to): compared only where the
#: directory on disk records them, so that one written before them still resumes
LATER_SETTINGS = ("memory_mb", "min_timeout_s", "slowdown", "test_timeout_s", "test_call_timeout_s", "mutation",
                  "step", "code_step", "test_step")
#: the stdin judge's settings of an evaluation (`--stdin-time-scale`, `--stdin-max-output-mb`,
#: training's `judge.stdin_time_scale` and `judge.stdin_max_output_mb`) and their defaults
STDIN_DEFAULTS: dict[str, Any] = {"stdin_time_scale": 1.0, "stdin_max_output_mb": DEFAULT_MAX_OUTPUT_BYTES / 2**20}
#: settings recorded since a later version that judged with one fixed value before (the stdin
#: judge's): a directory without one was made with that value, so it resumes (and compares)
#: as having it
FIXED_BEFORE: dict[str, Any] = dict(STDIN_DEFAULTS)


def with_fixed_before(identity: dict[str, Any]) -> dict[str, Any]:
    """An eval_config.json's settings with the `FIXED_BEFORE` values it lacks (`kind_of` one
    of the evaluations: each records them)."""
    return {**FIXED_BEFORE, **identity} if kind_of(identity) is not None else identity


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; a ValueError naming the file when it is not one (a
    file an evaluation wrote, edited or damaged since)."""
    try:
        value = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); an evaluation writes it, so restore it or use "
                         "another directory") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(value).__name__}; an evaluation writes "
                         "it, so restore it or use another directory")
    return value


def kind_of(identity: dict[str, Any]) -> str | None:
    """Which command wrote an eval_config.json (each stores its own settings): "code",
    "tests" or "select" (`eval code|tests|select`), or None."""
    if "n_code" in identity:
        return "select"
    if "k" in identity and "mutation_style" in identity:
        return "tests"
    if "n" in identity and "model" in identity:
        return "code"
    return None


def check_identity(out: Path, identity: dict[str, Any]) -> None:
    """Record `identity` (the settings an evaluation's rows depend on) in a new OUT, or refuse
    to resume an OUT written by another command (`kind_of`), or with other settings."""
    run_file = out / RUN_FILE
    if run_file.is_file():
        old = with_fixed_before(read_json_object(run_file))
        on_disk, now = kind_of(old), kind_of(identity)
        if on_disk is not None and now is not None and on_disk != now:
            raise ValueError(f"{out} is an `eval {on_disk}` directory; `eval {now}` writes its own: "
                             "use another --out")
        diff = {k: (old.get(k), v) for k, v in identity.items()
                if old.get(k) != v and (k in old or k not in LATER_SETTINGS)}
        diff.update({k: (old[k], None) for k in OPTIONAL_SETTINGS if k in old and k not in identity})
        if "scoring" in diff:
            raise ValueError(f"{out} holds rows scored by another version of codea1 (scoring "
                             f"{diff['scoring'][0]!r} on disk, {diff['scoring'][1]!r} now: how tests are read or "
                             "counted changed); resuming would mix the two, so use another --out")
        steps = [k for k in ("step", "code_step", "test_step") if k in diff]
        if steps:
            detail = ", ".join(f"{k.replace('_', ' ')} {diff[k][0]} on disk, {diff[k][1]} now" for k in steps)
            raise ValueError(f"{out} holds an evaluation of another checkpoint of the training run ({detail}: "
                             "the run saved a newer one since, and a run directory stands for its latest); "
                             "resuming would mix the two, so use another --out")
        if diff:
            detail = ", ".join(f"{k}: {a!r} on disk vs {b!r} now" for k, (a, b) in diff.items())
            raise ValueError(f"{out} holds an evaluation with other settings ({detail}); use another --out")
    else:
        write_json(run_file, identity)


#: eval_config.json's record of what made each role's samples beyond the settings
SAMPLED_WITH = "sampled_with"


def sampler_record(policies: Any, engine: Any) -> dict[str, Any]:
    """What decides a sample beyond the sampling settings: the engine, the device kind and
    the weights' dtype (`--dtype auto` resolves per machine: bf16 where the CPU has bf16
    units, float32 elsewhere; llama.cpp samples its GGUF weights, whatever the dtype)."""
    dtype = None if engine.name == "llamacpp" else str(policies.dtype).removeprefix("torch.")
    return {"engine": engine.name, "device": str(policies.device).split(":")[0], "dtype": dtype}


def check_sampled_with(out: Path, role: str, sampler: dict[str, Any]) -> None:
    """Before `role`'s new samples are written to OUT: refuse when the ones on disk were
    made by another engine, device kind or dtype (a resume would mix the two, as a resume
    with other settings would); the first samples of a role record theirs. A directory
    written before this record resumes unchecked, and records the sampler from then on."""
    run_file = out / RUN_FILE
    record = read_json_object(run_file)
    kept = record.get(SAMPLED_WITH)
    kept = kept if isinstance(kept, dict) else {}
    old = kept.get(role)
    if old is None:
        write_json(run_file, {**record, SAMPLED_WITH: {**kept, role: sampler}})
        return
    if old != sampler:
        def said(s: Any) -> str:
            return ", ".join(f"{k} {v}" for k, v in s.items()) if isinstance(s, dict) else repr(s)
        raise ValueError(f"{out} holds {role} samples made with {said(old)}; these would be made with "
                         f"{said(sampler)} (another --engine, --device or --dtype, or `--dtype auto` on a CPU "
                         "with other bf16 support): resuming would mix the two, so give the same options or "
                         "use another --out")


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows at the end of a JSONL file, made durable; a full disk names the file (a torn last
    line it leaves is cut when the output is resumed)."""
    with naming_full_disk(path), path.open("a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        fh.flush()
        os.fsync(fh.fileno())


@contextlib.contextmanager
def removed_if_failed(out: Path) -> Iterator[None]:
    """Remove `out` again if it did not exist before and the evaluation failed before it
    wrote a sample: a failed command leaves no empty output directory behind."""
    out = Path(out)
    created = not out.exists()
    try:
        yield
    except BaseException:
        if created and out.is_dir() and not any(
            (out / name).is_file() and (out / name).stat().st_size for name in (SAMPLES_FILE, SUMMARY_FILE)
        ):
            for name in (RUN_FILE, SAMPLES_FILE, MODEL_FILE):
                (out / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                out.rmdir()  # only if nothing else is in it
        raise
