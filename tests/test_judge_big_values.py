"""Big values in the judge's parent: each distinct value is decoded and written out once per
problem (`ValueMemo`), with the judge's verdicts, and a reason shows a value shortened while
the corrected test keeps it whole."""

from __future__ import annotations

import collections

import pytest

from codea1.data import Problem
from codea1.judge import Judge, JudgeConfig, ProblemRollout
from codea1.judge import judge as judge_module
from codea1.judge import parse as parse_module
from codea1.judge import program_scoring
from codea1.judge.judge import ValueMemo, _exact_expectation_matches
from codea1.judge.parse import SHOWN_CHARS, shortened
from codea1.sandbox import Executor, Limits, encode, values_equal
from codea1.sandbox import decode as decode_module
from codea1.sandbox.decode import python_equal

LIMITS = Limits(timeout_s=20.0, call_timeout_s=10.0)
MODES = {"one program": {}, "isolate_calls": {"isolate_calls": True}}


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2, limits=LIMITS) as ex:
        yield ex


def judge_of(executor, **switches) -> Judge:
    return Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, **switches))


REP = Problem(id="t/rep", question="", entry_point="rep", reference="def rep(s, n):\n    return s * n\n")


@pytest.mark.parametrize("mode", MODES)
def test_a_reason_shows_a_big_value_shortened_and_the_corrected_test_keeps_it_whole(executor, mode):
    judge = judge_of(executor, **MODES[mode])
    codes = ["def rep(s, n):\n    return s * n\n", "def rep(s, n):\n    return s * (n - 1) + 'ba'\n"]
    suite = "assert rep('ab', 50000) == 'abab'\nassert rep('a', 2) == 'aa'"
    (r,) = judge.judge_step([ProblemRollout(REP, codes, [[suite]] * 2)])
    whole = repr("ab" * 50000)
    for i in range(2):
        big = r.suites[i][0].tests[0]
        assert big.kind == "wrong expectation"
        assert big.normalized == f"assert rep('ab', 50000) == {whole}"  # (replayed from a Mistake Book: exact)
        assert big.reason == f"expected 'abab', the reference returns {whole[:SHOWN_CHARS]}... (100,002 characters)"
    assert r.suites[0][0].tests[0].passed is True
    failed = r.suites[1][0].tests[0]
    assert failed.passed is False
    assert failed.failure == f"wrong value: {repr('ab' * 49999 + 'ba')[:SHOWN_CHARS]}... (100,002 characters)"
    assert r.mistake_update().failed[f"assert rep('ab', 50000) == {whole}"] == 1


def test_a_long_written_expectation_is_shortened_in_its_reason(executor):
    long = "'" + "x" * 5000 + "'"
    (r,) = judge_of(executor).judge_step([ProblemRollout(REP, ["def rep(s, n):\n    return s * n\n"],
                                                         [[f"assert rep('a', 3) == {long}"]])])
    assert r.suites[0][0].tests[0].reason == f"expected {long[:SHOWN_CHARS]}... (5,002 characters), the reference returns 'aaa'"


def test_shortened_keeps_short_texts_and_cuts_long_ones_with_their_length():
    assert shortened("abc") == "abc"
    assert shortened("x" * SHOWN_CHARS) == "x" * SHOWN_CHARS
    assert shortened("x" * 1234, 10) == "xxxxxxxxxx... (1,234 characters)"


SEQ = Problem(id="t/seq", question="", entry_point="seq", reference="def seq(n):\n    return list(range(n))\n")
N = 3000


def _count_big(monkeypatch, module, name: str, counts: collections.Counter) -> None:
    """Count the calls of `module.name` on a list of N items (the reference's value)."""
    real = getattr(module, name, None)
    if real is None:
        return

    def counting(value, *args, **kwargs):
        if isinstance(value, list) and len(value) == 2 and value[0] == "list" and len(value[1]) == N:
            counts[name] += 1
        return real(value, *args, **kwargs)

    monkeypatch.setattr(module, name, counting)


@pytest.mark.parametrize("mode", MODES)
def test_each_distinct_value_is_decoded_and_written_out_once_per_problem(executor, monkeypatch, mode):
    """Three right candidates (three runs) x two suites that each test the big call: the
    reference's value comes back six times in one program per candidate, and each right
    candidate returns it twice; it used to be decoded for every comparison (21 times here,
    5 with isolate_calls) and written out for every test (9 times)."""
    counts: collections.Counter = collections.Counter()
    for module in (decode_module, judge_module):
        _count_big(monkeypatch, module, "decode", counts)
    for module in (parse_module, judge_module, program_scoring):
        _count_big(monkeypatch, module, "to_source", counts)
    codes = [f"def seq(n):\n    return list(range(n))  # right, {k}\n" for k in range(3)]
    suites = [f"assert seq({N}) == []\nassert seq(2) == [0, 1]", f"assert seq({N}) == list(range({N}))"]
    (r,) = judge_of(executor, **MODES[mode]).judge_step([ProblemRollout(SEQ, codes, [suites] * 3)])
    assert r.code_rewards == [1.0, 1.0, 1.0]
    assert [[t.kind for s in row for t in s.tests] for row in r.suites] == [["wrong expectation", None, None]] * 3
    # decoded once (no second decoding to compare it with an equal value: nothing in it can
    # be unequal to itself, `decode_reflexive`); written out once, for the corrected test,
    # whose text the one reason shows too
    assert counts == {"decode": 1, "to_source": 1}


NAN = Problem(id="t/nan", question="", entry_point="f", reference="def f():\n    return [float('nan')]\n")


@pytest.mark.parametrize("mode", MODES)
def test_equal_encodings_are_still_compared_as_python_compares_two_values(executor, mode):
    """`[nan] == [nan]` is false for two values (true only for one object with itself): a
    right candidate of a function that returns NaN fails, as in the reference."""
    (r,) = judge_of(executor, **MODES[mode]).judge_step(
        [ProblemRollout(NAN, ["def f():\n    return [float('nan')]\n"], [["assert f() == [float('nan')]"]])])
    (test,) = r.suites[0][0].tests
    assert test.kind == "wrong expectation" and test.passed is False


def _values() -> list:
    nan = ["float", "nan"]
    many = encode(list(range(50)))
    return [
        encode(1), encode(1.0), encode(True), encode(2), encode([1, 2]), encode((1, 2)), encode([1.0, 2]),
        ["list", [nan]], ["list", [nan]], nan, ["tuple", [nan]], encode({1.5, 2}), encode({2, 1.5}),
        encode(collections.Counter("aab")), encode({"a": 2, "b": 1}), encode({"b": 1, "a": 2}),
        ["unsupported", "generator"], ["list", [["unsupported", "generator"]]],
        ["list", [["int", "x"]]],  # malformed
        ["dict", [[["list", []], ["int", "1"]]]],  # an unhashable key: decoding raises TypeError
        ["decimal", "NaN"], ["decimal", "sNaN"], ["decimal", "1.0"], ["decimal", "1"],
        ["digest", "ab" * 32, 10], ["digest", "ab" * 32, 10], encode(1.0000001), encode([1, 2.0000001]),
        many, encode(list(range(50))), encode("x" * 300),
    ]


CONFIGS = {"reference": {}, "tolerance": {"float_rtol": 1e-3}, "exact": {"exact_types": True},
           "exact, tolerance": {"exact_types": True, "float_atol": 1e-3}}


@pytest.mark.parametrize("config", CONFIGS)
def test_the_memo_decides_every_pair_as_the_judges_rules_do(config):
    cfg = JudgeConfig(**CONFIGS[config])
    memo = ValueMemo(cfg)
    tol = (cfg.float_rtol, cfg.float_atol)
    values = _values()
    for _ in range(2):  # (the second time from the memo)
        for a in values:
            for b in values:
                if cfg.exact_types:
                    equal, expectation = values_equal(a, b, *tol), _exact_expectation_matches(a, b, tol)
                else:
                    equal = expectation = python_equal(a, b, *tol)
                assert memo.equal(a, b) is equal, (a, b)
                assert memo.expectation(a, b) is expectation, (a, b)
    if not cfg.exact_types and not (cfg.float_rtol or cfg.float_atol):
        nan_list = values[7]
        assert not memo.equal(nan_list, nan_list)  # (one object, compared as two decodings)


def test_the_memo_writes_out_texts_as_the_parser_does_once_per_value():
    memo = ValueMemo(JudgeConfig())
    value, copy = encode(list(range(100))), encode(list(range(100)))
    first = memo.corrected("f(100)", value)
    assert first == parse_module.corrected_test("f(100)", value)
    assert memo.corrected("f(100)", copy) is first  # (one text for every test that repeats it)
    assert memo.corrected("g(100)", copy) == parse_module.corrected_test("g(100)", copy)
    assert memo.shown(copy) == parse_module.shown_value(value) and len(memo.shown(copy)) < len(first) - 100
    assert memo.wrong(["unsupported", "generator"]) == "wrong value (a generator that equals nothing here)"
    assert memo.key(value) == memo.key(copy) != memo.key(encode(list(range(101))))
    assert memo.key(encode(1)) != memo.key(encode(True)) != memo.key(encode(1.0))
