"""What a user watches during a run, and what stays in the run directory afterwards.

- `MetricsLog`: one JSON line per step in `RUN_DIR/metrics.jsonl`, a few sampled codes
  and tests per step in `RUN_DIR/samples.jsonl`, TensorBoard scalars under `RUN_DIR/tb`,
  and the same rows to Weights & Biases where `logging.wandb` names a project. Its byte offsets go into checkpoints so that a resume cuts both files
  back to the checkpoint and the continued run writes exactly what an uninterrupted
  one would have.
- `Progress`: the live display (step, phase, ETA, rewards, pass and attack rates,
  tokens/s) drawn with rich on a terminal, one plain line per step otherwise.
- `step_metrics`, `a1_judge_metrics`, `golden_judge_metrics`, `step_samples`: a step's
  row of metrics.jsonl and its records of samples.jsonl, from the step's records
  (`codea1.train.records`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from codea1.output_files import iter_jsonl, naming_full_disk

if TYPE_CHECKING:
    from codea1.grpo import StepBatches
    from codea1.train.records import StepRewards, StepRollout

METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"
TB_DIR = "tb"
#: the order of a samples.jsonl record's fields (after "step"; others follow, sorted). Fixed
#: here, not taken from the dict: a step's samples that wait in a checkpoint for their
#: validation (state.json's "pending", written with sorted keys) come back in another order
SAMPLE_FIELDS = ("role", "problem_id", "candidate", "reward", "truncated", "trained", "text")


def _jsonable(value: Any) -> Any:
    """Floats stay exact (repr round-trips); NaN/inf become null so every line is JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _jsonable(value.item())
    return value


def _sample_record(step: int, sample: Mapping[str, Any]) -> dict[str, Any]:
    """One samples.jsonl record, its fields in `SAMPLE_FIELDS` order whatever the dict's."""
    fields = [k for k in SAMPLE_FIELDS if k in sample] + sorted(k for k in sample if k not in SAMPLE_FIELDS)
    return {"step": step, **_jsonable({k: sample[k] for k in fields})}


class MetricsLog:
    """Append-only per-step metrics and samples, plus TensorBoard event files."""

    def __init__(self, run_dir: str | os.PathLike[str], *, tensorboard: bool = True,
                 offsets: Mapping[str, int] | None = None, purge_step: int | None = None,
                 wandb: Any = None) -> None:
        """`wandb`: a `codea1.train.wandb_logger.WandbLogger` fed the same rows (or None)."""
        self.run_dir = Path(run_dir)
        self._wandb = wandb
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / METRICS_FILE
        self.samples_path = self.run_dir / SAMPLES_FILE
        if offsets is not None:  # resuming: drop what was written after the checkpoint
            for path, key in ((self.metrics_path, "metrics"), (self.samples_path, "samples")):
                _truncate(path, int(offsets.get(key, 0)))
        self._metrics = open(self.metrics_path, "a", encoding="utf-8")
        self._samples = open(self.samples_path, "a", encoding="utf-8")
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step drops events at or after it that a crashed run left behind
            self._tb = SummaryWriter(log_dir=str(self.run_dir / TB_DIR), purge_step=purge_step)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """One line `{"step": N, ...}`; numeric values also go to TensorBoard."""
        row = {"step": step, **_jsonable(dict(metrics))}
        with naming_full_disk(self.metrics_path):  # (a resume cuts a half-written line back)
            self._metrics.write(json.dumps(row, sort_keys=True) + "\n")
            self._metrics.flush()
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(step, metrics)

    def log_samples(self, step: int, samples: Iterable[Mapping[str, Any]]) -> None:
        samples = list(samples)
        with naming_full_disk(self.samples_path):
            for sample in samples:
                self._samples.write(json.dumps(_sample_record(step, sample)) + "\n")
            self._samples.flush()
        if self._wandb is not None:
            self._wandb.log_samples(step, samples)

    def offsets(self) -> dict[str, int]:
        """Byte sizes of the two files now (for a checkpoint)."""
        self._metrics.flush()
        self._samples.flush()
        return {"metrics": self._metrics.tell(), "samples": self._samples.tell()}

    def sync(self) -> None:
        for f in (self._metrics, self._samples):
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        for f in (self._metrics, self._samples):
            if not f.closed:
                with contextlib.suppress(OSError):  # (a full disk: the error that stopped the run is told)
                    f.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.close()
            self._wandb = None


def _truncate(path: Path, size: int) -> None:
    if not path.exists():
        if size:
            raise FileNotFoundError(f"{path}: missing, but the checkpoint recorded {size} bytes of it")
        return
    actual = path.stat().st_size
    if actual < size:
        raise ValueError(f"{path}: {actual} bytes, shorter than the {size} the checkpoint recorded")
    with open(path, "r+b") as f:
        f.truncate(size)


def read_metrics(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All rows of `RUN_DIR/metrics.jsonl`: a torn last line (a run killed mid-write, or a live
    run's file read while it is appended to) skipped, any other bad line named (`iter_jsonl`)."""
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return []
    return [row for _, row in iter_jsonl(path)]


# --------------------------------------------------------------------------- progress


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "--:--"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


# Headline figures, in display order: (metrics key, label, format)
HEADLINE = (
    ("code/reward_mean", "code reward", "{:.3f}"),
    ("test/reward_mean", "test reward", "{:.3f}"),
    ("judge/code_valid_rate", "code valid", "{:.0%}"),
    ("judge/pass_rate", "pass rate", "{:.0%}"),
    ("judge/attack_rate", "attack rate", "{:.0%}"),
    ("judge/valid_ratio", "test valid", "{:.0%}"),
    ("mistakes/size", "mistake book", "{:.0f}"),
    ("rollout/tokens_per_s", "tok/s", "{:.1f}"),
    ("time/step_s", "s/step", "{:.0f}"),
)


class Progress:
    """Step, phase, elapsed time, ETA and headline metrics; rich Live on a terminal, plain
    lines otherwise.

    On a terminal the picture is rebuilt at every refresh (twice a second), so the phase's
    elapsed time, the ETA and the phase's own progress (`watch`: tokens sampled so far,
    say) move while a phase runs. The ETA is the mean step time of this call times the
    steps left, counted down through the step under way; before the first step of this
    call ends there is nothing honest to measure it by, and the display says so.
    `clock` is injectable so a test can move time.
    """

    def __init__(self, total_steps: int, start_step: int = 0, style: str = "auto",
                 stream=None, clock: Callable[[], float] = time.monotonic, notices: bool = True) -> None:
        self.total = total_steps
        self.notices = notices  # `notice` speaks even with style "none" (not on a rank but the first)
        self.start_step = start_step
        self.step = start_step
        self.current = start_step + 1
        self.clock = clock
        self.phase = "starting"
        self.phase_started = clock()
        self.started = clock()
        self.steps_started: float | None = None  # when this call's first step began
        self.last_step_done = self.started
        self.detail: Callable[[], str] | None = None
        self.last: dict[str, Any] = {}
        self.stream = stream or sys.stderr
        if style == "auto":
            style = "rich" if getattr(self.stream, "isatty", lambda: False)() else "plain"
        self.style = style
        self._live = None
        if style == "rich":
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(file=self.stream), get_renderable=self._render,
                              refresh_per_second=2, transient=False)
            self._live.start()

    def eta(self) -> float | None:
        """Seconds left: the mean step of this call times the steps left, less the time
        the step under way has run (never below the steps after it); None before a step ends."""
        done = self.step - self.start_step
        if done <= 0 or self.steps_started is None:
            return None
        now = self.clock()
        per = (self.last_step_done - self.steps_started) / done
        left = self.total - self.step
        if left <= 0:
            return 0.0
        return max(per * left - (now - self.last_step_done), per * (left - 1))

    def set_phase(self, phase: str, step: int | None = None) -> None:
        """`step`: the step being worked on (1-based); the bar counts completed steps."""
        if step is not None:
            self.current = step
            if self.steps_started is None and step > self.start_step:
                self.steps_started = self.clock()
                self.last_step_done = self.steps_started
        changed, self.phase = phase != self.phase, phase
        if self.style == "plain" and changed:
            # a log file still shows that a long step is moving
            print(f"{self.where()}: {phase}", file=self.stream, flush=True)
        self.phase_started = self.clock()
        self.detail = None
        self._refresh()

    def watch(self, detail: Callable[[], str] | None) -> None:
        """Show `detail()` beside the phase at each refresh (progress inside the phase),
        until the next phase; None stops."""
        self.detail = detail
        self._refresh()

    def update_parts(self, key: str, sequences: int) -> Callable[[str], None]:
        """`show(part)` for `grpo.update_role`: names the part of `key`'s update under way
        (it lasts minutes on a CPU)."""
        def show(part: str) -> None:
            label = f"{key} model, {sequences} sequences: {part}"
            self.watch(lambda: label)
        return show

    def step_done(self, step: int, metrics: Mapping[str, Any]) -> None:
        self.step = step
        self.current = step + 1
        self.last = dict(metrics)
        self.last_step_done = self.clock()
        self.phase = "step done"
        self.phase_started = self.last_step_done
        self.detail = None
        if self.style == "plain":
            parts = [f"step {step} of {self.total} done"]
            for key, label, fmt in HEADLINE:
                if isinstance(self.last.get(key), (int, float)):
                    parts.append(f"{label} {fmt.format(self.last[key])}")
            parts.append(f"eta {_fmt_duration(self.eta())}")
            print(" | ".join(parts), file=self.stream, flush=True)
        self._refresh()

    def message(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text)
        elif self.style != "none":
            print(text, file=self.stream, flush=True)

    def notice(self, text: str) -> None:
        """A line the user must see whatever the display (why the run stops, and how to go
        on): `logging.progress=none` quiets the progress, not these."""
        if self._live is None and self.style == "none" and self.notices:
            print(text, file=self.stream, flush=True)
        else:
            self.message(text)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def where(self) -> str:
        """"start-up" (loading), "before step N of T" (the start-up validation), "step N of
        T" (its phases, its validation and checkpoint)."""
        if self.phase in ("starting", "loading the models"):
            return "start-up"
        if self.current <= self.step:
            return f"before step {self.step + 1} of {self.total}"
        return f"step {min(self.current, self.total)} of {self.total}"

    def steps_text(self) -> str:
        return f"{self.where()} ({self.step} done)"

    def time_text(self) -> str:
        """Elapsed time and ETA."""
        eta = self.eta()
        eta_text = f"ETA {_fmt_duration(eta)}" if eta is not None else "ETA after the first step"
        return f"elapsed {_fmt_duration(self.clock() - self.started)} | {eta_text}"

    def phase_text(self) -> str:
        """The phase under way, how long it has run, and its own progress."""
        text = f"{self.phase} {_fmt_duration(self.clock() - self.phase_started)}"
        return text + (f" ({self.detail()})" if self.detail is not None else "")

    def _render(self):
        from rich.markup import escape
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_column(justify="right", style="bold")
        table.add_column()
        bar = ProgressBar(total=max(self.total, 1), completed=self.step, width=30)
        head = Table.grid(padding=(0, 1))
        head.add_row(bar, escape(self.steps_text()))
        table.add_row("", head)  # (three short lines: the picture fits 80 columns)
        table.add_row("time", escape(self.time_text()))
        table.add_row("phase", f"[cyan]{escape(self.phase_text())}[/]")
        for key, label, fmt in HEADLINE:
            value = self.last.get(key)
            if isinstance(value, (int, float)):
                table.add_row(label, fmt.format(value))
        for key in sorted(self.last):
            if key.startswith("val/") and isinstance(self.last[key], (int, float)):
                table.add_row(key, f"{self.last[key]:.3f}")
        return table

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def sampling_detail(tokens: int, completions: int, prompts: int) -> str:
    """A rollout's progress beside its phase: before its first token the model reads the
    prompts (a long prefill on a CPU), which is said, so the display never sits at 0."""
    if tokens == 0:
        return f"reading {prompts} prompts before sampling {completions} completions"
    return f"{tokens:,} tokens sampled for {completions} completions"


# --------------------------------------------------------------------------- a step's figures


def step_metrics(rollout: StepRollout, rewards: StepRewards, book: Mapping[str, Any], update: Mapping[str, Any],
                 times: Mapping[str, float], *, epoch: int,
                 dropped: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """One step's row: the judge's, the Mistake Book's and the update's figures, the
    rollouts' counts, the data position, and each phase's seconds (`time/PHASE_s`)."""
    metrics: dict[str, Any] = {**rewards.metrics, **book, **update}
    metrics.update(generation_metrics("code", rollout.code_stats))
    if rewards.test is not None:  # (golden mode writes no tests)
        metrics.update(generation_metrics("test", rollout.test_stats))
    stats = (rollout.code_stats, rollout.test_stats)
    total_tokens = sum(s.completion_tokens for s in stats)
    total_gen_s = sum(s.seconds for s in stats)
    metrics["rollout/tokens"] = total_tokens
    metrics["rollout/tokens_per_s"] = total_tokens / total_gen_s if total_gen_s > 0 else 0.0
    metrics["data/epoch"] = epoch
    metrics["data/train_dropped_overlong"] = len(dropped["train"])
    metrics["data/heldout_dropped_overlong"] = len(dropped["heldout"])
    for key, value in times.items():
        metrics[f"time/{key}_s"] = value
    return metrics


def generation_metrics(role: str, st) -> dict[str, Any]:
    """`rollout/ROLE_*` of one role's `GenerationStats`."""
    return {
        f"rollout/{role}_samples": st.samples,
        f"rollout/{role}_tokens": st.completion_tokens,
        f"rollout/{role}_tokens_per_s": st.tokens_per_s,
        f"rollout/{role}_truncated": st.completions_truncated,
        f"rollout/{role}_empty": st.empty_completions,
        f"rollout/{role}_prompts_truncated": st.prompts_truncated,
        f"rollout/{role}_prompts_shortened": st.prompts_shortened,
        f"rollout/{role}_mean_length": st.completion_tokens / st.samples if st.samples else 0.0,
        f"rollout/{role}_prefill_tokens": st.prefill_tokens,
        f"rollout/{role}_decode_passes": st.decode_passes,
    }


def a1_judge_metrics(code_rewards, test_rewards, judgements) -> dict[str, Any]:
    """The judge's figures of an a1/self-play step: rewards, validity, pass and attack rates."""
    suites = [s for j in judgements for i, row in enumerate(j.suites) if j.code_valid[i] for s in row]
    valid = [v for j in judgements for v in j.code_valid]
    return {
        "code/reward_mean": float(code_rewards.mean()),
        "code/reward_std": float(code_rewards.std(unbiased=False)),
        "test/reward_mean": float(test_rewards.mean()),
        "test/reward_std": float(test_rewards.std(unbiased=False)),
        "judge/code_valid_rate": sum(bool(v) for v in valid) / max(len(valid), 1),
        "judge/pass_rate": mean([s.pass_score for s in suites]),
        "judge/attack_rate": mean([s.attack for s in suites]),
        "judge/attack_success": mean([1.0 if s.gen_fail_rate > 0 else 0.0 for s in suites]),
        "judge/valid_ratio": mean([s.valid_ratio for s in suites]),
        "judge/valid_tests": mean([float(s.valid) for s in suites]),
        "judge/invalid_tests": mean([float(s.invalid) for s in suites]),
        "judge/unusable_problems": sum(not j.usable for j in judgements),
        "judge/nonprintable": mean([float(s.nonprintable) for j in judgements for row in j.suites for s in row]),
    }


def golden_judge_metrics(rates, results) -> dict[str, Any]:
    """The figures of a golden-mode step: golden-test pass rates of the candidates."""
    n = max(len(results), 1)
    return {
        "code/reward_mean": float(rates.mean()),
        "code/reward_std": float(rates.std(unbiased=False)),
        "judge/pass_rate": float(rates.mean()),
        "judge/code_correct_rate": sum(r.correct for r in results) / n,
        "judge/code_valid_rate": sum(r.status not in ("no-function", "error", "infra") for r in results) / n,
        "judge/infra": sum(r.status == "infra" for r in results),
    }


def step_samples(rollout: StepRollout, rewards: StepRewards, batches: StepBatches, k: int) -> list[dict[str, Any]]:
    """A few samples for samples.jsonl: per problem (the first `k`) its first code and a suite.

    The suite shown is the first of a candidate whose suites trained (the top-std
    choice), else of candidate 0; `trained` says whether the sample was in the update.
    """
    out = []
    for pi, p in enumerate(rollout.problems[:k]):
        s = rollout.code_samples[pi][0]
        out.append({"role": "code", "problem_id": p.id, "reward": float(rewards.code[pi, 0]),
                    "truncated": s.truncated, "trained": 0 in batches.code.chosen.get(pi, []), "text": s.text})
        if rewards.test is not None and rollout.suites[pi]:
            chosen = batches.test.chosen.get(pi, [])
            ci = chosen[0] if chosen else 0
            t = rollout.suites[pi][ci][0]
            out.append({"role": "test", "problem_id": p.id, "candidate": ci,
                        "reward": float(rewards.test[pi, ci, 0]), "truncated": t.truncated,
                        "trained": ci in chosen, "text": t.text})
    return out


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0
