"""The typed batches a step trains on (`codea1.grpo.RoleBatch`, `StepBatches`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from codea1.grpo import RoleBatch, StepBatches


def _sample(tag):
    return SimpleNamespace(prompt_ids=[1], completion_ids=[tag], logprobs=None)


def _batches(selfplay: bool) -> StepBatches:
    code, test = RoleBatch("code", groups_total=2), RoleBatch("test", groups_total=4)
    for pi in (0, 1):
        code.add(pi, _sample(10 + pi), 0.5)
        code.add(pi, _sample(20 + pi), -0.5)
        code.groups_kept += 1
    test.add(1, _sample(30), 1.0)
    test.groups_kept = 1
    return StepBatches(code, test, selfplay)


def test_self_play_trains_both_parts_with_one_set_of_weights():
    batches = _batches(selfplay=True)
    shared = batches["shared"]
    assert list(batches.updates()) == ["shared"]
    assert shared.role == "shared" and shared.parts == (batches.code, batches.test)
    assert [t.completion_ids[0] for t in shared.trajectories] == [10, 20, 11, 21, 30]
    assert (shared.groups_total, shared.groups_kept) == (6, 3)
    # the step's global order: the code part, then the test part, each by problem
    assert shared.order_keys() == [(0, 0), (0, 0), (0, 1), (0, 1), (1, 1)]
    assert batches.group_metrics() == {
        "shared/groups_total": 6, "shared/groups_kept": 3, "code/groups_total": 2, "code/groups_kept": 2,
        "test/groups_total": 4, "test/groups_kept": 1}


def test_two_policies_train_their_own_batch():
    batches = _batches(selfplay=False)
    assert list(batches.updates()) == ["code", "test"]
    assert batches["code"] is batches.code and batches["test"] is batches.test
    assert batches.test.order_keys() == [(0, 1)]
    assert batches.group_metrics() == {"code/groups_total": 2, "code/groups_kept": 2,
                                       "test/groups_total": 4, "test/groups_kept": 1}
    with pytest.raises(KeyError):
        batches["shared"]
