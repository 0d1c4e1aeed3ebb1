"""A stdin problem set trains end to end on the tiny model, in every mode.

As tests/test_train_loop.py does for functions: the tiny model's completions are partly
replaced by scripted ones (the reference program, a wrong program, junk; input/output
tests right, with wrong outputs, as a JSON list, junk), so the stdin judge, the rewards,
the Mistake Book, the GRPO update and the checkpoints all run for real.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
import torch
from tiny_run import make_tiny, tiny_overrides

from codea1.data import Problem, save_problems
from codea1.data.stdin_io import io_test
from codea1.train.config import load_config
from codea1.train.loop import train
from codea1.train.metrics import read_metrics

torch.set_num_threads(1)

#: (id, statement, reference, wrong program, golden (input, output) pairs)
STDIN = [
    ("S/sum", "Read two integers a and b on one line. Print a + b.",
     "a, b = map(int, input().split())\nprint(a + b)\n", "a, b = map(int, input().split())\nprint(a - b)\n",
     [("1 2\n", "3\n"), ("5 5\n", "10\n"), ("-1 1\n", "0\n")]),
    ("S/max", "Read n and then n integers on one line. Print the largest.",
     "input()\nprint(max(map(int, input().split())))\n", "input()\nprint(input().split()[0])\n",
     [("3\n1 3 2\n", "3\n"), ("1\n5\n", "5\n")]),
    ("S/vowels", "Read one line. Print how many of its characters are in aeiou.",
     "print(sum(c in 'aeiou' for c in input()))\n", "print(input().count('a'))\n",
     [("banana\n", "3\n"), ("xyz\n", "0\n"), ("io\n", "2\n")]),
]
HELDOUT = [
    ("H/sub", "Read two integers a and b on one line. Print a - b.",
     "a, b = map(int, input().split())\nprint(a - b)\n", "a, b = map(int, input().split())\nprint(b - a)\n",
     [("3 1\n", "2\n"), ("1 1\n", "0\n")]),
]
WRONG = {pid: wrong for pid, _q, _r, wrong, _t in STDIN + HELDOUT}
PAIRS = {pid: tests for pid, _q, _r, _w, tests in STDIN + HELDOUT}


def stdin_problems(rows, split):
    return [Problem(id=pid, question=q, entry_point="", reference=r, tests=[io_test(i, o) for i, o in t],
                    source="stdin-test", meta={"split": split, "time_limit_s": 2.0}, kind="stdin")
            for pid, q, r, _w, t in rows]


def _fenced(pairs) -> str:
    return "\n".join(f"```input\n{i}```\n```output\n{o}```" for i, o in pairs)


def make_scripted_stdin(real, problems):
    """`real` (codea1.engines.hf_engine.generate) with some completions replaced by scripted stdin ones."""
    by_question = [(p.question.strip(), p) for p in problems]

    def problem_of(prompt, tok):
        text = tok.decode(prompt) if isinstance(prompt[0], int) else prompt[-1]["content"]
        return next(p for q, p in by_question if q in text)

    def fake(policies, role, prompts, n=1, sampling=None, *, generator=None, seeds=None, stats=None,
             should_stop=None):
        out = real(policies, role, prompts, n=n, sampling=sampling, generator=generator, seeds=seeds,
                   stats=stats, should_stop=should_stop)
        tok = policies.tokenizer
        eos = tok.convert_tokens_to_ids("<|im_end|>")
        for i, (prompt, group) in enumerate(zip(prompts, out)):
            p = problem_of(prompt, tok)
            if seeds is not None:
                generator = torch.Generator().manual_seed(seeds[i] + 1)
            for s in group:
                pick = int(torch.randint(0, 7, (1,), generator=generator))
                pairs = PAIRS[p.id]
                if role == "code":
                    options = {1: f"```python\n{p.reference}```", 2: f"```python\n{WRONG[p.id]}```",
                               3: f"```python\n{WRONG[p.id]}```", 4: "I cannot write programs."}
                else:
                    wrong = [(i, "12345\n") for i, _ in pairs]
                    options = {1: _fenced(pairs), 2: _fenced(pairs[:1] + wrong[1:]),
                               3: "```json\n" + json.dumps([{"input": i, "output": o} for i, o in pairs]) + "\n```",
                               4: "Input:\n```\n" + pairs[0][0] + "```\nOutput:\n```\n" + pairs[0][1] + "```",
                               5: "```input\n1 2\n"}
                if pick not in options:
                    continue  # the tiny model's own junk
                ids = tok(options[pick], add_special_tokens=False)["input_ids"]
                s.text, s.completion_ids, s.truncated, s.finished = options[pick], ids + [eos], False, True
        return out

    return fake


@pytest.fixture(scope="module")
def tiny_stdin(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-stdin")
    made = make_tiny(root)
    save_problems(stdin_problems(STDIN, "train"), made["train"])
    save_problems(stdin_problems(HELDOUT, "heldout"), made["heldout"])
    return made


@pytest.fixture
def scripted(monkeypatch, tiny_stdin):
    import codea1.engines.hf_engine as hf_engine

    monkeypatch.setattr(hf_engine, "generate",
                        make_scripted_stdin(hf_engine.generate, stdin_problems(STDIN + HELDOUT, "x")))


@pytest.mark.parametrize("mode", ["a1", "golden", "selfplay"])
def test_a_stdin_problem_set_trains_end_to_end(tmp_path, tiny_stdin, scripted, mode):
    """Rewards carry a signal (right and wrong programs differ), tests enter the Mistake
    Book in their canonical form, both roles' weights move. Tried: judging stdin problems
    with the function-level judge (the dispatch on `Problem.kind` removed): no code sample
    trained (`update/code/sequences` 0) and the test failed."""
    cfg = load_config(preset="cpu-demo", overrides=[*tiny_overrides(tiny_stdin, mode, 2), "validation.every=2",
                                                    "rollout.code.max_new_tokens=8", "rollout.test.max_new_tokens=8"])
    result = train(cfg, tmp_path / "run")
    assert result.step == 2 and not result.stopped
    rows = [r for r in read_metrics(tmp_path / "run") if r["step"] > 0]
    trained = {"a1": ["code", "test"], "golden": ["code"], "selfplay": ["shared"]}[mode]
    for key in trained:
        assert sum(r.get(f"update/{key}/sequences", 0) for r in rows) > 0, key
    assert any(r["code/reward_std"] > 0 for r in rows)         # right and wrong programs differ
    samples = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    rewards = [s["reward"] for s in samples if s["role"] == "code"]
    assert max(rewards) == 1.0 and min(rewards) == 0.0           # the reference scores 1, junk 0
    assert "val/code_pass_rate" in rows[-1]
    if mode != "golden":
        with sqlite3.connect(tmp_path / "run" / "mistakes.sqlite") as db:
            stored = [row[0] for row in db.execute("SELECT test FROM tests")]
        assert stored, "wrong programs failed valid tests: the book has them"
        for text in stored:
            assert set(json.loads(text)) == {"input", "output"}
        assert any(r["judge/code_valid_rate"] < 1.0 for r in rows)
