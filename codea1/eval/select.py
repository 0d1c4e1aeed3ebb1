"""`codea1 eval select`: best-of-N code selection with a test model, and what it gains.

What a user with no solution does with a test model: the code model writes N candidate
codes for a problem, the test model writes K test suites from the question alone
(black-box), every candidate runs against every generated test in the sandbox, and one
candidate is chosen:

1. the candidate that passes the most generated tests;
2. among candidates tied there, CodeT's dual agreement (Chen et al., 2022): candidates
   that pass exactly the same tests form a consensus set, scored by (codes in the set) x
   (tests it passes); the tied candidates pass equally many tests, so the largest set wins;
3. still tied (e.g. no generated test passes anyone), the most common behaviour: the
   largest group of candidates that return the same values on every generated call;
4. then the first sampled (the samples are in random order).

Rule 1 comes first, rather than CodeT's score alone, because CodeT's product lets a large
cluster of codes that pass few tests beat a code that passes more of them: the figure
measured here is what the test model's tests decide. The dual agreement and behaviour
rules only break ties, where they pick the answer most samples agree on.

A generated test passes when the candidate defines the function and the test's call
returns a value equal (Python's `==` on values decoded outside the sandbox) to the
test's expected value, itself a literal or evaluated in the candidate's run. The chosen
candidate, and each of the N, is then checked on the golden tests (as `eval code`).
Per data source it reports the selected code's pass@1, the mean pass@1 of a random
candidate, pass@N (the oracle: some candidate is right), and the selection's gain over a
random pick with a bootstrap 95% interval over problems.

Files in OUT: `codes.jsonl` and `tests.jsonl` (the samples, appended as generated, so an
interrupted run resumes without generating again; each row with its problem's fingerprint,
`problem_digest`, so that one resumed on a changed problem is refused, as a judged row of
it is), `problems.jsonl` (per problem: every
candidate's generated-test and golden results, the pick and the rule that made it, and a
fingerprint of each candidate, `code_sha`), and `summary.json`.

Paired evaluation: `codes_from` (`--codes-from DIR`) takes the candidate codes of an
earlier selection instead of sampling new ones, so two test models pick among the same N
codes per problem and `codea1 eval compare` sets their picks side by side. The earlier
evaluation must be of the same data, code model and code sampling settings (N,
temperature, top-p, new tokens, seed), and hold all N codes of every problem it did not
skip (a problem it skipped has no candidates, and is skipped here too, saying so).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from codea1.configs import SamplingConfig
from codea1.data.check import defines_call
from codea1.eval import loading  # `loading.sample_problems` etc. are looked up when called (tests replace them)
from codea1.eval.code import CodeEvalConfig, probe_references, skip_reason
from codea1.eval.loading import load_eval_problems, run_checkpoint, run_step, set_threads
from codea1.eval import setup  # the set-up the eval commands share
from codea1.eval.store import (
    MODEL_FILE,
    RUN_FILE,
    STDIN_DEFAULTS,
    SUMMARY_FILE,
    append_rows,
    check_identity,
    check_out_dir,
    check_rows_current,
    check_sampled_with,
    data_digest,
    iter_jsonl,
    problem_digest,
    read_json_object,
    read_samples,
    repair_tail,
    sampler_record,
    write_json,
    write_summary,
)
from codea1.judge import extract_code
from codea1.eval.stdin_tests import run_stdin_generated_tests, stdin_generated_tests
from codea1.judge.golden import golden_item, golden_results
from codea1.judge.parse import parse_completion
from codea1.models import check_model_name
from codea1.rollout import code_messages, test_messages
from codea1.sandbox import Job, Limits, encode, to_source
from codea1.sandbox.decode import python_equal

if TYPE_CHECKING:
    from codea1.data import Problem

CODES_FILE = "codes.jsonl"
TESTS_FILE = "tests.jsonl"
PROBLEMS_FILE = "problems.jsonl"
#: every file a selection writes in --out
SELECT_WRITTEN = (PROBLEMS_FILE, CODES_FILE, TESTS_FILE, SUMMARY_FILE, RUN_FILE, MODEL_FILE)
RULES = ("most-passed", "dual-agreement", "behaviour", "first")
# the settings that decide the candidate codes: `--codes-from` needs them equal
CODE_SETTINGS = ("n_code", "temperature", "top_p", "max_new_tokens", "seed")


@setup.with_sampling
@dataclass(frozen=True)
class SelectConfig:
    """Samples per problem, their sampling, and the sandbox (the paper's evaluation sampling).
    The sampling settings are `sampling`'s, also taken and read as keywords
    (`with_sampling`); both roles sample with them."""

    n_code: int = 4
    n_test: int = 2
    tests_per_suite: int = 8
    sampling: SamplingConfig = field(default_factory=lambda: SamplingConfig(
        temperature=0.7, top_p=0.95, max_new_tokens=1024, batch_size=64, seed=0))
    limit: int | None = None
    problems_per_batch: int = 8
    test_timeout_s: float = 10.0      # one candidate's run through all generated tests
    test_call_timeout_s: float = 3.0  # one generated test (the judge's default)
    memory_mb: int = 4096
    workers: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None
    engine: str = "auto"
    bootstrap: int = 2000
    # stdin programs' time limit per input x this, and what one run may print (MiB): the
    # training judge's `judge.stdin_time_scale` and `judge.stdin_max_output_mb`
    stdin_time_scale: float = STDIN_DEFAULTS["stdin_time_scale"]
    stdin_max_output_mb: float = STDIN_DEFAULTS["stdin_max_output_mb"]

    def __post_init__(self) -> None:
        setup.check_runtime(self)
        setup.refuse_stop(self, "both models sample with one config here, and the test model's tests are "
                                "read from every block")
        for name in ("n_code", "n_test", "tests_per_suite", "problems_per_batch", "bootstrap"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")

    def identity(self) -> dict[str, Any]:
        """What must match for samples on disk to belong to this evaluation."""
        return {"n_code": self.n_code, "n_test": self.n_test, "tests_per_suite": self.tests_per_suite,
                "temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens,
                "seed": self.seed, "memory_mb": self.memory_mb, "test_timeout_s": self.test_timeout_s,
                "test_call_timeout_s": self.test_call_timeout_s, **setup.stdin_identity(self)}


# --------------------------------------------------------------------------- choosing


@dataclass(frozen=True)
class Choice:
    index: int
    rule: str        # which rule decided: one of RULES
    tied: int        # candidates that passed as many generated tests as the best


def _largest(group: Sequence[int], key: Callable[[int], Hashable]) -> list[int]:
    sizes = Counter(key(i) for i in group)
    top = max(sizes.values())
    return [i for i in group if sizes[key(i)] == top]


def choose(passes: Sequence[Sequence[bool]], behaviours: Sequence[Hashable]) -> Choice:
    """The candidate to submit, from each candidate's pass/fail on the generated tests and
    its behaviour (see the module's docstring for the rules, in order)."""
    if not passes:
        raise ValueError("choose: no candidates")
    if len(behaviours) != len(passes):
        raise ValueError(f"choose: {len(passes)} candidates but {len(behaviours)} behaviours")
    counts = [sum(map(bool, p)) for p in passes]
    best = max(counts)
    tied = [i for i, c in enumerate(counts) if c == best]
    if len(tied) == 1:
        return Choice(tied[0], "most-passed", 1)
    rule = "first"  # the last rule that narrowed the group down
    agreed = _largest(tied, lambda i: tuple(map(bool, passes[i])))
    if len(agreed) < len(tied):
        rule = "dual-agreement"
    common = _largest(agreed, lambda i: behaviours[i])
    if len(common) < len(agreed):
        rule = "behaviour"
    return Choice(common[0], rule, len(tied))


# --------------------------------------------------------------------------- generated tests


@dataclass(frozen=True)
class GeneratedTest:
    """One distinct `assert CALL == EXPECTED` of the problem's generated suites."""

    text: str
    call: str
    expected: str
    expected_value: list | None  # encoded literal; None: evaluated in the candidate's run
    apart: bool                  # evaluated in a fork of its own (it may change what others see)


def generated_tests(problem: "Problem", suites: Sequence[str]) -> list[GeneratedTest]:
    """The distinct well-formed tests of all suites, read as the judge reads a suite, except
    that only `==` asserts count (`judge.strict_operator`): the judge's reference reading
    takes `assert f(x) != 3` as `f(x) == 3`, which would fail a right candidate here."""

    seen: dict[tuple[str, str], GeneratedTest] = {}
    for raw in suites:
        for t in parse_completion(raw, problem.entry_point, strict_operator=True):
            if not t.ok or t.call is None or t.expected is None or (t.call, t.expected) in seen:
                continue
            value = None
            if t.expected_literal is not None:
                try:
                    value = encode(t.expected_literal[0])
                except ValueError:  # too large or deep to encode here: evaluated in the run
                    value = None
            seen[(t.call, t.expected)] = GeneratedTest(t.normalized or "", t.call, t.expected, value,
                                                       t.call_apart or t.expected_apart)
    return list(seen.values())


@dataclass
class CandidateResult:
    passes: list[bool]       # per generated test
    behaviour: tuple         # what it returned on every generated call (or how its run failed)
    error: str | None = None


def _candidate_job(program: str, entry_point: str, tests: Sequence[GeneratedTest], limits):
    exprs = [defines_call(entry_point)]
    apart: set[str] = set()
    for t in tests:
        exprs.append(t.call)
        if t.expected_value is None:
            exprs.append(t.expected)
        if t.apart:
            apart.update([t.call, t.expected])
    calls = list(dict.fromkeys(exprs))
    isolated = [k for k, c in enumerate(calls) if c in apart]
    return Job(program=program, calls=calls, limits=limits, isolated=isolated), calls


def _outcome(run, calls: list[str], tests: Sequence[GeneratedTest]) -> CandidateResult:
    if run.status == "infra":
        raise RuntimeError(f"sandbox failure: {run.infra_error}")
    results = dict(zip(calls, run.calls))
    defined = results.get(calls[0])
    if not run.program_ok or defined is None or defined.status != "ok" or to_source(defined.value) != "True":
        why = run.program_error or ("the code does not define the function" if run.program_ok else run.status)
        return CandidateResult([False] * len(tests), ("no-function",), why)

    def shown(call: str) -> str:
        r = results.get(call)
        if r is None or r.status != "ok":
            return f"!{r.status if r is not None else 'not-run'}"
        try:
            return to_source(r.value)
        except ValueError:
            return "!unrepresentable"

    passes = []
    for t in tests:
        got = results.get(t.call)
        want = t.expected_value
        if want is None:
            r = results.get(t.expected)
            want = r.value if r is not None and r.status == "ok" else None
        passes.append(got is not None and got.status == "ok" and want is not None and python_equal(got.value, want))
    behaviour = tuple(shown(c) for c in dict.fromkeys(t.call for t in tests))
    return CandidateResult(passes, behaviour)


def run_generated_tests(executor, problem: "Problem", codes: Sequence[str], tests: Sequence[GeneratedTest],
                        limits) -> list[CandidateResult]:
    """Each candidate (a raw completion) against every generated test; identical programs
    share one run."""

    programs = [problem.program(extract_code(c)) for c in codes]
    distinct = list(dict.fromkeys(programs))
    jobs = [_candidate_job(p, problem.entry_point, tests, limits) for p in distinct]
    runs = executor.run_many([job for job, _ in jobs]) if jobs else []
    by_program = {p: _outcome(run, calls, tests) for p, (_, calls), run in zip(distinct, jobs, runs)}
    return [by_program[p] for p in programs]


# --------------------------------------------------------------------------- the figures


def bootstrap_interval(values: Sequence[float], resamples: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (resampling problems)."""

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def summarize(rows: Sequence[dict[str, Any]], resamples: int, seed: int) -> dict[str, Any]:
    """Per data source and over all: selected / random / oracle pass rates in percent, the
    gain (selected - random) and its bootstrap interval."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row.get("source") or "unknown"].append(row)
        groups["all"].append(row)
    sources = {}
    for source, group in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        selected = [100.0 * bool(r["selected_correct"]) for r in group]
        random_ = [100.0 * sum(r["golden"]) / len(r["golden"]) for r in group]
        oracle = [100.0 * any(r["golden"]) for r in group]
        gains = [s - r for s, r in zip(selected, random_)]
        low, high = bootstrap_interval(gains, resamples, seed)
        n = len(group)
        sources[source] = {
            "problems": n, "selected": sum(selected) / n, "random": sum(random_) / n, "oracle": sum(oracle) / n,
            "gain": sum(gains) / n, "gain_low": low, "gain_high": high,
            "rules": dict(Counter(r["rule"] for r in group)),
        }
    return {"sources": sources}


# --------------------------------------------------------------------------- the evaluation


@dataclass(frozen=True)
class ModelSpec:
    """A model for one role: a name or path, and a run's checkpoint step (None: the latest)."""

    model: str
    step: int | None = None

    def describe(self) -> str:
        return self.model if self.step is None else f"{self.model} (step {self.step})"


def _generate(out_path: Path, problems: Sequence["Problem"], role: str, count: int, prompts, spec: ModelSpec,
              config: SelectConfig, loaded: dict, on_message: Callable[[str], None],
              skipped: dict[str, str]) -> dict[str, dict[int, Any]]:
    """`count` samples of `role` per problem, those not yet on disk generated and appended
    (a problem whose prompt is longer than the model reads is added to `skipped`)."""

    repair_tail(out_path)
    done = read_samples(out_path)
    todo = [p for p in problems if len(done.get(p.id, {})) < count]
    if not todo:
        return done
    if loaded.get("spec") != spec:
        loaded.clear()  # one model in memory at a time
        policies, meta = setup.load_policies(config, spec.model, step=spec.step)
        loaded.update(spec=spec, policies=policies, meta=meta)
    policies = loaded["policies"]
    with ExitStack() as stack:
        engine = setup.start_engine(stack, config, policies)
        check_sampled_with(out_path.parent, role, sampler_record(policies, engine))
        loaded.setdefault("engines", {})[role] = engine.name
        for start in range(0, len(todo), config.problems_per_batch):
            chunk, samples = setup.sample_fitting(
                todo[start:start + config.problems_per_batch],
                lambda ps: loading.sample_problems(engine, policies, role, [prompts(p) for p in ps],
                                                   [p.id for p in ps], count, config.sampling, config.seed),
                skipped, role)
            for p, group in zip(chunk, samples):
                rows = [{"problem_id": p.id, "sample": i, "problem_digest": problem_digest(p), "completion": s.text,
                         "truncated": s.truncated} for i, s in enumerate(group)]
                append_rows(out_path, rows)
                done[p.id] = {r["sample"]: r for r in rows}
            on_message(f"{role}: {min(start + config.problems_per_batch, len(todo))}/{len(todo)} problems sampled")
    return done


def _problem_rows(path: Path) -> dict[str, dict[str, Any]]:
    repair_tail(path)
    return {str(row["problem_id"]): row for _, row in iter_jsonl(path)} if path.is_file() else {}


def _source_codes(codes_from: Path, code: ModelSpec | None, problems: Sequence["Problem"], data: str,
                  config: SelectConfig) -> tuple[str, dict[str, dict[int, Any]], dict[str, str]]:
    """The candidate codes of an earlier `eval select` in `codes_from`, after checking that
    they were sampled by the same code model, on the same data, with the same settings;
    returns the code model as that evaluation named it, its codes by problem, and the
    problems it skipped (which have no codes there) with why."""
    where = f"--codes-from {codes_from}"
    run_file = codes_from / RUN_FILE
    if not run_file.is_file() or "n_code" not in (source := read_json_object(run_file)):
        raise ValueError(f"{where}: not an `eval select` directory (no {RUN_FILE} of one)")
    summary = read_json_object(codes_from / SUMMARY_FILE) if (codes_from / SUMMARY_FILE).is_file() else {}
    digest = summary.get("data_digest")
    if (digest != data_digest(problems)) if digest else (source.get("data") != data):
        if source.get("data") == data:   # same name, other problems: the file changed, or another --limit
            raise ValueError(f"{where}: its candidates are for other problems of {data!r} than these "
                             "(another --limit, or the file changed)")
        raise ValueError(f"{where}: its candidates are for other data ({source.get('data')!r}, not {data!r})")
    mine = config.identity()
    diff = [f"{k} {source.get(k)!r} there vs {mine[k]!r} here" for k in CODE_SETTINGS if source.get(k) != mine[k]]
    if diff:
        raise ValueError(f"{where}: its candidates were sampled with other settings ({', '.join(diff)})")
    there = source.get("code_step")   # the checkpoint a run directory stood for there
    if code is not None and code.describe() != source.get("code_model") and not (
            code.model == source.get("code_model") and code.step is not None and code.step == there):
        raise ValueError(f"{where}: its candidates come from the code model {source.get('code_model')!r}, "
                         f"not {code.describe()!r}")
    step = None if code is None else run_step(code.model, code.step)
    if step is not None and there is not None and there != step:
        raise ValueError(f"{where}: its candidates come from step {there} of {code.model} (its latest "
                         f"checkpoint then), not step {step}; give --code-step {there}, or no --code-model")
    codes = read_samples(codes_from / CODES_FILE) if (codes_from / CODES_FILE).is_file() else {}
    skipped_there = {str(s["id"]): str(s.get("reason")) for s in summary.get("skipped", [])}
    missing = [p.id for p in problems if p.id not in skipped_there and len(codes.get(p.id, {})) < config.n_code]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ValueError(f"{where}: no {config.n_code} candidate codes for {', '.join(missing[:5])}{more}; "
                         "run that evaluation to its end first")
    return str(source.get("code_model")), codes, skipped_there


def _copy_codes(path: Path, problems: Sequence["Problem"], codes: dict[str, dict[int, Any]], n: int) -> None:
    """The source's candidates of the problems not yet in `path`, appended as they are."""
    repair_tail(path)
    done = read_samples(path)
    for p in problems:
        if len(done.get(p.id, {})) < n:
            append_rows(path, [{**codes[p.id][i], "problem_id": p.id, "sample": i} for i in range(n)])


def code_sha(text: str) -> str:
    """A candidate's fingerprint in problems.jsonl: two evaluations judged the same codes
    when these agree."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _judge_problem(ex, p: "Problem", texts: list[str], suites: list[str], ref_s: float | None,
                   config: SelectConfig) -> dict[str, Any] | None:
    """One problem's row of problems.jsonl: the pick by the generated tests and every
    candidate's golden verdict; None on a sandbox failure (left for a rerun)."""
    test_limits = Limits(timeout_s=config.test_timeout_s, call_timeout_s=config.test_call_timeout_s,
                         memory_mb=config.memory_mb)
    if p.kind == "stdin":  # input/output tests on programs (codea1.eval.stdin_tests)
        tests = stdin_generated_tests(suites)
        outcomes = run_stdin_generated_tests(ex, p, texts, tests, test_limits, setup.stdin_settings(config))
    else:
        tests = generated_tests(p, suites)
        outcomes = run_generated_tests(ex, p, texts, tests, test_limits)
    pick = choose([o.passes for o in outcomes], [o.behaviour for o in outcomes])
    timeout = max(CodeEvalConfig.min_timeout_s, CodeEvalConfig.slowdown * (ref_s or 0.0))
    golden_limits = Limits(timeout_s=timeout, call_timeout_s=max(3.0, timeout / 2), memory_mb=config.memory_mb)
    verdicts = golden_results(ex, [golden_item(p, extract_code(t)) for t in texts], golden_limits,
                              setup.stdin_settings(config))
    if any(v.status == "infra" for v in verdicts):
        return None
    return {"problem_id": p.id, "source": p.source, "problem_digest": problem_digest(p), "tests": [t.text for t in tests],
            "passed_tests": [sum(o.passes) for o in outcomes],
            "passes": [[int(x) for x in o.passes] for o in outcomes],
            "golden": [v.passed for v in verdicts], "golden_status": [v.status for v in verdicts],
            "selected": pick.index, "rule": pick.rule, "tied": pick.tied,
            "selected_correct": verdicts[pick.index].passed, "code_sha": [code_sha(t) for t in texts]}


def evaluate_selection(code: ModelSpec | None, test: ModelSpec, data: str | Path, out: str | Path,
                       config: SelectConfig = SelectConfig(), *, executor=None,
                       on_message: Callable[[str], None] = lambda _text: None,
                       codes_from: str | Path | None = None) -> dict[str, Any]:
    """Run (or resume) a selection evaluation into `out`; returns the summary also written to
    `out/summary.json`. `codes_from`: an earlier selection's directory whose candidate codes
    are judged again instead of sampling new ones (`code` may then be None: its model)."""

    out = Path(out)
    check_out_dir(out, [spec.model for spec in (code, test) if spec is not None], str(data), SELECT_WRITTEN,
                  codes_from)
    problems = load_eval_problems(data, config.limit)
    if codes_from is None and code is None:
        raise ValueError("a code model is needed (or --codes-from an earlier evaluation)")
    for spec in (code, test) if codes_from is None else (test,):
        check_model_name(spec.model)  # a missing path is refused before OUT is created
        if spec.step is not None:
            run_checkpoint(spec.model, spec.step)
    source_codes: dict[str, dict[int, Any]] = {}
    skipped_there: dict[str, str] = {}
    if codes_from is not None:
        described, source_codes, skipped_there = _source_codes(Path(codes_from), code, problems, str(data), config)
        code = code or ModelSpec(described)
    assert code is not None
    # a training run directory stands for its latest checkpoint: pinned, so that a resume
    # after the run saved a newer one samples (and says it sampled) the same weights
    pinned = {role: ModelSpec(spec.model, run_step(spec.model, spec.step))
              for role, spec in (("code", code), ("test", test)) if role == "test" or codes_from is None}
    out.mkdir(parents=True, exist_ok=True)
    check_identity(out, {"code_model": code.describe(), "test_model": test.describe(), "data": str(data),
                         **config.identity(),
                         **{f"{role}_step": spec.step for role, spec in pinned.items() if spec.step is not None},
                         "codes_from": None if codes_from is None else str(Path(codes_from).resolve())})
    skipped = {p.id: why for p in problems if (why := skip_reason(p))}
    skipped.update({p.id: f"skipped by --codes-from {codes_from}: {skipped_there[p.id]}" for p in problems
                    if p.id in skipped_there and p.id not in skipped})   # no candidates to judge
    results_path = out / PROBLEMS_FILE
    finished = _problem_rows(results_path)
    check_rows_current(out, problems, {pid: {0: row} for pid, row in finished.items()}, PROBLEMS_FILE)
    for name in (CODES_FILE, TESTS_FILE):   # samples of a problem that changed since (a question's too)
        check_rows_current(out, problems, read_samples(out / name), name)
    todo = [p for p in problems if p.id not in skipped and p.id not in finished]
    set_threads(config.threads)
    loaded: dict[str, Any] = {}
    with ExitStack() as stack:
        if todo:
            ex, ref, todo = probe_references(stack, config, executor, todo, skipped)
        if todo:
            if source_codes:
                _copy_codes(out / CODES_FILE, todo, source_codes, config.n_code)
            codes = _generate(out / CODES_FILE, todo, "code", config.n_code, code_messages,
                              pinned.get("code", code), config, loaded, on_message, skipped)
            todo = [p for p in todo if p.id not in skipped]
            suites = _generate(out / TESTS_FILE, todo, "test", config.n_test,
                               lambda p: test_messages(p, None, white_box=False, n_tests=config.tests_per_suite),
                               pinned["test"], config, loaded, on_message, skipped)
            todo = [p for p in todo if p.id not in skipped]
            meta = {"code": code.describe(), "test": test.describe(), "engines": loaded.get("engines", {}),
                    "codes_from": None if codes_from is None else str(codes_from)}
            loaded.clear()
            write_json(out / MODEL_FILE, meta)
            for count, p in enumerate(todo, 1):
                row = _judge_problem(ex, p, [codes[p.id][i]["completion"] for i in range(config.n_code)],
                                     [suites[p.id][j]["completion"] for j in range(config.n_test)],
                                     ref[p.id][0], config)
                if row is None:
                    continue  # a sandbox failure is no verdict: left for a rerun
                append_rows(results_path, [row])
                finished[p.id] = row
                on_message(f"judged {count}/{len(todo)}: {p.id} picked candidate {row['selected']} ({row['rule']}), "
                           f"{'right' if row['selected_correct'] else 'wrong'}; "
                           f"{sum(row['golden'])}/{config.n_code} candidates right")
    rows = [finished[p.id] for p in problems if p.id in finished and p.id not in skipped]
    summary = summarize(rows, config.bootstrap, config.seed)
    summary.update({
        "code_model": code.describe(), "test_model": test.describe(), "data": str(data),
        "data_digest": data_digest(problems), "codes_from": None if codes_from is None else str(codes_from),
        "config": setup.config_record(config),
        "skipped": [{"id": pid, "reason": why} for pid, why in skipped.items()],
        "pending": [p.id for p in problems if p.id not in skipped and p.id not in finished],
    })
    write_summary(out, summary)
    return summary
