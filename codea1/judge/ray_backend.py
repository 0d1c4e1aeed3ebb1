"""`judge.backend: ray`: the sandbox on every node of a Ray cluster (extra `codea1[ray]`).

Each Ray actor wraps the existing fork-server `Executor` and `Judge` on its node and
judges whole batches of `ProblemRollout`s; the trainer keeps a bounded number of batches
in flight per actor. At start-up every actor reports which sandbox protections hold on
its node, and a node lacking one that `judge.ray_require` names is refused (the run does
not start). An actor that dies (its node lost, its process killed) turns its batch into
infra failures, never pass/fail: the batch is retried once (`judge.ray_retries`) on a
fresh actor, and only if that fails too are its problems reported unusable (they do not
train, as with the local executor's infra failures).

The local executor of each process stays the default (execution capacity then grows
with the torchrun nodes for free); this backend is for sandbox machines apart from the
GPU machines.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any, Sequence

from codea1.judge.judge import Judge
from codea1.sandbox import Executor

if TYPE_CHECKING:
    from codea1.judge.judge import JudgeConfig, JudgeProgress, ProblemJudgement, ProblemRollout
    from codea1.sandbox import Limits

# ray (the codea1[ray] extra) is imported where it is used, through `import_ray`: it is optional.

RAY_EXTRA_HINT = "pip install 'codea1[ray]'"


class SandboxNodeRefused(RuntimeError):
    """A Ray node lacks a sandbox protection the config requires."""


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError(f"judge.backend=ray: Ray cannot be imported ({exc}); install it with "
                           f"{RAY_EXTRA_HINT}, or use judge.backend=local") from None
    return ray


class SandboxNode:
    """What runs inside one Ray actor: an Executor and a Judge on the actor's node."""

    def __init__(self, workers: int | None, limits: "Limits", config: "JudgeConfig") -> None:
        self._cm = Executor(workers=workers, limits=limits)
        self.executor = self._cm.__enter__()
        self.judge = Judge(self.executor, config)

    def describe(self) -> dict[str, Any]:
        """The node and which protections hold there (True, or why not)."""
        return {"node": socket.gethostname(), "pid": os.getpid(),
                "protections": dict(self.executor.protections)}

    def judge_batch(self, rollouts: Sequence["ProblemRollout"]) -> list["ProblemJudgement"]:
        return self.judge.judge_step(list(rollouts))

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


def check_protections(reports: Sequence[dict[str, Any]], required: Sequence[str]) -> None:
    """Refuse the run when a node lacks a required protection (one line per node)."""
    problems = []
    for rep in reports:
        missing = [name for name in required if rep["protections"].get(name) is not True]
        if missing:
            why = "; ".join(f"{n}: {rep['protections'].get(n, 'not reported')}" for n in missing)
            problems.append(f"node {rep['node']} lacks {', '.join(missing)} ({why})")
    if problems:
        raise SandboxNodeRefused("judge.ray_require: " + " | ".join(problems))


class RayJudge:
    """`Judge.judge_step` over Ray actors (one per node by default): a
    `codea1.judge.backend.StepJudge`."""

    #: (the actors judge in their own processes: no progress this process could read)
    progress: "JudgeProgress | None" = None

    def __init__(self, config: "JudgeConfig", limits: "Limits", *, workers: int | None = None,
                 address: str | None = None, actors: int | None = None, batch_problems: int = 8,
                 in_flight: int = 2, retries: int = 1, require: Sequence[str] = ()) -> None:
        ray = import_ray()
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False,
                     include_dashboard=False)
        self.config, self.limits, self.workers = config, limits, workers
        self.batch_problems, self.in_flight, self.retries = batch_problems, in_flight, retries
        self.require = list(require)
        self._local = Judge(None, config)  # parsing only: the shape of an infra failure
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        self.n_actors = actors or max(1, len(nodes))
        self._remote = ray.remote(num_cpus=0)(SandboxNode)
        self.actors = [self._start() for _ in range(self.n_actors)]
        self.nodes = ray.get([a.describe.remote() for a in self.actors])
        try:
            check_protections(self.nodes, self.require)
        except SandboxNodeRefused:
            self.close()
            raise
        self.restarts = 0

    def _start(self):
        return self._remote.options(scheduling_strategy="SPREAD").remote(self.workers, self.limits, self.config)

    def judge_step(self, rollouts: Sequence["ProblemRollout"]) -> list["ProblemJudgement"]:
        """Judge every problem; batches go to the actors round-robin, at most `in_flight`
        per actor at a time; a batch whose actor died is retried, then reported infra."""
        ray = self.ray
        rollouts = list(rollouts)
        size = self.batch_problems
        batches = [list(range(i, min(i + size, len(rollouts)))) for i in range(0, len(rollouts), size)]
        results: list[Any] = [None] * len(rollouts)
        todo = [(b, 0) for b in batches]           # (members, tries so far)
        pending: dict[Any, tuple[list[int], int, int, Any]] = {}  # ref -> (members, tries, slot, actor)
        load = [0] * len(self.actors)
        while todo or pending:
            while todo and min(load) < self.in_flight:
                members, tries = todo.pop(0)
                a = load.index(min(load))
                ref = self.actors[a].judge_batch.remote([rollouts[i] for i in members])
                pending[ref] = (members, tries, a, self.actors[a])
                load[a] += 1
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            members, tries, a, actor = pending.pop(ref)
            load[a] -= 1
            try:
                out = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.ObjectLostError) as exc:
                if self.actors[a] is actor:  # (its other batches fail too: replace it once)
                    self._replace(a)
                if tries < self.retries:
                    todo.append((members, tries + 1))
                    continue
                why = f"sandbox node lost ({type(exc).__name__})"
                out = self.infra_failures([rollouts[i] for i in members], why)
            for i, j in zip(members, out):
                results[i] = j
        return results

    def infra_failures(self, rollouts: Sequence["ProblemRollout"], why: str) -> list["ProblemJudgement"]:
        """Unusable judgements of rollouts whose runs were lost (the local judge's shape)."""
        return self._local.infra_failures(rollouts, why)

    def _replace(self, index: int) -> None:
        """A fresh actor for one that died (its protections are checked again)."""
        actor = self._start()
        report = self.ray.get(actor.describe.remote())
        check_protections([report], self.require)
        self.actors[index] = actor
        self.restarts += 1

    def close(self) -> None:
        for actor in getattr(self, "actors", []):
            try:
                self.ray.kill(actor)
            except Exception:  # already gone
                pass
        self.actors = []
