"""The GRPO update on a policy that has moved away from its frozen reference.

Elsewhere the update runs on a fresh policy (equal to its reference) or at learning rate
0, so the KL term is 0 and every ratio is 1: a KL taken against the wrong model, with the
wrong sign, or the clip and dual-clip wired wrongly inside the update would go unseen.
Here the policy's weights are moved first (LoRA adapter, or the full copy), and every
figure of the update is compared with a second path: log-probabilities from a plain
forward pass of the policy and of a freshly loaded copy of the initial model, and the
loss formulas of CODE_A1_SPEC.md written out by hand below.

Faults tried (each made these tests fail):
- the reference log-probs taken from the policy (`policies.role` instead of
  `policies.reference()` in `update_role`): the KL was 0;
- the KL's log-ratio reversed (logp - ref instead of ref - logp): the KL differed by ~20%;
- the KL term subtracted from the loss: the loss, and the KL after a step, went the wrong way;
- the clip range swapped (1 - high, 1 + low), the dual clip applied to positive
  advantages, or dropped: the pg loss and clip/dual-clip fractions differed.
"""

from __future__ import annotations

import math

import pytest
import torch

from codea1.grpo import GRPOConfig, update_policy, update_role
from codea1.models import load_policies
from tiny_model import tiny_test_model
from codea1.trajectory import Trajectory

torch.set_num_threads(1)

SEQS = [  # (prompt ids, response ids, advantage)
    ([5, 17, 40, 41], [60, 61, 62], 1.0),
    ([5, 17, 90], [70, 71, 72, 73], -1.0),
    ([9, 9, 12, 13, 14], [100, 101], 0.5),
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return tiny_test_model(tmp_path_factory.mktemp("tiny") / "model")


def _moved_policies(tiny_dir, mode: str):
    """Policies whose "code" weights were moved away from the initial model."""
    torch.manual_seed(0)   # the same LoRA initialisation whatever ran before
    policies = load_policies(name=str(tiny_dir), mode=mode, dtype="float32", device="cpu", lora_r=4, lora_alpha=8)
    gen = torch.Generator().manual_seed(7)
    scale = 0.02 if mode == "full" else 0.25   # (LoRA adapters start at zero: they need a larger push)
    with torch.no_grad():
        for p in policies.trainable_parameters("code"):
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return policies


def _plain_logps(model, seqs) -> list[torch.Tensor]:
    """Response-token log-probs from one unpacked forward pass per sequence."""
    out = []
    with torch.no_grad():
        for prompt, response, _a in seqs:
            ids = torch.tensor([prompt + response])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
            out.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(response)[:, None])[:, 0])
    return out


def _initial_model(tiny_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()


def _k3(policy: float, ref: float) -> float:
    d = ref - policy
    return math.exp(d) - d - 1.0


def _trajectories():
    return [Trajectory(p, r, a) for p, r, a in SEQS]


@pytest.mark.parametrize("mode", ["lora-shared", "full", "selfplay"])
def test_update_role_takes_the_kl_against_the_frozen_initial_model(tiny_dir, mode):
    policies = _moved_policies(tiny_dir, mode)
    with policies.role("code") as model:
        pol = _plain_logps(model.eval(), SEQS)
    ref = _plain_logps(_initial_model(tiny_dir), SEQS)
    tokens = sum(len(r) for _p, r, _a in SEQS)
    kl = sum(_k3(float(p), float(q)) for ps, qs in zip(pol, ref) for p, q in zip(ps, qs)) / tokens
    assert kl > 1e-3  # the policy really moved: a KL against itself would be 0
    pg = -sum(a * len(r) for _p, r, a in SEQS) / tokens   # ratio 1 on the update's first pass
    cfg = GRPOConfig(kl_coef=0.5, mini_batches=1, grad_clip=1e9)
    opt = torch.optim.SGD(policies.trainable_parameters("code"), lr=0.0)
    stats = update_role(policies, "code", opt, _trajectories(), cfg, layout=[[0, 1, 2]], metrics={}, label="code")
    assert stats.tokens == tokens
    assert stats.kl == pytest.approx(kl, rel=1e-4)
    assert stats.pg_loss == pytest.approx(pg, rel=1e-5)
    assert stats.loss == pytest.approx(pg + 0.5 * kl, rel=1e-4)
    assert stats.ratio_mean == pytest.approx(1.0, abs=1e-6) and stats.clip_frac == 0.0


def test_a_step_on_the_kl_term_alone_moves_the_policy_back_towards_the_reference(tiny_dir):
    """Zero advantages: the only gradient is kl_coef * KL's, so one SGD step must lower the KL."""
    policies = _moved_policies(tiny_dir, "lora-shared")
    ref = _plain_logps(_initial_model(tiny_dir), SEQS)
    seqs = [Trajectory(p, r, 0.0) for p, r, _a in SEQS]

    def kl_now() -> float:
        with policies.role("code") as model:
            pol = _plain_logps(model.eval(), SEQS)
        return sum(_k3(float(p), float(q)) for ps, qs in zip(pol, ref) for p, q in zip(ps, qs))

    before = kl_now()
    cfg = GRPOConfig(kl_coef=1.0, mini_batches=1, grad_clip=1e9)
    opt = torch.optim.SGD(policies.trainable_parameters("code"), lr=0.05)
    stats = update_role(policies, "code", opt, seqs, cfg, layout=[[0, 1, 2]], metrics={}, label="code")
    assert stats.optimizer_steps == 1 and stats.pg_loss == 0.0
    after = kl_now()
    assert after < before, (before, after)


def _surrogate(ratio: float, adv: float, low: float, high: float, c: float) -> tuple[float, bool, bool]:
    """The spec's per-token loss, written out: max(-rA, -clip(r)A), bounded by -cA when A < 0."""
    unclipped, clipped = -adv * ratio, -adv * min(max(ratio, 1 - low), 1 + high)
    loss = max(unclipped, clipped)
    bounded = adv < 0 and loss > -adv * c
    return (min(loss, -adv * c) if adv < 0 else loss), clipped > unclipped, bounded


def test_update_policy_clips_and_dual_clips_at_hand_set_ratios(tiny_dir):
    """Old log-probs set so that each token's ratio is chosen: inside the range, above
    1 + clip_high and below 1 - clip_low, and far above clip_ratio_c on a bad sample."""
    policies = _moved_policies(tiny_dir, "lora-shared")
    ratios = [[1.1, 1.5, 20.0], [1.1, 0.5, 20.0, 3.0], [0.7, 1.2]]
    with policies.role("code") as model:
        pol = _plain_logps(model.eval(), SEQS)
    ref = _plain_logps(_initial_model(tiny_dir), SEQS)
    old = [p - torch.log(torch.tensor(r)) for p, r in zip(pol, ratios)]
    low, high, c = 0.2, 0.28, 10.0
    per_token = [_surrogate(r, a, low, high, c) for rs, (_p, _r, a) in zip(ratios, SEQS) for r in rs]
    # by hand: A=1: -1.1, -1.28, -1.28 | A=-1: 1.1, 0.8, min(20, 10), 3 | A=0.5: -0.35 (0.7 below the
    # range does not clip a good sample), -0.6; clipped: 1.5 and 20 (A>0), 0.5 (A<0); bounded: 20 (A<0)
    tokens = len(per_token)
    assert [round(x[0], 6) for x in per_token] == [-1.1, -1.28, -1.28, 1.1, 0.8, 10.0, 3.0, -0.35, -0.6]
    assert sum(x[1] for x in per_token) == 3 and sum(x[2] for x in per_token) == 1
    kl = sum(_k3(float(p), float(q)) for ps, qs in zip(pol, ref) for p, q in zip(ps, qs)) / tokens
    cfg = GRPOConfig(kl_coef=0.25, mini_batches=1, grad_clip=1e9, clip_low=low, clip_high=high, clip_ratio_c=c)
    with policies.role("code") as model:
        opt = torch.optim.SGD(policies.trainable_parameters("code"), lr=0.0)
        stats = update_policy(model, opt, _trajectories(), cfg, old, ref)
    pg = sum(x[0] for x in per_token) / tokens
    assert stats.pg_loss == pytest.approx(pg, rel=1e-5)
    assert stats.clip_frac == pytest.approx(3 / tokens) and stats.dual_clip_frac == pytest.approx(1 / tokens)
    assert stats.ratio_mean == pytest.approx(sum(sum(r) for r in ratios) / tokens, rel=1e-5)
    assert stats.kl == pytest.approx(kl, rel=1e-4) and kl > 1e-3
    assert stats.loss == pytest.approx(pg + 0.25 * kl, rel=1e-5)
