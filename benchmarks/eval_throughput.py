"""Evaluation throughput: problems per minute for `eval code`, mutants per second for
`eval tests`.

    python benchmarks/eval_throughput.py [--problems 8] [--data ../shared/data/mbppplus.parquet]

1. `eval code` with greedy decoding (n = 1) on the offline Qwen2.5-Coder-0.5B-Instruct:
   problems per minute end to end (model load reported apart), split into generation and
   judging time, with 1 torch thread and with one per core side by side, and the greedy
   pass@1 of the problems it ran.
2. Mutation testing: every mutant of the bundled problems run against their golden
   asserts on the sandboxed executor (`codea1.eval.mutation_testing.analyse`), in mutants
   per second, side by side with the same mutant runs done the way Cosmic-Ray does them
   (one fresh `python` process per mutant) as the ratio to beat.
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

SHARED_MBPP = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mbppplus.parquet"


def eval_code_throughput(data: str, problems: int, max_new_tokens: int) -> None:
    import torch

    import codea1.rollout as rollout
    from codea1.eval.code import CodeEvalConfig, evaluate_code
    from codea1.eval.loading import load_eval_policies

    started = time.perf_counter()
    policies, meta = load_eval_policies("qwen2.5-coder-0.5b-instruct", "cpu")
    print(f"[eval code] model {meta.get('resolved')} loaded in {time.perf_counter() - started:.1f} s")

    gen_s = [0.0]
    real_generate = rollout.generate

    def timed_generate(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real_generate(*args, **kwargs)
        finally:
            gen_s[0] += time.perf_counter() - t

    rollout.generate = timed_generate
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
        rollout.generate = real_generate
    if len(rates) == 2:
        one, many = rates[1], rates[max(rates)]
        print(f"[eval code] 1 thread / {max(rates)} threads: {one / many:.2f}x")


def mutation_throughput(functions: int) -> None:
    from codea1.data import bundled_problems
    from codea1.eval.mutation import generate_mutants
    from codea1.eval.mutation_testing import MutationConfig, analyse, harness
    from codea1.sandbox import Executor

    problems = [p for p in bundled_problems("all") if p.tests][:functions]
    pairs = [(p, generate_mutants(p.reference)) for p in problems]
    n_mutants = sum(len(m) for _, m in pairs)
    with Executor() as ex:
        analyse(ex, problems[0].reference, problems[0].tests[:1])  # warm the fork server
        t = time.perf_counter()
        killed = 0
        for p, mutants in pairs:
            report = analyse(ex, p.reference, p.tests, mutants=mutants, config=MutationConfig())
            killed += report.killed
        sandbox_s = time.perf_counter() - t
    print(f"[eval tests] {n_mutants} mutants of {len(problems)} functions x their golden asserts "
          f"in {sandbox_s:.1f} s: {n_mutants / sandbox_s:.1f} mutants/s on the sandbox "
          f"({os.cpu_count()} workers), {100.0 * killed / n_mutants:.1f}% killed")

    # The same mutant runs, one fresh interpreter each (how Cosmic-Ray runs its test command).
    sample = [(p, m) for p, ms in pairs for m in ms][:60]
    t = time.perf_counter()
    for p, m in sample:
        text, calls, _ = harness(m.source, p.tests)
        script = text + "\n" + "\n".join(f"try:\n    {c}\nexcept BaseException:\n    pass" for c in calls if c)
        try:
            subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=5)
        except subprocess.TimeoutExpired:
            pass
    process_s = time.perf_counter() - t
    rate = len(sample) / process_s
    print(f"[eval tests] fresh process per mutant (first {len(sample)}): {rate:.1f} mutants/s; "
          f"sandbox / fresh-process ratio {n_mutants / sandbox_s / rate:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description="Throughput of eval code and eval tests.")
    ap.add_argument("--data", default=str(SHARED_MBPP) if SHARED_MBPP.exists() else "bundled")
    ap.add_argument("--problems", type=int, default=8, help="problems for the eval code measurement")
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--functions", type=int, default=44, help="bundled functions for the mutation measurement")
    ap.add_argument("--skip-model", action="store_true", help="only the mutation measurement")
    args = ap.parse_args()
    mutation_throughput(args.functions)
    if not args.skip_model:
        eval_code_throughput(args.data, args.problems, args.max_new_tokens)


if __name__ == "__main__":
    main()
