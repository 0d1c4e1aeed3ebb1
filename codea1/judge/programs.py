"""The programs the judge runs, built as the Code-A1 reference builds a candidate's program.

The reference runs each candidate in one program that shares the reference solution's
namespace: the import statements of both modules (outside function bodies) are moved to
its top, sorted; then the reference module runs (an exception in it is swallowed); then
the reference's functions are deleted, its classes, imports and other globals staying
visible; then the candidate's module runs. So a candidate that annotates with the
reference's `TreeNode`, or uses its `Counter` import, runs; one whose own import fails
(it is run first) does not; and the candidate is valid when its module runs, whether or
not it defines the function under test (`judge.require_definition`: the project's rule).

`judge.own_namespace` (the project's alternative) runs the candidate alone, after the
problem's assumed imports only.
"""

from __future__ import annotations

import ast
import textwrap
import warnings

from codea1.judge.parse import PARSE_ERRORS

__all__ = ["HoistedModule", "hoist_imports", "candidate_program", "reference_program"]


class HoistedModule:
    """A module split into its import statements (outside function bodies, as source text)
    and the rest (`body`: the module re-written without them; None when that no longer
    parses, e.g. a `try:` that held only an import). `functions` are the names of the
    functions it defines outside function bodies (methods included)."""

    def __init__(self, body: str | None, imports: set[str], functions: set[str], parsed: bool) -> None:
        self.body, self.imports, self.functions, self.parsed = body, imports, functions, parsed


class _Hoist(ast.NodeTransformer):
    def __init__(self) -> None:
        self.imports: set[str] = set()
        self.functions: set[str] = set()

    def visit_Import(self, node: ast.Import) -> None:
        self.imports.add(ast.unparse(node))
        return None

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.imports.add(ast.unparse(node))
        return None

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.functions.add(node.name)
        return node  # (its body, imports included, stays as written)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.functions.add(node.name)
        return node


def hoist_imports(code: str) -> HoistedModule:
    """Split `code` as the reference does; code that does not parse is kept as it is
    (`parsed` False: it will fail with its own syntax error)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(code)
        except PARSE_ERRORS:
            return HoistedModule(code, set(), set(), parsed=False)
        hoist = _Hoist()
        try:
            body = ast.unparse(ast.fix_missing_locations(hoist.visit(tree)))
            ast.parse(body)
        except PARSE_ERRORS:
            return HoistedModule(None, hoist.imports, hoist.functions, parsed=True)
        return HoistedModule(body, hoist.imports, hoist.functions, parsed=True)


def _guarded(statement: str) -> str:
    return f"try:\n    {statement}\nexcept Exception:\n    pass"


def candidate_program(assumed_imports: str, reference: HoistedModule, candidate: HoistedModule) -> str | None:
    """The candidate's program in the reference's namespace (module docstring), or None
    when the candidate's module does not parse once its imports are moved (the reference
    then does not run it: invalid code)."""
    if not candidate.parsed or candidate.body is None:
        return None
    parts = [assumed_imports.strip()] if assumed_imports.strip() else []
    parts.extend(sorted(reference.imports | candidate.imports))
    if reference.body is not None and reference.body.strip():
        parts.append("try:\n" + textwrap.indent(reference.body, "    ") + "\nexcept Exception:\n    pass")
    parts.extend(_guarded(f"del {name}") for name in sorted(reference.functions))
    parts.append(candidate.body)
    return "\n".join(parts) + "\n"


def reference_program(assumed_imports: str, reference_code: str, reference: HoistedModule,
                      candidates: list[HoistedModule]) -> str:
    """The reference's program for validating tests: its module with its imports at the top,
    and every candidate's imports (each guarded: the reference validates a candidate's
    suites in that candidate's program, where its imports are visible too)."""
    parts = [assumed_imports.strip()] if assumed_imports.strip() else []
    extra = sorted(statement for statement in set().union(*(c.imports for c in candidates)) - reference.imports
                   if "__future__" not in statement)  # (a future import must open the file)
    if reference.body is None or not reference.parsed:  # (run as written: its own error, if any)
        parts += [_guarded(statement) for statement in extra] + [reference_code]
    else:
        parts += sorted(reference.imports) + [_guarded(statement) for statement in extra] + [reference.body]
    return "\n".join(parts) + "\n"
