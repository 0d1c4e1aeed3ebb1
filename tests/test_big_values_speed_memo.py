"""The judge's parent on big values (`ValueMemo`): a value is known by comparing it with
the values seen before, never by a digest or a text a run sent; each distinct value is
checked, decoded and written out once; a value compared with an equal encoding is decoded
a second time only where a part of it can be unequal to itself."""

from __future__ import annotations

import collections

import pytest

from codea1.judge import JudgeConfig
from codea1.judge import judge as judge_module
from codea1.judge import parse as parse_module
from codea1.judge.judge import _CROWDED, ValueMemo, _shape
from codea1.sandbox import encode
from codea1.sandbox import decode as decode_module
from codea1.sandbox import values as values_module
from codea1.sandbox.decode import decode_reflexive, python_equal

BIG = 5000


def _big(change_at: int | None = None, to: int = -1) -> list:
    """The encoding of `list(range(BIG))`, with the item at `change_at` made `to`."""
    items = list(range(BIG))
    if change_at is not None:
        items[change_at] = to
    return encode(items)


def test_values_that_differ_only_where_the_shape_does_not_look_have_their_own_keys():
    """`_shape` reads a few nodes; two values that differ elsewhere share it, and only the
    comparison of the whole values tells them apart: never the same key, never equal."""
    reference, wrong = _big(), _big(change_at=BIG // 3)
    assert _shape(reference, 0) == _shape(wrong, 0)
    memo = ValueMemo(JudgeConfig())
    assert memo.key(reference) != memo.key(wrong)
    assert memo.equal(wrong, reference) is False and memo.equal(_big(), reference) is True
    assert memo.key(_big()) == memo.key(reference) and memo.key(_big(BIG // 3)) == memo.key(wrong)


def test_numbers_and_flags_of_different_types_are_different_values():
    """Python's `==` says `True == 1 == 1.0`; encodings of such values still differ (their
    tags do), and so do their keys and verdicts."""
    memo = ValueMemo(JudgeConfig(exact_types=True))
    values = [encode(1), encode(True), encode(1.0), encode([1]), encode((1,)), encode([True]), encode({1: 1})]
    assert len({memo.key(v) for v in values}) == len(values)
    assert [memo.equal(v, encode(1)) for v in values] == [True] + [False] * (len(values) - 1)


def test_a_shape_shared_by_many_values_falls_back_to_their_texts_with_the_same_keys():
    """Past `_CROWDED` distinct values of one shape, new ones are told apart by their JSON
    texts: a copy of a value seen before the switch still gets that value's key."""
    memo = ValueMemo(JudgeConfig())
    values = [_big(change_at=7, to=-k) for k in range(1, 3 * _CROWDED)]
    keys = [memo.key(v) for v in values]
    assert len(set(keys)) == len(values)
    copies = [_big(change_at=7, to=-k) for k in range(1, 3 * _CROWDED)]
    assert [memo.key(v) for v in reversed(copies)] == keys[::-1]
    assert memo.equal(copies[0], values[0]) and not memo.equal(copies[0], values[1])


def test_equal_values_are_known_without_writing_their_json(monkeypatch):
    """Each copy of a big value that comes back is matched with the first by comparing the
    data (the JSON text of each copy took 0.1-0.2 s for 5 MB)."""
    texts = collections.Counter()
    real = judge_module.value_key
    monkeypatch.setattr(judge_module, "value_key", lambda v: texts.update(["text"]) or real(v))
    memo = ValueMemo(JudgeConfig())
    copies = [_big() for _ in range(5)]
    assert len({memo.key(v) for v in copies}) == 1
    assert all(memo.equal(a, b) for a in copies for b in copies)
    assert texts["text"] == 0


def test_each_distinct_value_is_checked_once(monkeypatch):
    """Decoding, writing out for the corrected test and for a reason checked the value
    again each time; now once per distinct value (the worker checked it before)."""
    checks = collections.Counter()
    real = values_module.check_value

    def counting(value, *args):
        if len(value) == 2 and value[0] == "list" and len(value[1]) == BIG:
            checks["big"] += 1
        return real(value, *args)

    for module in (values_module, decode_module, judge_module):
        monkeypatch.setattr(module, "check_value", counting, raising=False)
    memo = ValueMemo(JudgeConfig())
    reference, copy = _big(), _big()
    assert memo.corrected("f()", reference) == parse_module.corrected_test("f()", copy)
    assert memo.shown(copy) == parse_module.shown_value(reference)
    assert memo.equal(copy, reference) and memo.expectation(reference, copy)
    checks.clear()
    fresh = ValueMemo(JudgeConfig())
    fresh.corrected("f()", reference)
    fresh.shown(reference)
    fresh.equal(copy, reference)
    fresh.wrong(copy)
    assert checks["big"] == 1


NAN = ["float", "nan"]


@pytest.mark.parametrize("value, reflexive", [
    (encode([1, "a", (2.5, None), {3: b"x"}]), True),
    (encode({1, 2.0, frozenset({3})}), True),
    (["list", [NAN]], False),
    (["dict", [[["int", "1"], NAN]]], False),
    (["complex", "nan", "0x0.0p+0"], False),
    (["list", [["unsupported", "generator"]]], False),
    (["decimal", "NaN"], False),
    (["decimal", "sNaN"], False),
    (["decimal", "1.5"], True),
    (["enum", "__main__.E", "A", ["int", "1"], "c1", ["float", "nan"]], False),
])
def test_decode_reflexive_says_whether_a_second_decoding_is_equal(value, reflexive):
    decoded, same = decode_reflexive(value)
    assert same is reflexive
    assert python_equal(value, value) is reflexive  # (what the memo answers for two equal encodings)
    memo = ValueMemo(JudgeConfig())
    assert memo.equal(value, [*value]) is reflexive and memo.equal(value, value) is reflexive


def test_a_reason_shows_the_corrected_tests_text_only_where_no_instance_is_built():
    """The corrected test builds a program's instance (`object.__new__`); a reason shows it
    as `TypeName(attribute=value)`: that text is written out on its own."""
    instance = ["object", "__main__.P", [["x", ["int", "1"]]]]
    plain = encode(["__new__(", 1])  # (a str that looks like a built instance: written out again, alike)
    memo = ValueMemo(JudgeConfig())
    for value in (instance, plain, ["digest", "ab" * 32, 10]):
        assert memo.corrected("f()", value) == parse_module.corrected_test("f()", value)
        assert memo.shown(value) == parse_module.shown_value(value)
        assert memo.wrong(value) == parse_module.wrong_value(value)
    assert memo.shown(instance) == "P(x=1)" and "object.__new__" in memo.corrected("f()", instance)
