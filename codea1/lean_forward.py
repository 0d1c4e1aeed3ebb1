"""A lean forward pass for sampling: LoRA merged, projections fused, a preallocated KV cache.

Why: on a CPU a decoding step of a 0.5B model moves about 1 GB of weights, a few tens
of milliseconds at the memory's speed, but transformers' forward adds its own share in
Python and small ops (masks, cache bookkeeping, grouped-query heads copied out to full
width), and peft two extra matmuls and a dtype cast per adapted layer. While sampling the
weights do not change, so `LeanModel` takes them once per rollout: each active LoRA
adapter merged into its base weight (`W + scale * B @ A`: q/k/v stacked into one float32
matrix and gate/up into another, each adapter's factors added in place by `addmm_`, then
rounded once to the model's dtype; 0.6 s a role for the 0.5B, 1.3 s when each layer's delta
was a matrix of its own), each matrix laid out once for oneDNN (`codea1.packed_linear`),
and runs the decoder as a handful of large ops per layer:

- prefill: one prompt at a time (no padding work), causal attention by `sdpa`, its keys
  and values written straight into the rows of all its samples; a prompt that starts
  like the one before it (the chat template's system turn, a test prompt's instructions
  and question, shared by the prompts of every candidate code) computes only what
  follows and attends to the previous prompt's keys and values for the rest
  (`PromptMemo`): a causal model's keys and values of a prefix do not depend on what
  comes after it;
- decode: one token per row, attention of each key/value head's query group as one
  batched matmul over the cache (no copies to full head width), rows that finished
  dropped from the cache.

It supports the decoder-only families whose layers are Qwen2's or Llama's (pre-norm
RMSNorm, rotary position embeddings of the default kind, grouped-query attention with
or without q/k/v biases, SiLU-gated MLP, no sliding window); `unsupported(model)` names
what stops any other model, which then samples through transformers' forward. Numbers
are the same computation as transformers' up to rounding order (tests/test_lean_forward.py
compares logits and samples on a tiny model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from codea1.packed_linear import Linear

FAMILIES = ("qwen2", "llama", "mistral")


def _causal_lm(model):
    """The transformers CausalLM inside a peft wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def unsupported(model) -> str | None:
    """Why `LeanModel` cannot run `model` (None: it can)."""
    lm = _causal_lm(model)
    cfg = getattr(lm, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind not in FAMILIES:
        return f"model type {kind!r} (supported: {', '.join(FAMILIES)})"
    inner = getattr(lm, "model", None)
    rotary = getattr(inner, "rotary_emb", None)
    if rotary is None or getattr(rotary, "rope_type", "default") != "default":
        return f"rotary embedding {getattr(rotary, 'rope_type', None)!r} (only 'default')"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"activation {cfg.hidden_act!r} (only silu)"
    if getattr(cfg, "use_sliding_window", False) and getattr(cfg, "sliding_window", None):
        return "sliding-window attention"
    if getattr(cfg, "mlp_bias", False):
        return "MLP biases"
    for module in lm.modules():
        variants = getattr(module, "lora_variant", None)
        if variants:
            return f"LoRA variant {sorted(variants)} (plain LoRA only)"
        if any(getattr(module, "use_dora", {}).values()):
            return "DoRA adapters"
    return None


def _adapters(linear) -> list[str]:
    """Names of the LoRA adapters `linear` applies now (active, not merged into its base)."""
    if not hasattr(linear, "lora_A") or linear.disable_adapters or linear.merged:
        return []
    return [name for name in linear.active_adapters if name in linear.lora_A]


def _add_adapter(block: torch.Tensor, linear, name: str) -> None:
    """block [out, in] (float32) += adapter `name`'s scale * B @ A, in place; peft's own
    delta where its layout is not plain (fan_in_fan_out, other factor layers)."""
    a, b = linear.lora_A[name], linear.lora_B[name]
    if getattr(linear, "fan_in_fan_out", False) or not (isinstance(a, torch.nn.Linear) and isinstance(b, torch.nn.Linear)):
        block += linear.get_delta_weight(name).float()
    else:
        block.addmm_(b.weight.float(), a.weight.float(), alpha=float(linear.scaling[name]))


def _stacked(linears, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight, bias) that `linears` apply now, stacked along their outputs (q/k/v or gate/up
    as one matrix): each base weight plus its active adapters, summed in float32 in one
    buffer (`addmm_` of the rank-r factors, no [out, in] delta of its own) and rounded once
    to `dtype`. A missing bias among present ones is zeros."""
    bases = [m.get_base_layer() if hasattr(m, "lora_A") else m for m in linears]
    terms = [_adapters(m) for m in linears]
    biases = [b.bias for b in bases]
    bias = None
    if any(b is not None for b in biases):
        bias = torch.cat([(b if b is not None else torch.zeros(w.weight.shape[0], device=w.weight.device)).to(dtype)
                          for b, w in zip(biases, bases)])
    if not any(terms):
        weight = bases[0].weight.to(dtype) if len(bases) == 1 else torch.cat([b.weight.to(dtype) for b in bases])
        return weight, bias
    out = torch.empty((sum(b.weight.shape[0] for b in bases), bases[0].weight.shape[1]), dtype=torch.float32,
                      device=bases[0].weight.device)
    row = 0
    for linear, base, names in zip(linears, bases, terms):
        block = out[row: row + base.weight.shape[0]]
        block.copy_(base.weight)
        for name in names:
            _add_adapter(block, linear, name)
        row += base.weight.shape[0]
    return out.to(dtype), bias


@dataclass
class _Layer:
    ln1: torch.Tensor
    qkv: Linear
    o: Linear
    ln2: torch.Tensor
    gate_up: Linear
    down: Linear


class LeanModel:
    """The decoder's weights as the sampler uses them, taken from `model` as it is now
    (active adapter merged, or none when adapters are disabled)."""

    def __init__(self, model) -> None:
        reason = unsupported(model)
        if reason is not None:
            raise ValueError(f"lean forward: unsupported {reason}")
        lm = _causal_lm(model)
        cfg = lm.config
        inner = lm.model
        self.dtype = inner.embed_tokens.weight.dtype
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.embed = inner.embed_tokens.weight
        self.norm = inner.norm.weight
        self.inv_freq = inner.rotary_emb.inv_freq.float()
        self.rope_scale = float(getattr(inner.rotary_emb, "attention_scaling", 1.0))
        self.layers: list[_Layer] = []
        with torch.no_grad():
            self.head = Linear(*_stacked([lm.lm_head], self.dtype))
            for layer in inner.layers:
                attn, mlp = layer.self_attn, layer.mlp
                self.layers.append(_Layer(
                    ln1=layer.input_layernorm.weight,
                    qkv=Linear(*_stacked([attn.q_proj, attn.k_proj, attn.v_proj], self.dtype)),
                    o=Linear(*_stacked([attn.o_proj], self.dtype)), ln2=layer.post_attention_layernorm.weight,
                    gate_up=Linear(*_stacked([mlp.gate_proj, mlp.up_proj], self.dtype)),
                    down=Linear(*_stacked([mlp.down_proj], self.dtype))))

    # --- pieces ------------------------------------------------------------------------------

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """transformers' Qwen2/Llama RMSNorm, op for op (float32 inside, weight in the model dtype)."""
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * h.to(x.dtype)

    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [..., head_dim] for integer `positions` [...]."""
        freqs = positions[..., None].float() * self.inv_freq.to(positions.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.rope_scale).to(self.dtype), (emb.sin() * self.rope_scale).to(self.dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def _qkv(self, layer: _Layer, x: torch.Tensor, cos, sin):
        """q [B, H, T, D], k and v [B, KV, T, D] of hidden states `x` [B, T, hidden]."""
        b, t, _ = x.shape
        qkv = layer.qkv(self._rms(x, layer.ln1))
        d = self.head_dim
        q, k, v = qkv.split([self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, d).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, d).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin), v

    def _finish_layer(self, layer: _Layer, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Output projection and residual, then the gated MLP and its residual."""
        x = x + layer.o(attn)
        gate, up = layer.gate_up(self._rms(x, layer.ln2)).chunk(2, dim=-1)
        return x + layer.down(F.silu(gate) * up)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self._rms(x, self.norm))

    # --- the two passes -------------------------------------------------------------------------

    def prefill(self, prompt: list[int], cache: "KVCache", rows: torch.Tensor,
                memo: "PromptMemo | None" = None) -> torch.Tensor:
        """Run one prompt (positions 0..T-1), write its keys/values into cache `rows`, right-
        aligned at the cache's prompt width; returns the last position's logits [V]. With
        `memo`, the tokens this prompt shares with the memo's prompt are not run again: their
        keys/values are the memo's, and the memo then holds this prompt's."""
        device = self.embed.device
        t = len(prompt)
        c = memo.shared(prompt) if memo is not None else 0
        ids = torch.tensor([prompt[c:]], dtype=torch.long, device=device)
        cos, sin = self._rope(torch.arange(c, t, device=device)[None])
        x = F.embedding(ids, self.embed)
        start = cache.width - t
        # a query at position c + i sees keys 0 .. c + i
        mask = torch.ones(t - c, t, dtype=torch.bool, device=device).tril(diagonal=c) if c else None
        kv = []
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x, cos, sin)
            if c:
                k = torch.cat([memo.kv[i][0][:, :, :c], k], dim=2)
                v = torch.cat([memo.kv[i][1][:, :, :c], v], dim=2)
            cache.k[i][rows, :, start:cache.width] = k
            cache.v[i][rows, :, start:cache.width] = v
            kv.append((k, v))
            attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                                  enable_gqa=self.kv_heads != self.heads)
            x = self._finish_layer(layer, x, attn.transpose(1, 2).reshape(1, t - c, -1))
        if memo is not None:
            memo.ids, memo.kv, memo.reused = list(prompt), kv, memo.reused + c
        return self._logits(x[0, -1])

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, cache: "KVCache") -> torch.Tensor:
        """One token per live row (`tokens`, `positions` [B]) appended to the cache; logits [B, V]."""
        b = tokens.shape[0]
        cos, sin = self._rope(positions[:, None])
        x = F.embedding(tokens[:, None], self.embed)
        slot = cache.length
        group = self.heads // self.kv_heads
        cache.valid[:, slot] = True
        allowed = cache.valid[:, None, None, : slot + 1]  # [B, 1, 1, L]
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x, cos, sin)
            cache.k[i][:, :, slot] = k[:, :, 0]
            cache.v[i][:, :, slot] = v[:, :, 0]
            keys, values = cache.k[i][:, :, : slot + 1], cache.v[i][:, :, : slot + 1]
            # the `group` query heads that share a key/value head attend as `group` query rows
            # of that head: one sdpa call, no keys copied out to full head width
            qg = q.reshape(b, self.kv_heads, group, self.head_dim)
            attn = F.scaled_dot_product_attention(qg, keys, values, attn_mask=allowed)
            x = self._finish_layer(layer, x, attn.reshape(b, 1, self.heads * self.head_dim))
        cache.length += 1
        return self._logits(x[:, 0])


class PromptMemo:
    """The last prefilled prompt's token ids and its keys/values per layer ([1, KV, T, D]),
    for a next prompt that starts the same way; `reused` counts the tokens not run again."""

    MIN_SHARED = 8  # tokens: below this a shared start is not worth a masked attention call

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.reused = 0

    def shared(self, prompt: list[int]) -> int:
        """How many leading tokens `prompt` takes from the memo (its last token is always run:
        its logits start the sampling); 0 below MIN_SHARED."""
        n, limit = 0, min(len(self.ids), len(prompt) - 1)
        while n < limit and self.ids[n] == prompt[n]:
            n += 1
        return n if n >= self.MIN_SHARED else 0


class KVCache:
    """Keys and values of every layer for `rows` rows: the prompt region (`width` slots,
    prompts right-aligned in it) then room for `new_tokens` decoded ones; `valid` marks
    the slots a row may attend to."""

    def __init__(self, model: LeanModel, rows: int, width: int, new_tokens: int,
                 prompt_lengths: list[int]) -> None:
        shape = (rows, model.kv_heads, width + new_tokens, model.head_dim)
        device = model.embed.device
        # zeros, not empty: a masked slot's score must be finite before the mask takes it out
        self.k = [torch.zeros(shape, dtype=model.dtype, device=device) for _ in model.layers]
        self.v = [torch.zeros(shape, dtype=model.dtype, device=device) for _ in model.layers]
        self.width = width
        self.length = width
        self.valid = torch.zeros((rows, width + new_tokens), dtype=torch.bool, device=device)
        for r, n in enumerate(prompt_lengths):
            self.valid[r, width - n: width] = True

    def keep_rows(self, index: torch.Tensor) -> None:
        """Drop every row not in `index` (finished samples), copying only the filled slots."""
        filled = self.length
        for store in (self.k, self.v):
            for i, old in enumerate(store):
                new = old.new_empty((len(index), *old.shape[1:]))
                new[:, :, :filled] = old[index, :, :filled]
                store[i] = new
        self.valid = self.valid[index]
