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


def test_other_decorators_are_not_cases():
    got = answer_tests(fenced("""
        import pytest

        @pytest.mark.filterwarnings("ignore")
        @pytest.mark.timeout(5)
        @pytest.mark.slow
        @pytest.mark.parametrize("x", [3])
        def test_marked(x):
            assert inc(x) == 4
    """), "inc")
    assert got == ["import pytest\nx = 3\nassert inc(x) == 4"]


def test_cases_pytest_could_not_collect_fail_and_empty_ones_give_no_test():
    """Names or cases that are not literals, or a parametrize without cases, make the test
    fail (pytest errors at collection, or codea1 cannot read them); an empty case list
    gives no test (pytest skips it)."""
    def read(decorator: str, params: str = "x") -> list[str]:
        return answer_tests(fenced(f"""
            import pytest

            {decorator}
            def test_it({params}):
                assert inc(1) == 2
        """), "inc")

    for decorator in ('@pytest.mark.parametrize("x")', '@pytest.mark.parametrize([NAME, "y"], [(1, 2)])',
                      '@pytest.mark.parametrize([1, "y"], [(1, 2)])', '@pytest.mark.parametrize("x y", [1])',
                      '@pytest.mark.parametrize("x", CASES)'):
        [test] = read(decorator)
        assert "raise TypeError(\"test_it takes ['x'] that no case gives\")" in test, decorator
    [test] = read('@pytest.mark.parametrize("", [1])', "")
    assert "raise TypeError" in test
    assert read('@pytest.mark.parametrize("x", [])') == []
    # a third positional argument (pytest's `indirect`) does not stop the cases being read
    assert [t.splitlines()[1] for t in read('@pytest.mark.parametrize("x", [1, 2], False)')] == ["x = 1", "x = 2"]
    # one name: pytest.param's value is the name's value, not a tuple of it
    assert read('@pytest.mark.parametrize("x", [pytest.param(5, marks=pytest.mark.slow)])')[0].splitlines()[1] == "x = 5"
    assert read('@pytest.mark.parametrize(["x"], [7])')[0].splitlines()[1] == "x = 7"


def test_an_indented_answer_keeps_its_context():
    answer = "```python\n    import math\n    def test_a():\n        assert inc(math.pi) > 4\n```"
    assert answer_tests(answer, "inc") == ["import math\nassert inc(math.pi) > 4"]


def test_only_a_broken_assert_on_the_function_takes_a_slot():
    got = answer_tests(fenced("""
        x = inc(1
        assert max(1, 2 == 2
        assert inc(1 == 2
        assert inc(2) == 3; y = 1
    """), "inc")
    assert got == ["assert inc(1 == 2", "assert inc(2) == 3"]


def test_a_copy_of_the_function_above_the_tests_is_left_out():
    """Models often write the program again above their test method. Fault: the copy (and
    its star imports, a syntax error inside the function a test runs in) came first, so
    the test ran on the model's copy, not the function under test, or failed to compile."""
    got = answer_tests(fenced("""
        from typing import *
        from collections import *
        import math, inc
        import inc.sub
        import os.path
        from helpers import inc
        from helpers import other as inc
        import numpy as np
        BASE = 1
        inc = None
        inc: int = 0
        (inc, other) = (1, 2)

        def inc(x):
            return x + 1

        class inc:
            pass

        def helper():
            return BASE

        def make():
            return value

        value = 2

        def test_inc():
            assert inc(1) == 2
    """), "inc")
    assert got == ["import os.path\nimport numpy as np\nBASE = 1\ndef helper():\n    return BASE\n"
                   "def make():\n    return value\nvalue = 2\nassert inc(1) == 2"]


def test_a_case_that_is_a_call_is_kept_whole_unless_it_is_pytest_param():
    got = answer_tests(fenced("""
        import math
        import pytest

        @pytest.mark.parametrize("x", [math.floor(2.5), str.upper("a"), pytest.param(3)])
        def test_it(x):
            assert inc(x) is not None
    """), "inc")
    assert [t.splitlines()[2] for t in got] == ["x = math.floor(2.5)", "x = str.upper('a')", "x = 3"]


def test_an_answer_built_to_break_the_reader_gives_failing_slots_not_a_crash():
    """Nesting past the parser's depth (a MemoryError in CPython), past `ast.unparse`'s (a
    RecursionError), or a `pytest.param()` without a value. Fault: each raised out of
    `answer_tests` and ended the evaluation."""
    too_deep = fenced("def test_a():\n    x = " + "-" * 100000 + "1\n    assert inc(x) == 1")
    assert len(answer_tests(too_deep, "inc")) == 1
    unparsable = fenced("def test_a():\n    x = " + "-" * 900 + "1\n    assert inc(x) == 1")
    assert answer_tests(unparsable, "inc") == ["raise SyntaxError('a test nested too deeply to be read')"]
    empty_param = fenced("""
        import pytest

        @pytest.mark.parametrize("x", [pytest.param()])
        def test_a(x):
            assert inc(x) == 1
    """)
    [test] = answer_tests(empty_param, "inc")
    assert "raise TypeError" in test
