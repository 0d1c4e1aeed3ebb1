"""What the reference semantics do to a real step's rewards: the same rollouts judged thrice.

One or more steps of a preset's real rollouts (the code model's candidates, the test
model's suites, the Mistake Book's replayed tests) are judged under the reference's
semantics (codea1's defaults), under the rules codea1 used before issue 27 (tests read
statement by statement with every name substituted, lenient code fences, the candidate
alone and required to define the function, per-call time-outs, the entry-point rule, a
Mistake Book of net changes), and under every one of the project's stricter alternatives
turned on at once (`judge.strict_validity`, `strict_lines`, `strict_operator`,
`strict_tests`, `exact_types`, `unicode_printable`, `require_entry_point`,
`require_definition`, `own_namespace`, and `mistakes.once_per_candidate` for the Mistake
Book), side by side. No update is made: each step's rollouts come from the starting
weights, on the next problems of the epoch. A figure that no suite of the steps defines
(say, the pass rate when no candidate was valid) prints as n/a.

    python benchmarks/reward_semantics.py                     # cpu-demo, 1 step
    python benchmarks/reward_semantics.py --steps 3 --set data.problems_per_step=4
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STRICT = dict(strict_validity=True, strict_lines=True, strict_operator=True, strict_tests=True,
              exact_types=True, unicode_printable=True, require_entry_point=True, require_definition=True,
              own_namespace=True)
# codea1's defaults before issue 27 (`mistakes.net_changes` does not change one step's growth)
BEFORE = dict(require_entry_point=True, statement_reading=True, lenient_code_fences=True, own_namespace=True,
              require_definition=True, per_call_timeouts=True)
COLUMNS = ("reference", "before", "strict")
HEADINGS = {"reference": "reference (default)", "before": "before issue 27", "strict": "strict switches"}
SHOWN = ("judge/valid_ratio", "judge/valid_tests", "judge/invalid_tests", "code/reward_mean",
         "test/reward_mean", "judge/pass_rate", "judge/attack_rate", "judge/code_valid_rate",
         "tests/pytest_style_share", "mistakes/frequency_added", "mistakes/tests_added")
# metrics over the suites of valid candidates: absent (n/a) when a step has none
_SUITE_METRICS = ("judge/pass_rate", "judge/attack_rate", "judge/attack_success", "judge/valid_ratio",
                  "judge/valid_tests", "judge/invalid_tests")
# an assert indented under something (`def test_...():`, `for`, `with`, a class) inside a python block
_INDENTED_ASSERT = re.compile(r"^[ \t]+assert\b", re.M)


def pytest_style(completion: str) -> bool:
    """Whether a test completion puts asserts inside blocks (pytest functions, loops)."""
    from codea1.judge.reading import python_blocks

    return any(_INDENTED_ASSERT.search(block) for block in python_blocks(completion))


def figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


class _Judged(Exception):
    """Raised after the judge phase: the step goes no further (no book commit, no update)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="cpu-demo")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override KEY=VALUE")
    ap.add_argument("--steps", type=int, default=1, help="steps of rollouts to judge")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args()

    from codea1.judge import Judge
    from codea1.train.config import load_config
    from codea1.train.loop import Trainer

    cfg = load_config(preset=args.preset, overrides=["mode=a1", *args.overrides])
    print(f"preset {args.preset}: {cfg.data.problems_per_step} problems x {cfg.rollout.n_code} codes "
          f"x {cfg.rollout.n_test} suites, {args.steps} step(s); model {cfg.model.name}", flush=True)
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in COLUMNS}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp))
        reference_judge = trainer.judge
        judges = {"reference": (reference_judge, False),
                  "before": (Judge(trainer.executor, reference_judge.config.model_copy(update=BEFORE)), False),
                  "strict": (Judge(trainer.executor, reference_judge.config.model_copy(update=STRICT)), True)}
        original = trainer._judge_a1

        def judge_thrice(problems, code_samples, test_samples, mistakes):
            texts = [s.text for per_problem in test_samples for group in per_problem for s in group]
            share = sum(map(pytest_style, texts)) / len(texts) if texts else None
            for name, (judge, once) in judges.items():
                trainer.judge = judge
                _c, _t, metrics, judgements = original(problems, code_samples, test_samples, mistakes)
                if not any(v for j in judgements for v in j.code_valid):
                    for key in _SUITE_METRICS:
                        metrics.pop(key, None)
                if share is not None:
                    metrics["tests/pytest_style_share"] = share
                updates = [j.mistake_update(once) for j in judgements]
                metrics["mistakes/frequency_added"] = float(sum(sum(u.failed.values()) for u in updates))
                metrics["mistakes/tests_added"] = float(sum(len(u.failed) for u in updates))
                rows[name].append(metrics)
            trainer.judge = reference_judge
            raise _Judged

        trainer._judge_a1 = judge_thrice
        try:
            for step in range(args.steps):
                t = time.perf_counter()
                try:
                    trainer.run_step()
                except _Judged:
                    pass
                print(f"step {step + 1}: rollouts judged thrice in {time.perf_counter() - t:.0f} s", flush=True)
        finally:
            trainer.close()

    def mean(name: str, key: str) -> float | None:
        values = [r[key] for r in rows[name] if key in r and not math.isnan(r[key])]
        return sum(values) / len(values) if values else None

    print(f"\n{'metric':28s}" + "".join(f" {HEADINGS[name]:>20s}" for name in COLUMNS))
    out = {}
    for key in SHOWN:
        out[key] = {name: mean(name, key) for name in COLUMNS}
        print(f"{key:28s}" + "".join(f" {figure(out[key][name]):>20s}" for name in COLUMNS))
    if args.json:
        args.json.write_text(json.dumps({"preset": args.preset, "steps": args.steps, "figures": out,
                                         "per_step": rows}, indent=2))

if __name__ == "__main__":
    main()
