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
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from codea1 import grpo, models
from codea1.data.sampler import ProblemSampler
from codea1.engines import make_engine
from codea1.grpo import RoleBatch, StepBatches, make_optimizer, make_scheduler, select_batches, warmup_cosine
from codea1.judge import Judge, ProblemRollout, StepJudge
from codea1.judge.golden import StdinSettings, golden_items, golden_results
from codea1.mistakes import MistakeBook
from codea1.output_files import atomic_output, remove_stray_temps
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
from codea1.sandbox import Executor
from codea1.train import distributed as D
from codea1.train.checkpoint import (
    BOOK_FILE,
    CONFIG_FILE,
    CheckpointContents,
    CheckpointManager,
    capture_rng,
    load_rng,
    read_state,
    read_training_state,
    restore_rng,
    verify_checkpoint,
    write_checkpoint,
)
from codea1.train.config import (
    ConfigError,
    TrainConfig,
    check_run_config,
    raw_digest,
    read_run_config,
    require_data,
    resume_changes,
    save_config,
)
from codea1.train.metrics import (
    METRICS_FILE,
    TB_DIR,
    MetricsLog,
    Progress,
    _jsonable,
    a1_judge_metrics,
    golden_judge_metrics,
    read_metrics,
    sampling_detail,
    step_metrics,
    step_samples,
)
from codea1.train.one_process import OneProcess
from codea1.train.records import StepResult, StepRewards, StepRollout
from codea1.train.run_lock import LOCK_FILE, RunLock
from codea1.train.stopping import StopFlag, StopRequested, TimeBudget
from codea1.train.training_data import (  # noqa: F401  (select_problems: re-exported)
    checked_training_data,
    load_training_data,
    select_problems,
)
from codea1.train.validation import validate
from codea1.train.wandb_logger import open_wandb

__all__ = ["RoleBatch", "StopRequested", "TrainResult", "Trainer", "load_training_data", "select_problems", "train"]

ROLES = ("code", "test")


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
                 progress: Progress | None = None, ranks=None, stop: StopFlag | None = None,
                 skip_problems: Sequence[str] = ()) -> None:
        self.cfg = cfg
        self.config_sha256 = raw_digest(cfg.model_dump(mode="json"))  # state.json's, at every checkpoint
        self.run_dir = Path(run_dir)
        self.ranks = ranks if ranks is not None else OneProcess()
        self.stop = stop if stop is not None else StopFlag(asynchronous=not self.ranks.enabled)
        self.budget: TimeBudget | None = None  # the time limit (`train` sets it)
        self.pending: dict[str, Any] | None = None  # a step's row waiting for its validation
        self._committed = False  # the step under way is past its commit point
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        if models.resolve_device(cfg.model.device).type == "cpu":
            models.keep_freed_memory()  # activations reuse freed memory: no page faults an update
        # seed before the models load: LoRA initialisation draws from torch's RNG
        random.seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        torch.manual_seed(cfg.seed)
        with self.stop.abandonable():  # loading changes nothing of the run's: a stop ends it at once
            say = progress.message if progress is not None and self.ranks.main else None
            self.train_problems, self.heldout = load_training_data(cfg, say)
            self.skipped_problems = list(skip_problems)  # broken references (`data.check=skip`)
            self.train_problems = [p for p in self.train_problems if p.id not in set(skip_problems)]
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
        self.limits = cfg.judge.sandbox_limits()
        workers = cfg.judge.workers if not self.ranks.enabled else D.local_workers(cfg.judge.workers, self.ranks)
        self._executor_cm = Executor(workers=workers, limits=self.limits)
        self.executor = self._executor_cm.__enter__()
        self.judge: StepJudge | None = self._make_judge() if cfg.mode != "golden" else None
        self.book = MistakeBook(self.run_dir / BOOK_FILE) if self.ranks.main else None  # rank 0's alone
        self.step = 0
        self.progress = progress

    def describe(self) -> str:
        """One line at start: the model file, its dtype and device, and the rollout engine."""
        resolved = getattr(self.policies, "resolved", None)
        model = resolved.describe() if resolved is not None else str(self.cfg.model.name)
        dtype = str(getattr(self.policies, "dtype", "")).removeprefix("torch.")
        return (f"model {model}, {dtype} on {getattr(self.policies, 'device', '?')} (model.dtype="
                f"{self.cfg.model.dtype}), {self.cfg.model.mode}; rollout engine {self.engine.name}")

    def _sampler(self) -> ProblemSampler:
        d = self.cfg.data
        return ProblemSampler(len(self.train_problems), self.cfg.seed, d.shuffle, batch_size=d.problems_per_step,
                              cross_epochs=d.cross_epochs, ids=[p.id for p in self.train_problems])

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

    def _make_judge(self) -> StepJudge:
        j = self.cfg.judge
        if j.backend != "ray":
            return Judge(self.executor, j.judge_config())
        from codea1.judge.ray_backend import RayJudge  # (ray: an optional extra)

        return RayJudge(j.judge_config(), self.limits, workers=j.workers, address=j.ray_address, actors=j.ray_actors,
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

    def save_checkpoint(self, manager: CheckpointManager, log: MetricsLog | None) -> Path | None:
        """Rank 0 writes the checkpoint (the others join in gathering sharded weights)."""
        weights = optim = None
        if self.sharded:  # FSDP2: gather whole weights and optimiser state (collective)
            weights, optim = D.gather_full_states(self.policies, self.optimizers)
        if not self.ranks.main:
            self.ranks.barrier()
            return None

        state = {
            "step": self.step,
            "data": self.sampler.state(),
            "metrics_offsets": None,  # (`write_checkpoint` syncs the metrics files, then records them)
            "config_sha256": self.config_sha256,
            "config": self.cfg.model_dump(mode="json"),  # a resume compares config.yaml with it
            "pending": self.pending,  # a step's row whose validation a stop cut short
            "skipped_problems": self.skipped_problems,
            "mode": self.cfg.mode,
            "saved_at": time.time(),
        }
        path = write_checkpoint(manager, self.step, CheckpointContents(
            self.policies, self.optimizers, self.schedulers, self.book, state, weights, optim, metrics=log))
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
        restore_rng(load_rng(path / "rng.pt"))
        self.step = int(state["step"])
        return state

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.book is not None:
                self.book.close()
        with contextlib.suppress(Exception):
            self.engine.close()
        with contextlib.suppress(Exception):
            if self.judge is not None:
                self.judge.close()
        self._executor_cm.__exit__(None, None, None)

    # ------------------------------------------------------------------ one step

    def run_step(self) -> StepResult:
        """One training step; returns its metrics, samples and batches. May raise
        StopRequested before the commit."""
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
            update_metrics = self._update(batches, rollout.slots)
        self.step = step
        metrics = step_metrics(rollout, rewards, book_metrics, update_metrics, times, epoch=self.sampler.epoch,
                               dropped=self.dropped)
        samples = step_samples(rollout, rewards, batches, cfg.logging.samples_per_step)
        if self.ranks.enabled:
            metrics["time/comm_s"] = self.ranks.comm_s - comm_before
        metrics["time/step_s"] = time.perf_counter() - started
        return StepResult(step, self.ranks.step_metrics(metrics, len(rollout.problems)),
                          self.ranks.step_samples(samples, rollout.slots, cfg.logging.samples_per_step), batches)

    @contextlib.contextmanager
    def phase(self, name: str, times: dict[str, float], may_stop: bool = True) -> Iterator[None]:
        """Show and time one phase of the step (`time/NAME_s`); a stop asked for during a
        phase before the commit point abandons the step when the phase ends."""
        if may_stop:
            self._committed = False
        elif not self._committed:  # the step's commit point: refused when the rest cannot finish in time
            self._committed = True
            self._before_commit(times)
        self._phase(name)
        started = time.perf_counter()
        # before the commit point a stop abandons the phase at once (`StopFlag.abandonable`)
        with self.stop.abandonable() if may_stop else contextlib.nullcontext():
            yield
        times[name.replace(" ", "_")] = time.perf_counter() - started
        if may_stop:
            self._check_stop()

    def _before_commit(self, times: dict[str, float]) -> None:
        """A stop asked for since the last phase, or a time limit the rest of the step
        (Mistake Book, update, checkpoint) would overrun, abandons the step here, the last
        point where it has changed nothing."""
        self._check_stop()
        refusal = self.budget.refuse_commit(self.step + 1, sum(times.values())) if self.budget else None
        if self.ranks.any(refusal is not None):
            self.stop.requested, self.stop.reason = True, refusal or "the time limit on another rank"
            raise StopRequested(self.stop.reason)

    def _phase(self, name: str) -> None:
        if self.progress is not None:
            self.progress.set_phase(name, self.step + 1)

    def _check_stop(self, interrupted: bool = False) -> None:
        # every rank meets here at the same points of the step: a stop asked for on any
        # rank (or a rollout interrupted there) stops the step on all of them
        if self.ranks.any(self.stop.poll() or interrupted):
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
        seeds = sample_seeds(self.cfg.seed, r.step, "code", [(s,) for s in r.slots])
        r.code_samples = self.generate("code", [code_messages(p, own) for p in r.problems], self.cfg.rollout.n_code,
                                       self.cfg.rollout.code, r.code_stats, seeds)
        # the code the judge runs (its fence rule): the white-box test prompts and golden mode see it too
        r.codes = [[self.cfg.judge.code_of(s.text) for s in group] for group in r.code_samples]

    def _test_rollout(self, r: StepRollout) -> None:
        """n_test suites per candidate: white-box, each written against its candidate's code;
        black-box, n_code * n_test per problem from the question alone, split among them."""
        ro = self.cfg.rollout
        prompts, where = [], []
        for pi, p in enumerate(r.problems):
            for ci, code in (enumerate(r.codes[pi]) if ro.white_box else [(None, None)]):
                prompts.append(self.test_prompt(p, code, ro.test, r.test_stats))
                where.append((pi, ci))
        n = ro.n_test if ro.white_box else ro.n_test * ro.n_code
        seeds = sample_seeds(self.cfg.seed, r.step, "test",
                             [(r.slots[pi],) if ci is None else (r.slots[pi], ci) for pi, ci in where])
        out = self.generate("test", prompts, n, ro.test, r.test_stats, seeds)
        r.suites = [[] for _ in r.problems]
        for (pi, ci), group in zip(where, out):
            if ci is not None:
                r.suites[pi].append(group)
            else:
                r.suites[pi] = [group[c * ro.n_test:(c + 1) * ro.n_test] for c in range(ro.n_code)]

    def generate(self, role: str, prompts, n: int, sampling, stats, seeds: Sequence[int], *,
                 label: str = "", stoppable: bool = True) -> list[list[Any]]:
        """`n` samples per prompt from the run's rollout engine with `role`'s weights (whole
        ones under FSDP2), shown on the live display (`label` first): the one rollout door
        of training and validation. `seeds`: one stream a prompt (`rollout.sample_seeds`).
        `stoppable`: a stop asked for mid-call abandons it (raises StopRequested)."""
        if self.progress is not None:
            rows = n * len(prompts)
            self.progress.watch(lambda: label + sampling_detail(stats.tokens_decoded, rows, len(prompts)))
        try:
            with self.sampling_weights(role):
                return self.engine.generate(role, encode_prompts(self.policies.tokenizer, prompts), n=n,
                                            sampling=sampling, seeds=seeds, stats=stats,
                                            should_stop=self.stop.poll if stoppable else None)
        except GenerationInterrupted:
            # nothing of this step is committed yet: abandon it like any stop before commit
            self._check_stop(interrupted=True)
            raise StopRequested(self.stop.reason) from None

    def test_prompt(self, problem, code: str | None, sampling, stats):
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

    def sampling_weights(self, role: str):
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
        if self.progress is not None and self.judge.progress is not None:  # (the Ray backend counts none)
            judge = self.judge
            self.progress.watch(lambda: str(judge.progress))
        code, test, metrics, judgements = self._judge_a1(r.problems, r.code_samples, r.suites, mistakes)
        return StepRewards(code, test, judgements, metrics)

    def _judge_golden(self, problems, codes) -> StepRewards:
        items = golden_items(problems, codes)
        results = golden_results(self.executor, items, self.limits, StdinSettings.of(self.cfg.judge))
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
                show = (self.progress.update_parts(key, len(batch.trajectories))
                        if self.progress is not None else None)
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

    # ------------------------------------------------------------------ validation

    def validate(self) -> dict[str, Any]:
        """Held-out figures (`codea1.train.validation.validate`); every rank calls it."""
        return validate(self)


# --------------------------------------------------------------------------- entry point


def _resume_config(config: TrainConfig | None, run_dir: Path, steps: int | None
                   ) -> tuple[TrainConfig, Path | None, bool, list[str], int | None]:
    """The config a resumed run continues with, its latest checkpoint (None: none yet),
    whether config.yaml must be rewritten to record a change, the other keys changed, and
    the total the run was trained toward where `steps` changes (else None).

    The run's config.yaml must be whole and the one its latest checkpoint was trained
    with; a `config` given differs from it only in keys of `RESUME_CHANGEABLE` (threads,
    the display, logging sinks...), and `steps` is a new total. A new total asked for with
    `--set steps=N`, or written into config.yaml by hand, is held to `--steps N`'s rules:
    the schedule and the step the run is at do not care where the number came from.
    """
    cfg_path = run_dir / CONFIG_FILE
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path}: missing; {run_dir} is not a run directory to resume")
    saved, raw = read_run_config(cfg_path)
    latest = CheckpointManager(run_dir, keep=saved.checkpoint.keep).latest()
    # every file of the checkpoint readable before minutes of model loading
    state = verify_checkpoint(latest, BOOK_FILE) if latest is not None else None
    check_run_config(raw, cfg_path, state, latest)
    changed = [] if config is None else resume_changes(saved.model_dump(mode="json"), config.model_dump(mode="json"),
                                                       f"resuming {run_dir}", str(cfg_path))
    changed = [k for k in changed if k != "steps"]
    at = int(state["step"]) if state is not None else 0
    # the total the checkpoint was trained toward (config.yaml's may have been edited since)
    before = int(state["config"]["steps"]) if state is not None and "config" in state else saved.steps
    cfg = config if config is not None else saved
    asked = f"--steps {steps}"
    if steps is None and cfg.steps != before:
        steps = cfg.steps
        asked = f"--set steps={steps}" if config is not None and config.steps != saved.steps else \
            f"steps: {steps} in {cfg_path}"
    if steps is not None and steps <= at:
        undo = (f"or no --steps to run to {saved.steps}" if asked.startswith("--steps") else
                f"or no --set steps to run to {saved.steps}" if asked.startswith("--set") else
                f"or set it back to {before}")
        raise ConfigError(f"{asked}: {run_dir} is already at step {at} (of {before}); "
                          f"give a total above {at}, {undo}")
    if steps is not None:
        cfg = cfg.model_copy(update={"steps": steps})
    record = bool(changed) or cfg.steps != saved.steps
    return cfg, latest, record, changed, (before if cfg.steps != before else None)


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
      `config.yaml` is used), or differ from it in keys of `RESUME_CHANGEABLE` only
      (recorded in config.yaml).
    - `steps`: overrides `config.steps` (the total, which the LR schedule spans).
    - `stop_after`: stop (with a checkpoint) after this many steps of this call, as if
      interrupted; used to test resuming.
    - `time_limit_s`: a wall-clock budget for this call, counted from the call: no part
      of the run starts that would end past it (a step, the rest of a step after its
      commit point, a validation; estimated from the longest measured so far), and at the
      budget's end the part under way is dropped if it has changed nothing (a step's
      rollouts and judge, a validation, the loading of the models); then a checkpoint
      (resumable). The LR schedule still spans `steps`.
    - `policies`: already loaded `codea1.models.Policies` (else loaded from the config).
    - `on_step(step, metrics)`: called after each step (and its checkpoint).

    The run directory is locked (`codea1.train.run_lock`) while this runs: a second
    trainer is refused. Under torchrun (WORLD_SIZE > 1) every rank calls this with the
    same arguments; rank 0's run directory is the run's, and rank 0 alone writes to it
    (`codea1.train.distributed`).
    """
    started = time.monotonic()
    run_dir = Path(run_dir)
    cfg_path = run_dir / CONFIG_FILE
    if not resume and config is None:
        raise ValueError("train: a config is needed for a new run")
    if not resume and cfg_path.exists() and (run_dir / "checkpoints").exists():
        raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} or a new --run-dir")
    if resume and not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path}: missing; {run_dir} is not a run directory to resume")
    lock = RunLock(run_dir, enabled=os.environ.get("RANK", "0") == "0")
    if not resume and steps is not None:
        config = config.model_copy(update={"steps": steps})
    # a stop before the models load (the data check can take minutes) ends the call at once, as
    # one while they load does (several ranks: not here, a rank that left alone would hang the
    # others at their first collective)
    early = StopFlag(started + time_limit_s if time_limit_s is not None else None, checkpoints=False) \
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1 else None
    with lock:  # before the run's config is read: a trainer in the directory may be rewriting it
        previous, changed, latest = None, [], None
        try:
            with early or contextlib.nullcontext(), early.abandonable() if early else contextlib.nullcontext():
                if resume:
                    config, latest, record, changed, previous = _resume_config(config, run_dir, steps)
                else:
                    latest, record = None, True
                cfg = config
                require_data(cfg)
                skip, skip_lines = _data_skips(cfg, latest)  # (seconds, before minutes of model loading)
        except StopRequested:
            if not resume:  # a new run: its config, to be started with --resume (nothing else is written)
                save_config(config, cfg_path)
            print(_stopped_message(None, run_dir, early.reason if early else "", latest, "before the models loaded"),
                  file=sys.stderr, flush=True)
            return TrainResult(run_dir, int(read_state(latest)["step"]) if latest is not None else 0, True)
        except BaseException:
            lock.discard()  # refused: the run directory as it was
            raise
        ranks = D.init_ranks(cfg)
        before = _NewRunUndo(run_dir) if not resume and lock.enabled else None
        try:
            return _train(cfg, ranks, run_dir, resume, latest, record, started, stop_after, time_limit_s,
                          policies, progress, on_step,
                          previous_steps=previous, changed=changed, skip=(skip, skip_lines))
        except Exception:
            with contextlib.suppress(OSError):  # (a full disk: the error that ended the run is the one to see)
                if before is not None and before.undo(cfg.checkpoint.keep):
                    lock.discard()
            raise
        finally:
            ranks.close()


class _NewRunUndo:
    """What a new run's directory held before the run wrote to it: a new run that fails before
    its first step (bad data for the model, a folder that is not a model...) takes back what
    it wrote, so the directory is as it was and no `--resume` repeats the error. (A run that
    logged a step keeps its files: they say what happened.)"""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.names = {p.name for p in run_dir.iterdir()} if run_dir.is_dir() else set()
        config = run_dir / CONFIG_FILE
        self.config = config.read_bytes() if config.is_file() else None  # a crashed first attempt's
        self.metrics = self._metrics()

    def _metrics(self) -> tuple[int, int] | None:
        """metrics.jsonl's size and modification time (None: there is none)."""
        try:
            st = (self.run_dir / METRICS_FILE).stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def undo(self, keep: int) -> bool:
        """Remove what the run created, unless it logged a step (metrics.jsonl written since
        it began, and not empty) or wrote a checkpoint (then a resume continues it); whether
        it did."""
        now = self._metrics()
        if (not self.run_dir.is_dir() or CheckpointManager(self.run_dir, keep=keep).latest() is not None
                or (now != self.metrics and now is not None and now[0] > 0)):
            return False
        for path in self.run_dir.iterdir():
            if path.name in self.names or path.name == LOCK_FILE:  # (the lock: `RunLock.discard`'s)
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        if self.config is not None:
            with atomic_output(self.run_dir / CONFIG_FILE) as tmp:
                tmp.write_bytes(self.config)
        return True


def _data_skips(cfg: TrainConfig, latest: Path | None) -> tuple[list[str], list[str]]:
    """The training problems left out (`data.check`), and a line for each: as the run's
    checkpoint recorded them (a resume trains on the same problems, whatever a recheck
    would say), else checked now (`checked_training_data`)."""
    if latest is not None:
        return list(read_state(latest).get("skipped_problems", [])), []
    return checked_training_data(cfg)


def _train(cfg: TrainConfig, ranks, run_dir: Path, resume: bool, latest: Path | None, record: bool,
           started: float, stop_after: int | None, time_limit_s: float | None, policies, progress: str | None,
           on_step, previous_steps: int | None = None, changed: Sequence[str] = (),
           skip: tuple[Sequence[str], Sequence[str]] = ((), ())) -> TrainResult:
    run_dir = Path(ranks.broadcast(str(run_dir)))  # rank 0's (a default name holds the time)
    ranks.run_dir = str(run_dir)  # what a lost rank's message tells the user to resume
    latest = ranks.broadcast(latest)  # one answer for every rank
    manager = _prepare_run_dir(cfg, ranks, run_dir, latest, record)
    show = Progress(cfg.steps, style=(progress or cfg.logging.progress) if ranks.main else "none",
                    notices=ranks.main)
    stop = StopFlag(started + time_limit_s if time_limit_s is not None else None,
                    asynchronous=not ranks.enabled, say=show.notice, checkpoints=False)  # (none while loading)
    trainer = log = None
    rows: list[dict[str, Any]] = []
    stopped, why = False, ""
    try:
        with stop:  # from here on a stop ends the run with a message (and, once loaded, a checkpoint)
            for line in skip[1]:
                show.message(line)
            show.set_phase("loading the models")
            try:
                trainer = Trainer(cfg, run_dir, policies=policies, progress=show, ranks=ranks, stop=stop,
                                  skip_problems=skip[0])
            except StopRequested:
                stopped, why = True, stop.reason
            if trainer is not None:
                stop.checkpoints = True
                show.message(trainer.describe())
                trainer.budget = TimeBudget(stop.deadline)
                pending = _start(trainer, show, run_dir, latest, resume, previous_steps, changed)
                if ranks.main:
                    log = MetricsLog(run_dir, tensorboard=cfg.logging.tensorboard, offsets=trainer.offsets,
                                     purge_step=(pending["step"] if pending else trainer.step + 1) if resume else None,
                                     wandb=open_wandb(cfg, run_dir, resume))
                    trainer.budget.learn(read_metrics(run_dir))  # the run's earlier steps' times
                show.start_step = show.step = trainer.step
                show.current = trainer.step + 1
                rows, stopped, why = _run_steps(trainer, manager, log, show, pending, stop_after, on_step)
        if stopped:
            show.notice(_stopped_message(trainer, run_dir, why, latest))
    finally:
        if log is not None:
            log.close()
        show.close()
        if trainer is not None:
            trainer.close()
    at = trainer.step if trainer is not None else (int(read_state(latest)["step"]) if latest is not None else 0)
    return TrainResult(run_dir, at, stopped, rows)


def _stopped_message(trainer: Trainer | None, run_dir: Path, why: str, latest: Path | None = None,
                     where: str = "while loading the models") -> str:
    """The line a stop ends the call with; `trainer` None: it came `where`, before any step of
    this call (`latest`: the checkpoint a resume would have started from)."""
    resume = f"codea1 train --resume {run_dir}"
    if trainer is None:
        done = "the run is as it was; resume with" if latest is not None else "nothing trained yet; start it again with"
        return f"stopped {where} ({why}); {done}: {resume}"
    where = "during the start-up validation" if trainer.pending and trainer.pending["step"] == 0 else \
        f"at step {trainer.step}"
    return f"stopped {where} ({why}); checkpoint saved; resume with: {resume}"


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
            # empty Mistake Book and no TensorBoard events (a crashed first attempt may have
            # committed steps to the one and logged them to the other)
            for name in (BOOK_FILE, BOOK_FILE + "-wal", BOOK_FILE + "-shm"):
                (run_dir / name).unlink(missing_ok=True)
            shutil.rmtree(run_dir / TB_DIR, ignore_errors=True)
        if record:  # a new run's config; on resume only to record a change (--steps, --set threads=1)
            save_config(cfg, cfg_path)
    ranks.barrier()
    return manager


def _start(trainer: Trainer, show: Progress, run_dir: Path, latest: Path | None, resume: bool,
           previous_steps: int | None, changed: Sequence[str] = ()) -> dict[str, Any] | None:
    """Load the latest checkpoint, if any (`trainer.offsets`: where the metrics files
    continue); returns the row waiting for its validation (step 0's at the start of a
    run, or the row of a step whose validation a stop cut short), or None."""
    cfg, state = trainer.cfg, None
    trainer.offsets = {"metrics": 0, "samples": 0}
    if latest is not None:
        state = trainer.load_checkpoint(latest)
        trainer.offsets = state["metrics_offsets"]
        show.message(f"resumed {run_dir} at step {trainer.step} from {latest.name}")
    elif resume:
        show.message(f"{run_dir}: no checkpoint yet; starting from step 0")
    if previous_steps is not None:
        show.message(extended_message(cfg, trainer.step, previous_steps, run_dir / CONFIG_FILE))
    if changed:
        show.message(f"changed on resume (recorded in {run_dir / CONFIG_FILE}): " +
                     ", ".join(f"{k}={_dotted(cfg.model_dump(mode='json'), k)!r}" for k in changed))
    if state is not None and "pending" in state:
        pending = state["pending"]
    else:  # a new run, or a checkpoint of an older version (its step 0 row logged if validated)
        at_start = bool(cfg.validation.every and cfg.validation.at_start and trainer.heldout)
        pending = ({"step": 0, "metrics": {}, "samples": [], "validate": True}
                   if trainer.step == 0 and at_start and not trainer.offsets.get("metrics") else None)
    trainer.pending = pending
    return pending


def _dotted(data: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _run_steps(trainer: Trainer, manager: CheckpointManager, log: MetricsLog | None, show: Progress,
               pending: dict[str, Any] | None, stop_after: int | None,
               on_step) -> tuple[list[dict[str, Any]], bool, str]:
    """Steps until `steps`, a stop request, `stop_after` or the time limit; each step
    validated and checkpointed when due. Returns (rows, stopped, why it stopped)."""
    cfg, ranks, stop, budget = trainer.cfg, trainer.ranks, trainer.stop, trainer.budget
    rows: list[dict[str, Any]] = []
    done_here, stopped, why = 0, False, ""
    row_unsaved = False  # a row completed here that the latest checkpoint still holds pending
    if pending is not None:  # step 0's validation, or one a stop cut short: first of all
        why = _complete_row(trainer, log, show, pending, rows)
        stopped = bool(why)
        row_unsaved = not stopped and ranks.broadcast(manager.latest() is not None)
    while not stopped and trainer.step < cfg.steps:
        step = trainer.step + 1
        refusal = budget.refuse_step(step, _validates(cfg, trainer, step)) if ranks.main else None
        if ranks.any(stop.poll() or refusal is not None):
            stopped, why = True, refusal or stop.reason or "a stop on another rank"
            break
        rng_before = capture_rng()
        data_before = trainer.sampler.state()
        try:
            result = trainer.run_step()
        except StopRequested:
            restore_rng(rng_before)
            trainer.sampler.load_state(data_before)
            stopped, why = True, stop.reason
            break
        metrics = result.metrics
        budget.record_step({"step": step, **(metrics or {})})  # (rank 0's: the others have none)
        why = _complete_row(trainer, log, show, {"step": step, "metrics": metrics, "samples": result.samples,
                                                 "validate": _validates(cfg, trainer, step)}, rows)
        done_here += 1
        stop_now = bool(why) or ranks.any(stop.poll()) or (stop_after is not None and done_here >= stop_after)
        why = why or stop.reason or ("stop_after" if stop_after is not None and done_here >= stop_after else "")
        if step % cfg.checkpoint.every == 0 or step >= cfg.steps or stop_now:
            _save(trainer, manager, log, show)
            row_unsaved = False
        show.step_done(step, metrics or {})
        if on_step is not None:
            on_step(step, metrics or {})
        if stop_now:
            stopped = True
            break
    if row_unsaved or (stopped and ranks.broadcast(manager.latest() is None
                                                   or read_state(manager.latest())["step"] != trainer.step)):
        _save(trainer, manager, log, show)  # (row_unsaved: step N's checkpoint again, its row no longer pending)
    return rows, stopped, why


def _validates(cfg: TrainConfig, trainer: Trainer, step: int) -> bool:
    """Whether step `step` ends with a validation."""
    v = cfg.validation
    return bool(v.every and trainer.heldout and (step % v.every == 0 or (step >= cfg.steps and v.at_end)))


def _save(trainer: Trainer, manager: CheckpointManager, log: MetricsLog | None, show: Progress) -> None:
    show.set_phase("checkpoint", trainer.step)
    t = time.monotonic()
    trainer.save_checkpoint(manager, log)
    trainer.budget.record("checkpoint_s", time.monotonic() - t)


def _complete_row(trainer: Trainer, log: MetricsLog | None, show: Progress, row: dict[str, Any],
                  rows: list[dict[str, Any]]) -> str:
    """Validate where `row` asks for it, then log the row (rank 0). A stop or the time
    limit during the validation drops it (nothing of it is kept) and leaves the row in
    `trainer.pending`, for the checkpoint: a resume validates and logs it first, so the
    files end as an uninterrupted run's. Returns why it stopped, or ''."""
    step, metrics = row["step"], dict(row["metrics"] or {})
    trainer.pending = _jsonable(row)
    if row.get("validate"):
        ranks = trainer.ranks
        refusal = trainer.budget.refuse(f"the validation after step {step}", trainer.budget.validation_s) \
            if step and ranks.main else None
        if ranks.any(refusal is not None):
            return refusal or "the time limit on another rank"
        show.set_phase("validation", step)
        rng = capture_rng()
        try:
            with trainer.stop.abandonable():
                figures = trainer.validate()  # every rank its share; the figures on rank 0
        except StopRequested:
            restore_rng(rng)
            return trainer.stop.reason
        trainer.budget.record("validation_s", figures.get("time/validation_s", 0.0))
        metrics.update(figures)
    trainer.pending = None
    if log is not None and (step or metrics):  # (step 0: a row only where a validation gave figures)
        log.log(step, metrics)
        if step:
            log.log_samples(step, row["samples"])
        rows.append({"step": step, **metrics})
    return ""
