"""Weights & Biases logging of a run (`logging.wandb`, the optional `codea1[wandb]` extra).

Every row `metrics.jsonl` gets is logged to W&B too, with the run's step as the `step`
value every chart is drawn against (W&B's own step counter only ever grows, so a resumed
run that logs step 7 again after a crash would be dropped; with `step` as the x-axis it
is not). Every `logging.samples_every` steps a `samples` table (one row a problem: the
code, the test suite, their rewards) is logged from the samples the step wrote to
`samples.jsonl`. The resolved config is the W&B run's config.

The W&B run's id is kept in `RUN_DIR/wandb_run.json`, so `codea1 train --resume` logs
into the same W&B run. W&B's own files go under `RUN_DIR/wandb/`; `mode: offline` needs
no network (`wandb sync RUN_DIR/wandb/offline-run-*` uploads later).

W&B never fails a run: any error (not installed, no network, a bad key, a server that
refuses) prints one warning line, and the run goes on without W&B from there.
"""

from __future__ import annotations

import json
import math
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

RUN_ID_FILE = "wandb_run.json"
WANDB_EXTRA_HINT = "pip install 'codea1[wandb]'"
SAMPLE_COLUMNS = ["step", "problem_id", "code", "code_reward", "tests", "test_reward"]


def _warn_line(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _loggable(value: Any) -> Any:
    """What W&B takes of a metrics value: numbers and text as they are, NaN/inf as None,
    anything else as its JSON text."""
    if isinstance(value, bool) or isinstance(value, (int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _loggable(value.item())
    return json.dumps(value, default=str)


def sample_rows(step: int, samples: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    """One table row per problem from a step's samples (a code sample and a test sample each)."""
    by_problem: dict[str, dict[str, Any]] = {}
    for s in samples:
        row = by_problem.setdefault(str(s.get("problem_id")), {})
        role = s.get("role")
        if role in ("code", "test"):
            row[role] = s.get("text")
            row[f"{role}_reward"] = s.get("reward")
    return [[step, pid, r.get("code"), r.get("code_reward"), r.get("test"), r.get("test_reward")]
            for pid, r in by_problem.items()]


class WandbLogger:
    """One training run's W&B run (see the module's docstring)."""

    def __init__(self, settings, run_dir: str | Path, config: Mapping[str, Any], *, resume: bool,
                 samples_every: int, warn: Callable[[str], None] = _warn_line) -> None:
        self.run_dir = Path(run_dir)
        self.samples_every = samples_every
        self._warn = warn
        self._wandb = None
        self._run = None
        try:
            import wandb
        except ImportError:
            self._warn(f"logging.wandb: wandb is not installed ({WANDB_EXTRA_HINT}); the run goes on without W&B")
            return
        try:
            run_id = self._run_id(resume)
            self._run = wandb.init(project=settings.project, entity=settings.entity, name=settings.name,
                                   mode=settings.mode, dir=str(self.run_dir), id=run_id, resume="allow",
                                   config=dict(config))
            self._run.define_metric("step")
            self._run.define_metric("*", step_metric="step")
            self._wandb = wandb
        except Exception as exc:  # noqa: BLE001 - W&B never fails a run
            self._give_up("could not start", exc)

    @property
    def active(self) -> bool:
        return self._run is not None

    def _run_id(self, resume: bool) -> str:
        """The stored id on a resume (a new one for a run that had none), written before the
        W&B run starts so that a crash right after still resumes into it."""
        path = self.run_dir / RUN_ID_FILE
        if resume and path.is_file():
            run_id = json.loads(path.read_text()).get("id")
            if isinstance(run_id, str) and run_id:
                return run_id
        run_id = uuid.uuid4().hex[:12]  # W&B ids are lowercase letters and digits
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"id": run_id}) + "\n")
        return run_id

    def _give_up(self, what: str, exc: BaseException) -> None:
        self._warn(f"W&B {what} ({_first_line(exc)}); the run goes on without W&B")
        run, self._run = self._run, None
        if run is not None:
            try:
                run.finish(exit_code=1)
            except Exception:  # noqa: BLE001 - already reported once
                pass

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """The metrics of one step, as metrics.jsonl has them, at `step`."""
        if self._run is None:
            return
        try:
            self._run.log({**{str(k): _loggable(v) for k, v in metrics.items()}, "step": step})
        except Exception as exc:  # noqa: BLE001
            self._give_up("logging failed", exc)

    def log_samples(self, step: int, samples: Iterable[Mapping[str, Any]]) -> None:
        """A `samples` table every `samples_every` steps (0: never)."""
        if self._run is None or not self.samples_every or step % self.samples_every:
            return
        rows = sample_rows(step, samples)
        if not rows:
            return
        try:
            table = self._wandb.Table(columns=SAMPLE_COLUMNS, data=rows)
            self._run.log({"samples": table, "step": step})
        except Exception as exc:  # noqa: BLE001
            self._give_up("logging the samples table failed", exc)

    def close(self) -> None:
        run, self._run = self._run, None
        if run is None:
            return
        try:
            run.finish()
        except Exception as exc:  # noqa: BLE001
            self._warn(f"W&B could not finish ({_first_line(exc)})")


def open_wandb(cfg, run_dir: str | Path, resume: bool) -> WandbLogger | None:
    """The run's W&B logger, or None when `logging.wandb.project` is not set."""
    settings = cfg.logging.wandb
    if not settings.project or settings.mode == "disabled":
        return None
    return WandbLogger(settings, run_dir, cfg.model_dump(mode="json"), resume=resume,
                       samples_every=cfg.logging.samples_every)
