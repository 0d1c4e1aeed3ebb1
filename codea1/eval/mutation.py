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

Two styles of writing a mutant (``style``):

- ``text`` (the default, Cosmic-Ray's): the operator's token is replaced in the source
  text and the result is parsed again, so the new operator binds by its own precedence
  (``a + b - c`` with ``+`` -> ``|`` is ``a | (b - c)``) and an edit Python cannot parse
  (``x != -1`` -> ``x != not 1``) is a mutant that does not compile. Cosmic-Ray's test run
  then fails at collection and counts it killed; so does ``mutation_testing.analyse``.
  An exception class is replaced by the undefined name ``CosmicRayTestingException``, as
  Cosmic-Ray writes it (a NameError when the handler is reached).
- ``tree``: the ``ast`` node is edited and unparsed, keeping the grouping the author
  wrote (``(a | b) - c``), and a mutation Python rejects is no mutant. It changes one
  operator and nothing else, which is the purer fault model; it is kept as an option
  for that reason and for scores comparable with earlier codea1 runs.

With ``dedupe`` (the default of ``generate_mutants``), two mutations producing the same
program are one mutant and a mutation equal to the original program (an equivalent
mutant by construction) is dropped; Cosmic-Ray runs and counts every mutation, so
scoring the way UnLeakedTestBench does passes ``dedupe=False``.
"""

from __future__ import annotations

import ast
import bisect
import copy
import io
import re
import tokenize
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
# What Cosmic-Ray writes in place of a unary operator's token (its `not` carries a space).
_UNARY_TEXT: dict[type[ast.unaryop], str] = {ast.UAdd: "+", ast.USub: "-", ast.Invert: "~", ast.Not: "not "}
STYLES: tuple[str, ...] = ("text", "tree")
#: The name Cosmic-Ray's ExceptionReplacer writes into an ``except`` clause.
UNRAISED_EXCEPTION = "CosmicRayTestingException"


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
    col: int  # where the edit is: the token's column (text style) or the node's (tree style)
    description: str  # human-readable, e.g. "line 3: + -> -"
    source: str  # the complete mutated program
    compiles: bool = True  # False: a text edit Python cannot compile (killed without a run)


@dataclass(frozen=True)
class _Site:
    """A mutation not yet applied: the node (by walk index) and how to rewrite it."""

    node_id: int
    family: str
    operator: str
    description: str
    rewrite: Callable[[ast.AST], ast.AST]
    # the same mutation as edits of the source text: (start, end, replacement) in characters
    edits: tuple[tuple[int, int, str], ...] = ()


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


def _lines(source: str) -> tuple[list[str], list[int]]:
    """The lines as Python counts them (\\n, \\r\\n, \\r) and the offset each starts at."""
    lines = [ln for ln in re.split(r"(?<=\r\n)|(?<=\n)|(?<=\r)(?!\n)", source) if ln]
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    return lines, starts


class _SiteFinder:
    """Enumerates every mutation site of a tree, in ``ast.walk`` order."""

    def __init__(self, families: Iterable[str], source: str):
        self.families = set(families)
        self.source = source
        self.lines, self.starts = _lines(source)
        try:
            self.tokens = [(t.type, t.string, self._at(*t.start), self._at(*t.end))
                           for t in tokenize.generate_tokens(io.StringIO(source).readline)]
        except (tokenize.TokenError, SyntaxError):
            self.tokens = []  # no text edits: every site falls back to the tree edit

    # -- positions in the source text (character offsets) -------------------------------

    def _at(self, lineno: int, col: int) -> int:
        """Offset of a tokenize position (line, column in characters)."""
        return self.starts[lineno - 1] + col if lineno - 1 < len(self.lines) else len(self.source)

    def _ast_at(self, lineno: int, col_bytes: int) -> int:
        """Offset of an ``ast`` position (line, column in UTF-8 bytes)."""
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode()[:col_bytes].decode(errors="ignore"))

    def _span(self, node: ast.AST) -> tuple[int, int]:
        return (self._ast_at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self._ast_at(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def _token(self, start: int, end: int, words: tuple[str, ...]) -> tuple[int, int] | None:
        """Span of the first token sequence ``words`` lying within [start, end)."""
        toks = [t for t in self.tokens if start <= t[2] and t[3] <= end]
        for i in range(len(toks) - len(words) + 1):
            if all(toks[i + j][1] == w for j, w in enumerate(words)):
                return toks[i][2], toks[i + len(words) - 1][3]
        return None

    def _replace(self, span: tuple[int, int] | None, text: str) -> tuple[tuple[int, int, str], ...]:
        return () if span is None else ((span[0], span[1], text),)

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
        token = self._token(self._span(node.left)[1], self._span(node.right)[0], (_BINARY[src],))
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
                self._replace(token, _BINARY[dst]),
            )

    def _comparison(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if not isinstance(node, ast.Compare):
            return
        for pos, op in enumerate(node.ops):
            src = type(op)
            if src not in _COMPARE:
                continue  # `in` / `not in` are not in Cosmic-Ray's set
            rhs = node.comparators[pos]
            lhs = node.left if pos == 0 else node.comparators[pos - 1]
            token = self._token(self._span(lhs)[1], self._span(rhs)[0], tuple(_COMPARE[src].split()))
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
                    self._replace(token, _COMPARE[dst]),
                )

    def _unary(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if not isinstance(node, ast.UnaryOp):
            return
        src = type(node.op)
        start = self._span(node)[0]
        token = self._token(start, self._span(node.operand)[0], (_UNARY[src],))
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
                    self._replace(token, _UNARY_TEXT[dst]),
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
                self._replace(token, ""),
            )

    def _boolean(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            new = not node.value

            def flip(n: ast.AST, new: bool = new) -> ast.AST:
                return ast.Constant(value=new)

            name = "ReplaceTrueWithFalse" if node.value else "ReplaceFalseWithTrue"
            yield _Site(node_id, "boolean", name, f"{node.value} -> {new}", flip,
                        self._replace(self._span(node), str(new)))
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
                word = self._token(self._span(node.values[pos])[1], self._span(node.values[pos + 1])[0],
                                   ("and" if is_and else "or",))
                yield _Site(node_id, "boolean", name, desc, swap, self._replace(word, "or" if is_and else "and"))

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

        # Cosmic-Ray writes " not" right after the keyword (`if`, `while`, `assert`, the `if`
        # of a conditional expression), before whatever the condition's text begins with
        if isinstance(node, ast.IfExp):
            keyword = self._token(self._span(node.body)[1], self._span(node.test)[0], ("if",))
        else:
            start = self._span(node)[0]
            keyword = self._token(start, self._span(node.test)[0], ({ast.If: "if", ast.While: "while",
                                                                     ast.Assert: "assert"}[type(node)],))
        edits = () if keyword is None else ((keyword[1], keyword[1], " not"),)
        yield _Site(node_id, "add_not", "AddNot", "condition negated", negate, edits)

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

            # Cosmic-Ray writes " " + str(new value) over the literal's token
            yield _Site(node_id, "number", "NumberReplacer", f"{value!r} -> {value + offset!r}", shift,
                        self._replace(self._span(node), " " + str(value + offset)))

    def _break_continue(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if isinstance(node, ast.Break):
            yield _Site(node_id, "break_continue", "ReplaceBreakWithContinue", "break -> continue",
                        lambda n: ast.Continue(), self._replace(self._span(node), "continue"))
        elif isinstance(node, ast.Continue):
            yield _Site(node_id, "break_continue", "ReplaceContinueWithBreak", "continue -> break",
                        lambda n: ast.Break(), self._replace(self._span(node), "break"))

    def _zero_iteration_loop(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if isinstance(node, (ast.For, ast.AsyncFor)):

            def empty(n: ast.AST) -> ast.AST:
                n.iter = ast.List(elts=[], ctx=ast.Load())  # type: ignore[attr-defined]
                return n

            yield _Site(node_id, "zero_iteration_loop", "ZeroIterationForLoop", "loop over []", empty,
                        self._replace(self._span(node.iter), "[]"))

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
                        f"except {ast.unparse(names[pos])} never matches", drop,
                        self._replace(self._span(names[pos]), UNRAISED_EXCEPTION))

    def _decorator(self, node_id: int, node: ast.AST) -> Iterator[_Site]:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        for pos, dec in enumerate(node.decorator_list):

            def remove(n: ast.AST, pos: int = pos) -> ast.AST:
                del n.decorator_list[pos]  # type: ignore[attr-defined]
                return n

            # the decorator's line goes, from its `@` to the end of its expression
            at = self._token(self.starts[dec.lineno - 1], self._span(dec)[0], ("@",))
            end = self._span(dec)[1]
            edits = () if at is None else ((at[0], end, ""),)
            yield _Site(node_id, "decorator", "RemoveDecorator", f"@{ast.unparse(dec)} removed", remove, edits)


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


def _compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():  # e.g. `0 is x`: legal, only frowned upon
            warnings.simplefilter("ignore", SyntaxWarning)
            compile(text, "<mutant>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _check_style(style: str) -> None:
    if style not in STYLES:
        raise ValueError(f"unknown mutation style {style!r}; known: {list(STYLES)}")


def iter_mutations(source: str, families: Iterable[str] = FAMILIES, *,
                   style: str = "text") -> Iterator[tuple[_Site, ast.AST, str, bool]]:
    """Every mutation of ``source`` before deduplication (what Cosmic-Ray would run): its
    site, the mutated node, the program text and whether that text compiles.

    In the ``tree`` style a mutation Python rejects is left out; in the ``text`` style it
    is kept (``compiles`` False), as Cosmic-Ray keeps it.
    """
    _check_style(style)
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown mutation families {sorted(unknown)}; known: {list(FAMILIES)}")
    tree = _parse(source)
    nodes = list(ast.walk(tree))
    for site in _SiteFinder(families, source).sites(nodes):
        if style == "text" and site.edits:
            text = source
            for start, end, new in sorted(site.edits, reverse=True):
                text = text[:start] + new + text[end:]
            yield site, nodes[site.node_id], text, _compiles(text)
            continue
        # the tree edit (also the text style's fallback where no token was found)
        clone = copy.deepcopy(tree)
        # deepcopy keeps the walk order, so the i-th node of the clone is the i-th of the tree
        clone_nodes = list(ast.walk(clone))
        ids = {id(n): i for i, n in enumerate(clone_nodes)}
        mutated = _Apply(ids, site.node_id, site.rewrite).visit(clone)
        ast.fix_missing_locations(mutated)
        try:
            text = ast.unparse(mutated)
        except ValueError:
            continue
        if not _compiles(text):
            continue  # e.g. a mutation Python rejects at compile time; never a mutant
        yield site, nodes[site.node_id], text, True


def _normal_form(text: str, compiles: bool) -> str:
    """What two mutants must share to be the same program: the unparsed tree, or the text
    itself for one that does not compile."""
    return ast.unparse(ast.parse(text)) if compiles else text


def generate_mutants(source: str, families: Iterable[str] = FAMILIES, *, style: str = "text",
                     dedupe: bool = True) -> list[Mutant]:
    """The mutants of a program, sorted by position.

    With ``dedupe``, two mutations giving the same program count once (the first one
    found keeps its description) and a mutation equal to the original is dropped as
    equivalent; without it every mutation is a mutant, as Cosmic-Ray counts them.
    """
    original = ast.unparse(_parse(source))
    _, starts = _lines(source)

    def position(site: _Site, node: ast.AST) -> tuple[int, int]:
        """Where the mutation is: its text edit (the operator's token, as Cosmic-Ray
        records it) in the text style, else the mutated node."""
        if style == "text" and site.edits:
            offset = min(e[0] for e in site.edits)
            line = max(0, min(bisect.bisect_right(starts, offset) - 1, len(starts) - 2))
            return line + 1, offset - starts[line]
        return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)

    found = sorted(((position(site, node), site, text, compiles)
                    for site, node, text, compiles in iter_mutations(source, families, style=style)),
                   key=lambda m: m[0])
    seen: set[str] = {original}
    mutants: list[Mutant] = []
    for (lineno, col), site, text, compiles in found:
        if dedupe:
            key = _normal_form(text, compiles)
            if key in seen:
                continue
            seen.add(key)
        mutants.append(
            Mutant(
                index=len(mutants),
                family=site.family,
                operator=site.operator,
                lineno=lineno,
                col=col,
                description=f"line {lineno}: {site.description}",
                source=text,
                compiles=compiles,
            )
        )
    return mutants
