"""Seconds per phase of a real Code-A1 training step, and how fast each phase is.

    python benchmarks/train_step.py                       # the cpu-demo preset, 1 step
    python benchmarks/train_step.py --steps 2 --set rollout.n_test=2

Measured side by side in one run, on this machine:

1. this machine's bf16 (and fp32) matmul FLOP/s (square GEMMs and the model's own
   shapes; the best bf16 figure is the "peak");
2. plain batch-8 `transformers` `generate` of the model (adapters off) on 8 code prompts
   (sampling, the preset's max_new_tokens): generated tokens per second (completion
   tokens up to and including the stop token);
3. real training steps of the preset (`Trainer.run_step`): seconds per phase (code
   rollout, test rollout, judge, update), rollout tokens/s, and the update phase's
   achieved FLOP/s, counted from the model's shapes (see `update_flops`).

Targets (printed with PASS/MISS): rollouts >= 2x plain generate tokens/s; update >= 40%
of the bf16 matmul peak; judge < 10% of a step.
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


def update_flops(policies, role: str, trajectories) -> float:
    """Model FLOPs of one policy's update phase: old log-probs, reference log-probs, and a
    forward + backward pass of every trajectory (the work the math needs, not wasted work).

    Forward of a sequence of T tokens, R of them response: 2*T*P_linear + 2*R*P_head
    (logits only for the response) + 2*L*H*d*T^2 (causal attention, QK^T and AV).
    Backward: frozen matmuls need input gradients only (1x forward), trainable ones input
    and weight gradients (2x), the head 1x (its input), attention 2x.
    """
    with policies.role(role) as model:
        frozen, trainable, head = _linear_params(model)
        cfg = model.config
    layers = cfg.num_hidden_layers
    attn_width = cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    total = 0.0
    for s in trajectories:
        if not s.completion_ids:
            continue
        t = len(s.prompt_ids) + len(s.completion_ids)
        r = len(s.completion_ids)
        lin_f, lin_t, hd, att = 2 * t * frozen, 2 * t * trainable, 2 * r * head, 2 * layers * attn_width * t * t
        forward = lin_f + lin_t + hd + att
        backward = lin_f + 2 * lin_t + hd + 2 * att
        total += 3 * forward + backward  # old, reference, training forward; training backward
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cpu-demo")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override KEY=VALUE")
    ap.add_argument("--steps", type=int, default=1, help="training steps to time")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
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

    # 1. matmul peak
    sizes = [(2048, 2048, 2048), (1024, 896, 4864), (1024, 4864, 896)]
    bf16 = matmul_flops(torch.bfloat16, sizes)
    fp32 = matmul_flops(torch.float32, sizes[:1])
    peak = max(bf16.values())
    figures["matmul_bf16_flops"] = bf16
    figures["matmul_fp32_flops"] = fp32
    print("matmul bf16 GFLOP/s: " + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in bf16.items())
          + f"; fp32 {list(fp32.values())[0] / 1e9:.0f}", flush=True)

    # 2. model and plain generate
    t = time.perf_counter()
    policies = load_policies(cfg.model)
    figures["load_s"] = time.perf_counter() - t
    print(f"model {cfg.model.name} ({cfg.model.mode}, {policies.dtype}) loaded in {figures['load_s']:.0f}s",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp), policies=policies)
        try:
            plain = plain_generate(policies, trainer.train_problems, cfg.rollout.code.max_new_tokens, cfg.seed)
            figures["plain_generate"] = plain
            print(f"plain batch-8 generate: {plain['tokens']} tokens in {plain['seconds']:.1f}s = "
                  f"{plain['tokens_per_s']:.1f} tokens/s", flush=True)

            # 3. training steps
            steps = []
            for _ in range(args.steps):
                m = trainer.run_step()
                flops = sum(update_flops(policies, "code" if key == "shared" else key, b.trajectories)
                            for key, b in trainer._last_batches.items() if not key.startswith("_"))
                m["bench/update_flops"] = flops
                steps.append(m)
                print(f"step {trainer.step}: " + ", ".join(
                    f"{k[5:-2]} {m[k]:.1f}s" for k in ("time/code_rollout_s", "time/test_rollout_s",
                                                      "time/judge_s", "time/update_s", "time/step_s") if k in m)
                    + f"; rollout {m['rollout/tokens']} tokens at {m['rollout/tokens_per_s']:.1f}/s; "
                    f"update {flops / 1e12:.2f} TFLOP", flush=True)
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
        "matmul_peak_bf16": peak, "judge_share": judge_share,
        "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    })
    # the machine may be shared: measure the peak again and keep the best figure
    again = matmul_flops(torch.bfloat16, sizes)
    peak = max(peak, *again.values())
    figures["matmul_bf16_flops_after"] = again
    figures["matmul_peak_bf16"] = peak
    ratio = rollout_tps / plain["tokens_per_s"] if plain["tokens_per_s"] else 0.0
    print("\nphase seconds per step (mean of %d):" % len(steps))
    for key in ("code_rollout", "test_rollout", "judge", "update"):
        v = total(f"time/{key}_s") / len(steps)
        print(f"  {key:<13} {v:8.1f}s  {v / (step_s / len(steps)):6.1%}")
    print(f"  {'step':<13} {step_s / len(steps):8.1f}s")
    verdict = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
    print(f"\nrollout tokens/s {rollout_tps:.1f} vs plain batch-8 generate {plain['tokens_per_s']:.1f}: "
          f"{ratio:.2f}x (target >= 2x) {verdict(ratio >= 2)}")
    print(f"update {update_fps / 1e9:.1f} GFLOP/s vs bf16 matmul peak {peak / 1e9:.1f}: "
          f"{update_fps / peak:.1%} (target >= 40%) {verdict(update_fps >= 0.4 * peak)}")
    print(f"judge {judge_share:.1%} of a step (target < 10%) {verdict(judge_share < 0.10)}")
    print(f"peak resident memory {figures['max_rss_gib']:.2f} GiB (target < 8 GiB) "
          f"{verdict(figures['max_rss_gib'] < 8)}")
    print("matmul bf16 GFLOP/s after the steps: " + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in again.items())
          + f"; peak used = best of both runs: {peak / 1e9:.0f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
