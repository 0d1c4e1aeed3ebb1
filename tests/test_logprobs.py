"""The fast log-prob path (codea1.logprobs) gives the one-row-per-pair path's numbers.

Shared-prompt rows, the chunked head and the reused old log-probs must change how much is
computed, never what: log-probs, losses and gradients are compared on tiny random models
with prompts sampled several times, mixed response lengths, packed and unpacked rows, the
KL reference (adapters off), both attention implementations and bf16.
"""

from __future__ import annotations

import copy

import pytest
import torch

from codea1.grpo import (
    GRPOConfig,
    Trajectory,
    split_mini_batches,
    update_policy,
)
from codea1.logprobs import (
    _SampledTokenLogprob,
    micro_batches,
    pack_shared_prompt_rows,
    prompt_groups,
    sequence_logprobs,
    trajectory_logprobs,
)
from codea1.trajectory import pack_micro_batches

OLD_PATH = dict(shared_prompt_rows=False, logprob_chunk_tokens=0, reuse_old_logprobs=False)


def _lm(attn: str = "sdpa", tie: bool = True):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=tie, attn_implementation=attn)
    return Qwen2ForCausalLM(cfg).eval()


def _lora(model):
    from peft import LoraConfig, get_peft_model

    peft = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_" in name:
                p.normal_(0, 0.2)  # non-zero adapters: the reference (adapters off) differs
    return peft.eval()


def _seqs():
    """Two prompts sampled 3 and 2 times (mixed lengths), a lone prompt, an empty response."""
    a, b = [1, 2, 3, 4, 5, 6], [7, 8, 9]
    return [
        Trajectory(a, [10, 11, 12, 13, 14], 1.0),
        Trajectory(b, [20, 21], -0.5),
        Trajectory(a, [15], -1.0),
        Trajectory(a, [16, 17, 18], 0.25),
        Trajectory([30, 31, 32, 33], [34, 35, 36, 37, 38, 39], 0.75),
        Trajectory(b, [22, 23, 24, 25], 0.5),
        Trajectory(a, [], 0.0),
    ]


def _per_pair(model, seqs):
    """Reference numbers: each pair alone in its own row, the model's full logits."""
    out = []
    for s in seqs:
        if not s.completion_ids:
            out.append(torch.zeros(0))
            continue
        ids = torch.tensor([s.prompt_ids + s.completion_ids])
        with torch.no_grad():
            lp = model(ids).logits[0].float().log_softmax(-1)
        p = len(s.prompt_ids)
        out.append(torch.stack([lp[t - 1, ids[0, t]] for t in range(p, ids.shape[1])]))
    return out


def test_rows_hold_each_prompt_once_and_point_at_the_predicting_positions():
    seqs = _seqs()
    assert prompt_groups(seqs) == [[0, 2, 3], [1, 5], [4]]
    [row] = pack_shared_prompt_rows(seqs, token_budget=1000)
    a = [1, 2, 3, 4, 5, 6]
    assert row.input_ids[0, :15].tolist() == a + [10, 11, 12, 13, 14] + [15] + [16, 17, 18]
    assert row.position_ids[0, :15].tolist() == list(range(6)) + [6, 7, 8, 9, 10] + [6] + [6, 7, 8]
    assert row.members == [0, 2, 3, 1, 5, 4]
    # the prompt's last position (5) predicts each response's first token
    assert row.logit_index[:9].tolist() == [5, 6, 7, 8, 9, 5, 5, 12, 13]
    assert row.targets[:9].tolist() == [10, 11, 12, 13, 14, 15, 16, 17, 18]
    mask = row.attention_mask[0, 0]
    assert mask[11, :6].all() and not mask[11, 6:11].any() and mask[11, 11]  # [15] sees a, itself
    assert not mask[15, :15].any()             # the next prompt sees nothing of the first
    # a budget of 12 splits prompt a's group; each piece repeats the prompt
    rows = pack_shared_prompt_rows(seqs, token_budget=12, pack=False)
    assert [r.members for r in rows] == [[0, 2], [3], [1, 5], [4]]
    assert rows[1].input_ids[0].tolist() == a + [16, 17, 18]


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("chunk", [0, 3])
def test_shared_prompt_logprobs_equal_one_row_per_pair(pack, attn, chunk):
    model = _lm(attn)
    seqs = _seqs()
    cfg = GRPOConfig(micro_batch_tokens=16, pack_sequences=pack, logprob_chunk_tokens=chunk)
    fast = trajectory_logprobs(model, seqs, cfg)
    for got, want in zip(fast, _per_pair(model, seqs)):
        assert got.shape == want.shape
        assert torch.allclose(got, want, atol=1e-5)


def test_the_comparison_sees_a_wrong_mask():
    """If responses could see each other, the numbers would differ: the test above can fail."""
    model = _lm()
    seqs = _seqs()
    [row] = pack_shared_prompt_rows(seqs, token_budget=1000)
    leaky = copy.copy(row)
    n = row.input_ids.shape[1]
    leaky.attention_mask = torch.ones(n, n, dtype=torch.bool).tril()[None, None]
    with torch.no_grad():
        good = sequence_logprobs(model, row, 4)
        bad = sequence_logprobs(model, leaky, 4)
    assert not torch.allclose(good, bad, atol=1e-3)


def test_sdpa_rows_are_computed_span_by_span():
    """With sdpa the row's scores come from its spans, not the [L, L] mask: a layout that
    lies (the first prompt's responses listed in the wrong order) changes the numbers, so
    the equality above was measured on the span path; the honest layout matches the mask."""
    from codea1.logprobs import RowSpans

    model = _lm("sdpa")
    [row] = pack_shared_prompt_rows(_seqs(), token_budget=1000)
    spans = row.attention_mask.codea1_spans.spans
    assert [(p0, plen) for p0, plen, _ in spans] == [(0, 6), (15, 3), (24, 4)]
    masked = copy.copy(row)
    masked.attention_mask = row.attention_mask.clone()  # the same mask without a layout
    lying = copy.copy(row)
    lying.attention_mask = row.attention_mask.clone()
    lying.attention_mask.codea1_spans = RowSpans([(spans[0][0], spans[0][1], spans[0][2][::-1])] + spans[1:])
    with torch.no_grad():
        span, plain, wrong = (sequence_logprobs(model, mb, 4) for mb in (row, masked, lying))
    assert torch.allclose(span, plain, atol=1e-5)
    assert not torch.allclose(span, wrong, atol=1e-3)


def test_the_switch_turns_span_attention_off():
    """`grpo.span_attention=false` leaves the rows without a layout (sdpa gets the mask), with
    the same numbers."""
    model = _lm("sdpa")
    on = micro_batches(model, _seqs(), GRPOConfig(micro_batch_tokens=1000))
    off = micro_batches(model, _seqs(), GRPOConfig(micro_batch_tokens=1000, span_attention=False))
    assert [hasattr(mb.attention_mask, "codea1_spans") for mb in on + off] == [True] * len(on) + [False] * len(off)
    with torch.no_grad():
        for a, b in zip(on, off):
            assert torch.allclose(sequence_logprobs(model, a, 4), sequence_logprobs(model, b, 4), atol=1e-5)


def test_span_attention_stays_on_the_cpu(monkeypatch):
    """Off the CPU a row's mask goes to transformers' sdpa whole, layout or not."""
    import codea1.logprobs as logprobs

    [row] = pack_shared_prompt_rows(_seqs(), token_budget=1000)
    n = row.input_ids.shape[1]
    calls = []
    monkeypatch.setattr(logprobs, "_TRANSFORMERS_SDPA", lambda *a, **k: calls.append(a[1].device.type))
    q = torch.zeros(1, 4, n, 8, device="meta")
    kv = torch.zeros(1, 2, n, 8, device="meta")
    logprobs.span_attention(None, q, kv, kv, row.attention_mask)
    assert calls == ["meta"]
    q, kv = torch.randn(1, 4, n, 8), torch.randn(1, 2, n, 8)
    out, _ = logprobs.span_attention(None, q, kv, kv, row.attention_mask)
    assert calls == ["meta"] and out.shape == (1, n, 4, 8)


def test_chunked_head_gradient_is_exact():
    torch.manual_seed(1)
    hidden = torch.randn(7, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(11, 5, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 11, (7,))
    fn = lambda h, w: _SampledTokenLogprob.apply(h, w, targets, 3)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (hidden, weight))
    want = torch.log_softmax(hidden @ weight.T, -1).gather(-1, targets[:, None]).squeeze(-1)
    assert torch.allclose(fn(hidden, weight), want, atol=1e-12)


@pytest.mark.parametrize("frozen_head", [False, True])
@pytest.mark.parametrize("tile", [4, 5, 11])
def test_head_tiled_over_the_vocabulary_is_exact(monkeypatch, tile, frozen_head):
    """Several vocabulary tiles (the last one short, targets in every tile): the running
    logsumexp and the per-tile backward give log_softmax's values and gradients; with a
    frozen head (LoRA's), the hidden states' gradient from the forward's softmax @ W.
    Faults tried: the running sum not rescaled when the maximum grows (values off by
    up to 2), the target picked from the first tile only (values off), softmax @ W not
    rescaled with the running maximum (frozen head's gradient off) -- each fails here."""
    import codea1.logprobs as logprobs

    monkeypatch.setattr(logprobs, "VOCAB_TILE", tile)
    torch.manual_seed(2)
    hidden = torch.randn(9, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(13, 5, dtype=torch.float64, requires_grad=not frozen_head)
    targets = torch.tensor([0, 3, 4, 5, 8, 9, 10, 12, 12])
    fn = lambda h, w: _SampledTokenLogprob.apply(h, w, targets, 4)  # noqa: E731
    want = torch.log_softmax(hidden @ weight.T, -1).gather(-1, targets[:, None]).squeeze(-1)
    assert torch.allclose(fn(hidden, weight), want, atol=1e-12)
    assert torch.autograd.gradcheck(fn, (hidden, weight))
    if frozen_head:  # the backward taken from the forward's softmax @ W, not a recomputation
        out = _SampledTokenLogprob.apply(hidden, weight, targets, 4)
        assert out.grad_fn.expect
        (g,) = torch.autograd.grad(out.sum() * 0.5, hidden)
        (g_want,) = torch.autograd.grad(want.sum() * 0.5, hidden)
        assert torch.allclose(g, g_want, atol=1e-12)


def _update_grads(model, seqs, cfg, old, ref):
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    opt = torch.optim.SGD(params, lr=0.0)  # lr 0: weights stay, gradients stay for inspection
    opt.zero_grad = lambda set_to_none=True: None
    stats = update_policy(model, opt, seqs, cfg, old, ref)
    return [p.grad.clone() for p in params], stats


@pytest.mark.parametrize("lora", [True, False])
@pytest.mark.parametrize("pack", [True, False])
def test_loss_and_gradients_equal_the_per_pair_path(lora, pack):
    base = _lm()
    model = _lora(base) if lora else base
    seqs = _seqs()
    common = dict(mini_batches=1, grad_clip=1e9, kl_coef=0.05, micro_batch_tokens=16, pack_sequences=pack)
    slow_cfg = GRPOConfig(**common, **OLD_PATH)
    fast_cfg = GRPOConfig(**common, logprob_chunk_tokens=4)
    old = trajectory_logprobs(model, seqs, slow_cfg)
    # a fixed perturbation: ratios off 1 so that clipping and the KL both matter
    old = [lp + 0.3 * torch.sin(torch.arange(len(lp), dtype=torch.float32)) for lp in old]
    if lora:
        with model.disable_adapter(), torch.no_grad():
            ref_slow = trajectory_logprobs(model, seqs, slow_cfg)
            ref_fast = trajectory_logprobs(model, seqs, fast_cfg)
        for a, b in zip(ref_slow, ref_fast):
            assert torch.allclose(a, b, atol=1e-5)
        assert not torch.allclose(torch.cat(ref_slow), torch.cat(old), atol=1e-2)
    else:
        ref_slow = ref_fast = [lp - 0.2 for lp in old]
    g_slow, st_slow = _update_grads(model, seqs, slow_cfg, old, ref_slow)
    g_fast, st_fast = _update_grads(model, seqs, fast_cfg, old, ref_fast)
    assert st_slow.clip_frac > 0 and st_slow.kl > 0
    for key in ("loss", "pg_loss", "kl", "clip_frac", "ratio_mean", "grad_norm", "tokens"):
        assert getattr(st_fast, key) == pytest.approx(getattr(st_slow, key), rel=1e-5, abs=1e-7), key
    assert st_fast.forward_tokens < st_slow.forward_tokens  # each prompt once instead of per pair
    for a, b in zip(g_slow, g_fast):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def _reused_by_update_role(model, seqs, cfg) -> set[int]:
    """The sequences whose old log-probs `grpo.update_role` leaves to the update's own first
    pass (`skip`): the first mini-batch of its layout with `reuse_old_logprobs`, else none."""
    import contextlib

    import codea1.grpo as grpo

    class OnePolicy:
        def role(self, role):
            return contextlib.nullcontext(model)

        reference = role

    asked: list[set[int]] = []

    def recording(m, s, c, *, skip=(), pad_passes=None):
        asked.append(set(skip))
        return [None] * len(s)

    saved = grpo.trajectory_logprobs, grpo.update_policy
    grpo.trajectory_logprobs, grpo.update_policy = recording, lambda *a, **k: None
    try:
        grpo.update_role(OnePolicy(), "code", None, seqs, cfg, metrics={}, label="code",
                         layout=split_mini_batches(len(seqs), cfg.mini_batches))
    finally:
        grpo.trajectory_logprobs, grpo.update_policy = saved
    return asked[0]


def test_reused_old_logprobs_equal_a_separate_pass():
    model = _lora(_lm())
    seqs = [s for s in _seqs() if s.completion_ids]
    cfg = GRPOConfig(mini_batches=2, grad_clip=1e9, kl_coef=0.0, micro_batch_tokens=16)
    first = _reused_by_update_role(model, seqs, cfg)
    assert first == {0, 1, 2}
    assert _reused_by_update_role(model, seqs, cfg.model_copy(update={"reuse_old_logprobs": False})) == set()
    full = trajectory_logprobs(model, seqs, cfg)
    partial = trajectory_logprobs(model, seqs, cfg, skip=first)
    assert [lp is None for lp in partial] == [i in first for i in range(len(seqs))]
    state = copy.deepcopy(model.state_dict())
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    st_full = update_policy(model, opt, seqs, cfg, full, None)
    after_full = copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    st_part = update_policy(model, opt, seqs, cfg, partial, None)
    assert st_part.optimizer_steps == st_full.optimizer_steps == 2
    assert st_part.ratio_mean == pytest.approx(st_full.ratio_mean, rel=1e-6)
    assert st_part.loss == pytest.approx(st_full.loss, rel=1e-5)
    for k, v in model.state_dict().items():
        assert torch.allclose(v, after_full[k], atol=1e-6), k
    # a missing old log-prob after the policy moved is an error, not a silent ratio of 1
    model.load_state_dict(state)
    late = list(full)
    late[-1] = None
    with pytest.raises(ValueError, match="already moved"):
        update_policy(model, opt, seqs, cfg, late, None)


def test_bf16_fast_path_is_close_to_the_slow_one():
    model = _lora(_lm()).to(torch.bfloat16)
    for name, p in model.named_parameters():
        if "lora_" in name:
            p.data = p.data.float()  # as wrap_policies keeps them
    seqs = _seqs()
    slow = trajectory_logprobs(model, seqs, GRPOConfig(micro_batch_tokens=16, **OLD_PATH))
    fast = trajectory_logprobs(model, seqs, GRPOConfig(micro_batch_tokens=16, logprob_chunk_tokens=4))
    for a, b in zip(slow, fast):
        assert torch.allclose(a, b, atol=0.05)


def test_flash_attention_models_fall_back_to_one_row_per_pair():
    model = _lm()
    model.config._attn_implementation = "flash_attention_2"
    mbs = micro_batches(model, _seqs(), GRPOConfig(micro_batch_tokens=16))
    assert all(mb.attention_mask is None for mb in mbs)
    assert [mb.members for mb in mbs] == [[m] for m in (0, 1, 2, 3, 4, 5)] or \
        [mb.members for mb in mbs] == [mb.members for mb in pack_micro_batches(_seqs(), 16)]
