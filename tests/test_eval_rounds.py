"""`eval tests --protocol rounds`: k chat rounds of one test method each, as the Code-A1
authors' UnLeakedTestBench harness asks; generation is scripted, reading the conversation."""

from __future__ import annotations

import json

import pytest

import codea1.engines.hf_engine as hf_engine
from codea1.data import Problem, save_problems
from codea1.eval.rounds import FOLLOW_UP, SYSTEM, conversation, first_request, rounds_tests, sample_rounds
from codea1.eval.tests_eval import TestEvalConfig, evaluate_tests
from paper_rows import ScriptedPolicies

CLAMP = Problem(
    id="r/clamp", question="def clamp(x, lo, hi):\n    \"\"\"Clamp x into [lo, hi].\"\"\"", entry_point="clamp",
    reference="def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n",
    tests=["assert clamp(5, 0, 10) == 5"], meta={"description": "Clamp x into [lo, hi]."},
)
ANSWERS = [
    "```python\ndef test_clamp():\n    assert clamp(-1, 0, 10) == 0\n    assert clamp(99, 0, 10) == 0\n```",
    "I would test the upper bound.",  # no test: its slot fails
    "```python\ndef test_clamp_high():\n    value = clamp(11, 0, 10)\n    assert value == 10\n```",
]


def scripted(seen):
    """Answer round r (counted by the answers already in the conversation) with ANSWERS[r]."""
    def generate(policies, role, prompts, n=1, sampling=None, **kw):
        assert role == "test" and n == 1
        out = []
        for prompt in prompts:
            text = policies.tokenizer.decode(prompt)
            seen.append(text)
            r = text.count(FOLLOW_UP)
            out.append([type("S", (), {"text": ANSWERS[r], "truncated": False, "finished": True})()])
        return out

    return generate


def test_each_round_sees_the_answers_before_it(monkeypatch):
    seen = []
    monkeypatch.setattr(hf_engine, "generate", scripted(seen))
    from codea1.eval.loading import eval_engine  # the hf engine over the scripted sampler

    engine = eval_engine("hf", ScriptedPolicies())
    answers = sample_rounds(engine, ScriptedPolicies(), [CLAMP], 3, TestEvalConfig().sampling, 0)
    assert answers == [ANSWERS]
    assert [t.count(FOLLOW_UP) for t in seen] == [0, 1, 2]
    assert ANSWERS[0] in seen[1] and ANSWERS[0] in seen[2] and ANSWERS[1] in seen[2]
    assert SYSTEM in seen[0] and "def clamp(x, lo, hi):\n    if x < lo:" in seen[0]  # white-box: the program shown
    assert "def test_clamp():" in seen[0] and "Clamp x into [lo, hi]." in seen[0]
    assert "if x < lo" not in first_request(CLAMP, white_box=False)
    # past context_tokens a round sees only the latest answer (the fork's cut)
    seen.clear()
    sample_rounds(engine, ScriptedPolicies(), [CLAMP], 3, TestEvalConfig().sampling, 0, context_tokens=1)
    assert ANSWERS[0] in seen[1] and ANSWERS[0] not in seen[2] and ANSWERS[1] in seen[2]


def test_a_long_conversation_keeps_only_the_latest_answer():
    messages = conversation(CLAMP, ANSWERS, keep="latest")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == ANSWERS[-1]
    assert len(conversation(CLAMP, ANSWERS)) == 2 + 2 * len(ANSWERS)


def test_each_answer_gives_its_first_test():
    tests = rounds_tests(ANSWERS, "clamp")
    assert tests == ["assert clamp(-1, 0, 10) == 0", "value = clamp(11, 0, 10)\nassert value == 10"]


def test_rounds_are_scored_and_recorded(tmp_path, monkeypatch):
    """By hand: round 1's first test passes (its second, wrong, is cut away as the fork
    cuts a method at its first assert), round 2 holds none (fails), round 3 passes:
    pass@3 = 2/3, the baseline fails, so no mut@3. A stdin problem is skipped by name."""
    from codea1.sandbox import Executor

    stdin = Problem(id="r/echo", question="Print the input.", entry_point="", reference="print(input())\n",
                    tests=[json.dumps({"input": "1\n", "output": "1\n"})], kind="stdin")
    path = tmp_path / "p.jsonl"
    save_problems([CLAMP, stdin], path)
    monkeypatch.setattr(hf_engine, "generate", scripted([]))
    cfg = TestEvalConfig(k=3, protocol="rounds")
    with Executor(workers=2) as ex:
        summary = evaluate_tests("fake", path, tmp_path / "out", cfg, policies=ScriptedPolicies(), executor=ex)
    row = summary["sources"]["all"]
    assert row["functions"] == 1 and row["pass@3"] == pytest.approx(200 / 3)
    assert row["mut@3"] is None and row["mut@3_all"] > 0
    assert [s["id"] for s in summary["skipped"]] == ["r/echo"] and "--protocol answer" in summary["skipped"][0]["reason"]
    sample = json.loads((tmp_path / "out" / "samples.jsonl").read_text().splitlines()[0])
    assert sample["answers"] == ANSWERS and sample["passes"] == [True, True, False]
    assert json.loads((tmp_path / "out" / "eval_config.json").read_text())["protocol"] == "rounds"
    with pytest.raises(ValueError, match="--protocol"):
        TestEvalConfig(protocol="chat")
