"""The Code-A1 training loop: one step is rollouts, judge, rewards, Mistake Book, GRPO.

`Trainer.run_step` is the step, one timed phase per line (docs/ARCHITECTURE.md, "One
training step, top to bottom", walks it function by function); what the phases hand each
other is typed in `codea1.train.records`, the update is `codea1.grpo`'s.

`train(config, run_dir)` runs a new run; `train(None, run_dir, resume=True)` continues
the run in `run_dir` from its latest checkpoint, exactly where it stopped (same weights,
optimiser moments, schedule, random streams, data position, Mistake Book rolled back to
the checkpoint's step, and metrics files cut back to the checkpoint), also after a kill
-9 at any moment; with no checkpoint yet it starts as a new run does (an empty Mistake
Book). A resume checks config.yaml against the checkpoint and rewrites it only to record
`steps` (docs/ARCHITECTURE.md, "Crashes and --resume").

Modes (`config.mode`):
- `a1`: the code model is rewarded by the judge's pass scores and the test model by
  validity + attack, each with its own weights (CODE_A1_SPEC.md);
- `golden`: the code model alone, rewarded by its golden-test pass rate;
- `selfplay`: as `a1`, but one set of weights plays both roles and takes one update
  over both roles' samples.

Ctrl-C or SIGTERM asks the loop to stop: a step that has not yet changed the Mistake
Book is abandoned (its random state rewound), a step past that point is finished, then
a checkpoint is written and `train` returns. A second Ctrl-C aborts at once (the last
checkpoint on disk stays intact).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from codea1 import grpo, models
from codea1.data.sampler import ProblemSampler
from codea1.engines import make_engine
from codea1.grpo import RoleBatch, StepBatches, make_optimizer, make_scheduler, select_batches, warmup_cosine
from codea1.judge import Judge, JudgeConfig, ProblemRollout, extract_code
from codea1.judge.judge import REFERENCE_SWITCHES
from codea1.mistakes import MistakeBook
from codea1.rollout import (
    GenerationInterrupted,
    code_messages,
    context_length,
    encode_prompts,
    fit_test_prompt,
    prompt_limit,
    sample_seeds,
    split_overlong,
    test_messages,
)
from codea1.sandbox import Executor, Limits
from codea1.train import distributed as D
from codea1.train.checkpoint import (
    BOOK_FILE,
    CONFIG_FILE,
    CheckpointManager,
    capture_rng,
    load_rng,
    read_state,
    read_training_state,
    remove_stray_temps,
    restore_rng,
    save_rng,
    verify_checkpoint,
    write_json,
    write_training_state,
)
from codea1.train.config import (
    ConfigError,
    TrainConfig,
    check_run_config,
    raw_digest,
    read_run_config,
    require_data,
    save_config,
)
from codea1.train.golden import golden_items, golden_results
from codea1.train.metrics import (
    MetricsLog,
    Progress,
    a1_judge_metrics,
    golden_judge_metrics,
    step_metrics,
    step_samples,
)
from codea1.train.one_process import OneProcess
from codea1.train.records import StepRewards, StepRollout
from codea1.train.training_data import load_training_data, select_problems  # noqa: F401  (re-exported)
from codea1.train.validation import validate
from codea1.train.wandb_logger import open_wandb

__all__ = ["RoleBatch", "StopRequested", "TrainResult", "Trainer", "load_training_data", "select_problems", "train"]

ROLES = ("code", "test")


class StopRequested(Exception):
    """Raised inside a step when a stop was asked for before the step changed anything."""


class StopFlag:
    """Set by SIGINT/SIGTERM; a second SIGINT raises KeyboardInterrupt at once."""

    def __init__(self) -> None:
        self.requested = False
        self.reason = ""
        self._old: dict[int, Any] = {}

    def _handler(self, signum, _frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.reason = signal.Signals(signum).name

    def __enter__(self) -> "StopFlag":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


# --------------------------------------------------------------------------- the trainer


@dataclass
class TrainResult:
    run_dir: Path
    step: int                  # the last completed step
    stopped: bool              # stopped early by a signal or `stop_after`
    metrics: list[dict[str, Any]] = field(default_factory=list)


class Trainer:
    """Holds the models, optimisers, sandbox and Mistake Book of one run."""

    progress: Progress | None = None  # the live display, where there is one

    def __init__(self, cfg: TrainConfig, run_dir: Path, *, policies=None,
                 progress: Progress | None = None, ranks=None) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.ranks = ranks if ranks is not None else OneProcess()
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        # seed before the models load: LoRA initialisation draws from torch's RNG
        random.seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        torch.manual_seed(cfg.seed)
        self.train_problems, self.heldout = load_training_data(cfg)
        self._sampler()  # the batch must fit the data: refused here, before minutes of model loading
        self.policies = policies if policies is not None else models.load_policies(self._model_config())
        # both roles share one architecture: one context bounds every prompt
        self.context = context_length(self.policies.module("code"))
        self.dropped = self._drop_overlong(progress)
        self.sampler = self._sampler()  # ... and again once the over-long prompts are gone
        self.sharded, compute_dtype = self._distribute()
        self.engine = make_engine(cfg.rollout.engine, self.policies, cfg.rollout.vllm, dtype=compute_dtype,
                                  threads=cfg.threads)
        if cfg.grpo.rollout_is != "none" and not self.engine.reports_logprobs:
            warnings.warn(f"grpo.rollout_is={cfg.grpo.rollout_is!r} has no effect with the "
                          f"{self.engine.name} rollout engine, which reports no log-probs", stacklevel=2)
        self.update_roles = ("shared",) if cfg.mode == "selfplay" else (
            ("code",) if cfg.mode == "golden" else ROLES)
        self.optimizers = {}
        self.schedulers = {}
        for key in self.update_roles:
            opt = make_optimizer(self.policies.trainable_parameters("code" if key == "shared" else key), cfg.grpo)
            self.optimizers[key] = opt
            self.schedulers[key] = make_scheduler(opt, cfg.grpo, cfg.steps)
        self.limits = Limits(timeout_s=cfg.judge.timeout_s, call_timeout_s=cfg.judge.call_timeout_s,
                             memory_mb=cfg.judge.memory_mb)
        workers = cfg.judge.workers if not self.ranks.enabled else D.local_workers(cfg.judge.workers, self.ranks)
        self._executor_cm = Executor(workers=workers, limits=self.limits)
        self.executor = self._executor_cm.__enter__()
        self.judge = self._make_judge() if cfg.mode != "golden" else None
        self.book = MistakeBook(self.run_dir / BOOK_FILE) if self.ranks.main else None  # rank 0's alone
        self.step = 0
        self.progress = progress
        self.stop = StopFlag()

    def _sampler(self) -> ProblemSampler:
        d = self.cfg.data
        return ProblemSampler(len(self.train_problems), self.cfg.seed, d.shuffle, batch_size=d.problems_per_step,
                              cross_epochs=d.cross_epochs)

    def _model_config(self):
        return D.rank_model_config(self.cfg, self.ranks) if self.ranks.enabled else self.cfg.model

    def _distribute(self):
        """Several ranks: FSDP2 shards full weights, and `hooks` sum the update over ranks.
        Returns (sharded, the compute dtype of sharded weights)."""
        self.hooks = None
        if not self.ranks.enabled:
            return False, None
        sharded = D.uses_fsdp(self.cfg, self.ranks)
        compute_dtype = None
        if sharded:
            compute_dtype = models.resolve_dtype(self.cfg.model.dtype, self.policies.device)
            D.shard_policies(self.policies, self.ranks, compute_dtype)
        self.hooks = D.GradSync(self.ranks, sharded=sharded).hooks(self.cfg.grpo.logprob_chunk_tokens)
        return sharded, compute_dtype

    def _make_judge(self):
        cfg = self.cfg
        judge_config = JudgeConfig(
            alpha=cfg.judge.alpha, suite_size=cfg.judge.suite_size,
            nonprintable_penalty=cfg.judge.nonprintable_penalty, limits=self.limits,
            **cfg.judge.model_dump(include=set(REFERENCE_SWITCHES)))
        if cfg.judge.backend != "ray":
            return Judge(self.executor, judge_config)
        from codea1.judge.ray_backend import RayJudge  # (ray: an optional extra)

        j = cfg.judge
        return RayJudge(judge_config, self.limits, workers=j.workers, address=j.ray_address, actors=j.ray_actors,
                        batch_problems=j.ray_batch_problems, in_flight=j.ray_in_flight, retries=j.ray_retries,
                        require=j.ray_require)

    def _drop_overlong(self, progress: Progress | None) -> dict[str, list[str]]:
        """Drop the problems whose code prompt is longer than the code model may read, as
        the reference's data filter does (training data by `rollout.code`, held-out data by
        `validation.sampling`); returns the dropped ids and says how many went. With
        `cut_prompts_left` (the project's older rule) they stay and are cut."""
        cfg, context = self.cfg, self.context
        own = not cfg.rollout.project_code_prompt
        dropped: dict[str, list[str]] = {"train": [], "heldout": []}
        for split, sampling in (("train", cfg.rollout.code), ("heldout", cfg.validation.sampling)):
            if sampling.cut_prompts_left or (split == "heldout" and not cfg.validation.every):
                continue
            limit = prompt_limit(sampling, context)
            problems = self.train_problems if split == "train" else self.heldout
            kept, gone = split_overlong(problems, self.policies.tokenizer, limit, own)
            dropped[split] = [p.id for p in gone]
            if split == "train":
                self.train_problems = kept
            else:
                self.heldout = kept
            if gone and progress is not None and self.ranks.main:
                shown = ", ".join(dropped[split][:5]) + (" ..." if len(gone) > 5 else "")
                progress.message(f"data.{split}: dropped {len(gone)} of {len(problems)} problems whose code "
                                 f"prompt is over {limit} tokens ({shown})")
        if not self.train_problems:
            raise ValueError(f"data.train: every problem's code prompt is over the limit of "
                             f"{prompt_limit(cfg.rollout.code, context)} tokens (rollout.code.max_prompt_tokens)")
        return dropped

    # ------------------------------------------------------------------ state

    def rng_generators(self) -> dict[str, Any]:
        # rollouts seed each sample's stream from its place in the step (`_generate`):
        # no generator of the loop's own carries state from step to step
        return {}

    def save_checkpoint(self, manager: CheckpointManager, log: MetricsLog | None) -> Path | None:
        """Rank 0 writes the checkpoint (the others join in gathering sharded weights)."""
        weights = optim = None
        if self.sharded:  # FSDP2: gather whole weights and optimiser state (collective)
            weights, optim = D.gather_full_states(self.policies, self.optimizers)
        if not self.ranks.main:
            self.ranks.barrier()
            return None

        def write(tmp: Path) -> None:
            write_training_state(tmp, self.policies, self.optimizers, self.schedulers, weights, optim)
            save_rng(tmp / "rng.pt", self.rng_generators())
            self.book.snapshot(tmp / BOOK_FILE)
            log.sync()
            write_json(tmp / "state.json", {
                "step": self.step,
                "data": self.sampler.state(),
                "metrics_offsets": log.offsets(),
                "config_sha256": config_digest(self.cfg),
                "config": self.cfg.model_dump(mode="json"),  # a resume compares config.yaml with it
                "mode": self.cfg.mode,
                "saved_at": time.time(),
            })

        path = manager.save(self.step, write)
        self.ranks.barrier()
        return path

    def load_checkpoint(self, path: Path) -> dict[str, Any]:
        state = read_state(path)
        steps_changed = state.get("config", {}).get("steps", self.cfg.steps) != self.cfg.steps
        read_training_state(path, self.policies, self.optimizers, self.schedulers, steps_changed=steps_changed,
                            load_sharded=D.sharded_loader(self.policies, self.optimizers) if self.sharded else None)
        if self.book is not None:
            self.book.restore(path / BOOK_FILE)
        self.sampler.load_state(state["data"])
        restore_rng(load_rng(path / "rng.pt"), self.rng_generators())
        self.step = int(state["step"])
        return state

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.book is not None:
                self.book.close()
        with contextlib.suppress(Exception):
            self.engine.close()
        with contextlib.suppress(Exception):
            if hasattr(self.judge, "close"):
                self.judge.close()
        self._executor_cm.__exit__(None, None, None)

    # ------------------------------------------------------------------ one step

    def run_step(self) -> dict[str, Any]:
        """One training step; returns its metrics. May raise StopRequested before the commit."""
        cfg, step, times = self.cfg, self.step + 1, {}
        started, comm_before = time.perf_counter(), self.ranks.comm_s
        rollout = self._draw_problems(step)
        with self.phase("code rollout", times):
            self._code_rollout(rollout)
        if cfg.mode != "golden":
            with self.phase("test rollout", times):
                self._test_rollout(rollout)
        with self.phase("judge", times):
            rewards = self._judge(rollout)
        book_metrics = {}
        if cfg.mode != "golden":  # the commit point: from here on the step always completes
            with self.phase("mistake book", times, may_stop=False):
                book_metrics = self._commit_mistakes(rollout, rewards)
        with self.phase("update", times, may_stop=False):
            batches = self._select(rollout.problems, rollout.code_samples, rewards.code, rollout.suites,
                                   rewards.test, rewards.judgements)
            self._last_batches = batches  # kept for inspection (benchmarks/train_step.py)
            update_metrics = self._update(batches, rollout.slots)
        self.step = step
        metrics = step_metrics(rollout, rewards, book_metrics, update_metrics, times, epoch=self.sampler.epoch,
                               dropped=self.dropped)
        samples = step_samples(rollout, rewards, batches, cfg.logging.samples_per_step)
        if self.ranks.enabled:
            metrics["time/comm_s"] = self.ranks.comm_s - comm_before
        metrics["time/step_s"] = time.perf_counter() - started
        self._last_samples = self.ranks.step_samples(samples, rollout.slots, cfg.logging.samples_per_step)
        return self.ranks.step_metrics(metrics, len(rollout.problems))

    @contextlib.contextmanager
    def phase(self, name: str, times: dict[str, float], may_stop: bool = True) -> Iterator[None]:
        """Show and time one phase of the step (`time/NAME_s`); a stop asked for during a
        phase before the commit point abandons the step when the phase ends."""
        self._phase(name)
        started = time.perf_counter()
        yield
        times[name.replace(" ", "_")] = time.perf_counter() - started
        if may_stop:
            self._check_stop()

    def _phase(self, name: str) -> None:
        if self.progress is not None:
            self.progress.set_phase(name, self.step + 1)

    def _check_stop(self, interrupted: bool = False) -> None:
        # every rank meets here at the same points of the step: a stop asked for on any
        # rank (or a rollout interrupted there) stops the step on all of them
        if self.ranks.any(self.stop.requested or interrupted):
            raise StopRequested(self.stop.reason or "a stop on another rank")

    # ------------------------------------------------------------------ rollouts

    def _draw_problems(self, step: int) -> StepRollout:
        """The step's problems: every rank draws them all and keeps its own slots."""
        idx = self.sampler.take(self.cfg.data.problems_per_step)
        step_problems = [self.train_problems[i] for i in idx]
        slots = self.ranks.slots(len(step_problems))
        return StepRollout(step, step_problems, slots, [step_problems[s] for s in slots],
                           suites=[[] for _ in slots])

    def _code_rollout(self, r: StepRollout) -> None:
        """n_code candidates per problem, and the code each one holds."""
        own = not self.cfg.rollout.project_code_prompt
        r.code_samples = self._generate("code", [code_messages(p, own) for p in r.problems], self.cfg.rollout.n_code,
                                        self.cfg.rollout.code, r.code_stats, [(s,) for s in r.slots])
        r.codes = [[extract_code(s.text) for s in group] for group in r.code_samples]

    def _test_rollout(self, r: StepRollout) -> None:
        """n_test suites per candidate: white-box, each written against its candidate's code;
        black-box, n_code * n_test per problem from the question alone, split among them."""
        ro = self.cfg.rollout
        prompts, where = [], []
        for pi, p in enumerate(r.problems):
            for ci, code in (enumerate(r.codes[pi]) if ro.white_box else [(None, None)]):
                prompts.append(self._test_prompt(p, code, ro.test, r.test_stats))
                where.append((pi, ci))
        n = ro.n_test if ro.white_box else ro.n_test * ro.n_code
        out = self._generate("test", prompts, n, ro.test, r.test_stats,
                             [(r.slots[pi],) if ci is None else (r.slots[pi], ci) for pi, ci in where])
        r.suites = [[] for _ in r.problems]
        for (pi, ci), group in zip(where, out):
            if ci is not None:
                r.suites[pi].append(group)
            else:
                r.suites[pi] = [group[c * ro.n_test:(c + 1) * ro.n_test] for c in range(ro.n_code)]

    def _generate(self, role: str, prompts, n: int, sampling, gen_stats, places):
        """Sample; each prompt's stream is seeded from `places` (its slot in the step, ...)."""
        seeds = sample_seeds(self.cfg.seed, self.step + 1, role, places)
        if self.progress is not None:
            rows = n * len(prompts)
            self.progress.watch(lambda: f"{gen_stats.tokens_decoded:,} tokens sampled for {rows} completions")
        try:
            with self._sampling_weights(role):
                return self.engine.generate(role, encode_prompts(self.policies.tokenizer, prompts), n=n,
                                            sampling=sampling, seeds=seeds, stats=gen_stats,
                                            should_stop=lambda: self.stop.requested)
        except GenerationInterrupted:
            # nothing of this step is committed yet: abandon it like any stop before commit
            self._check_stop(interrupted=True)
            raise StopRequested(self.stop.reason) from None

    def _test_prompt(self, problem, code: str | None, sampling, stats):
        """A test prompt (token ids, or chat messages under `cut_prompts_left`) that fits the
        test model's limit without losing its head (`codea1.rollout.fit_test_prompt`);
        a shortened one is counted in `stats.prompts_shortened`."""
        n_tests, white_box = self.cfg.judge.suite_size, code is not None
        if sampling.cut_prompts_left:
            return test_messages(problem, code=code, white_box=white_box, n_tests=n_tests)
        limit = prompt_limit(sampling, self.context)
        ids, shortened = fit_test_prompt(self.policies.tokenizer, problem, code, limit,
                                         white_box=white_box, n_tests=n_tests)
        stats.prompts_shortened += int(shortened)
        return ids

    def _sampling_weights(self, role: str):
        """Whole weights for sampling under FSDP2 (every rank enters together), else nothing."""
        return D.gathered(self.policies.module(role)) if self.sharded else contextlib.nullcontext()

    # ------------------------------------------------------------------ judging

    def _judge(self, r: StepRollout) -> StepRewards:
        """Rewards: golden mode's pass rates, or the a1 judge's (with the Mistake Book's tests)."""
        if self.cfg.mode == "golden":
            return self._judge_golden(r.problems, r.codes)
        k = self.cfg.mistakes.top_k or self.cfg.judge.suite_size
        mistakes = (self.ranks.book_tops(self.book, r.step_problems, r.slots, k) if self.cfg.mistakes.enabled
                    else [[] for _ in r.problems])
        if self.progress is not None and hasattr(self.judge, "progress"):  # (the Ray backend counts none)
            judge = self.judge
            self.progress.watch(lambda: str(judge.progress))
        code, test, metrics, judgements = self._judge_a1(r.problems, r.code_samples, r.suites, mistakes)
        return StepRewards(code, test, judgements, metrics)

    def _judge_golden(self, problems, codes) -> StepRewards:
        items = golden_items(problems, codes)
        results = golden_results(self.executor, items, self.limits)
        rates = torch.tensor([r.pass_rate for r in results], dtype=torch.float64).view(len(problems),
                                                                                     self.cfg.rollout.n_code)
        return StepRewards(rates, None, [None] * len(problems), golden_judge_metrics(rates, results))

    def _judge_a1(self, problems, code_samples, test_samples, mistakes):
        """(code rewards [P, n_code], test rewards [P, n_code, n_test], metrics, judgements [P])."""
        rollouts = [ProblemRollout(p, codes=[s.text for s in code_samples[pi]],
                                   tests=[[s.text for s in group] for group in test_samples[pi]],
                                   mistakes=mistakes[pi]) for pi, p in enumerate(problems)]
        judgements = self.judge.judge_step(rollouts)
        code_rewards = torch.tensor([list(j.code_rewards) for j in judgements], dtype=torch.float64)
        test_rewards = torch.tensor([[list(r) for r in j.test_rewards] for j in judgements], dtype=torch.float64)
        return code_rewards, test_rewards, a1_judge_metrics(code_rewards, test_rewards, judgements), judgements

    def _commit_mistakes(self, r: StepRollout, rewards: StepRewards) -> dict[str, Any]:
        """The commit point: the step's failing tests into the Mistake Book (rank 0's)."""
        m = self.cfg.mistakes
        if not m.enabled:
            return {}
        # (pairs, not a dict: two copies of a problem in one step each count)
        updates = [(s, (p.id, j.mistake_update(m.once_per_candidate)))
                   for s, p, j in zip(r.slots, r.problems, rewards.judgements)]
        return self.ranks.commit_book(self.book, r.step, updates, net=m.net_changes)

    # ------------------------------------------------------------------ updates

    def _select(self, problems, code_samples, code_rewards, test_samples, test_rewards, judgements) -> StepBatches:
        """Trajectories per policy (`codea1.grpo.select_batches`)."""
        return select_batches(self.cfg.grpo, code_samples, code_rewards, test_samples, test_rewards, judgements,
                              selfplay=self.cfg.mode == "selfplay")

    def _update(self, batches: StepBatches, slots: Sequence[int] | None = None) -> dict[str, Any]:
        """Each set of weights' GRPO update (`codea1.grpo.update_role`), then its LR schedule's step."""
        g = self.cfg.grpo
        metrics: dict[str, Any] = batches.group_metrics()
        self.engine.release_memory()
        for key in self.update_roles:
            batch = batches[key]
            layout = self.ranks.layout(batch, slots, g.mini_batches)  # in the step's global order
            if self.ranks.any(bool(batch.trajectories)):  # a rank with none still joins the others' reductions
                show = partial(self._update_part, key, len(batch.trajectories))
                stats = grpo.update_role(self.policies, "code" if key == "shared" else key, self.optimizers[key],
                                         batch.trajectories, g, layout=layout, metrics=metrics, label=key,
                                         show=show, hooks=self.hooks)
                metrics.update(stats.as_dict(f"update/{key}"))
            else:
                metrics[f"update/{key}/sequences"] = 0
            metrics[f"update/{key}/lr"] = self.optimizers[key].param_groups[0]["lr"]
            with warnings.catch_warnings():  # a step with nothing to train still advances the schedule
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`")
                self.schedulers[key].step()
        self.engine.weights_changed(self.update_roles)
        return metrics

    def _update_part(self, key: str, sequences: int, part: str) -> None:
        """Name the part of the update under way on the live display (it lasts minutes on a CPU)."""
        if self.progress is not None:
            label = f"{key} model, {sequences} sequences: {part}"
            self.progress.watch(lambda: label)

    # ------------------------------------------------------------------ validation

    def validate(self) -> dict[str, Any]:
        """Held-out figures (`codea1.train.validation.validate`); every rank calls it."""
        return validate(self)


def config_digest(cfg: TrainConfig, ignore_steps: bool = False) -> str:
    data = cfg.model_dump(mode="json")
    if ignore_steps:
        data.pop("steps", None)
    return raw_digest(data)


# --------------------------------------------------------------------------- entry point


def _resume_config(config: TrainConfig | None, run_dir: Path,
                   steps: int | None) -> tuple[TrainConfig, Path | None, bool]:
    """The config a resumed run continues with, its latest checkpoint (None: none yet),
    and whether config.yaml must be rewritten to record an override.

    The run's config.yaml must be whole and the one its latest checkpoint was trained
    with; only the keys of `RESUME_OVERRIDES` (`steps`) may change, through `steps`.
    """
    cfg_path = run_dir / CONFIG_FILE
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path}: missing; {run_dir} is not a run directory to resume")
    saved, raw = read_run_config(cfg_path)
    latest = CheckpointManager(run_dir, keep=saved.checkpoint.keep).latest()
    # every file of the checkpoint readable before minutes of model loading
    state = verify_checkpoint(latest, BOOK_FILE) if latest is not None else None
    check_run_config(raw, cfg_path, state, latest)
    if config is not None and config_digest(config, True) != config_digest(saved, True):
        raise ConfigError(f"{run_dir}: resuming needs the run's own config ({cfg_path}); "
                          "give no config (or only --steps)")
    at = int(state["step"]) if state is not None else 0
    if steps is not None and steps <= at:
        raise ConfigError(f"--steps {steps}: {run_dir} is already at step {at} (of {saved.steps}); "
                          f"give a total above {at}, or no --steps to run to {saved.steps}")
    if steps is None or steps == saved.steps:
        return saved, latest, False
    return saved.model_copy(update={"steps": steps}), latest, True


def extended_message(cfg: TrainConfig, at: int, previous_steps: int, cfg_path: Path) -> str:
    """What `--resume RUN --steps N` changed: the total recorded in config.yaml, and the LR
    schedule, which from the next step on spans the new total (the steps already trained
    keep the rates they had; docs/TRAINING.md, "Changing --steps on resume")."""
    g = cfg.grpo
    after = g.lr * warmup_cosine(at, g.warmup_steps, cfg.steps, g.min_lr_ratio, g.warmup_first_step_learns)
    before = g.lr * warmup_cosine(at, g.warmup_steps, previous_steps, g.min_lr_ratio, g.warmup_first_step_learns)
    return (f"steps {previous_steps} -> {cfg.steps}, recorded in {cfg_path}; the LR schedule now spans "
            f"{cfg.steps} steps: step {at + 1} trains at lr {after:.3g} (the {previous_steps}-step "
            f"schedule had {before:.3g})")


def train(config: TrainConfig | None, run_dir: str | os.PathLike[str], *, resume: bool = False,
          steps: int | None = None, stop_after: int | None = None,
          time_limit_s: float | None = None, policies=None,
          progress: str | None = None,
          on_step: Callable[[int, dict[str, Any]], None] | None = None) -> TrainResult:
    """Train (or, with `resume`, continue) the run in `run_dir`.

    - `config`: the run's config; with `resume` it may be None (the run's own
      `config.yaml` is used).
    - `steps`: overrides `config.steps` (the total, which the LR schedule spans).
    - `stop_after`: stop (with a checkpoint) after this many steps of this call, as if
      interrupted; used to test resuming.
    - `time_limit_s`: a wall-clock budget for this call: after each step, stop (with a
      checkpoint, resumable) when the next step would end past it, judged by the slowest
      step so far, so "train for two hours" ends near two hours, not one step later. The
      LR schedule still spans `steps`.
    - `policies`: already loaded `codea1.models.Policies` (else loaded from the config).
    - `on_step(step, metrics)`: called after each step (and its checkpoint).

    Under torchrun (WORLD_SIZE > 1) every rank calls this with the same arguments; rank 0's
    run directory is the run's, and rank 0 alone writes to it (`codea1.train.distributed`).
    """
    run_dir = Path(run_dir)
    cfg_path = run_dir / CONFIG_FILE
    if resume:
        previous = read_run_config(cfg_path)[0].steps if steps is not None and cfg_path.is_file() else None
        config, latest, record = _resume_config(config, run_dir, steps)
    elif config is None:
        raise ValueError("train: a config is needed for a new run")
    elif cfg_path.exists() and (run_dir / "checkpoints").exists():
        raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} or a new --run-dir")
    else:
        latest, record = None, True
        if steps is not None:
            config = config.model_copy(update={"steps": steps})
    cfg = config
    require_data(cfg)
    ranks = D.init_ranks(cfg)
    try:
        return _train(cfg, ranks, run_dir, resume, latest, record, stop_after, time_limit_s,
                      policies, progress, on_step, previous_steps=previous if resume and record else None)
    finally:
        ranks.close()


def _train(cfg: TrainConfig, ranks, run_dir: Path, resume: bool, latest: Path | None, record: bool,
           stop_after: int | None, time_limit_s: float | None, policies, progress: str | None,
           on_step, previous_steps: int | None = None) -> TrainResult:
    started = time.monotonic()
    run_dir = Path(ranks.broadcast(str(run_dir)))  # rank 0's (a default name holds the time)
    latest = ranks.broadcast(latest)  # one answer for every rank
    manager = _prepare_run_dir(cfg, ranks, run_dir, latest, record)
    show = Progress(cfg.steps, style=(progress or cfg.logging.progress) if ranks.main else "none")
    show.set_phase("loading the models")
    trainer = Trainer(cfg, run_dir, policies=policies, progress=show, ranks=ranks)
    log = None
    try:
        offsets = _start(trainer, show, run_dir, latest, resume, previous_steps)
        if ranks.main:
            log = MetricsLog(run_dir, tensorboard=cfg.logging.tensorboard, offsets=offsets,
                             purge_step=trainer.step + 1 if trainer.step else (0 if resume else None),
                             wandb=open_wandb(cfg, run_dir, resume))
        show.start_step = show.step = trainer.step
        show.current = trainer.step + 1
        if cfg.validation.every and cfg.validation.at_start and trainer.step == 0 and trainer.heldout:
            show.set_phase("validation", 0)
            metrics = trainer.validate()   # every rank validates its share; rank 0 logs
            if ranks.main and metrics:
                log.log(0, metrics)
        rows, stopped, why = _run_steps(trainer, manager, log, show, started, stop_after, time_limit_s, on_step)
        if stopped:
            show.message(f"stopped at step {trainer.step} ({why}); resume with: codea1 train --resume {run_dir}")
    finally:
        if log is not None:
            log.close()
        show.close()
        trainer.close()
    return TrainResult(run_dir, trainer.step, stopped, rows)


def _prepare_run_dir(cfg: TrainConfig, ranks, run_dir: Path, latest: Path | None, record: bool) -> CheckpointManager:
    """Rank 0 tidies what a crash left in the run directory and records the config."""
    cfg_path = run_dir / CONFIG_FILE
    if ranks.main:
        run_dir.mkdir(parents=True, exist_ok=True)
    manager = CheckpointManager(run_dir, keep=cfg.checkpoint.keep)
    if ranks.main:
        manager.clean()  # what a crash left: half-written or half-deleted checkpoints,
        manager.prune()  # and old ones a crash kept from being pruned
        remove_stray_temps(cfg_path)
        if latest is None:
            # a new run, or a resume with no checkpoint yet: start as a new run, with an
            # empty Mistake Book (a crashed first attempt may have committed steps to it)
            for name in (BOOK_FILE, BOOK_FILE + "-wal", BOOK_FILE + "-shm"):
                (run_dir / name).unlink(missing_ok=True)
        if record:  # a new run's config; on resume only to record an override (--steps)
            save_config(cfg, cfg_path)
    ranks.barrier()
    return manager


def _start(trainer: Trainer, show: Progress, run_dir: Path, latest: Path | None, resume: bool,
           previous_steps: int | None) -> dict[str, int]:
    """Load the latest checkpoint, if any; the metrics files' offsets to continue from."""
    offsets = {"metrics": 0, "samples": 0}
    if latest is not None:
        state = trainer.load_checkpoint(latest)
        offsets = state["metrics_offsets"]
        show.message(f"resumed {run_dir} at step {trainer.step} from {latest.name}")
    elif resume:
        show.message(f"{run_dir}: no checkpoint yet; starting from step 0")
    if previous_steps is not None:
        show.message(extended_message(trainer.cfg, trainer.step, previous_steps, run_dir / CONFIG_FILE))
    return offsets


def _run_steps(trainer: Trainer, manager: CheckpointManager, log: MetricsLog | None, show: Progress,
               started: float, stop_after: int | None, time_limit_s: float | None,
               on_step) -> tuple[list[dict[str, Any]], bool, str]:
    """Steps until `steps`, a stop request, `stop_after` or the time limit; each step
    validated and checkpointed when due. Returns (rows, stopped, why it stopped)."""
    cfg, ranks = trainer.cfg, trainer.ranks
    rows: list[dict[str, Any]] = []
    done_here, slowest, out_of_time, stopped = 0, 0.0, False, False  # slowest: a step with its extras
    with trainer.stop:
        while trainer.step < cfg.steps:
            step_started = time.monotonic()
            rng_before = capture_rng(trainer.rng_generators())
            data_before = trainer.sampler.state()
            try:
                metrics = trainer.run_step()
            except StopRequested:
                restore_rng(rng_before, trainer.rng_generators())
                trainer.sampler.load_state(data_before)
                stopped = True
                break
            step = trainer.step
            last = step >= cfg.steps
            if (cfg.validation.every and trainer.heldout
                    and (step % cfg.validation.every == 0 or (last and cfg.validation.at_end))):
                show.set_phase("validation", step)
                figures = trainer.validate()   # every rank its share; the figures on rank 0
                if ranks.main:
                    metrics.update(figures)
            if ranks.main:
                log.log(step, metrics)
                log.log_samples(step, trainer._last_samples)
                rows.append({"step": step, **metrics})
            done_here += 1
            if time_limit_s is not None and not last:  # would the next step end past the budget?
                slowest = max(slowest, time.monotonic() - step_started)
                out_of_time = ranks.any(time.monotonic() - started + slowest > time_limit_s)
            stop_now = (ranks.any(trainer.stop.requested) or out_of_time
                        or (stop_after is not None and done_here >= stop_after))
            if step % cfg.checkpoint.every == 0 or last or stop_now:
                show.set_phase("checkpoint", step)
                trainer.save_checkpoint(manager, log)
            show.step_done(step, metrics or {})
            if on_step is not None:
                on_step(step, metrics or {})
            if stop_now:
                stopped = True
                break
        if stopped and ranks.broadcast(manager.latest() is None
                                       or read_state(manager.latest())["step"] != trainer.step):
            show.set_phase("checkpoint", trainer.step)
            trainer.save_checkpoint(manager, log)
    why = trainer.stop.reason or (f"time limit {time_limit_s:g} s" if out_of_time else "stop_after")
    return rows, stopped, why
