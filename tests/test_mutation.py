"""The mutation engine: Cosmic-Ray's operator families, text and tree edits, deduplication,
validity."""

from __future__ import annotations

import ast

import pytest

from codea1.eval.mutation import FAMILIES, generate_mutants, iter_mutations


def sources(code: str, family: str, style: str = "text") -> set[str]:
    """The mutants' programs, normalized (text edits keep the author's spacing)."""
    return {norm(m.source) if m.compiles else m.source for m in generate_mutants(code, [family], style=style)}


def norm(code: str) -> str:
    return ast.unparse(ast.parse(code))


def test_binary_operator_replaced_by_every_other():
    got = sources("x = a + b", "binary")
    assert len(got) == 11
    assert norm("x = a - b") in got and norm("x = a ** b") in got and norm("x = a ^ b") in got
    assert norm("x = a + b") not in got


def test_augmented_assignment_and_star_args_are_not_binary_operators():
    assert sources("x += 1\ndef f(*a, **k):\n    return a", "binary") == set()


def test_comparison_rules_follow_cosmic_ray():
    # against a name: every other of == != < <= > >= is, is not
    assert len(sources("r = a < b", "comparison")) == 7
    # against a number: no identity comparisons
    got = sources("r = a == 0", "comparison")
    assert got == {norm(f"r = a {op} 0") for op in ("!=", "<", "<=", ">", ">=")}
    # against None: only the swap that stays meaningful
    assert sources("r = a == None", "comparison") == {norm("r = a is not None")}
    assert sources("r = a is None", "comparison") == {norm("r = a is not None")}
    # membership is not in Cosmic-Ray's comparison set
    assert sources("r = a in b", "comparison") == set()


def test_chained_comparison_mutates_each_operator():
    got = sources("r = 0 < x < n", "comparison")
    assert norm("r = 0 > x < n") in got
    assert norm("r = 0 < x > n") in got


def test_unary_operators():
    got = sources("y = -x", "unary")
    assert got == {norm("y = +x"), norm("y = ~x"), norm("y = not x"), norm("y = x")}
    assert sources("y = not x", "unary") == {norm("y = x")}
    assert sources("y = +x", "unary") == {norm("y = -x"), norm("y = ~x"), norm("y = not x")}


def test_boolean_constants_and_connectives():
    assert sources("f = True", "boolean") == {norm("f = False")}
    assert sources("f = False", "boolean") == {norm("f = True")}
    # one mutant per keyword, with the precedence the edited text would have
    got = sources("r = a and b and c", "boolean")
    assert got == {norm("r = a or b and c"), norm("r = a and b or c")}
    got = sources("r = a or b or c", "boolean")
    assert got == {norm("r = a and b or c"), norm("r = a or b and c")}


def test_add_not_on_conditions():
    code = "def f(x):\n    if x > 1:\n        return 1\n    while x:\n        x -= 1\n    assert x == 0\n    return 2 if x else 3\n"
    got = sources(code, "add_not")
    assert len(got) == 4
    assert any("if not x > 1" in s for s in got)
    assert any("while not x" in s for s in got)
    assert any("assert not x == 0" in s for s in got)
    assert any("2 if not x else 3" in s for s in got)


def test_add_not_binds_like_the_text_cosmic_ray_edits():
    # `not` written before `a and b` negates `a` only; parentheses keep the whole condition
    assert sources("if a and b:\n    pass", "add_not") == {norm("if not a and b:\n    pass")}
    assert sources("if (a and b) or c:\n    pass", "add_not") == {norm("if not (a and b) or c:\n    pass")}
    assert sources("if (a and b or c):\n    pass", "add_not") == {norm("if not (a and b or c):\n    pass")}
    assert sources("if (\n    a and b\n):\n    pass", "add_not") == {norm("if not (a and b):\n    pass")}
    assert sources("y = p if a or b else q", "add_not") == {norm("y = p if not a or b else q")}


def test_operator_names_are_cosmic_rays():
    names = {m.operator for m in generate_mutants("x = a * b", ["binary"])}
    assert "ReplaceBinaryOperator_Mul_Add" in names and not any("Mult" in n for n in names)


def test_add_not_skips_elif_like_cosmic_ray_but_not_a_nested_if():
    code = "if a:\n    x = 1\nelif b:\n    x = 2\nelse:\n    if c:\n        x = 3\n"
    got = sources(code, "add_not")
    assert len(got) == 2
    assert any("if not a:" in s for s in got) and any("if not c:" in s for s in got)


def test_numbers_shifted_by_one_both_ways():
    assert sources("x = 1", "number") == {norm("x = 2"), norm("x = 0")}
    assert sources("x = 4.5", "number") == {norm("x = 5.5"), norm("x = 3.5")}
    assert sources("x = 0", "number") == {norm("x = 1"), norm("x = -1")}
    # booleans are not numbers here; strings neither
    assert sources("x = True\ny = 'a'", "number") == set()


def test_break_continue_and_zero_iteration_loop():
    code = "for i in range(3):\n    if i:\n        break\n    continue\n"
    got = sources(code, "break_continue")
    assert norm(code.replace("break", "continue")) in got
    assert norm("for i in range(3):\n    if i:\n        break\n    break\n") in got
    assert sources(code, "zero_iteration_loop") == {norm(code.replace("range(3)", "[]"))}


def test_exception_handler_stops_matching():
    code = "try:\n    g()\nexcept (KeyError, ValueError):\n    pass\n"
    # Cosmic-Ray's text: the class becomes a name nothing defines
    assert sources(code, "exception") == {
        norm(code.replace("KeyError", "CosmicRayTestingException")),
        norm(code.replace("ValueError", "CosmicRayTestingException"))}
    got = sources(code, "exception", style="tree")
    assert got == {norm(code.replace("(KeyError, ValueError)", "(ValueError,)")),
                   norm(code.replace("(KeyError, ValueError)", "(KeyError,)"))}
    single = sources("try:\n    g()\nexcept KeyError:\n    pass\n", "exception", style="tree")
    assert single == {norm("try:\n    g()\nexcept ():\n    pass\n")}
    assert sources("try:\n    g()\nexcept:\n    pass\n", "exception") == set()


def test_decorator_removed():
    code = "@a\n@b\ndef f():\n    pass\n"
    assert sources(code, "decorator") == {norm("@b\ndef f():\n    pass\n"), norm("@a\ndef f():\n    pass\n")}


def test_duplicates_collapse_and_identity_mutants_are_dropped():
    # dropping either of two identical classes gives one program
    code = "try:\n    g()\nexcept (KeyError, KeyError):\n    pass\n"
    assert len(list(iter_mutations(code, ["exception"], style="tree"))) == 2
    assert len(generate_mutants(code, ["exception"], style="tree")) == 1
    # inf + 1 == inf: both number mutations unparse to the original and are dropped
    assert len(list(iter_mutations("x = 1e999", ["number"], style="tree"))) == 2
    assert generate_mutants("x = 1e999", ["number"], style="tree") == []
    # Cosmic-Ray counts every mutation: without dedupe nothing is dropped
    assert len(generate_mutants(code, ["exception"], style="tree", dedupe=False)) == 2
    assert len(generate_mutants("x = 1e999", ["number"], dedupe=False)) == 2


def test_every_mutant_compiles_differs_and_is_unique():
    code = '''
import math

def solve(xs, k=2):
    """Sum of the k largest positives, or -1."""
    best = sorted((x for x in xs if x > 0 and not math.isnan(x)), reverse=True)
    if len(best) < k or k <= 0:
        return -1
    total = 0
    for i, v in enumerate(best):
        if i >= k:
            break
        total += v * 1
    try:
        return int(total) // 1
    except (OverflowError, ValueError):
        return None
'''
    mutants = generate_mutants(code)
    original = norm(code)
    srcs = [m.source for m in mutants]
    assert len(srcs) == len(set(srcs))
    assert original not in srcs
    for m in mutants:
        compile(m.source, "<m>", "exec")
        assert m.family in FAMILIES and m.lineno >= 1 and m.description.startswith(f"line {m.lineno}:")
    families = {m.family for m in mutants}
    assert {"binary", "comparison", "unary", "boolean", "add_not", "number",
            "break_continue", "zero_iteration_loop", "exception"} <= families
    assert [m.index for m in mutants] == list(range(len(mutants)))
    assert [(m.lineno, m.col) for m in mutants] == sorted((m.lineno, m.col) for m in mutants)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="does not parse"):
        generate_mutants("def f(:\n")
    with pytest.raises(ValueError, match="unknown mutation families"):
        generate_mutants("x = 1", ["bogus"])


def test_text_edits_rebind_by_the_new_operators_precedence():
    # Cosmic-Ray swaps the token and re-parses: `a + b - c` with + -> | is `a | (b - c)`
    text = sources("x = a + b - c", "binary")
    assert norm("x = a | (b - c)") in text and norm("x = (a | b) - c") not in text
    tree = sources("x = a + b - c", "binary", style="tree")
    assert norm("x = (a | b) - c") in tree and norm("x = a | (b - c)") not in tree
    # a parenthesized operand keeps its parentheses in the text
    assert norm("x = (a + b) | c") in sources("x = (a + b) - c", "binary")
    # unary `-` -> `not ` re-binds too: `not a + b` is `not (a + b)`
    assert norm("y = not a + b") in sources("y = -a + b", "unary")
    assert norm("y = (not a) + b") in sources("y = -a + b", "unary", style="tree")


def test_text_edits_that_do_not_parse_are_mutants_that_do_not_compile():
    mutants = generate_mutants("ok = x != -1", ["unary"])
    broken = [m for m in mutants if not m.compiles]
    assert [m.source for m in broken] == ["ok = x != not 1"]
    assert all(m.compiles for m in generate_mutants("ok = x != -1", ["unary"], style="tree"))
    with pytest.raises(ValueError, match="unknown mutation style"):
        generate_mutants("x = 1", style="bogus")


def test_text_mutants_follow_cosmic_rays_spelling():
    # NumberReplacer writes " " + str(value), AddNot " not" after the keyword
    assert [m.source for m in generate_mutants("x = f(1)", ["number"])] == ["x = f( 2)", "x = f( 0)"]
    assert [m.source for m in generate_mutants("if(a):\n    pass\n", ["add_not"])] == ["if not(a):\n    pass\n"]
    # positions are characters, not bytes: a non-ASCII string before the operator
    assert [m.source for m in generate_mutants("s = 'é' + t", ["binary"])][0] == "s = 'é' - t"
