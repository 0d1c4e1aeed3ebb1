"""The real offline Qwen2.5-Coder-0.5B-Instruct: resolve, load in bf16, write one function.

Slow (minutes on 2 cores the first time: assembling and dequantising the GGUF).
Run with `pytest -m slow tests/test_models_slow.py`.
"""

from __future__ import annotations

import ast
import re

import pytest

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")

from codea1.models import ModelConfig, ModelError, load_policies, offline_part_paths  # noqa: E402
from codea1.engines.hf_engine import generate  # noqa: E402
from codea1.rollout import GenerationStats, SamplingConfig, code_messages  # noqa: E402


@pytest.fixture(scope="module")
def policies():
    try:
        offline_part_paths()
    except ModelError as exc:
        pytest.skip(f"offline model parts not installed: {exc}")
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return load_policies(ModelConfig(name="qwen2.5-coder-0.5b-instruct", dtype="bfloat16", device="cpu"))


@pytest.mark.timeout(1800)  # minutes when the 2 cores are shared with other jobs
def test_offline_model_writes_a_function(policies):
    from codea1.data import bundled_problems

    assert policies.dtype == torch.bfloat16
    assert policies.tokenizer.chat_template and "<|im_start|>" in policies.tokenizer.chat_template
    problem = bundled_problems("train")[0]
    stats = GenerationStats()
    out = generate(policies, "code", [code_messages(problem)], n=1,
                   sampling=SamplingConfig(temperature=0.0, max_new_tokens=200), stats=stats)
    text = out[0][0].text
    block = re.search(r"```(?:python)?\n(.*?)```", text, re.S)
    code = block.group(1) if block else text
    tree = ast.parse(code)  # greedy 0.5B output on an easy problem is valid Python
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert problem.entry_point in names, text
    assert stats.completion_tokens == len(out[0][0].completion_ids) > 10


def test_reference_and_roles_agree_before_training(policies):
    ids = policies.tokenizer("def add(a, b):", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        with policies.role("code") as m:
            code = m(input_ids=ids).logits
        with policies.role("test") as m:
            test = m(input_ids=ids).logits
        with policies.reference() as m:
            ref = m(input_ids=ids).logits
    assert torch.equal(code, ref) and torch.equal(test, ref)
