"""Which samples train (CODE_A1_SPEC "Which samples train"), on hand-computed rewards.

`Trainer._select` is called on a trainer built without models: it only reads the config,
the samples' token ids, the rewards and the judge's verdicts.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from codea1.train.config import TrainConfig
from codea1.train.loop import Trainer


def _trainer(**grpo):
    t = Trainer.__new__(Trainer)
    t.cfg = TrainConfig(grpo=grpo)
    return t


def _samples(n_problems, n, tag):
    return [[SimpleNamespace(prompt_ids=[1, 2], completion_ids=[tag, p, i], logprobs=None) for i in range(n)]
            for p in range(n_problems)]


CODE_REWARDS = torch.tensor([[1.0, 1.0, 1.0, 1.0],    # zero variance: all pass
                             [1.0, 0.0, 0.5, 0.5]], dtype=torch.float64)
# per problem, per candidate, per suite (n_test = 2)
TEST_REWARDS = torch.tensor([
    [[0.5, 0.5], [0.2, 0.6], [0.0, -0.5], [0.1, 0.3]],   # stds 0, 0.2, 0.25 (invalid cand.), 0.1
    [[0.3, 0.3], [0.2, 0.2], [0.0, 0.0], [0.4, 0.4]],    # every std 0
], dtype=torch.float64)
JUDGEMENTS = [SimpleNamespace(code_valid=[True, True, False, True], usable=True),
              SimpleNamespace(code_valid=[True, True, True, True], usable=True)]


def _select(trainer, judgements=JUDGEMENTS):
    suites = [[[SimpleNamespace(prompt_ids=[1], completion_ids=[9, p, c, j], logprobs=None) for j in range(2)]
               for c in range(4)] for p in range(2)]
    return trainer._select(["p0", "p1"], _samples(2, 4, 7), CODE_REWARDS, suites, TEST_REWARDS, judgements)


def _advantages(batch, problem):
    return [t.advantage for t in batch.trajectories if t.completion_ids[1] == problem]


def test_reference_default_trains_zero_variance_groups_and_top_std_suites():
    batches = _select(_trainer())
    code, test = batches["code"], batches["test"]
    # every code group trains; the all-pass group with advantage 0 (it still counts in the
    # token mean and the KL term)
    assert (code.groups_total, code.groups_kept, len(code.trajectories)) == (2, 2, 8)
    assert _advantages(code, 0) == [0.0, 0.0, 0.0, 0.0]
    std = math.sqrt(0.5 / 3)  # unbiased std of [1, 0, .5, .5] around 0.5
    assert _advantages(code, 1) == pytest.approx([0.5 / std, -0.5 / std, 0.0, 0.0], rel=1e-5)
    # tests: per problem the candidate of largest suite-reward std, whether its code is
    # valid or not (problem 0: candidate 2, std 0.25), and even at std 0 (problem 1: the
    # first candidate)
    assert test.chosen == {0: [2], 1: [0]}
    assert (test.groups_total, test.groups_kept, len(test.trajectories)) == (8, 2, 4)
    # suites [0, -0.5]: mean -0.25, unbiased std sqrt(0.125)
    assert [t.completion_ids[:3] for t in test.trajectories[:2]] == [[9, 0, 2], [9, 0, 2]]
    assert [t.advantage for t in test.trajectories[:2]] == pytest.approx(
        [0.25 / (math.sqrt(0.125) + 1e-6), -0.25 / (math.sqrt(0.125) + 1e-6)], rel=1e-5)
    assert [t.advantage for t in test.trajectories[2:]] == [0.0, 0.0]


def test_switches_restore_the_filters():
    # only valid candidates' suites: problem 0 takes candidate 1 (std 0.2)
    assert _select(_trainer(tests_from_valid_candidates=True))["test"].chosen == {0: [1], 1: [0]}
    # dynamic sampling: the zero-variance code group and the zero-std suites drop out;
    # problem 0 (dropped by the code filter) trains no tests either
    batches = _select(_trainer(filter_zero_variance=True))
    assert batches["code"].groups_kept == 1 and batches["code"].chosen == {1: [0, 1, 2, 3]}
    assert batches["test"].chosen == {0: [], 1: []} and not batches["test"].trajectories
    kept_anyway = _select(_trainer(filter_zero_variance=True, tests_from_kept_problems=False))
    assert kept_anyway["test"].chosen == {0: [2], 1: []}
    # update_n = 2: the two largest stds
    assert _select(_trainer(update_n=2))["test"].chosen == {0: [2, 1], 1: [0, 1]}


def test_an_unusable_problem_never_trains():
    judgements = [JUDGEMENTS[0], SimpleNamespace(code_valid=[True] * 4, usable=False)]
    batches = _select(_trainer(), judgements)
    assert batches["code"].chosen == {0: [0, 1, 2, 3]}
    assert batches["test"].chosen == {0: [2], 1: []}
