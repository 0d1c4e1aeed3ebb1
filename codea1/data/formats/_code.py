"""Small source-code helpers the format converters share (all AST-based, nothing runs)."""

from __future__ import annotations

import ast
import re

from codea1.data.problem import ProblemFormatError


def parse(source: str, where: str, field_name: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ProblemFormatError(
            where, field_name, f"valid Python source (line {exc.lineno}: {exc.msg})"
        ) from None


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The last top-level definition of `name` (the one a program ends up calling)."""
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node
    return found


def defines(source: str, name: str) -> bool:
    """Whether `source` parses and defines function `name` at top level."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return find_function(tree, name) is not None


def signature(source: str, name: str, where: str, field_name: str) -> str:
    """`def name(args) -> ret:` of the top-level function `name` in `source`."""
    node = find_function(parse(source, where, field_name), name)
    if node is None:
        raise ProblemFormatError(where, field_name, f"code that defines function {name!r}")
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}:"


def import_lines(source: str) -> str:
    """The top-level import statements of `source`, one per line, in order."""
    tree = None
    # Prompts often end in a bare signature ("def f(x):\n"): give it a body to parse.
    for text in (source, source.rstrip() + "\n    pass\n"):
        try:
            tree = ast.parse(text)
            break
        except SyntaxError:
            continue
    if tree is None:
        return "\n".join(line for line in source.splitlines() if re.match(r"(import|from\s+\S+\s+import)\s", line))
    lines = [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(lines)


def docstring_question(signature_line: str, text: str) -> str:
    """Signature plus a docstring holding `text`, the way MBPP+ `problem` looks."""
    body = text.strip().replace('"""', "'''")
    return f'{signature_line}\n"""\n{body}\n"""'


def simple_asserts(text: str, entry_point: str) -> list[str]:
    """Lines of `text` of the form `assert ENTRY(...) == EXPECTED` (golden-test shape)."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("assert"):
            continue
        try:
            tree = ast.parse(line)
        except SyntaxError:
            continue
        stmt = tree.body[0] if len(tree.body) == 1 else None
        if not isinstance(stmt, ast.Assert) or stmt.msg is not None:
            continue
        test = stmt.test
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.left, ast.Call)
            and isinstance(test.left.func, ast.Name)
            and test.left.func.id == entry_point
        ):
            found.append(line)
    return found


def literal_list(value, where: str, field_name: str) -> list:
    """A list field that some exports store as its Python/JSON text (e.g. BigCodeBench `libs`)."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return [part for part in re.split(r"[,\s]+", text) if part]
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, (list, tuple, set)):
        raise ProblemFormatError(where, field_name, "a list", value)
    return list(value)
