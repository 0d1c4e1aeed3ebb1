"""How `eval tests` reads a test model's answer (`codea1.eval.answer_tests`): no sandbox,
only which snippets come out, in which order."""

from __future__ import annotations

import textwrap

from codea1.eval.answer_tests import answer_tests


def fenced(code: str) -> str:
    return "Tests:\n```python\n" + textwrap.dedent(code).strip("\n") + "\n```\nDone."


def test_bare_asserts_come_out_of_the_judges_parser_in_order():
    got = answer_tests(fenced("""
        x = 4
        assert inc(x) == 5
        assert inc(1) > 0
        assert abs(-1) == 1
        print('hi')
    """), "inc")
    assert got == ["assert inc(4) == 5", "assert inc(1) > 0"]


def test_a_test_function_gives_one_test_per_direct_assert_with_its_set_up():
    got = answer_tests(fenced("""
        import math
        from typing import List
        BASE = 2

        def helper(v):
            return v * BASE

        def test_inc():
            a = inc(1)
            assert a == 2
            b = helper(a)
            assert inc(b) == 5
            if a:
                assert inc(0) == 1
            assert math.floor(inc(0.5)) == 1
    """), "inc")
    context = "import math\nfrom typing import List\nBASE = 2\ndef helper(v):\n    return v * BASE\n"
    assert got == [
        context + "a = inc(1)\nassert a == 2",
        context + "a = inc(1)\nb = helper(a)\nassert inc(b) == 5",
        # the `if` block is set-up, not a test: only asserts written directly in the body count
        context + "a = inc(1)\nb = helper(a)\nif a:\n    assert inc(0) == 1\nassert math.floor(inc(0.5)) == 1",
    ]


def test_only_what_is_above_a_test_function_is_its_context():
    got = answer_tests(fenced("""
        def test_first():
            assert inc(1) == 2

        LATE = 3

        def test_second():
            assert inc(LATE) == 4

        def test_third():
            assert inc(0) == 1
    """), "inc")
    assert got == ["assert inc(1) == 2", "LATE = 3\nassert inc(LATE) == 4", "LATE = 3\nassert inc(0) == 1"]


def test_a_test_that_never_names_the_function_is_not_counted():
    got = answer_tests(fenced("""
        def test_unrelated():
            assert max(1, 2) == 2
            assert inc(1) == 2

        def check_helper():
            assert inc(5) == 6

        class TestInc:
            def test_method(self):
                assert inc(2) == 3

        async def test_async():
            assert inc(3) == 4
    """), "inc")
    # `check_helper` is a helper (pytest collects `test*` only); classes and coroutines are not read
    assert got == ["assert inc(1) == 2"]


def test_parametrize_gives_one_test_per_case():
    got = answer_tests(fenced("""
        import pytest

        @pytest.mark.parametrize("x", [1, 2])
        def test_one_name(x):
            assert inc(x) == x + 1

        @pytest.mark.parametrize(("x", "want"), [(0, 1), pytest.param(5, 6, id="five")])
        def test_names_as_a_tuple(x, want):
            assert inc(x) == want

        @pytest.mark.parametrize("y", ["a", "b"])
        @pytest.mark.parametrize("x", [7, 8])
        def test_stacked(x, y):
            assert inc(x) > 0
    """), "inc")
    bodies = [t.removeprefix("import pytest\n") for t in got]
    assert bodies[:4] == ["x = 1\nassert inc(x) == x + 1", "x = 2\nassert inc(x) == x + 1",
                          "x, want = (0, 1)\nassert inc(x) == want", "x, want = (5, 6)\nassert inc(x) == want"]
    assert sorted(bodies[4:]) == sorted(f"y = '{y}'\nx = {x}\nassert inc(x) > 0" for y in "ab" for x in (7, 8))


def test_a_test_needing_what_is_not_given_fails_where_pytest_would_error():
    got = answer_tests(fenced("""
        import pytest

        def test_fixture(tmp_path):
            assert inc(1) == 2

        CASES = [1, 2]

        @pytest.mark.parametrize("x", CASES)
        def test_cases_by_name(x):
            assert inc(x) > 0
    """), "inc")
    assert len(got) == 2
    assert "raise TypeError(\"test_fixture takes ['tmp_path'] that no case gives\")\nassert inc(1) == 2" in got[0]
    assert "raise TypeError" in got[1] and got[1].endswith("assert inc(x) > 0")


def test_an_answer_that_does_not_parse_is_read_statement_by_statement():
    got = answer_tests(fenced("""
        import math
        def test_ok():
            assert inc(1) == 2
        def test_broken(:
            assert inc(2) == 3
        def test_other_broken(:
            pass
        assert inc(3) == 4
    """), "inc")
    # no context (the whole does not parse); a broken test function that names the function keeps a slot
    assert got == ["assert inc(1) == 2", "def test_broken(:\n    assert inc(2) == 3", "assert inc(3) == 4"]


def test_the_limit_counts_tests_not_statements():
    answer = fenced("""
        def test_a():
            assert inc(1) == 2
            assert inc(2) == 3
        assert inc(3) == 4
    """)
    assert answer_tests(answer, "inc", 1) == ["assert inc(1) == 2"]
    assert answer_tests(answer, "inc", 2) == ["assert inc(1) == 2", "assert inc(2) == 3"]
    assert len(answer_tests(answer, "inc")) == 3
    assert answer_tests("no tests here", "inc") == []


def test_an_indented_answer_is_read_as_written():
    answer = "```python\n    def test_a():\n        r = inc(1)\n        assert r == 2\n```"
    assert answer_tests(answer, "inc") == ["r = inc(1)\nassert r == 2"]
