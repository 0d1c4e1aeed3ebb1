"""The training data order (`codea1.data.sampler.ProblemSampler`) on hand-worked cases."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from codea1.data.sampler import ProblemSampler, position_error


def _perm(seed: int, epoch: int, n: int) -> list[int]:
    return np.random.default_rng([seed, epoch]).permutation(n).tolist()


def test_shuffled_epochs_drop_the_last_incomplete_batch():
    """10 problems, 4 a step: each epoch is two batches of its own permutation, the last 2
    problems of the epoch dropped (as the reference's sampler with drop_last)."""
    s = ProblemSampler(10, seed=3, batch_size=4)
    e0, e1 = _perm(3, 0, 10), _perm(3, 1, 10)
    assert e0 != e1 and sorted(e0) == list(range(10))
    steps = [s.take(4) for _ in range(5)]
    assert steps == [e0[0:4], e0[4:8], e1[0:4], e1[4:8], _perm(3, 2, 10)[0:4]]
    assert s.state() == {"epoch": 2, "index": 4, "n": 10}
    for batch in steps:                              # a step never holds a problem twice
        assert len(set(batch)) == 4
    assert set(steps[0] + steps[1]).isdisjoint(e0[8:])   # e0's last two were dropped


def test_unshuffled_and_exact_fit():
    s = ProblemSampler(6, seed=0, shuffle=False, batch_size=3)
    assert [s.take(3) for _ in range(3)] == [[0, 1, 2], [3, 4, 5], [0, 1, 2]]
    assert s.state() == {"epoch": 1, "index": 3, "n": 6}


def test_the_position_survives_a_checkpoint():
    straight = ProblemSampler(7, seed=1, batch_size=3)
    drawn = [straight.take(3) for _ in range(5)]
    first = ProblemSampler(7, seed=1, batch_size=3)
    head = [first.take(3) for _ in range(3)]
    resumed = ProblemSampler(7, seed=1, batch_size=3)
    resumed.load_state(first.state())
    assert head + [resumed.take(3) for _ in range(2)] == drawn
    with pytest.raises(ValueError, match="for 7 problems, the training set now has 8"):
        ProblemSampler(8, seed=1).load_state(first.state())


def test_a_batch_larger_than_the_data_is_refused():
    with pytest.raises(ValueError, match=r"data.problems_per_step=5 is more than the 4 training problems"):
        ProblemSampler(4, seed=0, batch_size=5)
    with pytest.raises(ValueError, match="never holds a problem twice"):
        ProblemSampler(4, seed=0).take(5)
    with pytest.raises(ValueError, match="no problems"):
        ProblemSampler(0, seed=0)


def test_cross_epochs_is_the_older_rule():
    """`data.cross_epochs`: a batch the epoch cannot fill continues in the next epoch's order."""
    s = ProblemSampler(5, seed=2, batch_size=3, cross_epochs=True)
    e0, e1 = _perm(2, 0, 5), _perm(2, 1, 5)
    assert [s.take(3), s.take(3)] == [e0[0:3], e0[3:5] + e1[0:1]]
    big = ProblemSampler(2, seed=0, shuffle=False, batch_size=5, cross_epochs=True)
    assert big.take(5) == [0, 1, 0, 1, 0]            # a step may hold a problem twice


def test_the_edges_of_what_is_accepted():
    """One problem is a training set; a batch of the whole set is one step an epoch; a
    checkpoint for more or fewer problems is refused, and so is one written for a large
    set read back from JSON (its n is not the same int object). Found by
    `benchmarks/mutation_score.py --only sampler`."""
    assert ProblemSampler(1, seed=0).take(1) == [0]
    with pytest.raises(ValueError, match="no problems"):
        ProblemSampler(-1, seed=0)
    whole = ProblemSampler(4, seed=0, batch_size=4)
    assert sorted(whole.take(4)) == [0, 1, 2, 3] and whole.take(4) == _perm(0, 1, 4)
    big = ProblemSampler(1000, seed=5, batch_size=300)
    big.take(300)
    resumed = ProblemSampler(1000, seed=5, batch_size=300)
    resumed.load_state(json.loads(json.dumps(big.state())))
    assert resumed.take(300) == big.take(300)
    for n in (7, 9):
        with pytest.raises(ValueError, match=f"for {n} problems, the training set now has 8"):
            ProblemSampler(8, seed=1).load_state({"epoch": 0, "index": 0, "n": n})


@pytest.mark.parametrize("state, message", [
    ({"epoch": 0, "index": 9, "n": 8}, "index 9 is past the end of an epoch of 8 problems"),
    ({"epoch": -1, "index": 0, "n": 8}, "epoch -1: expected a whole number >= 0"),
    ({"epoch": 0, "index": "3", "n": 8}, "index '3': expected a whole number >= 0"),
    ({"epoch": 0, "index": 3}, "n None: expected a whole number >= 1"),
    ({"epoch": True, "index": 3, "n": 8}, "epoch True: expected"),
    ([0, 3, 8], "expected an object with epoch, index and n"),
])
def test_a_damaged_position_is_named(state, message):
    """A hand-edited or damaged state.json: the field and what was expected, never an
    IndexError at the next draw."""
    with pytest.raises(ValueError, match=re.escape("the checkpoint's data position: ") + ".*" + re.escape(message)):
        ProblemSampler(8, seed=0, cross_epochs=True).load_state(state)
    assert position_error(state) is not None and message in position_error(state)


def test_a_resume_on_changed_data_of_the_same_size_is_refused():
    """The state holds a digest of the training problems' ids in order: a data file whose
    problems changed (or were reordered) at the same count would draw another sequence in
    silence. A state without it (a run written before) still resumes."""
    ids = ["a", "b", "c", "d"]
    first = ProblemSampler(4, seed=3, batch_size=2, ids=ids)
    first.take(2)
    state = json.loads(json.dumps(first.state()))
    assert len(state["ids_sha256"]) == 64 and position_error(state) is None
    same = ProblemSampler(4, seed=3, batch_size=2, ids=list(ids))
    same.load_state(state)
    assert same.take(2) == first.take(2)
    for changed in (["a", "b", "c", "e"], ["b", "a", "c", "d"]):
        with pytest.raises(ValueError, match="other training problems.*data.train.*start a new run"):
            ProblemSampler(4, seed=3, batch_size=2, ids=changed).load_state(state)
    old = {k: v for k, v in state.items() if k != "ids_sha256"}
    ProblemSampler(4, seed=3, batch_size=2, ids=["x", "y", "z", "w"]).load_state(old)
    assert "ids_sha256 'nope'" in position_error(dict(state, ids_sha256="nope"))
