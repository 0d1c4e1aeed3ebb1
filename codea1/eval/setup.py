"""What the evaluation commands (`eval code`, `eval tests`, `eval select`) set up alike.

Each command's config nests a `SamplingConfig` (`codea1.configs`, the one declaration of
the sampling settings): `with_sampling` lets the config take the sampling settings as
keywords as its command-line options name them (`CodeEvalConfig(temperature=0.2)`), checks
them naming the option, and reads them back as attributes (`config.temperature`). The
sandbox executor, the policies and the rollout engine are started by `start_executor`,
`load_policies` and `start_engine` (`start_model`: both), the same way for the three
commands (`loading`'s functions are looked up when called: tests replace them);
`open_evaluation` and `finish_evaluation` open OUT (resuming what is on disk) and write
its summary.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codea1.configs import MAX_TEMPERATURE, SamplingConfig, check_engine_name
from codea1.eval import loading
from codea1.eval.loading import load_eval_problems
from codea1.eval.store import (MODEL_FILE, STDIN_DEFAULTS, check_out_dir, check_rows_current, check_sampled_with,
                               data_digest, open_eval_dir, sampler_record, write_json, write_summary)
from codea1.judge.golden import StdinSettings
from codea1.models import check_model_name
from codea1.rollout import PromptTooLong
from codea1.sandbox import Executor

if TYPE_CHECKING:
    from codea1.data import Problem

SAMPLING_KEYS: tuple[str, ...] = tuple(SamplingConfig.model_fields)

#: `on_progress(problems done, problems, the summary so far)` of `evaluate_code` / `evaluate_tests`
OnProgress = Callable[[int, int, dict[str, Any]], None]


def check_sampling(values: dict[str, Any]) -> None:
    """The sampling settings given as options, checked before `SamplingConfig` takes them,
    each error naming its command-line option."""
    t, p = values.get("temperature"), values.get("top_p")
    if t is not None and not 0 <= t <= MAX_TEMPERATURE:
        raise ValueError(f"--temperature must lie in [0, {MAX_TEMPERATURE:g}], got {t}")
    if p is not None and not 0 < p <= 1:
        raise ValueError(f"--top-p must lie in (0, 1], got {p}")
    for name in ("max_new_tokens", "batch_size"):
        if values.get(name) is not None and values[name] < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {values[name]}")
    if any(not s for s in values.get("stop") or []):
        raise ValueError("--stop: an empty string would end every completion at its first token")


def refuse_stop(config: Any, why: str) -> None:
    """Stop strings are for the code model's answers: an evaluation whose test answers are
    read from every block refuses them, saying `why`."""
    if config.stop:
        raise ValueError(f"stop={config.stop!r}: {why}; stop strings are for the code model's "
                         "answers (eval code --stop)")


def check_stdin(config: Any) -> None:
    """--stdin-time-scale and --stdin-max-output-mb, finite and by the training judge's rule
    for its keys of the same names (`JudgeConfig`: positive, the cap at most 64 MiB)."""
    from codea1.judge.config import stdin_key_problem

    for key in STDIN_DEFAULTS:
        value, option = getattr(config, key), "--" + key.replace("_", "-")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{option} must be a positive, finite number, got {value!r}")
        problem = stdin_key_problem(key, value)
        if problem is not None:
            raise ValueError(f"{option} {value:g}: {problem}")


def stdin_identity(config: Any) -> dict[str, Any]:
    """The stdin judge's settings, as an evaluation's identity records them."""
    return {key: getattr(config, key) for key in STDIN_DEFAULTS}


def stdin_settings(config: Any) -> StdinSettings:
    """How stdin programs are judged under `config` (the training judge's `StdinSettings`)."""
    return StdinSettings.of(config)


def check_runtime(config: Any) -> None:
    """The options every evaluation has: --engine, --threads and the stdin judge's (`check_stdin`)."""
    check_engine_name(config.engine, "--engine")
    check_stdin(config)
    if config.threads is not None and config.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {config.threads}")


def with_sampling(cls: type) -> type:
    """Decorates a frozen eval-config dataclass that has a `sampling: SamplingConfig`
    field (with a `default_factory`): its constructor also takes each `SamplingConfig`
    field as a keyword (checked by `check_sampling`, then set on the command's default
    sampling), and each is readable as an attribute."""
    default = next(f.default_factory for f in fields(cls) if f.name == "sampling")
    assert default is not MISSING, f"{cls.__name__}.sampling needs a default_factory"
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args: Any, sampling: SamplingConfig | None = None, **kwargs: Any) -> None:
        given = {k: kwargs.pop(k) for k in SAMPLING_KEYS if k in kwargs}
        base = sampling if sampling is not None else default()
        if given:
            check_sampling(given)
            base = SamplingConfig.model_validate({**base.model_dump(), **given})
        init(self, *args, sampling=base, **kwargs)

    cls.__init__ = __init__
    for name in SAMPLING_KEYS:
        setattr(cls, name, property(lambda self, name=name: getattr(self.sampling, name),
                                    doc=f"`sampling.{name}`"))
    return cls


def config_record(config: Any) -> dict[str, Any]:
    """An eval config as summary.json records it: its fields, the sampling's among them."""
    record = {f.name: getattr(config, f.name) for f in fields(config) if f.name != "sampling"}
    record = {k: asdict(v) if hasattr(v, "__dataclass_fields__") else v for k, v in record.items()}
    return {**record, **config.sampling.model_dump()}


def start_executor(stack: ExitStack, config: Any, executor: Any = None, **options: Any) -> Any:
    """The caller's executor, or a new one with `config.workers` closed with `stack`."""
    return executor or stack.enter_context(Executor(workers=config.workers, **options))


def load_policies(config: Any, model: str, step: int | None = None) -> tuple[Any, dict[str, Any]]:
    """(policies, where they came from) of `model` under the config's --device/--dtype."""
    return loading.load_eval_policies(model, config.device, config.dtype, step=step)


def start_model(stack: ExitStack, config: Any, model: str, policies: Any = None,
                step: int | None = None, *, out: Path, role: str) -> tuple[Any, Any, dict[str, Any]]:
    """(policies, engine, meta) for sampling `role` into OUT: torch's --threads set, `model`
    (its checkpoint `step`, for a training run) loaded unless `policies` are given, the
    engine started (closed with `stack`) and checked against the samples on disk
    (`check_sampled_with`); `meta` says where the model came from (when loaded here) and
    which engine samples (model.json)."""
    loading.set_threads(config.threads)
    meta: dict[str, Any] = {}
    if policies is None:
        policies, meta = load_policies(config, model, step=step)
    engine = start_engine(stack, config, policies)
    check_sampled_with(out, role, sampler_record(policies, engine))
    return policies, engine, {**meta, "engine": engine.name}


def batches(problems: Sequence[Problem], size: int) -> Iterator[list[Problem]]:
    """The problems `size` at a time (generated together, then written to disk)."""
    for start in range(0, len(problems), size):
        yield list(problems[start:start + size])


def sample_fitting(chunk: Sequence[Problem], sample: Callable[[list[Problem]], list[Any]],
                   skipped: dict[str, str], role: str) -> tuple[list[Problem], list[Any]]:
    """(the problems sampled, their samples): `sample(chunk)`, or, when a prompt is longer
    than the model may read (`PromptTooLong`, raised before anything is sampled), the
    problems one at a time, each over-long one skipped with why (as training drops them)
    instead of ending the whole evaluation."""
    try:
        return list(chunk), list(sample(list(chunk)))
    except PromptTooLong as exc:
        if len(chunk) == 1:
            skipped[chunk[0].id] = (f"its {role} prompt is {exc.tokens} tokens, over the {exc.limit} the model may "
                                    "read (its context less --max-new-tokens)")
            return [], []
    kept: list[Problem] = []
    results: list[Any] = []
    for p in chunk:
        done, out = sample_fitting([p], sample, skipped, role)
        kept += done
        results += out
    return kept, results


def start_engine(stack: ExitStack, config: Any, policies: Any) -> Any:
    """The rollout engine of `config.engine` over `policies`, closed with `stack`."""
    engine = loading.eval_engine(config.engine, policies, config.threads)
    stack.callback(engine.close)
    return engine


@dataclass
class Evaluation:
    """An evaluation directory opened for a run: its problems and the samples on disk."""

    out: Path
    problems: list[Problem]
    samples_path: Path
    done: dict[str, dict[int, dict[str, Any]]]
    step: int | None = None   # the checkpoint a training run directory stands for (pinned)


def open_evaluation(out: str | Path, model: str | None, data: str | Path, config: Any,
                    policies: Any = None) -> Evaluation:
    """Check OUT and the model before anything is created, load the problems, and open
    (or resume) OUT's samples.jsonl for this config (`config.identity()`)."""
    out = Path(out)
    check_out_dir(out, model, str(data))
    problems = load_eval_problems(data, config.limit)
    step = None
    if policies is None:
        check_model_name(model or "")  # a missing path is refused before OUT is created
        step = loading.run_step(model or "")
    samples_path, done = open_eval_dir(out, {"model": model, "data": str(data), **config.identity(),
                                             **({} if step is None else {"step": step})})
    check_rows_current(out, problems, done)
    return Evaluation(out, problems, samples_path, done, step)


def finish_evaluation(ev: Evaluation, summary: dict[str, Any], model: str | None, data: str | Path, config: Any,
                      meta: dict[str, Any]) -> dict[str, Any]:
    """Write where the model came from (`meta`, when one was loaded) and the summary with
    the run's identity and settings; returns the summary."""
    if meta:
        write_json(ev.out / MODEL_FILE, meta)
    summary.update({"model": model, "data": str(data), "data_digest": data_digest(ev.problems),
                    "config": config_record(config)})
    write_summary(ev.out, summary)
    return summary
