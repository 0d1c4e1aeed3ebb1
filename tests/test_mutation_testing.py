"""Mutation testing on the real sandboxed executor: kills, survivors, equivalents, hangs."""

from __future__ import annotations

import time

import pytest

from codea1.eval.mutation import generate_mutants
from codea1.eval.mutation_testing import MutationConfig, analyse, first_failure_program, harness, run_tests, wrap_test

IS_PRIME = '''
def is_prime(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True
'''


def truth(n):
    return n > 1 and all(n % d for d in range(2, n))


GOLDEN = [f"assert is_prime({n}) == {truth(n)}" for n in range(30)]


@pytest.fixture(scope="module")
def executor():
    from codea1.sandbox import Executor

    with Executor(workers=2) as ex:
        yield ex


def test_test_function_wraps_snippets_and_refuses_non_tests():
    text = wrap_test(3, "x = [1, 2]\nassert f(x) == 3")
    assert text.startswith("def __codea1_test_3():\n    x = [1, 2]\n")
    with pytest.raises(ValueError, match="does not parse"):
        wrap_test(0, "assert f(")
    with pytest.raises(ValueError, match="may not return"):
        wrap_test(0, "return 1")
    with pytest.raises(ValueError, match="may not return"):
        wrap_test(0, "for i in range(3):\n    yield i")
    # a helper inside the test may return
    wrap_test(0, "def g():\n    return 2\nassert g() == 2")
    program, calls, errors = harness("def f(x): return x", ["assert f(1) == 1", "assert (", "assert f(2) == 2"])
    assert calls == ["__codea1_test_0()", "", "__codea1_test_2()"]
    assert errors[0] is None and "does not parse" in errors[1] and errors[2] is None
    assert "def __codea1_test_1" not in program


def test_first_failure_program_names_the_first_failing_test(executor):
    from codea1.sandbox import Job

    text = first_failure_program(IS_PRIME, ["assert is_prime(7)", "assert is_prime(8)", "assert is_prime(9)"])
    run = executor.run(Job(program=text, calls=["__codea1_first_failure()"]))
    assert run.calls[0].status == "ok" and run.calls[0].value == ["int", "1"]
    with pytest.raises(ValueError, match="must parse"):
        first_failure_program(IS_PRIME, ["assert ("])


def test_run_tests_reports_each_test(executor):
    passed, errors, _ = run_tests(executor, IS_PRIME, ["assert is_prime(7)", "assert is_prime(8)", "assert is_prime("])
    assert passed == [True, False, False]
    assert errors[0] is None and errors[1].startswith("AssertionError") and "does not parse" in errors[2]


def test_scores_kills_and_classifies_survivors(executor):
    tests = [
        "assert is_prime(2) == True",
        "assert is_prime(9) == False",
        "assert is_prime(1) == False",
        "assert is_prime(4) == True",  # wrong: fails on the reference, must not count as a killer
        "x = 17\nassert is_prime(x)",
        "assert is_prime(",  # does not parse
    ]
    mutants = generate_mutants(IS_PRIME)
    report = analyse(executor, IS_PRIME, tests, mutants=mutants, golden_tests=GOLDEN)
    assert report.test_passes_reference == [True, True, True, False, True, False]
    assert report.total == len(mutants) and report.killed < report.total
    for o in report.outcomes:
        assert o.killed_by not in (3, 5)  # the wrong and the broken test never kill
        if o.status != "killed":
            assert o.killed_by is None
    by_desc = {o.mutant.description: o for o in report.outcomes}
    # `i = 3` instead of 2 only shows on 4: the golden tests kill it, the scored ones do not
    assert by_desc["line 5: 2 -> 3"].status == "survived"
    # `i * i` -> `i + i` is equivalent for n >= 2 (only differs when i*i and i+i straddle n
    # before a divisor is found): nothing kills it
    assert by_desc["line 6: * -> +"].status == "equivalent-looking"
    # `n < 2` -> `n <= 2` makes 2 non-prime: test 0 kills it
    assert by_desc["line 3: < -> <="].killed_by == 0
    # `i += 1` -> `i += 0` hangs on 9: killed by the time-out, no test to name
    hang = by_desc["line 9: 1 -> 0"]
    assert hang.status == "killed" and hang.killed_by is None and "hangs" in hang.detail
    assert report.score == pytest.approx(100 * report.killed / report.total)
    killable = report.total - report.equivalent_looking  # equivalent-looking mutants: no test can kill them
    assert 100.0 * report.killed / killable > report.score


def test_hanging_mutants_are_killed_within_the_call_budget(executor):
    ref = "def count(n):\n    i = 0\n    while i < n:\n        i = i + 1\n    return i\n"
    mutants = [m for m in generate_mutants(ref, ["number"]) if "i +  0" in m.source]  # Cosmic-Ray's " 0"
    assert len(mutants) == 1  # `i = i + 0` never ends
    started = time.monotonic()
    report = analyse(executor, ref, ["assert count(3) == 3", "assert count(0) == 0"], mutants=mutants,
                     config=MutationConfig(call_timeout_s=0.5))
    assert report.outcomes[0].status == "killed" and "hangs" in report.outcomes[0].detail
    assert time.monotonic() - started < 15


def test_no_passing_test_kills_nothing(executor):
    report = analyse(executor, IS_PRIME, ["assert is_prime(4)"], golden_tests=GOLDEN)
    assert report.test_passes_reference == [False]
    assert report.killed == 0 and report.score == 0.0
    assert {o.status for o in report.outcomes} <= {"survived", "equivalent-looking"}
    assert any(o.status == "survived" for o in report.outcomes)


def test_golden_program_classifies_survivors(executor):
    ref = "def absdiff(a, b):\n    return a - b if a > b else b - a\n"
    program = ("def check(f):\n    for a in range(-3, 4):\n        for b in range(-3, 4):\n"
               "            assert f(a, b) == abs(a - b)\n\ncheck(absdiff)\n")
    report = analyse(executor, ref, ["assert absdiff(1, 1) == 0"], golden_program=program)
    statuses = {o.mutant.description: o.status for o in report.outcomes}
    assert statuses["line 2: > -> >="] == "equivalent-looking"  # a == b gives 0 either way
    # two mutants share this description: `a + b` (a > b, untested: survives), `b + a` (gives 2: killed)
    assert [o.status for o in report.outcomes if o.mutant.description == "line 2: - -> +"] == ["survived", "killed"]
    assert "survived" in statuses.values()


# --- mut@k pinned on small functions, every mutant counted by hand ----------------------
# Each table is (operator, outcome) per mutant in position order, derived on paper from
# the one test; the engine must produce exactly these mutants and these kills.

INC = "def inc(x):\n    return x + 1\n"
# inc(0) == 1: x - 1 = -1, x * 1 = 0, x / 1 = 0.0, x // 1 = 0, x % 1 = 0, x ** 1 = 0,
# x >> 1 = 0, x << 1 = 0, x & 1 = 0 fail; x | 1 = 1 and x ^ 1 = 1 pass; 1 -> 2 gives 2,
# 1 -> 0 gives 0: killed.
INC_TABLE = (
    [(f"ReplaceBinaryOperator_Add_{op}", "survived" if op in ("BitOr", "BitXor") else "killed")
     for op in ("Sub", "Mul", "Div", "FloorDiv", "Mod", "Pow", "RShift", "LShift", "BitOr", "BitAnd", "BitXor")]
    + [("NumberReplacer", "killed"), ("NumberReplacer", "killed")]
)

ABC = "def f(a, b, c):\n    return a + b - c\n"
# f(1, 2, 3) == 0. Text edits re-parse, so `+` -> `|` is `a | (b - c)` = 1 | -1 = -1
# (killed) and `+` -> `^` is 1 ^ -1 = -2 (killed); `+` -> `>>`/`<<` shift by -1 and
# raise (killed); the others of `a ? b - c` are not 0. For `-`: `(a + b) >> c` = 3 >> 3
# and `(a + b) ^ c` = 3 ^ 3 are 0 (survive); `a + b % c` = 3 and the rest are not 0.
ABC_TEXT = (
    [(f"ReplaceBinaryOperator_Sub_{op}", "survived" if op in ("RShift", "BitXor") else "killed")
     for op in ("Add", "Mul", "Div", "FloorDiv", "Mod", "Pow", "RShift", "LShift", "BitOr", "BitAnd", "BitXor")]
    + [(f"ReplaceBinaryOperator_Add_{op}", "killed")
       for op in ("Sub", "Mul", "Div", "FloorDiv", "Mod", "Pow", "RShift", "LShift", "BitOr", "BitAnd", "BitXor")]
)
# The tree style keeps the grouping: (a | b) - c = 0 and (a ^ b) - c = 0 survive, and so
# does (a + b) % c = 0.
ABC_TREE_SURVIVORS = {"ReplaceBinaryOperator_Sub_RShift", "ReplaceBinaryOperator_Sub_BitXor",
                      "ReplaceBinaryOperator_Sub_Mod", "ReplaceBinaryOperator_Add_BitOr",
                      "ReplaceBinaryOperator_Add_BitXor"}

NEQ = "def g(x):\n    return x != -1\n"
# g(5) is True. `!=` -> `==`, `<`, `<=`, `is` give False (killed); `>`, `>=`, `is not`
# give True. `-1` -> `+1`, `~1`, `1` (deleted), `-2`, `-0`: 5 differs from each (survive).
# `-` -> `not ` makes `x != not 1`, a syntax error: killed (Cosmic-Ray's pytest run fails
# to collect). The tree style's `x != (not 1)` is `5 != False`, True: it survives.
NEQ_TEXT = (
    [(f"ReplaceComparisonOperator_NotEq_{op}", "killed" if op in ("Eq", "Lt", "LtE", "Is") else "survived")
     for op in ("Eq", "Lt", "LtE", "Gt", "GtE", "Is", "IsNot")]
    + [("ReplaceUnaryOperator_USub_UAdd", "survived"), ("ReplaceUnaryOperator_USub_Invert", "survived"),
       ("ReplaceUnaryOperator_USub_Not", "killed"), ("ReplaceUnaryOperator_Delete_USub", "survived"),
       ("NumberReplacer", "survived"), ("NumberReplacer", "survived")]
)

PINNED = {"inc": (INC, ["assert inc(0) == 1"], INC_TABLE),
          "abc": (ABC, ["assert f(1, 2, 3) == 0"], ABC_TEXT),
          "neq": (NEQ, ["assert g(5) is True"], NEQ_TEXT)}


def outcome_table(executor, code, tests, style="text"):
    mutants = generate_mutants(code, style=style, dedupe=False)
    report = analyse(executor, code, tests, mutants=mutants)
    return [(o.mutant.operator, "killed" if o.status == "killed" else "survived") for o in report.outcomes], report


@pytest.mark.parametrize("name", sorted(PINNED))
def test_mut_at_k_pinned_on_hand_counted_mutants(executor, name):
    code, tests, expected = PINNED[name]
    got, report = outcome_table(executor, code, tests)
    assert sorted(got) == sorted(expected)
    killed = sum(o == "killed" for _, o in expected)
    assert (report.total, report.killed) == {"inc": (13, 11), "abc": (22, 20), "neq": (13, 5)}[name]
    assert report.score == pytest.approx(100.0 * killed / len(expected))


def test_pinned_mutants_are_the_programs_counted_by_hand():
    ops = ["-", "*", "/", "//", "%", "**", ">>", "<<", "|", "&", "^"]
    assert [m.source for m in generate_mutants(INC, dedupe=False)] == (
        [f"def inc(x):\n    return x {op} 1\n" for op in ops]
        + ["def inc(x):\n    return x +  2\n", "def inc(x):\n    return x +  0\n"])  # Cosmic-Ray's " " + str
    assert [m.source for m in generate_mutants(NEQ, ["number"], dedupe=False)] == [
        "def g(x):\n    return x != - 2\n", "def g(x):\n    return x != - 0\n"]


def test_tree_style_keeps_the_written_grouping(executor):
    got, report = outcome_table(executor, ABC, ["assert f(1, 2, 3) == 0"], style="tree")
    assert {op for op, o in got if o == "survived"} == ABC_TREE_SURVIVORS
    assert (report.total, report.killed) == (22, 17)
    got, report = outcome_table(executor, NEQ, ["assert g(5) is True"], style="tree")
    assert dict(got)["ReplaceUnaryOperator_USub_Not"] == "survived" and report.killed == 4


def test_syntax_error_mutants_are_killed_without_a_run(executor):
    mutants = generate_mutants(NEQ, ["unary"], dedupe=False)
    broken = [m for m in mutants if not m.compiles]
    assert [m.source for m in broken] == ["def g(x):\n    return x != not 1\n"]
    report = analyse(executor, NEQ, ["assert g(5) is True"], mutants=broken)
    assert report.outcomes[0].status == "killed" and "does not compile" in report.outcomes[0].detail


def test_header_runs_before_the_reference_and_every_mutant(executor):
    code = "def area(r):\n    return math.pi * r ** 2\n"  # `math` only comes from the header
    bare = analyse(executor, code, ["assert area(1) == math.pi"])
    assert bare.test_passes_reference == [False]
    report = analyse(executor, code, ["assert area(1) == math.pi"], header="import math\n")
    assert report.test_passes_reference == [True]
    # pi / 1 ** 2 == pi: that mutant survives only if it, too, ran after the header
    by_op = {o.mutant.operator: o.status for o in report.outcomes}
    assert by_op["ReplaceBinaryOperator_Mul_Div"] == "survived"
    assert by_op["ReplaceBinaryOperator_Mul_Add"] == "killed"


def _cosmic_ray_bin():
    import shutil
    import sys
    from pathlib import Path

    sibling = Path(sys.executable).parent / "cosmic-ray"
    found = shutil.which("cosmic-ray") or (str(sibling) if sibling.is_file() else None)
    if found is None:
        pytest.skip("cosmic-ray is not installed (pip install -e '.[crosscheck]')")
    return Path(found)


@pytest.mark.parametrize("name", ["abc", "neq"])
def test_pinned_outcomes_match_cosmic_ray_mutant_by_mutant(name):
    """Cosmic-Ray 8.7 itself, run the way UnLeakedTestBench runs it (pytest on test.py),
    gives the hand-counted table: the same mutants, the same kills (neq's `x != not 1`
    included: pytest cannot collect it, Cosmic-Ray reports KILLED)."""
    import importlib.util
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "cosmic_ray_crosscheck.py"
    spec = importlib.util.spec_from_file_location("cosmic_ray_crosscheck_bench", script)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclass looks itself up there
    spec.loader.exec_module(bench)
    code, tests, expected = PINNED[name]
    baseline_ok, mutants = bench.cosmic_ray(_cosmic_ray_bin(), code, tests, timeout=10.0)
    assert baseline_ok
    assert all(m.worker_outcome == "NORMAL" and m.test_outcome in ("KILLED", "SURVIVED") for m in mutants)
    got = sorted((m.operator, "killed" if m.killed else "survived") for m in mutants)
    assert got == sorted(expected)
    # and its baseline refuses a failing test, as UnLeakedTestBench's task filter needs
    assert bench.cosmic_ray(_cosmic_ray_bin(), code, ["assert False"], timeout=10.0) == (False, [])


def test_how_much_a_reference_prints_never_decides_a_verdict(executor):
    """pytest captures whatever the code prints, so under UnLeakedTestBench's harness a
    reference that prints 100 KB (1000 lines of 100 bytes) still passes a right test, and a
    mutant is killed only by a failing test. Hand count of the 27 mutants: `'x' OP 99` for
    the 11 other operators raises TypeError (str with int): killed; 99 -> 100 or 98 prints
    another amount and still returns 1001: survives; of `return n + 1` at n = 1000, `|` and
    `^` give 1001 (1000 is even) and survive, the 9 other swaps and 1 -> 2 / 1 -> 0 do not;
    `for i in []` returns 1001: survives. 5 survivors, 22 killed, all by the failing test."""
    from codea1.eval.line_coverage import line_coverage

    ref = "def f(n):\n    for i in range(n):\n        print('x' * 99)\n    return n + 1\n"
    test = "assert f(1000) == 1001"
    report = analyse(executor, ref, [test], mutants=generate_mutants(ref, dedupe=False))
    assert report.test_passes_reference == [True]
    survivors = sorted(o.mutant.description for o in report.outcomes if o.status != "killed")
    assert survivors == ["line 2: loop over []", "line 3: 99 -> 100", "line 3: 99 -> 98", "line 4: + -> ^",
                         "line 4: + -> |"]
    assert report.killed == 22
    assert all(o.detail == "a test failed" for o in report.outcomes if o.status == "killed")
    cover = line_coverage(executor, ref, [test])
    assert (cover.statements, cover.covered) == (4, 4)  # def, for, print, return: all run
