"""`codea1 eval tests`: how good are a test model's tests, scored as UnLeakedTestBench does.

Per function the model sees the description and the code and writes ``k`` tests (one
completion; the first ``k`` count, missing ones count as failing). A test is an assert on
the function, bare or inside a pytest test function, UnLeakedTestBench's own answer format
(``codea1.eval.answer_tests`` says how an answer is read). The reported figures follow UnLeakedTestBench's harness (its ``Ray/main.py`` and
``print_results.py``, Cosmic-Ray 8.7 under pytest):

- ``pass@k``: passing tests over all ``N * k`` test slots (every function counts);
- ``mut@k``: per function ``100 * (1 - surviving / mutants)``, averaged over the
  functions whose k tests all pass on the reference (Cosmic-Ray's baseline run
  succeeds); ``mut@k_tasks`` is how many those are. A function with no mutation point
  scores 100 there, as Cosmic-Ray reports 0 survivors of 0 jobs. Mutants are Cosmic-Ray's:
  text edits, syntax-error mutants killed, no deduplication (``codea1.eval.mutation``);
- ``Mul = pass@k * mut@k / 100``, over the averages (the Code-A1 paper's product);
- ``LineCov@k``: statements of the header and function covered by the k tests, summed
  over all functions, over all their statements (``codea1.eval.line_coverage``).

codea1's earlier figures stay beside them: ``mut@k_all`` scores each function by the
tests of its k that pass on the reference and averages over every function with a
mutant (0 where none passes), ``Mul_all = pass@k * mut@k_all / 100``.

UnLeakedTestBench runs every program with its import header (``ULT_HEADER``) before
the function; it is prepended for problems loaded from its JSON (``header="auto"``).

Results per function are appended to ``OUT/samples.jsonl`` (resumable like ``eval code``)
and the averages written to ``OUT/summary.json``.
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codea1.configs import SamplingConfig
from codea1.eval.answer_tests import select_tests
from codea1.eval.line_coverage import line_coverage
from codea1.eval.loading import eval_engine, load_eval_policies  # noqa: F401  (names tests replace here too)
from codea1.eval.loading import sample_problems
from codea1.eval.mutation import FAMILIES, STYLES, generate_mutants
from codea1.eval.mutation_testing import MutationConfig, analyse
from codea1.eval.rounds import PROTOCOLS, rounds_tests, sample_rounds
from codea1.eval import setup  # the set-up the eval commands share
from codea1.eval.stdin_tests import score_stdin_tests, select_stdin_tests
from codea1.eval.store import STDIN_DEFAULTS, append_rows, problem_digest
from codea1.rollout import test_messages

if TYPE_CHECKING:
    from codea1.data import Problem
    from codea1.models import Policies

__all__ = ["TestEvalConfig", "FunctionScore", "ULT_HEADER", "select_tests", "score_tests", "evaluate_tests",
           "summarize_rows"]

#: The imports UnLeakedTestBench writes before every function (and test file) it runs.
ULT_HEADER = """import os
import re
import math
import numpy
import pandas
import pytest
import random
import string
import warnings
import datetime
import traceback
import numpy as np
import pandas as pd
from typing import List, Dict, Any, Optional, Union, Tuple, Set, FrozenSet, Sequence, Iterable, Generator, Callable
"""
ULT_SOURCE = "unleakedtestbench"  # Problem.source of rows read from UnLeakedTestBench JSON
HEADERS = ("auto", "ult", "none")
#: How rows are scored, stored in OUT/eval_config.json: a resumed evaluation refuses an
#: OUT whose rows were scored another way, and `eval compare` two such evaluations, rather
#: than mix them. 2: test functions are read (`codea1.eval.answer_tests`), an assert that
#: does not parse keeps its slot, LineCov counts statements as coverage.py does (an OUT
#: written before carries no number).
SCORING = 2


@setup.with_sampling
@dataclass(frozen=True)
class TestEvalConfig:
    """Sampling of the test model and the mutation budget (greedy, k = 5 by default). The
    sampling settings are `sampling`'s, also taken and read as keywords (`with_sampling`)."""

    __test__ = False  # not a pytest test class, despite its name

    k: int = 5
    sampling: SamplingConfig = field(default_factory=lambda: SamplingConfig(
        temperature=0.0, top_p=1.0, max_new_tokens=1024, batch_size=64, seed=0))
    limit: int | None = None
    white_box: bool = True  # the model sees the function's code, as in UnLeakedTestBench
    problems_per_batch: int = 8
    families: tuple[str, ...] = FAMILIES
    mutation: MutationConfig = field(default_factory=MutationConfig)
    workers: int | None = None
    device: str = "auto"
    dtype: str = "auto"  # auto: bf16 on CUDA and bf16-capable CPUs, else float32
    # CPU threads for the model (None: torch's default). On a busy machine 1 thread can be
    # several times faster than 2 that wait on each other.
    threads: int | None = None
    engine: str = "auto"  # auto | hf | vllm | llamacpp (codea1.eval.loading.eval_engine)
    # Cosmic-Ray's mutants (text edits, every mutation counted) unless told otherwise:
    # "tree" + dedupe are codea1's earlier engine (codea1.eval.mutation explains both)
    mutation_style: str = "text"
    dedupe_mutants: bool = False
    header: str = "auto"  # auto: ULT_HEADER for UnLeakedTestBench problems; ult: always; none
    # answer: one completion holding the k tests (codea1's test prompt); rounds: k chat
    # rounds of one pytest test method each, as the Code-A1 authors' harness asks
    # (codea1.eval.rounds; function problems only)
    protocol: str = "answer"
    # stdin programs' time limit per input x this, and what one run may print (MiB): the
    # training judge's `judge.stdin_time_scale` and `judge.stdin_max_output_mb`
    stdin_time_scale: float = STDIN_DEFAULTS["stdin_time_scale"]
    stdin_max_output_mb: float = STDIN_DEFAULTS["stdin_max_output_mb"]

    def __post_init__(self) -> None:
        setup.check_runtime(self)
        setup.refuse_stop(self, "eval tests reads a completion's tests from every block, so a stop would "
                                "cut them")
        if self.mutation_style not in STYLES:
            raise ValueError(f"--mutation-style must be one of {list(STYLES)}, got {self.mutation_style!r}")
        if self.header not in HEADERS:
            raise ValueError(f"--header must be one of {list(HEADERS)}, got {self.header!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"--protocol must be one of {list(PROTOCOLS)}, got {self.protocol!r}")
        if self.k < 1:
            raise ValueError(f"--k must be at least 1, got {self.k}")

    def identity(self) -> dict[str, Any]:
        return {"k": self.k, "temperature": self.temperature, "top_p": self.top_p,
                "max_new_tokens": self.max_new_tokens, "white_box": self.white_box,
                "families": list(self.families), "mutation_style": self.mutation_style,
                "dedupe_mutants": self.dedupe_mutants, "header": self.header, "scoring": SCORING,
                "protocol": self.protocol, "mutation": asdict(self.mutation), **setup.stdin_identity(self)}

    def header_for(self, problem: Problem) -> str:
        if self.header == "ult" or (self.header == "auto" and problem.source == ULT_SOURCE):
            return ULT_HEADER
        return ""


@dataclass
class FunctionScore:
    """The scores of one function's k tests."""

    problem_id: str
    tests: list[str]
    passes: list[bool]  # per test among the k (False for missing ones)
    mutants: int
    killed: int
    equivalent_looking: int
    survivors: list[str]  # descriptions of the mutants no scored test killed
    k: int
    statements: int = 0  # of the header and the function (coverage.py's num_statements)
    covered_statements: int = 0  # of those, executed by the module's import or the k tests

    @property
    def pass_at_k(self) -> float:
        return 100.0 * sum(self.passes) / self.k

    @property
    def baseline_passes(self) -> bool:
        """All k tests exist and pass on the reference: Cosmic-Ray's baseline run succeeds,
        so UnLeakedTestBench scores this function's mutation."""
        return len(self.passes) == self.k and all(self.passes)

    @property
    def mut_at_k(self) -> float | None:
        """UnLeakedTestBench's score of this function: killed share of the mutants (100
        with none), None when its tests do not pass the baseline."""
        if not self.baseline_passes:
            return None
        return 100.0 * self.killed / self.mutants if self.mutants else 100.0

    @property
    def mut_at_k_all(self) -> float | None:
        """codea1's earlier score: mutants killed by the tests that pass (0 when none
        does), None for a function without mutants."""
        return 100.0 * self.killed / self.mutants if self.mutants else None


def score_tests(executor, problem: Problem, tests: Sequence[str], k: int, *,
                families: Sequence[str] = FAMILIES, config: MutationConfig = MutationConfig(),
                style: str = "text", dedupe: bool = False, header: str = "") -> FunctionScore:
    """pass@k and mut@k of ``tests`` (at most k of them) on ``problem``'s reference."""
    tests = list(tests)[:k]
    mutants = generate_mutants(problem.reference, families, style=style, dedupe=dedupe)
    report = analyse(executor, problem.reference, tests, mutants=mutants, header=header,
                     golden_tests=problem.tests, golden_program=problem.test_program, config=config)
    passes = report.test_passes_reference + [False] * (k - len(tests))
    prefix = header.rstrip("\n") + "\n\n" if header.strip() else ""
    cover = line_coverage(executor, prefix + problem.reference, tests)
    return FunctionScore(
        problem_id=problem.id,
        tests=tests,
        passes=passes,
        mutants=report.total,
        killed=report.killed,
        equivalent_looking=report.equivalent_looking,
        survivors=[o.mutant.description for o in report.outcomes if o.status != "killed"],
        k=k,
        statements=cover.statements,
        covered_statements=cover.covered,
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize_rows(rows: Sequence[dict[str, Any]], k: int) -> dict[str, Any]:
    """The figures of one group of functions from their sample rows (see the module
    docstring for the definitions)."""
    passk = sum(r["pass_at_k"] for r in rows) / len(rows)
    ult = [r["mut_at_k"] for r in rows if r["mut_at_k"] is not None]
    scored = [r["mut_at_k_all"] for r in rows if r["mut_at_k_all"] is not None]
    mutk, mutk_all = _mean(ult), _mean(scored) or 0.0
    statements = sum(r["statements"] for r in rows)
    return {
        "functions": len(rows),
        f"pass@{k}": passk,
        f"mut@{k}": mutk,
        f"mut@{k}_tasks": len(ult),
        "Mul": None if mutk is None else passk * mutk / 100.0,
        f"mut@{k}_all": mutk_all,
        "Mul_all": passk * mutk_all / 100.0,
        # (None where no statement was counted: programs' coverage is not measured)
        f"LineCov@{k}": 100.0 * sum(r["covered_statements"] for r in rows) / statements if statements else None,
        "mutants": sum(r["mutants"] for r in rows),
        "killed": sum(r["killed"] for r in rows),
        "equivalent_looking": sum(r["equivalent_looking"] for r in rows),
    }


def scored_as(problems: Sequence[Problem]) -> str:
    """What the tests of `problems` test, as the figures name them: "functions", "programs"
    (stdin problems) or, a set of both, "problems" (summary.json's `scored`; each row's
    count stays under the key `functions`, which `eval compare` and older files read)."""
    kinds = {p.kind == "stdin" for p in problems}
    return "problems" if len(kinds) > 1 else "programs" if kinds == {True} else "functions"


def summarize(problems: Sequence[Problem], done: dict[str, dict[int, dict[str, Any]]], k: int,
              skipped: dict[str, str]) -> dict[str, Any]:
    per_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in problems:
        row = done.get(p.id, {}).get(0)
        if row is None or p.id in skipped:
            continue
        per_source[p.source or "unknown"].append(row)
        per_source["all"].append(row)
    sources = {source: summarize_rows(rows, k)
               for source, rows in sorted(per_source.items(), key=lambda kv: (kv[0] == "all", kv[0]))}
    return {
        "k": k,
        "scored": scored_as([p for p in problems if p.id not in skipped] or problems),
        "sources": sources,
        "skipped": [{"id": pid, "reason": why} for pid, why in skipped.items()],
        "pending": [p.id for p in problems if p.id not in skipped and 0 not in done.get(p.id, {})],
    }


def _check_header_modules() -> None:
    """UnLeakedTestBench's header imports numpy, pandas and pytest: refuse to start (rather
    than fail every test) when one is missing here, since the sandbox runs this Python."""

    missing = [m for m in ("numpy", "pandas", "pytest") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"UnLeakedTestBench's import header needs {', '.join(missing)} installed "
                         "(pip install numpy pandas pytest), or pass --header none")


def _answers(engine, policies, chunk: Sequence[Problem], config: TestEvalConfig) -> list[list[str]]:
    """The test model's answers per problem: one holding the k tests, or k rounds' (`rounds`)."""
    if config.protocol == "rounds":
        return sample_rounds(engine, policies, chunk, config.k, config.sampling, config.seed, config.white_box)
    prompts = [test_messages(p, p.reference if config.white_box else None, white_box=config.white_box,
                             n_tests=config.k) for p in chunk]
    samples = sample_problems(engine, policies, "test", prompts, [p.id for p in chunk], 1, config.sampling,
                              config.seed)
    return [[group[0].text] for group in samples]


def evaluate_tests(model: str | None, data: str | Path, out: str | Path, config: TestEvalConfig = TestEvalConfig(),
                   *, policies: Policies | None = None, executor=None,
                   on_progress: setup.OnProgress | None = None) -> dict[str, Any]:
    """Run (or resume) a test-generation evaluation into ``out``; returns the summary."""

    ev = setup.open_evaluation(out, model, data, config, policies)
    problems, samples_path, done = ev.problems, ev.samples_path, ev.done
    skipped: dict[str, str] = {}
    for p in problems:
        try:
            generate_mutants(p.reference, config.families, style=config.mutation_style)
        except ValueError as exc:
            skipped[p.id] = str(exc)
        if config.protocol == "rounds" and p.kind == "stdin":
            skipped[p.id] = "--protocol rounds asks for test methods of a function; a stdin problem needs --protocol answer"
    todo = [p for p in problems if p.id not in skipped and 0 not in done.get(p.id, {})]
    with_header = any(config.header_for(p) for p in todo)
    if with_header:
        _check_header_modules()

    meta: dict[str, Any] = {}
    with ExitStack() as stack:
        if todo:
            # the header's heavy imports are loaded once per sandbox worker, not per mutant
            preload = ("numpy", "pandas") if with_header else ("numpy",)
            ex = setup.start_executor(stack, config, executor, preload=preload)
            policies, engine, meta = setup.start_model(stack, config, model or "", policies, ev.step,
                                                        out=ev.out, role="test")
            finished = len(problems) - len(todo)
            for batch in setup.batches(todo, config.problems_per_batch):
                chunk, answers = setup.sample_fitting(batch, lambda ps: _answers(engine, policies, ps, config),
                                                      skipped, "test")
                for p, said in zip(chunk, answers):
                    if p.kind == "stdin":  # input/output tests on a program (codea1.eval.stdin_tests)
                        tests = select_stdin_tests(said[0], config.k)
                        score = FunctionScore(**score_stdin_tests(
                            ex, p, tests, config.k, families=config.families, config=config.mutation,
                            style=config.mutation_style, dedupe=config.dedupe_mutants,
                            settings=setup.stdin_settings(config)))
                    else:
                        tests = (rounds_tests(said, p.entry_point) if config.protocol == "rounds"
                                 else select_tests(said[0], p.entry_point, config.k))
                        score = score_tests(ex, p, tests, config.k, families=config.families, config=config.mutation,
                                            style=config.mutation_style, dedupe=config.dedupe_mutants,
                                            header=config.header_for(p))
                    answer = {"answers": said} if config.protocol == "rounds" else {"completion": said[0]}
                    row = {"problem_id": p.id, "source": p.source, "sample": 0, "problem_digest": problem_digest(p),
                           **answer,
                           **asdict(score), "pass_at_k": score.pass_at_k, "baseline_passes": score.baseline_passes,
                           "mut_at_k": score.mut_at_k, "mut_at_k_all": score.mut_at_k_all}
                    append_rows(samples_path, [row])
                    done[p.id] = {0: row}
                finished += len(batch)
                if on_progress is not None:
                    on_progress(finished, len(problems), summarize(problems, done, config.k, skipped))

    return setup.finish_evaluation(ev, summarize(problems, done, config.k, skipped), model, data, config, meta)
