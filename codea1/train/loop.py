"""The Code-A1 training loop: one step is rollouts, judge, rewards, Mistake Book, GRPO.

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
import math
import os
import signal
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from codea1.data.sampler import ProblemSampler
from codea1.train.checkpoint import (
    CheckpointManager,
    capture_rng,
    load_rng,
    read_state,
    remove_stray_temps,
    restore_rng,
    save_rng,
    verify_checkpoint,
    write_json,
)
from codea1.train.config import (
    REQUIRED,
    ConfigError,
    TrainConfig,
    check_run_config,
    raw_digest,
    read_run_config,
    require_data,
    save_config,
)
from codea1.train.metrics import MetricsLog, Progress
from codea1.train.wandb_logger import open_wandb

CONFIG_FILE = "config.yaml"
BOOK_FILE = "mistakes.sqlite"
ROLES = ("code", "test")


class StopRequested(Exception):
    """Raised inside a step when a stop was asked for before the step changed anything."""


# --------------------------------------------------------------------------- data


def load_training_data(cfg: TrainConfig):
    """(train problems, held-out problems) as the config names them."""
    from codea1.data import bundled_problems, bundled_split, load_problems

    if REQUIRED in (cfg.data.train, cfg.data.heldout):
        require_data(cfg)

    def load(field: str, text: str, bundled_means: str) -> list:
        try:
            split = bundled_split(text)   # `bundled` alone: the train (or held-out) split
        except ValueError as exc:
            raise ValueError(f"data.{field}: {exc}") from None
        if split is None:
            return load_problems(text)
        return bundled_problems(bundled_means if text == "bundled" else split)

    train = load("train", cfg.data.train, "train")
    heldout = [] if cfg.data.heldout is None else load("heldout", cfg.data.heldout, "heldout")
    if not train:
        raise ValueError(f"data.train {cfg.data.train!r}: no problems")
    if cfg.data.include is not None:
        train = select_problems(train, cfg.data.include, source=cfg.data.train)
    return train, heldout


def select_problems(problems: list, include: list[str], source: str = "data.train") -> list:
    """The problems whose id is one of `include` or matches one of its shell patterns, in
    their original order. A pattern that matches no problem is an error (a typo would
    otherwise shrink the training set in silence)."""
    from fnmatch import fnmatchcase

    if not include:
        raise ValueError("data.include is empty: list problem ids or patterns, or set it to null for all")
    chosen, used = [], set()
    for p in problems:
        hits = {pat for pat in include if fnmatchcase(p.id, pat)}
        if hits:
            chosen.append(p)
            used |= hits
    missing = [pat for pat in include if pat not in used]
    if missing:
        raise ValueError(
            f"data.include: no problem of {source!r} matches {', '.join(repr(m) for m in missing)} "
            + (f"(its ids look like {problems[0].id!r})" if problems else "(it holds no problems)")
            + "; --set data.include=null trains on all"
        )
    return chosen


# --------------------------------------------------------------------------- signals


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
class RoleBatch:
    """The trajectories one policy trains on in a step, and why others were dropped."""

    trajectories: list = field(default_factory=list)
    groups_total: int = 0
    groups_kept: int = 0
    chosen: dict = field(default_factory=dict)  # problem index -> candidates whose samples train
    origins: list = field(default_factory=list)  # per trajectory: (0 code / 1 test, problem index)


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
        import numpy as np
        import torch

        from codea1.grpo import make_optimizer, make_scheduler
        from codea1.mistakes import MistakeBook
        from codea1.models import load_policies
        from codea1.rollout import context_length
        from codea1.sandbox import Executor, Limits
        from codea1.train import distributed as D

        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.ranks = ranks if ranks is not None else D.Ranks()
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        # seed before the models load: LoRA initialisation draws from torch's RNG
        import random

        random.seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        torch.manual_seed(cfg.seed)

        self.train_problems, self.heldout = load_training_data(cfg)
        # the batch must fit the data: refused here, before minutes of model loading ...
        ProblemSampler(len(self.train_problems), cfg.seed, cfg.data.shuffle,
                       batch_size=cfg.data.problems_per_step, cross_epochs=cfg.data.cross_epochs)
        self.policies = policies if policies is not None else load_policies(D.rank_model_config(cfg, self.ranks))
        # both roles share one architecture: one context bounds every prompt
        self.context = context_length(self.policies.module("code"))
        self.dropped = self._drop_overlong(progress)
        # ... and again once the over-long prompts are gone
        self.sampler = ProblemSampler(len(self.train_problems), cfg.seed, cfg.data.shuffle,
                                      batch_size=cfg.data.problems_per_step, cross_epochs=cfg.data.cross_epochs)
        self.sharded = D.uses_fsdp(cfg, self.ranks)
        compute_dtype = None
        if self.sharded:
            from codea1.models import resolve_dtype

            compute_dtype = resolve_dtype(cfg.model.dtype, self.policies.device)
            D.shard_policies(self.policies, self.ranks, compute_dtype)
        self.grad_sync = D.GradSync(self.ranks, sharded=self.sharded) if self.ranks.enabled else None
        from codea1.engines import make_engine

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
            role = "code" if key == "shared" else key
            opt = make_optimizer(self.policies.trainable_parameters(role), cfg.grpo)
            self.optimizers[key] = opt
            self.schedulers[key] = make_scheduler(opt, cfg.grpo, cfg.steps)
        self.limits = Limits(timeout_s=cfg.judge.timeout_s, call_timeout_s=cfg.judge.call_timeout_s,
                             memory_mb=cfg.judge.memory_mb)
        self._executor_cm = Executor(workers=D.local_workers(cfg.judge.workers, self.ranks), limits=self.limits)
        self.executor = self._executor_cm.__enter__()
        self.judge = None
        if cfg.mode != "golden":
            from codea1.judge import Judge, JudgeConfig
            from codea1.judge.judge import REFERENCE_SWITCHES

            judge_config = JudgeConfig(
                alpha=cfg.judge.alpha, suite_size=cfg.judge.suite_size,
                nonprintable_penalty=cfg.judge.nonprintable_penalty, limits=self.limits,
                **cfg.judge.model_dump(include=set(REFERENCE_SWITCHES)))
            if cfg.judge.backend == "ray":
                from codea1.judge.ray_backend import RayJudge

                j = cfg.judge
                self.judge = RayJudge(judge_config, self.limits, workers=j.workers, address=j.ray_address,
                                      actors=j.ray_actors, batch_problems=j.ray_batch_problems,
                                      in_flight=j.ray_in_flight, retries=j.ray_retries, require=j.ray_require)
            else:
                self.judge = Judge(self.executor, judge_config)
        self.book = MistakeBook(self.run_dir / BOOK_FILE) if self.ranks.main else None  # rank 0's alone
        self.step = 0
        self.progress = progress
        self.stop = StopFlag()

    def _drop_overlong(self, progress: Progress | None) -> dict[str, list[str]]:
        """Drop the problems whose code prompt is longer than the code model may read, as
        the reference's data filter does (training data by `rollout.code`, held-out data by
        `validation.sampling`); returns the dropped ids and says how many went. With
        `cut_prompts_left` (the project's older rule) they stay and are cut."""
        from codea1.rollout import prompt_limit, split_overlong

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
        import torch

        from codea1.train import distributed as D

        weights = optim = None
        if self.sharded:  # FSDP2: gather whole weights and optimiser state (collective)
            weights = {k: D.full_state(self.policies, k) for k in self.policies.weight_keys}
            optim = {k: D.full_optimizer_state(self.policies, "shared" if k == "shared" else k, o)
                     for k, o in self.optimizers.items()}
        if not self.ranks.main:
            self.ranks.barrier()
            return None

        def write(tmp: Path) -> None:
            self.policies.save(tmp / "policies", states=weights)
            torch.save({
                "optimizers": optim or {k: o.state_dict() for k, o in self.optimizers.items()},
                "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
            }, tmp / "optim.pt")
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
        import torch

        from codea1.train import distributed as D

        state = read_state(path)
        opt = torch.load(path / "optim.pt", weights_only=False)
        if self.sharded:
            weights = self.policies.read_weights(path / "policies")
            for key in self.policies.weight_keys:
                D.load_full_state(self.policies, key, weights[key])
            for key, o in self.optimizers.items():
                D.load_full_optimizer_state(self.policies, key, o, opt["optimizers"][key])
        else:
            self.policies.load(path / "policies")
            for key, o in self.optimizers.items():
                o.load_state_dict(opt["optimizers"][key])
        steps_changed = state.get("config", {}).get("steps", self.cfg.steps) != self.cfg.steps
        for key, s in self.schedulers.items():
            s.load_state_dict(opt["schedulers"][key])
            if steps_changed:  # --resume --steps N: the next step already follows the N-step schedule
                for group, base, rate in zip(s.optimizer.param_groups, s.base_lrs, s.lr_lambdas):
                    group["lr"] = base * rate(s.last_epoch)
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

    # ------------------------------------------------------------------ phases

    def _phase(self, name: str) -> None:
        if self.progress is not None:
            self.progress.set_phase(name, self.step + 1)

    def _check_stop(self, interrupted: bool = False) -> None:
        # every rank meets here at the same points of the step: a stop asked for on any
        # rank (or a rollout interrupted there) stops the step on all of them
        if self.ranks.any(self.stop.requested or interrupted):
            raise StopRequested(self.stop.reason or "a stop on another rank")

    def _generate(self, role: str, prompts, n: int, sampling, gen_stats, places):
        """Sample; each prompt's stream is seeded from `places` (its slot in the step, ...)."""
        from codea1.rollout import GenerationInterrupted, encode_prompts
        from codea1.train.distributed import sample_seeds

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
        from codea1.rollout import fit_test_prompt, prompt_limit, test_messages

        n_tests, white_box = self.cfg.judge.suite_size, code is not None
        if sampling.cut_prompts_left:
            return test_messages(problem, code=code, white_box=white_box, n_tests=n_tests)
        limit = prompt_limit(sampling, self.context)
        ids, shortened = fit_test_prompt(self.policies.tokenizer, problem, code, limit,
                                         white_box=white_box, n_tests=n_tests)
        stats.prompts_shortened += int(shortened)
        return ids

    def run_step(self) -> dict[str, Any]:
        """One training step; returns its metrics. May raise StopRequested before commit."""
        from codea1.judge import extract_code
        from codea1.rollout import GenerationStats, code_messages
        from codea1.train import distributed as D

        cfg = self.cfg
        step = self.step + 1
        times: dict[str, float] = {}
        metrics: dict[str, Any] = {}
        t_step = time.perf_counter()

        # 1. problems (every rank draws the step's problems and keeps its own slots)
        idx = self.sampler.take(cfg.data.problems_per_step)
        step_problems = [self.train_problems[i] for i in idx]
        slots = self.ranks.slots(len(step_problems))
        problems = [step_problems[s] for s in slots]
        comm_before = self.ranks.comm_s

        # 2. code rollout
        self._phase("code rollout")
        t = time.perf_counter()
        code_stats = GenerationStats()
        own = not cfg.rollout.project_code_prompt
        code_samples = self._generate("code", [code_messages(p, own) for p in problems],
                                      cfg.rollout.n_code, cfg.rollout.code, code_stats, [(s,) for s in slots])
        codes = [[extract_code(s.text) for s in group] for group in code_samples]
        times["code_rollout"] = time.perf_counter() - t
        self._check_stop()

        # 3. test rollout (white-box: per candidate)
        test_samples: list[list[list[Any]]] = [[] for _ in problems]
        test_stats = GenerationStats()
        if cfg.mode != "golden":
            self._phase("test rollout")
            t = time.perf_counter()
            prompts, where = [], []
            for pi, p in enumerate(problems):
                if cfg.rollout.white_box:
                    for ci, code in enumerate(codes[pi]):
                        prompts.append(self._test_prompt(p, code, cfg.rollout.test, test_stats))
                        where.append((pi, ci))
                else:
                    prompts.append(self._test_prompt(p, None, cfg.rollout.test, test_stats))
                    where.append((pi, None))
            n_gen = cfg.rollout.n_test if cfg.rollout.white_box else cfg.rollout.n_test * cfg.rollout.n_code
            out = self._generate("test", prompts, n_gen, cfg.rollout.test, test_stats,
                                 [(slots[pi],) if ci is None else (slots[pi], ci) for pi, ci in where])
            for (pi, ci), group in zip(where, out):
                if ci is not None:
                    test_samples[pi].append(group)
                else:  # black-box: split the problem's suites among its candidates
                    k = cfg.rollout.n_test
                    test_samples[pi] = [group[c * k:(c + 1) * k] for c in range(cfg.rollout.n_code)]
            times["test_rollout"] = time.perf_counter() - t
            self._check_stop()

        # 4. judge and rewards
        self._phase("judge")
        t = time.perf_counter()
        if cfg.mode == "golden":
            code_rewards, judge_metrics, judgements = self._judge_golden(problems, codes)
            test_rewards = None
        else:
            k = cfg.mistakes.top_k or cfg.judge.suite_size
            mistakes = (D.book_tops(self.ranks, self.book, step_problems, slots, k) if cfg.mistakes.enabled
                        else [[] for _ in problems])
            code_rewards, test_rewards, judge_metrics, judgements = self._judge_a1(
                problems, code_samples, test_samples, mistakes)
        times["judge"] = time.perf_counter() - t
        self._check_stop()

        # 5. Mistake Book (the commit point: from here on the step always completes)
        mistake_metrics: dict[str, Any] = {}
        if cfg.mode != "golden" and cfg.mistakes.enabled:
            # (pairs, not a dict: two copies of a problem in one step each count)
            updates = [(s, (p.id, j.mistake_update(cfg.mistakes.once_per_candidate)))
                       for s, p, j in zip(slots, problems, judgements)]
            mistake_metrics = D.commit_book(self.ranks, self.book, step, updates, net=cfg.mistakes.net_changes)

        # 6. GRPO updates
        self._phase("update")
        t = time.perf_counter()
        batches = self._select(problems, code_samples, code_rewards, test_samples, test_rewards,
                               judgements)
        self._last_batches = batches  # kept for inspection (benchmarks/train_step.py)
        self.engine.release_memory()
        update_metrics = self._update(batches, slots)
        self.engine.weights_changed(self.update_roles)
        times["update"] = time.perf_counter() - t
        self.step = step

        # 7. metrics
        metrics.update(judge_metrics)
        metrics.update(mistake_metrics)
        metrics.update(update_metrics)
        metrics.update(_generation_metrics("code", code_stats))
        if cfg.mode != "golden":
            metrics.update(_generation_metrics("test", test_stats))
        total_tokens = code_stats.completion_tokens + test_stats.completion_tokens
        total_gen_s = code_stats.seconds + test_stats.seconds
        metrics["rollout/tokens"] = total_tokens
        metrics["rollout/tokens_per_s"] = total_tokens / total_gen_s if total_gen_s > 0 else 0.0
        metrics["data/epoch"] = self.sampler.epoch
        metrics["data/train_dropped_overlong"] = len(self.dropped["train"])
        metrics["data/heldout_dropped_overlong"] = len(self.dropped["heldout"])
        for key, value in times.items():
            metrics[f"time/{key}_s"] = value
        samples = self._pick_samples(problems, code_samples, code_rewards, test_samples, test_rewards, batches)
        if self.ranks.enabled:
            metrics["time/comm_s"] = self.ranks.comm_s - comm_before
        metrics["time/step_s"] = time.perf_counter() - t_step
        self._last_samples = D.gather_samples(self.ranks, samples, slots, cfg.logging.samples_per_step)
        return D.reduce_metrics(self.ranks, metrics, len(problems))

    # ------------------------------------------------------------------ judging

    def _judge_golden(self, problems, codes):
        import torch

        from codea1.train.golden import golden_results

        items = [(p, c) for p, group in zip(problems, codes) for c in group]
        results = golden_results(self.executor, items, self.limits)
        n = self.cfg.rollout.n_code
        rates = torch.tensor([r.pass_rate for r in results], dtype=torch.float64).view(len(problems), n)
        metrics = {
            "code/reward_mean": float(rates.mean()),
            "code/reward_std": float(rates.std(unbiased=False)),
            "judge/pass_rate": float(rates.mean()),
            "judge/code_correct_rate": sum(r.correct for r in results) / max(len(results), 1),
            "judge/code_valid_rate": sum(r.status not in ("no-function", "error", "infra")
                                         for r in results) / max(len(results), 1),
            "judge/infra": sum(r.status == "infra" for r in results),
        }
        return rates, metrics, [None] * len(problems)

    def _judge_a1(self, problems, code_samples, test_samples, mistakes):
        import torch

        from codea1.judge import ProblemRollout

        rollouts = []
        for pi, p in enumerate(problems):
            rollouts.append(ProblemRollout(
                p, codes=[s.text for s in code_samples[pi]],
                tests=[[s.text for s in group] for group in test_samples[pi]],
                mistakes=mistakes[pi]))
        judgements = self.judge.judge_step(rollouts)
        code_rewards = torch.tensor([list(j.code_rewards) for j in judgements], dtype=torch.float64)
        test_rewards = torch.tensor([[list(r) for r in j.test_rewards] for j in judgements],
                                    dtype=torch.float64)
        suites = [s for j in judgements for i, row in enumerate(j.suites) if j.code_valid[i] for s in row]
        valid = [v for j in judgements for v in j.code_valid]
        metrics = {
            "code/reward_mean": float(code_rewards.mean()),
            "code/reward_std": float(code_rewards.std(unbiased=False)),
            "test/reward_mean": float(test_rewards.mean()),
            "test/reward_std": float(test_rewards.std(unbiased=False)),
            "judge/code_valid_rate": sum(bool(v) for v in valid) / max(len(valid), 1),
            "judge/pass_rate": _mean([s.pass_score for s in suites]),
            "judge/attack_rate": _mean([s.attack for s in suites]),
            "judge/attack_success": _mean([1.0 if s.gen_fail_rate > 0 else 0.0 for s in suites]),
            "judge/valid_ratio": _mean([s.valid_ratio for s in suites]),
            "judge/valid_tests": _mean([float(s.valid) for s in suites]),
            "judge/invalid_tests": _mean([float(s.invalid) for s in suites]),
            "judge/unusable_problems": sum(not j.usable for j in judgements),
            "judge/nonprintable": _mean([float(s.nonprintable) for j in judgements
                                         for row in j.suites for s in row]),
        }
        return code_rewards, test_rewards, metrics, judgements

    # ------------------------------------------------------------------ selection

    def _select(self, problems, code_samples, code_rewards, test_samples, test_rewards, judgements):
        """Trajectories per policy, as the reference picks them (CODE_A1_SPEC "Which samples train").

        Every code group trains (a zero-variance group with advantage 0); for the tests,
        per problem, the suites of the `update_n` candidates of largest reward std, even 0.
        Switches: `grpo.filter_zero_variance` (drop zero-variance groups of both roles),
        `grpo.tests_from_valid_candidates`, `grpo.tests_from_kept_problems`. A problem
        the judge could not judge (sandbox failure, broken reference) never trains.
        """
        from codea1.grpo import Trajectory, group_advantages, has_signal, select_test_groups

        g = self.cfg.grpo
        code = RoleBatch(groups_total=len(problems))
        keep_problem = (has_signal(code_rewards) if g.filter_zero_variance else [True] * len(problems))
        # a problem the judge could not judge (sandbox failure, broken reference) never trains
        usable = [j is None or j.usable for j in judgements]
        keep_problem = [bool(k) and u for k, u in zip(keep_problem, usable)]
        adv = group_advantages(code_rewards, g.adv_eps, g.std_unbiased)
        for pi in range(len(problems)):
            if not bool(keep_problem[pi]):
                continue
            code.groups_kept += 1
            code.chosen[pi] = list(range(len(code_samples[pi])))
            for ci, s in enumerate(code_samples[pi]):
                code.trajectories.append(Trajectory(s.prompt_ids, s.completion_ids, float(adv[pi, ci]),
                                                    s.logprobs))
                code.origins.append((0, pi))

        test = RoleBatch()
        if test_rewards is not None:
            for pi in range(len(problems)):
                valid = list(judgements[pi].code_valid)
                eligible = [(bool(v) or not g.tests_from_valid_candidates) and usable[pi]
                            and (keep_problem[pi] or not g.tests_from_kept_problems) for v in valid]
                test.groups_total += len(valid)
                chosen = select_test_groups(test_rewards[pi], eligible, g.update_n,
                                            require_signal=g.filter_zero_variance)
                test.chosen[pi] = chosen
                for ci in chosen:
                    test.groups_kept += 1
                    tadv = group_advantages(test_rewards[pi, ci], g.adv_eps, g.std_unbiased)
                    for ti, s in enumerate(test_samples[pi][ci]):
                        test.trajectories.append(Trajectory(s.prompt_ids, s.completion_ids, float(tadv[ti]),
                                                            s.logprobs))
                        test.origins.append((1, pi))
        if self.cfg.mode == "selfplay":
            merged = RoleBatch(code.trajectories + test.trajectories,
                               code.groups_total + test.groups_total, code.groups_kept + test.groups_kept,
                               origins=code.origins + test.origins)
            return {"shared": merged, "_code": code, "_test": test}
        return {"code": code, "test": test}

    def _update(self, batches: dict[str, RoleBatch], slots: Sequence[int] | None = None) -> dict[str, Any]:
        from codea1.grpo import trajectory_logprobs, update_policy
        from codea1.train.distributed import global_keys, minibatch_layout

        g = self.cfg.grpo
        metrics: dict[str, Any] = {}
        for name, batch in batches.items():
            label = name.lstrip("_")  # selfplay also reports its two halves as _code/_test
            metrics[f"{label}/groups_total"] = batch.groups_total
            metrics[f"{label}/groups_kept"] = batch.groups_kept
        for key in self.update_roles:
            batch = batches[key]
            role = "code" if key == "shared" else key
            seqs = batch.trajectories
            # the step's mini-batches, cut from every rank's trajectories in their global order
            layout = minibatch_layout(self.ranks, global_keys(batch.origins, slots), g.mini_batches)
            sync = self.grad_sync
            # a rank with nothing of its own still joins the others' reductions
            if self.ranks.any(bool(seqs)):
                # an engine's rollout log-probs are compared with every old log-prob up front
                engine_logps = self.ranks.any(any(t.rollout_logprobs is not None for t in seqs))
                first = set(layout[0]) if g.reuse_old_logprobs and layout else set()
                self._update_part(key, len(seqs), "old log-probs")
                with self.policies.role(role) as model:
                    old = trajectory_logprobs(model, seqs, g, skip=() if engine_logps else first, sync=sync)
                ref = None
                if g.kl_coef > 0:
                    self._update_part(key, len(seqs), "reference log-probs")
                    with self.policies.reference() as ref_model:
                        ref = trajectory_logprobs(ref_model, seqs, g, sync=sync)
                is_weights = self._check_rollout_logprobs(key, old, seqs, metrics)
                self._update_part(key, len(seqs), "gradient steps")
                with self.policies.role(role) as model:
                    stats = update_policy(model, self.optimizers[key], seqs, g, old, ref, is_weights,
                                          layout=layout, sync=sync)
                metrics.update(stats.as_dict(f"update/{key}"))
            else:
                metrics[f"update/{key}/sequences"] = 0
            metrics[f"update/{key}/lr"] = self.optimizers[key].param_groups[0]["lr"]
            with warnings.catch_warnings():  # a step with nothing to train still advances the schedule
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`")
                self.schedulers[key].step()
        return metrics

    def _update_part(self, key: str, sequences: int, part: str) -> None:
        """Name the part of the update under way on the live display (it lasts minutes on a CPU)."""
        if self.progress is not None:
            label = f"{key} model, {sequences} sequences: {part}"
            self.progress.watch(lambda: label)

    def _check_rollout_logprobs(self, key: str, old, seqs, metrics: dict[str, Any]):
        """Log the engine-vs-trainer log-prob mismatch; the TIS weights when asked for, else None.

        `rollout/logp_mismatch` is over the tokens of every role updated so far this step.
        """
        from codea1.engines.correction import logp_mismatch, tis_weights

        rollout = [t.rollout_logprobs for t in seqs]
        found = logp_mismatch(old, rollout)
        if not found.tokens:
            return None
        metrics[f"rollout/{key}_logp_mismatch"] = found.mean_abs
        metrics[f"rollout/{key}_logp_mismatch_tokens"] = found.tokens
        tokens = sum(v for k, v in metrics.items() if k.endswith("_logp_mismatch_tokens"))
        metrics["rollout/logp_mismatch"] = sum(
            metrics[k.removesuffix("_tokens")] * v for k, v in metrics.items()
            if k.endswith("_logp_mismatch_tokens")) / tokens
        if self.cfg.grpo.rollout_is != "tis":
            return None
        weights = tis_weights(old, rollout, self.cfg.grpo.rollout_is_cap)
        flat = [w for row in weights for w in row.tolist()]
        metrics[f"update/{key}/is_weight_mean"] = sum(flat) / len(flat)
        metrics[f"update/{key}/is_capped_frac"] = sum(w >= self.cfg.grpo.rollout_is_cap for w in flat) / len(flat)
        return weights

    # ------------------------------------------------------------------ samples

    def _pick_samples(self, problems, code_samples, code_rewards, test_samples, test_rewards, batches):
        """A few samples for samples.jsonl: per problem its first code and a test suite.

        The suite shown is the first of a candidate whose suites trained (the top-std
        choice), else of candidate 0; `trained` says whether the sample was in the update.
        """
        k = self.cfg.logging.samples_per_step
        test_batch = batches.get("test") or batches.get("_test")
        code_batch = batches.get("code") or batches.get("_code")
        out = []
        for pi, p in enumerate(problems[:k]):
            s = code_samples[pi][0]
            out.append({"role": "code", "problem_id": p.id, "reward": float(code_rewards[pi, 0]),
                        "truncated": s.truncated, "trained": bool(code_batch and 0 in code_batch.chosen.get(pi, [])),
                        "text": s.text})
            if test_rewards is not None and test_samples[pi]:
                chosen = test_batch.chosen.get(pi, []) if test_batch else []
                ci = chosen[0] if chosen else 0
                t = test_samples[pi][ci][0]
                out.append({"role": "test", "problem_id": p.id, "candidate": ci,
                            "reward": float(test_rewards[pi, ci, 0]), "truncated": t.truncated,
                            "trained": ci in chosen, "text": t.text})
        return out

    # ------------------------------------------------------------------ validation

    def validate(self) -> dict[str, Any]:
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
        from codea1.eval.passk import aggregate, default_ks
        from codea1.judge import extract_code
        from codea1.rollout import code_messages
        from codea1.sandbox import Limits
        from codea1.train.golden import golden_results, has_golden

        v = self.cfg.validation
        problems = [p for p in self.heldout if has_golden(p)][: v.problems]
        if not problems:
            return {}
        t = time.perf_counter()
        limits = Limits(timeout_s=v.timeout_s, call_timeout_s=v.timeout_s, memory_mb=v.memory_mb)
        per_call = max(1, v.sampling.batch_size // v.n_code)
        rows: list[tuple[int, str, list[float], list[float]]] = []   # (index, source, correct, golden rate)
        kept: list[tuple[int, Any, list[Any], list[Any]]] = []   # (index, problem, codes, golden results)
        with self._sampling_weights("code"):
            for idx in self._validation_calls(len(problems), per_call):
                part = [problems[i] for i in idx]
                own = not self.cfg.rollout.project_code_prompt
                code_out = self._validation_generate("code", [code_messages(p, own) for p in part], v.n_code,
                                                     [("validation", i) for i in idx])
                items = [(p, p.program(extract_code(s.text))) for p, g in zip(part, code_out) for s in g]
                gold = golden_results(self.executor, items, limits)
                for k, (i, p) in enumerate(zip(idx, part)):
                    results = gold[k * v.n_code:(k + 1) * v.n_code]
                    rows.append((i, p.source or "unknown", [float(r.correct) for r in results],
                                 [r.pass_rate for r in results]))
                    if i < v.test_problems:
                        kept.append((i, p, code_out[k], results))
        tests = None
        if v.test_model and self.cfg.mode != "golden" and self.judge is not None:
            tests = self._validate_tests(kept)
        shares = self.ranks.gather((rows, tests))
        if shares is None:
            return {}
        rows = sorted((r for share, _ in shares for r in share), key=lambda r: r[0])
        counts: dict[str, list[tuple[int, int]]] = {}
        for _i, source, correct, _rate in rows:
            counts.setdefault(source, []).append((len(correct), int(sum(correct))))
        metrics: dict[str, Any] = {
            "val/problems": len(problems),
            "val/code_pass_rate": _mean([c for r in rows for c in r[2]]),
            "val/code_golden_rate": _mean([g for r in rows for g in r[3]]),
        }
        for source, pairs in sorted(counts.items()):
            metrics[f"val/{source}/problems"] = len(pairs)
            for key, value in aggregate(pairs, default_ks(v.n_code)).items():
                metrics[f"val/{source}/{key}"] = value / 100.0  # a rate, as the other val/ figures
        if tests is not None:
            metrics.update(_test_validation_metrics([x for _, share in shares for x in share]))
        metrics["time/validation_s"] = time.perf_counter() - t
        return metrics

    def _validation_calls(self, n: int, per_call: int) -> list[list[int]]:
        """This rank's share of `n` held-out problems, cut into as many engine calls as the
        largest share needs: every rank samples the same number of times (a tensor-parallel
        vLLM group samples together), a call may be empty."""
        mine = self.ranks.slots(n)
        calls = max(1, math.ceil(math.ceil(n / self.ranks.world) / per_call))
        return [mine[c * len(mine) // calls:(c + 1) * len(mine) // calls] for c in range(calls)]

    def _sampling_weights(self, role: str):
        """Whole weights for sampling under FSDP2 (every rank enters together), else nothing."""
        from codea1.train.distributed import gathered

        return gathered(self.policies.module(role)) if self.sharded else contextlib.nullcontext()

    def _validation_generate(self, role: str, prompts, n: int, places) -> list[list[Any]]:
        """Validation samples from the rollout engine, each prompt's stream seeded from its
        place (its own streams: validation never shifts the training ones)."""
        from codea1.rollout import GenerationStats, encode_prompts
        from codea1.train.distributed import sample_seeds

        seeds = sample_seeds(self.cfg.seed, self.step, f"val/{role}", places)
        stats = GenerationStats()
        if self.progress is not None:
            rows = n * len(prompts)
            self.progress.watch(lambda: f"{stats.tokens_decoded:,} {role} tokens sampled for {rows} completions")
        return self.engine.generate(role, encode_prompts(self.policies.tokenizer, prompts), n=n,
                                    sampling=self.cfg.validation.sampling, seeds=seeds, stats=stats)

    def _validate_tests(self, kept) -> list[tuple[int, list[tuple[float, float]], int, int]]:
        """The test model on this rank's held-out codes: per problem (index, each suite's
        (valid ratio, pass on the reference), kills of wrong codes, wrong-code suites)."""
        from codea1.judge import ProblemRollout, extract_code
        from codea1.rollout import GenerationStats

        v = self.cfg.validation
        shortened = GenerationStats()
        prompts = [self._test_prompt(p, extract_code(s.text), v.sampling, shortened)
                   for _i, p, samples, _ in kept for s in samples]
        places = [(i, c) for i, _p, samples, _ in kept for c in range(len(samples))]
        with self._sampling_weights("test"):
            test_out = self._validation_generate("test", prompts, v.n_test, places)
        rollouts, k = [], 0
        for _i, p, samples, _ in kept:
            groups = test_out[k:k + len(samples)]
            k += len(samples)
            rollouts.append(ProblemRollout(p, codes=[s.text for s in samples],
                                           tests=[[s.text for s in g] for g in groups], mistakes=[]))
        judgements = self.judge.judge_step(rollouts) if rollouts else []
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
        "val/test_valid_ratio": _mean([s[0] for s in suites]),
        "val/test_pass_on_reference": _mean([s[1] for s in suites]),
        "val/test_kill_rate": kills / wrong if wrong else float("nan"),
        "val/test_wrong_candidates": wrong,
    }


# --------------------------------------------------------------------------- helpers


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def _generation_metrics(role: str, st) -> dict[str, Any]:
    return {
        f"rollout/{role}_samples": st.samples,
        f"rollout/{role}_tokens": st.completion_tokens,
        f"rollout/{role}_tokens_per_s": st.tokens_per_s,
        f"rollout/{role}_truncated": st.completions_truncated,
        f"rollout/{role}_empty": st.empty_completions,
        f"rollout/{role}_prompts_truncated": st.prompts_truncated,
        f"rollout/{role}_prompts_shortened": st.prompts_shortened,
        f"rollout/{role}_mean_length": st.completion_tokens / st.samples if st.samples else 0.0,
    }


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
    from codea1.grpo import warmup_cosine

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
    from codea1.train.distributed import init_ranks

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
    ranks = init_ranks(cfg)
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
    cfg_path = run_dir / CONFIG_FILE
    if ranks.main:
        run_dir.mkdir(parents=True, exist_ok=True)
    manager = CheckpointManager(run_dir, keep=cfg.checkpoint.keep)
    latest = ranks.broadcast(latest)  # one answer for every rank
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
    show = Progress(cfg.steps, style=(progress or cfg.logging.progress) if ranks.main else "none")
    show.set_phase("loading the models")
    trainer = Trainer(cfg, run_dir, policies=policies, progress=show, ranks=ranks)
    log = None
    stopped = False
    rows: list[dict[str, Any]] = []
    try:
        offsets = {"metrics": 0, "samples": 0}
        if latest is not None:
            state = trainer.load_checkpoint(latest)
            offsets = state["metrics_offsets"]
            show.message(f"resumed {run_dir} at step {trainer.step} from {latest.name}")
        elif resume:
            show.message(f"{run_dir}: no checkpoint yet; starting from step 0")
        if previous_steps is not None:
            show.message(extended_message(cfg, trainer.step, previous_steps, cfg_path))
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
        done_here = 0
        slowest = 0.0  # the longest step (with its validation and checkpoint) of this call
        out_of_time = False
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
        if stopped:
            why = trainer.stop.reason or (f"time limit {time_limit_s:g} s" if out_of_time else "stop_after")
            show.message(f"stopped at step {trainer.step} ({why}); resume with: codea1 train --resume {run_dir}")
    finally:
        if log is not None:
            log.close()
        show.close()
        trainer.close()
    return TrainResult(run_dir, trainer.step, stopped, rows)
