"""Values the reference compares live that once crossed as `unsupported` (every test using
them invalid, reward 0): `types.SimpleNamespace`, `array.array`, instances of a program's
subclasses of built-in types; and `inspect.getsource` of a program's own function, which the
reference's program file gives and the sandbox did not.

Each test names the fault it was tried against (it failed under it).
"""

from __future__ import annotations

import array
import itertools
import json
import os
import types

import pytest

import codea1.sandbox.decode as trusted
from codea1.sandbox.decode import decode, python_equal
from codea1.sandbox.values import EncodingError, check_value, encode, encode_json, encode_to_send, to_source, values_equal


def main_namespace(*codes: str) -> dict:
    """Run `codes` one after the other in one namespace named `__main__`, as the reference's
    one program runs the reference's module, then the candidate's: their classes are the
    program's (`__module__ == "__main__"`), a later one re-declaring an earlier's name."""
    ns: dict = {"__name__": "__main__"}
    for code in codes:
        exec(code, ns)  # noqa: S102
    return ns


def crosses(value) -> list:
    """The encoding as the child sends it (its JSON twin) and as `encode` builds it: one."""
    enc = encode(value)
    assert json.loads(encode_json(value)) == enc, value
    assert check_value(enc) is enc
    return enc


# -- 1. types.SimpleNamespace -----------------------------------------------------------------

def test_a_simple_namespace_compares_by_its_attributes_as_python_does():
    """Fault: a SimpleNamespace crossed as unsupported, equal to nothing (its tests invalid)."""
    ns = types.SimpleNamespace
    enc = crosses(ns(b=[1, 2], a=ns(x=1.5)))
    assert enc == ["namespace", [["b", ["list", [["int", "1"], ["int", "2"]]]],
                                 ["a", ["namespace", [["x", ["float", (1.5).hex()]]]]]]]
    cases = [(ns(a=1), ns(a=1.0), True), (ns(a=1, b=2), ns(b=2, a=1), True), (ns(a=1), ns(a=2), False),
             (ns(a=1), {"a": 1}, False), (ns(), ns(), True), (ns(a=[1]), ns(a=(1,)), False)]
    for x, y, equal in cases:
        assert (x == y) is equal  # Python's own verdict, which the trusted comparison reproduces
        assert python_equal(crosses(x), crosses(y)) is equal, (x, y)
        assert python_equal(crosses(y), crosses(x)) is equal, (y, x)
    assert python_equal(encode(ns(a=0.1 + 0.2)), encode(ns(a=0.3)), abs_tol=1e-9)
    assert not python_equal(encode(ns(a=0.1 + 0.2)), encode(ns(a=0.3)))
    # exact types: attributes of the same exact types
    assert values_equal(encode(ns(a=1, b=2)), encode(ns(b=2, a=1)))
    assert not values_equal(encode(ns(a=1)), encode(ns(a=1.0)))
    assert not values_equal(encode(ns(a=1)), encode({"a": 1}))


def test_a_simple_namespace_renders_hashes_canonically_and_refuses_what_it_cannot_name():
    ns = types.SimpleNamespace
    value = ns(a=1, b="x")
    value.__dict__["not an identifier"] = 2
    back = eval(to_source(encode(value)))  # noqa: S307 - our own literal
    assert back == value and type(back) is ns
    assert to_source(encode(ns(a=1, b=[2]))) == "__import__('types').SimpleNamespace(a=1, b=[2])"
    # a digest is of the canonical encoding: attributes set in another order digest alike
    one, other = ns(a=1, b="y" * 200), ns(b="y" * 200, a=1)
    assert encode_to_send(one, 100)[1] == encode_to_send(other, 100)[1]
    assert encode_to_send(one, 100)[1] != encode_to_send(ns(a=2, b="y" * 200), 100)[1]
    odd = ns()
    odd.__dict__[1] = 2  # a name that is no string: no keyword, no attribute
    assert encode(odd) == ["unsupported", "types.SimpleNamespace"]
    cyclic = ns()
    cyclic.me = cyclic
    with pytest.raises(EncodingError, match="cycle"):
        encode(cyclic)
    for bad in (["namespace", [[1, ["int", "1"]]]], ["namespace", [["a"]]], ["namespace"], ["namespace", "a"]):
        with pytest.raises(ValueError):
            check_value(bad)
        assert not python_equal(bad, bad) and not values_equal(bad, bad)


# -- 2. array.array ---------------------------------------------------------------------------

def test_an_array_compares_item_by_item_whatever_its_typecode_as_python_does():
    """Fault: an `array.array` crossed as unsupported, equal to nothing (its tests invalid)."""
    A = array.array
    assert crosses(A("i", [1, -2])) == ["array", "i", [["int", "1"], ["int", "-2"]]]
    values = [A("i", [1, 2]), A("d", [1.0, 2.0]), A("b", [1, 2]), A("q", [1, 3]), A("f", [0.5]), A("d", [0.5]),
              A("u", "ab"), A("i"), A("d"), [1, 2], (1, 2), [0.5], "ab", ["a", "b"]]
    for x, y in itertools.product(values, repeat=2):
        # Python's own verdict: items compared one by one, a list or a str never equal to an array
        assert python_equal(crosses(x), crosses(y)) is (x == y), (x, y)
    nan = A("d", [float("nan")])
    assert (nan == nan) is False and not python_equal(encode(nan), encode(nan))  # (no identity shortcut)
    assert python_equal(encode(A("d", [1.0000001])), encode(A("i", [1])), rel_tol=1e-6)
    assert not python_equal(encode(A("d", [1.0])), encode([1.0]), abs_tol=1)  # an array is still no list
    # exact types: the same typecode
    assert values_equal(encode(A("i", [1, 2])), encode(A("i", [1, 2])))
    assert not values_equal(encode(A("i", [1, 2])), encode(A("l", [1, 2])))


def test_an_array_renders_and_refuses_malformed_or_huge_encodings():
    A = array.array
    for value in (A("h", [-3, 4]), A("d", [float("inf"), 1.5]), A("u", "hé"), A("B")):
        back = eval(to_source(encode(value)))  # noqa: S307 - our own literal
        assert type(back) is A and back.typecode == value.typecode and back == value
    assert to_source(encode(A("i", [1, 2]))) == "__import__('array').array('i', [1, 2])"
    with pytest.raises(EncodingError, match="too large"):
        encode(A("b", bytes(100)), max_items=50)
    for bad in (["array", "z", []], ["array", 1, []], ["array", "i", [["float", "0x1p+0"]]],
                ["array", "d", [["int", "1"]]], ["array", "u", [["str", "ab"]]], ["array", "i"],
                ["array", "i", [["str", "1"]]], ["array", "b", "x"]):
        with pytest.raises(ValueError):
            check_value(bad)
        assert not python_equal(bad, bad) and not values_equal(bad, bad)
    # well-formed, but no such array (out of the typecode's range): equal to nothing
    assert check_value(["array", "b", [["int", "300"]]]) and not python_equal(["array", "b", [["int", "300"]]],
                                                                              ["array", "b", [["int", "300"]]])


# -- 3. a program's subclasses of built-in types ----------------------------------------------

REFERENCE = """
import array, types
class Row(list): pass
class Point(tuple): pass
class D(dict): pass
class S(str): pass
class Num(int): pass
class Real(float): pass
class Blob(bytes): pass
class Tags(frozenset): pass
class Cfg(types.SimpleNamespace): pass
class Buf(array.array): pass
class Mixin:
    def total(self): return sum(self)
class Vec(Mixin, tuple):
    __slots__ = ()
r = Row([1, 2]); r.label = "reference's"
REF = [r, Point((1, 2)), D(a=1), S("x"), Num(3), Real(0.5), Blob(b"x"), Tags({1}), Cfg(a=1), Buf("i", [1, 2]),
       Vec((1, 2)), [Row([S("x")])], {S("k"): Num(1)}]
"""
CANDIDATE = """
class Row(list):  # the candidate's own Row: another class of the same name
    def first(self): return self[0]
class S(str): pass
c = Row([1, 2]); c.label = "candidate's"
CAND = [c, Row([2, 1]), S("x"), S("y"), [Row([S("x")])], {S("k"): 1}]
"""
PLAIN = [[1, 2], (1, 2), [2, 1], {"a": 1}, "x", 3, 3.0, True, 0.5, b"x", frozenset({1}), types.SimpleNamespace(a=1),
         array.array("i", [1, 2]), array.array("d", [1.0, 2.0]), [["x"]], {"k": 1}, {"k": 2}, "y"]


def test_a_subclass_without_its_own_eq_compares_as_python_compares_it():
    """The reference compares `candidate == reference` live, in one program where both the
    reference's `Row` and the candidate's own `Row` exist, and checks a test's EXPECTED
    with `reference != expected`; a subclass whose classes define no `__eq__` compares as
    its built-in part there (`Row([1]) == [1]`, the candidate's Row equals the
    reference's). Here every pair of such values and plain ones gets Python's own verdict,
    both ways. Fault: every such instance crossed as unsupported (its tests invalid)."""
    ns = main_namespace(REFERENCE, CANDIDATE)
    values = ns["REF"] + ns["CAND"] + PLAIN
    encoded = [crosses(v) for v in values]
    for (x, ex), (y, ey) in itertools.product(zip(values, encoded), repeat=2):
        assert python_equal(ex, ey) is (x == y), (x, y)
        assert python_equal(ex, ey) is not (x != y), (x, y)  # (the reference's validity check)
    row = encoded[0]
    assert row == ["subclass", "__main__.Row", ["list", [["int", "1"], ["int", "2"]]],
                   [["label", ["str", "reference's"]]], False]
    assert crosses(ns["REF"][10]) == ["subclass", "__main__.Vec", ["tuple", [["int", "1"], ["int", "2"]]], [], False]
    # exact types (judge.exact_types): the type name and data must match; a Row is no list
    assert not values_equal(row, encode([1, 2])) and not values_equal(encode(ns["REF"][3]), encode("x"))
    assert values_equal(encode(ns["REF"][2]), encode(ns["REF"][2]))
    assert not values_equal(row, encoded[len(ns["REF"])])  # (the same data, other attributes)


def test_a_subclass_with_its_own_eq_equals_only_its_like_by_data_and_attributes():
    """A class that defines `__eq__` (or `__ne__`) decides `==` in the reference's program:
    code of the candidate's (or reference's) that the judge never runs. Its instance equals
    one of the same type name with equal data and attributes, as an instance of a program's
    plain class does, and never a plain value (where the class's own code may have said
    yes). Fault: such an instance crossed as unsupported (its tests invalid)."""
    code = """
class Strict(tuple):
    def __eq__(self, other): return type(other) is Strict and tuple.__eq__(self, other)
    __hash__ = tuple.__hash__
class Loose(list):
    def __ne__(self, other): return False
a, b, c = Strict((1, 2)), Strict((1, 2)), Strict((2, 1))
b.note = 1
"""
    ns = main_namespace(code)
    a, b, c = (crosses(ns[k]) for k in "abc")
    assert a == ["subclass", "__main__.Strict", ["tuple", [["int", "1"], ["int", "2"]]], [], True]
    assert python_equal(a, crosses(main_namespace(code)["a"]))  # another program's Strict, the same data
    assert not python_equal(a, b) and not python_equal(a, c)  # other attributes, other data
    assert not python_equal(a, encode((1, 2))) and not python_equal(encode((1, 2)), a)
    loose = crosses(ns["Loose"]([1]))
    assert loose[4] is True and not python_equal(loose, encode([1]))
    assert type(decode(a)) is trusted.Subclass and decode(a) == decode(crosses(ns["Strict"]((1, 2))))
    assert {decode(a)} == {decode(crosses(ns["Strict"]((1, 2))))}  # hashable, as its class is
    assert python_equal(crosses(ns["Strict"]((1.0000001, 2))), a, rel_tol=1e-6)
    # a lying __eq__ never decides: it is data only
    liar = crosses(main_namespace("class L(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
                                  "x = L(0)\n")["x"])
    assert not python_equal(liar, encode(3)) and not values_equal(liar, encode(3))


def test_subclass_encodings_render_build_and_bound_as_any_value():
    ns = main_namespace(REFERENCE, "class Strict(list):\n    def __eq__(self, o): return False\n"
                                   "class Named(Strict):\n    __slots__ = ('tag',)\n"
                                   "n = Named([1, S('x')]); n.tag = 'a'\n")
    # a subclass without its own __eq__ is written as the value it equals; one with, as the
    # expression that builds it where its class is defined (the base's own __new__ and data)
    assert to_source(encode(ns["REF"][0])) == "[1, 2]"
    assert to_source(encode(ns["REF"][8])) == "__import__('types').SimpleNamespace(a=1)"
    named = crosses(ns["n"])
    assert named == ["subclass", "__main__.Named", ["list", [["int", "1"], ["subclass", "__main__.S", ["str", "x"], [],
                                                                            False]]], [["tag", ["str", "a"]]], True]
    assert to_source(named) == "Named([1, 'x'], tag='a')"
    for value in [ns["n"], ns["Strict"]([2]), *ns["REF"]]:
        built = eval(to_source(encode(value), build_objects=True), ns)  # noqa: S307 - our own literal
        assert python_equal(encode(built), encode(value)), value
        if encode(value)[0] == "subclass" and encode(value)[4]:  # built as an instance of its own class
            assert type(built) is type(value), value
    assert ns["n"].tag == eval(to_source(named, build_objects=True), ns).tag  # noqa: S307 - (a slot)
    # cycles and budgets hold for the data and the attributes alike
    row = ns["Row"]()
    row.append(row)
    with pytest.raises(EncodingError, match="cycle"):
        encode(row)
    row = ns["Row"]()
    row.me = row
    with pytest.raises(EncodingError, match="cycle"):
        encode_json(row)
    with pytest.raises(EncodingError, match="too large"):
        encode(ns["Row"](range(100)), max_items=50)
    # a set of str subclasses is ordered by its encodings' texts, as any set
    s = ns["S"]
    assert encode_json({s("b"), s("a")}) == encode_json({s("a"), s("b")})


def test_other_subclasses_stay_unsupported():
    """Only a program's classes on a built-in base cross as `subclass`: a subclass of a
    standard-library type, a class that mixes a built-in base with a library class, or a
    built-in subclass defined outside the program (here: this test module) stays unsupported."""
    ns = main_namespace("import collections, fractions\nclass C(collections.Counter): pass\n"
                        "class F(fractions.Fraction): pass\nclass X(list, collections.abc.Hashable):\n"
                        "    __hash__ = None\n")

    class Outside(list):
        pass

    for value in (ns["C"]("ab"), ns["F"](1, 2), ns["X"]([1]), Outside([1])):
        assert encode(value)[0] == "unsupported", value
    for bad in (["subclass", "T", ["none"], [], False], ["subclass", 1, ["int", "1"], [], False],
                ["subclass", "T", ["int", "1"], [], 0], ["subclass", "T", ["int", "1"], [[1, ["int", "1"]]], False],
                ["subclass", "T", ["int", "1"], []]):
        with pytest.raises(ValueError):
            check_value(bad)
        assert not python_equal(bad, bad) and not values_equal(bad, bad)


# -- in the sandbox, and in the judge -------------------------------------------------------

needs_sandbox = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/self"),
                                        reason="the sandbox needs Linux (fork, /proc)")


@pytest.fixture(scope="module")
def ex():
    from codea1.sandbox import Executor, Limits

    with Executor(workers=1, limits=Limits(timeout_s=10.0, call_timeout_s=5.0), preload=()) as e:
        yield e


@needs_sandbox
def test_the_values_cross_from_a_run(ex):
    from codea1.sandbox import Job

    program = REFERENCE + "def pick(i):\n    return REF[i]\n"
    r = ex.run(Job(program, [f"pick({i})" for i in range(13)] + ["types.SimpleNamespace(a=[1])", "array.array('d', [2.5])"]))
    assert r.program_ok and all(c.status == "ok" for c in r.calls), r.calls
    assert [c.value[0] for c in r.calls] == ["subclass"] * 10 + ["subclass", "list", "dict", "namespace", "array"]
    assert python_equal(r.calls[0].value, encode([1, 2])) and python_equal(r.calls[9].value, encode(array.array("b", [1, 2])))


GETSOURCE = "import inspect\ndef lines(k=0):\n    return k + len(inspect.getsource(lines).splitlines())\n"


@needs_sandbox
def test_getsource_of_a_programs_own_function_works_in_both_harnesses(ex):
    """`inspect.getsource` of a function the program defines: the reference runs a program
    file, which `inspect` reads. Fault: `OSError: could not get source code` in every
    harness (no file, and no text registered with `linecache`): such a reference's tests
    were all invalid, and a candidate using it failed."""
    from codea1.sandbox import Job
    from codea1.sandbox.stdio import program_outputs, stdin_job

    program = GETSOURCE + "class K:\n    def m(self):\n        return 1\n"
    r = ex.run(Job(program, ["lines()", "inspect.getsource(K.m)", "inspect.getsourcelines(K)[1]"]))
    assert [c.value for c in r.calls] == [encode(2), encode("    def m(self):\n        return 1\n"), encode(4)], r.calls
    # a one-program job: the reference module, its calls, then the candidate's module (statements)
    reference = GETSOURCE + "def f():\n    return 'ref-marker-' + str(lines())\n"
    candidate = "def f():\n    return inspect.getsource(f)\n"
    text = "'ref-marker' in ''.join(__import__('linecache').getlines('program.py'))"
    job = Job("import inspect\n", [reference, "f()", text, "del f", candidate, "f()", text],
              statements=[0, 3, 4], one_process=True)
    r = ex.run(job)
    assert [c.status for c in r.calls] == ["ok"] * 7, r.calls
    assert r.calls[1].value == encode("ref-marker-2") and r.calls[2].value == encode(True)
    assert r.calls[5].value == encode(candidate)
    # the reference's text is gone before the candidate's module runs (the source of a
    # function the reference left behind with it)
    assert r.calls[6].value == encode(False)
    # the standard-input harness
    source = GETSOURCE + "print(lines())\n"
    outs = program_outputs(ex.run(stdin_job(source, ["", ""], ex.limits)), 2)
    assert [(o.status, o.stdout) for o in outs] == [("ok", "2\n")] * 2, outs


@needs_sandbox
def test_a_run_reads_no_other_jobs_source_through_linecache(ex):
    """The text is registered in the run's own process, never in the worker: a later job
    (here one that reads every entry of its `linecache`) finds its own program's text only."""
    from codea1.sandbox import Job

    marker = "secret" + "-text-" + "42"
    assert ex.run(Job(f"X = {marker!r}\n", ["X"])).calls[0].value == encode(marker)
    assert ex.run(Job("pass\n", [f"Y = {marker!r}", "Y"], statements=[0])).calls[1].status == "ok"
    scan = ("import linecache\nfound = [k for k, e in linecache.cache.items() if len(e) == 4 and "
            "any('secret' + '-text-' in line for line in e[2])]\nmine = linecache.getlines('program.py')\n")
    r = ex.run(Job(scan, ["found", "len(mine)"]))
    assert r.calls[0].value == encode([]) and r.calls[1].value == encode(3), r.calls


@needs_sandbox
def test_the_judge_scores_these_values_as_the_reference_does(ex):
    """End to end, as `benchmarks/reference_diff.py` runs them against the reference's own
    reward code: each value's tests are valid (a wrong EXPECTED is corrected), the right
    candidate passes, the wrong one fails. Fault: every test was `reference raised` (the
    value unsupported, or `inspect.getsource` raising): no valid test, every code reward 0."""
    from codea1.data import Problem
    from codea1.judge import Judge, JudgeConfig, ProblemRollout

    def py(body: str) -> str:
        return f"```python\n{body}\n```"

    judge = Judge(ex, JudgeConfig(limits=ex.limits))
    cases = [
        ("class Row(list):\n    pass\ndef row(n):\n    return Row(range(n))\n", "row",
         "class Row(list):\n    pass\ndef row(n):\n    return Row(range(n - 1))",
         "assert row(2) == [0, 1]\nassert row(3) == Row([0, 1, 2])\nassert row(1) == [1]"),
        ("import types\ndef box(a):\n    return types.SimpleNamespace(a=a, b=2 * a)\n", "box",
         "import types\ndef box(a):\n    return types.SimpleNamespace(a=a, b=a)",
         "assert box(1) == types.SimpleNamespace(a=1, b=2)\nassert box(2) == types.SimpleNamespace(a=2, b=4)\n"
         "assert box(0) == {'a': 0, 'b': 0}"),
        ("import array\ndef arr(n):\n    return array.array('i', range(n))\n", "arr",
         "import array\ndef arr(n):\n    return array.array('d', range(1, n + 1))",
         "assert arr(2) == array.array('d', [0.0, 1.0])\nassert arr(3) == array.array('i', [0, 1, 2])\n"
         "assert arr(1) == [0]"),
        (GETSOURCE, "lines", "import inspect\ndef lines(k=0):\n    return k + 3",
         "assert lines(0) == 2\nassert lines(1) == 4"),
    ]
    for reference, entry, wrong, suite in cases:
        problem = Problem(id=f"t/{entry}", question="", entry_point=entry, reference=reference)
        (r,) = judge.judge_step([ProblemRollout(problem, [py(reference.strip()), py(wrong)], [[py(suite)]] * 2)])
        assert r.usable and r.code_valid == [True, True], (entry, r)
        n = suite.count("assert")
        assert [(s[0].valid, s[0].invalid) for s in r.suites] == [(n, 1)] * 2, (entry, r.suites)
        assert r.code_rewards[0] == 1.0 and r.code_rewards[1] < 1.0, (entry, r.code_rewards)


def test_exact_types_compares_the_new_kinds_field_by_field():
    """`judge.exact_types` (`values_equal`) on namespaces, arrays and program subclasses:
    the names, typecodes, lengths and type names must match, not only the items (mutants of
    these comparisons survived every other test)."""
    import array
    import types

    from codea1.sandbox.values import EncodingError, encode, values_equal

    ns = types.SimpleNamespace
    assert values_equal(encode(ns(a=1, b=2)), encode(ns(b=2, a=1)))
    assert not values_equal(encode(ns(a=1)), encode(ns(b=1)))       # other attribute name
    assert not values_equal(encode(ns(b=1)), encode(ns(a=1)))
    assert not values_equal(encode(ns(a=1)), encode(ns(a=2)))
    assert not values_equal(encode(ns(a=1)), encode({"a": 1}))

    arr = array.array
    assert values_equal(encode(arr("i", [1, 2])), encode(arr("i", [1, 2])))
    assert not values_equal(encode(arr("i", [1, 2])), encode(arr("i", [1])))      # longer
    assert not values_equal(encode(arr("i", [1])), encode(arr("i", [1, 2])))      # shorter
    assert not values_equal(encode(arr("i", [1, 2])), encode(arr("l", [1, 2])))   # other typecode
    assert not values_equal(encode(arr("l", [1, 2])), encode(arr("i", [1, 2])))
    assert not values_equal(encode(arr("i", [1, 2])), encode([1, 2]))

    row_a = ["subclass", "__main__.RowA", encode([1]), [], False]
    row_b = ["subclass", "__main__.RowB", encode([1]), [], False]
    assert values_equal(row_a, list(row_a))
    assert not values_equal(row_a, row_b) and not values_equal(row_b, row_a)      # other type name
    assert not values_equal(row_a, ["subclass", "__main__.RowA", encode([2]), [], False])
    assert not values_equal(row_a, ["subclass", "__main__.RowA", encode([1]), [["x", encode(1)]], False])

    with pytest.raises(EncodingError):   # an array counts its items against the value's budget
        encode(arr("i", range(50)), max_items=10)


def test_a_subclass_with_its_own_eq_equals_only_its_like_under_pythons_rule():
    """`decode.Subclass.__eq__` (Python's `==`, the default rule): the type name, the built-in
    part and the attributes must all be equal (mutants of each comparison survived)."""
    from codea1.sandbox.decode import python_equal
    from codea1.sandbox.values import encode

    def strict(name, data, attributes=()):
        return ["subclass", f"__main__.{name}", encode(data), [[k, encode(v)] for k, v in attributes], True]

    assert python_equal(strict("Strict", [1]), strict("Strict", [1]))
    assert not python_equal(strict("Strict", [1]), strict("Other", [1]))     # another class
    assert not python_equal(strict("Other", [1]), strict("Strict", [1]))
    assert not python_equal(strict("Strict", [1]), strict("Strict", [0]))    # other data
    assert not python_equal(strict("Strict", [0]), strict("Strict", [1]))
    assert not python_equal(strict("Strict", [1], [("x", 1)]), strict("Strict", [1], [("x", 0)]))
    assert not python_equal(strict("Strict", [1], [("x", 0)]), strict("Strict", [1], [("x", 1)]))
    assert not python_equal(strict("Strict", [1]), encode([1]))              # never a plain value
    # without its own __eq__ the same encoding is its plain data, as Python compares it
    assert python_equal(["subclass", "__main__.Row", encode([1]), [["x", encode(1)]], False], encode([1]))
