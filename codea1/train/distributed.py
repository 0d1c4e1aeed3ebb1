"""Many processes, one run: torchrun / srun / `accelerate launch` over torch.distributed.

Every rank runs the whole Code-A1 step on its own share of the step's problems (a GRPO
group is one problem and its candidates, so advantages never cross ranks):

- problems: every rank draws the same `problems_per_step` problems (one seeded sampler)
  and keeps the slots `rank, rank + W, ...`; each sample's random stream is seeded from
  (run seed, step, role, slot, candidate), so 1 rank and W ranks sample alike;
- Mistake Book: one SQLite file owned by rank 0, which sends the step's replayed tests
  to every rank (`book_tops`) and, at the commit point, applies every rank's updates in
  slot order in one transaction (`commit_book`);
- update: the mini-batches are cut from the step's trajectories in their global order
  (`minibatch_layout`), the token count of the token-mean is summed over ranks
  (`GradSync.mini_batch_tokens`), and gradients are summed (LoRA / replicated weights: one
  all-reduce; `full` mode: FSDP2 reduce-scatters them);
- metrics are reduced to rank 0 (`reduce_metrics`), which alone writes metrics, samples,
  TensorBoard and checkpoints.

A one-process run uses `codea1.train.one_process.OneProcess`, whose methods (the same
interface, `Ranks` overrides them) are the identity: it runs nothing of this module.
docs/SCALING.md has the launch commands.
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import torch
import torch.distributed as dist

from codea1.grpo import (
    RankHooks,
    RoleBatch,
    UpdateStats,
    mini_batch_token_counts,
    split_mini_batches,
)
from codea1.logprobs import sequence_logprobs
from codea1.rollout import sample_seeds  # noqa: F401  (its old home)
from codea1.train.one_process import OneProcess
from codea1.trajectory import Trajectory, pack_micro_batches

if TYPE_CHECKING:
    from codea1.models import Policies
    from codea1.train.config import TrainConfig


class RankLost(RuntimeError):
    """A collective failed or timed out: another rank is gone or stuck; the run stops here."""


def launched_world_size() -> int:
    """WORLD_SIZE as the launcher (torchrun, srun with the variables set, accelerate) set it."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ValueError(f"WORLD_SIZE={os.environ.get('WORLD_SIZE')!r}: expected a whole number") from None


def slurm_environment() -> dict[str, str]:
    """torch.distributed's variables from SLURM's, for `srun codea1 train ...` without torchrun.

    MASTER_ADDR must be set by the batch script (the first node of the allocation); the
    rest is read from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID.
    """
    env = os.environ
    if "WORLD_SIZE" in env or "SLURM_NTASKS" not in env or "SLURM_PROCID" not in env:
        return {}
    return {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": env["SLURM_NTASKS"],
            "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
            "LOCAL_WORLD_SIZE": env.get("SLURM_NTASKS_PER_NODE", "1").split("(")[0]}


class Ranks(OneProcess):
    """This process's place in the run, and the few collectives the loop needs.

    Object and flag collectives go through a gloo group (CPU tensors) even when the
    default group is NCCL; `comm_s` adds up the seconds spent in collectives.
    """

    def __init__(self, rank: int = 0, world: int = 1, local_rank: int = 0, local_world: int = 1,
                 *, cpu_group=None, owns_group: bool = False, timeout_s: float = 1800.0) -> None:
        self.rank, self.world = rank, world
        self.local_rank, self.local_world = local_rank, local_world
        self.cpu_group = cpu_group
        self.owns_group = owns_group
        self.timeout_s = timeout_s
        self.comm_s = 0.0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def slots(self, n: int) -> list[int]:
        """This rank's slots among the step's `n` problems (strided: balanced mini-batches)."""
        return list(range(self.rank, n, self.world))

    @contextlib.contextmanager
    def _collective(self, what: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        except RankLost:
            raise
        except Exception as exc:  # gloo/NCCL errors: a peer closed its sockets or timed out
            raise RankLost(f"rank {self.rank}: {what} across {self.world} ranks failed ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}); another rank is gone or stuck "
                           "(no answer within distributed.timeout_s). The run stops; continue it with "
                           f"codea1 train --resume {self.run_dir}") from exc
        finally:
            self.comm_s += time.perf_counter() - started

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on any (how a stop request is agreed on)."""
        if not self.enabled:
            return bool(flag)
        t = torch.tensor([1 if flag else 0], dtype=torch.int64)
        with self._collective("agreeing on a stop"):
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.cpu_group)
        return bool(t.item())

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over ranks (float64)."""
        if not self.enabled:
            return [float(v) for v in values]
        t = torch.tensor(list(values), dtype=torch.float64)
        with self._collective("summing figures"):
            dist.all_reduce(t, group=self.cpu_group)
        return t.tolist()

    def max(self, values: Sequence[float]) -> list[float]:
        if not self.enabled:
            return [float(v) for v in values]
        t = torch.tensor(list(values), dtype=torch.float64)
        with self._collective("comparing figures"):
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.cpu_group)
        return t.tolist()

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank."""
        if not self.enabled:
            return obj
        box = [obj if self.main else None]
        with self._collective("receiving rank 0's data"):
            dist.broadcast_object_list(box, src=0, group=self.cpu_group)
        return box[0]

    def gather(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj`, in rank order, on rank 0 (None elsewhere)."""
        if not self.enabled:
            return [obj]
        out = [None] * self.world if self.main else None
        with self._collective("sending data to rank 0"):
            dist.gather_object(obj, out, dst=0, group=self.cpu_group)
        return out

    def all_gather(self, obj: Any) -> list[Any]:
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world
        with self._collective("exchanging data"):
            dist.all_gather_object(out, obj, group=self.cpu_group)
        return out

    def barrier(self) -> None:
        if self.enabled:
            with self._collective("waiting for every rank"):
                dist.barrier(group=self.cpu_group)

    def close(self) -> None:
        if self.owns_group:
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
            self.owns_group = False

    # the step's collectives (`OneProcess`'s interface), by the functions below
    def book_tops(self, book, problems, slots, k):
        return book_tops(self, book, problems, slots, k)

    def commit_book(self, book, step, updates, net=False):
        return commit_book(self, book, step, updates, net)

    def layout(self, batch: RoleBatch, slots, mini_batches):
        return minibatch_layout(self, global_keys(batch.order_keys(), slots), mini_batches)

    def step_samples(self, samples, slots, k):
        return gather_samples(self, samples, slots, k)

    def step_metrics(self, metrics, weight):
        return reduce_metrics(self, metrics, weight)


def init_ranks(cfg: "TrainConfig") -> OneProcess:
    """Join the launcher's process group (env:// rendezvous), or one process when WORLD_SIZE is 1."""
    os.environ.update(slurm_environment())
    world = launched_world_size()
    d = cfg.distributed
    if world <= 1 and not dist.is_initialized():
        return OneProcess()
    if cfg.data.problems_per_step < world:
        raise ValueError(f"data.problems_per_step={cfg.data.problems_per_step} is smaller than the "
                         f"{world} ranks of the run: every rank needs at least one problem a step")
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK"):
        if name not in os.environ and not dist.is_initialized():
            raise ValueError(f"WORLD_SIZE={world} but {name} is not set: launch with torchrun (or set "
                             "MASTER_ADDR/MASTER_PORT/RANK as docs/SCALING.md shows for srun)")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    cuda = cfg.model.device.startswith("cuda") or (cfg.model.device == "auto" and torch.cuda.is_available())
    backend = d.backend if d.backend != "auto" else ("nccl" if cuda else "gloo")
    timeout = timedelta(seconds=d.timeout_s)
    owns = False
    if not dist.is_initialized():
        if cuda:
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend, timeout=timeout)
        owns = True
    cpu_group = dist.new_group(backend="gloo", timeout=timeout) if dist.get_backend() != "gloo" else None
    return Ranks(dist.get_rank(), dist.get_world_size(), local_rank, local_world,
                 cpu_group=cpu_group, owns_group=owns, timeout_s=d.timeout_s)


def rank_model_config(cfg: "TrainConfig", ranks: Ranks):
    """The model config this rank loads: its own GPU (cuda:LOCAL_RANK); float32 master
    weights when FSDP2 will shard full weights (compute in `model.dtype`)."""
    update: dict[str, Any] = {}
    if ranks.enabled:
        dev = cfg.model.device
        if dev in ("cuda", "auto") and torch.cuda.is_available():
            update["device"] = f"cuda:{ranks.local_rank}"
        if uses_fsdp(cfg, ranks):
            update["dtype"] = "float32"
    return cfg.model.model_copy(update=update) if update else cfg.model


def uses_fsdp(cfg: "TrainConfig", ranks: Ranks) -> bool:
    """Full weights on several ranks are sharded with FSDP2 (unless distributed.fsdp is off)."""
    return ranks.enabled and cfg.distributed.fsdp and not cfg.model.uses_lora


# --------------------------------------------------------------------------- Mistake Book


def book_tops(ranks: Ranks, book, problems: Sequence[Any], slots: Sequence[int], k: int) -> list[list[str]]:
    """The Mistake Book tests replayed for this rank's problems: rank 0 reads them for the
    whole step (`problems` are the step's problems, in slot order) and sends them."""
    tops = None
    if ranks.main:  # (one snapshot of the book for the whole step)
        found = book.top_many([p.id for p in problems], k=k)
        tops = [list(found[p.id]) for p in problems]
    tops = ranks.broadcast(tops)
    return [tops[s] for s in slots]


def commit_book(ranks: Ranks, book, step: int, updates: Sequence[tuple[int, tuple[str, Any]]],
                net: bool = False) -> dict[str, Any]:
    """The commit point: rank 0 applies every rank's `(slot, (problem id, update))` in slot
    order, in one transaction (`net`: `mistakes.net_changes`); every rank gets the Mistake
    Book metrics back."""
    gathered = ranks.gather(list(updates))
    metrics = None
    if ranks.main:
        ordered = [u for _, u in sorted((x for part in gathered for x in part), key=lambda x: x[0])]
        metrics = book.commit_step(step, ordered, net)
    return ranks.broadcast(metrics)


# --------------------------------------------------------------------------- update


def minibatch_layout(ranks: Ranks, keys: Sequence[tuple], mini_batches: int) -> list[list[int]]:
    """Local indices of the sequences in each mini-batch of the update.

    `keys[i]` places local sequence i in the step's global order (the order a single
    process would list them in). The global list is cut like `grpo.split_mini_batches`,
    and each rank trains its own members of every mini-batch, so the mini-batches are
    the same whatever the number of ranks. A rank may hold none of a mini-batch (it
    still joins the reductions).
    """
    parts = ranks.all_gather(list(keys))
    merged = sorted((k, r, i) for r, part in enumerate(parts) for i, k in enumerate(part))
    layout = []
    for members in split_mini_batches(len(merged), mini_batches):
        layout.append([merged[j][2] for j in members if merged[j][1] == ranks.rank])
    return layout


def global_keys(order_keys: Sequence[tuple[int, int]], slots: Sequence[int] | None = None) -> list[tuple[int, int, int]]:
    """(part, slot, index within the problem) of each trajectory from its (part, local
    problem) (`grpo.RoleBatch.order_keys`); without `slots` the local problem index is the slot."""
    seen: dict[tuple[int, int], int] = {}
    out = []
    for part, pi in order_keys:
        j = seen.get((part, pi), 0)
        seen[(part, pi)] = j + 1
        out.append((part, slots[pi] if slots is not None else pi, j))
    return out


class GradSync:
    """The cross-rank part of a policy's update (`hooks` hands it to `grpo.update_role`).

    - `mini_batch_tokens`: each mini-batch's token count over every rank (the token-mean's
      divisor), in one reduction before the update;
    - `pad_forwards` / `pad_backwards`: with FSDP2 every forward/backward is a collective,
      so before a mini-batch's passes all ranks agree on the busiest rank's number of
      micro-batches and the others run one-token filler passes (loss counted 0);
    - `gradients` (after the backward passes): replicated weights (LoRA) sum their
      gradients in one all-reduce; FSDP2 already summed them (its divide factor set to 1)
      in its reduce-scatter;
    - `reduce_stats`: the update's statistics summed over ranks.
    """

    def __init__(self, ranks: Ranks, sharded: bool = False) -> None:
        self.ranks = ranks
        self.sharded = sharded

    def hooks(self, chunk_tokens: int) -> RankHooks:
        """The update's hooks; `chunk_tokens` (`grpo.logprob_chunk_tokens`) for the filler passes."""
        return RankHooks(agree=self.ranks.any, mini_batch_tokens=self.mini_batch_tokens,
                         pad_forwards=self.pad_forwards,
                         pad_backwards=lambda model, n: self.pad_backwards(model, n, chunk_tokens),
                         after_backward=self.gradients, reduce_stats=self.reduce_stats)

    def mini_batch_tokens(self, layout: Sequence[Sequence[int]], seqs: Sequence[Trajectory]) -> list[int]:
        return [int(n) for n in self.ranks.sum(mini_batch_token_counts(layout, seqs))]

    def forwards(self, n: int) -> int:
        return int(self.ranks.max([n])[0]) if self.sharded else n

    def pad_forwards(self, model, n: int, chunk_tokens: int) -> None:
        """(no_grad) As many forward passes as the busiest rank: the missing ones on a filler."""
        for _ in range(self.forwards(n) - n):
            sequence_logprobs(model, filler_micro_batch(model), chunk_tokens)

    def pad_backwards(self, model, n: int, chunk_tokens: int) -> None:
        """As many forward/backward passes as the busiest rank (a filler's loss counts 0)."""
        for _ in range(self.forwards(n) - n):
            (sequence_logprobs(model, filler_micro_batch(model), chunk_tokens).sum() * 0.0).backward()

    def gradients(self, params: Sequence["torch.nn.Parameter"]) -> None:
        if self.sharded or not self.ranks.enabled:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads]).to(torch.float32)
        with self.ranks._collective("summing gradients"):
            dist.all_reduce(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).to(p.dtype)
            offset += n

    def reduce_stats(self, stats: UpdateStats) -> UpdateStats:
        """The statistics of the whole (all-rank) update: sums added up, then the means."""
        keys = list(stats.sums)
        total = self.ranks.sum([stats.sums[k] for k in keys] + [stats.loss_sum, stats.forward_tokens, stats.sequences])
        stats.sums = dict(zip(keys, total))
        stats.loss_sum, stats.forward_tokens, stats.sequences = total[-3], int(total[-2]), int(total[-1])
        return stats.finish()


def filler_micro_batch(model):
    """A one-token micro-batch: what a rank with nothing left runs so that an FSDP2 model's
    forward/backward collectives still pair up with the other ranks' (its loss counts 0)."""
    pad = getattr(getattr(model, "config", None), "pad_token_id", None) or 0
    return pack_micro_batches([Trajectory([int(pad)], [int(pad)], 0.0)], 2)[0]


# --------------------------------------------------------------------------- FSDP2


def shard_policies(policies: "Policies", ranks: Ranks, compute_dtype: "torch.dtype") -> None:
    """FSDP2 (`fully_shard`) over every decoder layer and the whole of each full-weight model
    (the code and test policies and the frozen reference): float32 master weights and
    optimiser state, compute in `compute_dtype`, gradients reduced in float32 and summed
    (not averaged: the loss is already divided by the global token count)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    seen: set[int] = set()
    for model in list(policies._models.values()) + ([policies._reference] if policies._reference is not None else []):
        if id(model) in seen:
            continue
        seen.add(id(model))
        layers = getattr(getattr(model, "model", None), "layers", None)
        for layer in layers or []:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        for module in fsdp_modules(model):  # plain sums (no pre/post-multiplied ops: gloo has none)
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)
    policies.sharded = True


def fsdp_modules(model) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


@contextlib.contextmanager
def gathered(model) -> Iterator[None]:
    """The whole weights of an FSDP2 model on every rank for the duration (sampling), so
    each rank decodes on its own without per-forward collectives; sharded again after.
    Every rank must enter together."""
    mods = fsdp_modules(model)
    for m in mods:
        m.unshard()
        m.set_reshard_after_forward(False)
    try:
        yield
    finally:
        for m in mods:
            m.set_reshard_after_forward(True)
            m.reshard()


def full_state(policies: "Policies", key: str) -> dict[str, "torch.Tensor"]:
    """Whole (unsharded, CPU) trainable weights of one weight set; collective; rank 0 gets them."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    role = "code" if key == "shared" else key
    model = policies.module(role)
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    names = [n for n, _ in policies.named_trainable_parameters(role)]
    return {n: state[n] for n in names if n in state}


def load_full_state(policies: "Policies", key: str, tensors: dict[str, "torch.Tensor"]) -> None:
    """Load whole weights (as `full_state` gives them) into a sharded model on every rank."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    role = "code" if key == "shared" else key
    set_model_state_dict(policies.module(role), tensors,
                         options=StateDictOptions(full_state_dict=True, strict=False))


def full_optimizer_state(policies: "Policies", key: str, optimizer) -> dict[str, Any]:
    """The optimiser state of a sharded model as a single process's `state_dict()` (integer
    parameter ids), so checkpoints look the same whatever the number of ranks."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    role = "code" if key == "shared" else key
    model = policies.module(role)
    osd = get_optimizer_state_dict(model, optimizer,
                                   options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    names = _optimizer_names(model, optimizer)
    index = {n: i for i, n in enumerate(names)}
    if not osd:
        return {}
    return {
        "state": {index[n]: v for n, v in osd["state"].items()},
        "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in osd["param_groups"]],
    }


def load_full_optimizer_state(policies: "Policies", key: str, optimizer, state: dict[str, Any]) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    role = "code" if key == "shared" else key
    model = policies.module(role)
    names = _optimizer_names(model, optimizer)
    osd = {
        "state": {names[int(i)]: v for i, v in state["state"].items()},
        "param_groups": [{**g, "params": [names[int(i)] for i in g["params"]]} for g in state["param_groups"]],
    }
    set_optimizer_state_dict(model, optimizer, osd, options=StateDictOptions(full_state_dict=True))


def gather_full_states(policies: "Policies", optimizers: dict) -> tuple[dict, dict]:
    """Whole weights and optimiser states gathered from the FSDP2 shards, for a checkpoint
    (a collective: every rank calls it)."""
    weights = {k: full_state(policies, k) for k in policies.weight_keys}
    return weights, {k: full_optimizer_state(policies, k, o) for k, o in optimizers.items()}


def sharded_loader(policies: "Policies", optimizers: dict):
    """`checkpoint.read_training_state`'s `load_sharded`: whole weights and optimiser states
    from a checkpoint into this rank's FSDP2 shards."""
    def load(weights: dict, optimizer_states: dict) -> None:
        for key in policies.weight_keys:
            load_full_state(policies, key, weights[key])
        for key, o in optimizers.items():
            load_full_optimizer_state(policies, key, o, optimizer_states[key])
    return load


def _optimizer_names(model, optimizer) -> list[str]:
    by_id = {id(p): n for n, p in model.named_parameters()}
    return [by_id[id(p)] for g in optimizer.param_groups for p in g["params"]]


# --------------------------------------------------------------------------- metrics


_SUM_SUFFIXES = ("_samples", "_tokens", "_truncated", "_empty", "_prompts_truncated", "_prompts_shortened",
                 "/groups_total", "/groups_kept", "_tokens_per_s", "_logp_mismatch_tokens")
_SUM_KEYS = {"judge/infra", "judge/unusable_problems", "rollout/tokens", "rollout/tokens_per_s"}
_SAME_PREFIXES = ("mistakes/", "update/", "data/", "val/")


def _kind(key: str) -> str:
    if key.startswith("time/"):
        return "max"
    if key.startswith(_SAME_PREFIXES) and not key.endswith(("is_weight_mean", "is_capped_frac")):
        return "same"    # already global: the commit and the update reduce their own figures
    if key in _SUM_KEYS or key.endswith(_SUM_SUFFIXES):
        return "sum"
    return "mean"


def reduce_metrics(ranks: Ranks, metrics: dict[str, Any], weight: float) -> dict[str, Any] | None:
    """The step's metrics over every rank, on rank 0 (None elsewhere).

    Counts add up, times take the slowest rank, `X_std` pools with its `X_mean`, the
    Mistake Book and update figures are already global, and other means are weighted by
    each rank's problems (exact for per-problem and per-candidate rates; a per-suite
    mean such as judge/pass_rate is weighted by problems, not suites).
    """
    if not ranks.enabled:
        return metrics
    parts = ranks.gather((weight, metrics))
    if not ranks.main:
        return None
    total = sum(w for w, _ in parts) or 1.0
    out: dict[str, Any] = {}
    keys = list(dict.fromkeys(k for _, m in parts for k in m))
    for key in keys:
        vals = [(w, m[key]) for w, m in parts if key in m and isinstance(m[key], (int, float))]
        if not vals:
            out[key] = metrics.get(key)
            continue
        kind = _kind(key)
        if kind == "max":
            out[key] = max(v for _, v in vals)
        elif kind == "same":
            out[key] = parts[0][1].get(key, vals[0][1])
        elif kind == "sum":
            out[key] = sum(v for _, v in vals)
        else:
            wsum = sum(w for w, _ in vals) or 1.0
            out[key] = sum(w * v for w, v in vals) / wsum
    for key in keys:  # pooled population std: E[x^2] - mean^2 over the ranks' shares
        if key.endswith("_std") and key[:-4] + "_mean" in out:
            mean_key = key[:-4] + "_mean"
            ex2 = sum(w * (m[key] ** 2 + m[mean_key] ** 2) for w, m in parts if key in m) / total
            out[key] = max(ex2 - out[mean_key] ** 2, 0.0) ** 0.5
    for key in keys:  # lengths from the summed counts
        if key.endswith("_mean_length"):
            role = key[len("rollout/"):-len("_mean_length")]
            samples = out.get(f"rollout/{role}_samples", 0)
            out[key] = out.get(f"rollout/{role}_tokens", 0) / samples if samples else 0.0
    return out


def gather_samples(ranks: Ranks, samples: list[dict[str, Any]], slots: Sequence[int], k: int) -> list[dict[str, Any]]:
    """samples.jsonl's records of the step's first `k` problems (by slot), on rank 0."""
    if not ranks.enabled:
        return samples
    parts = ranks.gather((list(slots), samples))
    if not ranks.main:
        return []
    by_slot: list[tuple[int, list[dict[str, Any]]]] = []
    for rank_slots, records in parts:
        groups: list[list[dict[str, Any]]] = []
        for rec in records:  # each problem's records start with its code sample
            if rec["role"] == "code" or not groups:
                groups.append([])
            groups[-1].append(rec)
        by_slot.extend(zip(rank_slots, groups))
    return [rec for _, group in sorted(by_slot, key=lambda x: x[0])[:k] for rec in group]


# --------------------------------------------------------------------------- helpers


def local_workers(configured: int | None, ranks: Ranks) -> int | None:
    """Sandbox processes of this rank: the configured number, or the node's CPUs shared
    among the ranks of the node (null config)."""
    if configured is not None or not ranks.enabled:
        return configured
    return max(1, (os.cpu_count() or 1) // max(ranks.local_world, 1))
