"""How many usable input/output tests a test model's stdin completions give, as the judge reads them.

Samples white-box test completions as training prompts and samples them
(`codea1.rollout.test_messages` on the bundled stdin problems, each problem's reference
and its naive program as the code under attack; the test role of training's sampler,
temperature 1, top_p 1, the LoRA adapter at its initial zero), then counts, per completion's first `--n-tests` tests:
tests read, readable (an input and an output), and valid (the problem's reference, run
as a plain subprocess, prints the expected output under the problem's float tolerance or
checker). Two readings side by side: fenced blocks only (`codea1.data.stdin_io`'s reading
before unfenced tests were read) and the reader as it is (unfenced tests in completions
with no fenced test).

    python benchmarks/stdin_test_yield.py --out /tmp/yield.jsonl            # sample 50, then count
    python benchmarks/stdin_test_yield.py --completions /tmp/yield.jsonl    # count only

Sampling appends to `--out` and resumes where it stopped (each completion has its own
seed). The references are the project's own programs, trusted, so no sandbox is used for them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

from codea1.data import bundled_problems
from codea1.data.stdin_io import (
    _blocks,
    _pair,
    checker_of,
    outputs_match,
    parse_io_tests,
    tolerance_of,
)

PROBLEMS = {p.id: p for p in bundled_problems("stdin:all")}


def sample(out: Path, model_name: str, seed: int, max_new_tokens: int, n_tests: int, batch: int) -> None:
    """Training's sampler (`codea1.engines.hf_engine.generate`, the test role, LoRA at its
    initial zero), one completion a prompt, each from its own seeded stream."""
    from codea1.configs import SamplingConfig
    from codea1.engines.hf_engine import generate
    from codea1.models import load_policies
    from codea1.rollout import test_messages

    prompts = [(p.id, test_messages(p, code, white_box=True, n_tests=n_tests))
               for p in PROBLEMS.values() for code in (p.reference, p.meta.get("naive") or p.reference)]
    done = sum(1 for _ in out.open()) if out.exists() else 0
    if done >= len(prompts):
        return
    policies = load_policies(name=model_name, mode="lora-shared")
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=max_new_tokens, max_prompt_tokens=1280)
    with out.open("a") as f:
        for start in range(done, len(prompts), batch):
            chunk = prompts[start:start + batch]
            t0 = time.perf_counter()
            samples = generate(policies, "test", [m for _, m in chunk], 1, sampling,
                               seeds=[seed * 100_003 + start + k for k in range(len(chunk))])
            for (pid, _), (row,) in zip(chunk, samples):
                f.write(json.dumps({"id": pid, "text": row.text}) + "\n")
            f.flush()
            print(f"sampled {start + len(chunk)} of {len(prompts)} ({time.perf_counter() - t0:.0f} s)", flush=True)


@cache
def _reference_output(pid: str, stdin: str) -> str | None:
    try:
        run = subprocess.run([sys.executable, "-c", PROBLEMS[pid].reference], input=stdin, capture_output=True,
                             check=False, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return None
    return run.stdout if run.returncode == 0 else None


def _valid(pid: str, stdin: str, expected: str) -> bool:
    got = _reference_output(pid, stdin)
    if got is None:
        return False
    problem = PROBLEMS[pid]
    checker = checker_of(problem)
    if checker is None:
        return outputs_match(got, expected, tolerance_of(problem))
    scope: dict = {}
    exec(checker, scope)  # the project's own checker, trusted
    return bool(scope["check"](stdin, expected, got))


def count(rows: list[dict], read, n_tests: int) -> dict[str, int]:
    totals = {"completions": len(rows), "with a readable test": 0, "with a valid test": 0, "tests read": 0,
              "readable": 0, "valid": 0}
    for row in rows:
        tests = read(row["text"])[:n_tests]
        readable = [t for t in tests if t.input is not None]
        valid = [t for t in readable if _valid(row["id"], t.input, t.output)]
        totals["tests read"] += len(tests)
        totals["readable"] += len(readable)
        totals["valid"] += len(valid)
        totals["with a readable test"] += bool(readable)
        totals["with a valid test"] += bool(valid)
    return totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="sample into this JSONL (appends; resumes), then count it")
    ap.add_argument("--completions", type=Path, help="count this JSONL of {id, text} rows; no sampling")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=192, help="cpu-demo-stdin's rollout.test.max_new_tokens")
    ap.add_argument("--n-tests", type=int, default=4, help="tests asked for and counted (cpu-demo-stdin's suite size)")
    ap.add_argument("--batch", type=int, default=10)
    args = ap.parse_args()
    if (args.out is None) == (args.completions is None):
        ap.error("give --out (sample, then count) or --completions (count only)")
    path = args.completions or args.out
    if args.out is not None:
        sample(args.out, args.model, args.seed, args.max_new_tokens, args.n_tests, args.batch)
    rows = [json.loads(line) for line in path.open()]
    readings = {"fenced only": lambda text: _pair(_blocks(text)), "as read now": parse_io_tests}
    results = {name: count(rows, read, args.n_tests) for name, read in readings.items()}
    print(f"{path}: {len(rows)} completions, first {args.n_tests} tests of each")
    keys = list(next(iter(results.values())))
    print(f"{'':24}" + "".join(f"{name:>14}" for name in results))
    for key in keys[1:]:
        print(f"{key:24}" + "".join(f"{r[key]:>14}" for r in results.values()))


if __name__ == "__main__":
    main()
