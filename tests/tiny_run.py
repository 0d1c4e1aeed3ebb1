"""A tiny random-weight model, a few problems and scripted rollouts, for training-loop tests.

A random model writes junk, so every reward would be 0 and nothing would train.
`make_scripted(real, problems)` therefore wraps the real `codea1.engines.hf_engine.generate`: it
still samples from the tiny model (consuming the same random stream), then replaces some
completions, chosen with that stream, by scripted ones: the reference solution, a wrong
solution, golden asserts, asserts with wrong expectations, and junk (nothing, no code
block, binary noise, endless text). The judge, rewards, Mistake Book, GRPO update and
checkpoints all run for real on those completions and their token ids.

Used in-process by tests/test_train_loop.py (through a monkeypatch) and in forked
children by tests/crash_harness.py, and in spawned ranks by tests/test_distributed.py.
"""

from __future__ import annotations

from pathlib import Path

PROBLEMS = [
    ("T/add", "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n", "add",
     "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n",
     ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(5, 5) == 10"]),
    ("T/even", "def is_even(n):\n    \"\"\"Whether n is even.\"\"\"\n", "is_even",
     "def is_even(n):\n    return n % 2 == 0\n", "def is_even(n):\n    return n == 0\n",
     ["assert is_even(4) == True", "assert is_even(3) == False", "assert is_even(0) == True"]),
    ("T/max", "def largest(xs):\n    \"\"\"The largest item of a non-empty list.\"\"\"\n", "largest",
     "def largest(xs):\n    return max(xs)\n", "def largest(xs):\n    return xs[0]\n",
     ["assert largest([1, 3, 2]) == 3", "assert largest([5]) == 5"]),
    ("T/vowels", "def vowels(s):\n    \"\"\"Count the vowels aeiou in s.\"\"\"\n", "vowels",
     "def vowels(s):\n    return sum(c in 'aeiou' for c in s)\n", "def vowels(s):\n    return s.count('a')\n",
     ["assert vowels('banana') == 3", "assert vowels('xyz') == 0", "assert vowels('io') == 2"]),
    # a question far longer than the tiny model's context: dropped from the data, counted
    ("T/long", "def double(x):\n    \"\"\"Return twice x. " + "Really, twice. " * 400 + "\"\"\"\n", "double",
     "def double(x):\n    return 2 * x\n", "def double(x):\n    return x + 2\n",
     ["assert double(3) == 6", "assert double(0) == 0"]),
]
HELDOUT = [
    ("H/sub", "def sub(a, b):\n    \"\"\"Return a minus b.\"\"\"\n", "sub",
     "def sub(a, b):\n    return a - b\n", "def sub(a, b):\n    return b - a\n",
     ["assert sub(3, 1) == 2", "assert sub(1, 1) == 0"]),
]
WRONG = {pid: wrong for pid, _q, _e, _r, wrong, _t in PROBLEMS + HELDOUT}
CODE_JUNK = ["", "Sure! The answer needs no code at all.", "\x00\x01\x02\x1b[31m binary \x7f\x03 junk",
             "def " + "x" * 3000]
TEST_JUNK = ["", "I would test it by hand.", "```python\n\x00\x01 assert (\n```", "assert " * 800]


def problems(rows, split):
    from codea1.data import Problem

    return [Problem(id=pid, question=q, entry_point=e, reference=r, tests=t, source="test",
                    meta={"split": split}) for pid, q, e, r, _w, t in rows]


def all_problems():
    """Every problem, training and held-out (what `make_scripted` recognises)."""
    return problems(PROBLEMS + HELDOUT, "x")


def tiny_paths(root: Path) -> dict:
    """Where `make_tiny(root)` puts the model and the problem files."""
    root = Path(root)
    return {"model": root / "model", "train": root / "train.jsonl", "heldout": root / "heldout.jsonl"}


def make_tiny(root: Path) -> dict:
    """The tiny model and the problem files under `root` (paths, and every problem)."""
    from codea1.data import save_problems
    from tiny_model import tiny_test_model

    paths = tiny_paths(root)
    tiny_test_model(paths["model"])
    save_problems(problems(PROBLEMS, "train"), paths["train"])
    save_problems(problems(HELDOUT, "heldout"), paths["heldout"])
    return {**paths, "problems": all_problems()}


def make_scripted(real, all_problems, counts: dict | None = None):
    """`real` (codea1.engines.hf_engine.generate) with some completions replaced by scripted ones,
    chosen with each prompt's own random stream (the same on any rank, in any batch)."""
    import torch

    by_question = [(p.question.strip(), p) for p in all_problems]
    counts = counts if counts is not None else {}
    counts.setdefault("junk", 0)

    def problem_of(prompt, tok):
        # the loop hands the rollout engine token ids; other callers chat messages
        text = tok.decode(prompt) if isinstance(prompt[0], int) else prompt[-1]["content"]
        for q, p in by_question:
            if q[:200] in text:
                return p
        raise AssertionError("scripted generate: unknown problem")

    def fake(policies, role, prompts, n=1, sampling=None, *, generator=None, seeds=None, stats=None,
             should_stop=None):
        out = real(policies, role, prompts, n=n, sampling=sampling, generator=generator, seeds=seeds,
                   stats=stats, should_stop=should_stop)
        tok = policies.tokenizer
        eos = tok.convert_tokens_to_ids("<|im_end|>")
        for i, (prompt, group) in enumerate(zip(prompts, out)):
            p = problem_of(prompt, tok)
            if seeds is not None:  # the prompt's own stream, as the sampler's (any rank, any batch)
                generator = torch.Generator().manual_seed(seeds[i] + 1)
            for s in group:
                pick = int(torch.randint(0, 8, (1,), generator=generator))
                if role == "code":
                    options = {1: f"```python\n{p.reference}```", 2: f"```python\n{WRONG[p.id]}```",
                               3: f"```python\n{p.reference}```", 4: f"```python\n{WRONG[p.id]}```",
                               5: CODE_JUNK[pick % len(CODE_JUNK)], 6: CODE_JUNK[(pick + 2) % 4]}
                else:
                    bad = [t.rsplit("==", 1)[0] + "== 12345" for t in p.tests]
                    options = {1: "```python\n" + "\n".join(p.tests) + "\n```",
                               2: "```python\n" + "\n".join(p.tests[:1] + bad[1:]) + "\n```",
                               3: "```python\n" + "\n".join(bad) + "\n```",
                               4: "```python\n" + "\n".join(p.tests[::-1]) + "\n```",
                               5: TEST_JUNK[pick % len(TEST_JUNK)], 6: TEST_JUNK[(pick + 2) % 4]}
                if pick not in options:
                    continue  # keep the tiny model's own junk
                text = options[pick]
                ids = tok(text, add_special_tokens=False)["input_ids"][:400]
                endless = len(text) > 2000
                if stats is not None:  # count the scripted text as the sampler counts its own
                    stats.empty_completions += int(not text.strip()) - int(not s.text.strip())
                    stats.completions_truncated += int(endless) - int(s.truncated)
                s.text = text if not endless else tok.decode(ids)
                s.completion_ids = ids if endless else ids + [eos]
                s.truncated, s.finished = endless, not endless
                counts["junk"] += pick >= 5
        return out

    return fake


def tiny_overrides(tiny: dict, mode: str = "a1", steps: int = 3) -> list[str]:
    """--set overrides of the cpu-demo preset for a run of seconds on the tiny model."""
    return [
        f"model.name={tiny['model']}", "model.dtype=float32", "model.lora_r=4", f"mode={mode}",
        f"steps={steps}", f"data.train={tiny['train']}", f"data.heldout={tiny['heldout']}",
        "data.problems_per_step=2", "rollout.n_code=4", "rollout.n_test=2",
        "rollout.code.max_new_tokens=6", "rollout.test.max_new_tokens=6",
        "validation.every=2", "validation.problems=1", "validation.sampling.max_new_tokens=6",
        "grpo.lr=1e-3", "grpo.warmup_steps=1", "grpo.micro_batch_tokens=512",
        "judge.workers=2", "checkpoint.every=1", "checkpoint.keep=10",
        "logging.progress=none", "logging.tensorboard=true", "threads=1"]
