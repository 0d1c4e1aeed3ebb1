"""GRPO, the policy-gradient update of both Code-A1 policies, in the order a step runs it.

This module holds `CODE_A1_SPEC.md`'s "Which samples train" and "GRPO update" as small
functions on tensors, so that each formula can be checked on hand-computed numbers:

- `group_advantages`: reward minus its group's mean, over the group's std + eps;
- `select_batches` (with `has_signal` / `select_test_groups`): which samples train, as a
  `RoleBatch` per role: every code group, the top-`update_n` test groups per problem, and
  the optional zero-variance filtering (off by default, as in the reference);
- `clipped_surrogate`, `k3_kl`, `token_mean`, `grpo_token_loss`: the clip-higher PPO
  loss with verl's dual-clip for negative advantages and a low-variance KL penalty to
  the frozen reference, averaged over tokens;
- `make_optimizer`, `make_scheduler`, `warmup_cosine`: AdamW with a linear warm-up from
  lr 0, then cosine (verl's `get_cosine_schedule_with_warmup`);
- `update_policy`: one PPO epoch over mini-batches of packed (padding-free) micro-batches
  (`codea1.trajectory`) with gradient accumulation equal to the whole mini-batch, the
  response tokens' log-probabilities from `codea1.logprobs` (`sequence_logprobs`,
  `trajectory_logprobs`, `micro_batches`);
- `update_role`: one policy's update as the reference's actor runs it: old and reference
  log-probs, the rollout engine's importance correction (`rollout_correction`), then
  `update_policy`. Several ranks add their part through `RankHooks`; this module runs
  nothing of another rank.

Every number is a `GRPOConfig` field; the defaults are the reference implementation's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial

import torch

from codea1.configs import GRPOConfig  # (the update's settings, torch-free; re-exported here)
from codea1.engines.correction import logp_mismatch, tis_weights
from codea1.logprobs import fused_lora, micro_batches, sequence_logprobs, trajectory_logprobs
from codea1.trajectory import MicroBatch, Trajectory


# --------------------------------------------------------------------------- advantages


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6, unbiased: bool = True) -> torch.Tensor:
    """(r - mean(group)) / (std(group) + eps) along the last dimension.

    A group of one has no spread: its advantage is 0 (instead of the NaN an unbiased std
    of one value would give).
    """
    r = rewards.to(torch.float32)
    if r.shape[-1] < 2:
        return torch.zeros_like(r)
    mean = r.mean(dim=-1, keepdim=True)
    std = r.std(dim=-1, keepdim=True, unbiased=unbiased)
    return (r - mean) / (std + eps)


def has_signal(rewards: torch.Tensor) -> torch.Tensor:
    """True for groups (last dimension) whose rewards are not all equal (std > 0)."""
    return (rewards.amax(dim=-1) - rewards.amin(dim=-1)) > 0


def select_test_groups(
    test_rewards: torch.Tensor, eligible: torch.Tensor | Sequence[bool], update_n: int,
    require_signal: bool = False,
) -> list[int]:
    """Indices of the candidates whose test groups train, for one problem.

    `test_rewards[i, j]` is the reward of suite j written against candidate i. Among the
    eligible candidates the `update_n` groups of largest (population) reward std are kept,
    even when that std is 0, as the reference's top-k does (ties go to the lower index);
    with `require_signal` a kept group must also have std > 0.
    """
    eligible = torch.as_tensor(eligible, dtype=torch.bool)
    if test_rewards.shape[0] != eligible.shape[0]:
        raise ValueError(
            f"test_rewards has {test_rewards.shape[0]} groups but eligible has {eligible.shape[0]}"
        )
    stds = test_rewards.to(torch.float64).std(dim=-1, unbiased=False)
    order = sorted(
        (i for i in range(len(eligible)) if bool(eligible[i])), key=lambda i: (-float(stds[i]), i)
    )
    chosen = order[:update_n]
    if require_signal:
        chosen = [i for i in chosen if float(stds[i]) > 0]
    return chosen


# --------------------------------------------------------------------------- which samples train


@dataclass
class RoleBatch:
    """The trajectories one policy trains on in a step, and which groups they came from.

    `problems[k]` is the step's index of trajectory k's problem; `chosen[p]` lists the
    candidates of problem p whose samples train. Self-play's batch (`role` "shared")
    trains its `parts`, the code batch then the test batch, with one set of weights.
    """

    role: str                                   # "code", "test" or "shared"
    trajectories: list[Trajectory] = field(default_factory=list)
    problems: list[int] = field(default_factory=list)
    groups_total: int = 0
    groups_kept: int = 0
    chosen: dict[int, list[int]] = field(default_factory=dict)
    parts: tuple[RoleBatch, ...] = ()

    def add(self, problem: int, sample, advantage: float) -> None:
        self.trajectories.append(Trajectory(sample.prompt_ids, sample.completion_ids, advantage, sample.logprobs))
        self.problems.append(problem)

    def order_keys(self) -> list[tuple[int, int]]:
        """(part, problem) of each trajectory: its place in the step's global order."""
        parts = self.parts or (self,)
        return [(k, p) for k, part in enumerate(parts) for p in part.problems]


@dataclass
class StepBatches:
    """Both roles' batches of one step; `updates` says which weights train on what."""

    code: RoleBatch
    test: RoleBatch
    selfplay: bool = False

    @cached_property
    def shared(self) -> RoleBatch:
        """Self-play's one batch: the code part, then the test part."""
        return RoleBatch("shared", self.code.trajectories + self.test.trajectories,
                         self.code.problems + self.test.problems, self.code.groups_total + self.test.groups_total,
                         self.code.groups_kept + self.test.groups_kept, parts=(self.code, self.test))

    def updates(self) -> dict[str, RoleBatch]:
        """Per set of weights ("code"/"test", or self-play's "shared"), its batch."""
        return {"shared": self.shared} if self.selfplay else {"code": self.code, "test": self.test}

    def __getitem__(self, key: str) -> RoleBatch:
        """"code", "test", or self-play's "shared" batch."""
        if key in ("code", "test"):
            return getattr(self, key)
        return self.updates()[key]

    def group_metrics(self) -> dict[str, int]:
        """`ROLE/groups_total` and `ROLE/groups_kept` of each batch (self-play: of both parts too)."""
        batches = [*self.updates().values(), *((self.code, self.test) if self.selfplay else ())]
        return {f"{b.role}/{what}": getattr(b, what) for b in batches for what in ("groups_total", "groups_kept")}


def select_batches(cfg: GRPOConfig, code_samples, code_rewards: torch.Tensor, test_samples,
                   test_rewards: torch.Tensor | None, judgements, selfplay: bool = False) -> StepBatches:
    """Trajectories per policy, as the reference picks them (CODE_A1_SPEC "Which samples train").

    Every code group trains (a zero-variance group with advantage 0); for the tests, per
    problem, the suites of the `update_n` candidates of largest reward std, even 0.
    Switches: `filter_zero_variance` (drop zero-variance groups of both roles),
    `tests_from_valid_candidates`, `tests_from_kept_problems`. A problem the judge could
    not judge (sandbox failure, broken reference) never trains. Shapes: `code_samples[P][n_code]`,
    `code_rewards [P, n_code]`, `test_samples[P][n_code][n_test]`, `test_rewards [P, n_code, n_test]`
    (None in golden mode), `judgements[P]` (None in golden mode).
    """
    usable = [j is None or j.usable for j in judgements]
    keep = has_signal(code_rewards) if cfg.filter_zero_variance else [True] * len(code_samples)
    keep = [bool(k) and u for k, u in zip(keep, usable)]
    code = _code_batch(cfg, code_samples, code_rewards, keep)
    test = RoleBatch("test")
    if test_rewards is not None:
        test = _test_batch(cfg, test_samples, test_rewards, judgements, keep, usable)
    return StepBatches(code, test, selfplay)


def _code_batch(cfg: GRPOConfig, code_samples, code_rewards: torch.Tensor, keep: list[bool]) -> RoleBatch:
    """Each kept problem's n_code samples, with their group advantages."""
    code = RoleBatch("code", groups_total=len(code_samples))
    adv = group_advantages(code_rewards, cfg.adv_eps, cfg.std_unbiased)
    for pi, group in enumerate(code_samples):
        if not keep[pi]:
            continue
        code.groups_kept += 1
        code.chosen[pi] = list(range(len(group)))
        for ci, s in enumerate(group):
            code.add(pi, s, float(adv[pi, ci]))
    return code


def _test_batch(cfg: GRPOConfig, test_samples, test_rewards: torch.Tensor, judgements,
                keep: list[bool], usable: list[bool]) -> RoleBatch:
    """Per problem, the suites of its chosen candidates (`select_test_groups`), each
    candidate's n_test suites one group."""
    test = RoleBatch("test")
    for pi, judgement in enumerate(judgements):
        valid = list(judgement.code_valid)
        eligible = [(bool(v) or not cfg.tests_from_valid_candidates) and usable[pi]
                    and (keep[pi] or not cfg.tests_from_kept_problems) for v in valid]
        test.groups_total += len(valid)
        chosen = select_test_groups(test_rewards[pi], eligible, cfg.update_n, require_signal=cfg.filter_zero_variance)
        test.chosen[pi] = chosen
        for ci in chosen:
            test.groups_kept += 1
            adv = group_advantages(test_rewards[pi, ci], cfg.adv_eps, cfg.std_unbiased)
            for ti, s in enumerate(test_samples[pi][ci]):
                test.add(pi, s, float(adv[ti]))
    return test


# --------------------------------------------------------------------------- losses


def token_mean(values: torch.Tensor, mask: torch.Tensor, n_tokens: float | None = None) -> torch.Tensor:
    """Sum of values over masked tokens divided by `n_tokens` (default: the mask's count).

    Passing the token count of the whole mini-batch makes the micro-batch losses add up to
    the mini-batch's token-mean, which is what gradient accumulation needs.
    """
    total = (values * mask).sum()
    denom = float(mask.sum()) if n_tokens is None else float(n_tokens)
    return total / max(denom, 1.0)


def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
    clip_low: float = 0.2, clip_high: float = 0.28, clip_ratio_c: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token PPO loss max(-rA, -clip(r, 1-low, 1+high)A), as verl's compute_policy_loss.

    With `clip_ratio_c` (dual-clip), a token of negative advantage loses at most
    -A * clip_ratio_c: a ratio far above 1 on a bad sample cannot blow the loss up.
    Returns the loss, whether each token was clipped by the ratio range, and whether it
    was bounded by the dual clip.
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    bounded = torch.zeros_like(loss, dtype=torch.bool)
    if clip_ratio_c is not None:
        cap = -advantages * clip_ratio_c
        bounded = (advantages < 0) & (loss > cap)
        loss = torch.where(advantages < 0, torch.minimum(loss, cap), loss)
    return loss, (clipped > unclipped), bounded


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor, clamp: float = 10.0,
          log_ratio_clamp: float = 20.0) -> torch.Tensor:
    """Per-token k3 ("low-variance") KL estimate exp(d) - d - 1 >= 0, d = ref - logp.

    As the reference (verl's `low_var_kl`): d is clamped to +-`log_ratio_clamp` so exp
    cannot overflow, and the value itself to [-`clamp`, `clamp`], so one token the policy
    has moved far from the reference adds at most `clamp` (and no gradient) to the KL term.
    """
    log_ratio = torch.clamp(ref_logp - logp, -log_ratio_clamp, log_ratio_clamp)
    return torch.clamp(torch.exp(log_ratio) - log_ratio - 1.0, -clamp, clamp)


def grpo_token_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor | None,
    advantages: torch.Tensor, mask: torch.Tensor, cfg: GRPOConfig, n_tokens: float | None = None,
    is_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-mean clipped surrogate plus kl_coef * token-mean k3 KL (no entropy bonus).

    All tensors share one shape (per response token); `advantages` is the sequence's
    advantage broadcast to its tokens. `is_weight` (truncated importance sampling, see
    `codea1.engines.correction`) multiplies each token's surrogate. Returns the loss and
    summed statistics (to be divided by the token count by the caller).
    """
    mask = mask.to(logp.dtype)
    pg, clipped, bounded = clipped_surrogate(logp, old_logp, advantages, cfg.clip_low, cfg.clip_high,
                                             cfg.clip_ratio_c)
    if is_weight is not None:
        pg = pg * is_weight
    loss = token_mean(pg, mask, n_tokens)
    stats = {
        "pg_loss_sum": float((pg.detach() * mask).sum()),
        "clip_sum": float((clipped.to(mask.dtype) * mask).sum()),
        "dual_clip_sum": float((bounded.to(mask.dtype) * mask).sum()),
        "ratio_sum": float((torch.exp(logp.detach() - old_logp) * mask).sum()),
        "kl_sum": 0.0,
    }
    if ref_logp is not None and cfg.kl_coef > 0:
        kl = k3_kl(logp, ref_logp, cfg.kl_clamp, cfg.kl_log_ratio_clamp)
        loss = loss + cfg.kl_coef * token_mean(kl, mask, n_tokens)
        stats["kl_sum"] = float((kl.detach() * mask).sum())
    return loss, stats


# --------------------------------------------------------------------------- optimiser


def warmup_cosine(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0,
                  first_step_learns: bool = False) -> float:
    """LR multiplier for training step `step` (0-based): linear warm-up, then cosine.

    As verl's `get_cosine_schedule_with_warmup` (the reference's scheduler), warm-up rises
    linearly from `min_lr_ratio` at step 0 (lr 0 by default: the first step changes
    nothing) to 1 at `warmup_steps`; with `first_step_learns` it goes (step + 1) /
    warmup_steps instead. The cosine then decays from 1 to `min_lr_ratio` over the
    remaining steps.
    """
    if warmup_steps > 0 and step < warmup_steps:
        if first_step_learns:
            return (step + 1) / warmup_steps
        return min_lr_ratio + (1.0 - min_lr_ratio) * step / warmup_steps
    decay_steps = max(total_steps - warmup_steps, 1)
    progress = min(max(step - warmup_steps, 0) / decay_steps, 1.0)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(params: Iterable[torch.nn.Parameter], cfg: GRPOConfig) -> torch.optim.AdamW:
    """AdamW over the trainable parameters with the config's lr, betas, eps, weight decay."""
    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("make_optimizer: the policy has no trainable parameters")
    return torch.optim.AdamW(
        params, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.adam_eps, weight_decay=cfg.weight_decay
    )


def make_scheduler(optimizer: torch.optim.Optimizer, cfg: GRPOConfig, total_steps: int):
    """LambdaLR of `warmup_cosine`; the loop calls `.step()` once per training step."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_cosine(s, cfg.warmup_steps, total_steps, cfg.min_lr_ratio,
                                           cfg.warmup_first_step_learns)
    )


@dataclass
class UpdateStats:
    """What one `update_policy` call did, for the metrics.

    The sums behind the means stay on it (`sums`, `loss_sum`, `loss_steps`) so that a
    multi-rank run can add them up over ranks before `finish` divides them.
    """

    sequences: int = 0
    tokens: int = 0
    optimizer_steps: int = 0
    loss: float = 0.0
    pg_loss: float = 0.0
    kl: float = 0.0
    clip_frac: float = 0.0
    dual_clip_frac: float = 0.0  # share of tokens bounded by the dual clip (clip_ratio_c)
    ratio_mean: float = 0.0
    grad_norm: float = 0.0   # mean over the optimiser steps taken (a skipped one not included)
    forward_tokens: int = 0  # all tokens pushed through the model with gradients
    update_skipped: int = 0  # mini-batches whose gradient norm was not finite: no optimiser step
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LOSS_SUMS, 0.0), repr=False)
    loss_sum: float = field(default=0.0, repr=False)
    loss_steps: int = field(default=0, repr=False)
    norms: list[float] = field(default_factory=list, repr=False)

    def finish(self) -> UpdateStats:
        """The means, from the sums (per token, per optimiser step)."""
        if self.tokens:
            self.pg_loss = self.sums["pg_loss_sum"] / self.tokens
            self.kl = self.sums["kl_sum"] / self.tokens
            self.clip_frac = self.sums["clip_sum"] / self.tokens
            self.dual_clip_frac = self.sums["dual_clip_sum"] / self.tokens
            self.ratio_mean = self.sums["ratio_sum"] / self.tokens
            self.loss = self.loss_sum / max(self.loss_steps, 1)
        if self.norms:
            self.grad_norm = sum(self.norms) / len(self.norms)
        return self

    def as_dict(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}/{k}": float(getattr(self, k)) for k in STAT_NAMES}


LOSS_SUMS = ("pg_loss_sum", "clip_sum", "dual_clip_sum", "ratio_sum", "kl_sum")
STAT_NAMES = ("sequences", "tokens", "optimizer_steps", "loss", "pg_loss", "kl", "clip_frac", "dual_clip_frac",
              "ratio_mean", "grad_norm", "forward_tokens", "update_skipped")


def mini_batch_token_counts(layout: Sequence[Sequence[int]], seqs: Sequence[Trajectory]) -> list[int]:
    """Each mini-batch's response-token count: the divisor of its token-mean loss."""
    return [sum(len(seqs[i].completion_ids) for i in members) for members in layout]


def split_mini_batches(n: int, mini_batches: int) -> list[list[int]]:
    """Contiguous split of n sequences into `mini_batches` near-equal parts (none empty)."""
    k = max(1, min(mini_batches, n))
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(k) if bounds[i + 1] > bounds[i]]


def update_policy(
    model, optimizer: torch.optim.Optimizer, seqs: Sequence[Trajectory], cfg: GRPOConfig,
    old_logps: Sequence[torch.Tensor], ref_logps: Sequence[torch.Tensor] | None,
    is_weights: Sequence[torch.Tensor] | None = None, *,
    layout: Sequence[Sequence[int]] | None = None, mini_batch_tokens: Sequence[int] | None = None,
    pad_passes: Callable[[int], None] | None = None, after_backward: Callable[[list], None] | None = None,
) -> UpdateStats:
    """One GRPO update: `ppo_epochs` passes over mini-batches of the sequences.

    `old_logps[i]` / `ref_logps[i]` are the per-token log-probs of sequence i's response
    under the policy before the update and under the frozen reference (computed by the
    caller, e.g. with `trajectory_logprobs`, because the reference may need another adapter
    state). `old_logps[i]` may be None for the sequences of the first mini-batch: their
    forward pass comes before any optimiser step, so its detached values are the old ones.
    Each mini-batch is packed into micro-batches; their losses are divided by
    the mini-batch's total token count, so the accumulated gradient is the mini-batch's
    token-mean exactly. Gradients are clipped to `grad_clip` before each optimiser step; a
    mini-batch whose gradient norm is not finite takes no step (`stats.update_skipped`).
    `is_weights[i]`: per-token importance weights of sequence i (`grpo.rollout_is`).

    `layout` lists the sequences of each mini-batch (default: `split_mini_batches`);
    `mini_batch_tokens[m]` is mini-batch m's token count, the token-mean's divisor
    (default: its own; several ranks pass the count over all of them). Several ranks
    (`codea1.train.distributed.GradSync`) also pass `pad_passes(micro_batches)`, run before
    a mini-batch's passes (FSDP2 ranks pad theirs to the busiest rank's), and
    `after_backward(params)`, run after them, before clipping (gradients summed over ranks).
    """
    layout = [list(m) for m in layout] if layout is not None else split_mini_batches(len(seqs), cfg.mini_batches)
    if mini_batch_tokens is None:
        mini_batch_tokens = mini_batch_token_counts(layout, seqs)
    stats = UpdateStats(sequences=len(seqs))
    old_logps = list(old_logps)  # entries left None are filled from the first forward pass
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for _epoch in range(cfg.ppo_epochs):
        for members, n_tokens in zip(layout, mini_batch_tokens):
            if n_tokens == 0:
                continue
            optimizer.zero_grad(set_to_none=True)
            # 1. the mini-batch's token-mean loss, accumulated over its micro-batches
            batches = micro_batches(model, [seqs[i] for i in members], cfg)
            if pad_passes is not None:
                pad_passes(len(batches))
            mb_loss, mb_sums = 0.0, dict.fromkeys(LOSS_SUMS, 0.0)
            for mb in batches:
                loss, st = _micro_batch_loss(model, mb, members, cfg, n_tokens, old_logps, ref_logps,
                                             is_weights, moved=stats.optimizer_steps > 0)
                loss.backward()
                mb_loss += float(loss.detach())
                stats.forward_tokens += int(mb.input_ids.shape[1])
                for k in LOSS_SUMS:
                    mb_sums[k] += st[k]
            if after_backward is not None:
                after_backward(params)
            # 2. clip, then step (a NaN/inf gradient is dropped, as the reference's actor:
            # clipping cannot repair it, it would scale every gradient by NaN)
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            if hasattr(norm, "full_tensor"):  # a DTensor (FSDP2): the global norm
                norm = norm.full_tensor()
            if not math.isfinite(float(norm)):
                optimizer.zero_grad(set_to_none=True)
                stats.update_skipped += 1
                continue
            stats.norms.append(float(norm))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            stats.optimizer_steps += 1
            stats.tokens += n_tokens
            for k in LOSS_SUMS:
                stats.sums[k] += mb_sums[k]
            stats.loss_sum += mb_loss
            stats.loss_steps += 1
    return stats.finish()


def _micro_batch_loss(model, mb: MicroBatch, members: Sequence[int], cfg: GRPOConfig, n_tokens: int,
                      old_logps: list, ref_logps, is_weights, moved: bool):
    """One micro-batch's share of its mini-batch's loss (`grpo_token_loss`); fills in the
    old log-probs `update_policy` was left to take from this forward pass."""
    glob = [members[j] for j in mb.members]
    ref = torch.cat([ref_logps[g] for g in glob]) if ref_logps is not None else None
    isw = torch.cat([is_weights[g] for g in glob]) if is_weights is not None else None
    logp = sequence_logprobs(model, mb, cfg.logprob_chunk_tokens)
    for j, g in zip(mb.members, glob):
        if old_logps[g] is None:  # not computed ahead: the first mini-batch's (`update_role`)
            if moved:
                raise ValueError(f"sequence {g} has no old log-probs and the policy has "
                                 "already moved in this update")
            old_logps[g] = logp.detach()[mb.seq_index == j]
    old = torch.cat([old_logps[g] for g in glob])
    return grpo_token_loss(logp, old, ref, mb.advantages, torch.ones_like(logp), cfg, n_tokens, isw)


# --------------------------------------------------------------------------- one policy's update


@dataclass
class RankHooks:
    """What a run of several ranks adds to an update (`codea1.train.distributed.GradSync`
    builds them); a one-process run has none, and this module calls nothing of another rank."""

    agree: Callable[[bool], bool]                      # true on every rank when true on any
    mini_batch_tokens: Callable[..., list[int]]        # (layout, seqs): each mini-batch's count over ranks
    pad_forwards: Callable[..., None]                  # (model, micro_batches, chunk_tokens), under no_grad
    pad_backwards: Callable[..., None]                 # (model, micro_batches): forward and backward
    after_backward: Callable[[list], None]             # (params): gradients summed over ranks
    reduce_stats: Callable[[UpdateStats], UpdateStats]  # the update's statistics over ranks


def update_role(policies, role: str, optimizer, seqs: Sequence[Trajectory], cfg: GRPOConfig, *,
                layout: list[list[int]], metrics: dict, label: str,
                show: Callable[[str], None] | None = None, hooks: RankHooks | None = None) -> UpdateStats:
    """One policy's GRPO update on its step's trajectories, as the reference's actor does it.

    1. old log-probs (those of the first mini-batch, `layout[0]`, taken from the update's
       own first pass, unless a rollout engine's log-probs need comparing with all);
    2. the frozen reference's log-probs (for the KL term);
    3. the rollout engine's log-prob mismatch and TIS weights (`rollout_correction`);
    4. `update_policy`: the mini-batch loop.
    `show(part)` names the part under way; `label` ("code", "test", "shared") keys the metrics.
    """
    show = show or (lambda part: None)
    engine_logps = any(t.rollout_logprobs is not None for t in seqs)
    if hooks is not None:
        engine_logps = hooks.agree(engine_logps)
    first = set(layout[0]) if cfg.reuse_old_logprobs and layout else set()
    pad = (lambda model: partial(hooks.pad_forwards, model)) if hooks is not None else (lambda model: None)
    show("old log-probs")
    with policies.role(role) as model, fused_lora(model, cfg.fused_lora):
        old = trajectory_logprobs(model, seqs, cfg, skip=() if engine_logps else first, pad_passes=pad(model))
    ref = None
    if cfg.kl_coef > 0:
        show("reference log-probs")
        with policies.reference() as ref_model:
            ref = trajectory_logprobs(ref_model, seqs, cfg, pad_passes=pad(ref_model))
    # the engine's log-prob check only where an engine reported log-probs (vLLM); the hf engine
    # samples with the trained weights themselves and reports none
    is_weights = rollout_correction(label, old, seqs, cfg, metrics) if engine_logps else None
    show("gradient steps")
    with policies.role(role) as model, fused_lora(model, cfg.fused_lora):
        if hooks is None:
            return update_policy(model, optimizer, seqs, cfg, old, ref, is_weights, layout=layout)
        stats = update_policy(model, optimizer, seqs, cfg, old, ref, is_weights, layout=layout,
                              mini_batch_tokens=hooks.mini_batch_tokens(layout, seqs),
                              pad_passes=partial(hooks.pad_backwards, model), after_backward=hooks.after_backward)
    return hooks.reduce_stats(stats)


def rollout_correction(label: str, old: Sequence[torch.Tensor], seqs: Sequence[Trajectory], cfg: GRPOConfig,
                       metrics: dict) -> list[torch.Tensor] | None:
    """Log the engine-vs-trainer log-prob mismatch; the TIS weights when asked for, else None.

    `rollout/logp_mismatch` is over the tokens of every role updated so far this step
    (`metrics` holds the earlier roles' figures).
    """
    rollout = [t.rollout_logprobs for t in seqs]
    found = logp_mismatch(old, rollout)
    if not found.tokens:
        return None
    metrics[f"rollout/{label}_logp_mismatch"] = found.mean_abs
    metrics[f"rollout/{label}_logp_mismatch_tokens"] = found.tokens
    tokens = sum(v for k, v in metrics.items() if k.endswith("_logp_mismatch_tokens"))
    metrics["rollout/logp_mismatch"] = sum(
        metrics[k.removesuffix("_tokens")] * v for k, v in metrics.items()
        if k.endswith("_logp_mismatch_tokens")) / tokens
    if cfg.rollout_is != "tis":
        return None
    weights = tis_weights(old, rollout, cfg.rollout_is_cap)
    flat = [w for row in weights for w in row.tolist()]
    metrics[f"update/{label}/is_weight_mean"] = sum(flat) / len(flat)
    metrics[f"update/{label}/is_capped_frac"] = sum(w >= cfg.rollout_is_cap for w in flat) / len(flat)
    return weights
