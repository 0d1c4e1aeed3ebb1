"""`eval tests --protocol rounds`: the test model asked as the Code-A1 authors asked it.

Their UnLeakedTestBench fork (the harness behind the paper's pass@5 / mut@5 / Mul) does
not ask for k tests at once: it holds one conversation per function of k rounds, each
asking for one pytest test method (``def test_<name>():``) and the next rounds for
another one, different from those before, with the earlier answers in the conversation.
Each answer gives one test: its first (its test method cut at its first assert, or a bare
assert), read by `codea1.eval.answer_tests`; an answer without one leaves its slot empty,
a failing test.

The wording is ours, in the fork's structure (program under test, description, the
method's first line). A conversation longer than `context_tokens` is cut as the fork cuts
it, to its latest answer: here the system message, the first request, the latest answer
and its follow-up (the fork keeps the system message, the latest answer and the latest
request, in that order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from codea1.eval.answer_tests import answer_tests
from codea1.rollout import derive_seed, encode_prompts

if TYPE_CHECKING:
    from codea1.configs import SamplingConfig
    from codea1.data import Problem

__all__ = ["PROTOCOLS", "SYSTEM", "conversation", "first_request", "rounds_tests", "sample_rounds"]

PROTOCOLS = ("answer", "rounds")  # one answer with k tests (codea1's prompt) | k rounds of one test
SYSTEM = "You are an expert Python programmer who writes pytest unit tests."
FOLLOW_UP = ("Write another test method for the function under test. It must differ from the test "
             "methods you wrote before and cover other statements and branches.")
CONTEXT_TOKENS = 16384  # the fork's longest conversation (its max_context_length)


def _description(problem: Problem) -> str:
    meta = problem.meta if isinstance(problem.meta, Mapping) else {}
    text = meta.get("description") or meta.get("clean_description") or problem.question
    return str(text).strip()


def first_request(problem: Problem, white_box: bool = True) -> str:
    """The first round's request: one test method of the problem's function."""
    fn = problem.entry_point
    parts = [f"Write one test method for the function `{fn}` described below. Test a single input."]
    if white_box:
        parts.append(f"Program under test:\n----\n{problem.reference.strip()}\n----")
    parts.append(f"Description of `{fn}`:\n----\n{_description(problem)}\n----")
    parts.append(f"Start your test method with:\ndef test_{fn}():")
    return "\n\n".join(parts)


def conversation(problem: Problem, answers: Sequence[str], white_box: bool = True,
                 keep: str = "all") -> list[dict[str, str]]:
    """The chat messages of the next round, after ``answers``; ``keep="latest"`` leaves out
    every answer but the last (the fork's cut of a conversation that grew too long)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first_request(problem, white_box)}]
    kept = answers if keep == "all" else answers[-1:]
    for answer in kept:
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": FOLLOW_UP}]
    return messages


def sample_rounds(engine, policies, problems: Sequence[Problem], k: int, sampling: SamplingConfig, seed: int,
                  white_box: bool = True, context_tokens: int = CONTEXT_TOKENS) -> list[list[str]]:
    """k answers per problem, one round at a time over all ``problems`` (a batch per
    round); each round's stream seeded from (seed, round, problem id)."""
    answers: list[list[str]] = [[] for _ in problems]
    for r in range(k):
        prompts = []
        for p, said in zip(problems, answers):
            ids = encode_prompts(policies.tokenizer, [conversation(p, said, white_box)])[0]
            if len(ids) > context_tokens:
                ids = encode_prompts(policies.tokenizer, [conversation(p, said, white_box, keep="latest")])[0]
            prompts.append(ids)
        seeds = [derive_seed(seed, f"eval/test/round{r}", p.id) for p in problems]
        for said, group in zip(answers, engine.generate("test", prompts, n=1, sampling=sampling, seeds=seeds)):
            said.append(group[0].text)
    return answers


def rounds_tests(answers: Sequence[str], entry_point: str) -> list[str]:
    """One test per answer, its first; answers without a test give none (their slots fail)."""
    tests = []
    for answer in answers:
        tests += answer_tests(answer, entry_point, 1)
    return tests

