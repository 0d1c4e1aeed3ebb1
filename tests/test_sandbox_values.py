"""Plain-data encoding, trusted comparison and literal rendering (no sandbox needed)."""

from __future__ import annotations

import math

import pytest

from codea1.sandbox.values import EncodingError, check_value, encode, to_source, values_equal


@pytest.mark.parametrize(
    "value",
    [None, True, False, 0, -7, 10**40, 1.5, -0.0, float("inf"), complex(1, -2), "héllo\n", b"\x00\xff",
     [1, [2, "x"]], (1,), (), {1, 2, 3}, frozenset({"a"}), {"k": [1, 2], 3: None}, set(), {}],
)
def test_round_trip_through_source(value):
    enc = encode(value)
    assert check_value(enc) is enc
    back = eval(to_source(enc))
    assert type(back) is type(value)
    assert values_equal(encode(back), enc)


def test_types_must_match_exactly():
    assert not values_equal(encode(1), encode(1.0))
    assert not values_equal(encode(True), encode(1))
    assert not values_equal(encode([1, 2]), encode((1, 2)))
    assert not values_equal(encode({1}), encode(frozenset({1})))
    assert not values_equal(encode("1"), encode(b"1"))


def test_float_tolerance_and_nan():
    assert values_equal(encode(0.1 + 0.2), encode(0.3))
    assert not values_equal(encode(1.0), encode(1.001))
    assert values_equal(encode(float("nan")), encode(float("nan")))
    assert not values_equal(encode(float("inf")), encode(float("-inf")))
    assert values_equal(encode([1e-12]), encode([0.0]))
    assert to_source(encode(float("nan"))) == "float('nan')"
    assert math.isinf(eval(to_source(encode(float("-inf")))))


def test_unordered_containers_match_regardless_of_order():
    assert values_equal(encode({3, 1, 2}), encode({1, 2, 3}))
    assert values_equal(encode({"a": 1, "b": 2}), encode({"b": 2, "a": 1}))
    assert not values_equal(encode({"a": 1}), encode({"a": 2}))
    assert values_equal(encode({0.1 + 0.2, 5.0}), encode({5.0, 0.3}))


def test_subclasses_and_lying_objects_are_unsupported():
    class LyingInt(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    class Anything:
        def __eq__(self, other):
            return True

    class S(str):
        pass

    for v in (LyingInt(3), Anything(), S("x"), [LyingInt(1)], {"k": Anything()}):
        enc = encode(v)
        assert not values_equal(enc, enc), "unsupported must equal nothing, not even itself"
        assert not values_equal(enc, encode(3))
    assert encode(LyingInt(3))[0] == "unsupported"
    with pytest.raises(ValueError):
        to_source(encode(Anything()))


def test_encoding_refuses_cycles_and_giants():
    a: list = []
    a.append(a)
    with pytest.raises(EncodingError):
        encode(a)
    with pytest.raises(EncodingError):
        encode(list(range(100)), max_items=10)


@pytest.mark.parametrize(
    "bad",
    [[], ["int"], ["int", 3], ["float", "zz"], ["float", "0x1p99999"], ["list", "x"], ["dict", [[["int", "1"]]]],
     ["bool", 1], ["what", 1], "str", None, ["str", "a", "b"],
     # every tag with a field too many, too few, or of the wrong kind
     ["none", None], ["bool"], ["bool", True, True], ["int", "1", "2"], ["int", "1.5"], ["float"], ["float", 1.0],
     ["complex", "0x1p+0"], ["complex", "0x1p+0", 1], ["complex", "0x1p+0", "0x1p+0", "0x1p+0"],
     ["complex", "zz", "0x1p+0"], ["str"], ["str", b"a"], ["bytes", "zz"], ["bytes", 1], ["bytes"],
     ["unsupported"], ["unsupported", 1], ["list"], ["list", [], []], ["tuple", (["int", "1"],)],
     ["set", [["int", "x"]]], ["frozenset", [1]], ["dict"], ["dict", "x"], ["dict", [["int", "1"]]],
     ["dict", [[["int", "1"], ["str", 1]]]], ["dict", [[["int", "1"], ["str", "a"], ["str", "b"]]]],
     [["int"], "1"], [None], ["list", [["list", [["what"]]]]]],
)
def test_check_value_rejects_malformed(bad):
    with pytest.raises(ValueError):
        check_value(bad)
    assert not values_equal(bad, bad)


def test_check_value_accepts_every_kind_and_bounds_nesting():
    good = [["none"], ["bool", False], ["int", "-12"], ["float", "0x1.8p+1"], ["complex", "0x1p+0", "-0x0p+0"],
            ["str", ""], ["bytes", "00ff"], ["unsupported", "Foo"], ["list", []], ["tuple", [["none"]]],
            ["set", [["int", "1"]]], ["frozenset", []], ["dict", [[["str", "k"], ["list", [["int", "2"]]]]]]]
    for v in good:
        assert check_value(v) is v
    deep: list = ["none"]
    for _ in range(101):
        deep = ["list", [deep]]
    assert check_value(deep) is deep
    with pytest.raises(ValueError, match="nested too deeply"):
        check_value(["list", [deep]])
