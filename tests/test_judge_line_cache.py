"""The line cache of `parse_tests`: exactly the result of parsing each suite whole."""

from __future__ import annotations

import random

import pytest

from codea1.judge import LineCache, parse_tests

# Lines a test model writes, and lines that must not be parsed on their own: statements
# over several lines, blocks, continuations, decorators, strings across lines, bad bytes.
LINES = [
    "assert f(1) == 2",
    "assert f([1, 2, 3]) == 6",
    "assert f( 1,2 )==3",
    "assert f('a') == 'b', 'message'",
    "assert f(1) == 2  # trailing comment",
    "assert f(1) == 2; assert f(2) == 3",
    "assert f(x) == 3",
    "assert f(x, y) == x",
    "assert f(math.sqrt(4)) == 2",
    "assert f(-1) == -1.5",
    "assert f({3, 1}) == {1: 'a'}",
    "assert f(1) == float('inf')",
    "assert f(1) == f(2)",
    "assert f(lambda x: x) == 1",
    "assert f([x for x in range(3)]) == 3",
    "assert f(*[1]) == 1",
    "assert f(globals()) == 1",
    "assert f(1).__class__ == int",
    "assert g(1) == 1",
    "assert f(1) != 2",
    "assert f(1)",
    "x = [1, 2]",
    "x, y = 1, 2",
    "x = y = (3,)",
    "x += 1",
    "y: int = 3",
    "z = x",
    "x = f",
    "import math",
    "import os.path as p",
    "from solution import f",
    "from math import sqrt as x",
    "print(f(1))",
    "pass",
    '"""tests for f"""',
    "# a comment",
    "   # an indented comment",
    "",
    "   ",
    "del x",
    "for i in range(3): assert f(i) == i",
    "if True: assert f(1) == 1",
    "else: pass",
    "def g(): return 1",
    "@dec",
    "class A: pass",
    "    assert f(1) == 1",
    "assert f([1,",
    "2]) == 3",
    "]) == 3",
    "assert f(1) == \\",
    "s = '''abc",
    "def'''",
    "assert f(1) ==",
    "return 1",
    "from __future__ import annotations",
    "\fassert f(1) == 1",
    "assert f('\\d') == 1",
    "assert f(1) == 1if True else 2",
    "assert f('\ufeff') == 1",
    "\ufeffassert f(1) == 1",
    "# \ud800 lone surrogate",
    "# \x00 null byte",
    "assert f(1) == 1\x0b",
    "assert g(f := 1) == 1",
    "assert f([" + ", ".join(["1"] * 30) + "]) == 1",  # over the (lowered) size limit as written
    "w = [" + ", ".join(["1"] * 30) + "]",
    "assert f(w) == 1",
    "\uff58 = [3]",  # a fullwidth x: the name `x` once normalised (NFKC)
    "assert f(\uff58) == 3",
]


def _same(cached, whole):
    assert cached == whole
    assert [t.expected_literal for t in cached] == [t.expected_literal for t in whole]


@pytest.mark.parametrize("strict, reference", [(False, False), (True, False), (False, True), (True, True)])
def test_cached_parsing_equals_parsing_whole_on_random_suites(strict, reference, monkeypatch):
    """`reference`: the reference's reading (non-tests ignored, any operator reads as ==)."""
    monkeypatch.setattr("codea1.judge.parse.MAX_TEST_NODES", 25)  # so that random suites reach it
    rng = random.Random(1234 + strict + 2 * reference)
    reading = {"ignore_non_tests": reference, "any_operator": reference}
    cache = LineCache("f", strict=strict, **reading)
    for _ in range(3000):
        lines = [rng.choice(LINES) for _ in range(rng.randint(1, 10))]
        source = "".join(line + rng.choice(["\n", "\n", "\n", "\r\n", "\r"]) for line in lines)
        if rng.random() < 0.2:
            source = source.rstrip("\r\n")
        whole = parse_tests(source, "f", strict=strict, **reading)
        cached = parse_tests(source, "f", strict=strict, cache=cache, **reading)
        _same(cached, whole)
    assert cache.hits > cache.misses  # the cache was used, not bypassed


def test_repeated_lines_are_parsed_once():
    cache = LineCache("f")
    suite = "assert f(1) == 2\nassert f([1, 2]) == 3\n"
    for _ in range(5):
        tests = parse_tests(suite, "f", cache=cache)
        assert [(t.call, t.expected, t.line) for t in tests] == [("f(1)", "2", 1), ("f([1, 2])", "3", 2)]
    assert (cache.misses, cache.hits, len(cache)) == (2, 8, 2)
    # the same lines at other line numbers keep their own numbers
    (first, second) = parse_tests("# moved\n\nassert f([1, 2]) == 3\nassert f(1) == 2\n", "f", cache=cache)
    assert (first.line, second.line) == (3, 4)


def test_substitution_uses_the_suite_own_assignments():
    cache = LineCache("f")
    (a,) = parse_tests("x = [1]\nassert f(x) == 1\n", "f", cache=cache)
    (b,) = parse_tests("x = [2, 3]\nassert f(x) == 1\n", "f", cache=cache)
    (c,) = parse_tests("assert f(x) == 1\n", "f", cache=cache)
    assert (a.call, b.call) == ("f([1])", "f([2, 3])")
    assert c.call == "f(x)"  # unbound here: not substituted (the sandbox will raise)
    poisoned = parse_tests("x = 1 if y else 2\nx += 1\nassert f(x) == 1\n", "f", strict=False, cache=LineCache("f"))
    assert poisoned[-1].reason == parse_tests("x = 1 if y else 2\nx += 1\nassert f(x) == 1\n", "f")[-1].reason


def test_multi_line_statements_parse_the_suite_whole():
    cache = LineCache("f")
    source = "assert f([1,\n    2]) == 3\nassert f(1) == 1\n"
    tests = parse_tests(source, "f", cache=cache)
    assert [(t.call, t.line) for t in tests] == [("f([1, 2])", 1), ("f(1)", 3)]


def test_a_cache_belongs_to_one_set_of_options():
    cache = LineCache("f", strict=True)
    with pytest.raises(ValueError, match="LineCache was made for"):
        parse_tests("assert f(1) == 1\n", "f", cache=cache)
    with pytest.raises(ValueError, match="LineCache was made for"):
        parse_tests("assert g(1) == 1\n", "g", strict=True, cache=cache)


def test_dedent_is_skipped_only_where_it_changes_nothing():
    import textwrap

    from codea1.judge.parse import _Parser

    rng = random.Random(7)
    pieces = ["assert f(1) == 2", "  assert f(1) == 2", "\tassert f(2) == 3", "   ", "\t", "", "x = [1]",
              "    x = [1]", "assert f(x) == 1", "# c", "  # c"]
    for _ in range(2000):
        lines = [rng.choice(pieces) for _ in range(rng.randint(1, 6))]
        source = "".join(line + rng.choice(["\n", "\r\n", "\r"]) for line in lines)
        expected = _Parser(textwrap.dedent(source), "f").run()
        _same(parse_tests(source, "f"), expected)


def test_lines_split_as_the_tokenizer_counts_them():
    import re

    from codea1.judge.parse import _split_lines

    def by_regex(source: str) -> list[str]:
        lines, start = [], 0
        for match in re.finditer(r"\r\n|\r|\n", source):
            lines.append(source[start : match.end()])
            start = match.end()
        return lines + [source[start:]]

    rng = random.Random(3)
    alphabet = ["a", "\n", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", " "]
    for _ in range(3000):
        source = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert _split_lines(source) == by_regex(source), repr(source)
    assert _split_lines("a\u2028b\x0cc\n") == ["a\u2028b\x0cc\n", ""]  # only \r and \n end a line
