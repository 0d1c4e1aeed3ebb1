"""Sets and dict keys compared with a float tolerance: the pairing is a matching, not first-fit.

With a tolerance "equal" is not transitive, so pairing each element with the first equal
one left can miss a one-to-one pairing that exists, and call a right answer wrong.
"""

from __future__ import annotations

from codea1.sandbox.values import MATCH_EXACT_LIMIT, encode, values_equal


def test_a_set_that_pairs_up_only_one_way_is_equal():
    # first-fit pairs 1.0 with 1.0000008 and leaves 1.0000015 with 0.9999993 (2.2e-6 apart:
    # unequal); 1.0 <-> 0.9999993 and 1.0000015 <-> 1.0000008 (7e-7 apart each) pairs all
    got, want = encode({1.0, 1.0000015}), encode({1.0000008, 0.9999993})
    assert values_equal(got, want) and values_equal(want, got)
    assert values_equal(encode({1.0: "a", 1.0000015: "b"}), encode({1.0000008: "b", 0.9999993: "a"}))


def test_no_pairing_means_unequal():
    assert not values_equal(encode({1.0, 1.0000015}), encode({1.0, 1.1}))
    assert not values_equal(encode({1.0: "a", 1.0000015: "b"}), encode({1.0000008: "a", 0.9999993: "b"}))


def test_past_the_limit_first_fit_decides():
    """An exact matching compares every pair: a candidate's huge set must not stall the
    judge, so past `MATCH_EXACT_LIMIT` elements first-fit's answer stands."""
    n = MATCH_EXACT_LIMIT + 1
    base = [float(10 * k) for k in range(n - 2)]
    got, want = encode({*base, 1.0, 1.0000015}), encode({*base, 1.0000008, 0.9999993})
    small_got, small_want = encode({1.0, 1.0000015}), encode({1.0000008, 0.9999993})
    assert values_equal(small_got, small_want)
    assert len(got[1]) == n and not values_equal(got, want)
