"""The reward formulas of Code-A1, as pure functions of counts and outcomes.

Kept apart from the sandbox plumbing so that each branch of the spec
(../shared/CODE_A1_SPEC.md, "Rewards") can be checked on hand-computed numbers.

Vocabulary for one (candidate code, test suite) pair:
- *kept*: the tests run on the candidate, each in its corrected form: the reference ran
  them and they do not repeat an earlier call of the suite (a test whose written
  expectation was wrong is kept too);
- *valid*: the reference counts every kept test (`judge.strict_validity` leaves out the
  wrong-expectation ones);
- *invalid*: parse failures + reference exceptions + wrong expectations + duplicates
  (so a wrong expectation counts once here and, by default, once in *valid*).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "SuiteScores",
    "code_reward",
    "nonprintable_share",
    "score_suite",
    "test_reward",
    "valid_ratio",
]


@dataclass(frozen=True)
class SuiteScores:
    """Every intermediate quantity of one suite's scoring, for logs and debugging."""

    valid_ratio: float
    gen_pass_rate: float
    gen_fail_rate: float
    mb_pass_rate: float | None  # None when the problem has no Mistake Book tests
    pass_score: float
    attack: float


def valid_ratio(valid: int, invalid: int, suite_size: int = 8) -> float:
    """`clip(min(valid / G, 1 - invalid / G), 0, 1)`."""
    if suite_size <= 0:
        raise ValueError(f"suite_size (G) must be positive, got {suite_size}")
    return min(1.0, max(0.0, min(valid / suite_size, 1.0 - invalid / suite_size)))


def score_suite(
    valid: int,
    invalid: int,
    kept_passed: Sequence[bool],
    mb_passed: Sequence[bool],
    suite_size: int = 8,
) -> SuiteScores:
    """Score one suite against one (valid) candidate.

    `kept_passed`: for each kept test of the suite, in suite order, whether the candidate
    passed it. `mb_passed`: the same for the problem's Mistake Book tests (empty when the
    book has none for this problem).
    """
    ratio = valid_ratio(valid, invalid, suite_size)
    kept = len(kept_passed)
    gen_pass = sum(kept_passed) / kept if kept else 0.0
    gen_fail = sum(1 for ok in kept_passed[:suite_size] if not ok) / suite_size
    mb_pass = sum(mb_passed) / len(mb_passed) if mb_passed else None

    if kept and mb_pass is not None:
        pass_score = (mb_pass + gen_pass) / 2
        attack = (gen_fail - (1.0 - mb_pass) + 1.0) / 2
    elif mb_pass is not None:
        pass_score, attack = mb_pass, 0.0
    elif kept:
        pass_score, attack = gen_pass, gen_fail
    else:
        pass_score, attack = 0.0, 0.0
    return SuiteScores(ratio, gen_pass, gen_fail, mb_pass, pass_score, attack)


def code_reward(code_valid: bool, pass_scores: Sequence[float]) -> float:
    """Mean `pass` over the candidate's suites; 0 for an invalid candidate."""
    if not code_valid or not pass_scores:
        return 0.0
    return sum(pass_scores) / len(pass_scores)


def test_reward(code_valid: bool, ratio: float, attack: float, alpha: float = 0.5, nonprintable: float = 0.0) -> float:
    """`alpha * valid_ratio + (1 - alpha) * attack` (0 against an invalid candidate), minus the non-printable share."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    base = alpha * ratio + (1.0 - alpha) * attack if code_valid else 0.0
    return base - nonprintable


def nonprintable_share(text: str, unicode_printable: bool = False) -> float:
    """Share of characters of `text` that are not printable.

    The reference's rule: a character is printable when it is in Python's ASCII
    `string.printable` (so every non-ASCII character counts). With `unicode_printable`
    (`judge.unicode_printable`), the project's alternative: what `str.isprintable` accepts,
    plus line breaks and tabs. It penalises test completions that drift into control
    characters or binary noise.
    """
    if not text:
        return 0.0
    if unicode_printable:
        if text.replace("\n", "").replace("\r", "").replace("\t", "").isprintable():
            return 0.0  # the usual case, without a Python-level loop
        bad = sum(1 for ch in text if not ch.isprintable() and ch not in "\n\r\t")
        return bad / len(text)
    # (what is left once every printable character is deleted, in C)
    return len(text.translate(_DELETE_PRINTABLE)) / len(text)


_DELETE_PRINTABLE = {ord(ch): None for ch in string.printable}
