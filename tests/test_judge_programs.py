"""The candidate's program in the reference's namespace (codea1.judge.programs), on hand-made modules."""

from __future__ import annotations

from codea1.judge.programs import candidate_program, hoist_imports, reference_program

REFERENCE = "from collections import Counter\nclass Node:\n    def size(self):\n        return 1\ndef f(x):\n    return x\n"


def test_imports_outside_function_bodies_move_to_the_top():
    module = hoist_imports("import math\nif True:\n    import os\n    x = 1\ndef g():\n    import json\n    return json\n")
    assert module.imports == {"import math", "import os"}
    assert module.functions == {"g"}
    assert "import json" in module.body and "import math" not in module.body
    # a `try:` that held only an import no longer parses: the reference never runs it
    only_import = hoist_imports("try:\n    import numpy\nexcept ImportError:\n    numpy = None\n")
    assert only_import.parsed and only_import.body is None
    assert candidate_program("", hoist_imports(REFERENCE), only_import) is None
    # code that does not parse is kept as written (it fails with its own error)
    broken = hoist_imports("def f(:\n")
    assert not broken.parsed and broken.body == "def f(:\n"


def test_the_candidate_runs_after_the_reference_with_its_functions_deleted():
    reference = hoist_imports(REFERENCE)
    assert reference.functions == {"f", "size"}  # (methods too; deleting `size` fails quietly)
    program = candidate_program("from typing import *", reference, hoist_imports("import math\ndef f(x):\n    return -x\n"))
    lines = program.splitlines()
    assert lines[:3] == ["from typing import *", "from collections import Counter", "import math"]
    assert program.index("class Node") < program.index("del f") < program.index("return -x")
    namespace: dict = {}
    exec(program, namespace)  # noqa: S102 - a hand-written module
    assert namespace["f"](2) == -2 and "Node" in namespace and "Counter" in namespace and "math" in namespace


def test_the_reference_program_holds_every_candidates_imports_guarded():
    reference = hoist_imports(REFERENCE)
    candidates = [hoist_imports("import math\n"), hoist_imports("import no_such_module_xyz\nfrom __future__ import annotations\n")]
    program = reference_program("", REFERENCE, reference, candidates)
    namespace: dict = {}
    exec(program, namespace)  # noqa: S102 - the missing module is skipped, the future import left out
    assert "math" in namespace and "no_such_module_xyz" not in namespace and namespace["f"](3) == 3
    assert "__future__" not in program
