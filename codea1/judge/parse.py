"""Turn the test code a model wrote into tests the judge can run, exactly as the spec says.

A test is a top-level statement `assert CALL == EXPECTED` whose left side is a call
expression. Simple assignments before it (`x = [1, 2]` then `assert f(x) == 3`) are
substituted into the call, so every test is one self-contained expression that the
sandbox can evaluate on its own (and that a Mistake Book can store). Import statements
are substitutions too (`import math` makes `math` stand for `__import__('math')`), and
an import of the function under test itself (`from solution import f`) is ignored.
Everything else (loops, function definitions, prints, other comparisons, code that does
not parse) is one invalid test each, with a reason a user can read. In strict mode (what
the judge uses) a test may moreover only build data, since all tests of a candidate share
one process (see `parse_tests`).

Parsing is pure AST work: nothing written by the model is executed here.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from codea1.judge.extract import extract_test_source, python_test_source
from codea1.sandbox.values import to_source

__all__ = ["LineCache", "ParsedTest", "completion_cache", "parse_completion", "parse_tests", "normalize_assert",
           "MAX_TEST_NODES"]

# An assignment bigger than this, or a test that substitution makes bigger than this, is
# refused: chained assignments (`b = [a, a]; c = [b, b]; ...`) would otherwise grow
# exponentially in the trusted parent. (A test written out that big is bounded by its text.)
MAX_TEST_NODES = 20_000

# How many top-level lines a statement may span when re-synchronising after a syntax error.
_MAX_STATEMENT_LINES = 200

_OPERATORS = {
    ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}

#: What parsing untrusted text can raise besides a SyntaxError: a null byte (ValueError), nesting
#: too deep for the parser (MemoryError, RecursionError), a literal too large (OverflowError).
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


@dataclass(frozen=True, slots=True)
class ParsedTest:
    """One test-like statement of a test completion.

    `call` and `expected` are the substituted expressions of a well-formed test (`call`
    normalised by `ast.unparse`); `reason` says why a statement is not one (then both are
    None). `expected_literal` holds `(value,)` when EXPECTED is a plain literal, read as
    `ast.literal_eval` reads it (no code runs), so the judge need not evaluate it in a sandbox.
    `call_apart` / `expected_apart` (outside `strict` mode): the expression uses more than the
    function, safe builtins and modules (so it might change what other tests see), and the
    judge evaluates it in a fork of its own.
    """

    source: str
    line: int
    call: str | None = None
    expected: str | None = None
    reason: str | None = None
    expected_literal: tuple[Any] | None = field(default=None, compare=False, repr=False)
    call_apart: bool = False
    expected_apart: bool = False

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def normalized(self) -> str | None:
        """The substituted assert as written by the model (None if unparsable)."""
        if self.call is None or self.expected is None:
            return None
        return f"assert {self.call} == {self.expected}"

    def at(self, line: int) -> "ParsedTest":
        """The same test on another line (results of the line cache are shared)."""
        if line == self.line:
            return self
        return ParsedTest(self.source, line, self.call, self.expected, self.reason, self.expected_literal,
                          self.call_apart, self.expected_apart)


def normalize_assert(call: str, expected: str) -> str:
    """The canonical text of `assert CALL == EXPECTED`, as stored in a Mistake Book."""
    return f"assert {call} == {expected}"


def corrected_test(call: str, value: list) -> str | None:
    """The corrected test `assert CALL == VALUE`, as shown and stored in a Mistake Book: an
    instance of the program's class is written as an expression that builds it, so the
    stored text runs and means the reference's value (`to_source(build_objects=True)`).
    None for a value with no such text (known by its digest: it never enters the book)."""
    return corrected_of(call, rendered(value, build_objects=True))


def rendered(value: list, build_objects: bool = False, check: bool = True) -> str | None:
    """`to_source(value, build_objects, check)`, or None for a value with no such text."""
    try:
        return to_source(value, build_objects, check)
    except ValueError:
        return None


def corrected_of(call: str, source: str | None) -> str | None:
    """`corrected_test` of a value whose `rendered(build_objects=True)` text is `source`."""
    return None if source is None else normalize_assert(call, source)


#: How many characters of a value a reason or a failure shows. They are for people (the
#: `codea1 judge` table, logs); a value of 16 MiB written out whole made reasons of
#: megabytes. The corrected test, which a Mistake Book stores and replays, always holds the
#: whole value (`corrected_test`).
SHOWN_CHARS = 200


def shortened(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text`, or its first `limit` characters and its length when it is longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def shown_value(value: list) -> str:
    """A reference value as a reason shows it (an instance as `TypeName(attribute=value)`),
    `shortened`."""
    return shown_of(rendered(value))


def shown_of(source: str | None) -> str:
    """`shown_value` of a value whose `rendered` text is `source`."""
    if source is None:  # (a value known by its digest, too large to write out)
        return "<a value too large to show>"
    return shortened(source)


def wrong_value(value: list) -> str:
    """How a test failed whose call returned `value`, not the reference's (`shortened`)."""
    return wrong_of(value, rendered(value))


def wrong_of(value: list, source: str | None) -> str:
    """`wrong_value` of `value`, whose `rendered` text is `source`."""
    if source is None:
        kind = value[1] if isinstance(value, list) and len(value) > 1 else "?"
        return f"wrong value (a {kind} that equals nothing here)"
    return f"wrong value: {shortened(source)}"


@dataclass
class _Env:
    """Names bound by earlier assignments/imports, with the size of what they stand for."""

    values: dict[str, ast.expr] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    names: dict[str, frozenset[str]] = field(default_factory=dict)  # names loaded by each value
    refused: set[str] = field(default_factory=set)  # bound by an assignment that was refused

    def bind(self, name: str, expr: ast.expr, size: int, names: frozenset[str]) -> None:
        self.values[name], self.sizes[name], self.names[name] = expr, size, names
        self.refused.discard(name)

    def refuse(self, name: str) -> None:
        for table in (self.values, self.sizes, self.names):
            table.pop(name, None)  # type: ignore[attr-defined]
        self.refused.add(name)


@dataclass
class _Substituted:
    """An expression after substitution, with its size and the names it loads."""

    expr: ast.expr
    size: int
    names: frozenset[str]
    changed: bool


class _Substitute(ast.NodeTransformer):
    """Replace free loads of bound names with (copies of) their values.

    Names bound inside the expression itself (lambda parameters, comprehension targets)
    shadow the environment and are left alone.
    """

    def __init__(self, env: _Env) -> None:
        self.env = env
        self.shadowed: list[set[str]] = []

    def _is_shadowed(self, name: str) -> bool:
        return any(name in scope for scope in self.shadowed)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.env.values and not self._is_shadowed(node.id):
            return self.env.values[node.id]
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        args = node.args
        params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        args.defaults = [self.visit(d) for d in args.defaults]
        args.kw_defaults = [self.visit(d) if d is not None else None for d in args.kw_defaults]
        self.shadowed.append(params)
        node.body = self.visit(node.body)
        self.shadowed.pop()
        return node

    def _visit_comprehension(self, node: ast.AST, parts: list[str]) -> ast.AST:
        generators: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        bound: set[str] = set()
        self.shadowed.append(bound)
        for gen in generators:
            # The first iterable is evaluated outside the comprehension's scope; later ones
            # see earlier targets. Adding targets after visiting `iter` models both.
            gen.iter = self.visit(gen.iter)
            bound |= {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
            gen.ifs = [self.visit(cond) for cond in gen.ifs]
        for part in parts:
            setattr(node, part, self.visit(getattr(node, part)))
        self.shadowed.pop()
        return node

    def visit_ListComp(self, node: ast.ListComp) -> ast.AST:
        return self._visit_comprehension(node, ["elt"])

    def visit_SetComp(self, node: ast.SetComp) -> ast.AST:
        return self._visit_comprehension(node, ["elt"])

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.AST:
        return self._visit_comprehension(node, ["elt"])

    def visit_DictComp(self, node: ast.DictComp) -> ast.AST:
        return self._visit_comprehension(node, ["key", "value"])


def _scan(expr: ast.expr) -> tuple[int, list[str]]:
    """Node count of `expr` (constants included) and the names it loads (one walk)."""
    count = 0
    names = []
    stack: list[ast.AST] = [expr]
    while stack:
        node = stack.pop()
        count += 1
        kind = type(node)
        if kind is ast.Constant:
            continue
        if kind is ast.Name:
            if type(node.ctx) is ast.Load:  # type: ignore[attr-defined]
                names.append(node.id)  # type: ignore[attr-defined]
            continue
        if kind is ast.List or kind is ast.Tuple or kind is ast.Set:
            stack.extend(node.elts)  # type: ignore[attr-defined]
            continue
        stack.extend(ast.iter_child_nodes(node))
    return count, names


def _substitute(expr: ast.expr, env: _Env, limit_unchanged: bool = True) -> _Substituted | None:
    """`expr` with bound names substituted (in place), or None when it would be too large
    (with `limit_unchanged=False`, only when something was substituted).

    Substituted values are shared, not copied: the trees are only unparsed afterwards.
    """
    count, loaded = _scan(expr)
    bound = [name for name in loaded if name in env.values]
    size = count + sum(env.sizes[name] - 1 for name in bound)
    if size > MAX_TEST_NODES and (bound or limit_unchanged):
        return None
    names = set(loaded)
    for name in bound:
        names |= env.names[name]
    if bound:
        expr = _Substitute(env).visit(expr)
    return _Substituted(expr, size, frozenset(names), bool(bound))


def _literal_source(node: ast.expr) -> str | None:
    """Canonical text of a plain literal tree (what `ast.unparse` would give), or None."""
    kind = type(node)
    if kind is ast.Constant:
        value = node.value  # type: ignore[attr-defined]
        vtype = type(value)
        if vtype is float:
            return repr(value) if value - value == 0 else None  # finite floats only
        if vtype in (int, str, bytes, bool) or value is None:
            try:
                return repr(value)
            except ValueError:  # an int too long to print
                return None
        return None
    if kind is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is ast.Constant:  # type: ignore[attr-defined]
        inner = node.operand.value  # type: ignore[attr-defined]
        if type(inner) in (int, float):
            text = _literal_source(node.operand)  # type: ignore[attr-defined]
            return None if text is None else "-" + text
        return None
    if kind is ast.List or kind is ast.Tuple or kind is ast.Set:
        parts = [_literal_source(e) for e in node.elts]  # type: ignore[attr-defined]
        if None in parts or (kind is ast.Set and not parts):
            return None
        body = ", ".join(parts)  # type: ignore[arg-type]
        if kind is ast.List:
            return f"[{body}]"
        if kind is ast.Set:
            return f"{{{body}}}"
        return f"({body},)" if len(parts) == 1 else f"({body})"
    if kind is ast.Dict:
        if any(k is None for k in node.keys):  # type: ignore[attr-defined]
            return None
        keys = [_literal_source(k) for k in node.keys]  # type: ignore[attr-defined,arg-type]
        values = [_literal_source(v) for v in node.values]  # type: ignore[attr-defined]
        if None in keys or None in values:
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, values)) + "}"
    return None


def _literal_value(node: ast.expr) -> Any:
    """`ast.literal_eval(node)`, step for step, without its per-call closures.

    Each `ast.literal_eval` call defines five nested functions that refer to each other, a
    reference cycle that only the cyclic collector frees; a step reads some ten thousand
    expected values, so that was 30,000 cells and functions a step for the collector to
    walk. Raises what `ast.literal_eval` raises, in the same order (a differential test
    holds the two together).
    """
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(map(_literal_value, node.elts))
    if isinstance(node, ast.List):
        return list(map(_literal_value, node.elts))
    if isinstance(node, ast.Set):
        return set(map(_literal_value, node.elts))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "set" and node.args == node.keywords == []):
        return set()
    if isinstance(node, ast.Dict):
        if len(node.keys) != len(node.values):
            _malformed(node)
        return dict(zip(map(_literal_value, node.keys), map(_literal_value, node.values)))  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left = _signed_number(node.left)
        right = _number(node.right)
        if isinstance(left, (int, float)) and isinstance(right, complex):
            return left + right if isinstance(node.op, ast.Add) else left - right
    return _signed_number(node)


def _signed_number(node: ast.expr) -> Any:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        operand = _number(node.operand)
        return +operand if isinstance(node.op, ast.UAdd) else -operand
    return _number(node)


def _number(node: ast.expr) -> Any:
    if not isinstance(node, ast.Constant) or type(node.value) not in (int, float, complex):
        _malformed(node)
    return node.value  # type: ignore[attr-defined]


def _malformed(node: Any) -> None:
    raise ValueError(f"malformed node or string: {node!r}")


def _literal_call_source(call: ast.expr) -> str | None:
    """`name(literal, ..., key=literal)` written canonically without `ast.unparse` (the slow
    part of parsing), or None when the call is anything more complex."""
    if type(call) is not ast.Call or type(call.func) is not ast.Name:  # type: ignore[attr-defined]
        return None
    parts = []
    for arg in call.args:  # type: ignore[attr-defined]
        text = _literal_source(arg)
        if text is None:
            return None
        parts.append(text)
    for keyword in call.keywords:  # type: ignore[attr-defined]
        text = _literal_source(keyword.value)
        if keyword.arg is None or text is None:
            return None
        parts.append(f"{keyword.arg}={text}")
    return f"{call.func.id}({', '.join(parts)})"  # type: ignore[attr-defined]


def _calls_name(call: ast.Call, name: str) -> bool:
    """Whether `name` is loaded anywhere in the call (usually it is the called function)."""
    if isinstance(call.func, ast.Name) and call.func.id == name:
        return True
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(call))


def _import_expr(module: str, attr: str | None = None, submodule: bool = False) -> ast.expr:
    """`__import__('m')`, `__import__('a.b', fromlist=('_',))` or `__import__('m', fromlist=(attr,)).attr`."""
    keywords = []
    if attr is not None or submodule:
        fromlist = ast.Tuple(elts=[ast.Constant(attr if attr is not None else "_")], ctx=ast.Load())
        keywords = [ast.keyword(arg="fromlist", value=fromlist)]
    call: ast.expr = ast.Call(func=ast.Name(id="__import__", ctx=ast.Load()), args=[ast.Constant(module)], keywords=keywords)
    if attr is not None:
        call = ast.Attribute(value=call, attr=attr, ctx=ast.Load())
    return ast.fix_missing_locations(call)


class _Parser:
    def __init__(self, source: str, entry_point: str | None, strict: bool = False, require_entry: bool = True,
                 cache: "LineCache | None" = None, ignore_non_tests: bool = False, any_operator: bool = False) -> None:
        self.source = source
        self.entry_point = entry_point
        self.strict = strict
        self.require_entry = require_entry and entry_point is not None
        self.ignore_non_tests = ignore_non_tests
        self.any_operator = any_operator
        self.cache = cache
        self.env = _Env()
        self.tests: list[ParsedTest] = []
        self.lines = _split_lines(source)

    # -- statements -----------------------------------------------------------------
    def statement(self, node: ast.stmt, text: str, line: int) -> None:
        if isinstance(node, ast.Assert):
            test = self.assert_(node, text, line)
            if test is not None:
                self.tests.append(test)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            reason = self.assign(node)
            if reason is not None and not self.ignore_non_tests:
                self.tests.append(ParsedTest(text, line, reason=reason))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.import_(node)
        elif isinstance(node, ast.Pass) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        ):
            pass  # a docstring-like string or `pass`: not a test, not wrong either
        else:
            if isinstance(node, ast.AugAssign):  # the name no longer holds what was substituted
                self._refuse([n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)])
            if not self.ignore_non_tests:
                self.tests.append(ParsedTest(text, line, reason=f"not a test: {_describe(node)} statement"))

    def assert_(self, node: ast.Assert, text: str, line: int) -> ParsedTest | None:
        """One assert statement as a test; None when it is to be ignored (`ignore_non_tests`:
        an assert that is not a comparison with a call on its left is not a test)."""
        test = node.test
        if not isinstance(test, ast.Compare):
            if self.ignore_non_tests:
                return None
            return ParsedTest(text, line, reason="not of the form `assert CALL == EXPECTED` (no comparison)")
        if self.ignore_non_tests and not isinstance(test.left, ast.Call):
            return None
        if not self.any_operator:
            if len(test.ops) != 1:
                return ParsedTest(text, line, reason="chained comparison; expected `assert CALL == EXPECTED`")
            if not isinstance(test.ops[0], ast.Eq):
                op = _OPERATORS.get(type(test.ops[0]), type(test.ops[0]).__name__)
                return ParsedTest(text, line, reason=f"comparison with `{op}`; expected `assert CALL == EXPECTED`")
        if not isinstance(test.left, ast.Call):
            first = "==" if isinstance(test.ops[0], ast.Eq) else _OPERATORS.get(type(test.ops[0]), "the operator")
            return ParsedTest(text, line, reason=f"left side of `{first}` is not a call expression")
        # (any operator, chained too, reads as `CALL == EXPECTED` with the first right-hand side)
        left, right = test.left, test.comparators[0]
        if not self.env.values and not self.env.refused:
            # Nothing to substitute (the common case): skip the walks.
            if self.require_entry and not _calls_name(left, self.entry_point):  # type: ignore[arg-type]
                return ParsedTest(text, line, reason=f"the call does not use the function under test `{self.entry_point}`")
            call_expr, expected_expr, expected_changed = left, right, False
        else:
            # (a test that loads no bound name gets the same verdict on either path)
            call = _substitute(left, self.env, limit_unchanged=False)
            expected = _substitute(right, self.env, limit_unchanged=False)
            if call is None or expected is None:
                return ParsedTest(
                    text, line, reason=f"test too large after substituting assignments (> {MAX_TEST_NODES} nodes)"
                )
            poisoned = self._refused_name(call.names | expected.names)
            if poisoned is not None:
                return ParsedTest(text, line, reason=f"uses `{poisoned}`, whose assignment was not a valid one")
            if self.require_entry and self.entry_point not in call.names:
                return ParsedTest(text, line, reason=f"the call does not use the function under test `{self.entry_point}`")
            call_expr, expected_expr, expected_changed = call.expr, expected.expr, expected.changed
        literal_call = _literal_call_source(call_expr)
        # `entry(literals) == literal` (most tests) builds data and nothing else: the strict
        # walk can only pass, so it is skipped.
        plain = (
            literal_call is not None
            and call_expr.func.id == self.entry_point  # type: ignore[attr-defined]
            and _literal_source(expected_expr) is not None
        )
        call_apart = expected_apart = False
        if self.strict and not plain:
            violation = _strict_violation((call_expr, expected_expr), self.entry_point)
            if violation is not None:
                return ParsedTest(text, line, reason=violation)
        elif not plain:  # any name may be used; what might touch shared state runs apart
            call_apart = _strict_violation((call_expr,), self.entry_point) is not None
            expected_apart = (_literal_source(expected_expr) is None
                              and _strict_violation((expected_expr,), self.entry_point) is not None)
        try:
            call_text = literal_call or ast.unparse(call_expr)
            # The expected side is only evaluated, never compared as text: its own source
            # will do when nothing was substituted into it (ast.unparse is the slow part).
            expected_text = None if expected_changed else _segment(self.lines, expected_expr)
            if not expected_text or "\n" in expected_text or "\\" in expected_text:
                expected_text = ast.unparse(expected_expr)
        except (RecursionError, ValueError) as err:
            return ParsedTest(text, line, reason=f"cannot normalise the test: {type(err).__name__}")
        try:
            literal: tuple[Any] | None = (_literal_value(expected_expr),)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            literal = None
        return ParsedTest(text, line, call=call_text, expected=expected_text, expected_literal=literal,
                          call_apart=call_apart, expected_apart=expected_apart)

    def assign(self, node: ast.Assign | ast.AnnAssign) -> str | None:
        """Bind simple assignments; return a reason when the assignment is not simple."""
        if isinstance(node, ast.AnnAssign):
            if node.value is None or not isinstance(node.target, ast.Name):
                return "not a test: annotated assignment without a simple name and value"
            targets: list[ast.expr] = [node.target]
            value = node.value
        else:
            targets, value = node.targets, node.value
        bindings: list[tuple[str, ast.expr]] = []
        for target in targets:
            if isinstance(target, ast.Name):
                bindings.append((target.id, value))
            elif (
                isinstance(target, (ast.Tuple, ast.List))
                and isinstance(value, (ast.Tuple, ast.List))
                and len(target.elts) == len(value.elts)
                and all(isinstance(t, ast.Name) for t in target.elts)
                and not any(isinstance(v, ast.Starred) for v in value.elts)
            ):
                bindings.extend((t.id, v) for t, v in zip(target.elts, value.elts))  # type: ignore[union-attr]
            else:
                self._refuse([n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)])
                return "not a test: assignment that is not `name = value`"
        names = [name for name, _ in bindings]
        done: dict[int, _Substituted | None] = {}  # `a = b = value`: substitute the value once
        for _, expr in bindings:
            if id(expr) not in done:
                done[id(expr)] = _substitute(expr, self.env)
        substituted = [(name, done[id(expr)]) for name, expr in bindings]
        if any(sub is None for _, sub in substituted):
            self._refuse(names)
            return f"assignment too large after substitution (> {MAX_TEST_NODES} nodes)"
        poisoned = self._refused_name(frozenset().union(*(sub.names for _, sub in substituted if sub is not None)))
        if poisoned is not None:
            self._refuse(names)
            return f"uses `{poisoned}`, whose assignment was not a valid one"
        for name, sub in substituted:
            assert sub is not None
            self.env.bind(name, sub.expr, sub.size, sub.names)
        return None

    def _refused_name(self, names: frozenset[str]) -> str | None:
        hits = names & self.env.refused
        return min(hits) if hits else None

    def _refuse(self, names: list[str]) -> None:
        """Later uses of these names are invalid too (not silently left unbound)."""
        for name in names:
            self.env.refuse(name)

    def import_(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    expr = _import_expr(alias.name, submodule="." in alias.name)
                    self._bind(alias.asname, expr)
                else:
                    top = alias.name.split(".")[0]
                    self._bind(top, _import_expr(top))
            return
        if node.level or node.module is None:
            return  # relative import: the module under test, not something to substitute
        for alias in node.names:
            if alias.name == "*" or alias.name == self.entry_point:
                continue  # `from solution import f`: the function is already defined
            self._bind(alias.asname or alias.name, _import_expr(node.module, attr=alias.name))

    def _bind(self, name: str, expr: ast.expr) -> None:
        if name == self.entry_point:
            return  # never shadow the function under test
        size, loaded = _scan(expr)
        self.env.bind(name, expr, size, frozenset(loaded))

    # -- driving ----------------------------------------------------------------------
    def run(self) -> list[ParsedTest]:
        with warnings.catch_warnings():  # the SyntaxWarnings model text provokes (`1if x`, bad escapes)
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            if self.cache is not None:
                if self.run_lines(self.cache):
                    return self.tests
                self.tests, self.env, self.lines = [], _Env(), _split_lines(self.source)
            try:
                module = ast.parse(self.source)
            except PARSE_ERRORS:
                self.run_resynchronising()
                return self.tests
            for node in module.body:
                self.statement(node, self.segment(node), node.lineno)
            return self.tests

    def segment(self, node: ast.stmt) -> str:
        return _segment(self.lines, node)

    def run_lines(self, cache: "LineCache") -> bool:
        """Parse line by line through `cache`; False when some line is not complete
        statements on its own, and the source must be parsed whole.

        When every line is blank, a comment, or complete statements that parse on their
        own, each line starts with the tokenizer at the top level (the line before ended a
        statement), so the lines parse exactly as they do within the whole source. A line
        whose result depends on earlier lines (it binds names, or loads names bound in this
        source) is parsed afresh, all such lines of the source in one parse.
        """
        source = self.source
        if "\x00" in source:
            return False  # the whole source does not parse (nor would a comment line)
        try:
            source.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, even in a comment, fails the whole parse
            return False
        numbered = []
        for number, raw in enumerate(self.lines, 1):
            key = raw.rstrip("\r\n")
            body = key.lstrip(" \t\f")
            if body and body[0] != "#":
                numbered.append((number, key))
        looked_up = cache.lookup([key for _, key in numbered])
        if any(items is None for items in looked_up):
            return False
        bound: set[str] = set()
        fresh_keys: list[str] = []
        needs_fresh: list[bool] = []
        for (_, key), line in zip(numbered, looked_up):  # type: ignore[assignment]
            # (an ASCII line can only load a name that its text contains: a cheap first look)
            need = line.binds_any or (  # type: ignore[union-attr]
                bool(bound) and (not key.isascii() or any(name in key for name in bound))
                and not bound.isdisjoint(line.assert_loads())  # type: ignore[union-attr]
            )
            needs_fresh.append(need)
            if need:
                fresh_keys.append(key)
                bound |= line.binds()  # type: ignore[union-attr]
        fresh: dict[int, list[ast.stmt]] = {}
        if fresh_keys:
            self.lines = [key + "\n" for key in fresh_keys]
            try:
                body = ast.parse("".join(self.lines)).body
            except PARSE_ERRORS:  # cannot happen for lines that parse on their own; be safe
                return False
            for node in body:
                fresh.setdefault(node.lineno, []).append(node)
        k = 0
        tests = self.tests
        for (number, key), line, need in zip(numbered, looked_up, needs_fresh):
            if need:  # binds names, or uses names bound earlier: the whole path, on a fresh tree
                k += 1
                for node in fresh.get(k, ()):
                    self.statement(node, _segment(self.lines, node), number)
                continue
            tests.extend(cache.tests_at(line, number))  # type: ignore[arg-type]
        return True

    def run_resynchronising(self) -> None:
        """Parse a block with syntax errors statement by statement.

        Top-level statements start at column 0; a chunk from one such line up to a later
        one is parsed on its own. A chunk that does not parse even when extended is one
        invalid test, and parsing resumes at the next top-level line.
        """
        lines = self.source.splitlines(keepends=True)
        starts = [i for i, text in enumerate(lines) if text[:1] not in ("", " ", "\t", "\n", "\r", "#", ")", "]", "}")]
        if not starts or starts[0] != 0:
            starts.insert(0, 0)
        starts.append(len(lines))
        k = 0
        while k < len(starts) - 1:
            begin = starts[k]
            parsed = None
            for m in range(k + 1, min(len(starts), k + 1 + _MAX_STATEMENT_LINES)):
                chunk = "".join(lines[begin : starts[m]])
                try:
                    parsed = ast.parse(chunk)
                except PARSE_ERRORS:
                    continue
                k_next = m
                break
            if parsed is None:
                chunk = "".join(lines[begin : starts[k + 1]]).strip()
                error = _syntax_error(chunk)
                if not self.ignore_non_tests:  # (prose in a test block: neither valid nor invalid)
                    self.tests.append(ParsedTest(chunk, begin + 1, reason=f"does not parse: {error}"))
                k += 1
                continue
            self.lines = _split_lines(chunk)
            for node in parsed.body:
                self.statement(node, _segment(self.lines, node), begin + node.lineno)
            k = k_next


_FIXED, _ASSERT, _BINDS = "fixed", "assert", "binds"


@dataclass
class _LineItem:
    """One statement of a cached line: a `fixed` result (None: not a test, not wrong), an
    `assert` (`test` once computed), or a statement that `binds` names and is parsed afresh
    wherever it occurs. `lines` are the source lines `node` points into."""

    kind: str
    node: ast.stmt
    lines: list[str]
    test: ParsedTest | None = None
    names: frozenset[str] | None = None

    def loads(self) -> frozenset[str]:
        """The names an assert loads."""
        if self.names is None:
            self.names = frozenset(_scan(self.node.test)[1]) if isinstance(self.node, ast.Assert) else frozenset()
        return self.names

    def binds(self) -> frozenset[str]:
        """Every name the statement may bind or refuse (an over-approximation is safe)."""
        node = self.node
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return frozenset(alias.asname or alias.name.split(".")[0] for alias in node.names)
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            return frozenset()
        return frozenset(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))


class _Line:
    """The statements of one cached line, with what `run_lines` asks of every occurrence:
    whether it binds names, the names its asserts load, the names it may bind, and its
    tests placed on a line number (each computed once, on first use)."""

    __slots__ = ("items", "binds_any", "_loads", "_binds", "_tests_at")

    def __init__(self, items: list[_LineItem]) -> None:
        self.items = items
        self.binds_any = any(item.kind == _BINDS for item in items)
        self._loads: frozenset[str] | None = None
        self._binds: frozenset[str] | None = None
        self._tests_at: dict[int, list[ParsedTest]] = {}

    def assert_loads(self) -> frozenset[str]:
        """The names the line's asserts load."""
        if self._loads is None:
            self._loads = frozenset().union(*(item.loads() for item in self.items if item.kind == _ASSERT))
        return self._loads

    def binds(self) -> frozenset[str]:
        """Every name the line's statements may bind or refuse."""
        if self._binds is None:
            self._binds = frozenset().union(*(item.binds() for item in self.items))
        return self._binds


class LineCache:
    """What each one-line statement of a problem's test completions parses to, shared by
    all the suites of the problem (`parse_tests(..., cache=...)`).

    Suites written for one problem repeat each other's lines (the question's example, the
    usual edge cases), and parsing them is most of the judge's own work in a step. A suite
    whose lines are each blank, a comment or complete statements on their own is parsed
    through this cache, with exactly the result of parsing it whole; any other suite (a
    statement over several lines, an indented block, a line that does not parse) is parsed
    whole. A cache belongs to one set of options (`entry_point`, `strict`,
    `require_entry_point`); `hits` and `misses` count line look-ups. Its methods run inside
    the parser's warning filter (see `_Parser.run`).
    """

    def __init__(self, entry_point: str | None, strict: bool = False, require_entry_point: bool = True,
                 ignore_non_tests: bool = False, any_operator: bool = False) -> None:
        self.options = (entry_point, strict, require_entry_point, ignore_non_tests, any_operator)
        self._lines: dict[str, _Line | None] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._lines)

    def lookup(self, keys: list[str]) -> list[_Line | None]:
        """The statements of each line (no line break in a key); None for a line that is
        not complete statements on its own. Lines not seen before are parsed in one go."""
        known = self._lines
        missing = list(dict.fromkeys(key for key in keys if key not in known))
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        if missing:
            self._read_many(missing)
        return [known[key] for key in keys]

    def _read_many(self, keys: list[str]) -> None:
        """Parse new lines together, each placed by its statements' line numbers.

        When the joint parse succeeds, a line whose statements all start and end on it
        was tokenized from the top level (the line before ended its statements), so on its
        own it parses to the same statements. A line that the joint parse cannot place
        this way (a statement across lines, a decorator, a failed parse) is decided on its
        own."""
        lines = [key + "\n" for key in keys]
        per_line: list[list[ast.stmt]] = [[] for _ in keys]
        placed = [True] * len(keys)
        try:
            body = ast.parse("".join(lines)).body if len(keys) > 1 else None
        except PARSE_ERRORS:
            body = None
        if body is None:
            placed = [False] * len(keys)
        else:
            for node in body:
                # (a decorated definition starts at its first decorator)
                first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
                if first != node.end_lineno:
                    for i in range(first - 1, (node.end_lineno or first)):
                        placed[i] = False
                else:
                    per_line[first - 1].append(node)
        for i, key in enumerate(keys):
            if placed[i] and per_line[i]:
                self._lines[key] = _Line(self._items(per_line[i], lines))
                continue
            try:
                alone = ast.parse(key).body
            except PARSE_ERRORS:
                self._lines[key] = None
                continue
            self._lines[key] = _Line(self._items(alone, [key]))

    def _items(self, nodes: list[ast.stmt], lines: list[str]) -> list[_LineItem]:
        items = []
        for node in nodes:
            if isinstance(node, ast.Assert):
                items.append(_LineItem(_ASSERT, node, lines))
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom)):
                items.append(_LineItem(_BINDS, node, lines))
            else:
                helper = self._helper(lines)
                helper.statement(node, _segment(lines, node), 1)
                items.append(_LineItem(_FIXED, node, lines, test=helper.tests[0] if helper.tests else None))
        return items

    def tests_at(self, line: _Line, number: int) -> list[ParsedTest]:
        """The tests of a line that needs nothing bound before it, placed on line `number`
        (shared by every occurrence at that number: a `ParsedTest` is immutable)."""
        tests = line._tests_at.get(number)
        if tests is None:
            tests = []
            for item in line.items:
                test = item.test if item.kind == _FIXED else self.assert_result(item)
                if test is not None:
                    tests.append(test.at(number))
            line._tests_at[number] = tests
        return tests

    def assert_result(self, item: _LineItem) -> ParsedTest | None:
        """An assert line's test where none of the names it loads is bound or refused,
        computed once on a parser with nothing bound: `_Parser.assert_` gives such a test
        the same verdict whether or not other names are bound, and changes no tree."""
        if item.test is None:
            assert isinstance(item.node, ast.Assert)
            item.test = self._helper(item.lines).assert_(item.node, _segment(item.lines, item.node), 1)
        return item.test

    def _helper(self, lines: list[str]) -> "_Parser":
        entry_point, strict, require_entry, ignore_non_tests, any_operator = self.options
        helper = _Parser("", entry_point, strict, require_entry, None, ignore_non_tests, any_operator)
        helper.lines = lines
        return helper


_LINE_END = re.compile(r"\r\n|\r|\n")


def _split_lines(source: str) -> list[str]:
    """Lines as the tokenizer counts them (only \\r\\n, \\r and \\n end a line)."""
    if "\r" not in source:  # the common case, without the regex
        parts = source.split("\n")
        last = parts.pop()
        lines = [part + "\n" for part in parts]
        lines.append(last)
        return lines
    lines, start = [], 0
    for match in _LINE_END.finditer(source):
        lines.append(source[start : match.end()])
        start = match.end()
    lines.append(source[start:])
    return lines


def _segment(lines: list[str], node: ast.stmt | ast.expr) -> str:
    """The source text of a statement (what `ast.get_source_segment` gives, in O(its size))."""
    end_lineno, end_col = node.end_lineno, node.end_col_offset
    if end_lineno is None or end_col is None:
        return ""
    first = lines[node.lineno - 1].encode("utf-8")
    if node.lineno == end_lineno:
        text = first[node.col_offset : end_col].decode("utf-8", "replace")
    else:
        last = lines[end_lineno - 1].encode("utf-8")[:end_col].decode("utf-8", "replace")
        middle = "".join(lines[node.lineno : end_lineno - 1])
        text = first[node.col_offset :].decode("utf-8", "replace") + middle + last
    return text.strip()


def _syntax_error(text: str) -> str:
    """Why `text` does not parse (called inside `_Parser.run`'s warning filter)."""
    try:
        ast.parse(text)
    except SyntaxError as err:
        return err.msg
    except PARSE_ERRORS as err:
        return type(err).__name__
    return "incomplete statement"


def _describe(node: ast.stmt) -> str:
    if isinstance(node, ast.Expr):
        return "expression"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "function definition"
    if isinstance(node, ast.ClassDef):
        return "class definition"
    return f"`{type(node).__name__.lower()}`"


def parse_tests(
    source: str, entry_point: str | None = None, *, strict: bool = False, require_entry_point: bool = True,
    cache: LineCache | None = None, ignore_non_tests: bool = False, any_operator: bool = False,
) -> list[ParsedTest]:
    """Every test-like statement of `source` (test code, already out of its fences), in order.

    With `entry_point` (and `require_entry_point`), a call that never mentions the function
    under test is invalid (`assert abs(1) == 1` tests nothing and would be free validity
    reward).

    With `strict`, a test may only build data: besides the function under test it may use
    side-effect-free builtins (`SAFE_BUILTINS`), modules of `SAFE_MODULES` and names it
    binds itself, no `_private` attribute and no `:=` (the project's allow-list; without
    it, the judge runs each suite's calls apart from the others: see `codea1.judge.judge`).

    `ignore_non_tests` (the reference's reading of a python block): a statement that is
    not a test (print, def, loops, prose that does not parse, an assert that is not a
    comparison with a call on its left) is skipped, neither valid nor invalid; otherwise
    each one is an invalid test with its reason. `any_operator` (the reference): an assert
    comparing with another operator (`!=`, `<`, `in`, `is`, chained) reads as
    `CALL == EXPECTED` with its left call and first right-hand side; otherwise it is invalid.

    `cache` (a `LineCache` made with the same options) shares the parsing of repeated
    lines between calls: the judge keeps one per problem for all its suites.
    """
    options = (entry_point, strict, require_entry_point, ignore_non_tests, any_operator)
    if cache is not None and cache.options != options:
        raise ValueError(
            "parse_tests: the LineCache was made for (entry_point, strict, require_entry_point, ignore_non_tests, "
            f"any_operator) = {cache.options}, not {options}"
        )
    if source[:1] in (" ", "\t") or "\n " in source or "\n\t" in source:  # else dedent changes nothing
        source = textwrap.dedent(source)
    return _Parser(source, entry_point, strict, require_entry_point, cache, ignore_non_tests, any_operator).run()


def parse_completion(
    text: str, entry_point: str | None = None, *, strict: bool = False, require_entry_point: bool = True,
    strict_lines: bool = False, strict_operator: bool = False, cache: LineCache | None = None,
) -> list[ParsedTest]:
    """The tests of a raw test completion, read as the reference reads them.

    From its ```python blocks: every statement, with the non-tests ignored
    (`ignore_non_tests`). Without a python block: each line that starts with `assert` is
    one test, and one that cannot be read as a test is invalid. `strict_lines` (the
    project's alternative, `judge.strict_lines`): all python blocks, else all fenced
    blocks, else the whole text, with every non-test statement an invalid test.
    `strict_operator` (`judge.strict_operator`): only `assert CALL == EXPECTED` reads as a
    test. `cache` must be made with the options this reading uses (`completion_cache`).
    """
    any_operator = not strict_operator
    if strict_lines:
        return parse_tests(extract_test_source(text), entry_point, strict=strict,
                           require_entry_point=require_entry_point, cache=cache, any_operator=any_operator)
    source = python_test_source(text)
    if source is not None:
        return parse_tests(source, entry_point, strict=strict, require_entry_point=require_entry_point,
                           cache=cache, ignore_non_tests=True, any_operator=any_operator)
    tests = []
    for number, line in enumerate(_split_lines(text), 1):
        line = line.strip()
        if not line.startswith("assert"):
            continue
        # (each line on its own, nothing substituted; a line that does not parse is invalid)
        for test in parse_tests(line, entry_point, strict=strict, require_entry_point=require_entry_point,
                                any_operator=any_operator):
            tests.append(test.at(number))
    return tests


def completion_cache(entry_point: str | None, *, strict: bool = False, require_entry_point: bool = True,
                     strict_lines: bool = False, strict_operator: bool = False) -> LineCache:
    """The `LineCache` for `parse_completion` with these options (python blocks' reading)."""
    return LineCache(entry_point, strict, require_entry_point, ignore_non_tests=not strict_lines,
                     any_operator=not strict_operator)


# Builtins a test may call or name under `strict`: they build or inspect data and leave the
# process as it was.
SAFE_BUILTINS = frozenset(
    """abs all any ascii bin bool bytearray bytes callable chr complex dict divmod enumerate filter float
    format frozenset hex int isinstance issubclass iter len list map max min next oct ord pow range repr
    reversed round set slice sorted str sum tuple zip""".split()
)
# Modules a test may import (their top-level name) under `strict`: deterministic, no process state.
SAFE_MODULES = frozenset(
    """array bisect calendar cmath collections copy datetime decimal enum fractions functools heapq
    itertools json math numbers numpy operator re statistics string textwrap typing unicodedata""".split()
)


def _nodes(exprs: tuple[ast.expr, ...]) -> Iterator[ast.AST]:
    """Every node under `exprs` except constants (and `ctx` markers).

    `ast.walk` spends most of its time on the constants of big literal inputs and on the
    generic field iteration; this walk steps over constants and knows the common nodes.
    """
    stack: list[ast.AST] = list(exprs)
    constant, name, call, attribute = ast.Constant, ast.Name, ast.Call, ast.Attribute
    containers = (ast.List, ast.Tuple, ast.Set)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is constant:
            continue
        if kind in containers:
            stack.extend(node.elts)  # type: ignore[attr-defined]
            continue
        yield node
        if kind is name:
            continue
        if kind is call:
            stack.append(node.func)  # type: ignore[attr-defined]
            stack.extend(node.args)  # type: ignore[attr-defined]
            stack.extend(k.value for k in node.keywords)  # type: ignore[attr-defined]
        elif kind is attribute:
            stack.append(node.value)  # type: ignore[attr-defined]
        else:
            stack.extend(ast.iter_child_nodes(node))


def _strict_violation(exprs: tuple[ast.expr, ...], entry_point: str | None) -> str | None:
    """Why these (substituted) expressions may not run in a shared process, or None."""
    bound: set[str] = set()
    loads: list[ast.Name] = []
    allowed_import_names: set[int] = set()
    for node in _nodes(exprs):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loads.append(node)
            else:
                bound.add(node.id)
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                return f"uses the private attribute `.{node.attr}`"
        elif isinstance(node, ast.NamedExpr):
            return "uses `:=` (a test may not bind names in the shared process)"
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            module = node.args[0] if node.args else None
            if not (isinstance(module, ast.Constant) and isinstance(module.value, str)):
                return "uses `__import__` with a computed module name"
            top = module.value.split(".")[0]
            if top not in SAFE_MODULES:
                return f"uses the module `{top}` (tests may import only {', '.join(sorted(SAFE_MODULES))})"
            allowed_import_names.add(id(node.func))
    for node in loads:
        name = node.id
        if name == entry_point or name in SAFE_BUILTINS or name in bound or id(node) in allowed_import_names:
            continue
        return f"uses `{name}`, which a test may not use (only the function, data and safe builtins)"
    return None

