"""Cross-check codea1's mutation scores against Cosmic-Ray's, mutant by mutant.

Cosmic-Ray (the tool UnLeakedTestBench's mut@k uses, 8.7 there) is an optional extra:

    pip install -e '.[crosscheck]'        # cosmic-ray==8.7.0
    python benchmarks/cosmic_ray_crosscheck.py [--functions 12] [--mbpp 12] [--header none|ult]

Functions: bundled problems with mutation points (the first --functions), each with two
suites (its first two golden asserts, then all of them), and MBPP+ functions (the first
--mbpp) with their one docstring assert. Each suite runs the way UnLeakedTestBench runs
it: ``mod.py`` (header, then the function), ``test.py`` (header, ``from mod import *``,
one ``def test_i()`` per assert), ``pytest test.py`` as Cosmic-Ray's test command (with
plugin autoloading off: installed plugins such as pytest-cov take a pytest start from
0.6 s to 4 s on a busy machine and change no outcome).

1. Baseline: ``cosmic-ray baseline`` on the unmutated code beside codea1's run of the
   same tests on the reference. UnLeakedTestBench scores a task only when its baseline
   passes; a suite whose baseline fails is reported and left out of the comparison.
2. Every mutant: Cosmic-Ray's outcome is read as ``cr-report`` (which UnLeakedTestBench
   parses) reads it: killed unless ``test_outcome`` is SURVIVED, so INCOMPETENT and
   jobs without a test outcome count as killed; INCOMPETENT outcomes and every
   ``worker_outcome`` other than NORMAL are counted and printed, since they are not a
   test killing a mutant. codea1 runs the same mutations (``style="text"``, no dedupe)
   on its sandbox, and, for comparison, its tree style.
3. Mutants are matched by (operator, line, order within the line); printed: per suite
   the two scores and their difference, then the per-mutant agreement, the mutants only
   one side made, and every disagreement.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codea1.data import bundled_problems  # noqa: E402
from codea1.eval.mutation import generate_mutants  # noqa: E402
from codea1.eval.mutation_testing import analyse, run_tests  # noqa: E402
from codea1.eval.tests_eval import ULT_HEADER  # noqa: E402
from codea1.sandbox import Executor  # noqa: E402

SHARED_MBPP = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mbppplus.parquet"

CONFIG = """[cosmic-ray]
module-path = "mod.py"
timeout = {timeout}
excluded-modules = []
test-command = "env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {python} -m pytest -q -p no:cacheprovider test.py"

[cosmic-ray.distributor]
name = "local"
"""


@dataclass
class CRMutant:
    """One Cosmic-Ray job: where it mutated, and what its worker and test run reported."""

    operator: str
    line: int  # in the function's own text (the header's lines taken off)
    col: int
    test_outcome: str | None  # KILLED | SURVIVED | INCOMPETENT | None
    worker_outcome: str  # NORMAL | EXCEPTION | ABNORMAL | NO_TEST | SKIPPED

    @property
    def killed(self) -> bool:
        """cr-report's rule (WorkResult.is_killed): anything but SURVIVED is a kill."""
        return self.test_outcome != "SURVIVED"


def test_file(tests: list[str], header: str) -> str:
    """UnLeakedTestBench's test.py: the header, the module's names, one test function each."""
    body = "".join(f"def test_{i}():\n{textwrap.indent(t.strip(), '    ')}\n\n" for i, t in enumerate(tests))
    return f"{header}\n\nfrom mod import *\n\n{body}"


def cosmic_ray_bin(path: str | None) -> Path:
    found = path or shutil.which("cosmic-ray")
    if not found or not Path(found).is_file():
        sys.exit("cosmic-ray not found: pip install -e '.[crosscheck]' (cosmic-ray==8.7.0) or pass --cosmic-ray PATH")
    return Path(found)


def cosmic_ray(cr_bin: Path, reference: str, tests: list[str], timeout: float,
               header: str = "") -> tuple[bool, list[CRMutant]]:
    """Cosmic-Ray's baseline verdict and, when it passes, its outcome per mutant."""
    python = cr_bin.parent / "python"
    offset = header.count("\n") + 2 if header else 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "mod.py").write_text(f"{header}\n\n{reference}" if header else reference)
        (d / "test.py").write_text(test_file(tests, header))
        (d / "cr.toml").write_text(CONFIG.format(timeout=timeout, python=python))
        base = subprocess.run([str(cr_bin), "baseline", "cr.toml"], cwd=d, capture_output=True, text=True)
        if base.returncode != 0:
            return False, []
        for args in (["init", "cr.toml", "s.sqlite"], ["exec", "cr.toml", "s.sqlite"]):
            proc = subprocess.run([str(cr_bin), *args], cwd=d, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"cosmic-ray {' '.join(args)} failed: {proc.stderr[-2000:]}")
        with sqlite3.connect(d / "s.sqlite") as db:
            rows = db.execute(
                "select operator_name, start_pos_row, start_pos_col, test_outcome, worker_outcome "
                "from mutation_specs left join work_results using(job_id)"
            ).fetchall()
    return True, [CRMutant(op.split("/")[-1], row - offset, col, test, worker or "SKIPPED")
                  for op, row, col, test, worker in rows]


def ours(executor, reference: str, tests: list[str], style: str,
         header: str = "") -> list[tuple[str, int, int, bool, bool]]:
    """codea1's outcome per mutation: (operator, line, column, killed, compiles)."""
    mutants = generate_mutants(reference, style=style, dedupe=False)
    report = analyse(executor, reference, tests, mutants=mutants, header=header)
    return [(o.mutant.operator, o.mutant.lineno, o.mutant.col, o.status == "killed", o.mutant.compiles)
            for o in report.outcomes]


def keyed(items) -> dict[tuple[str, int, int], tuple]:
    """(operator, line, k-th on that line in column order) -> the item."""
    groups = defaultdict(list)
    for item in items:
        groups[(item[0], item[1])].append(item)
    return {(op, line, k): item for (op, line), group in groups.items()
            for k, item in enumerate(sorted(group, key=lambda x: x[2]))}


def score(killed: list[bool]) -> float:
    return 100.0 * sum(killed) / len(killed) if killed else 100.0  # cr-report: 0 survivors of 0 jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cosmic-ray", default=None, help="the cosmic-ray executable (default: on PATH)")
    ap.add_argument("--functions", type=int, default=12)
    ap.add_argument("--mbpp", type=int, default=12, help="MBPP+ functions (docstring assert as the suite)")
    ap.add_argument("--mbpp-file", type=Path, default=SHARED_MBPP)
    ap.add_argument("--timeout", type=float, default=10.0, help="Cosmic-Ray's per-mutant timeout (ULT: 10 s)")
    ap.add_argument("--header", choices=("none", "ult"), default="none",
                    help="ult: UnLeakedTestBench's import header before the function and the tests")
    ap.add_argument("--show", type=int, default=20, help="disagreements printed")
    args = ap.parse_args()
    cr_bin = cosmic_ray_bin(args.cosmic_ray)
    header = ULT_HEADER if args.header == "ult" else ""

    problems = [p for p in bundled_problems("all") if len(p.tests) >= 3 and generate_mutants(p.reference)]
    work = [(p, suite, tests) for p in problems[: args.functions]
            for suite, tests in (("2", p.tests[:2]), ("all", p.tests))]
    if args.mbpp and args.mbpp_file.is_file():
        from codea1.data import load_problems

        mbpp = [p for p in load_problems(args.mbpp_file) if p.tests and generate_mutants(p.reference)]
        work += [(p, "1", p.tests[:1]) for p in mbpp[: args.mbpp]]
    elif args.mbpp:
        print(f"{args.mbpp_file}: not found, MBPP+ functions left out")

    started = time.time()
    diffs, diffs_tree = [], []
    matched = agree = matched_tree = agree_tree = only_cr = only_ours = 0
    baseline_agree = baseline_n = 0
    cr_outcomes: Counter = Counter()
    disagreements: list[str] = []
    print(f"{'function':<34} {'suite':>5} {'base CR/ours':>12} {'#CR':>4} {'#ours':>5} "
          f"{'CR %':>6} {'text %':>6} {'tree %':>6}")
    with Executor(workers=2) as ex:
        for p, suite, tests in work:
            cr_ok, cr = cosmic_ray(cr_bin, p.reference, tests, args.timeout, header)
            passes, _, _ = run_tests(ex, f"{header}\n\n{p.reference}" if header else p.reference, tests)
            our_ok = all(passes)
            baseline_n += 1
            baseline_agree += cr_ok == our_ok
            if not (cr_ok and our_ok):
                print(f"{p.id:<34} {suite:>5} {str(cr_ok)[0]}/{str(our_ok)[0]:>10}  baseline fails: left out")
                continue
            text = ours(ex, p.reference, tests, "text", header)
            tree = ours(ex, p.reference, tests, "tree", header)
            cr_outcomes.update(f"{m.worker_outcome}/{m.test_outcome}" for m in cr)
            s_cr, s_text, s_tree = score([m.killed for m in cr]), score([t[3] for t in text]), score([t[3] for t in tree])
            diffs.append(abs(s_cr - s_text))
            diffs_tree.append(abs(s_cr - s_tree))
            print(f"{p.id:<34} {suite:>5} {'T/T':>12} {len(cr):>4} {len(text):>5} "
                  f"{s_cr:>6.1f} {s_text:>6.1f} {s_tree:>6.1f}", flush=True)
            kc = keyed([(m.operator, m.line, m.col, m) for m in cr])
            kt, kr = keyed(text), keyed(tree)
            only_cr += len(kc.keys() - kt.keys())
            only_ours += len(kt.keys() - kc.keys())
            for key in kc.keys() & kt.keys():
                matched += 1
                m = kc[key][3]
                if m.killed == kt[key][3]:
                    agree += 1
                else:
                    disagreements.append(f"{p.id} suite {suite}: {key[0]} line {key[1]} #{key[2]}: "
                                         f"CR {m.test_outcome} ({m.worker_outcome}), codea1 "
                                         f"{'killed' if kt[key][3] else 'survived'}"
                                         f"{'' if kt[key][4] else ' (does not compile)'}")
            for key in kc.keys() & kr.keys():
                matched_tree += 1
                agree_tree += kc[key][3].killed == kr[key][3]

    n = len(diffs)
    print(f"\n{len({p.id for p, _, _ in work})} functions, {len(work)} (function, suite) pairs, "
          f"{time.time() - started:.0f} s")
    print(f"baseline (tests pass on the unmutated code): same verdict on {baseline_agree}/{baseline_n}; "
          f"{n} pairs pass on both and are compared")
    print(f"Cosmic-Ray outcomes (worker/test): {dict(cr_outcomes)}")
    if not n:
        print("nothing to compare")
        return
    print(f"per-mutant outcome, text style: {agree}/{matched} agree ({100.0 * agree / max(matched, 1):.2f}%); "
          f"mutants only Cosmic-Ray made: {only_cr}, only codea1 made: {only_ours}")
    print(f"per-mutant outcome, tree style: {agree_tree}/{matched_tree} agree "
          f"({100.0 * agree_tree / max(matched_tree, 1):.2f}%)")
    print(f"per-task score |CR - codea1 text|: mean {statistics.mean(diffs):.2f} pts, max {max(diffs):.2f}, "
          f"identical {sum(d < 1e-9 for d in diffs)}/{n}")
    print(f"per-task score |CR - codea1 tree|: mean {statistics.mean(diffs_tree):.2f} pts, "
          f"max {max(diffs_tree):.2f}, identical {sum(d < 1e-9 for d in diffs_tree)}/{n}")
    for line in disagreements[: args.show]:
        print("  differs:", line)


if __name__ == "__main__":
    main()
