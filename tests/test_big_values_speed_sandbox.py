"""The sandbox's side of big values: the child writes a container's scalars without a call
each (the same text as before), the worker reads a value's text once per run however
often it comes back, without the collector, and the executor holds no run's values once
it has handed them over."""

from __future__ import annotations

import collections
import gc
import json
import random
import time
import weakref

import pytest

from codea1.sandbox import Executor, Job, Limits
from codea1.sandbox import _worker
from codea1.sandbox import values as values_module
from codea1.sandbox._worker import _REMEMBERED_TEXT, _RecordParser
from codea1.sandbox.values import _MAX_DEPTH, EncodingError, allow_deep_values, encode, encode_json, encode_to_send, plain_json


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(12 if depth < 4 else 6)
    if kind == 0:
        return rng.randrange(-10**30, 10**30)
    if kind == 1:
        return rng.choice([0.5, -0.0, float("inf"), float("nan"), 1e300, rng.random()])
    if kind == 2:
        return "".join(rng.choice("ab\"\\\n\u00e9\U0001f600{}") for _ in range(rng.randrange(4)))
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return rng.randrange(3)
    if kind == 5:
        return b"\x00x"
    items = [_random_value(rng, depth + 1) for _ in range(rng.randrange(20))]
    if kind in (6, 7):
        return items
    if kind == 8:
        return tuple(items)
    if kind == 9:
        return {x for x in items if type(x) in (int, str, float, bytes)}
    if kind == 10:
        return frozenset(x for x in items if type(x) in (str, float, bool))
    return {k: v for k, v in zip((x for x in items if isinstance(x, (int, str))), items)}


@pytest.mark.parametrize("seed", range(40))
def test_the_json_text_is_the_encodings_text(seed):
    """`encode_json` (the child's one pass, scalars without a call each) writes exactly the
    text of `encode` (node by node), canonical or not."""
    value = _random_value(random.Random(seed))
    for canonical in (False, True):
        assert encode_json(value, canonical=canonical) == plain_json(encode(value, canonical=canonical))


def test_a_containers_scalars_are_written_without_a_call_each(monkeypatch):
    calls = collections.Counter()
    real = values_module._encode_json
    monkeypatch.setattr(values_module, "_encode_json", lambda *a: calls.update(["node"]) or real(*a))
    text = encode_json([1, "a", 2.5, [3, 4], True, None])
    assert text == plain_json(encode([1, "a", 2.5, [3, 4], True, None]))
    assert calls["node"] == 1 + 3  # (the list, and the inner list, True and None)


@pytest.mark.parametrize("value, limit", [
    (list(range(10)), 10), ({"a": 1, "b": 2}, 4), ({1, 2, 3}, 3), ([[1, 2], [3, 4]], 6), ((1, [2, 3]), 4),
])
def test_a_value_of_more_nodes_than_allowed_is_still_refused(value, limit):
    encode_json(value, max_items=limit + 1)
    with pytest.raises(EncodingError, match="too large"):
        encode_json(value, max_items=limit)


def test_a_value_nested_deeper_than_allowed_is_still_refused():
    allow_deep_values()
    deep: list = [1, "a"]
    for _ in range(_MAX_DEPTH - 1):
        deep = [deep]
    encode_json(deep)  # (its scalars at the deepest level allowed)
    with pytest.raises(EncodingError, match="too deeply"):
        encode_json([deep])


def test_an_int_too_long_to_write_raises_as_before():
    with pytest.raises(ValueError, match="digits"):
        encode_json([1, 10 ** 5000])


# --------------------------------------------------------------------------- the worker


def _record_lines(texts: list[str]) -> bytes:
    lines = ['["ready"]', '["P",true,null,"n0nce"]']
    for i, text in enumerate(texts):
        lines += [f'["S",{i}]', f'["R",{i},"ok",{text}]']
    return "".join(line + "\n" for line in [*lines, '["E","n0nce"]']).encode()


def _big_text(last: str = '["int","7"]') -> str:
    text = encode_to_send(list(range(20_000)), 1 << 24)[1]
    assert len(text) >= _REMEMBERED_TEXT
    return text[:-2] + "," + last + "]]"


def test_a_value_text_that_comes_back_in_a_run_is_read_and_checked_once(monkeypatch):
    scans = collections.Counter()
    real = _worker._scan_json
    monkeypatch.setattr(_worker, "_scan_json", lambda text, at: scans.update([len(text)]) or real(text, at))
    big = _big_text()
    parser = _RecordParser(0, 4, 1 << 24, "n0nce")
    parser.feed(_record_lines([big, big, '["int","1"]', big]))
    parser.finish()
    assert parser.violation is None and parser.ended
    assert [json.loads(parser.results[i])["value"] for i in range(4)] == [json.loads(big)] * 2 + [["int", "1"],
                                                                                                json.loads(big)]
    assert scans[len(big)] == 1


@pytest.mark.parametrize("bad", ['["int","x"]', '["int",7]', '["bool",1]', '["int","7"]]', '["int" "7"]'])
def test_a_text_that_differs_from_one_read_before_is_read_and_judged_on_its_own(bad):
    """A run cannot pass a malformed value as one it sent before: only the same text is
    known good (one byte apart is read again), and a text that failed is never known."""
    big, forged = _big_text(), _big_text(last=bad)
    for texts in ([big, forged], [forged, forged]):
        parser = _RecordParser(0, len(texts), 1 << 24, "n0nce")
        parser.feed(_record_lines(texts))
        parser.finish()
        assert parser.violation is not None and "malformed" in parser.violation
        assert 1 not in parser.results


def test_records_are_read_with_the_collector_paused_and_it_comes_back(monkeypatch):
    states = []
    real = _worker.check_value
    monkeypatch.setattr(_worker, "check_value", lambda v: states.append(gc.isenabled()) or real(v))
    assert gc.isenabled()
    for texts in ([_big_text()], [_big_text(last='["int","x"]')]):
        parser = _RecordParser(0, 1, 1 << 24, "n0nce")
        parser.feed(_record_lines(texts))
        assert gc.isenabled()
    assert states == [False, False]
    gc.disable()
    try:
        _RecordParser(0, 1, 1 << 24, "n0nce").feed(_record_lines([_big_text()]))
        assert not gc.isenabled()  # (a collector that was off stays off)
    finally:
        gc.enable()


# --------------------------------------------------------------------------- the executor


def test_the_executor_holds_no_result_once_handed_over():
    """A driver thread kept the last run's message and result until its next job: for a
    run of big values millions of objects, which the collector then walked for nothing."""
    with Executor(workers=1, limits=Limits(timeout_s=20.0)) as ex:
        future = ex.submit(Job(program="", calls=["list(range(1000))"]))
        result = future.result()
        assert result.calls[0].value[1][999] == ["int", "999"]
        gone = weakref.ref(result)
        del result, future
        deadline = time.monotonic() + 5
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gone() is None
