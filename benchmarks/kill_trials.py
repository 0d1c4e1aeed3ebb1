"""kill -9 a tiny a1 training run at random moments, resume it, count bit-identical ends.

    python benchmarks/kill_trials.py                 # 20 trials
    python benchmarks/kill_trials.py --trials 50 --seed 3 --out kill_trials.json

One uninterrupted reference run (PYTHONHASHSEED=1) is made and timed (again, in the
process that runs the trials, so the draw fits its speed); then each trial starts the
same run (PYTHONHASHSEED=1) and SIGKILLs it from outside at a moment drawn uniformly from
the first 90% of that duration (start-up, rollouts, judge, Mistake Book commit, update, checkpoint write,
pruning: wherever it lands), then resumes it with `--resume` in a fresh process with
PYTHONHASHSEED=2 and compares the end with the reference: weights, optimiser, scheduler
and RNG state of the last checkpoint, the Mistake Book's rows in insertion order,
metrics.jsonl (wall-clock figures dropped), samples.jsonl, config.yaml and the run
directory's listing (tests/crash_harness.py, `fingerprint`). A run killed before it wrote
its config.yaml has nothing to resume: it is started again as a new run, and counted.

The run is the tests' tiny random-weight model with scripted completions
(tests/tiny_run.py), 4 steps, checkpoints after steps 2 and 4, one kept. Prints one line
per trial (where the kill landed: the last moment the run's trace passed, and the step)
and the count that resumed bit-identical.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from crash_harness import FAST_OVERRIDES, Harness, differences  # noqa: E402
from tiny_run import tiny_overrides, tiny_paths  # noqa: E402


def _landed(trace: Path) -> str:
    lines = trace.read_text().split("\n") if trace.exists() else []
    last = [line for line in lines if line.strip()]
    if not last:
        return "start-up (before the first step)"
    _t, moment, step = last[-1].split()
    return f"after {moment} of step {step}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    ap.add_argument("--workdir", type=Path, default=None, help="default: a temporary directory")
    ap.add_argument("--out", type=Path, default=None, help="also write the trials as JSON here")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kill-trials-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    tiny = tiny_paths(work / "tiny")
    run = {"overrides": [*tiny_overrides(tiny, "a1", args.steps), *FAST_OVERRIDES]}

    reference = Harness(1, work / "harness-reference").start()
    trials_h = Harness(1, work / "harness-trials").start()  # imports while the reference runs
    resume_h = Harness(2, work / "harness-resume")
    try:
        reference.submit([{"make_tiny": str(work / "tiny")},
                          {**run, "run_dir": str(work / "reference"), "trace": str(work / "reference.trace")}])
        made, ref = reference.wait()
        if made["ended"] != "exit 0" or ref["ended"] != "exit 0":
            raise SystemExit(f"the reference run failed:\n{ref['log']}")
        fractions = [rng.uniform(0.0, 0.9) for _ in range(args.trials)]  # (a later kill may come too late)
        trials_h.submit([{**run, "run_dir": str(work / "timing"), "timing": True}]
                        + [{**run, "run_dir": str(work / f"trial-{i}"), "kill_after_fraction": f,
                            "trace": str(work / f"trial-{i}.trace")} for i, f in enumerate(fractions)])
        timing, *started = trials_h.wait()
        resume_h.start()  # only now: its imports would slow the timing run down
        if timing["ended"] != "exit 0":
            raise SystemExit(f"the timing run failed:\n{timing['log']}")
        duration = timing["seconds"]
        kills = [r["kill_after_s"] for r in started]
        resumes = []
        for i, _ in enumerate(started):
            run_dir = work / f"trial-{i}"
            if (run_dir / "config.yaml").exists():
                resumes.append({"run_dir": str(run_dir), "resume": True})
            else:  # killed before the run existed: start it again
                resumes.append({**run, "run_dir": str(run_dir)})
        names = {"reference": str(work / "reference"), **{f"trial-{i}": str(work / f"trial-{i}")
                                                          for i in range(args.trials)}}
        resume_h.submit([*resumes, {"fingerprint": names, "out": str(work / "prints.json")}])
        *resumed, prints_job = resume_h.wait()
        if prints_job["ended"] != "exit 0":
            raise SystemExit(f"fingerprinting failed:\n{prints_job['log']}")
    finally:
        for h in (reference, trials_h, resume_h):
            h.close()

    prints = json.loads((work / "prints.json").read_text())
    rows, identical, where = [], 0, Counter()
    print(f"reference: {args.steps} steps in {duration:.1f} s; {args.trials} trials in {work}")
    for i, (start, again) in enumerate(zip(started, resumed)):
        landed = _landed(work / f"trial-{i}.trace") if start["ended"] == "killed" else "not killed (finished first)"
        diff = differences(prints["reference"], prints[f"trial-{i}"]) if again["ended"] == "exit 0" else ["resume failed"]
        same = not diff
        identical += same
        where[landed.split(" of ")[0]] += 1
        how = "resumed" if again["job"].get("resume") else "started again (no config.yaml yet)"
        print(f"trial {i:2d}: kill at {kills[i]:5.2f} s, {landed}; {how}: "
              f"{'bit-identical' if same else 'DIFFERS in ' + ', '.join(diff)}")
        if again["ended"] != "exit 0":
            print(again["log"][-2000:])
        rows.append({"trial": i, "kill_after_s": kills[i], "ended": start["ended"], "landed": landed,
                     "resume": how, "resume_ended": again["ended"], "differences": diff})
    killed = sum(r["ended"] == "killed" for r in started)
    print(f"{identical} of {args.trials} resumed bit-identical ({killed} killed, "
          f"{args.trials - killed} finished before their kill); kills landed: "
          + ", ".join(f"{k} x{n}" for k, n in sorted(where.items())))
    if args.out:
        args.out.write_text(json.dumps({"trials": rows, "identical": identical, "n": args.trials, "killed": killed,
                                        "reference_seconds": duration}, indent=2) + "\n")
    return 0 if identical == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
