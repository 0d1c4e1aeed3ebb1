"""The edges of the core formulas, on hand-computed values: what mutation testing found
the other tests let through (benchmarks/mutation_score.py; docs/BENCHMARKS.md lists the
mutants left alive, each equivalent, with the reason).

Each test names the mutants it kills: a default value changed, a bound moved by one, a
comparison made strict, a branch the usual inputs never take.
"""

from __future__ import annotations

import pytest
import torch

from codea1.passk import aggregate, avg_at_n, default_ks, pass_at_k
from codea1.judge import rewards
from codea1.judge.rewards import score_suite, valid_ratio

# --------------------------------------------------------------------------- rewards


def test_valid_ratio_defaults_to_suites_of_eight_and_accepts_a_suite_of_one():
    """Mutants: G's default 8 -> 7 or 9; `suite_size <= 0` -> `<= 1` or `== 0`."""
    assert valid_ratio(4, 0) == 0.5 and valid_ratio(8, 2) == 0.75
    assert valid_ratio(1, 0, suite_size=1) == 1.0 and valid_ratio(0, 1, suite_size=1) == 0.0
    for bad in (0, -1):
        with pytest.raises(ValueError, match="suite_size"):
            valid_ratio(1, 0, suite_size=bad)


def test_test_reward_takes_alpha_at_both_ends_and_refuses_outside():
    """Mutants: `0.0 <= alpha <= 1.0` made strict at either end, or its lower bound moved."""
    assert rewards.test_reward(True, 0.75, 0.25, alpha=0.0) == 0.25      # attack alone
    assert rewards.test_reward(True, 0.75, 0.25, alpha=1.0) == 0.75      # validity alone
    assert rewards.test_reward(True, 0.75, 0.25) == 0.5                   # the default: half each
    assert rewards.test_reward(True, 0.5, 0.5, alpha=0.5, nonprintable=0.125) == 0.375
    assert rewards.test_reward(False, 0.75, 0.25, alpha=0.5, nonprintable=0.125) == -0.125
    for bad in (-0.5, -1e-9, 1.0000001, 2.0):
        with pytest.raises(ValueError, match="alpha"):
            rewards.test_reward(True, 0.5, 0.5, alpha=bad)


def test_score_suite_default_suite_size_counts_failures_of_the_first_eight():
    """gen_fail is over G = 8 by default, counting only the first eight kept tests."""
    s = score_suite(valid=10, invalid=0, kept_passed=[False] * 10, mb_passed=[])
    assert s.gen_fail_rate == 1.0 and s.gen_pass_rate == 0.0 and s.valid_ratio == 1.0
    s = score_suite(valid=3, invalid=1, kept_passed=[True, False, True], mb_passed=[])
    assert (s.valid_ratio, s.gen_pass_rate, s.gen_fail_rate) == (3 / 8, 2 / 3, 1 / 8)


# --------------------------------------------------------------------------- GRPO


def test_advantages_and_surrogate_defaults_are_the_references():
    """Mutants: group_advantages' eps default 1e-6, clipped_surrogate's default range
    (0.2, 0.28) and its dual clip off by default."""
    from codea1.grpo import clipped_surrogate, group_advantages

    r = torch.tensor([[0.0, 1.0]])
    assert torch.equal(group_advantages(r), group_advantages(r, eps=1e-6, unbiased=True))
    assert group_advantages(r)[0, 1].item() == pytest.approx(0.5 / (0.5 ** 0.5 + 1e-6), rel=1e-6)
    ratio = torch.tensor([2.0, 0.5, 20.0, 0.7, 1.1])
    adv = torch.tensor([1.0, -1.0, -1.0, -1.0, 1.0])
    loss, clipped, bounded = clipped_surrogate(torch.log(ratio), torch.zeros(5), adv)
    # 2 -> 1.28 (A > 0), 0.5 -> 0.8 (A < 0), 20 unbounded without the dual clip, 0.7 -> 0.8, 1.1 inside
    assert loss.tolist() == pytest.approx([-1.28, 0.8, 20.0, 0.8, -1.1], rel=1e-6)
    assert clipped.tolist() == [True, True, False, True, False] and not bounded.any()


def test_has_signal_reads_the_last_dimension_of_any_shape():
    """Mutant: `amin(dim=-1)` -> `amin(dim=1)` (the same on 2-D rewards only)."""
    from codea1.grpo import has_signal

    r = torch.tensor([[[1.0, 1.0], [0.0, 1.0]], [[0.5, 0.5], [0.0, 0.0]]])   # [P, n_code, n_test]
    assert has_signal(r).tolist() == [[False, True], [False, False]]


def test_select_test_groups_refuses_mismatched_shapes_both_ways():
    """Mutant: `!=` -> `>` or `<` in the shape check."""
    from codea1.grpo import select_test_groups

    rewards = torch.zeros(3, 2)
    for eligible in ([True] * 2, [True] * 4):
        with pytest.raises(ValueError, match="3 groups but eligible has"):
            select_test_groups(rewards, eligible, 1)


def test_token_loss_terms_on_hand_values():
    """Mutants: the token mean's floor `max(denom, 1.0)` (an empty mask is 0, not NaN), the
    TIS weight multiplying (not dividing) the surrogate, the clip count over masked tokens
    only, and no KL at all when kl_coef is 0 (even with reference log-probs given)."""
    from codea1.grpo import GRPOConfig, grpo_token_loss, token_mean

    assert token_mean(torch.tensor([3.0, 4.0]), torch.zeros(2)).item() == 0.0
    assert token_mean(torch.tensor([3.0, 4.0]), torch.tensor([1.0, 0.0]), n_tokens=0.5).item() == 3.0
    logp = torch.log(torch.tensor([2.0, 1.0]))    # ratios 2 (clipped at 1.28) and 1
    old, adv, mask = torch.zeros(2), torch.tensor([1.0, 1.0]), torch.ones(2)
    cfg = GRPOConfig(kl_coef=0.0)
    loss, st = grpo_token_loss(logp, old, torch.zeros(2), adv, mask, cfg, is_weight=torch.tensor([0.5, 2.0]))
    assert loss.item() == pytest.approx((-1.28 * 0.5 - 1.0 * 2.0) / 2)
    assert st["clip_sum"] == 1.0 and st["kl_sum"] == 0.0 and st["dual_clip_sum"] == 0.0
    assert st["ratio_sum"] == pytest.approx(3.0)
    masked, st = grpo_token_loss(logp, old, None, adv, torch.tensor([0.0, 1.0]), cfg)
    assert masked.item() == pytest.approx(-1.0) and st["clip_sum"] == 0.0 and st["pg_loss_sum"] == pytest.approx(-1.0)


def _select(cfg, code_rewards, test_rewards, judgements):
    from types import SimpleNamespace

    from codea1.grpo import select_batches

    P, n_code = code_rewards.shape
    code = [[SimpleNamespace(prompt_ids=[p], completion_ids=[1, p, c], logprobs=None) for c in range(n_code)]
            for p in range(P)]
    tests = None if test_rewards is None else [
        [[SimpleNamespace(prompt_ids=[p], completion_ids=[2, p, c, j], logprobs=None)
          for j in range(test_rewards.shape[2])] for c in range(n_code)] for p in range(P)]
    return select_batches(cfg, code, code_rewards, tests, test_rewards, judgements)


def test_select_batches_on_hand_counted_groups():
    """Mutants: the test batch skipped when there are test rewards (`is not None` -> `is
    None`), `tests_from_kept_problems` read the wrong way round, an unusable problem kept."""
    from types import SimpleNamespace

    from codea1.grpo import GRPOConfig

    code_rewards = torch.tensor([[1.0, 0.0, 0.5], [0.5, 0.5, 0.5]], dtype=torch.float64)   # p1: no spread
    test_rewards = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [0.2, 0.9]],      # stds 0.5, 0, 0.35
                                 [[0.0, 1.0], [1.0, 1.0], [0.3, 0.3]]], dtype=torch.float64)
    judged = [SimpleNamespace(code_valid=[True, False, True], usable=True),
              SimpleNamespace(code_valid=[True, True, True], usable=True)]
    b = _select(GRPOConfig(), code_rewards, test_rewards, judged)
    assert list(b.updates()) == ["code", "test"]   # two policies unless self-play is asked for
    assert (b.code.groups_total, b.code.groups_kept, len(b.code.trajectories)) == (2, 2, 6)
    assert [t.advantage for t in b.code.trajectories] == pytest.approx(
        [0.5 / (0.5 + 1e-6), -0.5 / (0.5 + 1e-6), 0.0, 0.0, 0.0, 0.0])
    assert b.test.chosen == {0: [0], 1: [0]} and (b.test.groups_total, b.test.groups_kept) == (6, 2)
    assert [t.completion_ids for t in b.test.trajectories] == [[2, 0, 0, 0], [2, 0, 0, 1], [2, 1, 0, 0], [2, 1, 0, 1]]
    half = 0.5 / (0.5 ** 0.5 + 1e-6)
    assert [t.advantage for t in b.test.trajectories] == pytest.approx([half, -half, -half, half])
    # golden mode: no test rewards, no test batch
    golden = _select(GRPOConfig(), code_rewards, None, [None, None])
    assert golden.test.trajectories == [] and len(golden.code.trajectories) == 6
    # dynamic sampling: p1's code group drops, and with it p1's suites unless asked to keep them
    dyn = _select(GRPOConfig(filter_zero_variance=True), code_rewards, test_rewards, judged)
    assert dyn.code.chosen == {0: [0, 1, 2]} and dyn.test.chosen == {0: [0], 1: []}
    kept = _select(GRPOConfig(filter_zero_variance=True, tests_from_kept_problems=False), code_rewards,
                   test_rewards, judged)
    assert kept.test.chosen == {0: [0], 1: [0]}
    # tests only from valid candidates: p0's candidate 1 is invalid, p0 keeps candidate 0
    assert _select(GRPOConfig(tests_from_valid_candidates=True, update_n=2), code_rewards, test_rewards,
                   judged).test.chosen == {0: [0, 2], 1: [0, 1]}   # (p1: a tie at std 0 goes to the lower index)
    # a problem the judge could not judge trains nothing
    judged[1] = SimpleNamespace(code_valid=[True, True, True], usable=False)
    b = _select(GRPOConfig(), code_rewards, test_rewards, judged)
    assert b.code.chosen == {0: [0, 1, 2]} and b.test.chosen == {0: [0], 1: []}


# --------------------------------------------------------------------------- pass@k


def test_pass_at_k_and_avg_at_n_bounds():
    """Mutants: `n < 1` moved (a single sample is fine, none is refused with its own message),
    c's lower bound moved."""
    assert avg_at_n(1, 1) == 1.0 and avg_at_n(1, 0) == 0.0 and pass_at_k(1, 1, 1) == 1.0
    with pytest.raises(ValueError, match="at least one sample"):
        pass_at_k(0, 0, 1)
    with pytest.raises(ValueError, match="at least one sample"):
        avg_at_n(0, 0)
    for bad_c in (-1, 3):
        with pytest.raises(ValueError, match="must lie in"):
            avg_at_n(2, bad_c)
        with pytest.raises(ValueError, match="must lie in"):
            pass_at_k(2, bad_c, 1)


def test_aggregate_takes_ks_in_any_order_and_labels_avg_by_n():
    """Mutants: `continue` -> `break` over a k too large (ks in any order), true division ->
    floor division; the avg label for n past 256 too."""
    out = aggregate([(4, 1), (4, 2)], ks=[8, 1, 4])
    assert out == {"pass@1": pytest.approx(100 * (1 / 4 + 2 / 4) / 2), "pass@4": 100.0, "avg@4": pytest.approx(37.5)}
    assert aggregate([(3, 1)], ks=[1]) == {"pass@1": pytest.approx(100 / 3), "avg@3": pytest.approx(100 / 3)}
    big = aggregate([(300, 150), (300, 0)], ks=[1])
    assert set(big) == {"pass@1", "avg@300"} and big["avg@300"] == pytest.approx(25.0)
    assert set(aggregate([(2, 1), (3, 1)], ks=[1])) == {"pass@1", "avg@n"}
    assert default_ks(10) == [1, 5, 10] and default_ks(100) == [1, 5, 10, 20, 50, 100]


# --------------------------------------------------------------------------- eval select's rule


def test_choose_checks_lengths_both_ways_and_ties_past_small_ints():
    """Mutants: the length check `!=` -> `>` or `<`; `==` -> `is` in the tie counts (past 256
    passed tests, or 256 candidates behaving alike, the counts are distinct int objects)."""
    from codea1.eval.select import choose

    for behaviours in (["x"], ["x", "y", "z"]):
        with pytest.raises(ValueError, match="2 candidates but"):
            choose([[True], [False]], behaviours)
    many = [[True] * 300, [True] * 300, [True] * 299 + [False]]
    assert choose(many, ["a", "b", "c"]) == choose([[True], [True], [False]], ["a", "b", "c"])
    assert choose(many, ["a", "b", "c"]).tied == 2
    alike = choose([[True]] * 600, ["a"] * 300 + ["b"] * 300)
    assert (alike.index, alike.rule, alike.tied) == (0, "first", 600)


# --------------------------------------------------------------------------- the Mistake Book's ranking


def _book_after_two_steps(tmp_path, net: bool):
    from collections import Counter

    from codea1.mistakes import MistakeBook
    from codea1.mistakes.book import MistakeUpdate

    book = MistakeBook(tmp_path / ("net.sqlite" if net else "ordered.sqlite"))
    first = book.apply_step(1, {"p": MistakeUpdate(failed=Counter({"a": 2, "b": 1, "c": 3, "e": 1})),
                                "q": MistakeUpdate(failed=Counter({"z": 1}))}, net=net)
    second = book.apply_step(2, [("p", MistakeUpdate(passed=Counter({"a": 1, "c": 3, "e": 1}),
                                                     failed=Counter({"b": 2, "d": 1, "e": 1, "f": 1})))], net=net)
    return book, first, second


@pytest.mark.parametrize("net", [False, True], ids=["in order", "net"])
def test_mistake_book_counts_and_ranking_on_hand_counted_steps(tmp_path, net):
    """Step 1: p fails a x2, b, c x3, e (ranked c, a, b, e: frequency, then first seen);
    step 2: p passes a, c x3, e, fails b x2, d, e, f.
    In order (the reference: passes first): a 1 (down), c gone, e gone then failed again (a
    new entry), b 3 (up), d and f new; renumbered in rank, new ones after.
    Net: per test failed - passed: a -1, c -3 (gone), e 0 (untouched, keeps step 1), b +2,
    d and f new (numbered after every existing test)."""
    from codea1.mistakes.book import StepSummary

    book, first, second = _book_after_two_steps(tmp_path, net)
    try:
        assert first == StepSummary(1, 2, 5, 0, 0, 0)
        rows = [(e.test, e.frequency, e.first_step, e.last_step) for e in book.entries("p")]
        if net:
            assert second == StepSummary(2, 1, 2, 1, 1, 1)
            assert rows == [("b", 3, 1, 2), ("a", 1, 1, 2), ("e", 1, 1, 1), ("d", 1, 2, 2), ("f", 1, 2, 2)]
        else:
            assert second == StepSummary(2, 1, 3, 1, 1, 2)
            assert rows == [("b", 3, 1, 2), ("a", 1, 1, 2), ("d", 1, 2, 2), ("e", 1, 2, 2), ("f", 1, 2, 2)]
        assert book.top("p") == [r[0] for r in rows] and book.top("p", k=2) == ["b", "a"]
        assert book.top_many(["p", "q"], k=1) == {"p": ["b"], "q": ["z"]}
        # step 3: n failed and passed once, y (not in the book) passed, a passed past its
        # frequency, b failed again. In order: a gone, b up, d, e and f untouched, n new.
        # Net: n and y change nothing (no entry of 0 or less), a gone, b up.
        from collections import Counter

        from codea1.mistakes.book import MistakeUpdate
        third = book.apply_step(3, {"p": MistakeUpdate(failed=Counter({"n": 1, "b": 1}),
                                                       passed=Counter({"n": 1, "y": 1, "a": 5}))}, net=net)
        rows = [(e.test, e.frequency, e.first_step, e.last_step) for e in book.entries("p")]
        if net:
            assert third == StepSummary(3, 1, 0, 1, 0, 1)
            assert rows == [("b", 4, 1, 3), ("e", 1, 1, 1), ("d", 1, 2, 2), ("f", 1, 2, 2)]
        else:
            assert third == StepSummary(3, 1, 1, 1, 0, 1)
            assert rows == [("b", 4, 1, 3), ("d", 1, 2, 2), ("e", 1, 2, 2), ("f", 1, 2, 2), ("n", 1, 3, 3)]
    finally:
        book.close()


def test_net_changes_number_new_tests_after_the_books_own(tmp_path):
    """A book kept in order, then by net changes: new tests rank after the existing ones of
    their frequency (mutant: `next_seq + used` -> `next_seq ** used`, which gave the first
    new test the number 1)."""
    from collections import Counter

    from codea1.mistakes import MistakeBook
    from codea1.mistakes.book import MistakeUpdate

    with MistakeBook(tmp_path / "book.sqlite") as book:
        book.apply_step(1, {"p": MistakeUpdate(failed=Counter({"a": 1, "b": 1}))})
        book.apply_step(2, {"p": MistakeUpdate(failed=Counter({"c": 1, "d": 1}))}, net=True)
        assert book.top("p") == ["a", "b", "c", "d"]


def test_mistake_book_reads_eight_by_default_and_applies_every_problem_of_a_step(tmp_path):
    """Mutants: top's and top_many's default k 8 -> 7 or 9; `continue` -> `break` past a
    problem with an empty update; the checks of the updates."""
    from collections import Counter

    from codea1.mistakes import MistakeBook
    from codea1.mistakes.book import MistakeUpdate

    with MistakeBook(tmp_path / "book.sqlite") as book:
        tests = {f"t{i}": 10 - i for i in range(10)}
        book.apply_step(1, [("p", MistakeUpdate()), ("r", MistakeUpdate(failed=Counter(tests)))])
        assert book.top("r") == [f"t{i}" for i in range(8)]
        assert book.top_many(["r"]) == {"r": [f"t{i}" for i in range(8)]}
        for bad, error in (([("r", MistakeUpdate(), "x")], TypeError), ([("r",)], TypeError),
                           ([["r", MistakeUpdate()]], TypeError),
                           ({"r": MistakeUpdate(failed=Counter({1: 1}))}, ValueError),
                           ({"r": MistakeUpdate(failed=Counter({"t": True}))}, ValueError),
                           ({"r": MistakeUpdate(passed=Counter({"t": 0}))}, ValueError)):
            with pytest.raises(error):
                book.apply_step(2, bad)
        assert book.last_step == 1


def test_kl_defaults_schedule_edges_and_the_update_means():
    """Mutants: k3_kl's default clamps (10 on the value, 20 on the log-ratio); the warm-up
    taken only past one step, a zero-length decay; split_mini_batches rounding (not
    flooring) its bounds; UpdateStats.finish's means (per token, per optimiser step)."""
    from codea1.grpo import UpdateStats, k3_kl, split_mini_batches, warmup_cosine

    assert k3_kl(torch.zeros(1), torch.tensor([5.0])).item() == 10.0
    big = k3_kl(torch.zeros(1), torch.tensor([25.0]), clamp=1e12).item()
    assert big == pytest.approx(torch.exp(torch.tensor(20.0)).item() - 21.0, rel=1e-6)
    assert warmup_cosine(0, 1, 10) == 0.0 and warmup_cosine(1, 1, 10) == 1.0
    assert warmup_cosine(5, 5, 5) == 1.0   # no steps left to decay over: the peak, not a division by 0
    assert split_mini_batches(7, 3) == [[0, 1], [2, 3, 4], [5, 6]]
    st = UpdateStats(tokens=4, loss_sum=3.0, loss_steps=2, norms=[1.0, 2.5],
                     sums={"pg_loss_sum": 2.0, "clip_sum": 1.0, "dual_clip_sum": 3.0, "ratio_sum": 4.4, "kl_sum": 0.2})
    st.finish()
    assert (st.pg_loss, st.clip_frac, st.dual_clip_frac, st.ratio_mean) == (0.5, 0.25, 0.75, pytest.approx(1.1))
    assert st.kl == pytest.approx(0.05) and st.loss == 1.5 and st.grad_norm == 1.75


def test_token_loss_statistics_count_masked_tokens_only():
    """Mutants: each statistic's `* mask` replaced (a masked-out token must add nothing, and
    a 0 in the mask must not divide), the KL skipped without reference log-probs."""
    from codea1.grpo import GRPOConfig, grpo_token_loss

    logp = torch.log(torch.tensor([2.0, 1.0]))
    old, adv, mask = torch.zeros(2), torch.tensor([-1.0, 1.0]), torch.tensor([0.0, 1.0])
    ref = torch.tensor([0.0, 0.5])   # token 2: d = 0.5, k3 = e^0.5 - 1.5
    cfg = GRPOConfig(kl_coef=0.5, clip_ratio_c=1.5)   # token 1 (masked out): ratio 2, A < 0, bounded
    loss, st = grpo_token_loss(logp, old, ref, adv, mask, cfg)
    k3 = float(torch.exp(torch.tensor(0.5))) - 1.5
    assert st == {"pg_loss_sum": -1.0, "clip_sum": 0.0, "dual_clip_sum": 0.0, "ratio_sum": 1.0,
                  "kl_sum": pytest.approx(k3)}
    assert loss.item() == pytest.approx(-1.0 + 0.5 * k3)
    no_ref, st = grpo_token_loss(logp, old, None, adv, mask, cfg)
    assert st["kl_sum"] == 0.0 and no_ref.item() == pytest.approx(-1.0)
