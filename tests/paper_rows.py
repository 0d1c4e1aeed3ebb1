"""Rows in the Code-A1 reference's parquet format, written for the tests (not copied data).

`HUMANEVAL_STYLE_ROWS` have the shape of the reference validation file's HumanEval+ rows:
`problem` is a HumanEval-style prompt (imports, helpers, signature, indented docstring),
`GT_code` the function *body* that completes it, and `test` an EvalPlus-style program
whose `check(candidate)` runs the inputs and compares with the expected results. The
problems are our own. `HumanEvalStyle/2`'s reference is wrong on one of its inputs on
purpose (banker's rounding where the docstring asks for half-up), the way HumanEval/32's
is: `codea1 data check` must name it. `MBPP_STYLE_ROW` has the MBPP+ shape (a complete
`GT_code`, `check(<function>)`), `KODCODE_STYLE_ROW` the training file's (a complete
`GT_code`, KodCode's pytest tests importing from `solution`).
"""

from __future__ import annotations

from pathlib import Path

_ASSERTION = '''import numpy as np


def is_floats(x) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)):
        return all(isinstance(i, float) for i in x)
    return False


def assertion(out, exp, atol):
    exact_match = out == exp
    if atol == 0 and is_floats(exp):
        atol = 1e-6
    if not exact_match and atol != 0:
        assert np.allclose(out, exp, rtol=1e-07, atol=atol)
    else:
        assert exact_match


'''


def _check(inputs: list, results: list, atol: float = 0) -> str:
    return _ASSERTION + (
        "def check(candidate):\n"
        f"    inputs = {inputs!r}\n"
        f"    results = {results!r}\n"
        "    for i, (inp, exp) in enumerate(zip(inputs, results)):\n"
        f"        assertion(candidate(*inp), exp, {atol!r})\n"
    )


def _messages(problem: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a helpful code completion assistant."},
        {"role": "user", "content": "Complete the function. Output it in one ```python block.\n\n"
                                    f"Question:\n{problem}"},
    ]


def _row(problem: str, description: str, body: str, test: str, qid: str, name: str,
         source: str = "humanevalplus", **info: str) -> dict:
    return {
        "prompt": _messages(problem), "description": description, "GT_code": body,
        "problem": problem, "test": test, "data_source": source,
        "extra_info": {"question_id": qid, "function_name": name, **info},
    }


_RUNNING_MAX = '''from typing import List


def running_max(values: List[int]) -> List[int]:
    """ For every position of values, the largest value seen up to and including it.
    >>> running_max([1, 3, 2, 5, 4])
    [1, 3, 3, 5, 5]
    """
'''

_VOWEL_RUNS = '''

def is_vowel(ch: str) -> bool:
    """ Whether ch is one of the letters a, e, i, o, u (either case). """
    return ch.lower() in "aeiou"


def vowel_runs(text: str) -> int:
    """ The number of maximal runs of consecutive vowels in text (use is_vowel).
    >>> vowel_runs('queue bee')
    2
    >>> vowel_runs('xyz')
    0
    """
'''

_HALF_UP = '''

def round_half_up(x: float) -> int:
    """ Round x to the nearest integer; a value exactly halfway rounds away from zero.
    >>> round_half_up(1.4)
    1
    >>> round_half_up(2.5)
    3
    """
'''

HUMANEVAL_STYLE_ROWS = [
    _row(
        _RUNNING_MAX,
        "For every position of values, the largest value seen up to and including it.",
        "    best = None\n    out = []\n    for v in values:\n        best = v if best is None or v > best else best\n"
        "        out.append(best)\n    return out\n",
        _check([[[1, 3, 2, 5, 4]], [[]], [[-2, -5, -1]], [[7]]], [[1, 3, 3, 5, 5], [], [-2, -2, -1], [7]]),
        "HumanEvalStyle/0", "running_max",
    ),
    _row(
        _VOWEL_RUNS,
        "The number of maximal runs of consecutive vowels in text (use is_vowel).",
        "    runs = 0\n    inside = False\n    for ch in text:\n        if is_vowel(ch) and not inside:\n"
        "            runs += 1\n        inside = is_vowel(ch)\n    return runs\n",
        _check([["queue bee"], ["xyz"], [""], ["AEIOU"], ["banana"]], [2, 0, 0, 1, 3]),
        "HumanEvalStyle/1", "vowel_runs",
    ),
    _row(
        _HALF_UP,
        "Round x to the nearest integer; a value exactly halfway rounds away from zero.",
        "    return round(x)\n",  # banker's rounding: wrong on 2.5 (gives 2)
        _check([[1.4], [2.5], [-0.6], [3.0]], [1, 3, -1, 3]),
        "HumanEvalStyle/2", "round_half_up",
    ),
]

_SECOND_SMALLEST = 'def second_smallest(nums):\n"""\nReturn the second smallest distinct value of nums, or None.\nassert second_smallest([4, 1, 3, 1]) == 3\n"""'

MBPP_STYLE_ROW = _row(
    _SECOND_SMALLEST,
    "Return the second smallest distinct value of nums, or None.\nassert second_smallest([4, 1, 3, 1]) == 3",
    "def second_smallest(nums):\n    values = sorted(set(nums))\n    return values[1] if len(values) > 1 else None\n",
    _ASSERTION + (
        "def check(second_smallest):\n"
        "    inputs = [[[4, 1, 3, 1]], [[5]], [[2, 2]], [[-1, -7, 0]]]\n"
        "    results = [3, None, None, -1]\n"
        "    for i, (inp, exp) in enumerate(zip(inputs, results)):\n"
        "        assertion(second_smallest(*inp), exp, 0)\n"
    ),
    "MBPPStyle/1", "second_smallest", source="mbppplus",
    function_declaration="def second_smallest(nums)", imports="",
)

KODCODE_STYLE_ROW = {
    **_row(
        'def merge_intervals(intervals):\n"""\nMerge overlapping closed intervals [start, end] and return '
        'them sorted by start.\n"""',
        "Merge overlapping closed intervals [start, end] and return them sorted by start.",
        "def merge_intervals(intervals):\n    merged = []\n    for start, end in sorted(intervals):\n"
        "        if merged and start <= merged[-1][1]:\n            merged[-1][1] = max(merged[-1][1], end)\n"
        "        else:\n            merged.append([start, end])\n    return merged\n",
        "from solution import merge_intervals\n\n\ndef test_overlap():\n"
        "    assert merge_intervals([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]\n\n\n"
        "def test_touching_and_unsorted():\n    assert merge_intervals([[4, 5], [1, 4]]) == [[1, 5]]\n\n\n"
        "def test_empty():\n    assert merge_intervals([]) == []\n",
        "KodCodeStyle/hard_0", "merge_intervals", source="kodcode_light",
    ),
    "clean_description": "Merge overlapping closed intervals [start, end] and return them sorted by start.",
}


def write_parquet(path: Path, rows: list[dict]) -> Path:
    """The rows as one parquet file, the way the reference stores them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def validation_file(path: Path) -> Path:
    """A small validation file of the reference's shape: HumanEval+-style and MBPP+-style rows."""
    return write_parquet(path, HUMANEVAL_STYLE_ROWS + [MBPP_STYLE_ROW])


def training_file(path: Path) -> Path:
    """A small training file of the reference's shape (KodCode-style rows)."""
    return write_parquet(path, [KODCODE_STYLE_ROW])


# Solutions a scripted "model" writes for these rows (complete functions, as a chat model does).
RIGHT = {
    "running_max": "from typing import List\n\ndef running_max(values: List[int]) -> List[int]:\n"
                   "    import itertools\n    return list(itertools.accumulate(values, max))\n",
    "vowel_runs": "def is_vowel(ch):\n    return ch.lower() in 'aeiou'\n\n\ndef vowel_runs(text):\n"
                  "    runs, inside = 0, False\n    for ch in text:\n        runs += is_vowel(ch) and not inside\n"
                  "        inside = is_vowel(ch)\n    return runs\n",
    "round_half_up": "import math\n\ndef round_half_up(x):\n"
                     "    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)\n",
    "second_smallest": "def second_smallest(nums):\n    s = sorted(set(nums))\n    return s[1] if len(s) > 1 else None\n",
    "merge_intervals": KODCODE_STYLE_ROW["GT_code"],
}
WRONG = {
    "running_max": "def running_max(values):\n    return sorted(values)\n",
    "vowel_runs": "def vowel_runs(text):\n    return sum(ch in 'aeiou' for ch in text)\n",
    "round_half_up": "def round_half_up(x):\n    return round(x)\n",
    "second_smallest": "def second_smallest(nums):\n    return sorted(nums)[1]\n",
    "merge_intervals": "def merge_intervals(intervals):\n    return intervals\n",
}


class ScriptedSample:
    def __init__(self, text: str) -> None:
        self.text, self.truncated, self.finished = text, False, True


def scripted_generate(right_counts: dict[str, int]):
    """A stand-in for `codea1.engines.hf_engine.generate`: for a code prompt of function f, the first
    `right_counts[f]` of the n samples are right, the others wrong."""

    def generate(policies, role, prompts, n=1, sampling=None, **kw):
        assert role == "code"
        out = []
        for prompt in prompts:
            user = prompt_text(prompt, policies)
            fn = next(f for f in RIGHT if f"def {f}(" in user)
            out.append([ScriptedSample(f"```python\n{RIGHT[fn] if i < right_counts[fn] else WRONG[fn]}```")
                        for i in range(n)])
        return out

    return generate


class CharTokenizer:
    """A tokenizer of one token per character (its code point), enough for code paths
    that encode chat prompts and hand token ids on (the rollout engines)."""

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages)

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids):
        return "".join(map(chr, ids))


class ScriptedPolicies:
    """Just the tokenizer, device and dtype of `Policies`: what evaluation and validation
    need to sample through the `hf` rollout engine from a scripted
    `codea1.engines.hf_engine.generate` (an evaluation records the device and dtype)."""

    tokenizer = CharTokenizer()
    device = "cpu"
    dtype = "torch.float32"


def prompt_text(prompt, policies) -> str:
    """The text a scripted sampler reads: chat messages' last content, or token ids (what
    the rollout engines hand on) decoded with the policies' tokenizer."""
    return policies.tokenizer.decode(prompt) if isinstance(prompt[0], int) else prompt[-1]["content"]
