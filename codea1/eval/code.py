"""`codea1 eval code`: pass@k and avg@n of a code model on a benchmark, EvalPlus style.

For every problem the model writes ``n`` completions; the code of each (first python
block, after the problem's assumed imports) runs in the sandbox followed by the problem's golden test program (MBPP+ /
HumanEval+ ``check(fn)``, BigCodeBench's unittest cases) and its golden asserts. A
sample passes when the program runs to its end, defines the entry point, and every
golden assert holds.

Everything a run learns is appended to ``OUT/samples.jsonl`` one problem at a time, so an
interrupted evaluation resumes where it stopped: problems whose ``n`` samples are all on
disk are not generated again. ``OUT/summary.json`` holds the unbiased pass@k per data
source, and the problems skipped (BigCodeBench tasks whose libraries are not installed,
problems without any golden test), each with its reason; a skipped problem is never
counted as a failure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codea1.configs import SamplingConfig
from codea1.eval.loading import eval_engine, load_eval_policies  # noqa: F401  (names tests replace here too)
from codea1.eval.loading import missing_libraries, sample_problems
from codea1.eval import setup  # the set-up the eval commands share
from codea1.eval.store import STDIN_DEFAULTS, append_rows, problem_digest
from codea1.passk import aggregate, default_ks
from codea1.judge import extract_code
from codea1.judge.golden import StdinSettings, golden_item, golden_results, has_golden
from codea1.judge.golden import golden_job, verdict_of  # noqa: F401  (re-exported: their old home)
from codea1.rollout import code_messages
from codea1.sandbox import Limits
from codea1.sandbox.types import GOLDEN_MEMORY_MB

if TYPE_CHECKING:
    from codea1.data import Problem
    from codea1.models import Policies


@setup.with_sampling
@dataclass(frozen=True)
class CodeEvalConfig:
    """How the code model is sampled and judged (the paper's evaluation defaults). The
    sampling settings are `sampling`'s, also taken and read as keywords (`with_sampling`):
    `temperature`, `top_p`, `max_new_tokens`, `batch_size` (sequences decoded together),
    `seed`, `stop` (strings that end a completion)."""

    n: int = 32
    sampling: SamplingConfig = field(default_factory=lambda: SamplingConfig(
        temperature=0.7, top_p=0.95, max_new_tokens=1024, batch_size=64, seed=0))
    greedy: bool = False  # one sample per problem, temperature 0
    limit: int | None = None
    problems_per_batch: int = 8  # problems generated together, then written to disk
    min_timeout_s: float = 20.0  # time a candidate gets at least (x slowdown of the reference)
    slowdown: float = 5.0
    # Memory cap of a run: golden programs hold big inputs (MBPP/255's needs > 2 GiB), as
    # in `codea1 data check`.
    memory_mb: int = GOLDEN_MEMORY_MB
    workers: int | None = None
    device: str = "auto"
    dtype: str = "auto"  # auto: bf16 on CUDA and bf16-capable CPUs, else float32
    # CPU threads for the model (None: torch's default). On a busy machine 1 thread can be
    # several times faster than 2 that wait on each other.
    threads: int | None = None
    engine: str = "auto"  # auto | hf | vllm | llamacpp (codea1.eval.loading.eval_engine)
    # stdin programs' time limit per input x this, and what one run may print (MiB): the
    # training judge's `judge.stdin_time_scale` and `judge.stdin_max_output_mb`
    stdin_time_scale: float = STDIN_DEFAULTS["stdin_time_scale"]
    stdin_max_output_mb: float = STDIN_DEFAULTS["stdin_max_output_mb"]

    def __post_init__(self) -> None:
        setup.check_runtime(self)
        if self.greedy:
            object.__setattr__(self, "n", 1)
            object.__setattr__(self, "sampling", self.sampling.model_copy(update={"temperature": 0.0}))
        if self.n < 1:
            raise ValueError(f"--n must be at least 1, got {self.n}")
        if self.temperature == 0 and self.n > 1:
            raise ValueError(f"--temperature {self.temperature:g} is greedy decoding: the --n {self.n} samples "
                             "would all be the same; use --greedy (one sample a problem) or a temperature above 0")
        if self.memory_mb < 64:
            raise ValueError(f"--memory-mb must be at least 64, got {self.memory_mb}")

    def identity(self) -> dict[str, Any]:
        """What must match for samples on disk to belong to this evaluation."""
        return {"n": self.n, "temperature": self.temperature, "top_p": self.top_p,
                "max_new_tokens": self.max_new_tokens, **({"stop": list(self.stop)} if self.stop else {}),
                "memory_mb": self.memory_mb, "min_timeout_s": self.min_timeout_s, "slowdown": self.slowdown,
                **setup.stdin_identity(self)}


def skip_reason(problem: Problem) -> str | None:
    missing = missing_libraries(problem)
    if missing:
        return f"libraries not installed: {', '.join(missing)}"
    if not has_golden(problem):
        return "no golden tests"
    return None


def reference_times(executor, problems: Sequence[Problem], limits,
                    settings: StdinSettings | None = None) -> dict[str, tuple[float | None, str | None]]:
    """Per problem: the reference's time through its golden tests, or why it failed them
    (`settings`: how a stdin program is judged)."""
    # (a problem without a reference, as LiveCodeBench ships them, is timed by the minimum)
    out: dict[str, tuple[float | None, str | None]] = {p.id: (0.0, None) for p in problems if not p.reference.strip()}
    timed = [p for p in problems if p.reference.strip()]
    verdicts = golden_results(executor, [golden_item(p, p.reference) for p in timed], limits, settings)
    for p, v in zip(timed, verdicts):
        out[p.id] = (v.wall_s, None) if v.passed else (None, f"the reference fails its golden tests ({v.status}: {v.detail})")
    return out


def probe_references(stack, config, executor, todo: Sequence[Problem],
                     skipped: dict[str, str]) -> tuple[Any, dict[str, tuple[float | None, str | None]], list[Problem]]:
    """Start the sandbox (the caller's `executor`, or one closed with `stack`) and time each
    problem's reference through its golden tests (`reference_times`, generous limits): a
    problem whose reference fails them is skipped with why. Returns (the executor, the
    times, the problems still to do)."""
    probe = Limits(timeout_s=120.0, call_timeout_s=60.0, memory_mb=config.memory_mb)
    ex = setup.start_executor(stack, config, executor, limits=probe)
    ref = reference_times(ex, todo, probe, setup.stdin_settings(config))
    skipped.update({p.id: ref[p.id][1] for p in todo if ref[p.id][1] is not None})
    return ex, ref, [p for p in todo if p.id not in skipped]


# --- the evaluation -----------------------------------------------------------------------


def summarize(problems: Sequence[Problem], done: dict[str, dict[int, dict[str, Any]]], n: int,
              skipped: dict[str, str]) -> dict[str, Any]:
    """pass@k and avg@n per data source and over all problems that were evaluated."""
    per_source: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p in problems:
        rows = done.get(p.id, {})
        if p.id in skipped or len(rows) < n:
            continue
        c = sum(1 for i in range(n) if rows[i]["passed"])
        per_source[p.source or "unknown"].append((n, c))
        per_source["all"].append((n, c))
    ks = default_ks(n)
    sources = {}
    for source, counts in sorted(per_source.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        sources[source] = {"problems": len(counts), **aggregate(counts, ks)}
    pending = [p.id for p in problems if p.id not in skipped and len(done.get(p.id, {})) < n]
    return {
        "n": n,
        "ks": ks,
        "sources": sources,
        "skipped": [{"id": pid, "reason": why} for pid, why in skipped.items()],
        "pending": pending,
    }


def _golden_rows(ex, chunk, samples, ref, config: CodeEvalConfig) -> dict[str, list[dict[str, Any]]]:
    """Each sample of the chunk's problems run on its golden tests (time limit scaled from
    the reference solution's own time): samples.jsonl's rows, per problem."""
    jobs, owners, per_job = [], [], []
    for p, group in zip(chunk, samples):
        base_s = ref[p.id][0] or 0.0
        timeout = max(config.min_timeout_s, config.slowdown * base_s)
        limits = Limits(timeout_s=timeout, call_timeout_s=max(3.0, timeout / 2), memory_mb=config.memory_mb)
        for i, s in enumerate(group):
            jobs.append(golden_item(p, extract_code(s.text)))
            owners.append((p, i, s))
            per_job.append(limits)
    verdicts = golden_results(ex, jobs, per_job, setup.stdin_settings(config))
    rows_by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (p, i, s), v in zip(owners, verdicts):
        rows_by_problem[p.id].append({
            "problem_id": p.id, "source": p.source, "sample": i, "problem_digest": problem_digest(p),
            "passed": v.passed, "status": v.status, "detail": v.detail,
            "truncated": s.truncated, "completion": s.text,
        })
    return rows_by_problem


def evaluate_code(model: str | None, data: str | Path, out: str | Path, config: CodeEvalConfig = CodeEvalConfig(),
                  *, policies: Policies | None = None, executor=None,
                  on_progress: setup.OnProgress | None = None) -> dict[str, Any]:
    """Run (or resume) an evaluation into ``out``; returns the summary also written to
    ``out/summary.json``. ``policies``/``executor`` may be passed in to reuse them."""
    ev = setup.open_evaluation(out, model, data, config, policies)
    problems, samples_path, done = ev.problems, ev.samples_path, ev.done
    n = config.n

    skipped: dict[str, str] = {}
    for p in problems:
        reason = skip_reason(p)
        if reason:
            skipped[p.id] = reason
    todo = [p for p in problems if p.id not in skipped and len(done.get(p.id, {})) < n]

    meta: dict[str, Any] = {}
    with ExitStack() as stack:
        if todo:
            ex, ref, todo = probe_references(stack, config, executor, todo, skipped)
            if todo:
                policies, engine, meta = setup.start_model(stack, config, model or "", policies, ev.step,
                                                            out=ev.out, role="code")
            finished = len(problems) - len(todo)
            for batch in setup.batches(todo, config.problems_per_batch):
                chunk, samples = setup.sample_fitting(
                    batch, lambda ps: sample_problems(engine, policies, "code", [code_messages(p) for p in ps],
                                                      [p.id for p in ps], n, config.sampling, config.seed),
                    skipped, "code")
                rows_by_problem = _golden_rows(ex, chunk, samples, ref, config)
                for p in chunk:
                    rows = rows_by_problem[p.id]
                    if any(r["status"] == "infra" for r in rows):
                        continue  # a sandbox failure is no verdict: left pending for a rerun
                    append_rows(samples_path, rows)
                    done[p.id] = {r["sample"]: r for r in rows}
                finished += len(batch)
                if on_progress is not None:
                    on_progress(finished, len(problems), summarize(problems, done, n, skipped))

    return setup.finish_evaluation(ev, summarize(problems, done, n, skipped), model, data, config, meta)
