"""Audit B's three value defects: mixin enums compared by identity, sets sorted by `repr`,
digests of dicts taken in insertion order.

Each test says the fault it was tried against (the test failed under it).
"""

from __future__ import annotations

import collections
import enum
import hashlib
import json
import time

import pytest

from codea1.data import Problem
from codea1.judge import Judge, JudgeConfig, ProblemRollout
from codea1.sandbox import Executor, Job, Limits
from codea1.sandbox.decode import decode, python_equal
from codea1.sandbox.values import (
    check_value,
    encode,
    encode_json,
    encode_to_send,
    to_source,
    values_equal,
)

from test_judge_one_program import LIMITS, py  # (the judge tests' limits and fence)


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=1, limits=LIMITS) as ex:
        yield ex


# -- 1. members of enums that mix in a data type compare as their data -------------------

def _levels():
    """A fresh `Lvl(IntEnum)` class each call (a candidate re-declaring the reference's)."""
    class Lvl(enum.IntEnum):
        LOW = 1
        HIGH = 2
    return Lvl


class Dir(str, enum.Enum):
    N = "N"
    S = "S"


class Plain(enum.Enum):
    A = 1
    B = 2


def test_a_mixin_enum_member_equals_its_data_as_in_python():
    """`Lvl.HIGH == 2`, `Dir.N == 'N'`, a re-declared `Lvl.HIGH` equals the first, and a
    plain Enum member still equals only itself. Fault tried: `Member.__eq__` by class,
    type name and member name only (every mixin case below was unequal)."""
    lvl, again = _levels(), _levels()
    for member, data in ((lvl.HIGH, 2), (lvl.LOW, 1), (Dir.N, "N"), (again.HIGH, 2)):
        assert member == data  # (Python's rule, which `python_equal` follows)
        assert python_equal(encode(member), encode(data))
        assert python_equal(encode(data), encode(member))
    assert lvl.HIGH == again.HIGH and python_equal(encode(lvl.HIGH), encode(again.HIGH))
    assert python_equal(encode(lvl.LOW), encode(1.0)) and python_equal(encode(lvl.LOW), encode(True))
    assert not python_equal(encode(lvl.HIGH), encode(lvl.LOW)) and not python_equal(encode(lvl.HIGH), encode("2"))
    assert python_equal(encode({lvl.HIGH: "x"}), encode({2: "x"}))  # (hashed as its data too)
    assert python_equal(encode({Dir.N, Dir.S}), encode({"N", "S"}))
    assert python_equal(encode([lvl.HIGH]), encode([2.0000001]), rel_tol=1e-6)
    # a plain Enum member: identity only, never its value nor a mixin member of equal data
    assert Plain.A != 1 and not python_equal(encode(Plain.A), encode(1))
    assert python_equal(encode(Plain.A), encode(Plain.A)) and not python_equal(encode(Plain.A), encode(Plain.B))
    assert not python_equal(encode(Plain.A), encode(lvl.LOW)) and not python_equal(encode(lvl.LOW), encode(Plain.A))
    # exact types: a mixin member is no int, but equals a member of the same name and data
    assert not values_equal(encode(lvl.HIGH), encode(2))
    assert values_equal(encode(lvl.HIGH), encode(again.HIGH)) and not values_equal(encode(lvl.HIGH), encode(lvl.LOW))
    assert values_equal(encode(Plain.A), encode(Plain.A))


def test_a_members_data_is_read_without_running_its_classs_code():
    """An IntEnum whose `__int__`, `__index__`, `__repr__`, `__str__`, `__eq__`, `__hash__`
    and metaclass `__eq__` raise: its member still encodes, with its real int data, and
    compares as it. Fault tried: reading the data by `int(member)` (raised)."""
    class Meta(enum.EnumMeta):
        def __eq__(cls, other):
            raise AssertionError("the metaclass's __eq__ ran")

        __hash__ = enum.EnumMeta.__hash__

    def boom(*args):
        raise AssertionError("the class's code ran")

    class Sly(enum.IntEnum, metaclass=Meta):
        ONE = 1
        __int__ = __index__ = __repr__ = __str__ = __eq__ = __hash__ = __format__ = boom

    class Text(str, enum.Enum):
        A = "a"
        __str__ = __repr__ = __eq__ = __hash__ = boom

    assert encode(Sly.ONE)[5] == ["int", "1"] and encode(Text.A)[5] == ["str", "a"]
    assert json.loads(encode_json(Sly.ONE)) == encode(Sly.ONE)
    assert python_equal(encode(Sly.ONE), encode(1)) and python_equal(encode(Text.A), encode("a"))


def test_a_metaclass_eq_never_runs_while_encoding():
    """A program's class whose metaclass defines `__eq__`: encoding its instance never runs
    it (the instance crosses by its attributes). Fault tried: `type(value) in (list, ...)`
    (compared the class with each type by `==`: the metaclass's `__eq__` ran)."""
    class Meta(type):
        def __eq__(cls, other):
            raise AssertionError("the metaclass's __eq__ ran")

        __hash__ = type.__hash__

    class Odd(metaclass=Meta):
        pass

    Odd.__module__ = "__main__"
    odd = Odd()
    odd.x = 1
    assert encode(odd) == ["object", "__main__." + Odd.__qualname__, [["x", ["int", "1"]]]]
    assert json.loads(encode_json([odd])) == encode([odd])


def test_an_enum_encoding_is_checked_strictly_and_renders():
    """Five fields, the data null or a value of a mixed-in type; `to_source` still names
    the member (a combination of flags as `A | B`). Fault tried: no data field (every
    assert on `encode(...)[5]` failed)."""
    lvl = _levels()
    good = encode(lvl.HIGH)
    assert check_value(good) is good and good[5] == ["int", "2"] and encode(Plain.A)[5] is None
    for bad in (good[:5], good + [None], good[:5] + [["list", []]], good[:5] + [["int", 2]], good[:5] + ["2"]):
        with pytest.raises(ValueError):
            check_value(bad)
    assert not python_equal(good[:5], encode(2))  # (malformed: equal to nothing)
    main = ["enum", "__main__.Lvl", "HIGH", ["int", "2"], "1", ["int", "2"]]  # (a class of the run's program)
    assert to_source(main) == "Lvl.HIGH" and repr(decode(main)) == "__main__.Lvl.HIGH"
    assert eval(to_source(main), {"Lvl": lvl}) is lvl.HIGH

    class Perm(enum.IntFlag):
        R = 4
        W = 2
    flags = encode(Perm.R | Perm.W)
    assert flags[2] == "R|W" and flags[5] == ["int", "6"]
    source = to_source(["enum", "__main__.Perm", "R|W", ["int", "6"], "1", ["int", "6"]])
    assert source == "(Perm.R | Perm.W)" and eval(source, {"Perm": Perm}) == 6


def test_a_candidate_returning_an_intenums_data_scores_as_in_the_reference(executor):
    """Audit B `enum/intenum-vs-int`, `enum/str-enum-vs-str`: a reference returning
    `Lvl.HIGH` keeps the test `assert level(9) == 2`, and a candidate returning 2, or
    re-declaring `Lvl`, scores 1.0 (as in the reference). Fault tried: members compared by
    identity (the test was a wrong expectation, both scored 0.0)."""
    ie = ("from enum import IntEnum\nclass Lvl(IntEnum):\n    LOW = 1\n    HIGH = 2\n"
          "def level(x):\n    return Lvl.HIGH if x > 5 else Lvl.LOW\n")
    problem = Problem(id="t/lvl", question="", entry_point="level", reference=ie)
    codes = [py("def level(x):\n    return 2 if x > 5 else 1"), py(ie), py("def level(x):\n    return 1")]
    suite = py("assert level(9) == 2\nassert level(1) == Lvl.LOW")
    (r,) = Judge(executor, JudgeConfig(limits=LIMITS)).judge_step([ProblemRollout(problem, codes, [[suite]] * 3)])
    assert r.suites[0][0].valid == 2 and r.code_rewards == [1.0, 1.0, 0.5]
    se = ("from enum import Enum\nclass Dir(str, Enum):\n    N = 'N'\n    S = 'S'\n"
          "def flip(d):\n    return Dir.S if d == 'N' else Dir.N\n")
    problem = Problem(id="t/dir", question="", entry_point="flip", reference=se)
    suite = py("assert flip('N') == 'S'\nassert flip('S') == Dir.N")
    (r,) = Judge(executor, JudgeConfig(limits=LIMITS)).judge_step(
        [ProblemRollout(problem, [py("def flip(d):\n    return 'S' if d == 'N' else 'N'")], [[suite]])])
    assert r.suites[0][0].valid == 2 and r.code_rewards == [1.0]


# -- 2. a set's items in the order of their JSON texts, sorted cheaply ---------------------

def test_set_items_are_in_the_order_of_their_json_texts():
    """`encode` and `encode_json` order a set's items alike, by the items' JSON texts.
    Fault tried: the `repr` of each encoded item as the key ('z' came before 'é', whose
    JSON text is `"\\u00e9"`)."""
    value = {"z", "é", ("a", 1), 3, b"\x01", frozenset({"é", "z"})}
    text = encode_json(value)
    items = json.loads(text)[1]
    texts = [json.dumps(x, separators=(",", ":")) for x in items]
    assert texts == sorted(texts) and json.loads(text) == encode(value)
    assert items.index(["str", "é"]) < items.index(["str", "z"])


def test_a_large_set_encodes_about_as_fast_as_the_same_list():
    """100,000 pairs in a set take at most 2.5 times as long to encode as in a list (the
    sort by text is a fraction of the encoding). Fault tried: sorting by `repr` of each
    encoded item (about 5 times the list's time, 4.4 s for 300,000 pairs)."""
    items = [(i, i % 7) for i in range(100000)]
    as_set = set(items)

    def best(value) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            encode_json(value)
            times.append(time.perf_counter() - start)
        return min(times)

    assert best(as_set) < 2.5 * best(items)


# -- 3. a digest does not depend on a dict's insertion order -------------------------------

def _digest(value, bound: int = 100) -> str:
    text, sent = encode_to_send(value, bound)
    assert text == encode_json(value)
    return sent


def test_equal_dicts_built_in_different_orders_have_one_digest():
    """A dict, Counter, defaultdict or program object's attributes, at any depth, crosses
    past the bound as one digest whatever its insertion order; an OrderedDict's order is
    kept (two OrderedDicts in different orders are unequal). Fault tried: the digest of
    the text in insertion order (every pair below differed)."""
    n = 50
    forward, backward = {i: i * i for i in range(n)}, {i: i * i for i in reversed(range(n))}
    assert forward == backward and _digest(forward) == _digest(backward)
    assert _digest([1, {"x": forward}]) == _digest([1, {"x": backward}])
    assert _digest(collections.Counter(forward)) == _digest(collections.Counter(backward))
    assert _digest(collections.defaultdict(list, forward)) == _digest(collections.defaultdict(list, backward))
    assert _digest(collections.OrderedDict(forward)) != _digest(collections.OrderedDict(backward))
    assert _digest({i: i * i for i in range(n + 1)}) != _digest(forward)
    assert _digest(forward).startswith('["digest","') and json.loads(_digest(forward))[2] == len(encode_json(forward))
    # without a dict the digest is the text's, as before; within the bound the text itself
    assert _digest("x" * 500) == '["digest","' + hashlib.sha256(encode_json("x" * 500).encode()).hexdigest() + '",510]'
    assert encode_to_send(forward, 1 << 20) == (encode_json(forward),) * 2
    assert encode_to_send(forward, 100, keep_text=False)[0] is None
    # the canonical encoding is an encoding like another (parity of the two encoders)
    for value in (forward, [collections.Counter("abracadabra")], {"b": {2: 1, 1: 2}, "a": set()}):
        assert json.loads(encode_json(value, canonical=True)) == encode(value, canonical=True)
        assert python_equal(encode(value, canonical=True), encode(value))


def test_program_objects_in_a_digest_ignore_attribute_order(executor):
    """Two instances of a program's class whose attributes were set in different orders
    (equal as `Instance`s) cross as one digest, run in the sandbox. Fault tried: attributes
    in insertion order (the digests differed)."""
    program = ("class P:\n    pass\n"
               "def make(order):\n    p = P()\n    for k in order:\n        setattr(p, k, list(range(40)))\n    return p\n")
    run = executor.run(Job(program=program, calls=["make('abc')", "make('cba')", "make('abd')"],
                           limits=Limits(timeout_s=10.0, max_value_bytes=200)))
    values = [c.value for c in run.calls]
    assert [v[0] for v in values] == ["digest"] * 3
    assert values[0] == values[1] != values[2]


def test_a_large_dict_built_in_another_order_passes_as_in_the_reference(executor):
    """Audit B `big/dict-order-over-16mib`, with a bound of 64 KiB: a candidate building the
    reference's dict in reverse order passes its test (1.0, as in the reference). Fault
    tried: the digest of the insertion-order text (0.5)."""
    limits = Limits(timeout_s=10.0, call_timeout_s=3.0, max_value_bytes=1 << 16)
    sq = "def squares(n):\n    return {i: i * i for i in range(n)}\n"
    problem = Problem(id="t/sq", question="", entry_point="squares", reference=sq)
    codes = [py(sq), py("def squares(n):\n    return {i: i * i for i in reversed(range(n))}"),
             py("def squares(n):\n    return {i: i * i for i in range(n)} if n < 3 else {0: 1}")]
    suite = py("assert squares(6000) == {}\nassert squares(2) == {0: 0, 1: 1}")
    judge = Judge(executor, JudgeConfig(limits=limits, reference_limits=limits))
    (r,) = judge.judge_step([ProblemRollout(problem, codes, [[suite]] * 3)])
    assert r.code_rewards == [1.0, 1.0, 0.5]
