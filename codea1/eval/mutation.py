"""AST mutation engine: the mutants whose killing measures a test suite (mut@k).

UnLeakedTestBench scores generated tests with Cosmic-Ray's mutation operators. This
engine reproduces those operator families on Python's own ``ast`` (no extra dependency,
no files on disk), so a mutant is just a program text the sandboxed executor can run:

========================  ==================================================================
family                    what changes (Cosmic-Ray operator it mirrors)
========================  ==================================================================
``binary``                ``a + b`` -> ``a - b`` ... every pair among + - * / // % ** >> <<
                          | & ^  (ReplaceBinaryOperator_X_Y)
``comparison``            == != < <= > >= is, is not; against ``None`` only ==/!=/is/is not
                          swaps that stay meaningful, against a number no is/is not
                          (ReplaceComparisonOperator_X_Y)
``unary``                 +x -x ~x ``not x`` swapped, ``-x``/``~x``/``not x`` deleted
                          (ReplaceUnaryOperator_X_Y, ReplaceUnaryOperator_Delete_X)
``boolean``               True<->False, and<->or (ReplaceTrueWithFalse, ReplaceAndWithOr, ...)
``add_not``               the condition of if / while / assert / ``a if c else b`` negated
                          (AddNot; like Cosmic-Ray, not the conditions of ``elif``)
``number``                each number literal + 1 and - 1 (NumberReplacer)
``break_continue``        break<->continue (ReplaceBreakWithContinue, ...)
``zero_iteration_loop``   ``for x in xs`` -> ``for x in []`` (ZeroIterationForLoop)
``exception``             an exception class named in an ``except`` clause stops matching
                          (ExceptionReplacer)
``decorator``             a decorator removed (RemoveDecorator)
========================  ==================================================================

Cosmic-Ray's variable replacer/inserter need a user-chosen variable and a random number;
they are not part of its default run and are left out.

Mutants are deduplicated by their unparsed source: two mutations producing the same
program are one mutant, and a mutation that unparses to the original program (an
equivalent mutant by construction) is dropped.
"""

from __future__ import annotations

import ast
import copy
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

FAMILIES: tuple[str, ...] = (
    "binary",
    "comparison",
    "unary",
    "boolean",
    "add_not",
    "number",
    "break_continue",
    "zero_iteration_loop",
    "exception",
    "decorator",
)

_BINARY: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.RShift: ">>",
    ast.LShift: "<<",
    ast.BitOr: "|",
    ast.BitAnd: "&",
    ast.BitXor: "^",
}
_COMPARE: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
}
# Comparisons against None: only the swaps Cosmic-Ray keeps (the others are
# type errors or trivially equivalent).
_NONE_RHS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Eq: (ast.IsNot,),
    ast.NotEq: (ast.Is,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
}
_NUMBER_RHS_OK = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_UNARY: dict[type[ast.unaryop], str] = {ast.UAdd: "+", ast.USub: "-", ast.Invert: "~", ast.Not: "not"}


def _op_name(op: type) -> str:
    """Cosmic-Ray's name of an operator class (it says Mul where ``ast`` says Mult)."""
    return "Mul" if op is ast.Mult else op.__name__


@dataclass(frozen=True)
class Mutant:
    """One mutated program: where it changed and what it became."""

    index: int  # position in the deduplicated list
    family: str  # one of FAMILIES
    operator: str  # Cosmic-Ray-style operator name, e.g. "ReplaceBinaryOperator_Add_Sub"
    lineno: int
    col: int
    description: str  # human-readable, e.g. "line 3: + -> -"
    source: str  # the complete mutated program


@dataclass(frozen=True)
class _Site:
    """A mutation not yet applied: the node (by walk index) and how to rewrite it."""

    node_id: int
    family: str
    operator: str
    description: str
    rewrite: Callable[[ast.AST], ast.AST]


def _is_number(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float, complex))
        and not isinstance(node.value, bool)
    )


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _negate(test: ast.expr) -> ast.expr:
    return ast.UnaryOp(op=ast.Not(), operand=test)


class _SiteFinder:
    """Enumerates every mutation site of a tree, in ``ast.walk`` order."""

    def __init__(self, families: Iterable[str], source: str):
        self.families = set(families)
        self.lines = source.splitlines(keepends=True)

    def sites(self, nodes: list[ast.AST]) -> Iterator[_Site]:
        # `elif` is an If alone in its parent's else branch, at the parent's column
        self.elifs = {
            id(n.orelse[0]) for n in nodes
            if isinstance(n, ast.If) and len(n.orelse) == 1 and isinstance(n.orelse[0], ast.If)
            and n.orelse[0].col_offset == n.col_offset
        }
        for node_id, node in enumerate(nodes):
            for family in FAMILIES:
                if family in self.families:
                    yield from getattr(self, f"_{family}")(node_id, node)

    # -- operator families -------------------------------------------------------------

    def _binary(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if not isinstance(node, ast.BinOp) or type(node.op) not in _BINARY:
            return
        src = type(node.op)
        for dst in _BINARY:
            if dst is src:
                continue

            def rewrite(n: ast.AST, dst: type[ast.operator] = dst) -> ast.AST:
                n.op = dst()  # type: ignore[attr-defined]
                return n

            yield _Site(
                node_id,
                "binary",
                f"ReplaceBinaryOperator_{_op_name(src)}_{_op_name(dst)}",
                f"{_BINARY[src]} -> {_BINARY[dst]}",
                rewrite,
            )

    def _comparison(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if not isinstance(node, ast.Compare):
            return
        for pos, op in enumerate(node.ops):
            src = type(op)
            if src not in _COMPARE:
                continue  # `in` / `not in` are not in Cosmic-Ray's set
            rhs = node.comparators[pos]
            for dst in _COMPARE:
                if dst is src:
                    continue
                if _is_none(rhs) and dst not in _NONE_RHS.get(src, ()):
                    continue
                if _is_number(rhs) and dst not in _NUMBER_RHS_OK:
                    continue

                def rewrite(n: ast.AST, pos: int = pos, dst: type[ast.cmpop] = dst) -> ast.AST:
                    n.ops[pos] = dst()  # type: ignore[attr-defined]
                    return n

                yield _Site(
                    node_id,
                    "comparison",
                    f"ReplaceComparisonOperator_{src.__name__}_{dst.__name__}",
                    f"{_COMPARE[src]} -> {_COMPARE[dst]}",
                    rewrite,
                )

    def _unary(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if not isinstance(node, ast.UnaryOp):
            return
        src = type(node.op)
        if src is not ast.Not:  # `not x` is only ever deleted, never turned into -x
            for dst in _UNARY:
                if dst is src:
                    continue

                def rewrite(n: ast.AST, dst: type[ast.unaryop] = dst) -> ast.AST:
                    n.op = dst()  # type: ignore[attr-defined]
                    return n

                yield _Site(
                    node_id,
                    "unary",
                    f"ReplaceUnaryOperator_{src.__name__}_{dst.__name__}",
                    f"unary {_UNARY[src]} -> {_UNARY[dst]}",
                    rewrite,
                )
        if src is not ast.UAdd:  # deleting a unary + changes nothing

            def delete(n: ast.AST) -> ast.AST:
                return n.operand  # type: ignore[attr-defined]

            yield _Site(
                node_id,
                "unary",
                f"ReplaceUnaryOperator_Delete_{src.__name__}",
                f"unary {_UNARY[src]} deleted",
                delete,
            )

    def _boolean(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            new = not node.value

            def flip(n: ast.AST, new: bool = new) -> ast.AST:
                return ast.Constant(value=new)

            name = "ReplaceTrueWithFalse" if node.value else "ReplaceFalseWithTrue"
            yield _Site(node_id, "boolean", name, f"{node.value} -> {new}", flip)
        elif isinstance(node, ast.BoolOp):
            # One site per keyword, as in the source text: swapping the i-th `and` of
            # `a and b and c` gives `a or b and c`, i.e. `a or (b and c)`.
            is_and = isinstance(node.op, ast.And)
            for pos in range(len(node.values) - 1):

                def swap(n: ast.AST, pos: int = pos, is_and: bool = is_and) -> ast.AST:
                    vals = n.values  # type: ignore[attr-defined]
                    if is_and:  # and-chain split at pos, the halves joined by the weaker `or`
                        halves = [vals[: pos + 1], vals[pos + 1 :]]
                        side = [h[0] if len(h) == 1 else ast.BoolOp(op=ast.And(), values=h) for h in halves]
                        return ast.BoolOp(op=ast.Or(), values=side)
                    # or-chain: the new `and` binds its two neighbours only
                    joined = ast.BoolOp(op=ast.And(), values=[vals[pos], vals[pos + 1]])
                    rest = vals[:pos] + [joined] + vals[pos + 2 :]
                    return joined if len(rest) == 1 else ast.BoolOp(op=ast.Or(), values=rest)

                name = "ReplaceAndWithOr" if is_and else "ReplaceOrWithAnd"
                desc = "and -> or" if is_and else "or -> and"
                yield _Site(node_id, "boolean", name, desc, swap)

    def _add_not(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        # Cosmic-Ray negates the first condition of an if statement, not its elif ones
        if not isinstance(node, (ast.If, ast.While, ast.Assert, ast.IfExp)) or id(node) in self.elifs:
            return
        # Cosmic-Ray writes `not` in front of the condition's text, so `if a and b:` becomes
        # `if not a and b:`, i.e. `(not a) and b`: the `not` binds to the leftmost operand
        # of an unparenthesized and/or (or conditional) chain. Follow that operand down.
        path: list[str] = []
        test = node.test
        while not self._parenthesized(test):
            if isinstance(test, ast.BoolOp):
                path.append("values")
                test = test.values[0]
            elif isinstance(test, ast.IfExp):
                path.append("body")
                test = test.body
            else:
                break

        def negate(n: ast.AST, path: tuple[str, ...] = tuple(path)) -> ast.AST:
            holder, attr = n, "test"
            for step in path:
                holder, attr = getattr(holder, attr), step
            target = getattr(holder, attr)
            if attr == "values":
                target[0] = _negate(target[0])
            else:
                setattr(holder, attr, _negate(target))
            return n

        yield _Site(node_id, "add_not", "AddNot", "condition negated", negate)

    def _parenthesized(self, node: ast.AST) -> bool:
        """Whether ``node`` is written inside its own parentheses (``ast`` drops them,
        but the node then starts right after a ``(``)."""
        line = self.lines[node.lineno - 1].encode()[: node.col_offset].decode(errors="ignore")
        before = "".join(self.lines[: node.lineno - 1]) + line
        return before.rstrip().endswith("(")

    def _number(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if not _is_number(node):
            return
        value = node.value  # type: ignore[attr-defined]
        for offset in (1, -1):

            def shift(n: ast.AST, new: int | float | complex = value + offset) -> ast.AST:
                if isinstance(new, (int, float)) and new < 0:
                    return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-new))
                return ast.Constant(value=new)

            yield _Site(node_id, "number", "NumberReplacer", f"{value!r} -> {value + offset!r}", shift)

    def _break_continue(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if isinstance(node, ast.Break):
            yield _Site(node_id, "break_continue", "ReplaceBreakWithContinue", "break -> continue",
                        lambda n: ast.Continue())
        elif isinstance(node, ast.Continue):
            yield _Site(node_id, "break_continue", "ReplaceContinueWithBreak", "continue -> break",
                        lambda n: ast.Break())

    def _zero_iteration_loop(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if isinstance(node, (ast.For, ast.AsyncFor)):

            def empty(n: ast.AST) -> ast.AST:
                n.iter = ast.List(elts=[], ctx=ast.Load())  # type: ignore[attr-defined]
                return n

            yield _Site(node_id, "zero_iteration_loop", "ZeroIterationForLoop", "loop over []", empty)

    def _exception(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        # Cosmic-Ray swaps the class for one that is never raised; removing it from the
        # handler's tuple (`except ():` when it was alone) is the same handler, matching
        # nothing, without having to define a new class in the program.
        if not isinstance(node, ast.ExceptHandler) or node.type is None:
            return
        names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        for pos in range(len(names)):

            def drop(n: ast.AST, pos: int = pos) -> ast.AST:
                t = n.type  # type: ignore[attr-defined]
                elts = list(t.elts) if isinstance(t, ast.Tuple) else [t]
                del elts[pos]
                n.type = ast.Tuple(elts=elts, ctx=ast.Load())  # type: ignore[attr-defined]
                return n

            yield _Site(node_id, "exception", "ExceptionReplacer",
                        f"except {ast.unparse(names[pos])} never matches", drop)

    def _decorator(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        for pos, dec in enumerate(node.decorator_list):

            def remove(n: ast.AST, pos: int = pos) -> ast.AST:
                del n.decorator_list[pos]  # type: ignore[attr-defined]
                return n

            yield _Site(node_id, "decorator", "RemoveDecorator", f"@{ast.unparse(dec)} removed", remove)


class _Apply(ast.NodeTransformer):
    """Rewrites the one node whose walk index is ``target``."""

    def __init__(self, ids: dict[int, int], target: int, rewrite: Callable[[ast.AST], ast.AST]):
        self.ids, self.target, self.rewrite = ids, target, rewrite

    def visit(self, node: ast.AST) -> ast.AST:
        if self.ids.get(id(node)) == self.target:
            return self.rewrite(node)
        return self.generic_visit(node)


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"cannot mutate: the program does not parse ({exc.msg}, line {exc.lineno})") from exc


def iter_mutations(source: str, families: Iterable[str] = FAMILIES) -> Iterator[tuple[_Site, ast.AST, str]]:
    """Every mutation of ``source`` with its site, mutated node's position and program text,
    before deduplication (what Cosmic-Ray would run)."""
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown mutation families {sorted(unknown)}; known: {list(FAMILIES)}")
    tree = _parse(source)
    nodes = list(ast.walk(tree))
    for site in _SiteFinder(families, source).sites(nodes):
        clone = copy.deepcopy(tree)
        # deepcopy keeps the walk order, so the i-th node of the clone is the i-th of the tree
        clone_nodes = list(ast.walk(clone))
        ids = {id(n): i for i, n in enumerate(clone_nodes)}
        mutated = _Apply(ids, site.node_id, site.rewrite).visit(clone)
        ast.fix_missing_locations(mutated)
        try:
            text = ast.unparse(mutated)
            with warnings.catch_warnings():  # e.g. `0 is x`: legal, only frowned upon
                warnings.simplefilter("ignore", SyntaxWarning)
                compile(text, "<mutant>", "exec")
        except (SyntaxError, ValueError):
            continue  # e.g. a mutation Python rejects at compile time; never a mutant
        yield site, nodes[site.node_id], text


def generate_mutants(source: str, families: Iterable[str] = FAMILIES) -> list[Mutant]:
    """The deduplicated mutants of a program.

    Two mutations giving the same unparsed program count once (the first one found keeps
    its description); a mutation that unparses to the original is dropped as equivalent.
    """
    original = ast.unparse(_parse(source))
    found = sorted(
        iter_mutations(source, families),
        key=lambda m: (getattr(m[1], "lineno", 0), getattr(m[1], "col_offset", 0)),
    )
    seen: set[str] = {original}
    mutants: list[Mutant] = []
    for site, node, text in found:
        if text in seen:
            continue
        seen.add(text)
        lineno = getattr(node, "lineno", 0)
        mutants.append(
            Mutant(
                index=len(mutants),
                family=site.family,
                operator=site.operator,
                lineno=lineno,
                col=getattr(node, "col_offset", 0),
                description=f"line {lineno}: {site.description}",
                source=text,
            )
        )
    return mutants
