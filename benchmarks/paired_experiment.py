"""What training buys, measured in pairs: base vs `mode: golden` vs `mode: a1`.

    python benchmarks/paired_experiment.py --work runs/paired --mbpp ../shared/data/mbppplus.parquet
    python benchmarks/paired_experiment.py --work /tmp/paired-tiny --tiny     # minutes: the whole pipeline

Stages, each skipping what is already done (rerun the same command to resume; the
evaluations and training runs resume themselves, so a stop at any moment loses at most
the problem or step in flight):

1. data: MBPP+ split by a seeded shuffle into a screening pool and held-out problems
   never trained on (`eval-mbpp.jsonl`); `bundled:heldout` is evaluated too.
2. screen: the base code model on the pool, `--screen-n` samples at temperature 1 with
   the training budget of new tokens (the conditions GRPO samples in); the training set
   is the problems it solves only sometimes, closest to half the time first (a group of
   codes then differs in reward, so GRPO has a signal), as the cpu-demo picked its 8.
3. train: `mode: golden` and `mode: a1` from the cpu-demo preset, the same problems,
   seed and step budget (`--steps`; `--time-limit` per sitting, then rerun to go on).
4. evaluate on the held-out sets, and compare with `codea1 eval compare` (base = A):
   code greedy pass@1 and avg@n (base, golden, a1); the test models with `eval tests`
   (pass@5, mut@5, Mul, valid-test rate: base vs a1); best-of-N with the a1 test model
   against the base test model on the same candidates (`eval select --codes-from`), and
   a1 code + a1 tests against base + base. `--claims code` (or tests, select, avg, comma-
   separated) evaluates only those: the code claims alone take a fraction of the time.

It prints, before anything runs, the smallest difference the held-out set can detect;
each comparison then reports its own (from the observed per-problem differences).
Results: WORK/compare/NAME/comparison.{json,png} and WORK/report.md (the table).
Peak memory is the training update's (cpu-demo with `grpo.micro_batch_tokens=512`,
about 7 GiB); one model job runs at a time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_model.py (--tiny)

BASE = "qwen2.5-coder-0.5b-instruct"
HELDOUT_SETS = ("mbpp", "heldout")
CLAIMS = ("code", "tests", "select", "avg")


def parse_claims(text: str) -> tuple[str, ...]:
    """`--claims code,tests`: the claims named, in the order they run, each known."""
    named = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in named if c not in CLAIMS]
    if unknown or not named:
        raise argparse.ArgumentTypeError(f"--claims {text!r}: expected a comma-separated list of "
                                         f"{', '.join(CLAIMS)} (unknown: {', '.join(unknown) or 'none given'})")
    return tuple(c for c in CLAIMS if c in named)


@dataclass
class Plan:
    """Everything the stages need, from the command line (or the tiny preset)."""

    work: Path
    mbpp: Path | None
    tiny: bool
    pool: int
    eval_problems: int
    train_problems: int
    screen_n: int
    steps: int
    time_limit: str | None
    avg_n: int
    n_code: int
    n_test: int
    k: int
    eval_tokens: int
    threads: int
    tests_protocol: str = "answer"
    claims: tuple[str, ...] = CLAIMS
    model: str = BASE
    train_sets: tuple[str, ...] = ()

    def path(self, *parts: str) -> Path:
        return self.work.joinpath(*parts)

    def data(self, name: str) -> str:
        return str(self.path("eval-mbpp.jsonl")) if name == "mbpp" else self.heldout

    @property
    def heldout(self) -> str:
        return str(self.path("eval-heldout.jsonl")) if self.tiny else "bundled:heldout"


def say(text: str) -> None:
    print(text, flush=True)


def _in_process(args: list[str], fh) -> int:
    """A codea1 command in this interpreter (the tiny mode: torch is imported once, not per command)."""
    from contextlib import redirect_stderr, redirect_stdout

    from codea1.cli import app

    with redirect_stdout(fh), redirect_stderr(fh):
        try:
            app(args, standalone_mode=False)
        except SystemExit as exc:
            return int(exc.code or 0)
        except Exception:  # noqa: BLE001 - the log gets the traceback, the caller the exit status
            import traceback

            traceback.print_exc()
            return 1
    return 0


def codea1(plan: Plan, log: str, *args: object) -> None:
    """One codea1 command, its output to a log: in its own process for the real model (one
    model in memory at a time, all of it given back when the command ends), in this one
    for the tiny model."""
    argv = [str(a) for a in args]
    logfile = plan.path("logs", f"{log}.log")
    logfile.parent.mkdir(parents=True, exist_ok=True)
    say(f"  $ codea1 {' '.join(argv)}   (log: {logfile})")
    start = time.monotonic()
    with logfile.open("a") as fh:
        fh.write(f"\n$ codea1 {' '.join(argv)}\n")
        fh.flush()
        if plan.tiny:
            code = _in_process(argv, fh)
        else:
            cmd = [sys.executable, "-c", "from codea1.cli import main; main()", *argv]
            code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
    if code != 0:
        tail = "\n".join(logfile.read_text().splitlines()[-15:])
        raise SystemExit(f"codea1 {argv[0]} {argv[1]} failed (exit {code}); the end of {logfile}:\n{tail}")
    say(f"    done in {time.monotonic() - start:.0f} s")


# --------------------------------------------------------------------------- stages


#: what the data and screening stages are built from: each resumes from its files, so a
#: later sitting asking for other ones would silently be given the old
SETUP_KEYS = ("mbpp", "tiny", "pool", "eval_problems", "screen_n", "train_problems", "model")


def check_setup(plan: Plan) -> None:
    """Record in WORK/setup.json what its stages are built from, or refuse a sitting that
    asks for something else (naming each difference)."""
    record = plan.path("setup.json")
    mine = {k: str(v) if isinstance(v, Path) else v for k in SETUP_KEYS for v in [getattr(plan, k)]}
    if not record.is_file():
        plan.work.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(mine, indent=1) + "\n")
        return
    old = json.loads(record.read_text())
    diff = [f"--{k.replace('_', '-')} {old.get(k)!r} there, {mine[k]!r} now" for k in SETUP_KEYS if old.get(k) != mine[k]]
    if diff:
        raise SystemExit(f"{plan.work} was set up with other settings ({'; '.join(diff)}): its stages would reuse "
                         "the files made for those; give the same settings to go on, or another --work")


def stage_data(plan: Plan) -> None:
    """The screening pool and the held-out MBPP+ problems, disjoint, from a seeded shuffle."""
    from random import Random

    from codea1.data import bundled_problems, load_problems, save_problems

    pool, held = plan.path("pool.jsonl"), plan.path("eval-mbpp.jsonl")
    if pool.is_file() and held.is_file():
        return
    if plan.tiny:  # the shortest bundled problems: the tiny model's context is 1,024 tokens
        def shortest(split: str):
            return sorted(bundled_problems(split), key=lambda p: len(p.question) + len(p.reference))

        held_tiny = shortest("heldout")
        problems = shortest("train")[:plan.pool] + held_tiny[:plan.eval_problems]
        save_problems(held_tiny[plan.eval_problems:plan.eval_problems + 2], plan.path("eval-heldout.jsonl"))
    else:
        if plan.mbpp is None or not plan.mbpp.is_file():
            raise SystemExit(f"--mbpp {plan.mbpp}: no such file (MBPP+ in the Code-A1 parquet rows)")
        problems = load_problems(plan.mbpp)
        Random(0).shuffle(problems)
    if len(problems) < plan.pool + plan.eval_problems:
        raise SystemExit(f"--pool {plan.pool} + --eval-problems {plan.eval_problems} exceed the "
                         f"{len(problems)} problems")
    plan.work.mkdir(parents=True, exist_ok=True)
    save_problems(problems[plan.pool:plan.pool + plan.eval_problems], held)
    save_problems(problems[:plan.pool], pool)
    say(f"data: {plan.pool} problems to screen ({pool}), {plan.eval_problems} held out ({held})")


def pick_training(rates: dict[str, float], wanted: int) -> tuple[list[str], str]:
    """The problems solved only sometimes, closest to half the time first; filled up with
    the rest (closest to half first) when too few are, which the note then says."""
    order = sorted(rates, key=lambda pid: (abs(rates[pid] - 0.5), pid))
    sometimes = [pid for pid in order if 0 < rates[pid] < 1]
    picked = sometimes[:wanted]
    note = f"{len(picked)} of the pool solved only sometimes"
    if len(picked) < wanted:
        picked += [pid for pid in order if pid not in picked][:wanted - len(picked)]
        note += f"; filled up to {len(picked)} with problems always or never solved (less signal for GRPO)"
    return picked, note


def stage_screen(plan: Plan) -> None:
    """Measure the base model's pass rate on the pool at temperature 1; write train.jsonl."""
    from codea1.data import load_problems, save_problems
    from codea1.eval.store import SAMPLES_FILE, read_samples

    train = plan.path("train.jsonl")
    if train.is_file():
        return
    out = plan.path("evals", "screen")
    tokens = 4 if plan.tiny else 160  # the code rollout's budget in training
    codea1(plan, "screen", "eval", "code", "--model", plan.model, "--data", plan.path("pool.jsonl"), "--out", out,
           "--n", plan.screen_n, "--temperature", "1.0", "--top-p", "1.0", "--max-new-tokens", tokens,
           "--threads", plan.threads, "--problems-per-batch", 8)
    samples = read_samples(out / SAMPLES_FILE)
    rates = {pid: sum(bool(r["passed"]) for r in rows.values()) / len(rows) for pid, rows in samples.items()}
    picked, note = pick_training(rates, plan.train_problems)
    by_id = {p.id: p for p in load_problems(plan.path("pool.jsonl"))}
    save_problems([by_id[pid] for pid in picked], train)
    shown = ", ".join(f"{pid} {rates[pid]:.2f}" for pid in picked)
    plan.path("train_pick.txt").write_text(f"{note}\n{shown}\n")
    say(f"screen: trained on {shown} ({note})")


def train_settings(plan: Plan, mode: str) -> list[str]:
    sets = [f"mode={mode}", f"data.train={plan.path('train.jsonl')}", f"data.heldout={plan.path('eval-mbpp.jsonl')}",
            "validation.every=0", f"threads={plan.threads}", "seed=0", "logging.progress=plain"]
    if plan.tiny:
        sets += [f"model.name={plan.model}", "model.dtype=float32", "data.problems_per_step=1", "rollout.n_code=2",
                 "rollout.n_test=2", "rollout.code.max_new_tokens=4", "rollout.test.max_new_tokens=4"]
    else:
        sets += ["grpo.micro_batch_tokens=512"]  # the update's peak memory under 7 GiB (the preset's note)
    return [x for s in sets for x in ("--set", s)]


def stage_train(plan: Plan, mode: str) -> bool:
    """Train (or resume) one run to --steps; False when this sitting's time ran out first."""
    run = plan.path("runs", mode)
    if (run / "checkpoints" / f"step-{plan.steps}").is_dir():
        return True
    limit = ["--time-limit", plan.time_limit] if plan.time_limit else []
    if (run / "config.yaml").is_file():
        codea1(plan, f"train-{mode}", "train", "--resume", run, "--steps", plan.steps, *limit)
    else:
        codea1(plan, f"train-{mode}", "train", "--preset", "cpu-demo", "--run-dir", run, "--steps", plan.steps,
               *train_settings(plan, mode), *limit)
    return (run / "checkpoints" / f"step-{plan.steps}").is_dir()


def model_of(plan: Plan, who: str) -> str:
    return plan.model if who == "base" else str(plan.path("runs", who))


def named(plan: Plan, who: str) -> str:
    """`who` in an evaluation's directory name: a trained model with its step, so a sitting
    with more --steps evaluates the newer checkpoint anew instead of resuming the older's."""
    return who if who == "base" else f"{who}-step{plan.steps}"


def eval_code(plan: Plan, who: str, data: str, sampled: bool) -> Path:
    out = plan.path("evals", f"code-{'avg' if sampled else 'greedy'}-{data}-{named(plan, who)}")
    how = ["--n", plan.avg_n, "--temperature", "0.7"] if sampled else ["--greedy"]
    codea1(plan, out.name, "eval", "code", "--model", model_of(plan, who), "--data", plan.data(data), "--out", out,
           *how, "--max-new-tokens", plan.eval_tokens, "--threads", plan.threads, "--problems-per-batch", 8)
    return out


def eval_tests(plan: Plan, who: str, data: str) -> Path:
    out = plan.path("evals", f"tests-{data}-{named(plan, who)}")
    codea1(plan, out.name, "eval", "tests", "--model", model_of(plan, who), "--data", plan.data(data), "--out", out,
           "--k", plan.k, "--max-new-tokens", plan.eval_tokens, "--threads", plan.threads, "--problems-per-batch", 8,
           "--protocol", plan.tests_protocol)
    return out


def eval_select(plan: Plan, code: str, test: str, data: str, codes_from: Path | None = None) -> Path:
    out = plan.path("evals", f"select-{data}-{named(plan, code)}-code-{named(plan, test)}-tests")
    source = ["--codes-from", codes_from] if codes_from else ["--code-model", model_of(plan, code)]
    codea1(plan, out.name, "eval", "select", *source, "--test-model", model_of(plan, test), "--data",
           plan.data(data), "--out", out, "--n-code", plan.n_code, "--n-test", plan.n_test, "--max-new-tokens",
           plan.eval_tokens, "--threads", plan.threads, "--problems-per-batch", 8)
    return out


# --------------------------------------------------------------------------- comparing


def compare_into(plan: Plan, name: str, dirs: list[Path], rows: list[dict]) -> dict:
    """`codea1 eval compare` on `dirs` (A first) into WORK/compare/NAME; its table rows kept."""
    from codea1.eval.compare import compare, finite, headline, plot_comparison
    from codea1.eval.store import write_json

    result = finite(compare(dirs))
    out = plan.path("compare", name)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "comparison.json", result)
    plot_comparison(result, out / "comparison.png")
    models = {e["label"]: e["models"] for e in result["evaluations"]}
    for comp in result["comparisons"]:
        for r in comp["metrics"]:
            rows.append({**r, "comparison": name, "a_model": models["A"], "b_model": models[comp["b"]],
                         "a_value": r["a"], "b_value": r["b"]})
    for line in headline(result):
        say(f"  {name}: {line}")
    return result


def planning(plan: Plan) -> str:
    """The smallest difference in greedy pass@1 the held-out sets can detect, before any run."""
    from codea1.eval.compare import binary_mde

    sizes = {"mbpp": plan.eval_problems, "heldout": 2 if plan.tiny else 18}
    sizes["both"] = sizes["mbpp"] + sizes["heldout"]
    lines = []
    for name, n in sizes.items():
        cells = []
        for share in (0.1, 0.2, 0.3):
            m = binary_mde(n, share)
            cells.append(f"{share:.0%} of problems change: {'-' if m is None else f'{m:.1f}'}")
        lines.append(f"  {name} ({n} problems): " + "; ".join(cells))
    return ("smallest difference in greedy pass@1 (points) detectable at 80% power, 5% level, "
            "by how many problems change between two models:\n" + "\n".join(lines))


def fmt(value, signed: bool = False) -> str:
    return "-" if value is None else (f"{value:+.1f}" if signed else f"{value:.1f}")


def write_report(plan: Plan, rows: list[dict], notes: list[str]) -> Path:
    lines = ["# Paired experiment", "", *notes, "",
             "| comparison | metric | A | B | problems | A value | B value | B - A [95% CI] | up/down | sign p | "
             "detectable | verdict |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        updown = "-" if r["improved"] is None else f"{r['improved']}/{r['worsened']}"
        p = "-" if r["p_sign"] is None else f"{r['p_sign']:.3g}"
        lines.append(f"| {r['comparison']} | {r['metric']} | {r['a_model']} | {r['b_model']} | {r['paired']} | {fmt(r['a_value'])} | "
                     f"{fmt(r['b_value'])} | {fmt(r['diff'], True)} [{fmt(r['low'], True)}, {fmt(r['high'], True)}] | "
                     f"{updown} | {p} | {fmt(r['mde'])} | {r['verdict']} |")
    report = plan.path("report.md")
    report.write_text("\n".join(lines) + "\n")
    return report


def evaluate_and_compare(plan: Plan) -> list[dict]:
    """Every evaluation of the claims asked for (`--claims`), each comparison run as soon as
    its evaluations are there, in the fixed order code, tests, select, avg."""
    rows: list[dict] = []
    code_models = ("base", "golden", "a1")
    if "code" in plan.claims:
        for data in HELDOUT_SETS:
            dirs = [eval_code(plan, who, data, sampled=False) for who in code_models]
            compare_into(plan, f"code-greedy-{data}", dirs, rows)
    if "tests" in plan.claims:
        for data in HELDOUT_SETS:
            dirs = [eval_tests(plan, who, data) for who in ("base", "a1")]
            compare_into(plan, f"tests-{data}", dirs, rows)
    if "select" in plan.claims:
        for data in HELDOUT_SETS:
            base = eval_select(plan, "base", "base", data)
            with_a1_tests = eval_select(plan, "base", "a1", data, codes_from=base)
            compare_into(plan, f"select-a1-tests-{data}", [base, with_a1_tests], rows)
            both = eval_select(plan, "a1", "a1", data)
            compare_into(plan, f"select-a1-both-{data}", [base, both], rows)
    if "avg" in plan.claims:
        for data in HELDOUT_SETS:
            dirs = [eval_code(plan, who, data, sampled=True) for who in code_models]
            compare_into(plan, f"code-avg{plan.avg_n}-{data}", dirs, rows)
    return rows


def run(plan: Plan) -> int:
    started = time.monotonic()
    say(planning(plan))
    if plan.tiny and not Path(plan.model).is_dir():
        from tiny_model import tiny_test_model

        tiny_test_model(plan.model)
    check_setup(plan)
    stage_data(plan)
    stage_screen(plan)
    for mode in ("golden", "a1"):
        if not stage_train(plan, mode):
            say(f"train {mode}: this sitting's --time-limit ran out before step {plan.steps}; "
                "run the same command again to go on")
            return 3
    rows = evaluate_and_compare(plan)
    pick = plan.path("train_pick.txt").read_text().strip().splitlines()
    notes = [f"Trained on: {pick[1]} ({pick[0]}).", f"Steps: {plan.steps} per run.",
             f"Claims evaluated: {', '.join(plan.claims)}.", planning(plan)]
    report = write_report(plan, rows, notes)
    say(f"wrote {report} ({time.monotonic() - started:.0f} s this sitting)")
    return 0


def parse(argv: list[str] | None = None) -> Plan:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="Directory of every stage's output (rerun to resume).")
    ap.add_argument("--mbpp", type=Path, default=Path("../shared/data/mbppplus.parquet"),
                    help="MBPP+ in the Code-A1 parquet rows.")
    ap.add_argument("--tiny", action="store_true",
                    help="A tiny random-weight model, a handful of bundled problems, one step: the pipeline in minutes.")
    ap.add_argument("--pool", type=int, default=24, help="MBPP+ problems screened for training.")
    ap.add_argument("--eval-problems", type=int, default=40, help="MBPP+ problems held out for evaluation.")
    ap.add_argument("--train-problems", type=int, default=8)
    ap.add_argument("--screen-n", type=int, default=4, help="Samples per problem when screening (temperature 1).")
    ap.add_argument("--steps", type=int, default=8, help="Training steps of each run (the same for both).")
    ap.add_argument("--time-limit", default=None, help="Wall-clock budget of one training sitting, e.g. 2h.")
    ap.add_argument("--avg-n", type=int, default=4, help="Samples per problem of avg@n (temperature 0.7).")
    ap.add_argument("--n-code", type=int, default=4, help="Candidates per problem in best-of-N.")
    ap.add_argument("--n-test", type=int, default=2, help="Test suites per problem in best-of-N.")
    ap.add_argument("--k", type=int, default=5, help="Tests per function in eval tests.")
    ap.add_argument("--eval-tokens", type=int, default=512, help="New tokens of every evaluation sample.")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tests-protocol", choices=("answer", "rounds"), default="answer",
                    help="How eval tests asks the test models (rounds: as the paper's harness, k chat rounds).")
    ap.add_argument("--claims", type=parse_claims, default=CLAIMS,
                    help="Which claims to evaluate, comma-separated, of: code (greedy pass@1 of base, golden, a1), "
                         "tests (eval tests, base vs a1), select (best-of-N with each test model), avg (avg@n of "
                         "the code models). Default: all. A later sitting with more claims reuses the evaluations "
                         "already done.")
    a = ap.parse_args(argv)
    plan = Plan(work=a.work, mbpp=a.mbpp, tiny=a.tiny, pool=a.pool, eval_problems=a.eval_problems,
                train_problems=a.train_problems, screen_n=a.screen_n, steps=a.steps, time_limit=a.time_limit,
                avg_n=a.avg_n, n_code=a.n_code, n_test=a.n_test, k=a.k, eval_tokens=a.eval_tokens, threads=a.threads,
                tests_protocol=a.tests_protocol, claims=a.claims)
    if a.tiny:
        plan.model = str(a.work / "tiny-model")
        plan.pool, plan.eval_problems, plan.train_problems, plan.screen_n = 3, 2, 2, 2
        plan.steps, plan.avg_n, plan.n_code, plan.n_test, plan.k, plan.eval_tokens = 1, 2, 2, 1, 2, 8
    return plan


if __name__ == "__main__":
    raise SystemExit(run(parse()))
