"""codea1.rollout: prompts and batched sampling, on a tiny random-weight model."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

from codea1.models import ModelConfig, load_policies  # noqa: E402

from tiny_model import tiny_test_model  # noqa: E402
from codea1.engines.hf_engine import generate, sample_next  # noqa: E402
from codea1.rollout import (  # noqa: E402
    GenerationInterrupted,
    GenerationStats,
    Sample,
    SamplingConfig,
    CUT_MARK,
    QUESTION_CUT_MARK,
    PromptTooLong,
    code_messages,
    encode_prompts,
    fit_test_prompt,
    prompt_limit,
    split_overlong,
    stop_token_ids,
    test_messages,
)

torch.set_num_threads(1)

PROBLEM = {"question": 'def add_one(x):\n    """Return x plus one."""', "entry_point": "add_one"}
CODE = "def add_one(x):\n    return x + 1"


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    d = tiny_test_model(tmp_path_factory.mktemp("tiny"), hidden_size=64)
    return load_policies(ModelConfig(name=str(d), mode="full", dtype="float32", device="cpu"))


def test_code_prompt_has_question_and_format():
    msgs = code_messages(PROBLEM)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert PROBLEM["question"] in msgs[1]["content"]
    assert "```python" in msgs[1]["content"]


def test_test_prompt_white_and_black_box():
    white = test_messages(PROBLEM, CODE)[1]["content"]
    black = test_messages(PROBLEM, white_box=False)[1]["content"]
    assert CODE in white and CODE not in black
    for text in (white, black):
        assert "assert add_one(parameters) == answer" in text and "8 tests" in text
        assert PROBLEM["question"] in text
        # the reference prompt's structure, in order
        heads = ["# Role", "# Task", "# Strategy", "# Context", "# Output format"]
        assert [text.index(h) for h in heads] == sorted(text.index(h) for h in heads)
        assert text.index("Question:") > text.index("# Context")
        assert "ONE ```python code block" in text.split("# Output format")[1]
    # the candidate comes after the question, in a python block, called buggy (as the reference does)
    context = white.split("# Context")[1].split("# Output format")[0]
    assert context.index("Question:") < context.index("Buggy code:") < context.index(f"```python\n{CODE}\n```")
    assert "bugs of the function in `Buggy code`" in white.split("# Task")[1]
    assert "Buggy" not in black
    # where the data has the reference's clean_description, the test model reads that
    clean = dict(PROBLEM, meta={"clean_description": "Add one to x and return it."})
    text = test_messages(clean, CODE)[1]["content"]
    assert "Question:\nAdd one to x and return it." in text and PROBLEM["question"] not in text
    with pytest.raises(ValueError, match="code"):
        test_messages(PROBLEM, None)
    with pytest.raises(ValueError, match="entry_point"):
        test_messages({"question": "q"}, CODE)


def test_generate_shapes_and_token_ids(policies):
    prompts = [code_messages(PROBLEM), test_messages(PROBLEM, CODE), "def f(x):"]
    stats = GenerationStats()
    out = generate(policies, "code", prompts, n=3, sampling=SamplingConfig(max_new_tokens=12, seed=0),
                   stats=stats)
    assert [len(s) for s in out] == [3, 3, 3]
    tok = policies.tokenizer
    want_prompt = tok.apply_chat_template(prompts[0], add_generation_prompt=True, tokenize=False)
    for samples in out:
        for s in samples:
            assert isinstance(s, Sample)
            assert 1 <= len(s.completion_ids) <= 12
            assert s.finished != s.truncated
            assert s.truncated == (len(s.completion_ids) == 12 and s.completion_ids[-1] != tok.eos_token_id)
            assert s.text == tok.decode(s.completion_ids, skip_special_tokens=True)
    assert tok.decode(out[0][0].prompt_ids) == want_prompt
    assert tok.decode(out[2][0].prompt_ids) == "def f(x):"
    assert stats.samples == 9 and stats.completion_tokens == sum(len(s.completion_ids) for ss in out for s in ss)


def test_greedy_matches_hf_generate(policies):
    """The hand-written loop (shared prefill, left padding, wide batch) equals model.generate."""
    prompts = ["def f(x): return", "assert f(2) == 3\nfor i in range(n):\n    if x[i] > 0", "import"]
    out = generate(policies, "code", prompts, n=2, sampling=SamplingConfig(max_new_tokens=25, temperature=0.0))
    tok = policies.tokenizer
    with policies.role("code") as model:
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        ref = model.generate(**enc, do_sample=False, max_new_tokens=25, pad_token_id=tok.pad_token_id)
        stops = stop_token_ids(tok, model)
    for i in range(len(prompts)):
        want = ref[i, enc["input_ids"].shape[1]:].tolist()
        # HF pads a row after its stop token; ours ends there: all of HF's row up to it
        end = next((j + 1 for j, t in enumerate(want) if t in stops), len(want))
        assert set(want[end:]) <= {tok.pad_token_id}
        for s in out[i]:
            assert s.completion_ids == want[:end]


def test_finished_rows_stop_and_keep_eos(policies):
    """Force EOS for some rows: they end at once, the others continue to the limit."""
    tok = policies.tokenizer
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    model = policies.module("code")
    head = model.lm_head.weight
    saved = head.detach().clone()
    with torch.no_grad():  # make EOS overwhelmingly likely whenever the hidden state allows
        head[eos] = head.mean(0) * 0 + 50.0 * torch.sign(head[eos])
    try:
        out = generate(policies, "code", ["a", "def f(x):\n    return x"], n=4,
                       sampling=SamplingConfig(max_new_tokens=8, seed=3))
    finally:
        with torch.no_grad():
            head.copy_(saved)
    flat = [s for ss in out for s in ss]
    finished = [s for s in flat if s.finished]
    assert finished, "an EOS-biased head must finish some rows"
    for s in finished:
        assert s.completion_ids[-1] == eos and eos not in s.completion_ids[:-1]
        assert "<|im_end|>" not in s.text


def test_reproducible_with_seed_and_generator(policies):
    cfg = SamplingConfig(max_new_tokens=10, seed=7, batch_size=4)
    prompts = ["def f(x):", "assert", "for i in range(3):"]
    a = generate(policies, "code", prompts, n=3, sampling=cfg)
    b = generate(policies, "code", prompts, n=3, sampling=cfg)
    assert [[s.completion_ids for s in ss] for ss in a] == [[s.completion_ids for s in ss] for ss in b]
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    c = generate(policies, "code", prompts, n=3, sampling=cfg.model_copy(update={"seed": None}), generator=g1)
    d = generate(policies, "code", prompts, n=3, sampling=cfg.model_copy(update={"seed": None}), generator=g2)
    assert [[s.completion_ids for s in ss] for ss in c] != [[s.completion_ids for s in ss] for ss in d]


def test_per_prompt_seeds_sample_alike_whatever_the_batch(policies):
    """What lets 1 rank and N ranks sample the same: a prompt's samples depend on its seed,
    not on the other prompts of the call, their order, or the batch size."""
    prompts = ["def f(x):", "assert", "for i in range(3):", "import math"]
    seeds = [101, 202, 303, 404]
    cfg = SamplingConfig(max_new_tokens=12, batch_size=64)
    ids = lambda out: [[s.completion_ids for s in g] for g in out]  # noqa: E731
    whole = ids(generate(policies, "code", prompts, n=3, sampling=cfg, seeds=seeds))
    odd = ids(generate(policies, "code", prompts[1::2], n=3, sampling=cfg.model_copy(update={"batch_size": 2}),
                       seeds=seeds[1::2]))
    assert odd == whole[1::2]
    reversed_ = ids(generate(policies, "code", prompts[::-1], n=3, sampling=cfg, seeds=seeds[::-1]))
    assert reversed_ == whole[::-1]
    assert ids(generate(policies, "code", prompts[:1], n=3, sampling=cfg, seeds=[999])) != whole[:1]
    with pytest.raises(ValueError, match="seeds: 1 given for 4 prompts"):
        generate(policies, "code", prompts, n=1, sampling=cfg, seeds=[1])


def test_batch_size_does_not_change_greedy_results(policies):
    prompts = ["def f(x):", "assert f(1) == 2", "x = [1, 2]", "import math"]
    cfg = SamplingConfig(max_new_tokens=10, temperature=0.0)
    wide = generate(policies, "code", prompts, n=3, sampling=cfg.model_copy(update={"batch_size": 64}))
    narrow = generate(policies, "code", prompts, n=3, sampling=cfg.model_copy(update={"batch_size": 2}))
    assert [[s.completion_ids for s in ss] for ss in wide] == [[s.completion_ids for s in ss] for ss in narrow]


def test_long_prompts_are_refused_not_cut(policies):
    """The reference never cuts a prompt: one over the limit is an error naming it."""
    long_prompt = "def f(x):\n    return x + 1\n" * 200
    with pytest.raises(PromptTooLong, match=r"prompt 0: \d+ tokens, over the limit of 40 .*never cut from the left"):
        generate(policies, "code", [long_prompt, "short"], n=1,
                 sampling=SamplingConfig(max_new_tokens=5, max_prompt_tokens=40))
    # the model's context minus max_new_tokens is a limit too (tiny model: 1024 positions)
    with pytest.raises(PromptTooLong, match="over the limit of 1000 "):
        generate(policies, "code", [long_prompt * 3], n=1, sampling=SamplingConfig(max_new_tokens=24))
    assert prompt_limit(SamplingConfig(max_new_tokens=24), 1024) == 1000
    assert prompt_limit(SamplingConfig(max_new_tokens=24, max_prompt_tokens=4096), 1024) == 1000
    assert prompt_limit(SamplingConfig(max_new_tokens=4096, max_prompt_tokens=4096), 32768) == 4096
    assert prompt_limit(SamplingConfig(), None) is None


def test_long_prompts_are_cut_from_the_left_and_counted_under_the_switch(policies):
    long_prompt = "def f(x):\n    return x + 1\n" * 200
    stats = GenerationStats()
    out = generate(policies, "code", [long_prompt, "short"], n=2,
                   sampling=SamplingConfig(max_new_tokens=5, max_prompt_tokens=40, cut_prompts_left=True),
                   stats=stats)
    assert stats.prompts_truncated == 1
    full_ids = policies.tokenizer(long_prompt, add_special_tokens=False)["input_ids"]
    assert out[0][0].prompt_ids == full_ids[-40:] and out[0][0].prompt_truncated
    assert not out[1][0].prompt_truncated
    # the model's own context also bounds prompts (tiny model: 1024 positions)
    stats = GenerationStats()
    out = generate(policies, "code", [long_prompt * 3], n=1,
                   sampling=SamplingConfig(max_new_tokens=24, cut_prompts_left=True), stats=stats)
    assert stats.prompts_truncated == 1 and len(out[0][0].prompt_ids) == 1024 - 24


def test_the_rows_own_prompt_is_the_code_prompt():
    own = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Write add_one."}]
    row = dict(PROBLEM, id="P/1", meta={"prompt": own})
    assert code_messages(row) == own and code_messages(row) is not own
    ours = code_messages(row, own_prompt=False)           # rollout.project_code_prompt=true
    assert ours == code_messages(PROBLEM) and PROBLEM["question"] in ours[1]["content"]
    with pytest.raises(ValueError, match=r"problem P/1: meta.prompt: expected a list of chat messages"):
        code_messages(dict(row, meta={"prompt": "Write add_one."}))
    with pytest.raises(ValueError, match="meta.prompt"):
        code_messages(dict(row, meta={"prompt": [{"role": "user"}]}))


def test_a_long_test_prompt_keeps_its_head_and_loses_the_codes_tail(policies):
    tok = policies.tokenizer
    code = "def add_one(x):\n" + "    x = x + 0\n" * 300 + "    return x + 1\n"
    full = encode_prompts(tok, [test_messages(PROBLEM, code)])[0]
    short_ids, shortened = fit_test_prompt(tok, PROBLEM, "def add_one(x):\n    return x + 1", 1000)
    assert not shortened and short_ids == encode_prompts(tok, [test_messages(PROBLEM, CODE)])[0]
    assert len(full) > 1000
    ids, shortened = fit_test_prompt(tok, PROBLEM, code, 1000)
    assert shortened and 990 <= len(ids) <= 1000
    text = tok.decode(ids)
    # the head (system message, Role, Task, Strategy), the question and the output format stay
    assert text.startswith("<|im_start|>system\nYou are a helpful test-generation assistant.")
    for part in ("# Role", "# Task", "# Strategy", PROBLEM["question"], "# Output format",
                 "Format: `assert add_one(parameters) == answer`", "def add_one(x):\n    x = x + 0"):
        assert part in text, part
    # the code's tail is gone, marked as cut, inside its block
    assert "return x + 1" not in text and CUT_MARK + "\n```" in text
    # a question too long as well: it is cut after the code is gone
    long_q = dict(PROBLEM, question=PROBLEM["question"] + " Really." * 900)
    ids, shortened = fit_test_prompt(tok, long_q, code, 1000)
    text = tok.decode(ids)
    assert shortened and 990 <= len(ids) <= 1000 and "# Role" in text and "# Output format" in text
    assert f"```python\n{CUT_MARK}\n```" in text                  # the code block holds the mark alone
    assert "Really. Real" in text and f"\n{QUESTION_CUT_MARK}\n\nBuggy code:" in text
    # black-box: the question alone is cut
    ids, shortened = fit_test_prompt(tok, long_q, None, 1000, white_box=False)
    text = tok.decode(ids)
    assert shortened and 990 <= len(ids) <= 1000 and CUT_MARK not in text and "Buggy" not in text
    assert f"\n{QUESTION_CUT_MARK}\n\n# Output format" in text
    # a limit below the fixed parts alone is an error, not a cut head
    with pytest.raises(PromptTooLong, match="fixed parts alone"):
        fit_test_prompt(tok, PROBLEM, code, 50)


def test_code_prompts_over_the_limit_are_dropped_from_the_data(policies):
    tok = policies.tokenizer
    rows = [dict(PROBLEM, id=f"P/{i}", question=PROBLEM["question"] + " Really." * k)
            for i, k in enumerate((0, 400, 10, 2000))]
    sizes = [len(encode_prompts(tok, [code_messages(r)])[0]) for r in rows]
    limit = sizes[2]                      # exactly the third's length: it stays
    assert sizes[0] < limit < sizes[1] and sizes[3] > limit
    kept, dropped = split_overlong(rows, tok, limit)
    assert [r["id"] for r in kept] == ["P/0", "P/2"] and [r["id"] for r in dropped] == ["P/1", "P/3"]
    assert split_overlong(rows, tok, None) == (rows, [])
    # the row's own prompt is what is measured
    own = dict(rows[1], meta={"prompt": [{"role": "user", "content": "short"}]})
    assert split_overlong([own], tok, limit) == ([own], [])
    assert split_overlong([own], tok, limit, own_prompt=False) == ([], [own])


def test_junk_and_empty_inputs_never_crash(policies):
    junk = "\x00\x01\x02\ufffd\U0001f600 " * 30 + "```" * 20
    out = generate(policies, "test", [junk, [{"role": "user", "content": ""}]], n=2,
                   sampling=SamplingConfig(max_new_tokens=6, seed=1))
    assert [len(s) for s in out] == [2, 2]
    assert generate(policies, "code", [], n=4) == []
    assert generate(policies, "code", ["a"], n=0) == [[]]
    with pytest.raises(ValueError, match="prompt 0"):
        generate(policies, "code", [""], n=1)
    with pytest.raises(ValueError, match="role"):
        generate(policies, "judge", ["a"], n=1)


def test_lora_roles_generate_with_their_own_weights(tmp_path):
    d = tiny_test_model(tmp_path / "tiny", hidden_size=64)
    pol = load_policies(ModelConfig(name=str(d), mode="lora-shared", dtype="float32", device="cpu"))
    cfg = SamplingConfig(max_new_tokens=12, temperature=0.0)
    before = generate(pol, "test", ["def f(x):"], n=1, sampling=cfg)[0][0].completion_ids
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in pol.trainable_parameters("code"):
            p.add_(torch.randn(p.shape, generator=g) * 2.0)
    code = generate(pol, "code", ["def f(x):"], n=1, sampling=cfg)[0][0].completion_ids
    test = generate(pol, "test", ["def f(x):"], n=1, sampling=cfg)[0][0].completion_ids
    assert test == before and code != before


def test_top_p_keeps_only_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    g = torch.Generator().manual_seed(0)
    draws = {int(sample_next(logits, 1.0, 0.7, g)) for _ in range(300)}
    assert draws == {0, 1}
    assert int(sample_next(logits, 0.0, 1.0, None)) == 0
    all_draws = {int(sample_next(logits, 1.0, 1.0, g)) for _ in range(600)}
    assert all_draws == {0, 1, 2, 3}


def test_rows_dropped_midway_keep_the_others_exact(policies):
    """Rows that finish early leave the batch (and the KV cache); the rest must not change."""
    prompts = ["def f(x): return", "assert f(2) == 3\nfor i in range(n):", "import", "x = [1, 2]"]
    cfg = SamplingConfig(max_new_tokens=20, temperature=0.0)
    free = generate(policies, "code", prompts, n=1, sampling=cfg)
    # a token that row 0 emits early becomes an extra stop token: rows end at different steps
    stop = free[0][0].completion_ids[4]
    model = policies.module("code")
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [*(saved if isinstance(saved, list) else [saved]), stop]
    try:
        out = generate(policies, "code", prompts, n=1, sampling=cfg)
    finally:
        model.generation_config.eos_token_id = saved
    lengths = set()
    for i, samples in enumerate(out):
        want = free[i][0].completion_ids
        cut = want.index(stop) + 1 if stop in want else len(want)
        assert samples[0].completion_ids == want[:cut]
        assert samples[0].finished == (stop in want)
        lengths.add(cut)
    assert len(lengths) > 1, "the rows must end at different steps for this test to mean anything"


def test_growing_cache_matches_dynamic_cache_past_its_capacity(policies):
    """The preallocated cache grows (and selects rows) exactly like transformers' own."""
    from transformers import DynamicCache

    from codea1.engines.hf_engine import _growing_cache

    model = policies.module("code")
    ids = torch.tensor([[5, 9, 30, 41, 7], [3, 3, 8, 19, 2]])
    mine, ref = _growing_cache(model, capacity=3), DynamicCache(config=model.config)
    assert type(mine.layers[0]).__name__ == "GrowingLayer"
    with torch.no_grad():
        a = model(input_ids=ids, cache=mine, use_cache=True).logits
        b = model(input_ids=ids, cache=ref, use_cache=True).logits
        assert torch.allclose(a, b, atol=1e-5)
        keep = torch.tensor([1, 1, 0])
        mine.batch_select_indices(keep)
        ref.batch_select_indices(keep)
        for step in range(6):
            nxt = torch.tensor([[11 + step], [20 + step], [7]])
            a = model(input_ids=nxt, cache=mine, use_cache=True).logits
            b = model(input_ids=nxt, cache=ref, use_cache=True).logits
            assert torch.allclose(a, b, atol=1e-5)
    assert mine.get_seq_length() == ref.get_seq_length() == 11


def test_bf16_sampling_leaves_float32_adapters_untouched(tmp_path):
    """Adapters run in bf16 while sampling; afterwards the very same float32 tensors are back."""
    d = tiny_test_model(tmp_path / "tiny", hidden_size=64)
    pol = load_policies(ModelConfig(name=str(d), mode="lora-shared", dtype="bfloat16", device="cpu"))
    params = pol.trainable_parameters("code")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in params:
            p.add_(torch.randn(p.shape, generator=g))
    before = [(p, p.data_ptr(), p.detach().clone()) for p in params]
    assert {p.dtype for p in params} == {torch.float32}
    from codea1.engines.hf_engine import _adapters_in_model_dtype

    model = pol.module("code")
    with _adapters_in_model_dtype(model, torch.bfloat16):
        assert {p.dtype for p in params} == {torch.bfloat16}
        assert {p.dtype for p in pol.trainable_parameters("test")} == {torch.float32}  # inactive
    out = generate(pol, "code", ["def f(x):", "assert"], n=2, sampling=SamplingConfig(max_new_tokens=8, seed=0))
    assert [len(s) for s in out] == [2, 2]
    for p, data, value in before:
        assert p.data_ptr() == data and p.dtype == torch.float32 and torch.equal(p.detach(), value)
    with pytest.raises(RuntimeError):
        with _adapters_in_model_dtype(model, torch.bfloat16):
            raise RuntimeError("boom")
    assert all(p.data_ptr() == data and p.dtype == torch.float32 for p, data, _ in before)


def test_should_stop_interrupts_decoding_between_tokens(policies):
    polls = {"n": 0}

    def stop_on_third_poll():
        polls["n"] += 1
        return polls["n"] >= 3

    with pytest.raises(GenerationInterrupted, match="after 2 of 50"):
        generate(policies, "code", ["def f(x):"], n=2,
                 sampling=SamplingConfig(max_new_tokens=50, seed=0), should_stop=stop_on_third_poll)
    assert polls["n"] == 3
    # never asked to stop: the same call completes
    out = generate(policies, "code", ["def f(x):"], n=2, sampling=SamplingConfig(max_new_tokens=5, seed=0),
                   should_stop=lambda: False)
    assert len(out[0]) == 2


def _first_holding(tok, ids: list[int], strings: list[str]) -> int | None:
    """The length of the shortest prefix of `ids` whose text holds one of `strings`."""
    for i in range(1, len(ids) + 1):
        if any(s in tok.decode(ids[:i], skip_special_tokens=True) for s in strings):
            return i
    return None


@pytest.mark.parametrize("lean", [True, False], ids=["lean-forward", "transformers-forward"])
def test_stop_strings_end_a_completion_where_its_text_first_holds_one(policies, lean):
    """A `stop` string ends a row as a stop token does: the same draw, cut after the token
    that completes the string (kept), finished and not truncated; a row whose text never
    holds it is unchanged, and the rows beside a stopped one keep their draws."""
    tok = policies.tokenizer
    prompts = ["def f(x):", "assert", "for i in range(3):"]
    seeds = [11, 22, 33]
    cfg = SamplingConfig(max_new_tokens=40, lean_forward=lean)
    free = generate(policies, "code", prompts, n=4, sampling=cfg, seeds=seeds)
    text = free[0][0].text
    middle = len(text) // 2
    strings = [text[middle:middle + 2], "\x00never\x00"]
    assert strings[0].strip() and "\ufffd" not in strings[0], text
    stopped = generate(policies, "code", prompts, n=4, sampling=cfg.model_copy(update={"stop": strings}),
                       seeds=seeds)
    cut_rows = 0
    for free_group, stopped_group in zip(free, stopped):
        for a, b in zip(free_group, stopped_group):
            at = _first_holding(tok, a.completion_ids, strings)
            if at is None:
                assert (b.completion_ids, b.finished, b.truncated) == (a.completion_ids, a.finished, a.truncated)
                continue
            cut_rows += 1
            assert b.completion_ids == a.completion_ids[:at]
            assert b.finished and not b.truncated
            assert strings[0] in b.text and b.text == tok.decode(b.completion_ids, skip_special_tokens=True)
    assert cut_rows >= 1 and stopped[0][0].finished  # the row the string was taken from ends on it


def test_stop_strings_are_checked_on_the_tail_of_the_text(tmp_path):
    """`StopStrings` decodes only a window of the last tokens; a string of several tokens,
    a multi-byte one and one that starts with a space are all seen in the window exactly
    when the whole text holds them."""
    from transformers import AutoTokenizer

    from codea1.rollout import StopStrings

    tok = AutoTokenizer.from_pretrained(tiny_test_model(tmp_path / "tok"))
    text = "x = 1\n" * 30 + "é ```\nafter"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    for stop in ["```\n", "é ``", " ```", "1\nx"]:
        checker = StopStrings(tok, [stop])
        seen = next(i for i in range(1, len(ids) + 1) if checker.ended(ids[:i]))
        assert seen == _first_holding(tok, ids, [stop]), stop
    assert not StopStrings(tok, []).ended(ids) and not StopStrings(tok, [])
    with pytest.raises(ValueError, match=r"stop\[1\] is empty"):
        SamplingConfig(stop=["```", ""])
    assert SamplingConfig(stop="END").stop == ["END"]     # one string, as vLLM takes it
    from codea1.train.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"config key 'rollout.code.stop': .*stop\[0\] is empty"):
        load_config(preset="cpu-demo", overrides=['rollout.code.stop=[""]'])
    cfg = load_config(preset="cpu-demo", overrides=['rollout.code.stop="\\n```\\n"'])
    assert cfg.rollout.code.stop == ["\n```\n"] and cfg.rollout.test.stop == []
