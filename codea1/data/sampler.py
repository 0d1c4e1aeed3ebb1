"""The order in which training problems are drawn, step after step.

As the reference's data loader (a seeded random sampler with `drop_last`): the training
set is walked in epochs, each a fresh seeded permutation cut into batches of
`batch_size`; an epoch's last incomplete batch is dropped, so a step never holds the
same problem twice and every problem of an epoch is seen at most once in it. The
position (epoch, index) is checkpointed, so a resumed run draws what the uninterrupted
run would have drawn; with it a digest of the training problems' ids in order, so a
resume on changed data (the same count, other problems or another order) is refused
rather than drawing another sequence in silence.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np


class ProblemSampler:
    """Problems in a fresh seeded permutation per epoch; its position is checkpointed.

    `cross_epochs=True` is the project's older rule: a batch that an epoch cannot fill
    takes the rest from the next epoch's order (nothing is dropped, but a step may then
    hold a problem twice, and a batch may be larger than the data set).
    """

    def __init__(self, n: int, seed: int, shuffle: bool = True, *, batch_size: int | None = None,
                 cross_epochs: bool = False, ids: Sequence[str] | None = None) -> None:
        if n <= 0:
            raise ValueError("the training set has no problems")
        if ids is not None and len(ids) != n:
            raise ValueError(f"{len(ids)} problem ids for {n} problems")
        if batch_size is not None and batch_size > n and not cross_epochs:
            raise ValueError(
                f"data.problems_per_step={batch_size} is more than the {n} training problems: the "
                "reference's sampler drops an epoch's last incomplete batch, so no step could be "
                "drawn; lower data.problems_per_step (or set data.cross_epochs=true)")
        self.n, self.seed, self.shuffle = n, seed, shuffle
        self.batch_size, self.cross_epochs = batch_size, cross_epochs
        self.epoch, self.index = 0, 0
        self.ids_sha256 = None if ids is None else ids_digest(ids)
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.n))
        return np.random.default_rng([self.seed, epoch]).permutation(self.n).tolist()

    def _next_epoch(self) -> None:
        self.epoch += 1
        self.index = 0
        self._order = self._permutation(self.epoch)

    def take(self, k: int) -> list[int]:
        """The next k indices: the next batch of this epoch, or (when fewer than k are left)
        the first batch of the next epoch's order, the rest of this one dropped."""
        if not self.cross_epochs:
            if k > self.n:
                raise ValueError(f"a batch of {k} problems from {self.n}: a step never holds a problem twice")
            if self.index + k > self.n:
                self._next_epoch()
            out = self._order[self.index:self.index + k]
            self.index += k
            return list(out)
        out: list[int] = []
        while len(out) < k:
            if self.index >= self.n:
                self._next_epoch()
            out.append(self._order[self.index])
            self.index += 1
        return out

    def state(self) -> dict[str, int | str]:
        state: dict[str, int | str] = {"epoch": self.epoch, "index": self.index, "n": self.n}
        if self.ids_sha256 is not None:
            state["ids_sha256"] = self.ids_sha256
        return state

    def load_state(self, state: dict[str, int]) -> None:
        problem = position_error(state)
        if problem is not None:
            raise ValueError(f"the checkpoint's data position: {problem}")
        if state["n"] != self.n:
            raise ValueError(
                f"the checkpoint's data position is for {state.get('n')} problems, "
                f"the training set now has {self.n}: resume with the same data"
            )
        saved = state.get("ids_sha256")  # (none in a run written before it was recorded)
        if saved is not None and self.ids_sha256 is not None and saved != self.ids_sha256:
            raise ValueError(
                f"the checkpoint's data position is for other training problems: the {self.n} problems of "
                "data.train (after data.include and the rows data.check=skip leaves out) are not the ones, in "
                "the order, this run was started on, so it would draw another sequence; resume with the data "
                "file the run was started on, or start a new run on the new data")
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._order = self._permutation(self.epoch)


def position_error(state: object) -> str | None:
    """What is wrong with a checkpointed data position (`ProblemSampler.state`), or None:
    `train --resume` checks it with the checkpoint's other files, before a model loads."""
    if not isinstance(state, dict):
        return f"{state!r}: expected an object with epoch, index and n"
    for key, least in (("epoch", 0), ("index", 0), ("n", 1)):
        value = state.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            return f"{key} {value!r}: expected a whole number >= {least}"
    if state["index"] > state["n"]:
        return f"index {state['index']} is past the end of an epoch of {state['n']} problems"
    digest = state.get("ids_sha256")
    if digest is not None and not (isinstance(digest, str) and len(digest) == 64
                                   and all(c in "0123456789abcdef" for c in digest)):
        return f"ids_sha256 {digest!r}: expected 64 hex digits (the digest of the problem ids)"
    return None


def ids_digest(ids: Sequence[str]) -> str:
    """The SHA-256 of the training problems' ids, in their order (`ProblemSampler.state`)."""
    return hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()
