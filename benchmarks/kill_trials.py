"""kill -9 (or Ctrl-C) a tiny a1 training run at random moments, resume it, count bit-identical ends.

    python benchmarks/kill_trials.py                 # 20 trials
    python benchmarks/kill_trials.py --trials 50 --seed 3 --out kill_trials.json
    python benchmarks/kill_trials.py --signal SIGINT                  # Ctrl-C instead
    python benchmarks/kill_trials.py --signal SIGINT --again 0.05     # and a second one 0-0.05 s later
    python benchmarks/kill_trials.py --signal SIGTERM                 # a scheduler's stop
    python benchmarks/kill_trials.py --set validation.every=2         # with validations (any --set)
    python benchmarks/kill_trials.py --time-limit                     # --time-limit, drawn per trial

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

With `--signal SIGINT` or `SIGTERM` the run is asked to stop instead of killed: it must
end by itself within `--stop-within` seconds (else the trial counts as hung and fails),
having written a checkpoint once it has a trainer, and its resume must be as
bit-identical as after a kill (the stop drops the work under way and rewinds the step's
random and data state). `--again S` sends a second SIGINT a random 0-S seconds after the
first: an abort, which must keep the last checkpoint whole. Each trial also prints how
long the run took to end after the signal. With `--time-limit` no signal is sent: each
trial runs under train's time limit, drawn from 5-100% of the run's duration, ends by
itself with a checkpoint, and is resumed without one; it prints how far past its limit
each run ended (the stop's checkpoint is written after the limit).

A harness's child starts with Python's own SIGINT handler, as a command started from a
terminal does (a background job of a script would start with SIGINT ignored).
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
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                    help="an override of the trial run's settings, as train's --set (e.g. validation.every=2)")
    ap.add_argument("--signal", default="SIGKILL", choices=["SIGKILL", "SIGINT", "SIGTERM"],
                    help="what the run gets at its random moment")
    ap.add_argument("--again", type=float, default=None, metavar="S",
                    help="a second SIGINT a random 0-S seconds after the first (a second Ctrl-C)")
    ap.add_argument("--time-limit", action="store_true",
                    help="no signal: each trial runs with a time limit (train's --time-limit) drawn from 5-100%% "
                         "of the run's duration, must end by itself, and is resumed without one")
    ap.add_argument("--stop-within", type=float, default=60.0, metavar="S",
                    help="seconds a signalled run may take to end before it counts as hung")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kill-trials-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    tiny = tiny_paths(work / "tiny")
    run = {"overrides": [*tiny_overrides(tiny, "a1", args.steps), *FAST_OVERRIDES, *args.overrides]}

    reference = Harness(1, work / "harness-reference").start()
    trials_h = Harness(1, work / "harness-trials").start()  # imports while the reference runs
    resume_h = Harness(2, work / "harness-resume")
    try:
        reference.submit([{"make_tiny": str(work / "tiny")},
                          {**run, "run_dir": str(work / "reference"), "trace": str(work / "reference.trace")}])
        made, ref = reference.wait()
        if made["ended"] != "exit 0" or ref["ended"] != "exit 0":
            raise SystemExit(f"the reference run failed:\n{ref['log']}")
        if args.time_limit:
            stops = [{"time_limit_fraction": rng.uniform(0.05, 1.0)} for _ in range(args.trials)]
        else:
            stops = [{"kill_after_fraction": rng.uniform(0.0, 0.9),  # (a later kill may come too late)
                      "again_after_s": None if args.again is None else rng.uniform(0.0, args.again),
                      "kill_signal": args.signal,
                      "stop_within_s": None if args.signal == "SIGKILL" else args.stop_within}
                     for _ in range(args.trials)]
        trials_h.submit([{**run, "run_dir": str(work / "timing"), "timing": True}]
                        + [{**run, **stop, "run_dir": str(work / f"trial-{i}"), "trace": str(work / f"trial-{i}.trace")}
                           for i, stop in enumerate(stops)])
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
    rows, identical, where, hung = [], 0, Counter(), 0
    what = "a time limit" if args.time_limit else args.signal
    print(f"reference: {args.steps} steps in {duration:.1f} s; {args.trials} trials with {what}"
          f"{'' if args.again is None else f' (and a second SIGINT within {args.again} s)'} in {work}")
    for i, (start, again) in enumerate(zip(started, resumed)):
        signalled = start["stop_seconds"] is not None
        limit = start["time_limit_s"]
        landed = (_landed(work / f"trial-{i}.trace") if signalled or limit is not None
                  else "not signalled (finished first)")
        diff = differences(prints["reference"], prints[f"trial-{i}"]) if again["ended"] == "exit 0" else ["resume failed"]
        if start["ended"] == "hung":
            hung += 1
            diff = ["did not stop within --stop-within", *diff]
        same = not diff
        identical += same
        where[landed.split(" of ")[0]] += 1
        how = "resumed" if again["job"].get("resume") else "started again (no config.yaml yet)"
        ended = (f"{start['ended']} {start['stop_seconds']:.2f} s after it" if signalled else
                 f"{start['ended']} after {start['seconds']:.2f} s" if limit is not None else start["ended"])
        second = (f" (again after {start['job']['again_after_s']:.3f} s)" if start["again_sent"]
                  else "" if start["job"].get("again_after_s") is None else " (ended before a second)")
        at = f"time limit {limit:5.2f} s" if limit is not None else f"{args.signal} at {kills[i]:5.2f} s"
        print(f"trial {i:2d}: {at}{second}, {landed}; {ended}; {how}: "
              f"{'bit-identical' if same else 'DIFFERS in ' + ', '.join(diff)}")
        if again["ended"] != "exit 0" or start["ended"] == "hung":
            print(again["log"][-2000:])
        rows.append({"trial": i, "kill_after_s": kills[i], "time_limit_s": limit, "seconds": start["seconds"],
                     "again_after_s": start["job"].get("again_after_s"), "again_sent": start["again_sent"],
                     "ended": start["ended"], "stop_seconds": start["stop_seconds"], "landed": landed,
                     "resume": how, "resume_ended": again["ended"], "differences": diff})
    signalled = [r for r in rows if r["stop_seconds"] is not None]
    waits = sorted(r["stop_seconds"] for r in signalled)
    print(f"{identical} of {args.trials} resumed bit-identical ("
          + ("" if args.time_limit else f"{len(signalled)} signalled, {args.trials - len(signalled)} finished "
             "before their signal; ")
          + f"{hung} hung"
          + (f"; {sum(r['again_sent'] for r in rows)} got a second SIGINT" if args.again is not None else "")
          + "); landed: "
          + ", ".join(f"{k} x{n}" for k, n in sorted(where.items())))
    limited = [r for r in rows if r["time_limit_s"] is not None]
    if limited:
        over = sorted(r["seconds"] - r["time_limit_s"] for r in limited)
        print(f"{sum(o <= 0 for o in over)} of {len(limited)} ended within their time limit; the latest "
              f"{over[-1]:+.2f} s from it (the limit counts from the call; no step has a measured length "
              "before the first ends)")
    if waits:
        print(f"ended after the signal in {waits[0]:.2f}-{waits[-1]:.2f} s (median {waits[len(waits) // 2]:.2f} s)")
    if args.out:
        args.out.write_text(json.dumps({"trials": rows, "identical": identical, "n": args.trials,
                                        "signal": args.signal, "signalled": len(signalled), "hung": hung,
                                        "reference_seconds": duration}, indent=2) + "\n")
    return 0 if identical == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
