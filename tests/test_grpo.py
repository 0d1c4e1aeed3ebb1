"""Each GRPO formula of `codea1.grpo` on small hand-computed tensors."""

from __future__ import annotations

import math

import pytest
import torch

from codea1.grpo import (
    GRPOConfig,
    Trajectory,
    clipped_surrogate,
    group_advantages,
    grpo_token_loss,
    has_signal,
    k3_kl,
    make_optimizer,
    make_scheduler,
    select_test_groups,
    split_mini_batches,
    token_mean,
    update_policy,
    warmup_cosine,
)
from codea1.logprobs import trajectory_logprobs
from codea1.trajectory import pack_micro_batches


# ------------------------------------------------------------------ advantages, filtering


def test_group_advantages_unbiased_std_with_eps():
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), eps=1e-6)
    # mean 0.5, Bessel std sqrt(1/3)
    expected = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    assert torch.allclose(adv, torch.tensor([[expected, -expected, -expected, expected]]), atol=1e-7)


def test_group_advantages_population_std_and_rows_are_independent():
    adv = group_advantages(torch.tensor([[1.0, 0.0], [3.0, 1.0]]), eps=0.5, unbiased=False)
    # each row: mean +-0.5 or +-1 around, std 0.5 or 1
    assert torch.allclose(adv, torch.tensor([[0.5, -0.5], [1 / 1.5, -1 / 1.5]]))


def test_group_advantages_constant_group_and_singleton_are_zero():
    assert torch.equal(group_advantages(torch.tensor([[2.0, 2.0, 2.0]])), torch.zeros(1, 3))
    assert torch.equal(group_advantages(torch.tensor([[0.7]])), torch.zeros(1, 1))


def test_has_signal_drops_all_equal_groups():
    r = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.5], [0.25, 0.25, 0.5]])
    assert has_signal(r).tolist() == [False, False, True, True]


def test_select_test_groups_top_update_n_by_std_among_eligible():
    r = torch.tensor([
        [0.0, 1.0, 0.0, 1.0],   # std 0.5  (largest, but not eligible)
        [0.0, 0.5, 0.0, 0.5],   # std 0.25
        [0.2, 0.2, 0.2, 0.2],   # std 0
        [0.5, 0.0, 0.5, 0.0],   # std 0.25 (ties with 1: lower index first)
        [0.1, 0.0, 0.1, 0.0],   # std 0.05
    ])
    eligible = [False, True, True, True, True]
    assert select_test_groups(r, eligible, update_n=1) == [1]
    assert select_test_groups(r, eligible, update_n=3) == [1, 3, 4]
    # the reference's top-k: a zero-std group trains when update_n reaches it
    assert select_test_groups(r, eligible, update_n=5) == [1, 3, 4, 2]
    # the dynamic-sampling switch: a zero-std group never trains
    assert select_test_groups(r, eligible, update_n=5, require_signal=True) == [1, 3, 4]
    assert select_test_groups(r, [False] * 5, update_n=2) == []
    # every group of a problem at std 0: the reference still trains the first one
    flat = torch.tensor([[0.5, 0.5], [0.0, 0.0], [0.25, 0.25]])
    assert select_test_groups(flat, [True] * 3, update_n=1) == [0]
    assert select_test_groups(flat, [True] * 3, update_n=1, require_signal=True) == []
    with pytest.raises(ValueError, match="eligible"):
        select_test_groups(r, [True], update_n=1)


# ------------------------------------------------------------------ losses


def test_clipped_surrogate_clip_higher_and_gradients():
    ratios = torch.tensor([1.5, 1.5, 0.5, 0.5, 1.1])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 2.0])
    old = torch.zeros(5)
    logp = torch.log(ratios).requires_grad_(True)
    loss, clipped, bounded = clipped_surrogate(logp, old, adv, clip_low=0.2, clip_high=0.28)
    assert torch.allclose(loss, torch.tensor([-1.28, 1.5, -0.5, 0.8, -2.2]))
    assert clipped.tolist() == [True, False, False, True, False]
    assert not bounded.any()  # dual-clip off
    loss.sum().backward()
    # d(-rA)/dlogp = -rA where unclipped; 0 where the clipped branch is active
    assert torch.allclose(logp.grad, torch.tensor([0.0, 1.5, -0.5, 0.0, -2.2]))


def test_dual_clip_bounds_negative_advantages_only():
    # ratios 20 and 5 with A = -1 and A = +1; clip_ratio_c = 10
    ratios = torch.tensor([20.0, 5.0, 20.0, 0.5])
    adv = torch.tensor([-1.0, -1.0, 1.0, -2.0])
    logp = torch.log(ratios).requires_grad_(True)
    loss, clipped, bounded = clipped_surrogate(logp, torch.zeros(4), adv, 0.2, 0.28, clip_ratio_c=10.0)
    # token 0: max(20, 0.8) = 20 > 10 -> 10 (bounded, no gradient);
    # token 1: max(5, 0.8) = 5 <= 10 -> 5; token 2 (A > 0): max(-20, -1.28) = -1.28;
    # token 3: max(1.0, 1.6) = 1.6 (clipped at 1 - 0.2) <= 20 -> 1.6
    assert torch.allclose(loss, torch.tensor([10.0, 5.0, -1.28, 1.6]))
    assert bounded.tolist() == [True, False, False, False]
    assert clipped.tolist() == [False, False, True, True]
    loss.sum().backward()
    assert torch.allclose(logp.grad, torch.tensor([0.0, 5.0, 0.0, 0.0]))
    # without the dual clip token 0 costs its full 20
    plain, _, _ = clipped_surrogate(torch.log(ratios), torch.zeros(4), adv, 0.2, 0.28)
    assert plain[0].item() == pytest.approx(20.0)
    # in the token loss: the default config bounds at 10, null turns it off
    cfg_on, cfg_off = GRPOConfig(kl_coef=0.0), GRPOConfig(kl_coef=0.0, clip_ratio_c=None)
    assert cfg_on.clip_ratio_c == 10.0
    on, st = grpo_token_loss(torch.log(ratios), torch.zeros(4), None, adv, torch.ones(4), cfg_on)
    off, _ = grpo_token_loss(torch.log(ratios), torch.zeros(4), None, adv, torch.ones(4), cfg_off)
    assert on.item() == pytest.approx((10 + 5 - 1.28 + 1.6) / 4, rel=1e-6)
    assert off.item() == pytest.approx((20 + 5 - 1.28 + 1.6) / 4, rel=1e-6)
    assert st["dual_clip_sum"] == 1.0
    with pytest.raises(ValueError):
        GRPOConfig(clip_ratio_c=1.0)  # the bound must exceed 1


def test_k3_kl_values_and_clamp():
    logp = torch.log(torch.tensor([0.5, 0.3, 1e-30]))
    ref = torch.log(torch.tensor([0.25, 0.3, 1.0]))
    kl = k3_kl(logp, ref, clamp=10.0)
    expected0 = 0.5 - math.log(0.5) - 1  # exp(-ln2) + ln2 - 1
    assert kl[0].item() == pytest.approx(expected0, rel=1e-5)
    assert kl[1].item() == pytest.approx(0.0, abs=1e-7)
    # d = ref - logp = 69.1: exp(20) - 21 after the log-ratio clamp, then the value clamp: 10
    assert kl[2].item() == 10.0
    assert (kl >= 0).all()


def test_k3_value_is_clamped_to_ten_as_the_reference():
    """verl's low_var_kl: d = ref - logp clamped to [-20, 20], exp(d) - d - 1 clamped to [-10, 10]."""
    d = torch.tensor([2.5, 3.0, -8.0, -12.0, -30.0])  # ref - logp
    logp = torch.zeros(5, requires_grad=True)
    kl = k3_kl(logp, d, clamp=10.0, log_ratio_clamp=20.0)
    assert kl[0].item() == pytest.approx(math.exp(2.5) - 3.5, rel=1e-6)   # 8.68: under the clamp
    assert kl[1].item() == 10.0                                            # e^3 - 4 = 16.1 -> 10
    assert kl[2].item() == pytest.approx(math.exp(-8.0) + 7.0, rel=1e-6)  # 7.0003: under the clamp
    assert kl[3].item() == 10.0                                            # 11.000006 -> 10
    assert kl[4].item() == 10.0                                            # d clamped to -20: 19 -> 10
    kl.sum().backward()
    # inside the clamp the gradient of exp(d) - d - 1 in logp is 1 - exp(d); outside it is 0
    assert logp.grad[0].item() == pytest.approx(1 - math.exp(2.5), rel=1e-6)
    assert logp.grad[2].item() == pytest.approx(1 - math.exp(-8.0), rel=1e-6)
    assert logp.grad[[1, 3, 4]].tolist() == [0.0, 0.0, 0.0]
    # a loss with kl_coef 1 and no policy term adds exactly the mean of the clamped values
    loss, st = grpo_token_loss(torch.zeros(5), torch.zeros(5), d, torch.zeros(5), torch.ones(5),
                               GRPOConfig(kl_coef=1.0))
    expected = (math.exp(2.5) - 3.5 + 10 + math.exp(-8.0) + 7 + 10 + 10) / 5
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert st["kl_sum"] == pytest.approx(expected * 5, rel=1e-6)


def test_token_mean_over_the_whole_mini_batch():
    v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert token_mean(v, m).item() == pytest.approx(10 / 4)
    assert token_mean(v, m, n_tokens=8).item() == pytest.approx(10 / 8)


def test_grpo_token_loss_is_surrogate_plus_kl():
    cfg = GRPOConfig(kl_coef=0.001)
    logp = torch.log(torch.tensor([0.5, 0.4]))
    old = torch.log(torch.tensor([0.5, 0.5]))   # ratios 1.0 and 0.8
    ref = torch.log(torch.tensor([0.25, 0.4]))
    adv = torch.tensor([2.0, -1.0])
    loss, stats = grpo_token_loss(logp, old, ref, adv, torch.ones(2), cfg)
    pg = (-2.0 + 0.8) / 2                      # -(1*2) and -min(-0.8, -0.8)
    kl = ((0.5 - math.log(0.5) - 1) + 0.0) / 2
    assert loss.item() == pytest.approx(pg + 0.001 * kl, rel=1e-6)
    assert stats["ratio_sum"] == pytest.approx(1.8, rel=1e-6)
    no_kl, _ = grpo_token_loss(logp, old, ref, adv, torch.ones(2), GRPOConfig(kl_coef=0.0))
    assert no_kl.item() == pytest.approx(pg, rel=1e-6)


# ------------------------------------------------------------------ optimiser, schedule


def test_warmup_from_zero_then_cosine():
    f = lambda s, floor=0.0: warmup_cosine(s, warmup_steps=10, total_steps=110, min_lr_ratio=floor)
    # verl's scheduler: step / warmup from lr 0, so the first step changes nothing
    assert f(0) == 0.0
    assert f(1) == pytest.approx(0.1)
    assert f(9) == pytest.approx(0.9)
    assert f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.5)
    assert f(110) == pytest.approx(0.0, abs=1e-12)
    assert f(500) == pytest.approx(0.0, abs=1e-12)
    assert f(60, floor=0.1) == pytest.approx(0.55)
    assert f(0, floor=0.1) == pytest.approx(0.1) and f(5, floor=0.1) == pytest.approx(0.55)
    assert warmup_cosine(0, 0, 10) == pytest.approx(1.0)
    # the project's earlier alternative: (step + 1) / warmup, the first step learns
    g = lambda s: warmup_cosine(s, 10, 110, first_step_learns=True)
    assert (g(0), g(9), g(10), g(60)) == pytest.approx((0.1, 1.0, 1.0, 0.5))


def test_adamw_step_with_decoupled_weight_decay_and_scheduler():
    p = torch.nn.Parameter(torch.tensor([1.0]))
    cfg = GRPOConfig(lr=0.1, weight_decay=0.1, warmup_steps=2)
    opt = make_optimizer([p], cfg)
    sched = make_scheduler(opt, cfg, total_steps=10)
    assert opt.param_groups[0]["lr"] == 0.0   # warm-up from 0: step 1 of 2 changes nothing
    p.grad = torch.tensor([0.5])
    opt.step()
    assert p.item() == 1.0
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)   # step 2 of 2
    p.grad = torch.tensor([0.5])
    opt.step()
    # decay 1 - 0.05*0.1, then the bias-corrected Adam step lr * m_hat / sqrt(v_hat): Adam's
    # moments already hold step 1's gradient (same value), so the step is lr
    assert p.item() == pytest.approx(1.0 * (1 - 0.005) - 0.05, rel=1e-6)
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="no trainable parameters"):
        make_optimizer([torch.nn.Parameter(torch.ones(1), requires_grad=False)], cfg)


def test_split_mini_batches_is_half_and_half():
    assert split_mini_batches(8, 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert split_mini_batches(5, 2) == [[0, 1], [2, 3, 4]]
    assert split_mini_batches(1, 2) == [[0]]


# ------------------------------------------------------------------ packing and the update


@pytest.fixture(scope="module")
def tiny_lm():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return Qwen2ForCausalLM(cfg).eval()


def _seqs():
    return [
        Trajectory([1, 2, 3], [4, 5, 6, 7], 1.0),
        Trajectory([8, 9], [10, 11], -1.0),
        Trajectory([3, 3, 3, 3], [], 0.5),           # empty response: nothing to train
        Trajectory([5], [6, 7, 8], 0.5),
        Trajectory([2, 4, 6, 8, 10], [12, 14], -0.5),
    ]


def test_pack_micro_batches_respects_budget_and_skips_empty():
    mbs = pack_micro_batches(_seqs(), token_budget=8)
    assert [mb.members for mb in mbs] == [[0], [1, 3], [4]]
    mb = mbs[1]
    assert mb.input_ids.tolist() == [[8, 9, 10, 11, 5, 6, 7, 8]]
    assert mb.position_ids.tolist() == [[0, 1, 2, 3, 0, 1, 2, 3]]
    # the logit at position t predicts token t+1
    assert mb.keep.tolist() == [[False, True, True, False, True, True, True, False]]
    assert mb.targets.tolist() == [10, 11, 6, 7, 8]
    assert mb.advantages.tolist() == [-1.0, -1.0, 0.5, 0.5, 0.5]
    # one long sequence still gets a row of its own
    assert [m.members for m in pack_micro_batches(_seqs(), token_budget=2)] == [[0], [1], [3], [4]]


def test_packed_logprobs_equal_unpacked_ones(tiny_lm):
    seqs = _seqs()
    packed = trajectory_logprobs(tiny_lm, seqs, token_budget=1000)
    for s, lp in zip(seqs, packed):
        assert lp.shape == (len(s.completion_ids),)
        if not s.completion_ids:
            continue
        ids = torch.tensor([s.prompt_ids + s.completion_ids])
        with torch.no_grad():
            logits = tiny_lm(ids).logits[0].float().log_softmax(-1)
        p = len(s.prompt_ids)
        manual = torch.stack([logits[t - 1, ids[0, t]] for t in range(p, ids.shape[1])])
        assert torch.allclose(lp, manual, atol=1e-5)


def _grads_after(model, seqs, cfg):
    model.zero_grad()
    params = [p for p in model.parameters()]
    opt = torch.optim.SGD(params, lr=0.0)      # lr 0: the step leaves the weights; grads stay
    old = trajectory_logprobs(model, seqs, cfg.micro_batch_tokens)
    ref = [lp - 0.1 for lp in old]
    opt.zero_grad = lambda set_to_none=True: None  # keep accumulated grads for inspection
    stats = update_policy(model, opt, seqs, cfg, old, ref)
    return [p.grad.clone() for p in params], stats


def test_micro_batch_accumulation_equals_one_full_mini_batch(tiny_lm):
    seqs = _seqs()
    base = dict(mini_batches=1, grad_clip=1e9, kl_coef=0.001)
    g_small, st_small = _grads_after(tiny_lm, seqs, GRPOConfig(micro_batch_tokens=4, **base))
    g_big, st_big = _grads_after(tiny_lm, seqs, GRPOConfig(micro_batch_tokens=4096, **base))
    for a, b in zip(g_small, g_big):
        assert torch.allclose(a, b, atol=1e-6)
    # and it is the gradient of the token-mean loss written out by hand
    tiny_lm.zero_grad()
    n_tokens = sum(len(s.completion_ids) for s in seqs)
    total = 0.0
    for s in seqs:
        if not s.completion_ids:
            continue
        ids = torch.tensor([s.prompt_ids + s.completion_ids])
        lp = tiny_lm(ids).logits[0].float().log_softmax(-1)
        p = len(s.prompt_ids)
        logp = torch.stack([lp[t - 1, ids[0, t]] for t in range(p, ids.shape[1])])
        old = logp.detach()
        ratio = torch.exp(logp - old)
        adv = torch.full_like(logp, s.advantage)
        pg = -torch.minimum(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv)
        lr_ = (old - 0.1) - logp
        kl = torch.exp(lr_) - lr_ - 1
        total = total + (pg + 0.001 * kl).sum() / n_tokens
    total.backward()
    for a, p in zip(g_big, tiny_lm.parameters()):
        assert torch.allclose(a, p.grad, atol=1e-6)
    assert st_big.ratio_mean == pytest.approx(1.0)   # old log-probs = current ones
    assert st_big.tokens == n_tokens and st_big.optimizer_steps == 1
    tiny_lm.zero_grad()


def test_update_clips_the_gradient_norm_and_raises_good_sequences(tiny_lm):
    import copy

    model = copy.deepcopy(tiny_lm)
    seqs = [Trajectory([1, 2, 3], [4, 5, 6, 7], 1.0), Trajectory([8, 9], [10, 11], -1.0)]
    before = trajectory_logprobs(model, seqs, 4096)
    w0 = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    cfg = GRPOConfig(mini_batches=1, grad_clip=1e-2, kl_coef=0.0)
    stats = update_policy(model, opt, seqs, cfg, before, None)
    step = torch.sqrt(sum(((p.detach() - w) ** 2).sum() for p, w in zip(model.parameters(), w0)))
    assert stats.grad_norm > 1e-2                       # the raw norm was larger ...
    assert step.item() == pytest.approx(1e-2, rel=1e-3)  # ... and the step was clipped to 0.01
    after = trajectory_logprobs(model, seqs, 4096)
    assert after[0].sum() > before[0].sum()             # positive advantage: more likely
    assert after[1].sum() < before[1].sum()             # negative advantage: less likely


def test_an_update_whose_gradient_norm_is_not_finite_is_skipped(tiny_lm):
    """Mini-batch 1 has a NaN advantage (NaN loss, NaN gradient norm): no optimiser step, the
    weights and AdamW's moments untouched, counted; mini-batch 2 trains as usual."""
    import copy

    model = copy.deepcopy(tiny_lm)
    seqs = [Trajectory([1, 2, 3], [4, 5, 6], float("nan")), Trajectory([8, 9], [10, 11], 1.0)]
    old = trajectory_logprobs(model, seqs, 4096)
    cfg = GRPOConfig(mini_batches=2, kl_coef=0.0, lr=1e-2, warmup_steps=0)
    opt = make_optimizer(model.parameters(), cfg)
    w0 = [p.detach().clone() for p in model.parameters()]
    bad_only = update_policy(model, opt, seqs[:1], cfg, old[:1], None)
    assert (bad_only.update_skipped, bad_only.optimizer_steps, bad_only.tokens) == (1, 0, 0)
    assert bad_only.grad_norm == 0.0 and not opt.state            # AdamW never stepped
    assert all(torch.equal(p, w) for p, w in zip(model.parameters(), w0))
    assert all(p.grad is None for p in model.parameters())        # the NaN gradient is gone
    both = update_policy(model, opt, seqs, cfg, old, None)
    assert (both.update_skipped, both.optimizer_steps, both.tokens) == (1, 1, 2)
    assert math.isfinite(both.grad_norm) and math.isfinite(both.pg_loss)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert any(not torch.equal(p, w) for p, w in zip(model.parameters(), w0))
    assert both.as_dict("update/code")["update/code/update_skipped"] == 1.0


def test_two_mini_batches_make_two_optimizer_steps(tiny_lm):
    import copy

    model = copy.deepcopy(tiny_lm)
    seqs = [s for s in _seqs() if s.completion_ids]
    old = trajectory_logprobs(model, seqs, 4096)
    opt = make_optimizer(model.parameters(), GRPOConfig(lr=1e-3))
    stats = update_policy(model, opt, seqs, GRPOConfig(lr=1e-3, mini_batches=2), old, old)
    assert stats.optimizer_steps == 2
    assert stats.tokens == sum(len(s.completion_ids) for s in seqs)
    # the second mini-batch is evaluated after the first step: its ratio moved off 1
    assert stats.ratio_mean != pytest.approx(1.0, abs=1e-9)


def test_unpacked_micro_batches_hold_one_sequence_each():
    mbs = pack_micro_batches(_seqs(), token_budget=4096, pack=False)
    assert [mb.members for mb in mbs] == [[0], [1], [3], [4]]


def test_compute_context_runs_fp32_lora_in_bf16_and_keeps_fp32_grads(tiny_lm):
    import copy

    from peft import LoraConfig, get_peft_model

    from codea1.logprobs import compute_context

    base = copy.deepcopy(tiny_lm).to(torch.bfloat16)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    lora = [p for n, p in model.named_parameters() if "lora_" in n]
    assert lora and all(p.dtype == torch.float32 and p.requires_grad for p in lora)
    with torch.no_grad():
        for p in lora:
            p.normal_(0, 0.05)
    seqs = [Trajectory([1, 2, 3], [4, 5, 6, 7], 1.0)]
    mb = pack_micro_batches(seqs, 4096)[0]
    from codea1.logprobs import sequence_logprobs

    fast = sequence_logprobs(model, mb)          # under compute_context (bf16 adapters)
    with torch.no_grad():
        import contextlib
        import codea1.logprobs as g
        saved = g.compute_context
        g.compute_context = lambda m: contextlib.nullcontext()
        try:
            slow = sequence_logprobs(model, mb)  # peft's own fp32 path
        finally:
            g.compute_context = saved
    assert torch.allclose(fast.detach(), slow, atol=0.05)
    fast.sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in lora)
    assert any(p.grad.abs().sum() > 0 for p in lora)
    assert not isinstance(compute_context(tiny_lm), contextlib.ExitStack)  # fp32 model: no-op
