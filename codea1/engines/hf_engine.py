"""The `hf` rollout engine: codea1's own batched sampler on the training model itself.

It samples with the very weights the trainer updates, so nothing needs syncing and there
is no second copy of the model; it reports no per-token log-probabilities (the update
recomputes them with the same weights).

`generate` is a hand-written sampling loop over a KV cache rather than `model.generate`
because on a CPU the wins come from things `generate` does not do: the prompt of a
problem is encoded once and its KV cache shared by its `n` samples; batches are wide
(64 rows) with prompts sorted by length to keep left padding small; finished rows are
dropped from the batch (and their cache) as they end, so late steps stay cheap. On a CPU
it decodes through `codea1.lean_forward` (merged LoRA, fused projections) where the
architecture allows, else through the model's own forward.

`HFEngine.generate` looks `generate` up in this module when it is called, so a test that
replaces `codea1.engines.hf_engine.generate` (monkeypatch) is seen by every caller.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from codea1.engines.interface import RolloutEngine
from codea1.lean_forward import KVCache, LeanModel, PromptMemo, unsupported
from codea1.rollout import (
    GenerationInterrupted,
    GenerationStats,
    Prompt,
    Sample,
    SamplingConfig,
    StopStrings,
    context_length,
    derive_seed,
    encode_prompts,
    fit_prompts,
    make_samples,
    stop_token_ids,
)

if TYPE_CHECKING:
    from codea1.models import Policies


# --- sampling -------------------------------------------------------------------------------------


def _row_uniforms(generators: "Sequence[torch.Generator]", like: "torch.Tensor") -> "torch.Tensor":
    """One uniform number per row, each from its own (CPU) generator, shaped [B, 1] as `like`."""

    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in generators])
    return u.to(device=like.device, dtype=like.dtype).unsqueeze(-1)


def sample_next(logits: "torch.Tensor", temperature: float, top_p: float,
                generator: "torch.Generator | Sequence[torch.Generator] | None") -> "torch.Tensor":
    """Draw one token per row from float logits [B, V] (greedy when temperature is 0).

    `generator` is one generator for the batch, or a list of one generator per row.
    """

    if temperature == 0.0:
        return logits.argmax(dim=-1)
    if temperature == 1.0:  # the same numbers as below (x / 1.0 == x), one pass over the vocabulary fewer
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    else:
        probs = torch.softmax(logits.float() / temperature, dim=-1)
    order = None
    if top_p < 1.0:
        probs, order = probs.sort(dim=-1, descending=True)
        # keep the smallest prefix whose mass reaches top_p (the first token always stays)
        probs = probs.masked_fill((probs.cumsum(dim=-1) - probs) >= top_p, 0.0)
    # inverse-CDF draw: one uniform number a row (torch.multinomial draws one a vocabulary entry)
    cumulative = probs.cumsum(dim=-1)
    if isinstance(generator, (list, tuple)):
        u = _row_uniforms(generator, cumulative[:, :1])
    else:
        u = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=cumulative.dtype)
    picked = torch.searchsorted(cumulative, u * cumulative[:, -1:], right=True)
    picked = picked.clamp_(max=probs.shape[-1] - 1)
    # a zero-probability entry can only be hit at the float edge: step back to a live one
    dead = probs.gather(-1, picked) == 0
    if bool(dead.any()):
        live_last = (probs > 0).long().cumsum(-1).argmax(-1, keepdim=True)
        picked = torch.where(dead, torch.minimum(picked, live_last), picked)
    if order is not None:
        picked = order.gather(-1, picked)
    return picked.squeeze(-1)


def _plan_chunks(order: list[int], n: int, batch_size: int) -> list[list[tuple[int, int]]]:
    """Group (prompt, sample count) pieces into chunks of at most `batch_size` rows.

    A prompt's samples stay together (they share one prefill) unless `n > batch_size`.
    """
    chunks: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    rows = 0
    for p in order:
        remaining = n
        while remaining > 0:
            take = min(remaining, batch_size)
            if rows + take > batch_size and current:
                chunks.append(current)
                current, rows = [], 0
            current.append((p, take))
            rows += take
            remaining -= take
    if current:
        chunks.append(current)
    return chunks


def _growing_cache(model, capacity: int):
    """A DynamicCache whose full-attention layers append into preallocated buffers.

    transformers' DynamicLayer concatenates the whole cache at every step (O(length)
    copies per token); this layer writes the new step into spare room instead.
    """

    class GrowingLayer(DynamicLayer):
        def lazy_initialization(self, key_states, value_states):
            super().lazy_initialization(key_states, value_states)
            self._k = self._v = None
            self._len = 0

        def _alloc(self, like, rows: int, room: int):
            return like.new_empty((rows, like.shape[1], room, like.shape[3]))

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = key_states.shape[-2]
            if self._k is None or self._len + n > self._k.shape[-2]:
                room = max(capacity, 2 * (self._len + n))
                k = self._alloc(key_states, key_states.shape[0], room)
                v = self._alloc(value_states, value_states.shape[0], room)
                if self._k is not None:
                    k[..., : self._len, :] = self._k[..., : self._len, :]
                    v[..., : self._len, :] = self._v[..., : self._len, :]
                self._k, self._v = k, v
            self._k[..., self._len: self._len + n, :] = key_states
            self._v[..., self._len: self._len + n, :] = value_states
            self._len += n
            self.keys = self._k[..., : self._len, :]
            self.values = self._v[..., : self._len, :]
            return self.keys, self.values

        def batch_select_indices(self, indices):
            if self.get_seq_length() > 0:
                # copy only the filled part into a fresh buffer with the same spare room
                room = self._k.shape[-2]
                k = self._alloc(self._k, len(indices), room)
                v = self._alloc(self._v, len(indices), room)
                k[..., : self._len, :] = self.keys[indices]
                v[..., : self._len, :] = self.values[indices]
                self._k, self._v = k, v
                self.keys = k[..., : self._len, :]
                self.values = v[..., : self._len, :]

        def batch_repeat_interleave(self, repeats: int):
            if self.get_seq_length() > 0:
                idx = torch.arange(self._k.shape[0], device=self._k.device).repeat_interleave(repeats)
                self.batch_select_indices(idx)

        def crop(self, tokens_to_remove: int):
            raise NotImplementedError("rollout caches are never cropped")

    cache = DynamicCache(config=model.config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


@contextlib.contextmanager
def _adapters_in_model_dtype(model, dtype) -> Iterator[None]:
    """Run the active LoRA adapters in the base model's dtype while sampling.

    peft keeps adapters in float32 (an update of lr 1e-6 vanishes in bf16), so every
    adapted layer casts its input to float32 and its output back: about a fifth of a
    bf16 decode step on a CPU. Sampling needs no float32 adapters: their weights are
    swapped for `dtype` copies for the duration and the float32 tensors put back after,
    untouched (the optimiser's parameters are the same objects throughout).
    """

    swapped: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
    try:
        active = getattr(model, "active_adapters", None)
        if active and dtype in (torch.bfloat16, torch.float16):
            names = set(active if isinstance(active, (list, tuple)) else [active])
            for module in model.modules():
                for attr in ("lora_A", "lora_B"):
                    holder = getattr(module, attr, None)
                    if not isinstance(holder, torch.nn.ModuleDict):
                        continue
                    for name in names & set(holder.keys()):
                        weight = getattr(holder[name], "weight", None)
                        if isinstance(weight, torch.nn.Parameter) and weight.dtype != dtype:
                            swapped.append((weight, weight.data))
                            weight.data = weight.data.to(dtype)
        yield
    finally:
        for weight, original in swapped:
            weight.data = original


def _weights_state(model) -> tuple:
    """What the merged weights depend on: the active adapters, whether they are on, and
    every parameter's identity and in-place version (an optimiser step bumps it)."""
    layers = [m for m in model.modules() if hasattr(m, "lora_A")]
    flags = tuple((tuple(m.active_adapters), m.disable_adapters, m.merged) for m in layers[:1])
    return (id(model), flags, tuple((p.data_ptr(), p._version) for p in model.parameters()))


def lean_model(model, cfg: SamplingConfig, device) -> "LeanModel | None":
    """The model's `LeanModel` for sampling as its weights are now, or None where the
    transformers forward samples instead (`cfg.lean_forward` off, not a CPU, or an
    architecture `codea1.lean_forward` does not cover). Kept on the model until its
    weights change or `release_lean` drops it (before an update needs the memory)."""
    if not cfg.lean_forward or torch.device(device).type != "cpu" or unsupported(model) is not None:
        return None
    key = _weights_state(model)
    cached = getattr(model, "_codea1_lean", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    model._codea1_lean = None  # the old copy goes before the new one is built
    with torch.no_grad():
        lean = LeanModel(model)
    model._codea1_lean = (key, lean)
    return lean


def release_lean(model) -> None:
    """Drop the merged sampling weights kept on `model` (see `lean_model`)."""
    if getattr(model, "_codea1_lean", None) is not None:
        model._codea1_lean = None


class _TransformersForward:
    """Sampling through the model's own forward (any architecture transformers runs)."""

    def __init__(self, model, pieces: list[tuple[int, int]], prompt_ids: list[list[int]],
                 cfg: SamplingConfig, pad_id: int, device, stats: GenerationStats) -> None:
        self.model, self.pieces, self.prompt_ids, self.cfg = model, pieces, prompt_ids, cfg
        self.pad_id, self.device, self.stats = pad_id, device, stats

    def first(self) -> "torch.Tensor":
        """Prefill every prompt of the chunk once; the logits of each row's first token [rows, V]."""
        unique = [p for p, _ in self.pieces]
        width = max(len(self.prompt_ids[p]) for p in unique)
        ids = torch.full((len(unique), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(unique), width), dtype=torch.long)
        for row, p in enumerate(unique):
            seq = self.prompt_ids[p]
            ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        self.cache = _growing_cache(self.model, capacity=width + self.cfg.max_new_tokens)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=self.cache,
                         use_cache=True, logits_to_keep=1)
        self.stats.forward_passes += 1
        self.stats.prefill_tokens += sum(len(self.prompt_ids[p]) for p in unique)
        # share each prompt's prefill among its samples
        repeat = torch.tensor([k for _, k in self.pieces], device=self.device)
        expand = torch.repeat_interleave(torch.arange(len(unique), device=self.device), repeat)
        self.cache.batch_select_indices(expand)
        self.mask, self.next_pos = mask[expand], positions[expand, -1] + 1
        return out.logits[:, -1, :][expand]

    def next(self, tokens: "torch.Tensor", keep: "torch.Tensor | None") -> "torch.Tensor":
        """Feed each live row's token (rows not in `keep` dropped first); the next logits."""
        if keep is not None:
            self.cache.batch_select_indices(keep)
            tokens, self.mask, self.next_pos = tokens[keep], self.mask[keep], self.next_pos[keep]
        self.mask = torch.cat([self.mask, torch.ones((self.mask.shape[0], 1), dtype=self.mask.dtype,
                                                     device=self.device)], dim=1)
        out = self.model(input_ids=tokens[:, None], attention_mask=self.mask, position_ids=self.next_pos[:, None],
                         cache=self.cache, use_cache=True)
        self.stats.forward_passes += 1
        self.stats.decode_passes += 1
        self.next_pos = self.next_pos + 1
        return out.logits[:, -1, :]


class _LeanForward:
    """Sampling through `codea1.lean_forward.LeanModel` (merged LoRA, fused projections)."""

    def __init__(self, lean: "LeanModel", pieces: list[tuple[int, int]], prompt_ids: list[list[int]],
                 cfg: SamplingConfig, stats: GenerationStats) -> None:
        self.lean, self.pieces, self.prompt_ids, self.cfg, self.stats = lean, pieces, prompt_ids, cfg, stats

    def first(self) -> "torch.Tensor":
        """Prefill each prompt once, alone (no padding work), into the rows of its samples;
        a prompt's start shared with the prompt before it is not run again (`PromptMemo`)."""
        lengths = [len(self.prompt_ids[p]) for p, k in self.pieces for _ in range(k)]
        width = max(lengths)
        self.cache = KVCache(self.lean, len(lengths), width, self.cfg.max_new_tokens, lengths)
        logits, row = [], 0
        memo = PromptMemo()  # prompts that start alike (one problem's test prompts) share that start
        for p, k in self.pieces:
            rows = torch.arange(row, row + k, device=self.lean.embed.device)
            last = self.lean.prefill(self.prompt_ids[p], self.cache, rows, memo)
            logits.append(last.expand(k, -1))
            row += k
        self.stats.prefill_tokens += sum(len(self.prompt_ids[p]) for p, _ in self.pieces) - memo.reused
        self.stats.forward_passes += 1
        self.positions = torch.tensor(lengths, dtype=torch.long, device=self.lean.embed.device)
        return torch.cat(logits)

    def next(self, tokens: "torch.Tensor", keep: "torch.Tensor | None") -> "torch.Tensor":
        if keep is not None:
            self.cache.keep_rows(keep)
            tokens, self.positions = tokens[keep], self.positions[keep]
        logits = self.lean.decode(tokens, self.positions, self.cache)
        self.stats.forward_passes += 1
        self.stats.decode_passes += 1
        self.positions = self.positions + 1
        return logits


def _decode_chunk(forward: "_TransformersForward | _LeanForward", pieces: list[tuple[int, int]],
                  cfg: SamplingConfig, stops: "torch.Tensor",
                  generator: "torch.Generator | list[torch.Generator] | None", stats: GenerationStats,
                  device, should_stop: "Callable[[], bool] | None" = None,
                  strings: StopStrings | None = None,
                  ) -> list[tuple[int, list[int], bool]]:
    """Sample the rows of one chunk; returns (prompt index, completion ids, finished) per row.

    A row ends at a stop token (`stops`) or when its text comes to hold one of `strings`."""

    logits = forward.first()
    row_prompt = [p for p, k in pieces for _ in range(k)]
    rows = len(row_prompt)
    active = torch.arange(rows, device=device)           # original row of each live batch row
    row_gens = generator if isinstance(generator, list) else None  # one per row of the chunk
    tokens: list[list[int]] = [[] for _ in range(rows)]
    finished = [False] * rows
    step_limit = cfg.max_new_tokens
    for step in range(step_limit):
        if should_stop is not None and should_stop():
            raise GenerationInterrupted(f"stopped after {step} of {step_limit} decoding steps")
        gens = [row_gens[r] for r in active.tolist()] if row_gens is not None else generator
        nxt = sample_next(logits, cfg.temperature, cfg.top_p, gens)
        done = torch.isin(nxt, stops)
        nxt_list = nxt.tolist()
        done_list = done.tolist()
        stats.tokens_decoded += len(nxt_list)
        by_string = False
        for i, r in enumerate(active.tolist()):
            tokens[r].append(nxt_list[i])
            if not done_list[i] and strings and strings.ended(tokens[r]):
                done_list[i] = by_string = True
            if done_list[i]:
                finished[r] = True
        if by_string:
            done = torch.tensor(done_list, dtype=torch.bool, device=done.device)
        if step == step_limit - 1:
            break
        n_done = sum(done_list)
        if n_done == len(done_list):
            break
        keep = None
        if n_done:
            # drop finished rows (and their cache) so later steps only pay for live ones
            keep = (~done).nonzero().squeeze(-1)
            active = active[keep]
        logits = forward.next(nxt, keep)
    return [(row_prompt[r], tokens[r], finished[r]) for r in range(rows)]


def generate(policies: "Policies", role: str, prompts: Sequence[Prompt], n: int = 1,
             sampling: SamplingConfig | None = None, *, generator: "torch.Generator | None" = None,
             seeds: Sequence[int] | None = None, stats: GenerationStats | None = None,
             should_stop: "Callable[[], bool] | None" = None) -> list[list[Sample]]:
    """Sample `n` completions for each prompt with `role`'s weights.

    `should_stop` is polled at every decoding step; when it returns true the call raises
    `GenerationInterrupted`, so a Ctrl-C during a long rollout is answered in one token's
    time instead of after the whole batch.

    Prompts are chat messages (formatted with the model's chat template) or raw strings.
    Returns, per prompt in order, `n` `Sample`s. A prompt longer than `max_prompt_tokens`
    (or the context) raises `PromptTooLong`; under `cut_prompts_left` it is cut from the
    left instead (counted in `stats.prompts_truncated`). Reproducible for a given
    `generator` (or `sampling.seed`) and the same inputs. With `seeds` (one per prompt),
    sample j of prompt p draws from its own stream `derive_seed(seeds[p], j)` instead: the
    same whatever the other prompts of the call, their order or the batch size.
    """

    cfg = sampling or SamplingConfig()
    if n < 0:
        raise ValueError(f"n={n}: expected a non-negative number of samples per prompt")
    stats = stats if stats is not None else GenerationStats()
    if not prompts or n == 0:
        return [[] for _ in prompts]
    if seeds is not None and len(seeds) != len(prompts):
        raise ValueError(f"seeds: {len(seeds)} given for {len(prompts)} prompts (one a prompt)")
    started = time.perf_counter()
    tokenizer = policies.tokenizer
    encoded = encode_prompts(tokenizer, prompts)

    with policies.role(role) as model:
        device = next(model.parameters()).device
        prompt_ids, cut = fit_prompts(encoded, cfg, context_length(model), stats)
        stats.prompts += len(prompts)
        stats.prompts_truncated += sum(cut)
        if generator is None and cfg.seed is not None:
            generator = torch.Generator(device=device).manual_seed(cfg.seed)
        stops = torch.tensor(sorted(stop_token_ids(tokenizer, model)), dtype=torch.long, device=device)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else int(stops[0])
        strings = StopStrings(tokenizer, cfg.stop)

        order = sorted(range(len(prompt_ids)), key=lambda p: len(prompt_ids[p]), reverse=True)
        chunks = _plan_chunks(order, n, cfg.batch_size)
        results: list[list[tuple[list[int], bool]]] = [[] for _ in prompts]
        was_training = model.training
        model.eval()
        drawn = [0] * len(prompts)  # samples of each prompt given a stream so far
        try:
            lean = lean_model(model, cfg, device)
            swap = contextlib.nullcontext() if lean is not None else _adapters_in_model_dtype(model, policies.dtype)
            with torch.inference_mode(), swap:
                for pieces in chunks:
                    chunk_gen = generator
                    if seeds is not None:
                        chunk_gen = []
                        for p, k in pieces:
                            chunk_gen += [torch.Generator().manual_seed(derive_seed(seeds[p], drawn[p] + j))
                                          for j in range(k)]
                            drawn[p] += k
                    forward = (_LeanForward(lean, pieces, prompt_ids, cfg, stats) if lean is not None else
                               _TransformersForward(model, pieces, prompt_ids, cfg, pad_id, device, stats))
                    for p, completion, done in _decode_chunk(forward, pieces, cfg, stops, chunk_gen, stats,
                                                            device, should_stop, strings):
                        results[p].append((completion, done))
        finally:
            model.train(was_training)

    out = make_samples(tokenizer, prompt_ids, cut, results, stats)
    stats.seconds += time.perf_counter() - started
    return out


# --- the engine -----------------------------------------------------------------------------------


class HFEngine(RolloutEngine):
    """`generate` behind the `RolloutEngine` interface."""

    name = "hf"
    reports_logprobs = False

    def __init__(self, policies: "Policies") -> None:
        self.policies = policies

    def generate(self, role: str, prompt_ids: Sequence[Sequence[int]], n: int = 1,
                 sampling: "SamplingConfig | None" = None, *,
                 generator: "torch.Generator | None" = None,
                 seeds: Sequence[int] | None = None,
                 stats: "GenerationStats | None" = None,
                 should_stop: Callable[[], bool] | None = None) -> list[list["Sample"]]:
        return generate(self.policies, role, [list(p) for p in prompt_ids], n=n, sampling=sampling,
                        generator=generator, seeds=seeds, stats=stats, should_stop=should_stop)

    def weights_changed(self, keys: Iterable[str]) -> None:
        """Nothing to copy: it samples with the trained modules themselves (their merged
        sampling weights went in `release_memory`, before the update, and are rebuilt at
        the next rollout)."""

    def release_memory(self) -> None:
        """Drop the merged sampling weights (`lean_model`) before the update needs the memory."""
        for role in self.policies.roles:
            release_lean(self.policies.module(role))
