"""Held-out validation during training, as the reference validates (its `_validate`).

Per data source, avg@n and pass@k of the code model on the golden tests
(`val/<source>/avg@32`, ...); with `validation.test_model`, the test model's validity
and kills of wrong codes too. Run before the first step, every `validation.every` steps
and after the last (`validation.at_start`, `validation.at_end`).
"""

from __future__ import annotations

import math
import time
from typing import Any

from codea1.passk import aggregate, default_ks
from codea1.judge import ProblemRollout
from codea1.judge.golden import StdinSettings, golden_items, golden_results, has_golden
from codea1.rollout import GenerationStats, code_messages, sample_seeds
from codea1.sandbox import Limits
from codea1.train.metrics import mean


def validate(trainer) -> dict[str, Any]:
    """Held-out figures, as the reference's validation: per data source, avg@n and pass@k
    of the code model on the golden tests (`val/<source>/avg@32`, ...); with
    `validation.test_model`, the test model's validity and kills of wrong codes too.

    Every rank calls it: each samples its strided share of the held-out problems with the
    run's rollout engine (vLLM on a GPU, as the reference validates with its rollout
    engine), each problem's samples seeded from (run seed, step, problem), so N ranks
    validate exactly as one does; rank 0 gathers the counts and returns the metrics (the
    other ranks return {}). Problems are generated and judged a chunk at a time (as many
    as one generation batch holds), so 542 problems x 32 samples never sit in memory.
    """
    v = trainer.cfg.validation
    problems = [p for p in trainer.heldout if has_golden(p)][: v.problems]
    if not problems:
        return {}
    t = time.perf_counter()
    limits = Limits(timeout_s=v.timeout_s, call_timeout_s=v.timeout_s, memory_mb=v.memory_mb)
    per_call = max(1, v.sampling.batch_size // v.n_code)
    rows: list[tuple[int, str, list[float], list[float]]] = []   # (index, source, correct, golden rate)
    kept: list[tuple[int, Any, list[Any], list[Any]]] = []   # (index, problem, codes, golden results)
    for idx in _validation_calls(trainer.ranks, len(problems), per_call):
        part = [problems[i] for i in idx]
        own = not trainer.cfg.rollout.project_code_prompt
        code_out = _validation_generate(trainer, "code", [code_messages(p, own) for p in part], v.n_code,
                                        [("validation", i) for i in idx])
        items = golden_items(part, [[trainer.cfg.judge.code_of(s.text) for s in g] for g in code_out])
        gold = golden_results(trainer.executor, items, limits, StdinSettings.of(trainer.cfg.judge))
        for k, (i, p) in enumerate(zip(idx, part)):
            results = gold[k * v.n_code:(k + 1) * v.n_code]
            rows.append((i, p.source or "unknown", [float(r.correct) for r in results],
                         [r.pass_rate for r in results]))
            if i < v.test_problems:
                kept.append((i, p, code_out[k], results))
    tests = None
    if v.test_model and trainer.cfg.mode != "golden" and trainer.judge is not None:
        tests = _validate_tests(trainer, kept)
    shares = trainer.ranks.gather((rows, tests))
    if shares is None:
        return {}
    rows = sorted((r for share, _ in shares for r in share), key=lambda r: r[0])
    counts: dict[str, list[tuple[int, int]]] = {}
    for _i, source, correct, _rate in rows:
        counts.setdefault(source, []).append((len(correct), int(sum(correct))))
    metrics: dict[str, Any] = {
        "val/problems": len(problems),
        "val/code_pass_rate": mean([c for r in rows for c in r[2]]),
        "val/code_golden_rate": mean([g for r in rows for g in r[3]]),
    }
    for source, pairs in sorted(counts.items()):
        metrics[f"val/{source}/problems"] = len(pairs)
        for key, value in aggregate(pairs, default_ks(v.n_code)).items():
            metrics[f"val/{source}/{key}"] = value / 100.0  # a rate, as the other val/ figures
    if tests is not None:
        metrics.update(_test_validation_metrics([x for _, share in shares for x in share]))
    metrics["time/validation_s"] = time.perf_counter() - t
    return metrics

def _validation_calls(ranks, n: int, per_call: int) -> list[list[int]]:
    """This rank's share of `n` held-out problems, cut into as many engine calls as the
    largest share needs: every rank samples the same number of times (a tensor-parallel
    vLLM group samples together), a call may be empty."""
    mine = ranks.slots(n)
    calls = max(1, math.ceil(math.ceil(n / ranks.world) / per_call))
    return [mine[c * len(mine) // calls:(c + 1) * len(mine) // calls] for c in range(calls)]

def _validation_generate(trainer, role: str, prompts, n: int, places) -> list[list[Any]]:
    """Validation samples through training's rollout door (`Trainer.generate`), each
    prompt's stream seeded from its place (its own streams: validation never shifts the
    training ones); a stop is answered by the validation's own abandonable block. The
    `stop` strings end the code model's answers only: tests are read from every block."""
    seeds = sample_seeds(trainer.cfg.seed, trainer.step, f"val/{role}", places)
    sampling = trainer.cfg.validation.sampling
    if role != "code" and sampling.stop:
        sampling = sampling.model_copy(update={"stop": []})
    return trainer.generate(role, prompts, n, sampling, GenerationStats(), seeds,
                            label=f"{role} model: ", stoppable=False)

def _validate_tests(trainer, kept) -> list[tuple[int, list[tuple[float, float]], int, int]]:
    """The test model on this rank's held-out codes: per problem (index, each suite's
    (valid ratio, pass on the reference), kills of wrong codes, wrong-code suites)."""
    v = trainer.cfg.validation
    shortened = GenerationStats()
    prompts = [trainer.test_prompt(p, trainer.cfg.judge.code_of(s.text), v.sampling, shortened)
               for _i, p, samples, _ in kept for s in samples]
    places = [(i, c) for i, _p, samples, _ in kept for c in range(len(samples))]
    test_out = _validation_generate(trainer, "test", prompts, v.n_test, places)
    rollouts, k = [], 0
    for _i, p, samples, _ in kept:
        groups = test_out[k:k + len(samples)]
        k += len(samples)
        rollouts.append(ProblemRollout(p, codes=[s.text for s in samples],
                                       tests=[[s.text for s in g] for g in groups], mistakes=[]))
    judgements = trainer.judge.judge_step(rollouts) if rollouts else []
    out = []
    for j, (i, _p, _samples, gold) in zip(judgements, kept):
        suites, kills, wrong = [], 0, 0
        for ci, row in enumerate(j.suites):
            suites.extend((s.valid_ratio, s.valid / (s.valid + s.invalid) if (s.valid + s.invalid) else 0.0)
                          for s in row)
            if j.code_valid[ci] and not gold[ci].correct:
                wrong += len(row)
                kills += sum(1 for s in row if s.gen_fail_rate > 0)
        out.append((i, suites, kills, wrong))
    return out


def _test_validation_metrics(per_problem) -> dict[str, Any]:
    """`val/test_*` from every rank's per-problem test-model figures, in problem order."""
    per_problem = sorted(per_problem, key=lambda x: x[0])
    suites = [s for _i, row, _k, _w in per_problem for s in row]
    kills, wrong = sum(x[2] for x in per_problem), sum(x[3] for x in per_problem)
    return {
        "val/test_valid_ratio": mean([s[0] for s in suites]),
        "val/test_pass_on_reference": mean([s[1] for s in suites]),
        "val/test_kill_rate": kills / wrong if wrong else float("nan"),
        "val/test_wrong_candidates": wrong,
    }
