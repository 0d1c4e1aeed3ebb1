"""The package's modules import one another in one direction, and never in a circle.

Every module of `codea1` is read with `ast` (nothing is imported): its top-level imports and
the ones inside functions, `import x`, `from x import y` and relative imports. A
`from pkg import name` is an edge to the module `pkg.name` when there is one, else to `pkg`.
Imports under `if TYPE_CHECKING:` never run: they count for the direction (a type a module
names is still a dependency) but not for cycles.

`LAYERS` is the one definition of the direction, lowest first; docs/ARCHITECTURE.md shows
it as a table. A module may import its own layer and the layers below it; cycles inside a
layer are caught by the cycle check.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "codea1"

#: (layer, modules), lowest first. A dotted name stands for the module and everything below
#: it, the most specific name winning; the bare package name only for `codea1/__init__.py`; a
#: command-line module (`*.cli`, `cli_options`, `__main__`, `codea1.plot`, which holds
#: `plot_command`) is always in the last layer. `codea1.passk` (the pass@k estimator,
#: imports nothing of codea1) sits in the foundation: training's validation and eval report pass@k.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("codea1", "codea1.interpreter", "codea1.output_files", "codea1.configs", "codea1.sandbox",
                    "codea1.passk")),
    ("data", ("codea1.data",)),
    ("mistakes", ("codea1.mistakes",)),        # the store the judge's MistakeUpdate goes into
    ("models", ("codea1.models", "codea1.packed_linear")),
    ("rollout", ("codea1.rollout", "codea1.lean_forward")),
    ("engines", ("codea1.engines",)),
    ("judge", ("codea1.judge",)),
    ("update", ("codea1.grpo", "codea1.logprobs", "codea1.trajectory")),
    ("train", ("codea1.train",)),
    ("eval", ("codea1.eval",)),
    ("export", ("codea1.export",)),
    ("cli", ("codea1.cli", "codea1.cli_options", "codea1.__main__", "codea1.plot", "*.cli", "codea1.train.config_cli")),
]


@dataclass(frozen=True)
class Import:
    source: str        # the importing module
    target: str        # the imported module of the package
    path: Path         # relative to the folder that holds the package
    line: int
    text: str          # the statement, as written
    runs: bool         # False under `if TYPE_CHECKING:`

    def where(self) -> str:
        return f"{self.path}:{self.line}: `{self.text}`"


def module_files(package_dir: Path) -> dict[str, Path]:
    """Every module of the package in `package_dir`, by dotted name."""
    root = package_dir.parent
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports of module `name` that reach a module of the package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    shown = path.relative_to(path.parents[len(name.split(".")) - 1 + (path.name == "__init__.py")])
    lines = path.read_text().splitlines()

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found: list[Import] = []

    def visit(node: ast.AST, runs: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_one(stmt, False)
                for stmt in child.orelse:
                    visit_one(stmt, runs)
                continue
            visit_one(child, runs)

    def visit_one(node: ast.AST, runs: bool) -> None:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module
                       for alias in node.names]
        if targets:
            text = " ".join(line.strip() for line in lines[node.lineno - 1: node.end_lineno])
            for target in dict.fromkeys(owner(t) for t in targets):   # one edge per module a line names
                if target is not None and target != name:
                    found.append(Import(name, target, shown, node.lineno, text, runs))
            return
        visit(node, runs)

    visit(ast.parse(path.read_text(), str(path)), True)
    return found


def import_graph(package_dir: Path) -> list[Import]:
    modules = module_files(package_dir)
    return [imp for name, path in modules.items() for imp in imports_of(name, path, modules)]


def find_cycles(imports: list[Import]) -> list[list[Import]]:
    """One cycle (as the imports that make it) per strongly connected group of modules,
    over the imports that run."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports:
        if imp.runs:
            edges.setdefault(imp.source, {}).setdefault(imp.target, imp)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(v: str) -> None:   # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            connect(v)

    cycles = []
    for group in groups:
        start = min(group)
        # breadth-first from `start` back to it inside the group: the shortest such cycle
        came_from: dict[str, Import] = {}
        frontier = [start]
        while frontier and start not in came_from:
            nxt = []
            for v in frontier:
                for w, imp in sorted(edges.get(v, {}).items()):
                    if w in group and w not in came_from:
                        came_from[w] = imp
                        nxt.append(w)
            frontier = nxt
        path, v = [], start
        while True:
            imp = came_from[v]
            path.append(imp)
            v = imp.source
            if v == start:
                break
        cycles.append(path[::-1])
    return cycles


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]]) -> int:
    """The index of the module's layer (the most specific name that covers it)."""
    best, best_len = None, -1
    for i, (_, names) in enumerate(layers):
        for pattern in names:
            if pattern.startswith("*."):
                if module.endswith(pattern[1:]):
                    return i
            elif "." not in pattern:
                if module == pattern and best_len < 0:
                    best, best_len = i, 0
            elif (module == pattern or module.startswith(pattern + ".")) and len(pattern) > best_len:
                best, best_len = i, len(pattern)
    if best is None:
        raise LookupError(f"{module} is in no layer: add it to LAYERS (and to docs/ARCHITECTURE.md)")
    return best


def backward_imports(imports: list[Import], layers: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """One line per import of a higher layer."""
    out = []
    for imp in imports:
        low, high = layer_of(imp.source, layers), layer_of(imp.target, layers)
        if high > low:
            out.append(f"{imp.where()}: {imp.source} (layer {layers[low][0]}) imports {imp.target} "
                       f"(layer {layers[high][0]}, above it)")
    return out


def describe_cycle(cycle: list[Import]) -> str:
    chain = " -> ".join([cycle[0].source] + [imp.target for imp in cycle])
    steps = "\n".join(f"    {imp.where()}" for imp in cycle)
    return f"  {chain}\n{steps}"


# --- the package -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> list[Import]:
    return import_graph(PACKAGE_DIR)


def test_every_module_is_in_a_layer(graph):
    """Each module's layer, by the most specific name (as ARCHITECTURE.md's table says);
    a module no name covers is an error that says where to add it."""
    layers = {name: LAYERS[layer_of(name, LAYERS)][0] for name in module_files(PACKAGE_DIR)}
    assert set(layers.values()) == {name for name, _ in LAYERS}   # no layer left empty
    assert {m: layers[m] for m in ("codea1", "codea1.passk", "codea1.eval.select", "codea1.sandbox.executor",
                                   "codea1.sandbox.cli", "codea1.train.config", "codea1.train.config_cli",
                                   "codea1.grpo", "codea1.judge.golden", "codea1.engines.interface")} == {
        "codea1": "foundation", "codea1.passk": "foundation", "codea1.eval.select": "eval",
        "codea1.sandbox.executor": "foundation", "codea1.sandbox.cli": "cli", "codea1.train.config": "train",
        "codea1.train.config_cli": "cli", "codea1.grpo": "update", "codea1.judge.golden": "judge",
        "codea1.engines.interface": "engines"}
    with pytest.raises(LookupError, match=r"codea1\.newthing is in no layer: add it to LAYERS"):
        layer_of("codea1.newthing", LAYERS)


def test_no_import_cycles(graph):
    cycles = find_cycles(graph)
    if cycles:
        pytest.fail("import cycles (each a chain of imports that comes back to its start):\n"
                    + "\n".join(describe_cycle(c) for c in cycles), pytrace=False)


def test_imports_follow_the_layers(graph):
    wrong = backward_imports(graph, LAYERS)
    order = " < ".join(name for name, _ in LAYERS)
    if wrong:
        pytest.fail(f"imports against the direction {order}:\n" + "\n".join(f"  {w}" for w in wrong), pytrace=False)


# --- the checker itself ---------------------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "fake"


def test_the_checker_reports_a_cycle_and_a_backward_import(tmp_path):
    package = _write(tmp_path, {
        "fake/__init__.py": "",
        "fake/low.py": "import os\n\ndef f():\n    from fake.high import g\n    return g\n",
        "fake/high.py": "from . import low\n\ndef g():\n    return low.f\n",
        "fake/sub/__init__.py": "from fake.sub.b import x\n",
        "fake/sub/a.py": "from fake.sub import b\n",
        "fake/sub/b.py": "x = 1\n\ndef h():\n    from .a import b\n",
        "fake/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fake.high import g\n",
    })
    layers = [("low", ("fake", "fake.low", "fake.sub", "fake.typed")), ("high", ("fake.high",))]
    imports = import_graph(package)

    cycles = [describe_cycle(c) for c in find_cycles(imports)]
    assert len(cycles) == 2, cycles
    assert any("fake.high -> fake.low -> fake.high" in c for c in cycles), cycles
    assert any("fake.sub.a -> fake.sub.b -> fake.sub.a" in c for c in cycles), cycles
    assert all("fake.typed" not in c for c in cycles)   # type-only imports never run

    wrong = backward_imports(imports, layers)
    assert len(wrong) == 2, wrong
    assert wrong[0] == ("fake/low.py:4: `from fake.high import g`: fake.low (layer low) imports "
                        "fake.high (layer high, above it)")
    assert wrong[1].startswith("fake/typed.py:3: `from fake.high import g`")


def test_a_module_outside_every_layer_is_named(tmp_path):
    package = _write(tmp_path, {"fake/__init__.py": "", "fake/known.py": "", "fake/stray.py": ""})
    layers = [("root", ("fake",)), ("only", ("fake.known",))]
    assert [layer_of(name, layers) for name in ("fake", "fake.known")] == [0, 1]
    assert sorted(module_files(package)) == ["fake", "fake.known", "fake.stray"]
    with pytest.raises(LookupError, match="fake.stray is in no layer"):   # the bare root covers only itself
        layer_of("fake.stray", layers)
