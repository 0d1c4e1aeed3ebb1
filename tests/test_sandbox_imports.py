"""The import graph of codea1.sandbox: `values` never imports `decode` (decode builds on
values), and the modules the worker loads stay free of what only the parent's comparisons need."""

import ast
import subprocess
import sys
from pathlib import Path

SANDBOX = Path(__file__).resolve().parent.parent / "codea1" / "sandbox"


def _imported(path: Path) -> set[str]:
    """Every module a file imports, at top level or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_values_does_not_import_decode():
    assert "codea1.sandbox.decode" not in _imported(SANDBOX / "values.py")
    assert "codea1.sandbox.values" in _imported(SANDBOX / "decode.py")


def test_values_loads_the_scalar_decoder_only_to_compare_such_values():
    code = ("import sys, decimal\n"
            "import codea1.sandbox.values as v\n"
            "before = sorted(m for m in sys.modules if m.startswith('codea1.sandbox.'))\n"
            "same = v.values_equal(v.encode(decimal.Decimal('1.0')), v.encode(decimal.Decimal('1.00')))\n"
            "after = sorted(m for m in sys.modules if m.startswith('codea1.sandbox.'))\n"
            "print(before, same, after)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=SANDBOX.parent.parent).stdout.strip()
    assert out == ("['codea1.sandbox.values'] True "
                   "['codea1.sandbox._scalars', 'codea1.sandbox.values']"), out
