"""What the reference semantics do to a real step's rewards: the same rollouts judged twice.

One or more steps of a preset's real rollouts (the code model's candidates, the test
model's suites, the Mistake Book's replayed tests) are judged under the reference's
semantics (codea1's defaults) and again under every one of the project's stricter
alternatives turned on at once (`judge.strict_validity`, `strict_lines`,
`strict_operator`, `strict_tests`, `exact_types`, `unicode_printable`, and
`mistakes.once_per_candidate` for the Mistake Book), side by side. No update is made:
each step's rollouts come from the starting weights, on the next problems of the epoch.

    python benchmarks/reward_semantics.py                     # cpu-demo, 1 step
    python benchmarks/reward_semantics.py --steps 3 --set data.problems_per_step=4
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STRICT = dict(strict_validity=True, strict_lines=True, strict_operator=True, strict_tests=True,
              exact_types=True, unicode_printable=True)
SHOWN = ("judge/valid_ratio", "judge/valid_tests", "judge/invalid_tests", "code/reward_mean",
         "test/reward_mean", "judge/pass_rate", "judge/attack_rate", "judge/code_valid_rate",
         "mistakes/frequency_added")


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
    rows: dict[str, list[dict[str, float]]] = {"reference": [], "strict": []}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp))
        reference_judge = trainer.judge
        strict_judge = Judge(trainer.executor, replace(reference_judge.config, **STRICT))
        original = trainer._judge_a1

        def judge_twice(problems, code_samples, test_samples, mistakes):
            for name, judge, once in (("reference", reference_judge, False), ("strict", strict_judge, True)):
                trainer.judge = judge
                _c, _t, metrics, judgements = original(problems, code_samples, test_samples, mistakes)
                metrics["mistakes/frequency_added"] = float(sum(
                    sum(j.mistake_update(once).failed.values()) for j in judgements))
                rows[name].append(metrics)
            trainer.judge = reference_judge
            raise _Judged

        trainer._judge_a1 = judge_twice
        try:
            for step in range(args.steps):
                t = time.perf_counter()
                try:
                    trainer.run_step()
                except _Judged:
                    pass
                print(f"step {step + 1}: rollouts judged twice in {time.perf_counter() - t:.0f} s", flush=True)
        finally:
            trainer.close()

    def mean(name: str, key: str) -> float:
        values = [r[key] for r in rows[name] if key in r]
        return sum(values) / max(len(values), 1)

    print(f"\n{'metric':28s} {'reference (default)':>20s} {'strict switches':>16s}")
    out = {}
    for key in SHOWN:
        ref, strict = mean("reference", key), mean("strict", key)
        out[key] = {"reference": ref, "strict": strict}
        print(f"{key:28s} {ref:20.3f} {strict:16.3f}")
    if args.json:
        args.json.write_text(json.dumps({"preset": args.preset, "steps": args.steps, "figures": out,
                                         "per_step": rows}, indent=2))


if __name__ == "__main__":
    main()
