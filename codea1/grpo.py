"""GRPO, the policy-gradient update of both Code-A1 policies.

This module holds the math of `CODE_A1_SPEC.md` ("Which samples train", "GRPO update") as
small functions on tensors, so that each formula can be checked on hand-computed numbers:

- `group_advantages`: reward minus its group's mean, over the group's std + eps;
- `has_signal` / `select_test_groups`: the top-`update_n` choice of test groups and the
  optional zero-variance filtering (off by default, as in the reference);
- `clipped_surrogate`, `k3_kl`, `token_mean`, `grpo_token_loss`: the clip-higher PPO
  loss with verl's dual-clip for negative advantages and a low-variance KL penalty to
  the frozen reference, averaged over tokens;
- `make_optimizer`, `make_scheduler`, `warmup_cosine`: AdamW with a linear warm-up from
  lr 0, then cosine (verl's `get_cosine_schedule_with_warmup`);
- `pack_micro_batches`, `trajectory_logprobs`, `update_policy`: log-probabilities of the
  response tokens of packed (padding-free) micro-batches, and one PPO epoch over
  mini-batches with gradient accumulation equal to the whole mini-batch.

Every number is a `GRPOConfig` field; the defaults are the reference implementation's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:  # torch is imported inside functions; see the module docstring of cli.py
    import torch

from codea1.configs import GRPOConfig  # noqa: F401  (the update's settings, torch-free; re-exported here)


# --------------------------------------------------------------------------- advantages


def group_advantages(rewards: "torch.Tensor", eps: float = 1e-6, unbiased: bool = True) -> "torch.Tensor":
    """(r - mean(group)) / (std(group) + eps) along the last dimension.

    A group of one has no spread: its advantage is 0 (instead of the NaN an unbiased std
    of one value would give).
    """
    import torch

    r = rewards.to(torch.float32)
    if r.shape[-1] < 2:
        return torch.zeros_like(r)
    mean = r.mean(dim=-1, keepdim=True)
    std = r.std(dim=-1, keepdim=True, unbiased=unbiased)
    return (r - mean) / (std + eps)


def has_signal(rewards: "torch.Tensor") -> "torch.Tensor":
    """True for groups (last dimension) whose rewards are not all equal (std > 0)."""
    return (rewards.amax(dim=-1) - rewards.amin(dim=-1)) > 0


def select_test_groups(
    test_rewards: "torch.Tensor", eligible: "torch.Tensor | Sequence[bool]", update_n: int,
    require_signal: bool = False,
) -> list[int]:
    """Indices of the candidates whose test groups train, for one problem.

    `test_rewards[i, j]` is the reward of suite j written against candidate i. Among the
    eligible candidates the `update_n` groups of largest (population) reward std are kept,
    even when that std is 0, as the reference's top-k does (ties go to the lower index);
    with `require_signal` a kept group must also have std > 0.
    """
    import torch

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


# --------------------------------------------------------------------------- losses


def token_mean(values: "torch.Tensor", mask: "torch.Tensor", n_tokens: float | None = None) -> "torch.Tensor":
    """Sum of values over masked tokens divided by `n_tokens` (default: the mask's count).

    Passing the token count of the whole mini-batch makes the micro-batch losses add up to
    the mini-batch's token-mean, which is what gradient accumulation needs.
    """
    total = (values * mask).sum()
    denom = float(mask.sum()) if n_tokens is None else float(n_tokens)
    return total / max(denom, 1.0)


def clipped_surrogate(
    logp: "torch.Tensor", old_logp: "torch.Tensor", advantages: "torch.Tensor",
    clip_low: float = 0.2, clip_high: float = 0.28, clip_ratio_c: float | None = None,
) -> tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]:
    """Per-token PPO loss max(-rA, -clip(r, 1-low, 1+high)A), as verl's compute_policy_loss.

    With `clip_ratio_c` (dual-clip), a token of negative advantage loses at most
    -A * clip_ratio_c: a ratio far above 1 on a bad sample cannot blow the loss up.
    Returns the loss, whether each token was clipped by the ratio range, and whether it
    was bounded by the dual clip.
    """
    import torch

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


def k3_kl(logp: "torch.Tensor", ref_logp: "torch.Tensor", clamp: float = 10.0,
          log_ratio_clamp: float = 20.0) -> "torch.Tensor":
    """Per-token k3 ("low-variance") KL estimate exp(d) - d - 1 >= 0, d = ref - logp.

    As the reference (verl's `low_var_kl`): d is clamped to +-`log_ratio_clamp` so exp
    cannot overflow, and the value itself to [-`clamp`, `clamp`], so one token the policy
    has moved far from the reference adds at most `clamp` (and no gradient) to the KL term.
    """
    import torch

    log_ratio = torch.clamp(ref_logp - logp, -log_ratio_clamp, log_ratio_clamp)
    return torch.clamp(torch.exp(log_ratio) - log_ratio - 1.0, -clamp, clamp)


def grpo_token_loss(
    logp: "torch.Tensor", old_logp: "torch.Tensor", ref_logp: "torch.Tensor | None",
    advantages: "torch.Tensor", mask: "torch.Tensor", cfg: GRPOConfig, n_tokens: float | None = None,
    is_weight: "torch.Tensor | None" = None,
) -> tuple["torch.Tensor", dict[str, float]]:
    """Token-mean clipped surrogate plus kl_coef * token-mean k3 KL (no entropy bonus).

    All tensors share one shape (per response token); `advantages` is the sequence's
    advantage broadcast to its tokens. `is_weight` (truncated importance sampling, see
    `codea1.engines.correction`) multiplies each token's surrogate. Returns the loss and
    summed statistics (to be divided by the token count by the caller).
    """
    import torch

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


def make_optimizer(params: Iterable["torch.nn.Parameter"], cfg: GRPOConfig) -> "torch.optim.AdamW":
    """AdamW over the trainable parameters with the config's lr, betas, eps, weight decay."""
    import torch

    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("make_optimizer: the policy has no trainable parameters")
    return torch.optim.AdamW(
        params, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.adam_eps, weight_decay=cfg.weight_decay
    )


def make_scheduler(optimizer: "torch.optim.Optimizer", cfg: GRPOConfig, total_steps: int):
    """LambdaLR of `warmup_cosine`; the loop calls `.step()` once per training step."""
    import torch

    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_cosine(s, cfg.warmup_steps, total_steps, cfg.min_lr_ratio,
                                           cfg.warmup_first_step_learns)
    )


# --------------------------------------------------------------------------- batches


@dataclass
class Trajectory:
    """One trajectory to train on: prompt tokens, response tokens, its scalar advantage."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    rollout_logprobs: list[float] | None = None  # the rollout engine's, where it reports them


@dataclass
class MicroBatch:
    """Sequences packed into one row with no padding (position ids restart per sequence).

    `targets` are the response tokens in order; `keep` marks the positions whose logits
    predict them; `seq_index[k]` says which sequence target k belongs to.
    """

    input_ids: "torch.Tensor"      # [1, L]
    position_ids: "torch.Tensor"   # [1, L]
    keep: "torch.Tensor"           # [1, L] bool
    targets: "torch.Tensor"        # [T]
    advantages: "torch.Tensor"     # [T]
    seq_index: "torch.Tensor"      # [T]
    members: list[int] = field(default_factory=list)  # indices into the original list
    # shared-prompt rows (codea1.logprobs): who may attend to whom, and the position
    # predicting each target (used instead of `keep`)
    attention_mask: "torch.Tensor | None" = None  # [1, 1, L, L] bool
    logit_index: "torch.Tensor | None" = None     # [T]


def pack_micro_batches(seqs: Sequence[Trajectory], token_budget: int, pack: bool = True) -> list[MicroBatch]:
    """Greedy, order-preserving packing of sequences into rows of at most `token_budget`.

    A sequence longer than the budget gets a row of its own; with `pack=False` every
    sequence does. Sequences with an empty response carry no tokens to train and are
    skipped.
    """
    if not pack:
        token_budget = 0
    import torch

    rows: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, s in enumerate(seqs):
        if not s.completion_ids:
            continue
        n = len(s.prompt_ids) + len(s.completion_ids)
        if current and used + n > token_budget:
            rows.append(current)
            current, used = [], 0
        current.append(i)
        used += n
    if current:
        rows.append(current)

    batches = []
    for row in rows:
        ids, pos, keep, tgt, adv, idx = [], [], [], [], [], []
        for i in row:
            s = seqs[i]
            if not s.prompt_ids:
                raise ValueError(f"sequence {i} has an empty prompt; nothing predicts its first token")
            full = list(s.prompt_ids) + list(s.completion_ids)
            ids.extend(full)
            pos.extend(range(len(full)))
            p = len(s.prompt_ids)
            # the logit at position t predicts token t + 1: positions p-1 .. len-2
            keep.extend([False] * (p - 1) + [True] * len(s.completion_ids) + [False])
            tgt.extend(s.completion_ids)
            adv.extend([s.advantage] * len(s.completion_ids))
            idx.extend([i] * len(s.completion_ids))
        batches.append(
            MicroBatch(
                input_ids=torch.tensor([ids], dtype=torch.long),
                position_ids=torch.tensor([pos], dtype=torch.long),
                keep=torch.tensor([keep], dtype=torch.bool),
                targets=torch.tensor(tgt, dtype=torch.long),
                advantages=torch.tensor(adv, dtype=torch.float32),
                seq_index=torch.tensor(idx, dtype=torch.long),
                members=list(row),
            )
        )
    return batches


def compute_context(model):
    """Low-precision compute for LoRA adapters kept in float32 on a bf16/fp16 base.

    peft keeps adapters in float32 (good: the optimiser's small steps survive) and casts
    every layer's input up to float32 for them, which on a CPU costs more than the base
    matmuls. Under autocast with peft's input casting off, the adapters compute in the
    base dtype while their weights and gradients stay float32. A no-op otherwise.
    """
    import contextlib

    import torch

    base = next((p.dtype for p in model.parameters() if not p.requires_grad), None)
    fp32_trainable = any(p.requires_grad and p.dtype == torch.float32 for p in model.parameters())
    if base not in (torch.bfloat16, torch.float16) or not fp32_trainable or not hasattr(model, "peft_config"):
        return contextlib.nullcontext()
    from peft.helpers import disable_input_dtype_casting

    device = next(model.parameters()).device.type
    stack = contextlib.ExitStack()
    stack.enter_context(torch.autocast(device_type=device, dtype=base))
    stack.enter_context(disable_input_dtype_casting(model))
    return stack


def sequence_logprobs(model, mb: MicroBatch, chunk_tokens: int = 0) -> "torch.Tensor":
    """Log-probabilities (float32) of a micro-batch's response tokens under `model`.

    The row is packed: with no attention mask and restarting position ids, transformers
    builds a block-diagonal causal mask, so sequences never see each other. Only the
    response positions are projected onto the vocabulary (`logits_to_keep`). Shared-prompt
    rows and `chunk_tokens` > 0 go through `codea1.logprobs.sampled_token_logprobs`.
    """
    import torch

    if chunk_tokens > 0 or mb.logit_index is not None:
        from codea1.logprobs import sampled_token_logprobs

        with compute_context(model):
            return sampled_token_logprobs(model, mb, chunk_tokens)
    with compute_context(model):
        out = model(
            input_ids=mb.input_ids,
            position_ids=mb.position_ids,
            logits_to_keep=mb.keep,
            use_cache=False,
        )
    logits = out.logits
    logits = logits.reshape(-1, logits.shape[-1])
    if logits.shape[0] != mb.targets.shape[0]:
        raise RuntimeError(
            f"model returned {logits.shape[0]} logits for {mb.targets.shape[0]} response tokens; "
            "it must support boolean logits_to_keep and packed position_ids"
        )
    return -torch.nn.functional.cross_entropy(logits.float(), mb.targets, reduction="none")


def micro_batches(model, seqs: Sequence[Trajectory], cfg: GRPOConfig) -> list[MicroBatch]:
    """The update's micro-batches: shared-prompt rows when configured and the model's
    attention takes a 4D mask, else one row per (prompt, response) pair."""
    if cfg.shared_prompt_rows:
        from codea1.logprobs import pack_shared_prompt_rows, supports_shared_prompt_rows

        if supports_shared_prompt_rows(model):
            return pack_shared_prompt_rows(seqs, cfg.micro_batch_tokens, cfg.pack_sequences)
    return pack_micro_batches(seqs, cfg.micro_batch_tokens, cfg.pack_sequences)


def first_mini_batch(n: int, cfg: GRPOConfig) -> set[int]:
    """The sequences whose old log-probs `update_policy` takes from its own first forward
    pass (`reuse_old_logprobs`): nothing has moved the policy before they are computed."""
    if not cfg.reuse_old_logprobs or n == 0:
        return set()
    return set(split_mini_batches(n, cfg.mini_batches)[0])


def _filler(model) -> MicroBatch:
    """A one-token micro-batch: what a rank with nothing left runs so that an FSDP2 model's
    forward/backward collectives still pair up with the other ranks' (its loss counts 0)."""
    pad = getattr(getattr(model, "config", None), "pad_token_id", None) or 0
    return pack_micro_batches([Trajectory([int(pad)], [int(pad)], 0.0)], 2)[0]


def trajectory_logprobs(model, seqs: Sequence[Trajectory], token_budget: int | GRPOConfig,
                        pack: bool = True, *, skip: Iterable[int] = (), sync=None) -> list["torch.Tensor | None"]:
    """Per-sequence response log-probs without gradients (the old policy or the reference).

    Sequences are packed like in the update (pass the `GRPOConfig` to use its layout;
    a token budget packs one row per pair); a sequence with an empty response gets an
    empty tensor, one listed in `skip` gets None (not computed). `sync`
    (`codea1.train.distributed.GradSync`) pads the forward passes to the busiest rank's.
    """
    import torch

    skip = set(skip)
    out: list[torch.Tensor | None] = [None if i in skip else torch.zeros(0) for i in range(len(seqs))]
    todo = [i for i in range(len(seqs)) if i not in skip]
    sub = [seqs[i] for i in todo]
    if isinstance(token_budget, GRPOConfig):
        cfg = token_budget
        batches, chunk = micro_batches(model, sub, cfg), cfg.logprob_chunk_tokens
    else:
        batches, chunk = pack_micro_batches(sub, token_budget, pack), 0
    extra = sync.forwards(len(batches)) - len(batches) if sync is not None else 0
    with torch.no_grad():
        for mb in batches:
            lp = sequence_logprobs(model, mb, chunk)
            for j in mb.members:
                out[todo[j]] = lp[mb.seq_index == j]
        for _ in range(extra):
            sequence_logprobs(model, _filler(model), chunk)
    return out


@dataclass
class UpdateStats:
    """What one `update_policy` call did, for the metrics."""

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

    def as_dict(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}/{k}": float(v) for k, v in self.__dict__.items()}


def split_mini_batches(n: int, mini_batches: int) -> list[list[int]]:
    """Contiguous split of n sequences into `mini_batches` near-equal parts (none empty)."""
    k = max(1, min(mini_batches, n))
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(k) if bounds[i + 1] > bounds[i]]


def update_policy(
    model, optimizer: "torch.optim.Optimizer", seqs: Sequence[Trajectory], cfg: GRPOConfig,
    old_logps: Sequence["torch.Tensor"], ref_logps: Sequence["torch.Tensor"] | None,
    is_weights: Sequence["torch.Tensor"] | None = None, *,
    layout: Sequence[Sequence[int]] | None = None, sync=None,
) -> UpdateStats:
    """One GRPO update: `ppo_epochs` passes over mini-batches of the sequences.

    `old_logps[i]` / `ref_logps[i]` are the per-token log-probs of sequence i's response
    under the policy before the update and under the frozen reference (computed by the
    caller, e.g. with `trajectory_logprobs`, because the reference may need another adapter
    state). `old_logps[i]` may be None for the sequences of `first_mini_batch`: their
    forward pass comes before any optimiser step, so its detached values are the old ones.
    Each mini-batch is packed into micro-batches; their losses are divided by
    the mini-batch's total token count, so the accumulated gradient is the mini-batch's
    token-mean exactly. Gradients are clipped to `grad_clip` before each optimiser step; a
    mini-batch whose gradient norm is not finite takes no step (`stats.update_skipped`).
    `is_weights[i]`: per-token importance weights of sequence i (`grpo.rollout_is`).

    Across ranks (`codea1.train.distributed`): `layout` lists this rank's sequences of each
    mini-batch (default: `split_mini_batches`), and `sync` sums the token count and the
    gradients over ranks, so every rank takes the same step on the global token-mean.
    """
    import torch

    stats = UpdateStats(sequences=len(seqs))
    layout = [list(m) for m in layout] if layout is not None else split_mini_batches(len(seqs), cfg.mini_batches)
    old_logps = list(old_logps)  # entries left None are filled from the first forward pass
    params = [p for g in optimizer.param_groups for p in g["params"]]
    sums = {"pg_loss_sum": 0.0, "clip_sum": 0.0, "dual_clip_sum": 0.0, "ratio_sum": 0.0, "kl_sum": 0.0}
    loss_total, n_mb, norms = 0.0, 0, []
    for _epoch in range(cfg.ppo_epochs):
        for members in layout:
            sub = [seqs[i] for i in members]
            n_tokens = sum(len(s.completion_ids) for s in sub)
            if sync is not None:
                n_tokens = sync.tokens(n_tokens)
            if n_tokens == 0:
                continue
            optimizer.zero_grad(set_to_none=True)
            mb_loss = 0.0
            mb_sums = dict.fromkeys(sums, 0.0)  # added to `sums` only when the step is taken
            batches = micro_batches(model, sub, cfg)
            extra = sync.forwards(len(batches)) - len(batches) if sync is not None else 0
            for _ in range(extra):  # FSDP2: pair up with the busier ranks' collectives
                (sequence_logprobs(model, _filler(model), cfg.logprob_chunk_tokens).sum() * 0.0).backward()
            for mb in batches:
                glob = [members[j] for j in mb.members]
                ref = torch.cat([ref_logps[g] for g in glob]) if ref_logps is not None else None
                isw = torch.cat([is_weights[g] for g in glob]) if is_weights is not None else None
                logp = sequence_logprobs(model, mb, cfg.logprob_chunk_tokens)
                for j, g in zip(mb.members, glob):
                    if old_logps[g] is None:  # not computed ahead: see `first_mini_batch`
                        if stats.optimizer_steps:
                            raise ValueError(f"sequence {g} has no old log-probs and the policy has "
                                             "already moved in this update")
                        old_logps[g] = logp.detach()[mb.seq_index == j]
                old = torch.cat([old_logps[g] for g in glob])
                mask = torch.ones_like(logp)
                loss, st = grpo_token_loss(logp, old, ref, mb.advantages, mask, cfg, n_tokens, isw)
                loss.backward()
                mb_loss += float(loss.detach())
                stats.forward_tokens += int(mb.input_ids.shape[1])
                for k in sums:
                    mb_sums[k] += st[k]
            if sync is not None:
                sync.gradients(params)
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            if hasattr(norm, "full_tensor"):  # a DTensor (FSDP2): the global norm
                norm = norm.full_tensor()
            if not math.isfinite(float(norm)):
                # as the reference's actor: a NaN/inf gradient is dropped, not applied (clipping
                # cannot repair it: it would scale every gradient by NaN); the same on every rank,
                # whose norm is the global one
                optimizer.zero_grad(set_to_none=True)
                stats.update_skipped += 1
                continue
            norms.append(float(norm))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            stats.optimizer_steps += 1
            stats.tokens += n_tokens
            for k in sums:
                sums[k] += mb_sums[k]
            loss_total += mb_loss
            n_mb += 1
    if sync is not None:  # the statistics of the whole (all-rank) update
        keys = list(sums)
        total = sync.sums([sums[k] for k in keys] + [loss_total, stats.forward_tokens, stats.sequences])
        sums = dict(zip(keys, total))
        loss_total, stats.forward_tokens, stats.sequences = total[-3], int(total[-2]), int(total[-1])
    if stats.tokens:
        stats.pg_loss = sums["pg_loss_sum"] / stats.tokens
        stats.kl = sums["kl_sum"] / stats.tokens
        stats.clip_frac = sums["clip_sum"] / stats.tokens
        stats.dual_clip_frac = sums["dual_clip_sum"] / stats.tokens
        stats.ratio_mean = sums["ratio_sum"] / stats.tokens
        stats.loss = loss_total / max(n_mb, 1)
    if norms:
        stats.grad_norm = sum(norms) / len(norms)
    return stats
