"""Unbiased pass@k against the binomial definition, avg@n, k lists and aggregation."""

from __future__ import annotations

from math import comb

import pytest

from codea1.passk import aggregate, avg_at_n, default_ks, pass_at_k


@pytest.mark.parametrize("n", [1, 2, 5, 10, 32, 100])
def test_pass_at_k_equals_binomial_formula(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            expected = 1.0 - comb(n - c, k) / comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_edge_values():
    assert pass_at_k(32, 0, 1) == 0.0
    assert pass_at_k(32, 32, 1) == 1.0
    assert pass_at_k(32, 1, 1) == pytest.approx(1 / 32)
    assert pass_at_k(10, 8, 3) == 1.0  # fewer than k failures: any k draws contain a pass
    # large n stays finite and exact where binomials would overflow floats
    assert pass_at_k(5000, 1, 1) == pytest.approx(1 / 5000)


@pytest.mark.parametrize("args", [(0, 0, 1), (5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_bad_arguments(args):
    with pytest.raises(ValueError):
        pass_at_k(*args)


def test_avg_at_n():
    assert avg_at_n(32, 8) == 0.25
    with pytest.raises(ValueError):
        avg_at_n(0, 0)


def test_default_ks():
    assert default_ks(1) == [1]
    assert default_ks(5) == [1, 5]
    assert default_ks(32) == [1, 5, 10, 20, 32]
    assert default_ks(200) == [1, 5, 10, 20, 50, 100, 200]


def test_aggregate_is_mean_over_problems_in_percent():
    got = aggregate([(4, 0), (4, 2), (4, 4)])
    assert got["pass@1"] == pytest.approx(100 * (0 + 0.5 + 1) / 3)
    assert got["pass@4"] == pytest.approx(100 * (0 + 1 + 1) / 3)
    assert got["avg@4"] == pytest.approx(50.0)
    assert aggregate([]) == {}
    # k beyond the smallest n is left out rather than estimated
    mixed = aggregate([(2, 1), (8, 1)], ks=[1, 5])
    assert "pass@5" not in mixed and "avg@n" in mixed
