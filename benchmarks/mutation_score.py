"""Mutation score of the core math: Cosmic-Ray over the functions that compute the numbers.

    pip install -e '.[crosscheck]'        # cosmic-ray==8.7.0
    python benchmarks/mutation_score.py [--only grpo,rewards] [--timeout 60] [--json out.json]

Each target is one module, the functions in it that hold the math, and the test files
that guard them (TARGETS below): GRPO's advantages, sample selection, losses and LR
schedule (`codea1/grpo.py`), the reward formulas (`codea1/judge/rewards.py`), pass@k
(`codea1/passk.py`), the selection rule of `codea1 eval select` (`choose`), and the
Mistake Book's ranking (how failures and passes move a test's frequency, and the order
`top` reads), how `eval tests` reads the tests of a test model's answer
(`codea1/eval/answer_tests.py`), the statistics of `eval compare` (the paired bootstrap,
the sign test, the detectable size, the verdict, what may be compared:
`codea1/eval/compare.py`), the order problems are drawn in (`codea1/data/sampler.py`) and
the arithmetic of `--time-limit` (`TimeBudget`, `codea1/train/stopping.py`), which
code and tests are read out of a completion's Markdown fences (`codea1/judge/extract.py`),
how a standard-input problem's outputs are compared and its tests read
(`codea1/data/stdin_io.py`), what an evaluation directory keeps and refuses on resume
(`codea1/eval/store.py`), and how SimpleNamespace, array.array and a program's subclasses of
built-in types cross, compare and are written back (`codea1/sandbox/values.py`,
`decode.py`). Mutants outside the named functions (`Class.method` names one class's method)
are marked skipped before the run, and so, for a target with a `commit`, are those on lines
that commit did not write (`git blame`: what one change added, without the old code around
it); a target costs (its mutants kept) x (one run of its test files).

Cosmic-Ray mutates the module in place, so every target runs in a private copy of the
checkout (codea1/, tests/, pyproject.toml) put first on sys.path; the checkout itself is
never written. Importing torch, transformers and peft takes seconds, longer than most
test files run, so the test command is a client of a warm server (this script with
`--serve`): the server imports those libraries (never codea1) once, and forks a child per
mutant that imports the mutated copy of codea1 and runs pytest on the target's test
files; the child's exit status is the test command's. A mutant is killed when the test command fails (or times out: the
per-mutant `--timeout`); the baseline (the unmutated copy) must pass first. Printed: per
target the mutants run, killed, survived and the score, then every survivor with its
line and diff. docs/BENCHMARKS.md ("Mutation score") lists the survivors judged
equivalent, with a reason each.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    name: str
    module: str                  # path from the checkout's root
    functions: tuple[str, ...]   # functions and methods (by name) whose mutants run
    tests: tuple[str, ...]       # the test files that guard them
    commit: str = ""             # only the lines of those functions this commit wrote (git blame), "" all


# (the one slow test of tests/test_sandbox_values.py, 6 s of random values, left out)
VALUE_TESTS = ("tests/test_value_fidelity_a.py", "tests/test_sandbox_values.py",
               "--deselect=tests/test_sandbox_values.py::test_values_equal_checks_and_compares_in_one_walk_as_it_did_in_three")

TARGETS = (  # (the new exact tests first: a mutant they kill costs one short run)
    Target("rewards", "codea1/judge/rewards.py",
           ("valid_ratio", "score_suite", "code_reward", "test_reward", "nonprintable_share"),
           ("tests/test_math_exact.py", "tests/test_rewards.py")),
    Target("passk", "codea1/passk.py",
           ("pass_at_k", "avg_at_n", "default_ks", "aggregate"),
           ("tests/test_math_exact.py", "tests/test_eval_passk.py")),
    Target("select", "codea1/eval/select.py",
           ("choose", "_largest"),
           ("tests/test_math_exact.py", "tests/test_eval_select.py")),
    Target("mistakes", "codea1/mistakes/book.py",
           ("__add__", "_merged_updates", "top", "top_many", "entries", "apply_step", "_apply_net",
            "_apply_in_order"),
           ("tests/test_math_exact.py", "tests/test_mistakes.py")),
    Target("answer_tests", "codea1/eval/answer_tests.py",
           ("_is_assert_on", "_is_context", "_parametrize_cases", "_function_tests", "_module", "answer_tests"),
           ("tests/test_answer_tests.py",)),
    Target("compare", "codea1/eval/compare.py",
           ("sign_test", "mde", "binary_mde", "value", "compare_metric", "verdict", "check_comparable", "compare"),
           ("tests/test_eval_compare.py",)),
    Target("sampler", "codea1/data/sampler.py",
           ("__init__", "_permutation", "_next_epoch", "take", "state", "load_state"),
           ("tests/test_data_sampler.py",)),
    Target("time_budget", "codea1/train/stopping.py",
           ("_fmt", "learn", "record_step", "get", "record", "left", "refuse", "refuse_step", "refuse_commit"),
           ("tests/test_run_dir.py::test_the_time_budget_on_hand_computed_edges",
            "tests/test_run_dir.py::test_the_time_budget_refuses_what_cannot_finish")),
    Target("extract", "codea1/judge/extract.py",
           ("code_blocks", "extract_code", "extract_test_source", "python_test_source", "_joined"),
           ("tests/test_judge_parse.py",)),
    Target("stdin_io", "codea1/data/stdin_io.py",
           ("normalize_input", "time_limit_of", "tolerance_of", "checker_of", "_tokens_equal", "outputs_match",
            "_roles", "_line_label", "_label", "_blocks", "_json_tests", "parse_io_tests", "_pair",
            "_unfenced_blocks"),
           ("tests/test_stdin_parse_headings.py", "tests/test_stdin_parse_unfenced.py",
            "tests/test_stdin_judge.py::test_outputs_compare_by_tokens",
            "tests/test_stdin_judge.py::test_an_infinite_number_matches_only_itself_under_a_tolerance",
            "tests/test_stdin_judge.py::test_the_reader_takes_what_small_models_write_and_counts_the_rest_invalid",
            "tests/test_stdin_judge.py::test_the_comparison_at_its_edges",
            "tests/test_stdin_judge.py::test_the_problem_s_own_limits_and_checker",
            "tests/test_stdin_judge.py::test_the_reader_at_its_edges")),
    # What 52b9015 wrote (SimpleNamespace, array.array, a program's subclasses of built-in
    # types): its new functions and its lines in the ones it changed (`_encode_items`, code
    # it moved unchanged, left out): how such values are encoded, checked and compared, how
    # the trusted side decodes and compares them, and how they are written back as source.
    Target("values", "codea1/sandbox/values.py",
           ("_encode_extra", "_encode_namespace", "_encode_array", "_builtin_base", "_encode_subclass",
            "_encode_base", "_own_attributes", "_program_attributes", "_check_namespace", "_check_array",
            "_check_subclass", "_extra_equal"),
           VALUE_TESTS, commit="52b9015"),
    Target("decode", "codea1/sandbox/decode.py", ("Subclass.__eq__", "_decode", "_close"), VALUE_TESTS,
           commit="52b9015"),
    Target("values_source", "codea1/sandbox/values.py",
           ("_extra_source", "_built_object", "_built_subclass", "_main_qualname", "_with_attributes", "_keywords"),
           VALUE_TESTS, commit="52b9015"),
    # What 65bb4fa wrote: the reading of stdin tests written without fences.
    Target("stdin_unfenced", "codea1/data/stdin_io.py", ("_unfenced_blocks", "parse_io_tests", "_pair"),
           ("tests/test_stdin_parse_unfenced.py", "tests/test_stdin_parse_headings.py"), commit="65bb4fa"),
    Target("store", "codea1/eval/store.py",
           ("check_out_dir", "data_digest", "problem_digest", "check_rows_current", "write_json",
            "read_samples", "open_eval_dir", "repair_tail", "check_identity", "append_rows", "removed_if_failed"),
           ("tests/test_eval_store.py",)),
    Target("grpo", "codea1/grpo.py",
           ("group_advantages", "has_signal", "select_test_groups", "select_batches", "_code_batch", "_test_batch",
            "token_mean", "clipped_surrogate", "k3_kl", "grpo_token_loss", "warmup_cosine", "split_mini_batches",
            "mini_batch_token_counts", "finish"),
           ("tests/test_math_exact.py", "tests/test_update_reference.py", "tests/test_grpo.py",
            "tests/test_step_batches.py", "tests/test_train_selection.py")),
)

CONFIG = """[cosmic-ray]
module-path = "{module}"
timeout = {timeout}
excluded-modules = []
test-command = "{command}"

[cosmic-ray.distributor]
name = "local"
"""


def line_ranges(source: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """(first, last) line of every function or method of `source` with one of the names; a
    name `Class.method` is that class's method only (`__eq__` alone is every class's)."""
    tree = ast.parse(source)
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    named = [(n.name, n) for n in ast.walk(tree) if isinstance(n, functions)]
    named += [(f"{c.name}.{n.name}", n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
              for n in c.body if isinstance(n, functions)]
    wanted = set(names)
    missing = wanted - {name for name, _ in named}
    if missing:
        raise SystemExit(f"mutation_score: no function {', '.join(sorted(missing))} in the module")
    return [(n.lineno, n.end_lineno) for name, n in named if name in wanted]


def written_by(module: str, commit: str) -> set[int]:
    """The lines of the checkout's `module` that `commit` wrote and no later commit changed
    (`git blame`): a target on what one change added, without the old code around it."""
    blame = subprocess.run(["git", "blame", "--porcelain", "--", module], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    full = subprocess.run(["git", "rev-parse", "--verify", commit + "^{commit}"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    lines = {int(parts[2]) for parts in (row.split() for row in blame.splitlines())
             if len(parts) >= 3 and parts[0] == full}
    if not lines:
        raise SystemExit(f"mutation_score: no line of {module} is {commit}'s now")
    return lines


def copy_checkout(dest: Path) -> None:
    """What the tests need of the checkout, without caches or virtual environments."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for part in ("codea1", "tests"):
        shutil.copytree(ROOT / part, dest / part, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")


PRELOAD = ("numpy", "torch", "transformers", "peft", "safetensors", "pydantic", "yaml", "pytest")


def pytest_args(target: Target, exclude: set[str]) -> list[str]:
    # (plugin autoloading off, see `serve`: pytest-cov and friends cost seconds and change no outcome)
    tests = [t for t in target.tests if t not in exclude]
    return ["-x", "-q", "-p", "no:cacheprovider", "-p", "pytest_timeout", "-m", "not slow", *tests]


def serve(sock_path: str, timeout: float) -> None:
    """The warm server: import the heavy libraries, then per request fork a child that runs
    pytest in the request's directory, with that directory first on sys.path; answer with
    the child's exit status. A child (and what it started) past `timeout` seconds is killed:
    the mutant counts as killed, as Cosmic-Ray counts a timeout."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for name in PRELOAD:
        importlib.import_module(name)
    assert not any(m == "codea1" or m.startswith("codea1.") for m in sys.modules), "the server imported codea1"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    Path(sock_path + ".ready").touch()
    while True:
        conn, _ = srv.accept()
        with conn:
            request = json.loads(conn.makefile().readline())
            if request == "stop":
                return
            code = _run_child(srv, conn, request, timeout)
            try:
                conn.sendall(f"{code}\n".encode())
            except OSError:
                pass  # the client is gone (Cosmic-Ray's own timeout): nothing to answer


def _run_child(srv: socket.socket, conn: socket.socket, request: dict, timeout: float) -> int:
    """Fork, run pytest in the child (its own process group), wait at most `timeout` s."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            srv.close()
            conn.close()
            os.setsid()
            os.chdir(request["cwd"])
            sys.path.insert(0, request["cwd"])
            import pytest
            code = int(pytest.main(request["argv"]))
        finally:
            sys.stdout.flush()
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return 124
        time.sleep(0.02)


def client(sock_path: str, cwd: str, argv: list[str]) -> int:
    """The test command Cosmic-Ray runs: one request to the server, its child's exit status.
    A server that cannot be reached leaves a mark beside the socket: the run is void."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(sock_path)
            s.sendall((json.dumps({"cwd": cwd, "argv": argv}) + "\n").encode())
            answer = s.makefile().readline().strip()
        return 0 if answer == "0" else 1
    except OSError as e:
        Path(sock_path + ".lost").write_text(f"test server unreachable: {e}\n")
        return 1


def test_command(sock: Path, dest: Path, argv: list[str]) -> str:
    return (f"{sys.executable} {Path(__file__).resolve()} --client {sock} {dest} "
            + " ".join(f"'{a}'" for a in argv))


# Replacements *by* a bitwise or shift operator are left out: on floats and tensors of
# floats they raise at the first call (a kill that says nothing), on ints they repeat what
# the arithmetic replacements test, and they are a third of all mutants.
LEFT_OUT = ("_BitOr", "_BitAnd", "_BitXor", "_LShift", "_RShift", "_MatMul")


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) of every annotation: with `from __future__ import annotations` none is
    ever evaluated, so a mutant inside one (`float | None` -> `float * None`) is equivalent."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        notes = []
        if isinstance(node, ast.arg):
            notes.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            notes.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
        spans += [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in notes if n is not None]
    return spans


def skip_outside(session: Path, source: str, ranges: list[tuple[int, int]],
                 only: set[tuple] | None = None) -> tuple[int, int]:
    """Mark skipped every mutant outside `ranges`, by an operator of LEFT_OUT, inside an
    annotation, or (with `only`) not among `only`'s (line, operator, occurrence); returns
    (kept, skipped)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    lazy = "from __future__ import annotations" in source
    notes = annotation_spans(source) if lazy else []
    kept = skipped = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            rows = [m.start_pos[0] for m in item.mutations]
            replaced_by_bits = any(m.operator_name.startswith("core/ReplaceBinaryOperator_")
                                   and m.operator_name.endswith(LEFT_OUT) for m in item.mutations)
            in_note = any(a <= tuple(m.start_pos) < b for m in item.mutations for a, b in notes)
            wanted = only is None or all((m.start_pos[0], m.operator_name, m.occurrence) in only
                                         for m in item.mutations)
            if (all(any(lo <= r <= hi for lo, hi in ranges) for r in rows) and not replaced_by_bits
                    and not in_note and wanted):
                kept += 1
                continue
            db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                  output="not measured (skip_outside)"))
            skipped += 1
    return kept, skipped


def read_results(session: Path) -> dict:
    """Counts and survivors of a finished session (skipped mutants not counted)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    killed, survivors, other = 0, [], 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.worker_outcome != WorkerOutcome.NORMAL:
                other += 1  # a worker that crashed or found no test: reported, counted as killed
            if result.test_outcome == TestOutcome.SURVIVED:
                m = item.mutations[0]
                survivors.append({"line": m.start_pos[0], "operator": m.operator_name,
                                  "occurrence": m.occurrence, "diff": result.diff or ""})
            else:
                killed += 1
    total = killed + len(survivors)
    return {"mutants": total, "killed": killed, "survived": len(survivors), "abnormal": other,
            "score": killed / total if total else float("nan"),
            "survivors": sorted(survivors, key=lambda s: (s["line"], s["operator"], s["occurrence"]))}


def run_target(target: Target, timeout: float, work: Path, exclude: set[str], previous: dict | None = None) -> dict:
    dest = work / target.name / "checkout"
    copy_checkout(dest)
    source = (dest / target.module).read_text()
    ranges = line_ranges(source, target.functions)
    if target.commit:
        lines = written_by(target.module, target.commit)
        ranges = [(r, r) for lo, hi in ranges for r in range(lo, hi + 1) if r in lines]
    argv = pytest_args(target, exclude)
    direct = subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=dest, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(dest), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    if direct.returncode != 0:
        raise SystemExit(f"{target.name}: the baseline fails, nothing to measure:\n{direct.stdout[-3000:]}")
    sock = work / f"{target.name}.sock"
    server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", str(sock),
                               "--timeout", str(timeout)], stdout=subprocess.DEVNULL)
    try:
        return _run_served(target, dest, sock, argv, source, ranges, timeout, previous)
    finally:
        if server.poll() is None:
            try:
                _stop(sock)
            finally:
                server.wait(timeout=30)


def _stop(sock: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(sock))
        s.sendall(b'"stop"\n')


def _run_served(target: Target, dest: Path, sock: Path, argv: list[str], source: str,
                ranges: list[tuple[int, int]], timeout: float, previous: dict | None) -> dict:
    """The baseline through the server (it must pass), then every mutant (with `previous`,
    an earlier run's results of this target: only its survivors; its kills are added, as
    more tests never revive a killed mutant)."""
    deadline = time.monotonic() + 120
    while not Path(str(sock) + ".ready").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{target.name}: the test server did not start")
        time.sleep(0.2)
    command = test_command(sock, dest, argv)
    t = time.perf_counter()
    base = subprocess.run(command, shell=True, cwd=dest, capture_output=True, text=True)
    baseline_s = time.perf_counter() - t
    if base.returncode != 0:
        raise SystemExit(f"{target.name}: the baseline fails through the test server:\n{base.stdout[-3000:]}")
    cfg = dest / "cosmic-ray.toml"
    cfg.write_text(CONFIG.format(module=target.module, timeout=timeout + 60, command=command.replace('"', '\\"')))
    session = dest / "session.sqlite"
    subprocess.run(["cosmic-ray", "init", str(cfg), str(session)], cwd=dest, check=True)
    only = None if previous is None else {(v["line"], v["operator"], v["occurrence"]) for v in previous["survivors"]}
    kept, skipped = skip_outside(session, source, ranges, only)
    print(f"[{target.name}] {kept} mutants in {len(target.functions)} functions ({skipped} elsewhere or by bitwise operators skipped); "
          f"baseline {baseline_s:.1f} s a run", flush=True)
    subprocess.run(["cosmic-ray", "exec", str(cfg), str(session)], cwd=dest, check=True)
    lost = Path(str(sock) + ".lost")
    if lost.exists():
        raise SystemExit(f"{target.name}: the run is void, a mutant's test command found no server: {lost.read_text()}")
    out = read_results(session)
    out["baseline_s"] = baseline_s
    if previous is not None:
        if kept != previous["survived"]:
            raise SystemExit(f"{target.name}: {kept} of the previous run's {previous['survived']} survivors found: "
                             "the module changed since, run it whole")
        out["killed"] += previous["killed"]
        out["mutants"] = out["killed"] + out["survived"]
        out["score"] = out["killed"] / out["mutants"] if out["mutants"] else float("nan")
    if (dest / target.module).read_text() != source:
        raise SystemExit(f"{target.name}: Cosmic-Ray left the module mutated")
    return out


def report(name: str, r: dict) -> None:
    print(f"== {name}: {r['killed']}/{r['mutants']} killed, {r['survived']} survived, "
          f"score {r['score']:.1%}" + (f" ({r['abnormal']} abnormal workers)" if r["abnormal"] else ""))
    for s in r["survivors"]:
        diff = [ln for ln in s["diff"].splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
        print(f"  SURVIVED line {s['line']} {s['operator']}#{s['occurrence']}: {' / '.join(d.strip() for d in diff)}")


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--client"]:
        return client(sys.argv[2], sys.argv[3], sys.argv[4:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated target names (default: all)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant's test run")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--exclude-tests", default="",
                    help="comma-separated test files to leave out (what the others alone kill)")
    ap.add_argument("--survivors-of", type=Path,
                    help="a --json file of an earlier run: rerun only its survivors (after adding tests)")
    ap.add_argument("--serve", help=argparse.SUPPRESS)  # (internal: the warm test server's socket)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.timeout)
        return 0
    if shutil.which("cosmic-ray") is None:
        raise SystemExit("mutation_score: cosmic-ray is not installed: pip install -e '.[crosscheck]'")
    names = [n for n in args.only.split(",") if n] or [t.name for t in TARGETS]
    unknown = set(names) - {t.name for t in TARGETS}
    if unknown:
        raise SystemExit(f"mutation_score: unknown target(s) {sorted(unknown)}; known: {[t.name for t in TARGETS]}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="codea1-mutation-") as tmp:
        for target in TARGETS:
            if target.name in names:
                exclude = {t for t in args.exclude_tests.split(",") if t}
                earlier = json.loads(args.survivors_of.read_text()) if args.survivors_of else {}
                if args.survivors_of and target.name not in earlier:
                    raise SystemExit(f"{args.survivors_of} has no results for {target.name}")
                results[target.name] = run_target(target, args.timeout, Path(tmp), exclude, earlier.get(target.name))
                report(target.name, results[target.name])
    total = sum(r["mutants"] for r in results.values())
    killed = sum(r["killed"] for r in results.values())
    print(f"== all: {killed}/{total} killed, score {killed / max(total, 1):.1%}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
