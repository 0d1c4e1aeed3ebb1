"""The ranks of a one-process run: every collective of the step is the identity.

`Trainer` talks to its ranks through this interface only; `codea1.train.distributed.Ranks`
implements it over torch.distributed for several processes. A one-process step therefore
runs nothing of the distributed code, and a reader follows the algorithm here.
"""

from __future__ import annotations

from typing import Any, Sequence

from codea1.grpo import RoleBatch, split_mini_batches


class OneProcess:
    """Rank 0 of 1: it holds every problem of the step and owns the run directory."""

    rank, world, local_rank, local_world = 0, 1, 0, 1
    enabled = False   # no collectives
    main = True       # writes the run directory
    comm_s = 0.0      # seconds spent in collectives
    run_dir = "RUN_DIR"   # the run's directory once the trainer knows it (a lost rank's resume hint)

    # ---------------------------------------------------------------- collectives

    def slots(self, n: int) -> list[int]:
        """This rank's slots among the step's `n` problems."""
        return list(range(n))

    def any(self, flag: bool) -> bool:
        return bool(flag)

    def sum(self, values: Sequence[float]) -> list[float]:
        return [float(v) for v in values]

    def max(self, values: Sequence[float]) -> list[float]:
        return [float(v) for v in values]

    def broadcast(self, obj: Any) -> Any:
        return obj

    def gather(self, obj: Any) -> list[Any] | None:
        return [obj]

    def all_gather(self, obj: Any) -> list[Any]:
        return [obj]

    def barrier(self) -> None:
        pass

    def close(self) -> None:
        pass

    # ---------------------------------------------------------------- the step's

    def book_tops(self, book, problems: Sequence[Any], slots: Sequence[int], k: int) -> list[list[str]]:
        """The Mistake Book tests replayed for each of this rank's problems (one snapshot)."""
        tops = book.top_many([problems[s].id for s in slots], k=k)
        return [list(tops[problems[s].id]) for s in slots]

    def commit_book(self, book, step: int, updates: Sequence[tuple[int, tuple[str, Any]]],
                    net: bool = False) -> dict[str, Any]:
        """The commit point: the step's `(slot, (problem id, update))` applied in slot order."""
        return book.commit_step(step, [u for _, u in sorted(updates, key=lambda x: x[0])], net)

    def layout(self, batch: RoleBatch, slots: Sequence[int] | None, mini_batches: int) -> list[list[int]]:
        """The indices of `batch.trajectories` in each mini-batch of the update."""
        return split_mini_batches(len(batch.trajectories), mini_batches)

    def step_samples(self, samples: list[dict[str, Any]], slots: Sequence[int], k: int) -> list[dict[str, Any]]:
        """samples.jsonl's records of the step (on rank 0)."""
        return samples

    def step_metrics(self, metrics: dict[str, Any], weight: float) -> dict[str, Any] | None:
        """The step's metrics over every rank (on rank 0; None elsewhere)."""
        return metrics

