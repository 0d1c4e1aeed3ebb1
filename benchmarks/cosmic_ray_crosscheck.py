"""Cross-check our mutation scores against Cosmic-Ray's on the same functions and tests.

Cosmic-Ray (the tool UnLeakedTestBench's mut@k uses) lives in its own virtual
environment, never in the project's dependencies:

    python -m venv /work/crvenv && /work/crvenv/bin/pip install cosmic-ray
    python benchmarks/cosmic_ray_crosscheck.py --cosmic-ray /work/crvenv/bin/cosmic-ray

Functions: bundled problems with mutation points (the first --functions), each with two
suites (its first two golden asserts, then all of them), and MBPP+ functions (the first
--mbpp) with their one docstring assert. Both tools mutate the reference and run the
suite on every mutant. Printed per suite: mutant counts (Cosmic-Ray's; ours before
and after deduplication) and the mutation scores (killed / all); then the agreement:
mean absolute score difference, exact matches, and per-mutant agreement, mutants being
matched by (operator, line, order within the line).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codea1.data import bundled_problems  # noqa: E402
from codea1.eval.mutation import Mutant, generate_mutants, iter_mutations  # noqa: E402
from codea1.eval.mutation_testing import analyse  # noqa: E402
from codea1.sandbox import Executor  # noqa: E402

SHARED_MBPP = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mbppplus.parquet"

CONFIG = """[cosmic-ray]
module-path = "mod.py"
timeout = {timeout}
excluded-modules = []
test-command = "{python} test_mod.py"

[cosmic-ray.distributor]
name = "local"
"""


def cosmic_ray(cr_bin: Path, reference: str, tests: list[str], timeout: float) -> list[tuple[str, int, int, str]]:
    """Cosmic-Ray's verdicts: (operator, line, column, outcome) per mutant."""
    python = cr_bin.parent / "python"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "mod.py").write_text(reference)
        (d / "test_mod.py").write_text("from mod import *\n\n" + "\n".join(tests) + "\n")
        (d / "cr.toml").write_text(CONFIG.format(timeout=timeout, python=python))
        for args in (["init", "cr.toml", "s.sqlite"], ["exec", "cr.toml", "s.sqlite"]):
            proc = subprocess.run([str(cr_bin), *args], cwd=d, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"cosmic-ray {' '.join(args)} failed: {proc.stderr[-2000:]}")
        with sqlite3.connect(d / "s.sqlite") as db:
            rows = db.execute(
                "select operator_name, start_pos_row, start_pos_col, test_outcome, worker_outcome "
                "from mutation_specs join work_results using(job_id)"
            ).fetchall()
    out = []
    for op, row, col, test_outcome, worker_outcome in rows:
        outcome = "survived" if test_outcome == "SURVIVED" else "killed"
        out.append((op.split("/")[-1], row, col, outcome))
    return out


def ours(executor, reference: str, tests: list[str], dedup: bool) -> list[tuple[str, int, int, str]]:
    if dedup:
        mutants = generate_mutants(reference)
    else:
        mutants = [
            Mutant(i, site.family, site.operator, getattr(node, "lineno", 0), getattr(node, "col_offset", 0),
                   site.description, text)
            for i, (site, node, text) in enumerate(iter_mutations(reference))
        ]
    report = analyse(executor, reference, tests, mutants=mutants)
    return [(o.mutant.operator, o.mutant.lineno, o.mutant.col,
             "killed" if o.status == "killed" else "survived") for o in report.outcomes]


def score(verdicts) -> float:
    return 100.0 * sum(v[3] == "killed" for v in verdicts) / len(verdicts) if verdicts else 0.0


def keyed(verdicts) -> dict[tuple[str, int, int], str]:
    """(operator, line, k-th on that line in column order) -> outcome."""
    groups = defaultdict(list)
    for op, line, col, outcome in verdicts:
        groups[(op, line)].append((col, outcome))
    out = {}
    for (op, line), items in groups.items():
        for k, (_, outcome) in enumerate(sorted(items, key=lambda x: x[0])):
            out[(op, line, k)] = outcome
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cosmic-ray", type=Path, default=Path("/work/crvenv/bin/cosmic-ray"))
    ap.add_argument("--functions", type=int, default=12)
    ap.add_argument("--mbpp", type=int, default=12, help="MBPP+ functions (docstring assert as the suite)")
    ap.add_argument("--mbpp-file", type=Path, default=SHARED_MBPP)
    ap.add_argument("--timeout", type=float, default=5.0, help="Cosmic-Ray's per-mutant test timeout")
    args = ap.parse_args()
    if not args.cosmic_ray.is_file():
        sys.exit(f"{args.cosmic_ray}: not found; install cosmic-ray in a separate venv (see this file's docstring)")

    # functions with something to mutate and at least three golden asserts
    problems = [p for p in bundled_problems("all") if len(p.tests) >= 3 and generate_mutants(p.reference)]
    work = [(p, suite, tests) for p in problems[: args.functions]
            for suite, tests in (("2", p.tests[:2]), ("all", p.tests))]
    if args.mbpp and args.mbpp_file.is_file():
        from codea1.data import load_problems

        mbpp = [p for p in load_problems(args.mbpp_file) if p.tests and generate_mutants(p.reference)]
        work += [(p, "1", p.tests[:1]) for p in mbpp[: args.mbpp]]
    elif args.mbpp:
        print(f"{args.mbpp_file}: not found, MBPP+ functions left out")
    diffs, diffs_raw, same_count, matched, agree = [], [], 0, 0, 0
    print(f"{'function':<34} {'suite':>5} {'#CR':>4} {'#raw':>4} {'#dedup':>6} "
          f"{'CR %':>6} {'raw %':>6} {'dedup %':>7}")
    started = time.time()
    with Executor(workers=2) as ex:
        for p, suite_name, tests in work:
            cr = cosmic_ray(args.cosmic_ray, p.reference, tests, args.timeout)
            raw = ours(ex, p.reference, tests, dedup=False)
            dd = ours(ex, p.reference, tests, dedup=True)
            print(f"{p.id:<34} {suite_name:>5} {len(cr):>4} {len(raw):>4} {len(dd):>6} "
                  f"{score(cr):>6.1f} {score(raw):>6.1f} {score(dd):>7.1f}", flush=True)
            diffs.append(abs(score(cr) - score(dd)))
            diffs_raw.append(abs(score(cr) - score(raw)))
            same_count += len(cr) == len(raw)
            kc, kr = keyed(cr), keyed(raw)
            for key in kc.keys() & kr.keys():
                matched += 1
                agree += kc[key] == kr[key]
    n = len(diffs)
    functions = len({p.id for p, _, _ in work})
    print(f"\n{functions} functions, {n} (function, suite) pairs, {time.time() - started:.0f} s")
    print(f"mutation score |CR - ours|, deduplicated: mean {statistics.mean(diffs):.2f} pts, "
          f"max {max(diffs):.2f}, within 1 pt: {sum(d <= 1 for d in diffs)}/{n}")
    print(f"mutation score |CR - ours|, not deduplicated: mean {statistics.mean(diffs_raw):.2f} pts, "
          f"max {max(diffs_raw):.2f}, exact: {sum(d < 1e-9 for d in diffs_raw)}/{n}")
    print(f"same mutant count as CR (before dedup): {same_count}/{n}")
    print(f"per-mutant verdicts, matched by (operator, line, order): {agree}/{matched} agree "
          f"({100.0 * agree / max(matched, 1):.1f}%)")


if __name__ == "__main__":
    main()
