"""Seconds per phase of a real Code-A1 training step, and how fast each phase is.

    python benchmarks/train_step.py                       # the cpu-demo preset, 1 step
    python benchmarks/train_step.py --steps 2 --set rollout.n_test=2

Measured side by side in one run, on this machine:

1. this machine's matmul FLOP/s in the run's compute dtype (bf16 where the CPU has bf16
   units, and fp32 beside it; else fp32 alone), on square GEMMs and the model's own shapes;
   the best figure is the "peak";
2. plain batch-8 `transformers` `generate` of the model (adapters off) on 8 code prompts
   (sampling, the preset's max_new_tokens): generated tokens per second (completion
   tokens up to and including the stop token);
3. real training steps of the preset (`Trainer.run_step`): seconds per phase (code
   rollout, test rollout, judge, update), rollout tokens/s, and the update phase's
   achieved FLOP/s, counted from the model's shapes (see `update_flops`).

`--compare-forward ROUNDS` instead runs ROUNDS rounds of `--steps` real steps with the
sampler's forward before (transformers') and after (`codea1.lean_forward`), alternating,
each side from the same weights, seed and data, and prints each phase's seconds next to
its compute limit (FLOPs at the measured matmul peak plus, for a rollout, its one-token
decoding passes at the measured memory read speed) and their ratio:

    python benchmarks/train_step.py --compare-forward 2 --steps 1

Targets (printed with PASS/MISS): rollouts >= 2x plain generate tokens/s (unless
--skip-plain); update >= 75% of the matmul peak; judge < 10% of a step.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def matmul_flops(dtype, sizes, reps: int = 6) -> dict[str, float]:
    """FLOP/s of (m x k) @ (k x n) products, best of `reps` after a warm-up."""
    import torch

    out = {}
    for m, k, n in sizes:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        a @ b
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t)
        out[f"{m}x{k}x{n}"] = 2 * m * k * n / best
    return out


def plain_generate(policies, problems, max_new_tokens: int, seed: int) -> dict[str, float]:
    """`model.generate` on a batch of 8 code prompts: the baseline the rollouts must beat."""
    import torch

    from codea1.rollout import code_messages, encode_prompts

    tok = policies.tokenizer
    prompts = encode_prompts(tok, [code_messages(p) for p in problems[:8]])
    width = max(map(len, prompts))
    pad = tok.pad_token_id
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    torch.manual_seed(seed)
    # the plain model: adapters off (they start at zero, so the same function), so any
    # LoRA overhead of the training roles counts against our rollouts
    with policies.reference() as model, torch.inference_mode():
        t = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                             top_p=1.0, top_k=0, max_new_tokens=max_new_tokens, pad_token_id=pad)
        seconds = time.perf_counter() - t
    gen = out[:, width:]
    eos = set(model.generation_config.eos_token_id if isinstance(model.generation_config.eos_token_id, list)
              else [model.generation_config.eos_token_id]) | {tok.eos_token_id}
    tokens = 0
    for row in gen.tolist():
        for t_id in row:
            tokens += 1
            if t_id in eos:
                break
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def _linear_params(model) -> tuple[int, int, int]:
    """(frozen matmul params in the decoder, trainable matmul params, output-head params)."""
    import torch

    head = model.get_output_embeddings()
    frozen = trainable = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module is not head:
            n = module.in_features * module.out_features
            if module.weight.requires_grad:
                trainable += n
            else:
                frozen += n
    return frozen, trainable, head.in_features * head.out_features


def update_flops(policies, role: str, trajectories, grpo) -> float:
    """Model FLOPs of one policy's update phase as configured (`grpo`): the old log-probs
    (none for the first mini-batch with `reuse_old_logprobs`), the reference log-probs
    (with a KL term), and a forward + backward pass of every trajectory; with
    `shared_prompt_rows` a prompt shared by several responses counts once a pass. The work
    the math needs, not wasted work: achieved FLOP/s above the matmul peak would mean this
    counts work that is not done.

    Forward of a prompt of P tokens with responses R_i: 2*(P + sum R_i)*P_linear +
    2*sum R_i*P_head (logits only for responses) + 2*L*H*d*(P^2 + sum (2*P*R_i + R_i^2))
    (causal attention, QK^T and AV; a lone sequence of T tokens is the T^2 of P=0).
    Backward: frozen matmuls need input gradients only (1x forward), trainable ones input
    and weight gradients (2x), the head 1x (its input), attention 2x.
    """
    from codea1.grpo import split_mini_batches

    with policies.role(role) as model:
        frozen, trainable, head = _linear_params(model)
        cfg = model.config
    layers = cfg.num_hidden_layers
    attn_width = cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)

    def passes(seqs) -> tuple[float, float]:
        """(forward, backward) FLOPs of one pass over `seqs`."""
        groups: dict = {}
        for i, s in enumerate(seqs):
            if s.completion_ids:
                key = tuple(s.prompt_ids) if grpo.shared_prompt_rows else i
                groups.setdefault(key, (len(s.prompt_ids), []))[1].append(len(s.completion_ids))
        fwd = bwd = 0.0
        for p, rs in groups.values():
            t = p + sum(rs)
            lin_f, lin_t, hd = 2 * t * frozen, 2 * t * trainable, 2 * sum(rs) * head
            att = 2 * layers * attn_width * (p * p + sum(2 * p * r + r * r for r in rs))
            fwd += lin_f + lin_t + hd + att
            bwd += lin_f + 2 * lin_t + hd + 2 * att
        return fwd, bwd

    forward, backward = passes(trajectories)
    # the first mini-batch's old log-probs come from the update's own first pass (`grpo.update_role`)
    reused = set(split_mini_batches(len(trajectories), grpo.mini_batches)[0]) if grpo.reuse_old_logprobs else set()
    old, _ = passes([s for i, s in enumerate(trajectories) if i not in reused])
    return forward + backward + old + (forward if grpo.kl_coef > 0 else 0.0)


def memory_bandwidth(dtype, gib: float = 0.5, reps: int = 5) -> float:
    """Bytes/s this machine reads a large tensor at, the best of two probes (a sum over
    `gib` GiB, and a one-row product with a `gib` GiB weight laid out for oneDNN, the
    sampler's own kind of read), best of `reps` each: what bounds a decoding step, which
    reads every weight once."""
    import torch

    from codea1.packed_linear import Linear

    def best(fn) -> float:
        fn()
        t_best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            t_best = min(t_best, time.perf_counter() - t)
        return t_best

    elt = torch.tensor([], dtype=dtype).element_size()
    x = torch.ones(int(gib * 2**30) // elt, dtype=dtype)
    speeds = [x.numel() * elt / best(x.sum)]
    del x
    cols = 4096
    weight = torch.randn(int(gib * 2**30) // elt // cols, cols).to(dtype)
    layer, row = Linear(weight, None), torch.randn(1, cols).to(dtype)
    speeds.append(weight.numel() * elt / best(lambda: layer(row)))
    return max(speeds)


def rollout_limits(policies, m: dict, role: str, peak: float, bandwidth: float) -> dict[str, float]:
    """The least time a rollout phase could take on this machine: its FLOPs at the matmul
    peak (prefill of each prompt once, then every decoded token, linear layers and output
    head; attention left out, a few percent at these lengths) plus its decoding passes at
    the memory's speed (each one-token pass reads every weight once, the bound of a small
    batch)."""
    with policies.role("code") as model:
        frozen, trainable, head = _linear_params(model)
        elt = next(p for p in model.parameters() if not p.requires_grad).element_size()
    linear = frozen + trainable
    prefill, decoded = m.get(f"rollout/{role}_prefill_tokens", 0), m.get(f"rollout/{role}_tokens", 0)
    prompts = m.get(f"rollout/{role}_samples", 0)
    flops = 2 * prefill * linear + 2 * decoded * (linear + head) + 2 * prompts * head
    passes = m.get(f"rollout/{role}_decode_passes", 0)
    memory_s = passes * (frozen + head) * elt / bandwidth
    return {"flops": flops, "flop_s": flops / peak, "memory_s": memory_s, "limit_s": flops / peak + memory_s}


def phase_limits(policies, m: dict, peak: float, bandwidth: float) -> dict[str, dict[str, float]]:
    """Per phase of one step's metrics: seconds taken against the compute limit (see
    `rollout_limits`, `update_flops`); the judge runs programs, it has no FLOP limit."""
    out = {}
    for role in ("code", "test"):
        lim = rollout_limits(policies, m, role, peak, bandwidth)
        out[f"{role}_rollout"] = {**lim, "seconds": m.get(f"time/{role}_rollout_s", 0.0)}
    flops = m.get("bench/update_flops", 0.0)
    out["update"] = {"flops": flops, "flop_s": flops / peak, "memory_s": 0.0, "limit_s": flops / peak,
                     "seconds": m.get("time/update_s", 0.0)}
    out["judge"] = {"flops": 0.0, "flop_s": 0.0, "memory_s": 0.0, "limit_s": 0.0, "seconds": m.get("time/judge_s", 0.0)}
    return out


FORWARD_SIDES = [
    ("before: transformers' forward", False),
    ("after: the lean forward", True),
]


def compare_forwards(cfg, policies, steps: int, rounds: int, peak: float, bandwidth: float) -> list[dict]:
    """Real training steps with the sampler's forward off and on, side by side: each side
    starts from the same weights, seed and data (a fresh Trainer), the sides alternate
    within each round; returns one record per (side, round) with its steps' metrics."""
    import torch

    from codea1.train.loop import Trainer

    start = {key: {k: v.clone() for k, v in policies.state_dict(key).items()} for key in policies.weight_keys}
    records = []
    for r in range(rounds):
        for name, lean in FORWARD_SIDES:
            with torch.no_grad():
                for key, tensors in start.items():
                    params = dict(policies.named_trainable_parameters("code" if key == "shared" else key))
                    for pname, value in tensors.items():
                        params[pname].copy_(value)
            side_cfg = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={
                "code": cfg.rollout.code.model_copy(update={"lean_forward": lean}),
                "test": cfg.rollout.test.model_copy(update={"lean_forward": lean})})})
            with tempfile.TemporaryDirectory() as tmp:
                trainer = Trainer(side_cfg, Path(tmp), policies=policies)
                try:
                    ms = []
                    for _ in range(steps):
                        result = trainer.run_step()
                        m = result.metrics
                        m["bench/update_flops"] = sum(
                            update_flops(policies, "code" if key == "shared" else key, b.trajectories, cfg.grpo)
                            for key, b in result.batches.updates().items())
                        m["bench/limits"] = phase_limits(policies, m, peak, bandwidth)
                        ms.append(m)
                        print(f"  round {r + 1} {name}, step {trainer.step}: " + ", ".join(
                            f"{k[5:-2]} {m[k]:.1f}s" for k in ("time/code_rollout_s", "time/test_rollout_s",
                                                              "time/judge_s", "time/update_s", "time/step_s")
                            if k in m) + f" (load {__import__('os').getloadavg()[0]:.1f})", flush=True)
                finally:
                    trainer.close()
            records.append({"side": name, "lean": lean, "round": r, "steps": ms})
    return records


PHASES = ("code_rollout", "test_rollout", "judge", "update")


def print_phase_limits(steps: list[dict], indent: str = "  ") -> dict[str, float]:
    """Per phase, the median over `steps` of its seconds, its compute limit and their ratio,
    then the step's; returns the median seconds by phase (and "step")."""
    import statistics

    medians = {}
    for ph in PHASES:
        get = lambda key: statistics.median(m["bench/limits"][ph][key] for m in steps)  # noqa: E731
        secs, lim = get("seconds"), get("limit_s")
        ratio = f"{secs / lim:5.2f}x" if lim > 0 else "    -"
        print(f"{indent}{ph:<13} {secs:7.1f}s   limit {lim:6.1f}s (FLOPs {get('flop_s'):5.1f}s + memory "
              f"{get('memory_s'):5.1f}s)   ratio {ratio}")
        medians[ph] = secs
    limit = sum(statistics.median(m["bench/limits"][ph]["limit_s"] for m in steps) for ph in PHASES)
    medians["step"] = step = statistics.median(m["time/step_s"] for m in steps)
    print(f"{indent}{'step':<13} {step:7.1f}s   limit {limit:6.1f}s   ratio {step / limit:5.2f}x")
    return medians


def print_forward_comparison(records: list[dict]) -> None:
    print("\nper phase, median over rounds and steps: seconds, compute limit (FLOPs at the matmul "
          "peak + decoding passes at the memory's speed), and their ratio:")
    medians = {}
    for name, _ in FORWARD_SIDES:
        print(f"  {name}:")
        medians[name] = print_phase_limits([m for r in records if r["side"] == name for m in r["steps"]], "    ")
    (before, _), (after, _) = FORWARD_SIDES
    print("  after vs before: " + ", ".join(
        f"{ph} {medians[before][ph] / medians[after][ph]:.2f}x" for ph in (*PHASES, "step")
        if medians[after][ph] > 0))


# The update's log-prob plumbing, one change at a time (the GRPO config switches);
# "before" is the path every step took until these switches existed.
def _one_change_at_a_time(first: dict, changes: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Each path: the one before it with its change applied."""
    paths, switches = [], first
    for name, change in changes:
        switches = {**switches, **change}
        paths.append((name, switches))
    return paths


UPDATE_PATHS = _one_change_at_a_time(
    dict(shared_prompt_rows=False, logprob_chunk_tokens=0, reuse_old_logprobs=False, fused_lora=False,
         span_attention=False),
    [
        ("before: a row per (prompt, response), full logits, separate old pass", {}),
        ("+ shared-prompt rows (old, reference and update passes)", dict(shared_prompt_rows=True)),
        ("+ chunked response-only head (256 tokens)", dict(logprob_chunk_tokens=256)),
        ("+ first mini-batch's old log-probs from its own forward", dict(reuse_old_logprobs=True)),
        ("+ head chunks of 1024 tokens", dict(logprob_chunk_tokens=1024)),
        ("+ LoRA layers fused", dict(fused_lora=True)),
        ("+ span attention in shared-prompt rows (after)", dict(span_attention=True)),
    ],
)
SAME_KEYS = ("loss", "pg_loss", "kl", "clip_frac", "ratio_mean", "grad_norm")


class PeakRSS:
    """Peak resident memory of this process while the block runs (sampled every 20 ms)."""

    def __enter__(self):
        import threading

        self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    @staticmethod
    def _rss() -> int:
        import os

        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _watch(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


def compare_update_paths(trainer, batches, rounds: int, paths: list[int] | None = None) -> list[dict]:
    """Time the update phase of one step's trajectories under each of `UPDATE_PATHS` (or
    those numbered in `paths`).

    Every run starts from the same adapters, optimiser moments and schedule (restored
    before each), the paths alternate within each round, and each run's metrics are kept
    so that the losses can be compared. One untimed update runs first.
    """
    import copy
    import os

    import torch

    pol = trainer.policies
    weights = {key: pol.state_dict(key) for key in pol.weight_keys}
    optim = {k: copy.deepcopy(o.state_dict()) for k, o in trainer.optimizers.items()}
    sched = {k: copy.deepcopy(s.state_dict()) for k, s in trainer.schedulers.items()}
    base = trainer.cfg.grpo

    def restore():
        with torch.no_grad():
            for key, tensors in weights.items():
                params = dict(pol.named_trainable_parameters("code" if key == "shared" else key))
                for name, value in tensors.items():
                    params[name].copy_(value)
        for k, o in trainer.optimizers.items():
            o.load_state_dict(copy.deepcopy(optim[k]))
        for k, s in trainer.schedulers.items():
            s.load_state_dict(copy.deepcopy(sched[k]))

    restore()
    t = time.perf_counter()
    trainer._update(batches)  # untimed: a process's first update pays for allocations and kernel choices
    print(f"  warm-up update (untimed, the configured path): {time.perf_counter() - t:.1f}s", flush=True)
    runs = []
    for r in range(rounds):
        for i, (name, switches) in enumerate(UPDATE_PATHS):
            if paths is not None and i not in paths:
                continue
            restore()
            trainer.cfg = trainer.cfg.model_copy(update={"grpo": base.model_copy(update=switches)})
            load = os.getloadavg()[0]
            with PeakRSS() as rss:
                t = time.perf_counter()
                metrics = trainer._update(batches)
                seconds = time.perf_counter() - t
            runs.append({"path": i, "name": name, "round": r, "seconds": seconds, "load1": load,
                         "peak_rss_gib": rss.peak / 2**30, "metrics": metrics})
            print(f"  round {r + 1} path {i}: {seconds:7.1f}s (load {load:.1f}, peak RSS "
                  f"{rss.peak / 2**30:.2f} GiB)", flush=True)
    trainer.cfg = trainer.cfg.model_copy(update={"grpo": base})
    restore()
    return runs


def shaped_batches(trainer):
    """One step's trajectories in the preset's shape, without rolling out (`--update-only`).

    For each of the first `problems_per_step` training problems: `n_code` responses to
    its code prompt (its reference solution in a code block, cut to lengths spread from
    60% to 100% of `code.max_new_tokens`), and, as the one kept test group per problem,
    `n_test` responses to its white-box test prompt (its golden asserts, cut likewise).
    Advantages alternate +-1. Token counts are what a step of that shape trains on;
    the text only has to be realistic, not sampled.
    """
    from codea1.grpo import RoleBatch, StepBatches, Trajectory
    from codea1.rollout import code_messages, encode_prompts, test_messages

    cfg = trainer.cfg
    tok = trainer.policies.tokenizer
    problems = trainer.train_problems[: cfg.data.problems_per_step]
    code, test = RoleBatch("code", groups_total=len(problems)), RoleBatch("test", groups_total=len(problems))

    def responses(text: str, n: int, limit: int) -> list[list[int]]:
        ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        while len(ids) < limit:  # short references are repeated up to the limit
            ids = ids[:-1] + ids
        return [ids[: max(1, round(limit * (0.6 + 0.4 * k / max(n - 1, 1))))] for k in range(n)]

    for pi, p in enumerate(problems):
        [cp] = encode_prompts(tok, [code_messages(p)])
        for k, r in enumerate(responses(f"```python\n{p.reference}\n```", cfg.rollout.n_code,
                                        cfg.rollout.code.max_new_tokens)):
            code.trajectories.append(Trajectory(cp, r, 1.0 if k % 2 else -1.0))
            code.problems.append(pi)
        [tp] = encode_prompts(tok, [test_messages(p, code=p.reference, n_tests=cfg.judge.suite_size)])
        asserts = "\n".join(p.tests[: cfg.judge.suite_size]) or p.question
        for k, r in enumerate(responses(f"```python\n{asserts}\n```", cfg.rollout.n_test,
                                        cfg.rollout.test.max_new_tokens)):
            test.trajectories.append(Trajectory(tp, r, 1.0 if k % 2 else -1.0))
            test.problems.append(pi)
        code.groups_kept += 1
        test.groups_kept += 1
    return StepBatches(code, test)


def print_update_comparison(runs: list[dict]) -> None:
    import statistics

    print("\nupdate phase of the same trajectories, each path from the same state, interleaved:")
    first = min(r["path"] for r in runs)
    before = statistics.median(r["seconds"] for r in runs if r["path"] == first)
    roles = sorted({k.split("/")[1] for r in runs for k in r["metrics"] if k.startswith("update/")
                    and k.endswith("/loss")})
    for i, (name, _) in enumerate(UPDATE_PATHS):
        mine = [r for r in runs if r["path"] == i]
        if not mine:
            continue
        med = statistics.median(r["seconds"] for r in mine)
        fwd = sum(mine[0]["metrics"].get(f"update/{role}/forward_tokens", 0) for role in roles)
        print(f"  {i}. {name}")
        each = ", ".join(f"{r['seconds']:.1f}" for r in mine)
        print(f"     {med:7.1f}s median ({each}), "
              f"{before / med:4.2f}x vs path {first}; update forward tokens {fwd}; peak RSS "
              f"{max(r['peak_rss_gib'] for r in mine):.2f} GiB")
        for role in roles:
            m = mine[0]["metrics"]
            print(f"     {role}: " + ", ".join(f"{k} {m.get(f'update/{role}/{k}', float('nan')):.6g}"
                                            for k in SAME_KEYS))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cpu-demo")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override KEY=VALUE")
    ap.add_argument("--steps", type=int, default=1, help="training steps to time")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--compare-rounds", type=int, default=1,
                    help="rounds of the side-by-side update-path comparison on the last step's "
                         "trajectories (0: skip)")
    ap.add_argument("--compare-forward", type=int, default=0, metavar="ROUNDS",
                    help="ROUNDS rounds of --steps real steps with the sampler's forward before (transformers') "
                         "and after (codea1.lean_forward), alternating, from the same weights and seed; per "
                         "phase the seconds against the compute limit (0: skip)")
    ap.add_argument("--update-only", action="store_true",
                    help="no rollouts: compare the update paths on trajectories of the preset's "
                         "shape built from the bundled problems (see shaped_batches)")
    ap.add_argument("--skip-plain", action="store_true",
                    help="skip the plain batch-8 transformers generate baseline (about a minute)")
    ap.add_argument("--paths", type=lambda v: [int(x) for x in v.split(",")], default=None,
                    help="compare only these update paths, e.g. 3,4,5 (default: all; the first is 'before')")
    args = ap.parse_args()

    import torch

    from codea1.models import load_policies
    from codea1.train.config import load_config
    from codea1.train.loop import Trainer

    cfg = load_config(preset=args.preset, overrides=[*args.overrides, "logging.progress=none",
                                                    "logging.tensorboard=false"])
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    print(f"preset {args.preset}: {cfg.data.problems_per_step} problems x {cfg.rollout.n_code} codes x "
          f"{cfg.rollout.n_test} suites, max_new_tokens {cfg.rollout.code.max_new_tokens}/"
          f"{cfg.rollout.test.max_new_tokens}, torch threads {torch.get_num_threads()}", flush=True)
    figures: dict[str, object] = {"preset": args.preset, "overrides": args.overrides}

    # 1. matmul peak, in the dtype the run computes in: bf16 where the CPU has bf16 units;
    # elsewhere float32 (torch emulates bf16 there, minutes a product and no peak to speak of)
    from codea1.models import resolve_device, resolve_dtype

    compute = resolve_dtype(cfg.model.dtype, resolve_device(cfg.model.device))
    dname = str(compute).removeprefix("torch.")
    sizes = [(2048, 2048, 2048), (1024, 896, 4864), (1024, 4864, 896)]
    flops = matmul_flops(compute, sizes)
    fp32 = matmul_flops(torch.float32, sizes[:1]) if compute != torch.float32 else {}
    peak = max(flops.values())
    figures["compute_dtype"] = dname
    figures[f"matmul_{dname}_flops"] = flops
    figures["matmul_fp32_flops"] = fp32 or flops
    print(f"matmul {dname} GFLOP/s: " + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in flops.items())
          + (f"; fp32 {list(fp32.values())[0] / 1e9:.0f}" if fp32 else "")
          + ("" if compute == torch.bfloat16 else " (no bf16 units on this CPU: the run computes in "
             f"{dname}, the peak below is {dname}'s)"), flush=True)

    # 2. model and plain generate
    t = time.perf_counter()
    torch.manual_seed(cfg.seed)   # as the trainer does before it loads: the LoRA init does not
    policies = load_policies(cfg.model)   # depend on how many random matrices step 1 drew
    figures["load_s"] = time.perf_counter() - t
    print(f"model {cfg.model.name} ({cfg.model.mode}, {policies.dtype}) loaded in {figures['load_s']:.0f}s",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp), policies=policies)
        if args.update_only:
            try:
                batches = shaped_batches(trainer)
                for role, b in batches.updates().items():
                    lens = [(len(t.prompt_ids), len(t.completion_ids)) for t in b.trajectories]
                    print(f"{role}: {len(lens)} trajectories, prompt tokens "
                          f"{sorted({p for p, _ in lens})}, response tokens {[c for _, c in lens]}")
                runs = compare_update_paths(trainer, batches, max(args.compare_rounds, 1), args.paths)
            finally:
                trainer.close()
            print_update_comparison(runs)
            print("load average now " + ", ".join(f"{x:.1f}" for x in __import__("os").getloadavg()))
            if args.json:
                args.json.write_text(json.dumps({"update_paths": runs}, indent=2, default=float) + "\n")
            return
        if args.compare_forward:
            trainer.close()
            bandwidth = memory_bandwidth(compute)
            figures["memory_bytes_per_s"] = bandwidth
            print(f"memory read speed {bandwidth / 1e9:.1f} GB/s; matmul peak {peak / 1e9:.0f} GFLOP/s ({dname})",
                  flush=True)
            records = compare_forwards(cfg, policies, args.steps, args.compare_forward, peak, bandwidth)
            print_forward_comparison(records)
            print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
            if args.json:
                figures["forward_sides"] = records
                args.json.write_text(json.dumps(figures, indent=2, default=float) + "\n")
            return
        try:
            plain = {"tokens": 0, "seconds": 0.0, "tokens_per_s": 0.0}
            if not args.skip_plain:
                plain = plain_generate(policies, trainer.train_problems, cfg.rollout.code.max_new_tokens, cfg.seed)
                print(f"plain batch-8 generate: {plain['tokens']} tokens in {plain['seconds']:.1f}s = "
                      f"{plain['tokens_per_s']:.1f} tokens/s", flush=True)
            figures["plain_generate"] = plain

            # 3. training steps, each phase against its compute limit
            bandwidth = memory_bandwidth(compute)
            figures["memory_bytes_per_s"] = bandwidth
            print(f"memory read speed {bandwidth / 1e9:.1f} GB/s; matmul peak {peak / 1e9:.0f} GFLOP/s ({dname})",
                  flush=True)
            steps = []
            for _ in range(args.steps):
                result = trainer.run_step()
                m = result.metrics
                flops = sum(update_flops(policies, "code" if key == "shared" else key, b.trajectories, cfg.grpo)
                            for key, b in result.batches.updates().items())
                m["bench/update_flops"] = flops
                m["bench/limits"] = phase_limits(policies, m, peak, bandwidth)
                steps.append(m)
                print(f"step {trainer.step}: " + ", ".join(
                    f"{k[5:-2]} {m[k]:.1f}s" for k in ("time/code_rollout_s", "time/test_rollout_s",
                                                      "time/judge_s", "time/update_s", "time/step_s") if k in m)
                    + f"; rollout {m['rollout/tokens']} tokens at {m['rollout/tokens_per_s']:.1f}/s; "
                    f"update {flops / 1e12:.2f} TFLOP", flush=True)
            runs = []
            if args.compare_rounds:
                print("\ncomparing update paths on step %d's trajectories:" % trainer.step, flush=True)
                runs = compare_update_paths(trainer, result.batches, args.compare_rounds, args.paths)
        finally:
            trainer.close()

    def total(key):
        return sum(s.get(key, 0.0) for s in steps)

    step_s = total("time/step_s")
    gen_tokens = total("rollout/tokens")
    gen_s = total("time/code_rollout_s") + total("time/test_rollout_s")
    rollout_tps = gen_tokens / gen_s if gen_s else 0.0
    update_s = total("time/update_s")
    update_fps = total("bench/update_flops") / update_s if update_s else 0.0
    judge_share = total("time/judge_s") / step_s if step_s else 0.0
    figures.update({
        "steps": steps, "rollout_tokens_per_s": rollout_tps, "update_flops_per_s": update_fps,
        "matmul_peak": peak, "judge_share": judge_share,
        "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    })
    # the machine may be shared: measure the peak again and keep the best figure
    again = matmul_flops(compute, sizes)
    peak = max(peak, *again.values())
    figures[f"matmul_{dname}_flops_after"] = again
    figures["matmul_peak"] = peak
    ratio = rollout_tps / plain["tokens_per_s"] if plain["tokens_per_s"] else 0.0
    print("\nphase seconds per step (mean of %d):" % len(steps))
    for key in ("code_rollout", "test_rollout", "judge", "update"):
        v = total(f"time/{key}_s") / len(steps)
        print(f"  {key:<13} {v:8.1f}s  {v / (step_s / len(steps)):6.1%}")
    print(f"  {'step':<13} {step_s / len(steps):8.1f}s")
    import os
    import statistics

    print("\nper phase, median over the steps: seconds, compute limit (FLOPs at the matmul peak + "
          "decoding passes at the memory's speed), and their ratio:")
    print_phase_limits(steps)
    median_step = statistics.median(s["time/step_s"] for s in steps)
    print(f"median step {median_step:.1f}s over {len(steps)} step(s); load average now "
          + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if runs:
        print_update_comparison(runs)
        med = lambda i: statistics.median(r["seconds"] for r in runs if r["path"] == i)  # noqa: E731
        last = steps[-1]
        rest = last["time/step_s"] - last["time/update_s"]
        first, last_path = min(r["path"] for r in runs), max(r["path"] for r in runs)
        print(f"\nlast step: {rest:.1f}s outside the update; with path {first}'s update "
              f"{rest + med(first):.1f}s, with path {last_path}'s {rest + med(last_path):.1f}s")
        figures["update_paths"] = runs
    verdict = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
    if plain["tokens_per_s"]:
        print(f"\nrollout tokens/s {rollout_tps:.1f} vs plain batch-8 generate {plain['tokens_per_s']:.1f}: "
              f"{ratio:.2f}x (target >= 2x) {verdict(ratio >= 2)}")
    print(f"update {update_fps / 1e9:.1f} GFLOP/s vs {dname} matmul peak {peak / 1e9:.1f}: "
          f"{update_fps / peak:.1%} (target >= 75%) {verdict(update_fps >= 0.75 * peak)}")
    print(f"judge {judge_share:.1%} of a step (target < 10%) {verdict(judge_share < 0.10)}")
    print(f"peak resident memory {figures['max_rss_gib']:.2f} GiB (target < 8 GiB) "
          f"{verdict(figures['max_rss_gib'] < 8)}")
    print(f"matmul {dname} GFLOP/s after the steps: " + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in again.items())
          + f"; peak used = best of both runs: {peak / 1e9:.0f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
