"""Response log-probabilities of the update's micro-batches, with less work and the same numbers.

`sequence_logprobs` (one micro-batch, under `compute_context`: LoRA adapters in the base
dtype), `trajectory_logprobs` (every sequence's, without gradients: the old policy's and
the reference's) and `micro_batches` (the update's packing) are what `codea1.grpo`'s
update calls. `trajectory.pack_micro_batches` gives every (prompt, response) pair a row
of its own, so a prompt sampled n times is computed n times, and the language-model
head's float32 log-softmax over the whole vocabulary is stored for every response token.
Here:

- shared-prompt rows (`pack_shared_prompt_rows`): the responses sampled from one
  prompt follow a single copy of it in one row; a 4D attention mask lets each response
  token see the prompt and the earlier tokens of its own response only, and its
  position ids continue from the prompt's end, so every log-probability is the one a
  row of its own gives, and the backward pass collects all n responses' gradients in
  the prompt's one computation;
- a response-only, chunked head (`sampled_token_logprobs`): only the positions that
  predict response tokens are projected onto the vocabulary, a chunk at a time, and
  only the sampled token's log-softmax is kept; the backward pass recomputes a chunk's
  logits instead of holding all of them.

`sequence_logprobs` / `grpo.update_policy` use these when the GRPO config asks
(`shared_prompt_rows`, `logprob_chunk_tokens`); tests/test_logprobs.py checks log-probs,
losses and gradients against the one-row-per-pair path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence

import torch
from peft.helpers import disable_input_dtype_casting

from codea1.configs import GRPOConfig
from codea1.trajectory import MicroBatch, Trajectory, pack_micro_batches

# attention implementations that take an explicit 4D mask (boolean for sdpa, additive for eager)
MASKED_ATTENTION = ("sdpa", "eager")


def supports_shared_prompt_rows(model) -> bool:
    """True when the model's attention takes a custom 4D mask (flash kernels do not)."""
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) in MASKED_ATTENTION


def prompt_groups(seqs: Sequence[Trajectory]) -> list[list[int]]:
    """Indices of the sequences sharing one prompt, per distinct prompt, in first-seen order.

    Sequences with an empty response carry nothing to train and are left out.
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, s in enumerate(seqs):
        if s.completion_ids:
            groups.setdefault(tuple(s.prompt_ids), []).append(i)
    return list(groups.values())


def _segments(seqs: Sequence[Trajectory], token_budget: int) -> list[list[int]]:
    """Each prompt group cut into pieces of at most `token_budget` tokens (prompt counted once).

    A piece always holds at least one response, so one over-long pair still gets a row.
    """
    pieces: list[list[int]] = []
    for group in prompt_groups(seqs):
        prompt_len = len(seqs[group[0]].prompt_ids)
        current: list[int] = []
        used = prompt_len
        for i in group:
            n = len(seqs[i].completion_ids)
            if current and used + n > token_budget:
                pieces.append(current)
                current, used = [], prompt_len
            current.append(i)
            used += n
        pieces.append(current)
    return pieces


def pack_shared_prompt_rows(seqs: Sequence[Trajectory], token_budget: int,
                            pack: bool = True, with_spans: bool = True) -> list[MicroBatch]:
    """Micro-batches whose rows hold each prompt once, followed by its responses.

    Rows respect `token_budget` (a prompt group too long for one row is split, the prompt
    repeated in each piece); with `pack`, several prompt groups share a row (the mask keeps
    them apart), else each piece has a row of its own; with `with_spans`, each row's mask carries
    its layout for `span_attention` (sdpa). `members` lists the sequences in the
    order of their targets; `logit_index[k]` is the row position whose output predicts
    target k (the prompt's last position predicts every response's first token).
    """
    rows: list[list[list[int]]] = []
    used = 0
    for piece in _segments(seqs, token_budget):
        size = len(seqs[piece[0]].prompt_ids) + sum(len(seqs[i].completion_ids) for i in piece)
        if not rows or not pack or used + size > token_budget:
            rows.append([])
            used = 0
        rows[-1].append(piece)
        used += size
    return [_shared_prompt_row(seqs, row, with_spans) for row in rows]


def _shared_prompt_row(seqs: Sequence[Trajectory], row: list[list[int]], with_spans: bool = True) -> MicroBatch:
    """One row: each piece's prompt once, then its responses, with the mask that keeps
    every response to its prompt and itself."""
    ids: list[int] = []
    pos: list[int] = []
    segment: list[int] = []   # which piece each token belongs to
    response: list[int] = []  # -1 for prompt tokens, else the response's number in the row
    logit_index: list[int] = []
    tgt: list[int] = []
    adv: list[float] = []
    idx: list[int] = []
    members: list[int] = []
    n_resp = 0
    spans: list[tuple[int, int, list[tuple[int, int]]]] = []
    for seg, piece in enumerate(row):
        prompt = seqs[piece[0]].prompt_ids
        if not prompt:
            raise ValueError(f"sequence {piece[0]} has an empty prompt; nothing predicts its first token")
        last_prompt = len(ids) + len(prompt) - 1
        spans.append((len(ids), len(prompt), []))
        ids.extend(prompt)
        pos.extend(range(len(prompt)))
        segment.extend([seg] * len(prompt))
        response.extend([-1] * len(prompt))
        for i in piece:
            s = seqs[i]
            start = len(ids)
            comp = list(s.completion_ids)
            spans[-1][2].append((start, len(comp)))
            ids.extend(comp)
            pos.extend(range(len(prompt), len(prompt) + len(comp)))
            segment.extend([seg] * len(comp))
            response.extend([n_resp] * len(comp))
            # token 0 is predicted by the prompt's last position, token j by its own j - 1
            logit_index.extend([last_prompt] + list(range(start, start + len(comp) - 1)))
            tgt.extend(comp)
            adv.extend([s.advantage] * len(comp))
            idx.extend([i] * len(comp))
            members.append(i)
            n_resp += 1
    seg_t = torch.tensor(segment)
    resp_t = torch.tensor(response)
    n = len(ids)
    order = torch.arange(n)
    allowed = (
        (seg_t[:, None] == seg_t[None, :])
        & (order[None, :] <= order[:, None])
        & ((resp_t[None, :] == -1) | (resp_t[None, :] == resp_t[:, None]))
    )[None, None]
    if with_spans:
        allowed.codea1_spans = RowSpans(spans)  # what span_attention computes instead of the [L, L] mask
    return MicroBatch(
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([pos], dtype=torch.long),
        keep=torch.zeros((1, n), dtype=torch.bool),  # unused: logit_index says where
        targets=torch.tensor(tgt, dtype=torch.long),
        advantages=torch.tensor(adv, dtype=torch.float32),
        seq_index=torch.tensor(idx, dtype=torch.long),
        members=members,
        attention_mask=allowed,
        logit_index=torch.tensor(logit_index, dtype=torch.long),
    )


def model_attention_mask(model, allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The boolean [1, 1, L, L] mask in the form the model's attention takes."""
    impl = getattr(model.config, "_attn_implementation", None)
    if impl == "sdpa":
        return allowed
    if impl == "eager":
        return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    raise ValueError(f"attention implementation {impl!r} takes no custom 4D mask; "
                     "set grpo.shared_prompt_rows=false")


VOCAB_TILE = 2048  # vocabulary columns per tile: a [chunk, tile] float32 block stays in cache


class _SampledTokenLogprob(torch.autograd.Function):
    """log_softmax(hidden @ weight.T)[target] per row, a chunk of rows and a tile of the
    vocabulary at a time.

    Forward keeps each row's logsumexp only, accumulated over vocabulary tiles (the running
    maximum rescales the running sum, as flash attention's softmax does). No [tokens,
    vocabulary] tensor is ever made: a [chunk, VOCAB_TILE] block is, which stays in the
    CPU's cache across the half-dozen elementwise passes a tile takes (with whole-vocabulary
    rows each pass went to memory: 2.4x slower on the cpu-demo's head). Logits are computed
    in the hidden states' dtype and reduced in float32, as `cross_entropy(logits.float())` does.

    The gradient of a row's log-prob is g * (onehot - softmax) over the vocabulary, so
    with a frozen head (LoRA) the hidden state's gradient is g * (W[target] - softmax @ W):
    the forward accumulates softmax @ W over the tiles it already computes (rescaled with
    the running maximum, as flash attention's output is) and the backward is one
    elementwise step, where recomputing every tile's logits for it cost a third more head
    work. A trainable head needs each tile's (onehot - softmax) for its own gradient: the
    backward recomputes them.
    """

    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk):
        w = weight.to(hidden.dtype)
        acc = torch.promote_types(hidden.dtype, torch.float32)  # float32, or float64 in checks
        out = torch.empty(hidden.shape[0], dtype=acc, device=hidden.device)
        lse = torch.empty_like(out)
        # the softmax-weighted head rows, when the backward can be formed from them alone
        expect = ctx.needs_input_grad[0] and not ctx.needs_input_grad[1]
        mean = torch.empty(hidden.shape, dtype=acc, device=hidden.device) if expect else None
        for s in range(0, hidden.shape[0], chunk):
            lse[s:s + chunk], out[s:s + chunk] = _chunk_logsumexp(
                hidden[s:s + chunk], w, targets[s:s + chunk], acc, mean[s:s + chunk] if expect else None)
        out -= lse
        if expect:
            mean.sub_(w[targets].to(acc)).neg_()                # W[target] - softmax @ W
            ctx.save_for_backward(mean)
        else:
            ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.chunk, ctx.expect, ctx.hidden_dtype = chunk, expect, hidden.dtype
        return out

    @staticmethod
    def backward(ctx, grad):
        if ctx.expect:
            (direction,) = ctx.saved_tensors
            return (direction * grad[:, None].to(direction.dtype)).to(ctx.hidden_dtype), None, None, None
        hidden, weight, targets, lse = ctx.saved_tensors
        w = weight.to(hidden.dtype)
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h = torch.empty_like(hidden) if need_h else None
        acc = lse.dtype
        grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_w else None
        chunk = ctx.chunk
        for s in range(0, hidden.shape[0], chunk):
            h, t = hidden[s:s + chunk], targets[s:s + chunk]
            g = grad[s:s + chunk, None].to(acc)
            gh = torch.zeros(h.shape, dtype=acc, device=h.device) if need_h else None
            for v0 in range(0, w.shape[0], VOCAB_TILE):
                wt = w[v0:v0 + VOCAB_TILE]
                d = (h @ wt.T).to(acc)
                d.sub_(lse[s:s + chunk, None]).exp_().mul_(-g)       # -softmax * grad
                rows, cols = _targets_in(t, v0, d.shape[1])
                d[rows, cols] += g[rows, 0]                          # + onehot * grad
                d = d.to(hidden.dtype)
                if need_h:
                    gh += (d @ wt).to(acc)
                if need_w:
                    grad_w[v0:v0 + VOCAB_TILE] += (d.T @ h).to(acc)
            if need_h:
                grad_h[s:s + chunk] = gh.to(hidden.dtype)
        return grad_h, (grad_w.to(weight.dtype) if need_w else None), None, None


def _targets_in(targets: torch.Tensor, v0: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, columns within the tile) of the targets that fall in vocabulary [v0, v0 + width)."""
    rows = ((targets >= v0) & (targets < v0 + width)).nonzero().squeeze(-1)
    return rows, targets[rows] - v0


def _chunk_logsumexp(h: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, acc: torch.dtype,
                     mean: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(logsumexp, target logit) of each row of h @ w.T, one vocabulary tile at a time;
    with `mean` [rows, hidden], also writes each row's softmax @ w into it.

    h: [rows, hidden], w: [vocab, hidden], targets: [rows] -> two [rows] tensors in `acc`.
    """
    rows = h.shape[0]
    top = torch.full((rows,), float("-inf"), dtype=acc, device=h.device)
    total = torch.zeros(rows, dtype=acc, device=h.device)
    picked = torch.empty(rows, dtype=acc, device=h.device)
    if mean is not None:
        mean.zero_()
    for v0 in range(0, w.shape[0], VOCAB_TILE):
        wt = w[v0:v0 + VOCAB_TILE]
        logits = (h @ wt.T).to(acc)
        hit, cols = _targets_in(targets, v0, logits.shape[1])
        picked[hit] = logits[hit, cols]
        new_top = torch.maximum(top, logits.amax(-1))
        rescale = (top - new_top).exp_()
        total.mul_(rescale)
        weights = logits.sub_(new_top[:, None]).exp_()           # exp(logit - running max)
        total += weights.sum(-1)
        if mean is not None:
            mean.mul_(rescale[:, None])
            if weights.dtype == wt.dtype:
                mean.addmm_(weights, wt)
            else:
                mean += (weights.to(wt.dtype) @ wt).to(acc)
        top = new_top
    if mean is not None:
        mean.div_(total[:, None])
    return top + total.log(), picked


def _plain_head(module) -> bool:
    return type(module) is torch.nn.Linear and module.bias is None


def _fsdp_root(module) -> bool:
    """An FSDP2-sharded model gathers its weights in its own forward's hooks, so the
    decoder and head cannot be called apart: it takes the model's forward (imported here:
    a torch build may lack torch.distributed)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def _causal_lm(model):
    """The transformers causal LM inside a peft wrapper (or the model itself)."""
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) else model


def sampled_token_logprobs(model, mb: MicroBatch, chunk_tokens: int) -> torch.Tensor:
    """Log-probs (float32) of `mb.targets` with the decoder run once and a chunked head.

    Falls back to the model's own forward (with `logits_to_keep`) when the head is not a
    plain bias-free linear layer or the model post-processes its logits (soft-capping).
    Must run inside `compute_context(model)`.
    """
    index = mb.logit_index if mb.logit_index is not None else mb.keep[0].nonzero().squeeze(-1)
    lm = _causal_lm(model)
    head = lm.get_output_embeddings()
    mask = None
    if mb.attention_mask is not None:
        dtype = next(p for p in lm.parameters()).dtype
        mask = model_attention_mask(lm, mb.attention_mask, dtype)
        if mask is mb.attention_mask:  # sdpa: computed span by span
            use_span_attention()
    if (chunk_tokens <= 0 or not _plain_head(head) or getattr(lm.config, "final_logit_softcapping", None)
            or _fsdp_root(lm)):
        out = model(input_ids=mb.input_ids, position_ids=mb.position_ids, attention_mask=mask,
                    logits_to_keep=index, use_cache=False)
        logits = out.logits.reshape(-1, out.logits.shape[-1])
        return -torch.nn.functional.cross_entropy(logits.float(), mb.targets, reduction="none")
    hidden = lm.get_decoder()(input_ids=mb.input_ids, position_ids=mb.position_ids,
                              attention_mask=mask, use_cache=False).last_hidden_state
    return _SampledTokenLogprob.apply(hidden[0, index], head.weight, mb.targets, chunk_tokens)


class RowSpans:
    """A shared-prompt row's layout: per piece (prompt start, prompt length, [(response
    start, response length), ...]), in row order, covering the row; with each response's
    [length, prompt + length] mask (all of its prompt, then causal), made once."""

    def __init__(self, spans: list[tuple[int, int, list[tuple[int, int]]]]) -> None:
        self.spans = spans
        self.masks = {}
        for _, plen, responses in spans:
            for _, rlen in responses:
                if (plen, rlen) not in self.masks:
                    self.masks[plen, rlen] = torch.cat([torch.ones(rlen, plen, dtype=torch.bool),
                                                        torch.ones(rlen, rlen, dtype=torch.bool).tril()], dim=1)


def span_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers' sdpa attention, computed span by span for a shared-prompt row.

    query [1, H, L, D], key and value [1, KV, L, D]; returns ([1, L, H, D], None) as every
    transformers attention function does. A row holds each prompt once, then its responses:
    each prompt attends causally to itself, each response to its prompt and its own earlier
    tokens -- what the row's [L, L] mask allows, without the scores it masks out (about two
    thirds of them at the cpu-demo's shape). Any other call (a mask without `codea1_spans`)
    is transformers' own sdpa, and so is any call off the CPU (where one fused kernel over
    the mask may beat many small launches; unmeasured). The same function runs again in an
    activation-checkpointed backward: the mask object travels with the layer's inputs.
    """
    layout = getattr(attention_mask, "codea1_spans", None)
    if (layout is None or query.shape[0] != 1 or query.device.type != "cpu"
            or kwargs.get("position_bias") is not None):
        return _TRANSFORMERS_SDPA(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  **kwargs)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    gqa = query.shape[1] != key.shape[1]
    outs = []
    for p0, plen, responses in layout.spans:
        kp, vp = key[:, :, p0:p0 + plen], value[:, :, p0:p0 + plen]
        outs.append(sdpa(query[:, :, p0:p0 + plen], kp, vp, is_causal=True, dropout_p=dropout, scale=scaling,
                         enable_gqa=gqa))
        for r0, rlen in responses:
            k = torch.cat([kp, key[:, :, r0:r0 + rlen]], dim=2)
            v = torch.cat([vp, value[:, :, r0:r0 + rlen]], dim=2)
            outs.append(sdpa(query[:, :, r0:r0 + rlen], k, v, attn_mask=layout.masks[plen, rlen],
                             dropout_p=dropout, scale=scaling, enable_gqa=gqa))
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), None


_TRANSFORMERS_SDPA = None


def use_span_attention() -> None:
    """Route transformers' "sdpa" attention through `span_attention` (once a process).

    Registered under the name "sdpa" so that a model needs no new implementation name
    (nor a config change that a checkpointed backward would not see); a call whose mask
    does not come from `pack_shared_prompt_rows` goes to transformers' own function.
    """
    global _TRANSFORMERS_SDPA
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if _TRANSFORMERS_SDPA is None:
        _TRANSFORMERS_SDPA = ALL_ATTENTION_FUNCTIONS["sdpa"]
        AttentionInterface.register("sdpa", span_attention)


# --------------------------------------------------------------------------- the update's log-probs


def compute_context(model):
    """Low-precision compute for LoRA adapters kept in float32 on a bf16/fp16 base.

    peft keeps adapters in float32 (good: the optimiser's small steps survive) and casts
    every layer's input up to float32 for them, which on a CPU costs more than the base
    matmuls. Under autocast with peft's input casting off, the adapters compute in the
    base dtype while their weights and gradients stay float32. A no-op otherwise.
    """
    base = next((p.dtype for p in model.parameters() if not p.requires_grad), None)
    fp32_trainable = any(p.requires_grad and p.dtype == torch.float32 for p in model.parameters())
    if base not in (torch.bfloat16, torch.float16) or not fp32_trainable or not hasattr(model, "peft_config"):
        return contextlib.nullcontext()
    device = next(model.parameters()).device.type
    stack = contextlib.ExitStack()
    stack.enter_context(torch.autocast(device_type=device, dtype=base))
    stack.enter_context(disable_input_dtype_casting(model))
    return stack


def sequence_logprobs(model, mb: MicroBatch, chunk_tokens: int = 0) -> torch.Tensor:
    """Log-probabilities (float32) of a micro-batch's response tokens under `model`.

    The row is packed: with no attention mask and restarting position ids, transformers
    builds a block-diagonal causal mask, so sequences never see each other. Only the
    response positions are projected onto the vocabulary (`logits_to_keep`). Shared-prompt
    rows and `chunk_tokens` > 0 go through `codea1.logprobs.sampled_token_logprobs`.
    """
    if chunk_tokens > 0 or mb.logit_index is not None:
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
    if cfg.shared_prompt_rows and supports_shared_prompt_rows(model):
        return pack_shared_prompt_rows(seqs, cfg.micro_batch_tokens, cfg.pack_sequences, cfg.span_attention)
    return pack_micro_batches(seqs, cfg.micro_batch_tokens, cfg.pack_sequences)


def trajectory_logprobs(model, seqs: Sequence[Trajectory], token_budget: int | GRPOConfig,
                        pack: bool = True, *, skip: Iterable[int] = (),
                        pad_passes: Callable[[int, int], None] | None = None) -> list[torch.Tensor | None]:
    """Per-sequence response log-probs without gradients (the old policy or the reference).

    Sequences are packed like in the update (pass the `GRPOConfig` to use its layout;
    a token budget packs one row per pair); a sequence with an empty response gets an
    empty tensor, one listed in `skip` gets None (not computed). `pad_passes(micro_batches,
    chunk_tokens)` runs first, under no_grad: where several FSDP2 ranks pad their forward
    passes to the busiest rank's (`codea1.train.distributed.GradSync`).
    """
    skip = set(skip)
    out: list[torch.Tensor | None] = [None if i in skip else torch.zeros(0) for i in range(len(seqs))]
    todo = [i for i in range(len(seqs)) if i not in skip]
    sub = [seqs[i] for i in todo]
    if isinstance(token_budget, GRPOConfig):
        cfg = token_budget
        batches, chunk = micro_batches(model, sub, cfg), cfg.logprob_chunk_tokens
    else:
        batches, chunk = pack_micro_batches(sub, token_budget, pack), 0
    with torch.no_grad():
        if pad_passes is not None:
            pad_passes(len(batches), chunk)
        for mb in batches:
            lp = sequence_logprobs(model, mb, chunk)
            for j in mb.members:
                out[todo[j]] = lp[mb.seq_index == j]
    return out


# --------------------------------------------------------------------------- the update's LoRA layers


class _FusedLoRALinear(torch.autograd.Function):
    """y = x W^T + b + scale * (x A^T) B^T, with gradients for x and the adapter's A and B
    (the base W, b frozen).

    peft makes the adapter's term a [tokens, d_out] tensor of its own, scales it into a
    second and adds it into a third, and its backward makes two more (the scaled gradient
    and x's second gradient); on a CPU those full passes over memory, for r = 16
    multiply-adds a value, cost a third of the layer's time (an MLP layer's forward and
    backward, float32, 2-core AVX2: 120 ms -> 90 ms). Here the adapter's product goes into
    the base's output by one addmm, and the backward works from the [tokens, r] products:

        h = x A^T,  g = scale * dy B,  dB = scale * dy^T h,  dA = g^T x,  dx = dy W + g A
    """

    @staticmethod
    def forward(ctx, x, weight, bias, lora_a, lora_b, scale):
        dtype = weight.dtype
        x2 = x.reshape(-1, x.shape[-1]).to(dtype)
        a, b = lora_a.to(dtype), lora_b.to(dtype)
        h = x2 @ a.t()                                                   # [N, r]
        y = torch.nn.functional.linear(x2, weight, bias)                 # [N, d_out]
        y.addmm_(h, b.t(), alpha=scale)
        ctx.save_for_backward(x2, weight, a, b, h)
        ctx.scale, ctx.x_shape, ctx.x_dtype = scale, x.shape, x.dtype
        ctx.param_dtypes = (lora_a.dtype, lora_b.dtype)
        return y.view(*x.shape[:-1], y.shape[-1])

    @staticmethod
    def backward(ctx, dy):
        x2, weight, a, b, h = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1]).to(weight.dtype)
        g = (dy2 @ b).mul_(ctx.scale)                                    # [N, r]
        dx = None
        if ctx.needs_input_grad[0]:
            dx = dy2 @ weight
            dx.addmm_(g, a)
            dx = dx.view(ctx.x_shape).to(ctx.x_dtype)
        d_a = (g.t() @ x2).to(ctx.param_dtypes[0]) if ctx.needs_input_grad[3] else None
        d_b = (dy2.t() @ h).mul_(ctx.scale).to(ctx.param_dtypes[1]) if ctx.needs_input_grad[4] else None
        return dx, None, None, d_a, d_b, None


def _lora_layers(model) -> list:
    return [m for m in model.modules()
            if hasattr(m, "lora_A") and hasattr(m, "get_base_layer") and hasattr(m, "scaling")]


def fused_lora_unsupported(module) -> str | None:
    """Why this adapted layer keeps peft's forward; None when `_FusedLoRALinear` computes it."""
    if module.disable_adapters:
        return "adapters disabled"
    if module.merged:
        return "adapter merged into the base"
    active = [name for name in module.active_adapters if name in module.lora_A]
    if len(active) != 1:
        return f"{len(active)} active adapters (one fuses)"
    name = active[0]
    if name in (getattr(module, "lora_variant", None) or {}) or (getattr(module, "use_dora", None) or {}).get(name):
        return "a LoRA variant (plain LoRA only)"
    if module.training and not isinstance(module.lora_dropout[name], torch.nn.Identity):
        return "LoRA dropout in training mode"
    lora_a, lora_b = module.lora_A[name], module.lora_B[name]
    if not (isinstance(lora_a, torch.nn.Linear) and isinstance(lora_b, torch.nn.Linear)) or lora_b.bias is not None:
        return "adapter factors other than two bias-free linear layers"
    base = module.get_base_layer()
    if type(base) is not torch.nn.Linear:
        return f"base layer {type(base).__name__} (nn.Linear only)"
    if base.weight.requires_grad or (base.bias is not None and base.bias.requires_grad):
        return "trainable base weight"
    if base.weight.device.type != "cpu" or hasattr(base.weight, "full_tensor"):
        return "not a plain CPU tensor"
    return None


def _fused_forward(module, original, x, *args, **kwargs):
    if args or kwargs or fused_lora_unsupported(module) is not None:
        return original(x, *args, **kwargs)
    [name] = [n for n in module.active_adapters if n in module.lora_A]
    base = module.get_base_layer()
    return _FusedLoRALinear.apply(x, base.weight, base.bias, module.lora_A[name].weight,
                                  module.lora_B[name].weight, float(module.scaling[name]))


@contextlib.contextmanager
def fused_lora(model, enabled: bool = True):
    """While the block runs, the model's LoRA layers compute through `_FusedLoRALinear`
    (CPU tensors, one plain adapter; any other layer, and every layer with adapters
    disabled as for the reference, keeps peft's forward). The same function as peft's;
    float32 results agree to rounding (the forward bit for bit where the scaling is a power
    of two, as the presets' alpha / r = 2 is)."""
    layers = _lora_layers(model) if enabled else []
    saved = []
    for module in layers:
        saved.append((module, module.__dict__.get("forward")))
        original = module.forward
        module.forward = lambda x, *a, _m=module, _o=original, **kw: _fused_forward(_m, _o, x, *a, **kw)
    try:
        yield
    finally:
        for module, previous in saved:
            if previous is None:
                del module.forward
            else:
                module.forward = previous
