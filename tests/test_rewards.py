"""One test per branch of the reward formulas (../shared/CODE_A1_SPEC.md, "Rewards"),
each on numbers worked out by hand."""

from __future__ import annotations

import pytest

from codea1.judge import rewards as R
from codea1.judge.rewards import code_reward, nonprintable_share, score_suite, valid_ratio


def test_valid_ratio_limited_by_valid_count():
    # 3 valid, 1 invalid, G = 8: min(3/8, 1 - 1/8) = 3/8
    assert valid_ratio(3, 1, 8) == pytest.approx(0.375)


def test_valid_ratio_limited_by_invalid_count():
    # 10 valid, 3 invalid: min(10/8, 5/8) = 5/8
    assert valid_ratio(10, 3, 8) == pytest.approx(0.625)


def test_valid_ratio_clipped_at_zero():
    # 0 valid, 12 invalid: min(0, 1 - 1.5) = -0.5 -> 0
    assert valid_ratio(0, 12, 8) == 0.0


def test_valid_ratio_clipped_at_one():
    # 9 valid, 0 invalid: min(9/8, 1) = 1
    assert valid_ratio(9, 0, 8) == 1.0


def test_valid_ratio_rejects_nonpositive_suite_size():
    with pytest.raises(ValueError, match="suite_size"):
        valid_ratio(1, 0, 0)


def test_suite_with_generated_and_mistake_book_tests():
    # 6 valid + 1 wrong expectation kept (7 run), 2 invalid; candidate fails kept #3 and #5.
    kept = [True, True, False, True, False, True, True]
    mb = [True, False, True, True]  # 3 of 4 Mistake Book tests passed
    s = score_suite(valid=6, invalid=2, kept_passed=kept, mb_passed=mb, suite_size=8)
    assert s.valid_ratio == pytest.approx(0.75)  # min(6/8, 1 - 2/8)
    assert s.gen_pass_rate == pytest.approx(5 / 7)
    assert s.gen_fail_rate == pytest.approx(2 / 8)
    assert s.mb_pass_rate == pytest.approx(0.75)
    assert s.pass_score == pytest.approx((0.75 + 5 / 7) / 2)
    # attack = (gen_fail - mb_fail + 1) / 2 = (0.25 - 0.25 + 1) / 2
    assert s.attack == pytest.approx(0.5)


def test_attack_pays_only_beyond_the_mistake_book():
    # generated tests fail 1 of 8, history already fails all 2 Mistake Book tests
    s = score_suite(valid=8, invalid=0, kept_passed=[False] + [True] * 7, mb_passed=[False, False])
    assert s.gen_fail_rate == pytest.approx(1 / 8)
    assert s.attack == pytest.approx((1 / 8 - 1 + 1) / 2)
    assert s.pass_score == pytest.approx((0 + 7 / 8) / 2)


def test_suite_with_only_mistake_book_tests():
    # the suite had nothing usable: pass = mb_pass_rate, attack = 0
    s = score_suite(valid=0, invalid=5, kept_passed=[], mb_passed=[True, False, False, True, True])
    assert s.pass_score == pytest.approx(0.6)
    assert s.attack == 0.0
    assert s.gen_pass_rate == 0.0
    assert s.valid_ratio == 0.0  # min(0, 3/8)


def test_suite_with_only_generated_tests():
    kept = [True, False, False, True]
    s = score_suite(valid=4, invalid=0, kept_passed=kept, mb_passed=[])
    assert s.mb_pass_rate is None
    assert s.pass_score == pytest.approx(0.5)
    assert s.attack == pytest.approx(2 / 8)  # failed among the first G, divided by G
    assert s.valid_ratio == pytest.approx(0.5)


def test_suite_with_neither():
    s = score_suite(valid=0, invalid=2, kept_passed=[], mb_passed=[])
    assert (s.pass_score, s.attack, s.gen_pass_rate, s.gen_fail_rate) == (0.0, 0.0, 0.0, 0.0)


def test_gen_fail_rate_counts_only_the_first_g_kept_tests():
    # 10 kept tests, failures at positions 9 and 10 are beyond G = 8
    kept = [True] * 6 + [False] + [True] + [False, False]
    s = score_suite(valid=10, invalid=0, kept_passed=kept, mb_passed=[])
    assert s.gen_fail_rate == pytest.approx(1 / 8)
    assert s.gen_pass_rate == pytest.approx(7 / 10)  # pass rate uses all kept tests


def test_code_reward_is_mean_pass_of_suites():
    assert code_reward(True, [1.0, 0.5, 0.25, 0.25]) == pytest.approx(0.5)


def test_code_reward_zero_for_invalid_code():
    assert code_reward(False, [1.0, 1.0]) == 0.0


def test_test_reward_mixes_validity_and_attack_with_alpha():
    # 0.3 * 0.75 + 0.7 * 0.5 = 0.575
    assert R.test_reward(True, 0.75, 0.5, alpha=0.3) == pytest.approx(0.575)


def test_test_reward_zero_against_invalid_code():
    assert R.test_reward(False, 1.0, 1.0, alpha=0.5) == 0.0


def test_test_reward_minus_nonprintable_share():
    # 0.5 * 1 + 0.5 * 0.25 - 0.1
    assert R.test_reward(True, 1.0, 0.25, alpha=0.5, nonprintable=0.1) == pytest.approx(0.525)
    assert R.test_reward(False, 1.0, 1.0, nonprintable=0.1) == pytest.approx(-0.1)


def test_test_reward_rejects_alpha_outside_unit_interval():
    with pytest.raises(ValueError, match="alpha"):
        R.test_reward(True, 1.0, 1.0, alpha=1.5)


def test_nonprintable_share():
    assert nonprintable_share("") == 0.0
    assert nonprintable_share("assert f(1) == 2\n\tx\r\n") == 0.0
    assert nonprintable_share("ab\x00\x07") == pytest.approx(0.5)  # 2 of 4 characters
    # the reference's rule: not in ASCII string.printable, so every non-ASCII character counts
    assert nonprintable_share("é漢\u200b") == pytest.approx(1.0)
    assert nonprintable_share("ab\x0b\x0c") == 0.0  # vertical tab and form feed are in string.printable
    assert nonprintable_share("x = 'café'") == pytest.approx(1 / 10)


def test_nonprintable_share_unicode_alternative():
    """judge.unicode_printable: what str.isprintable refuses (line breaks and tabs allowed)."""
    assert nonprintable_share("é漢\u200b", unicode_printable=True) == pytest.approx(1 / 3)  # zero-width space
    assert nonprintable_share("ab\x00\x07", unicode_printable=True) == pytest.approx(0.5)
    assert nonprintable_share("ab\x0b\x0c", unicode_printable=True) == pytest.approx(0.5)
    assert nonprintable_share("a\n\tb\r\n", unicode_printable=True) == 0.0
