"""The shared pause of the cyclic garbage collector (judge steps, sandbox result reading)."""

from __future__ import annotations

import gc
import threading

import pytest

from codea1.gcpause import gc_paused


@pytest.fixture(autouse=True)
def _collector_on():
    gc.enable()
    yield
    gc.enable()


def test_overlapping_pauses_in_two_threads_resume_when_the_last_ends():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with gc_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(5)
    with gc_paused():
        second_in.set()
        first_out.wait(5)
        seen["after the first ended"] = gc.isenabled()  # the second pause still holds
    t.join()
    assert seen == {"after the first ended": False}
    assert gc.isenabled()


def test_nested_pauses_and_a_collector_that_was_off():
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()  # it was off before: it stays off


def test_the_pause_ends_when_the_block_raises():
    with pytest.raises(ZeroDivisionError):
        with gc_paused():
            1 / 0
    assert gc.isenabled()
