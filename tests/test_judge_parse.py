"""Code extraction from completions and AST parsing of tests (spec steps 1 and 3)."""

from __future__ import annotations

import pytest

from codea1.judge import extract_code, extract_test_source, parse_tests
from codea1.judge.parse import MAX_TEST_NODES


def test_extract_code_takes_the_first_closed_python_block():
    text = "Intro\n```\nplain\n```\n```python\ndef f():\n    return 1\n```\n```python\nsecond\n```\n"
    assert extract_code(text) == "def f():\n    return 1"  # (line breaks around it stripped)
    # ```python3: the text after the tag, its `3` line included (which runs: an expression)
    assert extract_code("```python3\nx = 1\n```") == "3\nx = 1"


def test_extract_code_without_a_closed_python_block_is_the_whole_text():
    # the reference: a truncated answer, a ```py or bare ``` block run as written, fences
    # included, and fail; plain code without fences runs
    unterminated = "```python\ndef f():\n    return 1\n"
    assert extract_code(unterminated) == "```python\ndef f():\n    return 1"
    assert extract_code("```py\nx = 1\n```\n") == "```py\nx = 1\n```"
    assert extract_code("\na\n```\nx = 1\n```") == "a\n```\nx = 1\n```"
    assert extract_code("def f(): return 2") == "def f(): return 2"
    # a ```python block "closed" only by the next ```python opens no block either
    assert extract_code("```python\nx = 1\n```python\ny = 2\n") == "```python\nx = 1\n```python\ny = 2"


def test_lenient_code_fences_keep_the_projects_rule():
    # judge.lenient_code_fences: first python-tagged block, else first block, an
    # unterminated one running to the end of the text
    text = "Intro\n```\nplain\n```\n```python\ndef f():\n    return 1\n```\n```python\nsecond\n```\n"
    assert extract_code(text, lenient=True) == "def f():\n    return 1\n"
    assert extract_code("a\n```\nx = 1\n```\n```js\ny\n```", lenient=True) == "x = 1\n"
    assert extract_code("def f(): return 2", lenient=True) == "def f(): return 2"
    assert extract_code("```python\ndef f():\n    return", lenient=True) == "def f():\n    return"
    assert extract_code("```py\nx = 1\n```", lenient=True) == "x = 1\n"


def test_extract_test_source_joins_all_python_blocks():
    text = "```python\nassert f(1) == 1\n```\nmore:\n```py\nassert f(2) == 2\n```\n```\nignored\n```"
    assert extract_test_source(text) == "assert f(1) == 1\nassert f(2) == 2\n"


def ok(test):
    assert test.reason is None, test.reason
    return test.call, test.expected


def test_simple_asserts_are_normalised():
    tests = parse_tests("assert f( 1,2 )==3\nassert f('a') == 'b', 'message'\n", "f")
    assert [ok(t) for t in tests] == [("f(1, 2)", "3"), ("f('a')", "'b'")]
    assert tests[0].normalized == "assert f(1, 2) == 3"
    assert tests[0].source == "assert f( 1,2 )==3"
    assert [t.line for t in tests] == [1, 2]


def test_preceding_assignments_are_substituted():
    src = "x = [1, 2]\ny = x + [3]\na, b = 4, 5\nassert f(y, a) == b\nx = 'new'\nassert f(x) == 0\n"
    tests = parse_tests(src, "f")
    assert [ok(t) for t in tests] == [("f([1, 2] + [3], 4)", "5"), ("f('new')", "0")]


def test_names_bound_inside_the_call_are_not_substituted():
    src = "x = 9\nassert f([x for x in range(3)], key=lambda x: -x) == x\n"
    (test,) = parse_tests(src, "f")
    assert ok(test) == ("f([x for x in range(3)], key=lambda x: -x)", "9")


def test_imports_become_expressions_and_the_function_import_is_ignored():
    src = "from solution import f\nimport math\nfrom collections import Counter as C\nassert f(math.pi, C('ab')) == 1\n"
    (test,) = parse_tests(src, "f")
    assert ok(test) == ("f(__import__('math').pi, __import__('collections', fromlist=('Counter',)).Counter('ab'))", "1")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("assert f(1) != 2", "comparison with `!=`"),
        ("assert f(1) < 2", "comparison with `<`"),
        ("assert f(1)", "no comparison"),
        ("assert f(1) == 2 == 2", "chained comparison"),
        ("assert 2 == f(1)", "not a call"),
        ("assert g(1) == 2", "does not use the function under test `f`"),
        ("print(f(1))", "expression"),
        ("def test_f():\n    assert f(1) == 2", "function definition"),
        ("for i in range(3):\n    assert f(i) == i", "`for`"),
        ("x[0] = 1", "assignment that is not `name = value`"),
        ("x += 1", "`augassign`"),
    ],
)
def test_everything_else_is_one_invalid_test_with_a_reason(line, reason):
    (test,) = parse_tests(line + "\n", "f")
    assert test.reason is not None and reason in test.reason
    assert test.call is None and test.normalized is None


def test_without_entry_point_any_call_is_accepted():
    (test,) = parse_tests("assert g(1) == 2\n")
    assert ok(test) == ("g(1)", "2")


def test_syntax_errors_cost_one_test_and_parsing_resumes():
    src = "assert f(1) == 1\nassert f(2 == 2\nassert f([1,\n          2]) == 3\nthis is prose\nassert f(4) == 4\n"
    tests = parse_tests(src, "f")
    assert [t.reason is None for t in tests] == [True, False, True, False, True]
    assert "does not parse" in tests[1].reason
    assert tests[2].call == "f([1, 2])" and tests[2].line == 3
    assert tests[4].line == 6


def test_truncated_last_test_is_invalid_but_the_rest_stands():
    tests = parse_tests("assert f(1) == 1\nassert f(2) == 2\nassert f(3", "f")
    assert [t.reason is None for t in tests] == [True, True, False]


def test_indented_block_is_dedented():
    tests = parse_tests("    assert f(1) == 1\n    assert f(2) == 2\n", "f")
    assert [t.call for t in tests] == ["f(1)", "f(2)"]


def test_docstrings_pass_and_comments_are_not_tests():
    assert parse_tests('"""tests for f"""\n# a comment\npass\n', "f") == []


def test_exponential_substitution_is_refused():
    lines = ["a0 = [1, 2, 3]"] + [f"a{i} = [a{i-1}, a{i-1}]" for i in range(1, 40)] + ["assert f(a39) == 1"]
    tests = parse_tests("\n".join(lines) + "\n", "f")
    assert tests and all(t.reason is not None for t in tests)
    assert any("too large" in t.reason for t in tests)
    assert len(tests) < 40  # refused early, not 2**39 nodes later
    assert MAX_TEST_NODES < 2**39


def test_deeply_nested_garbage_does_not_crash():
    tests = parse_tests("assert f(" + "[" * 5000 + "]" * 5000 + ") == 1\n", "f")
    assert len(tests) == 1 and tests[0].reason is not None


def test_names_changed_by_unsupported_statements_poison_later_tests():
    src = "x = [1, 2]\nx[0] = 5\nassert f(x) == 1\ny = 1\ny += 1\nassert f(y) == 2\nx = [3]\nassert f(x) == 3\n"
    tests = parse_tests(src, "f")
    reasons = [t.reason for t in tests]
    assert "assignment that is not" in reasons[0]
    assert "uses `x`" in reasons[1]
    assert "`augassign`" in reasons[2]
    assert "uses `y`" in reasons[3]
    assert reasons[4] is None and tests[4].call == "f([3])"  # a fresh assignment heals the name


def test_chained_assignment_and_later_bound_names():
    src = "x = [z]\nz = 1\na = b = x\nassert f(a, b) == z\nassert f(x) == 0\n"
    tests = parse_tests(src, "f")
    assert [t.call for t in tests] == ["f([z], [z])", "f([z])"]  # z was free when x was assigned
    assert tests[0].expected == "1"


def test_literal_expected_values_are_read_without_running_anything():
    tests = parse_tests("assert f(1) == [1, (2, 'a'), {3}, None, -1.5]\nassert f(2) == sorted([2, 1])\nassert f(3) == None\n", "f")
    assert tests[0].expected_literal == ([1, (2, "a"), {3}, None, -1.5],)
    assert tests[1].expected_literal is None  # a call: evaluated in the sandbox instead
    assert tests[2].expected_literal == (None,)


def test_parse_never_raises_on_arbitrary_text():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = st.sampled_from(
        ["assert ", "f(", ")", " == ", "[", "]", "x = ", "\n", "    ", "1", "'a'", "lambda x: x", "for ", ":",
         "import os", "\\", "#", '"""', "\x00", "é", ",", "*", "=", "(", "yield", "await ", "async "]
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.one_of(pieces, st.text(max_size=5)), max_size=40))
    def check(parts):
        text = "".join(parts)
        for block in (text, f"```python\n{text}\n```"):
            for t in parse_tests(extract_test_source(block), "f"):
                assert (t.reason is None) == (t.call is not None)

    check()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("assert f(globals().update(f=None) or 1) == 1", "uses `globals`"),
        ("assert f(HELPER.clear() or 1) == 1", "uses `HELPER`"),
        ("assert f(f.__globals__) == 1", "private attribute `.__globals__`"),
        ("assert f((g := 2)) == 1", "`:=`"),
        ("assert f(__import__('os').getcwd()) == 1", "module `os`"),
        ("import sys\nassert f(sys.setrecursionlimit(10)) == 1", "module `sys`"),
        ("assert f(1) == print('x')", "uses `print`"),
        ("assert f(setattr(f, 'x', 1)) == 1", "uses `setattr`"),
    ],
)
def test_strict_mode_refuses_tests_that_could_tamper_with_the_shared_process(line, reason):
    (test,) = parse_tests(line + "\n", "f", strict=True)
    assert test.reason is not None and reason in test.reason
    (loose,) = parse_tests(line + "\n", "f")
    assert loose.reason is None or "uses" not in loose.reason


def test_strict_mode_accepts_ordinary_data_building_tests():
    src = (
        "import math\nfrom collections import Counter\nxs = [i * i for i in range(5)]\n"
        "assert f(xs, key=lambda v: -v) == sorted(xs)\n"
        "assert f(math.inf, Counter('aab'), float('nan'), 'a,b'.split(',')) == (1, 2)\n"
        "assert f({k: v for k, v in zip('ab', range(2))}, list(map(str, range(3)))) == None\n"
    )
    assert [t.reason for t in parse_tests(src, "f", strict=True)] == [None, None, None]


@pytest.mark.parametrize(
    "call",
    [
        "f(1, -2, 3.5, -0.25, 'a', \"it's\", b'x', None, True, [1, [2]], (1,), (), {1: 'a', 'b': [2]}, {3, 1}, [])",
        "f(x=1, y=(2, 3))",
        "f(1e400)",
        "f(-(1))",
        "f(--1)",
        "f(1 + 2j)",
        "f(*[1])",
        "f(**{'a': 1})",
        "f({**{'a': 1}})",
        "f(10 ** 5000)",
    ],
)
def test_fast_call_text_matches_ast_unparse(call):
    import ast

    (test,) = parse_tests(f"assert {call} == 1\n", "f")
    assert test.call == ast.unparse(ast.parse(call, mode="eval").body)


@pytest.mark.parametrize(
    "expected",
    [
        "1", "-2.5", "+3", "'a'", "b'x'", "None", "True", "...", "1e400", "-1e400", "2j", "1 + 2j", "-1 - 2j",
        "1.5 - 0j", "[1, (2, 'b'), {3: [4]}]", "()", "(1,)", "{1, 2}", "set()", "{}", "{'a': {'b': None}}",
        "--1", "-'a'", "1 + 2", "1j + 1", "'a' + 'b'", "[1] + [2]", "{[1]: 2}", "{[1]}", "{**{}}", "{1: 2, **x}",
        "set([1])", "set(x=1)", "frozenset()", "x", "f(1)", "[*x]", "(1, *[2])", "not 1", "1 if x else 2",
        "[[[[[[[[[[[[1]]]]]]]]]]]]", "-(1)", "-(-1)", "~1", "-True", "- 2j", "1 + -2j", "True + 1j", "1 * 2",
        "'%s' % 1", "f'{1}'", "[1, 2][0]", "{1: 2}[1]", "lambda: 1", "x.y",
    ],
)
def test_expected_literals_are_read_as_ast_literal_eval_reads_them(expected):
    import ast

    from codea1.judge.parse import _literal_value

    node = ast.parse(expected, mode="eval").body
    try:
        want = ("value", ast.literal_eval(node))
    except Exception as err:  # noqa: BLE001 - the kind of failure is what is compared
        want = ("raises", type(err))
    try:
        got = ("value", _literal_value(node))
    except Exception as err:  # noqa: BLE001
        got = ("raises", type(err))
    assert got[0] == want[0] and (got[1] == want[1] or got[1] != got[1])  # (nan is not equal to itself)
    assert type(got[1]) is type(want[1])
    (test,) = parse_tests(f"assert f(1) == {expected}\n", "f")
    if test.reason is None:
        assert (test.expected_literal is not None) == (want[0] == "value")


@pytest.mark.parametrize("test", ["assert f([" + ", ".join(["1"] * 30) + "]) == 1", "assert g(f := 1) == 1"])
def test_an_unrelated_assignment_does_not_change_a_tests_verdict(test, monkeypatch):
    monkeypatch.setattr("codea1.judge.parse.MAX_TEST_NODES", 25)
    (alone,) = parse_tests(test + "\n", "f")
    (after,) = parse_tests("y = 2\n" + test + "\n", "f")
    assert (alone.reason, alone.call) == (after.reason, after.call)


def test_only_substitution_is_held_to_the_size_limit(monkeypatch):
    monkeypatch.setattr("codea1.judge.parse.MAX_TEST_NODES", 25)
    big = "[" + ", ".join(["1"] * 30) + "]"
    (written,) = parse_tests(f"assert f({big}) == 1\n", "f")
    assert written.reason is None  # bounded by its own text
    assignment, test = parse_tests(f"x = {big}\nassert f(x) == 1\n", "f")
    assert "assignment too large" in assignment.reason and "whose assignment was not a valid one" in test.reason
    (grown,) = parse_tests("x = [1, 2, 3, 4, 5, 6, 7]\ny = [x, x, x]\nassert f(y) == 1\n", "f")
    assert "too large after substituting" in grown.reason


# -- the reference's reading of a test completion (fidelity items 2 and 3) -------------------

from codea1.judge.parse import completion_cache, parse_completion  # noqa: E402

BLOCK = (
    "Here are the tests:\n```python\n"
    "import math\n"
    "print('testing f')\n"                      # ignored
    "def helper(x):\n    return x\n"            # ignored
    "for i in range(3):\n    assert f(i) == i\n"  # ignored
    "assert f(1) == 1\n"                        # test
    "assert f(2)\n"                             # no comparison: ignored
    "assert 3 == f(3)\n"                        # no call on the left: ignored
    "this is prose inside the block\n"          # does not parse: ignored
    "x = [1, 2]\n"
    "assert f(x) != 5\n"                        # CALL == EXPECTED: f([1, 2]) == 5
    "assert f(4) < 9 < 10\n"                    # chained: f(4) == 9
    "assert f(5) in (5, 6)\n"                   # f(5) == (5, 6)
    "assert f(6) is None\n"                     # f(6) == None
    "assert f(7) not in [1]\n"                  # f(7) == [1]
    "```\n"
)


def test_non_test_lines_of_a_python_block_are_ignored():
    tests = parse_completion(BLOCK, "f")
    assert all(t.ok for t in tests)  # nothing invalid: the non-tests are neither valid nor invalid
    assert [t.call for t in tests] == ["f(1)", "f([1, 2])", "f(4)", "f(5)", "f(6)", "f(7)"]
    # judge.strict_lines: the project's reading, every non-test statement an invalid test
    strict = parse_completion(BLOCK, "f", strict_lines=True)
    reasons = [t.reason for t in strict if not t.ok]
    assert len(reasons) == 6  # print, def, for, `assert f(2)`, `assert 3 == f(3)`, prose
    assert any("does not parse" in r for r in reasons) and any("function definition" in r for r in reasons)
    assert [t.call for t in strict if t.ok] == ["f(1)", "f([1, 2])", "f(4)", "f(5)", "f(6)", "f(7)"]


def test_other_operators_read_as_call_equals_expected():
    tests = parse_completion(BLOCK, "f")
    assert [t.normalized for t in tests[1:]] == [
        "assert f([1, 2]) == 5", "assert f(4) == 9", "assert f(5) == (5, 6)", "assert f(6) == None",
        "assert f(7) == [1]",
    ]
    assert tests[3].expected_literal == ((5, 6),)
    # judge.strict_operator: only `==` reads as a test; the others are invalid with the operator named
    strict = parse_completion(BLOCK, "f", strict_operator=True)
    assert [t.call for t in strict if t.ok] == ["f(1)"]
    assert [t.reason for t in strict if not t.ok] == [
        "comparison with `!=`; expected `assert CALL == EXPECTED`", "chained comparison; expected `assert CALL == EXPECTED`",
        "comparison with `in`; expected `assert CALL == EXPECTED`", "comparison with `is`; expected `assert CALL == EXPECTED`",
        "comparison with `not in`; expected `assert CALL == EXPECTED`",
    ]


def test_without_a_python_block_the_assert_lines_are_the_tests():
    text = (
        "I would test:\nassert f(1) == 1\n  assert f(2) >= 2\nassert f(3\nassert f(4)\n"
        "assert 5 == f(5)\nprint(f(6))\nx = 3\nassert f(x) == 3\n```\nassert f(7) == 7\n```\n"
    )
    tests = parse_completion(text, "f")
    # every line starting with `assert` is one test; one that cannot be read as a test is invalid
    assert [t.line for t in tests] == [2, 3, 4, 5, 6, 9, 11]
    assert [t.call for t in tests] == ["f(1)", "f(2)", None, None, None, "f(x)", "f(7)"]
    assert "does not parse" in tests[2].reason and "no comparison" in tests[3].reason
    assert "not a call" in tests[4].reason


def test_the_completion_cache_matches_its_reading():
    cache = completion_cache("f")
    assert parse_completion(BLOCK, "f", cache=cache) == parse_completion(BLOCK, "f")
    assert parse_completion(BLOCK, "f", cache=cache) == parse_completion(BLOCK, "f")  # from the cache
    with pytest.raises(ValueError, match="LineCache was made for"):
        parse_completion(BLOCK, "f", strict_lines=True, cache=cache)
    lines = completion_cache("f", strict_lines=True, strict_operator=True)
    assert (parse_completion(BLOCK, "f", strict_lines=True, strict_operator=True, cache=lines)
            == parse_completion(BLOCK, "f", strict_lines=True, strict_operator=True))
