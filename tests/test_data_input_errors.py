"""Bad problem data is refused when it loads, with one error naming the file, the row and
the field: damaged files, JSON that `json` rejects beyond a syntax error, and fields of
the wrong type that used to crash a converter or be read in silence as something else.
Every row here was written for these tests (none comes from a data set)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from codea1.cli import app
from codea1.data import ProblemFormatError, load_problems
from codea1.data.stdin_io import io_test

ADD = "a, b = map(int, input().split())\nprint(a + b)\n"


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _refused(tmp_path, rows, where: str, fmt: str | None = None, name: str = "bad.jsonl"):
    """Load `rows`; the error must name the file, `where` (row and field) and be one line."""
    with pytest.raises(ProblemFormatError) as caught:
        load_problems(_jsonl(tmp_path / name, rows), fmt=fmt)
    assert f"{name}, row {len(rows)}{where}" in str(caught.value) and "\n" not in str(caught.value)
    return str(caught.value)


def stdin_row(**change):
    row = {"id": "s/1", "question": "add", "entry_point": "", "reference": ADD, "kind": "stdin",
           "tests": [io_test("1 2\n", "3\n")], "meta": {}}
    row.update(change)
    return row


def codecontests_row(**change):
    row = {"name": "A", "description": "sum", "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
           "solutions": {"language": [3], "solution": [ADD]}, "time_limit": {"seconds": 2, "nanos": 0}}
    row.update(change)
    return row


def taco_call_row(**change):
    row = {"problem_id": 7, "question": "double", "solutions": json.dumps(["def f(x):\n    return 2 * x\n"]),
           "input_output": json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[2]]}), "starter_code": ""}
    row.update(change)
    return row


def lcb_row(**change):
    row = {"question_id": "abc1", "question_content": "sum", "starter_code": "", "metadata": "{}",
           "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
           "private_test_cases": ""}
    row.update(change)
    return row


def kodcode_row(**change):
    row = {"question_id": "K1", "question": "Write f.", "solution": "def f(x):\n    return x\n",
           "test": "from solution import f\ndef test_a():\n    assert f(1) == 1\n",
           "test_info": [{"function_name": "f", "function_declaration": "def f(x):", "docstring": ""}]}
    row.update(change)
    return row


def unleaked_row(**change):
    row = {"task_id": "U1", "func_name": "f", "code": "def f(x):\n    return x\n", "prompt": "identity",
           "test_list": ["assert f(1) == 1"]}
    row.update(change)
    return row


def evalplus_row(**change):
    row = {"task_id": "Mbpp/2", "prompt": '"""\nWrite f.\nassert f(1) == 1\n"""\n', "entry_point": "f",
           "canonical_solution": "def f(x):\n    return x\n", "base_input": [[1]], "plus_input": [[2]], "atol": 0}
    row.update(change)
    return row


def codea1_row(**change):
    row = {"problem": 'def double(x):\n"""\nDouble x.\n"""', "description": "Double x.\nassert double(2)==4",
           "GT_code": "def double(x):\n    return x * 2\n", "test": "",
           "extra_info": {"question_id": "D/1", "function_name": "double"}}
    row.update(change)
    return row


def test_a_damaged_parquet_row_group_names_the_file_and_row(tmp_path):
    """The footer reads, a later row group does not: one `error:` line naming the file
    and the first row it could not read, exit 2. Before: "error: Corrupt snappy
    compressed data." naming no file, exit 1."""
    rows = [codea1_row(GT_code=f"def double(x):\n    return x * 2  # {k}{'.' * 4000}\n",
                       extra_info={"question_id": f"D/{k}", "function_name": "double"}) for k in range(3)]
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1, compression="snappy")
    meta = pq.ParquetFile(path).metadata
    start = min(meta.row_group(1).column(c).data_page_offset for c in range(meta.num_columns))
    end = max(meta.row_group(1).column(c).data_page_offset + meta.row_group(1).column(c).total_compressed_size
              for c in range(meta.num_columns))
    data = bytearray(path.read_bytes())
    data[start + 16:end] = bytes(len(data[start + 16:end]))
    path.write_bytes(bytes(data))
    with pytest.raises(ProblemFormatError, match=r"rows\.parquet, row 2: expected a readable parquet file"):
        load_problems(path)
    result = CliRunner().invoke(app, ["data", "check", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith("error: ") and "rows.parquet, row 2" in result.stderr


@pytest.mark.parametrize("text, why", [
    ('{"id": ' + "9" * 5000 + "}", "4300 digits"),
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
])
def test_json_that_json_rejects_past_its_syntax_names_the_row(tmp_path, text, why):
    """An int of more digits than Python converts (ValueError) or nesting past the
    recursion limit (RecursionError): before, a raw traceback."""
    good = json.dumps(stdin_row())
    (tmp_path / "bad.jsonl").write_text(good + "\n" + text + "\n")
    with pytest.raises(ProblemFormatError, match=rf"bad\.jsonl, row 2: expected one JSON object per line.*{why}"):
        load_problems(tmp_path / "bad.jsonl")
    (tmp_path / "bad.json").write_text("[" + good + ", " + text + "]")
    with pytest.raises(ProblemFormatError, match=rf"bad\.json: expected a JSON array of objects.*{why}"):
        load_problems(tmp_path / "bad.json")


def test_codea1_rows_description_must_be_text(tmp_path):
    """Before: AttributeError ('int' object has no attribute 'splitlines')."""
    _refused(tmp_path, [codea1_row(), codea1_row(description=5)], ", field 'description': expected a string")
    assert load_problems(_jsonl(tmp_path / "none.jsonl", [codea1_row(description=None)]))[0].tests == []


@pytest.mark.parametrize("change, field", [
    ({"public_tests": {"input": "1 2\n", "output": "3\n"}}, "public_tests.inputs"),
    ({"public_tests": {"input": ["1 2\n"], "output": "3\n"}}, "public_tests.outputs"),
    ({"time_limit": {"seconds": "2", "nanos": 0}}, "time_limit"),
    ({"time_limit": {"seconds": 2, "nanos": [1]}}, "time_limit"),
])
def test_codecontests_wrong_types_are_refused(tmp_path, change, field):
    """Test lists given as strings were split into characters (one test a character);
    a string `seconds` crashed with TypeError."""
    _refused(tmp_path, [codecontests_row(), codecontests_row(name="B", **change)], f", field '{field}'")


@pytest.mark.parametrize("row", [taco_call_row(starter_code=5), lcb_row(starter_code=5), lcb_row(starter_code=[])])
def test_starter_code_must_be_text(tmp_path, row):
    """Before: TypeError ("argument of type 'int' is not iterable")."""
    _refused(tmp_path, [row], ", field 'starter_code': expected a string")


@pytest.mark.parametrize("maker, field", [
    (kodcode_row, "question_id"), (unleaked_row, "task_id"), (lcb_row, "question_id"), (taco_call_row, "problem_id"),
])
def test_id_fields_take_text_or_an_integer_not_a_container(tmp_path, maker, field):
    """A dict or list id used to become its text ("{'a': 1}"); an int stays accepted."""
    for bad in ({"a": 1}, [1, 2]):
        _refused(tmp_path, [maker(**{field: bad})], f", field '{field}': expected a string or an integer")
    [problem] = load_problems(_jsonl(tmp_path / "int.jsonl", [maker(**{field: 12})]))
    assert problem.id.endswith("12")


def test_kodcode_function_declaration_must_be_text(tmp_path):
    """Before: `5` became the declaration "5:" of the question."""
    info = [{"function_name": "f", "function_declaration": 5}]
    _refused(tmp_path, [kodcode_row(test_info=info)], ", field 'test_info[0].function_declaration'")


@pytest.mark.parametrize("atol", [[], "", "0.1", -1.0, True])
def test_evalplus_atol_must_be_a_number(tmp_path, atol):
    """Before: `[]` and `""` were read as 0 (exact comparison) in silence."""
    _refused(tmp_path, [evalplus_row(atol=atol)], ", field 'atol': expected a number >= 0", fmt="evalplus")


@pytest.mark.parametrize("meta, field", [
    ({"time_limit_s": "2"}, "meta.time_limit_s"), ({"time_limit_s": 0}, "meta.time_limit_s"),
    ({"float_tolerance": -1}, "meta.float_tolerance"), ({"float_tolerance": "1e-6"}, "meta.float_tolerance"),
    ({"checker": 5}, "meta.checker"), ({"checker": "  "}, "meta.checker"),
])
def test_stdin_meta_keys_are_type_checked(tmp_path, meta, field):
    """Before: each was ignored in silence (no time limit, exact comparison, no checker)."""
    _refused(tmp_path, [stdin_row(), stdin_row(id="s/2", meta=meta)], f", field '{field}'")
    ok = {"time_limit_s": 2, "float_tolerance": 0, "checker": "def check(i, e, o):\n    return True\n"}
    assert load_problems(_jsonl(tmp_path / "ok.jsonl", [stdin_row(meta=ok)]))[0].meta == ok


def test_a_stdin_program_with_a_reference_carries_its_own_imports(tmp_path):
    """The training judge runs a stdin reference without `imports`, while `eval code` and
    `data check` put them first: a row with both is refused, naming the field. A stdin
    row without a reference (LiveCodeBench's: evaluation only) keeps its harness imports."""
    _refused(tmp_path, [stdin_row(imports="from math import isqrt")], ", field 'imports'")
    [lcb] = load_problems(_jsonl(tmp_path / "lcb.jsonl", [lcb_row()]))
    assert lcb.kind == "stdin" and lcb.imports and not lcb.reference
