"""Differential check of codea1's judge against the Code-A1 reference's own reward code.

The reference (ZJU-REAL/Code-A1, `code/rl/reward.py`) has no licence, so none of it is in
this repository: give the path of a copy and this script imports it at run time, replaces
its SandboxFusion call by a local subprocess (`python program.py`, the same 10 s budget,
partial output kept on a time-out), and runs the same hand-written cases (problems,
candidate completions, test completions, Mistake Book contents) through the reference's
`evaluate` + `compute_dual_model_reward` + Mistake Book update and through codea1's
`Judge` with its default config + `MistakeBook`. Per case it prints whether the two agree
on code validity, code reward, each suite's valid/invalid counts, each suite's test reward
and the Mistake Book after the step.

Cases where the reference's behaviour comes from a defect that destroys information are
marked "reference defect" (codea1 deliberately does not copy them); both outcomes are
shown. The script exits 1 when a case not so marked disagrees. The cases of issue 39
(`--item 39`: exits and crashes in one program, stateful functions, output volume, large,
deep and enum values, the shared time budget, re-read expectations, recursion headroom, a
reference that raises on import, realistic rollouts) and its reference defects
(`--item defect`) follow issue 27's. The time-budget cases (`--item 39.5`, `budget/`) sit
half a second from the budget's edge on both sides: on a machine loaded far past its
cores either side can fall over the edge (run them again alone).

    python benchmarks/reference_diff.py --reference /path/to/Code-A1/code/rl/reward.py
    python benchmarks/reference_diff.py --reference ... --only names   # cases whose name contains 'names'

The Mistake Book class is read from `trainer_a1.py` next to `reward.py` (`--trainer` to
point elsewhere); only its class definition is executed.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BUDGET_S = 10  # the reference's run_timeout for a candidate's whole program


# -- loading the reference from outside the repository -------------------------------------

class _Status:
    """Stand-ins for SandboxFusion's status enums (only their identities matter)."""

    Success, Failed, Finished, TimeLimitExceeded = "Success", "Failed", "Finished", "TimeLimitExceeded"


@dataclass
class _RunResult:
    status: str
    stdout: str = ""
    stderr: str = ""


@dataclass
class _Response:
    status: str
    run_result: _RunResult
    message: str = ""


def _stub_modules() -> None:
    """The reference imports verl and sandbox_fusion at module level; give it inert ones."""
    verl = types.ModuleType("verl")
    verl.DataProto = object
    workers = types.ModuleType("verl.workers")
    manager = types.ModuleType("verl.workers.reward_manager")
    manager.register = lambda name: (lambda cls: cls)
    fusion = types.ModuleType("sandbox_fusion")
    fusion.RunStatus = fusion.CommandRunStatus = _Status
    fusion.RunCodeResponse = _Response
    fusion.RunCodeRequest = dict

    def _unplugged(*args, **kwargs):
        raise RuntimeError("SandboxFusion is not used: execute_code is replaced by a local runner")

    fusion.run_code = fusion.run_concurrent = _unplugged
    models = types.ModuleType("sandbox_fusion.models")
    models.CommandRunResult = _RunResult
    for name, module in {"verl": verl, "verl.workers": workers, "verl.workers.reward_manager": manager,
                         "sandbox_fusion": fusion, "sandbox_fusion.models": models}.items():
        sys.modules.setdefault(name, module)


def run_locally(code: list[str], run_timeout: int = BUDGET_S) -> list[_Response]:
    """What SandboxFusion's `run_code` returns, from `python program.py` in a temporary
    directory: stdout so far and a time-limit status when the budget runs out."""
    out = []
    for program in code:
        with tempfile.TemporaryDirectory(prefix="refdiff-") as tmp:
            path = Path(tmp) / "program.py"
            path.write_text(program)
            try:
                done = subprocess.run([sys.executable, str(path)], cwd=tmp, capture_output=True, text=True,
                                      timeout=run_timeout, stdin=subprocess.DEVNULL)
                out.append(_Response(_Status.Success, _RunResult(_Status.Finished, done.stdout, done.stderr)))
            except subprocess.TimeoutExpired as err:
                stdout = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
                out.append(_Response(_Status.Success, _RunResult(_Status.TimeLimitExceeded, stdout, "")))
    return out


def load_reference(reward_path: Path, trainer_path: Path | None) -> tuple[types.ModuleType, type]:
    """The reference's reward module (its sandbox call replaced) and its MistakeBook class."""
    if not reward_path.is_file():
        sys.exit(f"--reference {reward_path}: no such file (expected the Code-A1 reference's code/rl/reward.py)")
    _stub_modules()
    spec = importlib.util.spec_from_file_location("code_a1_reference_reward", reward_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("evaluate", "compute_dual_model_reward", "extract_code_from_response",
                 "extract_testcase_from_response", "update_mistake_book", "execute_code"):
        if not hasattr(module, name):
            sys.exit(f"--reference {reward_path}: has no `{name}` (expected the Code-A1 reference's reward.py)")
    module.execute_code = run_locally
    trainer_path = trainer_path or reward_path.with_name("trainer_a1.py")
    if not trainer_path.is_file():
        sys.exit(f"--trainer {trainer_path}: no such file (expected the reference's trainer_a1.py, for MistakeBook)")
    tree = ast.parse(trainer_path.read_text())
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "MistakeBook"]
    if not classes:
        sys.exit(f"--trainer {trainer_path}: defines no class MistakeBook")
    namespace: dict = {"os": os, "json": json, "List": list, "socket": __import__("socket")}
    exec(compile(ast.Module(body=classes, type_ignores=[]), str(trainer_path), "exec"), namespace)  # noqa: S102
    return module, namespace["MistakeBook"]


# -- the cases ------------------------------------------------------------------------------

@dataclass
class Step:
    codes: list[str]
    suites: list[list[str]]  # per candidate, its test completions (the same count for each)


@dataclass
class Case:
    name: str
    item: str  # which point of issue 27 (1-8) or 39 (39.1-39.8, 39.x) it covers, or "defect"
    reference: str
    entry: str
    steps: list[Step]
    book: list[tuple[str, int]] = field(default_factory=list)  # Mistake Book before step 1, ranked
    defect: str | None = None  # why the reference's outcome is a defect codea1 does not copy


def py(body: str) -> str:
    return f"Here is the code:\n```python\n{body.strip()}\n```\n"


ADD = "def add(a, b):\n    return a + b\n"
ADD_OK = py(ADD)
ADD_BAD = py("def add(a, b):\n    return a - b if b > 5 else a + b")  # wrong for b > 5
SORT = "def sort_list(nums):\n    return sorted(nums)\n"
SORT_OK = py(SORT)
SORT_BAD = py("def sort_list(nums):\n    return nums")  # forgets to sort
TREE = (
    "class TreeNode:\n    def __init__(self, val=0, left=None, right=None):\n"
    "        self.val, self.left, self.right = val, left, right\n"
    "def depth(root):\n    if root is None:\n        return 0\n"
    "    return 1 + max(depth(root.left), depth(root.right))\n"
)
TREE_OK = py("def depth(t: TreeNode) -> int:\n    return 0 if t is None else 1 + max(depth(t.left), depth(t.right))")
TREE_BAD = py("def depth(t: TreeNode) -> int:\n    return 0 if t is None else 1 + depth(t.left)")
COUNT = "from collections import Counter\nMOD = 7\ndef tally(s):\n    return dict(Counter(s))\n"
SLOW_BAD = py("import time\ndef add(a, b):\n    if a == 7:\n        time.sleep(30)\n    return a + b")
SLOWREF = "import time\ndef add(a, b):\n    if a == 9:\n        time.sleep(30)\n    return a + b\n"
BACK = "def count_bs(s):\n    return s.count(chr(92))\n"
POINT = "class Point:\n    def __init__(self, x):\n        self.x = x\ndef make(x):\n    return Point(x)\n"

MID = py("def add(a, b):\n    return 0 if b == 6 else a + b")  # wrong for b == 6 only
ADD_SUITE = py("assert add(1, 2) == 3\nassert add(1, 9) == 10\nassert add(2, 2) == 4")


def one(name: str, item: str, reference: str, entry: str, codes: list[str], suites: list[str] | list[list[str]],
        book: list[tuple[str, int]] | None = None, defect: str | None = None) -> Case:
    """A one-step case; `suites` is one list shared by every candidate, or one list each."""
    rows = suites if suites and isinstance(suites[0], list) else [list(suites)] * len(codes)
    return Case(name, item, reference, entry, [Step(list(codes), [list(r) for r in rows])], book or [], defect)


def cases() -> list[Case]:
    c: list[Case] = []
    a = c.append
    # item 1: reading the tests
    a(one("read/plain-suite", "1", ADD, "add", [ADD_OK, ADD_BAD], [ADD_SUITE]))
    a(one("read/pytest-def", "1", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "import pytest\n\ndef test_small():\n    assert add(1, 2) == 3\n    assert add(0, 0) == 0\n\n"
        "def test_big():\n    assert add(1, 9) == 10\n")]))
    a(one("read/pytest-for", "1", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "for a, b, s in [(1, 2, 3), (1, 9, 10)]:\n    assert add(a, b) == s\nassert add(3, 4) == 7")]))
    a(one("read/pytest-with-if", "1", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "import pytest\nwith pytest.raises(TypeError):\n    add('a', 1)\nif True:\n    assert add(2, 8) == 10\n"
        "assert add(5, 5) == 10")]))
    a(one("read/class-methods", "1", SORT, "sort_list", [SORT_OK, SORT_BAD], [py(
        "class TestSort:\n    def test_a(self):\n        assert sort_list([3, 1, 2]) == [1, 2, 3]\n"
        "    def test_b(self):\n        assert sort_list([]) == []\n")]))
    a(one("read/unresolved-name", "1", ADD, "add", [ADD_OK], [py(
        "def test_x(x=1):\n    assert add(x, 1) == 2\nassert add(1, 1) == 2")]))
    a(one("read/multiline-assert", "1", SORT, "sort_list", [SORT_OK, SORT_BAD], [py(
        "assert sort_list([\n    3, 2, 1,\n]) == [\n    1, 2, 3]\nassert sort_list([5]) == [5]")]))
    a(one("read/message-and-comment", "1", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "assert add(1, 2) == 3, 'small'  # comment\nassert add(4, 9) == 13, \"big\"")]))
    a(one("read/result-variable-ignored", "1", ADD, "add", [ADD_OK], [py(
        "result = add(1, 2)\nassert result == 3\nassert add(2, 3) == 5")]))
    a(one("read/no-call-left-ignored", "1", ADD, "add", [ADD_OK], [py(
        "assert 3 == add(1, 2)\nassert not add(0, 0)\nassert isinstance(add(1, 1), int)\nassert add(1, 1) == 2")]))
    a(one("read/operators", "1", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "assert add(1, 2) != 4\nassert add(1, 9) < 11\nassert add(2, 2) in [4, 5]\nassert add(0, 1) is 1")]))
    a(one("read/chained", "1", ADD, "add", [ADD_OK], [py("assert add(1, 2) == 3 == 3\nassert 1 < add(1, 1) < 3")]))
    a(one("read/no-python-block", "1", ADD, "add", [ADD_OK, ADD_BAD], [
        "Tests:\nassert add(1, 2) == 3\nassert add(1, 9) == 10\nassert add(1\nassert result == 3\n"]))
    a(one("read/py-tag-fallback", "1", ADD, "add", [ADD_OK, ADD_BAD], [
        "```py\nx = 1\nassert add(x, 2) == 3\n    assert add(1, 9) == 10\n```\n"]))
    a(one("read/two-python-blocks", "1", ADD, "add", [ADD_OK, ADD_BAD], [
        py("x = 4") + "and\n" + py("assert add(x, 9) == 13\nassert add(1, 1) == 2")]))
    a(one("read/unterminated-test-block", "1", ADD, "add", [ADD_OK], [
        "```python\nassert add(1, 2) == 3\nassert add(2, 2) == 4\n"]))
    a(one("read/duplicates", "1", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "assert add(1, 9) == 10\nassert add(1, 9) == 11\nx = 1\nassert add(x, 9) == 10\nassert add(1,  9) == 10")]))
    a(one("read/reference-raises", "1", ADD, "add", [ADD_OK], [py(
        "assert add('a', 1) == 'a1'\nassert add(1, 2) == 3\nassert add(None, 1) == 1")]))
    a(one("read/wrong-expectations", "1", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "assert add(1, 2) == 4\nassert add(1, 9) == 11\nassert add(3, 9) == 12")]))
    a(one("read/semicolons", "1", ADD, "add", [ADD_OK], [py("assert add(1, 2) == 3; assert add(2, 2) == 4")]))
    a(one("read/two-suites", "1", ADD, "add", [ADD_OK, ADD_BAD],
          [py("assert add(1, 9) == 10"), py("assert add(1, 1) == 2\nassert add(2, 9) == 11")]))
    a(one("read/many-tests", "1", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "\n".join(f"assert add({k}, {k + 3}) == {2 * k + 3}" for k in range(10)))]))
    a(one("read/empty-suite", "1", ADD, "add", [ADD_OK], [py("print('no tests')")]))
    a(one("read/prose-only", "1", ADD, "add", [ADD_OK], ["I cannot write tests for this."]))
    a(one("read/nonprintable", "1", ADD, "add", [ADD_OK], [py("assert add(1, 2) == 3  # é ✓")]))
    a(one("read/lambda-and-comprehension", "1", SORT, "sort_list", [SORT_OK, SORT_BAD], [py(
        "assert sort_list([x for x in range(3, 0, -1)]) == [1, 2, 3]\n"
        "assert sort_list(list(map(lambda v: -v, [1, 2]))) == [-2, -1]")]))
    # item 2: names
    a(one("names/bare-argument", "2", SORT, "sort_list", [SORT_OK, SORT_BAD], [py(
        "nums = [3, 1, 2]\nassert sort_list(nums) == [1, 2, 3]")]))
    a(one("names/keyword-argument", "2", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "b = 9\nassert add(1, b=b) == 10")]))
    a(one("names/expression-argument", "2", SORT, "sort_list", [SORT_OK, SORT_BAD], [py(
        "nums = [3, 1, 2]\nassert sort_list(nums + [0]) == [0, 1, 2, 3]\nassert sort_list(nums) == [1, 2, 3]")]))
    a(one("names/nested-name", "2", SORT, "sort_list", [SORT_OK], [py(
        "x = 3\nassert sort_list([x, 1]) == [1, 3]\nassert sort_list([2, 1]) == [1, 2]")]))
    a(one("names/expected-side-last", "2", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "assert add(1, 9) == 10\nexpected = 3\nassert add(1, 2) == expected")]))
    a(one("names/reassigned", "2", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "x = 1\nassert add(x, 2) == 3\nx = 9\nassert add(1, x) == 10")]))
    a(one("names/tuple-assign-not-remembered", "2", ADD, "add", [ADD_OK], [py(
        "a, b = 1, 2\nassert add(a, b) == 3\nassert add(2, 2) == 4")]))
    a(one("names/chained-values", "2", SORT, "sort_list", [SORT_OK, SORT_BAD], [py(
        "base = [2, 1]\nnums = base\nassert sort_list(nums) == [1, 2]")]))
    a(one("names/reference-global", "2", COUNT, "tally", [py("def tally(s):\n    return {c: s.count(c) for c in s}")],
          [py("assert tally('ab' * MOD) == {'a': 7, 'b': 7}\nassert tally('') == {}")]))
    a(one("names/reference-import", "2", COUNT, "tally", [py("def tally(s):\n    return {c: s.count(c) for c in s}")],
          [py("assert tally('aab') == Counter('aab')\nassert tally(Counter('ab')) == {'a': 1, 'b': 1}")]))
    a(one("names/test-import-not-run", "2", ADD, "add", [ADD_OK], [py(
        "import math\nassert add(math.pi, 0) == math.pi\nassert add(1, 1) == 2")]))
    a(one("names/candidate-import-visible", "2", ADD, "add", [py("import math\ndef add(a, b):\n    return a + b")],
          [py("assert add(math.floor(1.5), 1) == 2\nassert add(1, 1) == 2")]))
    # item 3: code validity
    a(one("valid/wrong-function-name", "3", ADD, "add", [py("def plus(a, b):\n    return a + b"), ADD_OK], [ADD_SUITE]))
    a(one("valid/import-block-first", "3", ADD, "add", [
        "```python\nimport math\n```\nThen:\n```python\ndef add(a, b):\n    return a + b\n```", ADD_OK], [ADD_SUITE]))
    a(one("valid/module-raises", "3", ADD, "add", [py("def add(a, b):\n    return a + b\nraise ValueError('x')"), ADD_OK],
          [ADD_SUITE]))
    a(one("valid/syntax-error", "3", ADD, "add", [py("def add(a, b)\n    return a + b"), ADD_OK], [ADD_SUITE]))
    a(one("valid/main-block", "3", ADD, "add", [py(ADD + "if __name__ == '__main__':\n    print(add(1, 2))")],
          [ADD_SUITE]))
    a(one("valid/reads-stdin", "3", ADD, "add", [py(ADD + "n = int(input())"), ADD_OK], [ADD_SUITE]))
    a(one("valid/bad-import", "3", ADD, "add", [py("import no_such_module_xyz\n" + ADD), ADD_OK], [ADD_SUITE]))
    a(one("valid/not-callable", "3", ADD, "add", [py("add = 3"), ADD_OK], [ADD_SUITE]))
    a(one("valid/plain-text-code", "3", ADD, "add", [ADD, "The answer is simple."], [ADD_SUITE]))
    # item 4: namespace
    a(one("namespace/treenode", "4", TREE, "depth", [TREE_OK, TREE_BAD], [py(
        "assert depth(TreeNode(1, TreeNode(2, TreeNode(3)), TreeNode(4))) == 3\nassert depth(None) == 0\n"
        "assert depth(TreeNode(1, None, TreeNode(2))) == 2")]))
    a(one("namespace/own-class", "4", TREE, "depth", [py(
        "class TreeNode:\n    def __init__(self, val=0, left=None, right=None):\n"
        "        self.val, self.left, self.right = val, left, right\n"
        "def depth(t):\n    return 0 if t is None else 1 + max(depth(t.left), depth(t.right))")],
        [py("assert depth(TreeNode(1, TreeNode(2))) == 2")]))
    a(one("namespace/reference-import", "4", COUNT, "tally", [py("def tally(s):\n    return dict(Counter(s))")],
          [py("assert tally('aab') == {'a': 2, 'b': 1}")]))
    a(one("namespace/reference-function-deleted", "4", COUNT, "tally", [py("def count_all(s):\n    return tally(s)")],
          [py("assert tally('ab') == {'a': 1, 'b': 1}")]))
    a(one("namespace/reference-global", "4", COUNT, "tally",
          [py("def tally(s):\n    return {c: s.count(c) % MOD for c in s}")], [py("assert tally('aaaaaaaa') == {'a': 8}")]))
    # item 5: code extraction
    a(one("extract/unterminated", "5", ADD, "add", ["```python\ndef add(a, b):\n    return a + b\n", ADD_OK], [ADD_SUITE]))
    a(one("extract/py-tag", "5", ADD, "add", ["```py\ndef add(a, b):\n    return a + b\n```", ADD_OK], [ADD_SUITE]))
    a(one("extract/bare-fence", "5", ADD, "add", ["```\ndef add(a, b):\n    return a + b\n```", ADD_OK], [ADD_SUITE]))
    a(one("extract/python3-tag", "5", ADD, "add", ["```python3\ndef add(a, b):\n    return a + b\n```", ADD_OK],
          [ADD_SUITE]))
    a(one("extract/two-blocks-first", "5", ADD, "add", [ADD_BAD + "\nor\n" + ADD_OK], [ADD_SUITE]))
    a(one("extract/prose-around", "5", ADD, "add", ["I think\n" + ADD_OK + "\nThis adds.", ADD_BAD], [ADD_SUITE]))
    # item 6: the entry-point rule
    a(one("entry/len-literal", "6", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "assert len([1, 2]) == 2\nassert abs(-3) == 3\nassert add(1, 9) == 10")]))
    a(one("entry/other-function-wrong", "6", ADD, "add", [ADD_OK], [py("assert max(1, 2) == 1\nassert add(1, 1) == 2")]))
    # item 7: one time budget per candidate program
    a(one("budget/slow-candidate-test", "7", ADD, "add", [SLOW_BAD], [
        py("assert add(1, 2) == 3\nassert add(7, 1) == 8\nassert add(2, 2) == 4"), py("assert add(3, 3) == 6")]))
    a(one("budget/slow-reference-call", "7", SLOWREF, "add", [ADD_OK], [
        py("assert add(1, 2) == 3\nassert add(9, 1) == 10"), py("assert add(3, 3) == 6")]))
    a(one("budget/slow-candidate-module", "7", ADD, "add", [py("import time\ntime.sleep(30)\n" + ADD), ADD_OK],
          [ADD_SUITE]))
    # item 8: the Mistake Book
    a(Case("book/replay-and-update", "8", ADD, "add", [Step([ADD_OK, ADD_BAD], [[ADD_SUITE], [ADD_SUITE]])],
           book=[("assert add(1, 9) == 10", 2), ("assert add(2, 7) == 9", 1)]))
    a(Case("book/decrement-before-increment", "8", ADD, "add",
           [Step([ADD_OK, ADD_BAD], [[py("assert add(1, 9) == 10")], [py("assert add(1, 9) == 10")]])],
           book=[("assert add(1, 9) == 10", 1), ("assert add(5, 5) == 10", 3)]))
    a(Case("book/removed-then-failed-twice", "8", ADD, "add",
           [Step([ADD_OK, ADD_OK, ADD_BAD], [[py("assert add(0, 1) == 1")] * 2, [py("assert add(0, 2) == 2")] * 2,
                                              [py("assert add(1, 9) == 10"), py("assert add(1, 9) == 10")]])],
           book=[("assert add(1, 9) == 10", 1), ("assert add(1, 1) == 2", 5)]))
    a(Case("book/stable-ties", "8", ADD, "add", [
        Step([ADD_BAD], [[py("assert add(1, 6) == 7\nassert add(1, 7) == 8\nassert add(1, 8) == 9")]]),
        Step([ADD_BAD, ADD_OK], [[py("assert add(2, 8) == 10")], [py("assert add(3, 3) == 6")]]),
        Step([ADD_OK], [[py("assert add(0, 0) == 0")]]),
    ], book=[("assert add(5, 5) == 10", 2), ("assert add(0, 9) == 9", 1)]))
    a(Case("book/resorted-ties", "8", ADD, "add", [
        Step([ADD_BAD], [[py("assert add(1, 6) == 7\nassert add(1, 7) == 8")]]),
        Step([ADD_BAD, ADD_BAD], [[py("assert add(1, 7) == 8")], [py("assert add(1, 7) == 8")]]),
        Step([MID, MID], [[py("assert add(0, 0) == 0")], [py("assert add(1, 1) == 2")]]),
    ]))
    a(Case("book/only-book-tests", "8", ADD, "add", [Step([ADD_BAD], [[py("print('none')")]])],
           book=[("assert add(1, 9) == 10", 1), ("assert add(1, 1) == 2", 1)]))
    a(Case("book/invalid-candidate-no-update", "8", ADD, "add",
           [Step([py("def add(a, b)\n    return 0"), ADD_OK], [[py("assert add(1, 9) == 10")], [py("assert add(1, 2) == 3")]])],
           book=[("assert add(1, 2) == 3", 1)]))
    a(Case("book/many-failures-one-test", "8", ADD, "add",
           [Step([ADD_BAD, ADD_BAD], [[py("assert add(1, 9) == 10"), py("assert add(1, 9) == 10")]] * 2)]))
    # known reference defects (codea1 does not copy them)
    a(one("defect/name-error-in-expected-shifts", "defect", ADD, "add", [ADD_OK, ADD_BAD], [py(
        "assert add(1, 2) == expected_value\nassert add(1, 9) == 10\nassert add(1, 8) == 9")],
        defect="a NameError while comparing with the written EXPECTED appends a second entry to the suite's list, "
               "so each later test is checked against the value of the test before it"))
    a(one("defect/object-without-eq", "defect", POINT, "make", [py(
        "class Point:\n    def __init__(self, x):\n        self.x = x\ndef make(x):\n    return Point(x)")],
        [py("assert make(1) == Point(1)")],
        defect="a value without __eq__ never equals the candidate's (identity), and its stored text "
               "`... == <Point object at 0x...>` does not parse"))
    a(Case("defect/book-repr-backslashes", "defect", BACK, "count_bs", [
        Step([py("def count_bs(s):\n    return 0")], [[py("assert count_bs('a\\\\b') == 1")]]),
        Step([py(BACK)], [[py("assert count_bs('ab') == 0")]]),
    ], defect="a Mistake Book test is stored as repr(test)[1:-1]: its backslashes double, so the replayed "
              "test calls the function on another string and a right candidate fails it"))
    a(Case("defect/book-repr-quotes", "defect", ADD, "add", [
        Step([ADD_BAD], [[py("assert add(\"it's\", \"x\") == \"it'sx\"\nassert add(1, 9) == 10")]]),
        Step([ADD_OK], [[py("assert add(0, 0) == 0")]]),
    ], defect="a test holding both quote characters is stored through repr()[1:-1] with escaped quotes"))
    return c + cases_39()


# -- issue 39: realistic rollouts (exits, state, output, values, time, reading, recursion, imports)

EXITS = "import os, sys\ndef add(a, b):\n    if b == 9:\n        {how}\n    return a + b"
IDS = "_issued = [0]\ndef next_id():\n    _issued[0] += 1\n    return _issued[0]\n"
IDS_OK = py("count = 0\ndef next_id():\n    global count\n    count += 1\n    return count")
IDS_STUCK = py("def next_id():\n    return 1")
IDS_SUITE = py("assert next_id() == 1\nassert next_id() == 2\nassert next_id() == 3")
ACC = "def collect(x, acc=[]):\n    acc.append(x)\n    return list(acc)\n"
FIB = "memo = {}\ndef fib(n):\n    if n < 2:\n        return n\n    if n not in memo:\n        memo[n] = fib(n - 1) + fib(n - 2)\n    return memo[n]\n"
LOUD = ("def total(nums):\n    s = 0\n    for i, x in enumerate(nums):\n        print(f'step {{i}}: running sum {{s}}')\n"
        "        s += x\n    return s")
TOTAL = "def total(nums):\n    return sum(nums)\n"
ENUM = "from enum import Enum\nclass Color(Enum):\n    RED = 1\n    GREEN = 2\ndef pick(n):\n    return Color.RED if n % 2 else Color.GREEN\n"
NEST = "def nest(n):\n    v = []\n    for _ in range(n):\n        v = [v]\n    return v\n"
REC = "def count_down(n):\n    return 0 if n == 0 else 1 + count_down(n - 1)\n"
LOOP = "def count_down(n):\n    return n\n"
STDIN_MAIN = ADD + "if __name__ == '__main__':\n    a, b = map(int, input().split())\n    print(add(a, b))\n"
SLOW9 = "import time\ndef add(a, b):\n    if a == 9:\n        time.sleep({s})\n    return a + b\n"
SUITE9 = py("assert add(1, 2) == 3\nassert add(1, 9) == 10\nassert add(2, 2) == 4")


def _exit_cases() -> list[Case]:
    """39.1: one program per candidate: an exit or crash in one call fails every later one."""
    c = []
    for name, how in (("sys-exit", "sys.exit(0)"), ("exit", "exit()"), ("quit", "quit(1)"), ("os-exit", "os._exit(0)"),
                      ("sigkill", "os.kill(os.getpid(), 9)"), ("keyboard-interrupt", "raise KeyboardInterrupt"),
                      ("system-exit-class", "raise SystemExit('bye')")):
        c.append(one(f"exit/{name}", "39.1", ADD, "add", [py(EXITS.format(how=how)), ADD_OK],
                     [SUITE9, py("assert add(3, 3) == 6\nassert add(1, 8) == 9")]))
    c.append(one("exit/caught-by-candidate", "39.1", ADD, "add", [py(EXITS.format(
        how="try:\n            sys.exit(1)\n        except SystemExit:\n            return a + b"))], [SUITE9]))
    c.append(one("exit/recursion-error-is-an-exception", "39.1", ADD, "add", [py(
        "def add(a, b):\n    if b == 9:\n        return add(a, b)\n    return a + b")], [SUITE9, py("assert add(4, 4) == 8")]))
    c.append(Case("exit/in-a-mistake-book-test", "39.1", ADD, "add", [Step(
        [py(EXITS.format(how="sys.exit()")), ADD_OK], [[ADD_SUITE], [ADD_SUITE]])],
        book=[("assert add(2, 9) == 11", 2), ("assert add(5, 5) == 10", 1)]))
    c.append(one("exit/module-level-exit", "39.1", ADD, "add", [py(ADD + "exit()"), ADD_OK], [ADD_SUITE]))
    c.append(one("exit/reference-exits-on-an-input", "39.1",
                 "import sys\ndef add(a, b):\n    if a < 0:\n        sys.exit('negative')\n    return a + b\n", "add",
                 [ADD_OK], [py("assert add(1, 2) == 3"), py("assert add(-1, 2) == 1\nassert add(2, 2) == 4"),
                            py("assert add(3, 3) == 6")]))
    c.append(one("exit/second-candidate-unaffected", "39.1", ADD, "add",
                 [py(EXITS.format(how="os._exit(3)")), MID, ADD_OK], [py("assert add(1, 9) == 10\nassert add(1, 1) == 2")]))
    return c


def _state_cases() -> list[Case]:
    """39.2: every test runs, in order, so stateful functions see each call."""
    return [
        one("state/counter", "39.2", IDS, "next_id", [IDS_OK, IDS_STUCK], [IDS_SUITE]),
        one("state/counter-across-suites", "39.2", IDS, "next_id", [IDS_OK, IDS_STUCK], [IDS_SUITE, IDS_SUITE]),
        one("state/counter-repeated-expectation", "39.2", IDS, "next_id", [IDS_OK], [py(
            "assert next_id() == 1\nassert next_id() == 1\nassert next_id() == 3")]),
        one("state/mutable-default", "39.2", ACC, "collect", [py(ACC), py("def collect(x, acc=None):\n    return [x]")],
            [py("assert collect(1) == [1]\nassert collect(2) == [1, 2]\nassert collect(3) == [1, 2, 3]")]),
        one("state/cache-is-pure", "39.2", FIB, "fib", [py(FIB), py("def fib(n):\n    return n")],
            [py("assert fib(10) == 55\nassert fib(10) == 55\nassert fib(2) == 1"), py("assert fib(10) == 55")]),
        one("state/same-test-two-suites", "39.2", ADD, "add", [ADD_OK, ADD_BAD],
            [py("assert add(1, 9) == 10"), py("assert add(1, 9) == 10\nassert add(1, 9) == 10")]),
        one("state/hidden-state-in-candidate", "39.2", ADD, "add", [py(
            "calls = []\ndef add(a, b):\n    calls.append(1)\n    return a + b + (len(calls) > 3)"), ADD_OK],
            [py("assert add(1, 1) == 2\nassert add(2, 2) == 4"), py("assert add(1, 1) == 2\nassert add(2, 2) == 4")]),
        Case("state/book-runs-before-suites", "39.2", IDS, "next_id", [Step([IDS_OK, IDS_STUCK], [[IDS_SUITE], [IDS_SUITE]])],
             book=[("assert next_id() == 1", 1)]),
        one("state/duplicate-needs-same-value", "39.2", IDS, "next_id", [IDS_OK], [py(
            "assert next_id() == 1\nassert next_id() == 2\nassert next_id() == 2")]),
    ]


def _output_cases() -> list[Case]:
    """39.3: how much a program prints never decides its verdict."""
    big = "[" + ", ".join(str(k % 97) for k in range(4500)) + "]"
    return [
        one("output/90kb-debug-prints", "39.3", TOTAL, "total", [py(LOUD), py(TOTAL)],
            [py(f"nums = {big}\nassert total(nums) == {sum(k % 97 for k in range(4500))}\nassert total([1, 2]) == 3")]),
        one("output/1mb-then-more-tests", "39.3", ADD, "add", [py(
            "def add(a, b):\n    print('x' * 1_000_000)\n    return a + b")], [ADD_SUITE, py("assert add(5, 5) == 10")]),
        one("output/stderr-flood", "39.3", ADD, "add", [py(
            "import sys\ndef add(a, b):\n    sys.stderr.write('e' * 300_000)\n    return a + b")], [ADD_SUITE]),
        one("output/reference-prints", "39.3", "def add(a, b):\n    print('checking', a, b)\n    return a + b\n"
            "print('x' * 200_000)\n", "add", [ADD_OK, ADD_BAD], [ADD_SUITE]),
        one("output/print-in-module", "39.3", ADD, "add", [py("print('y' * 500_000)\n" + ADD)], [ADD_SUITE]),
    ]


def _value_cases() -> list[Case]:
    """39.4: values the reference compares cross, whatever their size, depth or type."""
    keys = "def keys(d):\n    return d.keys()\n"
    return [
        one("values/dict-keys-view", "defect", keys, "keys",
            [py(keys), py("def keys(d):\n    return set(d)"), py("def keys(d):\n    return list(d)")],
            [py("assert keys({1: 2, 3: 4}) == {1, 3}\nassert keys({}) == set()\nassert keys({5: 0}) == [5]")],
            defect="the verdicts agree (a keys view equals the set of its keys); the reference's Mistake Book text "
                   "`keys({5: 0}) == dict_keys([5])` names a type no program defines, so replayed it raises "
                   "NameError and every candidate fails it: codea1 stores the set the view equals, `{5}`"),
        one("values/100k-stress-input", "39.4", SORT, "sort_list", [SORT_OK, SORT_BAD], [py(
            "assert sort_list(list(range(100000, 0, -1))) == list(range(1, 100001))\nassert sort_list([2, 1]) == [1, 2]")]),
        one("values/2mb-string", "39.4", "def rep(s, n):\n    return s * n\n", "rep",
            [py("def rep(s, n):\n    return s * n"), py("def rep(s, n):\n    return s * (n - 1)")],
            [py("assert rep('ab', 1_000_000) == 'ab' * 1_000_000\nassert rep('a', 2) == 'aa'")]),
        one("values/nested-150", "39.4", NEST, "nest", [py(NEST), py("def nest(n):\n    return [] if n < 100 else [[]]")],
            [py("assert nest(150) == nest(150)\nassert nest(2) == [[]]")]),
        one("values/nested-600", "39.4", NEST, "nest", [py(NEST)], [py("assert nest(600) == []\nassert nest(1) == [[]]")]),
        one("values/nested-too-deep-for-repr", "39.4", NEST, "nest", [py(NEST)],
            [py("assert nest(1200) == []\nassert nest(1) == [[]]")]),
        one("values/enum-member", "39.4", ENUM, "pick", [py("def pick(n):\n    return Color.RED if n % 2 else Color.GREEN"),
                                                         py("def pick(n):\n    return Color.RED")],
            [py("assert pick(1) == Color.RED\nassert pick(3) == Color.RED")]),
        one("values/enum-wrong-value", "39.4", ENUM, "pick", [py("def pick(n):\n    return Color.RED")],
            [py("assert pick(1) == Color.GREEN\nassert pick(1) == Color.RED")]),
        one("values/bytearray", "39.4", "def up(b):\n    return bytearray(b).upper()\n", "up",
            [py("def up(b):\n    return bytearray(b.upper())"), py("def up(b):\n    return b.upper()")],
            [py("assert up(b'ab') == bytearray(b'AB')\nassert up(b'') == b''")]),
        one("values/int-too-long-for-repr", "39.4", "def big(n):\n    return 7 ** n\n", "big",
            [py("def big(n):\n    return 7 ** n")], [py("assert big(10000) == 0\nassert big(2) == 49")]),
        one("values/tuple-keys-and-frozensets", "39.4", "def group(xs):\n    return {(x % 2, x % 3): frozenset([x]) for x in xs}\n",
            "group", [py("def group(xs):\n    return {(x % 2, x % 3): frozenset({x}) for x in xs}")],
            [py("assert group([1, 2]) == {(1, 1): frozenset({1}), (0, 2): frozenset({2})}")]),
    ] + _crossing_cases()


ROW = "class Row(list):\n    pass\ndef row(n):\n    return Row(range(n))\n"
PAIR = ("class P(tuple):\n    def __eq__(self, other):\n        return isinstance(other, tuple) and tuple.__eq__(self, other)\n"
        "    __hash__ = tuple.__hash__\ndef pair(n):\n    return P((n, n + 1))\n")
BOX = "import types\ndef box(a):\n    return types.SimpleNamespace(a=a, b=2 * a)\n"
ARR = "import array\ndef arr(n):\n    return array.array('i', range(n))\n"
LINES = "import inspect\ndef lines(k=0):\n    return k + len(inspect.getsource(lines).splitlines())\n"


def _crossing_cases() -> list[Case]:
    """Values that once crossed as unsupported (every test that used them invalid) and
    `inspect.getsource` of a program's own function, which raised in the sandbox. (A wrong
    candidate only where the failed test's stored text is the reference's too: its repr of a
    namespace, `namespace(a=1)`, or of an array names what no program defines.)"""
    return [
        one("values/list-subclass", "39.4", ROW, "row",
            [py(ROW), py("def row(n):\n    return list(range(n))"), py(ROW.replace("range(n)", "range(n - 1)"))],
            [py("assert row(2) == [0, 1]\nassert row(3) == Row([0, 1, 2])\nassert row(1) == [1]")]),
        one("values/tuple-subclass-own-eq", "39.4", PAIR, "pair", [py(PAIR)],
            [py("assert pair(1) == P((1, 2))\nassert pair(2) == P((2, 4))\nassert pair(3) == P((3, 4))")]),
        one("values/simple-namespace", "39.4", BOX, "box",
            [py(BOX), py("from types import SimpleNamespace\ndef box(a):\n    return SimpleNamespace(b=a + a, a=a)")],
            [py("assert box(1) == types.SimpleNamespace(a=1, b=2)\nassert box(2) == types.SimpleNamespace(a=2, b=4)\n"
                "assert box(0) == {'a': 0, 'b': 0}")]),
        one("values/array", "39.4", ARR, "arr", [py(ARR), py("import array\ndef arr(n):\n    return array.array('d', range(n))")],
            [py("assert arr(2) == array.array('d', [0.0, 1.0])\nassert arr(3) == array.array('i', [0, 1, 2])\n"
                "assert arr(1) == [0]")]),
        one("getsource/own-function", "39.x", LINES, "lines", [py(LINES), py("def lines(k=0):\n    return k + 3")],
            [py("assert lines(0) == 2\nassert lines(1) == 4")]),
    ]


def _time_cases() -> list[Case]:
    """39.5: one budget per program: the reference's checks leave the candidate less time."""
    return [
        one("time/slow-reference-checks-leave-less", "39.5", SLOW9.format(s=4.5), "add",
            [py("import time\ndef add(a, b):\n    time.sleep(1)\n    return a + b")],
            [py("assert add(9, 1) == 10\nassert add(1, 1) == 2\nassert add(2, 2) == 4\nassert add(3, 3) == 6\n"
                "assert add(4, 4) == 8\nassert add(5, 5) == 10\nassert add(6, 6) == 12\nassert add(7, 7) == 14\n"
                "assert add(8, 8) == 16\nassert add(0, 0) == 0")]),
        one("time/candidate-loops-on-one-input", "39.5", ADD, "add", [py(
            "def add(a, b):\n    while b == 9:\n        pass\n    return a + b"), ADD_OK], [SUITE9, py("assert add(4, 4) == 8")]),
    ]


def _reading_cases() -> list[Case]:
    """39.6: the reference rebuilds `assert CALL == EXPECTED` from its parts and parses it again."""
    return [
        one(f"reread/{name}", "39.6", ADD, "add", [ADD_OK, ADD_BAD], [py(f"assert add(1, 9) == {expected}\n"
                                                                          "assert add(1, 2) == 3")])
        for name, expected in (("not", "(not 0)"), ("and", "(True and 10)"), ("or", "(0 or 10)"),
                               ("if-else", "(10 if True else 0)"), ("comparison", "(10 == 10)"),
                               ("lambda", "(lambda: 10)"), ("not-in-list", "[not True][0] + 10"),
                               ("walrus", "(y := 10)"), ("negative", "-(-10)"))
    ]


def _recursion_cases() -> list[Case]:
    """39.7: the candidate has a plain program's recursion headroom."""
    return [one(f"recursion/depth-{n}", "39.7", LOOP, "count_down", [py(REC), py(LOOP)],
                [py(f"assert count_down({n}) == {n}\nassert count_down(3) == 3")]) for n in (990, 996, 997, 998, 999, 1005)]


def _import_cases() -> list[Case]:
    """39.8: a reference module that raises on import: valid code, no test checked."""
    return [
        one("ref-import/main-reads-stdin", "39.8", STDIN_MAIN, "add", [ADD_OK, ADD_BAD], [ADD_SUITE]),
        Case("ref-import/with-book", "39.8", STDIN_MAIN, "add", [Step([ADD_OK, ADD_BAD], [[ADD_SUITE], [ADD_SUITE]])],
             book=[("assert add(1, 9) == 10", 1), ("assert add(2, 2) == 4", 1)]),
        one("ref-import/raises-after-def", "39.8", ADD + "raise RuntimeError('setup failed')\n", "add",
            [ADD_OK, py("def add(a, b)\n    return 0")], [ADD_SUITE, py("print('none')")]),
        one("ref-import/bad-import", "39.8", "import no_such_module_abc\n" + ADD, "add", [ADD_OK], [ADD_SUITE]),
    ]


def _realistic_cases() -> list[Case]:
    """Shapes seen in 0.5B rollouts: prose around several fences, helpers in tests, debug prints."""
    chatty = ("Sure! Here is my solution.\n\n```python\ndef add(a, b):\n    # add them\n    print('debug', a, b)\n"
              "    return a + b\n```\n\nAnd a usage example:\n\n```python\nprint(add(1, 2))\n```\n")
    tests = ("Here are the tests:\n```python\ndef helper(n):\n    return n * 2\n\nassert add(helper(1), 1) == 3\n"
             "assert add(1, 9) == 10\n```\nMore edge cases:\n```python\nassert add(-1, 1) == 0\nassert add(0, 0) == 0\n```")
    inv = "def inv(x):\n    return 1 / x if x else float('inf')\n"
    return [
        Case("realistic/book-holds-a-bare-inf", "39.x", inv, "inv", [Step([py(inv), py("def inv(x):\n    return 0")],
                                                                          [[py("assert inv(2) == 0.5")]] * 2)],
             book=[("assert inv(0) == inf", 1)]),
        one("realistic/prose-and-fences", "39.x", ADD, "add", [chatty, ADD_BAD], [tests]),
        one("realistic/test-defines-helper", "39.x", ADD, "add", [ADD_OK],
            [py("def make(n):\n    return list(range(n))\nassert add(len(make(3)), 1) == 4\nassert add(2, 9) == 11")]),
        one("realistic/pytest-functions-with-prints", "39.x", SORT, "sort_list", [SORT_OK, SORT_BAD], [py(
            "def test_sort():\n    print('testing')\n    assert sort_list([3, 1, 2]) == [1, 2, 3]\n"
            "    assert sort_list([]) == []\n\ntest_sort()")]),
        Case("realistic/book-replay-and-state", "39.x", IDS, "next_id", [
            Step([IDS_OK, IDS_STUCK], [[IDS_SUITE], [py("assert next_id() == 1\nassert next_id() == 2")]]),
            Step([IDS_OK, IDS_STUCK], [[py("assert next_id() == 1")], [IDS_SUITE]])]),
    ]


def _defect_cases() -> list[Case]:
    """Reference defects issue 39 lists as allowed deviations (not copied; docs/ARCHITECTURE.md)."""
    # the second test fails (b > 5) and the eleventh passes: `__GEN_PASS__0_1` is found inside `__GEN_PASS__0_10`
    eleven = py("assert add(0, 1) == 1\nassert add(1, 9) == 10\n"
                + "\n".join(f"assert add({k}, 1) == {k + 1}" for k in range(2, 11)))
    return [
        one("defect/enum-in-book-text", "defect", ENUM, "pick", [py(ENUM), py("def pick(n):\n    return Color.RED")],
            [py("assert pick(1) == Color.RED\nassert pick(2) == Color.GREEN")],
            defect="a failed test enters the reference's Mistake Book as `assert pick(2) == <Color.GREEN: 2>` "
                   "(a repr that does not parse when replayed); codea1 stores `Color.GREEN`. A candidate's own "
                   "`Color` class fails on both sides (members compare by identity)"),
        one("defect/eleven-tests-substring", "defect", ADD, "add", [ADD_BAD], [eleven],
            defect="with more than ten tests the reference finds pass markers by substring: `_1` matches `_10`"),
        Case("defect/book-text-does-not-parse", "defect", POINT, "make",
             [Step([py(POINT)], [[py("assert make(2).x == 2\nassert make(3) is not None")]])],
             book=[("assert make(1) == <__main__.Point object at 0x7f0000000000>", 1)],
             defect="a Mistake Book test that does not parse (an `<object at 0x...>` repr) breaks the reference's "
                    "whole program (a syntax error: the candidate is invalid); codea1 skips that test"),
        one("defect/candidate-redefines-print", "defect", ADD, "add", [py("print = lambda *a, **k: None\n" + ADD)],
            [ADD_SUITE], defect="a candidate that redefines `print` hides the reference's markers"),
        one("defect/pytest-approx", "defect", "def half(x):\n    return x / 3\n", "half",
            [py("def half(x):\n    return x / 3")],
            [py("import pytest\nassert half(1) == pytest.approx(0.3333)\nassert half(3) == 1.0\nassert half(6) == 2.0")],
            defect="`pytest.approx` is not imported in the reference's program: its NameError shifts the later verdicts"),
        one("defect/returned-generator", "defect", "def evens(n):\n    return (x for x in range(0, n, 2))\n", "evens",
            [py("def evens(n):\n    return (x for x in range(0, n, 2))")], [py("assert evens(4) == [0, 2]")],
            defect="a returned generator equals nothing but itself in the reference (codea1: a value it cannot compare)"),
        one("defect/returned-object-grows-later", "defect", "_s = []\ndef push(x):\n    _s.append(x)\n    return _s\n",
            "push", [py("_s = []\ndef push(x):\n    _s.append(x)\n    return _s"), py("def push(x):\n    return [x]")],
            [py("assert push(1) == [1]\nassert push(2) == [1, 2]\nassert push(3) == [1, 2, 3]")],
            defect="the reference keeps the object a call returned and compares the candidate with it after all its "
                   "calls: a returned list grown by later calls fails a candidate identical to the reference"),
        one("defect/bookkeeping-name", "defect", "seen = 0\ndef add(a, b):\n    return a + b + seen\n", "add",
            [ADD_OK], [ADD_SUITE], defect="a reference global named like the reference's own bookkeeping (`seen`)"),
    ]


def cases_39() -> list[Case]:
    return (_exit_cases() + _state_cases() + _output_cases() + _value_cases() + _time_cases() + _reading_cases()
            + _recursion_cases() + _import_cases() + _realistic_cases() + _defect_cases())


# -- running one case through each side -------------------------------------------------------

@dataclass
class Outcome:
    valid: list[bool]
    code_rewards: list[float]
    counts: list[list[tuple[int, int]]]  # per candidate, per suite: (valid, invalid)
    test_rewards: list[list[float]]
    book: list[list[tuple[str, int]]]  # after each step: (test, frequency), ranked


def run_reference(ref, book_class, case: Case) -> Outcome:
    qid = "q"
    with tempfile.TemporaryDirectory(prefix="refdiff-book-") as tmp:
        with contextlib.redirect_stdout(io.StringIO()):  # (it reports a missing file)
            book = book_class(tmp, 0)
        if case.book:
            book.mistake_book[qid] = {"attack_testcases": [{"testcase": t, "frequency": f} for t, f in case.book],
                                      "blacklisted": False}
        out = Outcome([], [], [], [], [])
        for step in case.steps:
            n_code, n_test = len(step.codes), len(step.suites[0])
            codes, _ = ref.extract_code_from_response(step.codes)
            flat = [t for row in step.suites for t in row]
            tests, info = ref.extract_testcase_from_response(flat)
            attack = ref.get_attack_testcases_from_mistake_book(book, [qid], n_code) if book.mistake_book else []
            (valid, valid_tcs, invalid, total, _, _, _, gen_passed, gen_total, gen_msgs, _, _, _,
             attack_total, attack_passed, gen_failed) = ref.evaluate(codes, tests, [case.reference] * n_code, [], attack)
            rewards_a, rewards_b = [], []
            for b in range(len(flat)):
                i = b // n_test
                r = ref.compute_dual_model_reward(
                    is_code_valid=valid[i], gt_passed=-1, gt_total=-1, gt_failed_msgs=[],
                    valid_generated_tests=valid_tcs[b], invalid_count=invalid[b], total_generated_count=total[b],
                    gen_passed=gen_passed[b], gen_failed_msgs=gen_msgs[b], test_phase="adversarial",
                    test_nonprintable_ratio=info["nonprintable_ratio"][b],
                    attack_gen_passed=len(attack_passed[i]) if attack_passed else 0,
                    attack_gen_total=attack_total[i] if attack_total else 0)
                rewards_a.append(r["reward_a"])
                rewards_b.append(r["reward_b"])
            out.valid = list(valid)
            out.code_rewards = [sum(rewards_a[i * n_test:(i + 1) * n_test]) / n_test for i in range(n_code)]
            out.counts = [[(len(valid_tcs[i * n_test + j]), invalid[i * n_test + j]) for j in range(n_test)]
                          for i in range(n_code)]
            out.test_rewards = [rewards_b[i * n_test:(i + 1) * n_test] for i in range(n_code)]
            ref.update_mistake_book(book, [qid], n_code, n_test, codes, valid, attack_total, attack_passed,
                                    gen_total, gen_passed, gen_failed)
            ranked = book.get_attack_testcases(qid, max_count=1000)
            freq = {e["testcase"]: e["frequency"] for e in book.mistake_book.get(qid, {}).get("attack_testcases", [])}
            out.book.append([(t, freq[t]) for t in ranked])
        return out


def run_codea1(executor, config, case: Case, net_book: bool = False) -> Outcome:
    from codea1.data import Problem
    from codea1.judge import Judge, ProblemRollout
    from codea1.mistakes import MistakeBook, MistakeUpdate

    from collections import Counter

    problem = Problem(id="q", question="", entry_point=case.entry, reference=case.reference)
    judge = Judge(executor, config)
    with tempfile.TemporaryDirectory(prefix="refdiff-book-") as tmp:
        book = MistakeBook(Path(tmp) / "book.sqlite")
        for step_no, (test, freq) in enumerate(case.book):  # seeds in rank order: highest first, then entry order
            book.apply_step(-len(case.book) + step_no, {"q": MistakeUpdate(failed=Counter({test: freq}))})
        out = Outcome([], [], [], [], [])
        for number, step in enumerate(case.steps, 1):
            mistakes = book.top("q", config.suite_size)
            result = judge.judge_step([ProblemRollout(problem, step.codes, step.suites, mistakes)])[0]
            if not result.usable:
                raise RuntimeError(f"{case.name}: codea1 could not judge the problem: "
                                   f"{result.infra_error or result.reference_error}")
            out.valid = list(result.code_valid)
            out.code_rewards = list(result.code_rewards)
            out.counts = [[(s.valid, s.invalid) for s in row] for row in result.suites]
            out.test_rewards = [list(row) for row in result.test_rewards]
            book.apply_step(number, {"q": result.mistake_update()}, **({"net": True} if net_book else {}))
            out.book.append([(e.test, e.frequency) for e in book.entries("q")])
        book.close()
        return out


def _same_test(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except (SyntaxError, ValueError):
        return False


def compare(ref: Outcome, ours: Outcome) -> dict[str, bool]:
    close = lambda x, y: math.isclose(x, y, abs_tol=1e-9)  # noqa: E731
    books = len(ref.book) == len(ours.book) and all(
        len(r) == len(o) and all(_same_test(rt, ot) and rf == of for (rt, rf), (ot, of) in zip(r, o))
        for r, o in zip(ref.book, ours.book))
    return {
        "validity": ref.valid == ours.valid,
        "code reward": len(ref.code_rewards) == len(ours.code_rewards)
        and all(map(close, ref.code_rewards, ours.code_rewards)),
        "counts": ref.counts == ours.counts,
        "test reward": all(len(r) == len(o) and all(map(close, r, o)) for r, o in zip(ref.test_rewards, ours.test_rewards)),
        "book": books,
    }


def _show(label: str, o: Outcome) -> str:
    rewards = [round(x, 4) for x in o.code_rewards]
    tests = [[round(x, 4) for x in row] for row in o.test_rewards]
    book = o.book[-1] if o.book else []
    return (f"    {label}: valid={o.valid} code={rewards} counts={o.counts} tests={tests}\n"
            f"    {' ' * len(label)}  book={book}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, required=True, help="the Code-A1 reference's code/rl/reward.py")
    ap.add_argument("--trainer", type=Path, help="its trainer_a1.py (default: next to reward.py)")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this text")
    ap.add_argument("--item", default="", help="run only the cases whose item starts with this (e.g. 39)")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="a JudgeConfig field for codea1's side, NAME=VALUE (e.g. require_entry_point=true)")
    ap.add_argument("--net-book", action="store_true",
                    help="codea1's Mistake Book applies net changes (mistakes.net_changes, the project's rule)")
    ap.add_argument("--verbose", action="store_true", help="show both outcomes of agreeing cases too")
    args = ap.parse_args()

    ref, book_class = load_reference(args.reference, args.trainer)
    from codea1.judge import JudgeConfig
    from codea1.sandbox import Executor

    fields = {}
    for item in args.overrides:
        name, _, value = item.partition("=")
        if not hasattr(JudgeConfig(), name):
            sys.exit(f"--set {item}: JudgeConfig has no field {name!r}")
        fields[name] = json.loads(value.lower()) if value.lower() in ("true", "false") else json.loads(value)
    config = JudgeConfig(**fields)
    selected = [c for c in cases() if args.only in c.name and c.item.startswith(args.item)]
    agree = differ = defects = 0
    differing: list[str] = []
    started = time.monotonic()
    with Executor(workers=2, limits=config.limits) as executor:
        for case in selected:
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # the reference's own progress prints
                    ref_out = run_reference(ref, book_class, case)
            except Exception as err:  # noqa: BLE001 - a reference defect may crash its reward code
                ref_out = Outcome([], [], [], [], [])
                print(f"    (the reference's reward code raised {type(err).__name__}: {str(err)[:120]})")
            our_out = run_codea1(executor, config, case, args.net_book)
            checks = compare(ref_out, our_out)
            same = all(checks.values())
            if case.defect:
                verdict = "reference defect" + (" (agrees anyway)" if same else "")
                defects += 1
            elif same:
                verdict, agree = "agree", agree + 1
            else:
                verdict, differ = "DIFFER", differ + 1
                differing.append(case.name)
            marks = " ".join(f"{k}={'=' if v else 'X'}" for k, v in checks.items())
            print(f"[{case.item:>6}] {case.name:<40} {marks}  {verdict}")
            if not same or args.verbose:
                if case.defect:
                    print(f"    defect: {case.defect}")
                print(_show("reference", ref_out))
                print(_show("codea1   ", our_out))
    print(f"\n{len(selected)} cases in {time.monotonic() - started:.0f} s: {agree} agree, {differ} differ, "
          f"{defects} reference defects (not reproduced)")
    if differing:
        print("differing: " + ", ".join(differing))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
