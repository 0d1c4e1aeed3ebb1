"""Process-wide settings held by overlapping blocks: the collector's pause, quick thread switching."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from codea1.interpreter import HANDOFF_INTERVAL_S, gc_paused, quick_handoff


@pytest.fixture(autouse=True)
def _defaults():
    gc.enable()
    sys.setswitchinterval(0.005)
    yield
    gc.enable()
    sys.setswitchinterval(0.005)


def _switching_fast() -> bool:
    return sys.getswitchinterval() == pytest.approx(HANDOFF_INTERVAL_S, rel=0.01)


@pytest.mark.parametrize("block, in_force", [
    (gc_paused, lambda: not gc.isenabled()),
    (quick_handoff, _switching_fast),
], ids=["gc_paused", "quick_handoff"])
def test_overlapping_blocks_in_two_threads_end_when_the_last_ends(block, in_force):
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with block():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(5)
    with block():
        second_in.set()
        first_out.wait(5)
        seen["after the first ended"] = in_force()  # the second block still holds
    t.join()
    assert seen == {"after the first ended": True}
    assert gc.isenabled() and sys.getswitchinterval() == pytest.approx(0.005, rel=0.01)


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


def test_the_interval_is_short_inside_and_restored_after():
    with quick_handoff():
        assert sys.getswitchinterval() == pytest.approx(HANDOFF_INTERVAL_S, rel=0.01)
    assert sys.getswitchinterval() == pytest.approx(0.005, rel=0.01)


def test_a_shorter_interval_already_set_is_kept_and_restored():
    sys.setswitchinterval(0.0002)
    with quick_handoff(0.001):
        assert sys.getswitchinterval() == pytest.approx(0.0002, rel=0.01)
    assert sys.getswitchinterval() == pytest.approx(0.0002, rel=0.01)


def test_nested_blocks_restore_when_the_outer_one_ends():
    with quick_handoff(0.002):
        with quick_handoff(0.001):
            assert sys.getswitchinterval() == pytest.approx(0.001, rel=0.01)
        assert sys.getswitchinterval() == pytest.approx(0.001, rel=0.01)  # the outer block still runs
    assert sys.getswitchinterval() == pytest.approx(0.005, rel=0.01)


def test_the_interval_comes_back_when_the_block_raises():
    with pytest.raises(ZeroDivisionError):
        with quick_handoff():
            1 / 0
    assert sys.getswitchinterval() == pytest.approx(0.005, rel=0.01)


@pytest.mark.parametrize("bad", [0, -0.001, float("nan")])
def test_a_non_positive_interval_is_refused(bad):
    with pytest.raises(ValueError, match="interval_s must be a positive"):
        with quick_handoff(bad):
            pass
    assert sys.getswitchinterval() == pytest.approx(0.005, rel=0.01)
