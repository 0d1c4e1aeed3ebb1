"""codea1.lean_forward: the sampler's lean forward computes what transformers' forward does.

Checked on a tiny random Qwen2 with a LoRA adapter whose B matrices are non-zero (so the
merge matters): prefill and decode logits against the model's own forward, samples of
`hf_engine.generate` with the lean forward on and off, the adapters-off (reference) state,
and row dropping when some samples finish early. Fault tried: the decode step not letting
a new token attend to itself (`valid` set after the attention) -> the decode-logit tests
fail by ~0.1.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from codea1.lean_forward import KVCache, LeanModel, PromptMemo, unsupported
from codea1.packed_linear import Linear  # noqa: E402
from codea1.models import ModelConfig, load_policies  # noqa: E402
from tiny_model import tiny_test_model  # noqa: E402
from codea1.engines.hf_engine import generate, lean_model, release_lean  # noqa: E402
from codea1.rollout import SamplingConfig  # noqa: E402

PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [20, 21, 22, 23, 24, 25, 26, 27, 28]]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return tiny_test_model(tmp_path_factory.mktemp("tiny"), hidden_size=64)


def _policies(tiny_dir, dtype: str):
    pol = load_policies(ModelConfig(name=str(tiny_dir), mode="lora-shared", dtype=dtype, device="cpu"))
    with torch.no_grad():
        gen = torch.Generator().manual_seed(1)
        for name, p in pol.named_trainable_parameters("code"):
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return pol


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_logits_match_transformers(tiny_dir, dtype, tol):
    pol = _policies(tiny_dir, dtype)
    with pol.role("code") as model, torch.no_grad():
        lean = LeanModel(model)
        for prompt in PROMPTS:
            cache = KVCache(lean, 2, 12, 4, [len(prompt)] * 2)
            got = lean.prefill(prompt, cache, torch.arange(2)).float()
            want = model(input_ids=torch.tensor([prompt])).logits[0, -1].float()
            assert (got - want).abs().max().item() < tol
            seq = list(prompt)
            positions = torch.tensor([len(prompt)] * 2)
            for step in range(3):  # three decode steps, each against a full forward
                token = int(want.argmax())
                seq.append(token)
                got = lean.decode(torch.tensor([token, token]), positions, cache).float()
                want = model(input_ids=torch.tensor([seq])).logits[0, -1].float()
                assert (got[0] - want).abs().max().item() < tol, f"decode step {step}"
                # two identical rows: the same logits (to the last bit or so: a CPU's kernels may
                # round a batch's rows differently, 1e-7 seen on an AVX2 EPYC; a row mixed up
                # with another's cache is off by ~0.1)
                assert (got[0] - got[1]).abs().max().item() < 1e-6
                positions = positions + 1


def test_a_shared_start_is_prefilled_once_with_the_same_numbers(tiny_dir):
    """Prompts that start alike (as one problem's test prompts do, a candidate's code after
    the same instructions): with a PromptMemo the second computes only what follows the
    shared start, and its logits and cached keys/values are those of its own full prefill.
    Faults tried: the suffix attending causally from position 0 (is_causal on the
    [suffix, whole] scores: logits off by ~0.1), the shared keys taken from the wrong end
    of the memo (logits off) -- both fail here."""
    pol = _policies(tiny_dir, "float32")
    start = list(range(30, 42))                       # 12 shared tokens
    prompts = [start + [5, 6, 7], start + [8, 9, 10, 11, 12], [1, 2, 3] + start, start + [5, 6, 7, 50]]
    width = max(map(len, prompts))
    with pol.role("code") as model, torch.no_grad():
        lean = LeanModel(model)
        alone = KVCache(lean, len(prompts), width, 1, [len(p) for p in prompts])
        shared = KVCache(lean, len(prompts), width, 1, [len(p) for p in prompts])
        memo = PromptMemo()
        for r, prompt in enumerate(prompts):
            want = lean.prefill(prompt, alone, torch.tensor([r]))
            got = lean.prefill(prompt, shared, torch.tensor([r]), memo)
            assert (got - want).abs().max().item() < 1e-5, f"prompt {r}"
            full = model(input_ids=torch.tensor([prompt])).logits[0, -1]
            assert (got - full).abs().max().item() < 1e-5, f"prompt {r} against transformers"
        for a, b in zip(alone.k + alone.v, shared.k + shared.v):
            assert (a - b).abs().max().item() < 1e-5
    # shared starts: 12 (prompt 1 after 0), none (prompt 2 starts otherwise), none (3 after 2)
    assert memo.reused == 12
    memo.ids = list(prompts[0])
    assert memo.shared(prompts[3]) == len(prompts[0])      # a longer prompt takes the whole memo
    assert memo.shared(prompts[0]) == len(prompts[0]) - 1  # its last token is always run
    assert memo.shared(start[:7] + [99, 98]) == 0          # below MIN_SHARED: not worth it


def test_adapters_off_is_the_base_model(tiny_dir):
    pol = _policies(tiny_dir, "float32")
    with pol.reference() as model:
        lean = LeanModel(model)
        cache = KVCache(lean, 1, 6, 1, [6])
        got = lean.prefill(PROMPTS[0], cache, torch.arange(1))
        want = model(input_ids=torch.tensor([PROMPTS[0]])).logits[0, -1]
    with pol.role("code") as model, torch.no_grad():
        adapted = model(input_ids=torch.tensor([PROMPTS[0]])).logits[0, -1]
    assert (got - want).abs().max().item() < 1e-5
    assert (adapted - want).abs().max().item() > 1e-3  # the adapter does change the model


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_generate_same_samples_with_and_without(tiny_dir, dtype):
    """Same seeds, same prompts: the lean forward and transformers' forward draw the same
    tokens in float32 (rows finish at different steps, so row dropping is exercised); in
    bf16, where the merged weights round differently, an inverse-CDF draw can land on the
    neighbouring token, so nearly all, not all, tokens agree."""
    pol = _policies(tiny_dir, dtype)
    outs = {}
    for lean in (True, False):
        cfg = SamplingConfig(max_new_tokens=16, seed=3, lean_forward=lean)
        outs[lean] = generate(pol, "code", PROMPTS, n=3, sampling=cfg, seeds=[11, 12, 13])
    a = [[s.completion_ids for s in row] for row in outs[True]]
    b = [[s.completion_ids for s in row] for row in outs[False]]
    if dtype == "float32":
        assert a == b
    else:
        pairs = [(x, y) for ra, rb in zip(a, b) for sa, sb in zip(ra, rb) for x, y in zip(sa, sb)]
        assert sum(x == y for x, y in pairs) >= 0.8 * len(pairs)
    if dtype == "float32":  # (the exact comparison is the one that must see rows dropped)
        lengths = {len(ids) for row in a for ids in row}
        assert len(lengths) > 1, "every row ran the same length: row dropping untested"


def test_cached_until_weights_change(tiny_dir):
    pol = _policies(tiny_dir, "float32")
    cfg = SamplingConfig(max_new_tokens=4, seed=0)
    with pol.role("code") as model:
        first = lean_model(model, cfg, "cpu")
        assert lean_model(model, cfg, "cpu") is first
        with torch.no_grad():
            pol.trainable_parameters("code")[0].add_(0.01)  # an optimiser step bumps the version
        second = lean_model(model, cfg, "cpu")
        assert second is not first
        release_lean(model)
        assert lean_model(model, cfg, "cpu") is not second
        assert lean_model(model, cfg.model_copy(update={"lean_forward": False}), "cpu") is None


def test_packed_linear_matches_plain():
    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        w = torch.randn(48, 40, generator=gen).to(dtype)
        b = torch.randn(48, generator=gen).to(dtype)
        x = torch.randn(2, 5, 40, generator=gen).to(dtype)
        got = Linear(w, b)(x).float()
        want = torch.nn.functional.linear(x, w, b).float()
        assert got.shape == (2, 5, 48)
        assert torch.allclose(got, want, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-2)


def test_unsupported_names_the_reason(tiny_dir):
    pol = _policies(tiny_dir, "float32")
    with pol.role("code") as model:
        assert unsupported(model) is None
        model.get_base_model().config.hidden_act = "gelu"
        try:
            assert "gelu" in unsupported(model)
            with pytest.raises(ValueError, match="gelu"):
                LeanModel(model)
            assert lean_model(model, SamplingConfig(), "cpu") is None  # falls back to transformers
        finally:
            model.get_base_model().config.hidden_act = "silu"
