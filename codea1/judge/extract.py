"""Pull code out of raw model completions.

Models wrap code in Markdown fences, sometimes several, sometimes unterminated when the
generation hit its token limit. The reference's rule (`extract_code`): the code is the text
between the first ```` ```python ```` and the next ```` ``` ````; without such a closed block,
the whole completion, which then does not run (a truncated answer, a ```` ```py ```` or a
bare ```` ``` ```` block are invalid code). `judge.lenient_code_fences` is the project's
alternative: the first python-tagged block (```` ```py ````, ```` ```python3 ```` too), else the
first fenced block, an unterminated one running to the end of the text. Tests are collected
from *all* the python blocks of a test completion (a model may split its asserts).
"""

from __future__ import annotations

import re

__all__ = ["code_blocks", "extract_code", "extract_test_source", "python_test_source"]

# An opening fence at the start of a line: ``` or more backticks, an optional language tag.
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<ticks>`{3,})[ \t]*(?P<lang>[^\s`]*)[^\n]*$", re.MULTILINE)
_PYTHON_TAGS = {"python", "py", "python3", "py3"}


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of `text` as `(language tag in lower case, body)`, in order.

    A block runs to the next line holding a closing fence of at least as many backticks;
    an unterminated last block (a truncated generation) runs to the end of the text.
    """
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        opening = _FENCE_OPEN.search(text, pos)
        if opening is None:
            return blocks
        ticks = opening.group("ticks")
        closing = re.compile(rf"^[ \t]*`{{{len(ticks)},}}[ \t]*$", re.MULTILINE)
        body_start = opening.end() + 1   # (past the end of a text that ends on the fence: no match)
        end = closing.search(text, body_start)
        if end is None:
            blocks.append((opening.group("lang").lower(), text[body_start:]))
            return blocks
        blocks.append((opening.group("lang").lower(), text[body_start : end.start()]))
        pos = end.end()


def extract_code(text: str, lenient: bool = False) -> str:
    """The code of a completion (see the module docstring; `lenient`: the project's rule)."""
    if not lenient:
        start = text.find("```python")
        if start >= 0:
            body_start = start + len("```python")
            end = text.find("```", body_start)
            # (a second ```python does not close the block: it would open another)
            if end >= 0 and not text.startswith("```python", end):
                return text[body_start:end].strip("\n")
        return text.strip("\n")
    blocks = code_blocks(text)
    for lang, body in blocks:
        if lang in _PYTHON_TAGS:
            return body
    if blocks:
        return blocks[0][1]
    return text


def extract_test_source(text: str) -> str:
    """The test code of a completion: all ```python blocks joined, else all ``` blocks, else the text."""
    blocks = code_blocks(text)
    python = [body for lang, body in blocks if lang in _PYTHON_TAGS]
    chosen = python or [body for _, body in blocks]
    return _joined(chosen) if chosen else text


def python_test_source(text: str) -> str | None:
    """All ```python blocks of a completion joined (the reference reads its tests from
    them), or None when it has none."""
    python = [body for lang, body in code_blocks(text) if lang in _PYTHON_TAGS]
    return _joined(python) if python else None


def _joined(bodies: list[str]) -> str:
    return "\n".join(body.rstrip("\n") for body in bodies) + "\n"
