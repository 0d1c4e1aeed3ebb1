"""Evaluation throughput: problems per minute for `eval code`, mutants per second for
`eval tests`.

    python benchmarks/eval_throughput.py [--problems 8] [--data ../shared/data/mbppplus.parquet]

1. `eval code` with greedy decoding (n = 1) on the offline Qwen2.5-Coder-0.5B-Instruct:
   problems per minute end to end (model load reported apart), split into generation and
   judging time, with 1 torch thread and with one per core side by side, and the greedy
   pass@1 of the problems it ran.
2. Mutation testing: every compiling mutant of the bundled problems run against the
   golden asserts that pass on the reference, on the sandboxed executor
   (`codea1.eval.mutation_testing.analyse`) and the way Cosmic-Ray runs them (one fresh
   `python` per mutant): the same program (stop at the first failing test), the same time
   budget and parallelism, the two sides taking turns; mutants per second and the
   per-mutant verdict agreement, from runs that succeeded on both sides only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codea1.eval.mutation_testing import FIRST_FAILURE_CALL  # noqa: E402

SHARED_MBPP = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mbppplus.parquet"


def eval_code_throughput(data: str, problems: int, max_new_tokens: int) -> None:
    import torch

    import codea1.engines.hf_engine as hf_engine

    from codea1.eval.code import CodeEvalConfig, evaluate_code
    from codea1.eval.loading import load_eval_policies

    started = time.perf_counter()
    policies, meta = load_eval_policies("qwen2.5-coder-0.5b-instruct", "cpu")
    print(f"[eval code] model {meta.get('resolved')} loaded in {time.perf_counter() - started:.1f} s")

    gen_s = [0.0]
    real_generate = hf_engine.generate

    def timed_generate(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real_generate(*args, **kwargs)
        finally:
            gen_s[0] += time.perf_counter() - t

    hf_engine.generate = timed_generate
    rates = {}
    try:
        # torch's thread count side by side: on a shared 2-core machine 1 thread can win
        for threads in sorted({1, os.cpu_count() or 1}):
            torch.set_num_threads(threads)
            gen_s[0] = 0.0
            with tempfile.TemporaryDirectory() as out:
                cfg = CodeEvalConfig(greedy=True, limit=problems, max_new_tokens=max_new_tokens, problems_per_batch=8)
                t = time.perf_counter()
                summary = evaluate_code("qwen2.5-coder-0.5b-instruct", data, out, cfg, policies=policies)
                total_s = time.perf_counter() - t
            row = summary["sources"].get("all", {})
            done = row.get("problems", 0)
            rates[threads] = 60.0 * done / total_s
            print(f"[eval code] torch threads {threads}: {done} problems greedy in {total_s:.1f} s: "
                  f"{rates[threads]:.2f} problems/min (generation {gen_s[0]:.1f} s, judging and the rest "
                  f"{total_s - gen_s[0]:.1f} s); pass@1 {row.get('pass@1', 0.0):.2f}; "
                  f"skipped {len(summary['skipped'])}")
    finally:
        hf_engine.generate = real_generate
    if len(rates) == 2:
        one, many = rates[1], rates[max(rates)]
        print(f"[eval code] 1 thread / {max(rates)} threads: {one / many:.2f}x")


def _process_verdict(program: str, timeout: float) -> str:
    """Run one mutant's first-failure program in a fresh interpreter (Cosmic-Ray's way):
    "killed", "survived", or "failed: ..." when the run itself went wrong."""
    script = program + f"\nimport sys\nsys.exit(0 if {FIRST_FAILURE_CALL} == -1 else 3)\n"
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "killed"  # a hang kills, as on the sandbox
    except OSError as exc:
        return f"failed: {exc}"
    return "survived" if proc.returncode == 0 else "killed"


def mutation_throughput(functions: int, rounds: int) -> None:
    """The same mutants, the same killer tests, the same stop-at-the-first-failure program
    and time budget on both sides, with the same number of parallel runs; the two sides
    take turns (which goes first alternates per function) and the rate is printed only
    over runs that gave a verdict on both sides."""
    from concurrent.futures import ThreadPoolExecutor

    from codea1.data import bundled_problems
    from codea1.eval.mutation import generate_mutants
    from codea1.eval.mutation_testing import MutationConfig, analyse, first_failure_program, run_tests
    from codea1.sandbox import Executor

    workers = os.cpu_count() or 1
    cfg = MutationConfig()
    problems = [p for p in bundled_problems("all") if p.tests][:functions]
    sandbox_s = process_s = 0.0
    runs = agree = 0
    failed: list[str] = []
    with Executor(workers=workers) as ex, ThreadPoolExecutor(workers) as pool:
        analyse(ex, problems[0].reference, problems[0].tests[:1])  # warm the fork server
        for turn, p in enumerate(problems * rounds):
            passes, _, ref_s = run_tests(ex, p.reference, p.tests)
            killers = [t for t, ok in zip(p.tests, passes) if ok]
            mutants = [m for m in generate_mutants(p.reference, dedupe=False) if m.compiles]
            if not killers or not mutants:
                continue
            budget = max(cfg.call_timeout_s, cfg.slowdown * ref_s) + cfg.program_timeout_s
            programs = [first_failure_program(m.source, killers) for m in mutants]

            def on_sandbox():
                return [o.status if o.status != "infra" else f"failed: {o.detail}"
                        for o in analyse(ex, p.reference, killers, mutants=mutants, config=cfg).outcomes]

            def in_processes():
                return list(pool.map(lambda text: _process_verdict(text, budget), programs))

            timed = {}
            for side in ((on_sandbox, in_processes) if turn % 2 == 0 else (in_processes, on_sandbox)):
                t = time.perf_counter()
                timed[side.__name__] = (side(), time.perf_counter() - t)
            (sb, sb_s), (pr, pr_s) = timed["on_sandbox"], timed["in_processes"]
            ok = [i for i in range(len(mutants)) if not sb[i].startswith("failed") and not pr[i].startswith("failed")]
            failed += [f"{p.id} {mutants[i].description}: sandbox {sb[i]}, process {pr[i]}"
                       for i in range(len(mutants)) if i not in set(ok)]
            if len(ok) < len(mutants):
                continue  # this function's timing is not like for like: left out
            sandbox_s += sb_s
            process_s += pr_s
            runs += len(mutants)
            agree += sum(sb[i] == pr[i] for i in ok)
    print(f"[eval tests] {len(problems)} functions x {rounds} rounds, {workers} parallel runs per side, "
          f"sides alternating; {len(failed)} runs failed on a side (their functions left out)")
    for line in failed[:10]:
        print(f"  failed: {line}")
    if not runs:
        print("[eval tests] no function ran on both sides without a failure: no verdict")
        return
    print(f"[eval tests] {runs} mutant runs per side, verdicts agree on {agree}/{runs}")
    print(f"[eval tests] sandbox {runs / sandbox_s:.1f} mutants/s ({sandbox_s:.1f} s), fresh process per "
          f"mutant {runs / process_s:.1f} mutants/s ({process_s:.1f} s): sandbox / process {process_s / sandbox_s:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description="Throughput of eval code and eval tests.")
    ap.add_argument("--data", default=str(SHARED_MBPP) if SHARED_MBPP.exists() else "bundled")
    ap.add_argument("--problems", type=int, default=8, help="problems for the eval code measurement")
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--functions", type=int, default=44, help="bundled functions for the mutation measurement")
    ap.add_argument("--rounds", type=int, default=2, help="passes over the functions (sides alternate)")
    ap.add_argument("--skip-model", action="store_true", help="only the mutation measurement")
    args = ap.parse_args()
    mutation_throughput(args.functions, args.rounds)
    if not args.skip_model:
        eval_code_throughput(args.data, args.problems, args.max_new_tokens)


if __name__ == "__main__":
    main()
