"""The first thing to run on a GPU machine: two real training steps in each weight mode, then
the sandbox's self-check, in a few minutes, with nothing downloaded.

    pip install -e . --no-deps        # over whatever torch the machine has
    python benchmarks/gpu_smoke.py    # one CUDA GPU: bf16, NCCL
    python benchmarks/gpu_smoke.py --cpu-dry-run   # the same path on the CPU: float32, gloo

What runs, each phase in its own process (its own CUDA context, peak memory and process group):

1. `lora-shared`: `codea1.train.loop.train` for 2 steps (Code-A1 mode a1, the hf engine:
   rollouts of both roles, the sandboxed judge, the Mistake Book, the GRPO update, a
   checkpoint) on a tiny random Qwen2 built on the spot (`tests/tiny_model.py`),
   in bf16 on `cuda`.
2. `full-fsdp2`: the same 2 steps with two full-weight models sharded by FSDP2 over a
   one-rank NCCL process group. A run takes its multi-GPU code paths (FSDP2 with float32
   master weights and bf16 compute, whole weights gathered for sampling, gradient and
   metric collectives, sharded checkpoints) only when WORLD_SIZE > 1; this check has one
   GPU, so it makes its one rank take them (`Ranks.enabled` forced on).
3. `codea1 sandbox check`: which protections hold here, and one attack per class.

A random model writes junk, which every judge scores 0, and a group of equal rewards
teaches nothing: so in each group one sample is replaced by the problem's reference
(code role) or its golden tests (test role), and the update gets a gradient.

Printed per phase: the loss and gradient norm of each role at each step, rollout and
update tokens/s, peak GPU memory (peak RSS on the CPU), seconds. Exit status 0 when every
phase trained both steps with finite losses and the sandbox check passed; 2 when there is
no CUDA device (unless --cpu-dry-run); 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # tiny_model.py: the tiny random-weight model

PHASES = ("lora-shared", "full-fsdp2")
ROLES = ("code", "test")


def plant_answers(problems) -> None:
    """Replace the first sample of every group by the problem's reference (code) or golden
    tests (test), found by its function's name in the prompt, so that rewards differ."""
    import codea1.engines.hf_engine as hf_engine

    real = hf_engine.generate

    def generate(policies, role, prompts, n=1, sampling=None, **kwargs):
        out = real(policies, role, prompts, n=n, sampling=sampling, **kwargs)
        tok = policies.tokenizer
        eos = tok.convert_tokens_to_ids("<|im_end|>")
        for prompt, group in zip(prompts, out):
            text = tok.decode(prompt) if prompt and isinstance(prompt[0], int) else str(prompt)
            problem = next((p for p in problems if f"def {p.entry_point}(" in text), None)
            if problem is None or not group:
                continue
            answer = (f"```python\n{problem.reference}```" if role == "code"
                      else "```python\n" + "\n".join(problem.tests) + "\n```")
            ids = tok(answer, add_special_tokens=False)["input_ids"]
            first = group[0]
            first.text, first.completion_ids, first.finished, first.truncated = answer, ids + [eos], True, False
        return out

    hf_engine.generate = generate


def start_one_rank(backend: str) -> None:
    """A one-rank process group, as torchrun would set it up."""
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if backend == "nccl":
        import torch

        torch.cuda.set_device(0)
    dist.init_process_group(backend)
    from codea1.train import distributed

    distributed.Ranks.enabled = property(lambda self: True)   # the multi-GPU code paths, on one rank


def count_sharding() -> list:
    """Record each `shard_policies` call (the proof that FSDP2 wrapped the policies)."""
    from codea1.train import distributed

    calls: list = []
    real = distributed.shard_policies

    def shard(policies, ranks, compute_dtype):
        real(policies, ranks, compute_dtype)
        calls.append({"world": ranks.world, "compute_dtype": str(compute_dtype).removeprefix("torch."),
                      "master_dtype": str(next(policies.module("code").parameters()).dtype).removeprefix("torch.")})

    distributed.shard_policies = shard
    return calls


def phase_overrides(phase: str, model_dir: Path, cuda: bool, max_new_tokens: int, problems: int) -> list[str]:
    mode = "lora-shared" if phase == "lora-shared" else "full"
    return [
        f"model.name={model_dir}", f"model.mode={mode}", "model.lora_r=8",
        f"model.dtype={'bfloat16' if cuda else 'float32'}", f"model.device={'cuda' if cuda else 'cpu'}",
        "steps=2", "data.train=bundled:demo", "data.heldout=null", f"data.problems_per_step={problems}",
        "rollout.engine=hf", "rollout.n_code=4", "rollout.n_test=2",
        f"rollout.code.max_new_tokens={max_new_tokens}", f"rollout.test.max_new_tokens={max_new_tokens}",
        "rollout.code.max_prompt_tokens=896", "rollout.test.max_prompt_tokens=896",
        "grpo.lr=1e-3", "grpo.warmup_steps=1", "grpo.filter_zero_variance=false",
        "validation.every=0", "judge.workers=2", "checkpoint.every=1",
        "logging.progress=none", "logging.tensorboard=false",
        f"distributed.backend={'nccl' if cuda else 'gloo'}", "distributed.timeout_s=120",
    ]


def run_phase(phase: str, model_dir: Path, run_dir: Path, cuda: bool, max_new_tokens: int,
              problems: int) -> dict:
    """Two training steps of `phase` in this process; the figures of each step."""
    import torch

    from codea1.data import bundled_problems
    from codea1.train.config import load_config
    from codea1.train.loop import train
    from codea1.train.metrics import read_metrics

    sharded = count_sharding()
    if phase == "full-fsdp2":
        start_one_rank("nccl" if cuda else "gloo")
    plant_answers(bundled_problems("demo"))
    cfg = load_config(preset="cpu-demo", overrides=phase_overrides(phase, model_dir, cuda, max_new_tokens, problems))
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    result = train(cfg, run_dir)
    seconds = time.perf_counter() - started
    if cuda:
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if phase == "full-fsdp2":
        import torch.distributed as dist

        dist.destroy_process_group()
    steps = []
    for row in read_metrics(run_dir):
        update_tokens = sum(row.get(f"update/{r}/forward_tokens", 0) for r in ROLES)
        update_s = row.get("time/update_s", 0.0)
        steps.append({
            "step": row["step"],
            **{f"{r}_loss": row.get(f"update/{r}/loss") for r in ROLES},
            **{f"{r}_grad_norm": row.get(f"update/{r}/grad_norm") for r in ROLES},
            **{f"{r}_reward": row.get(f"{r}/reward_mean") for r in ROLES},
            "rollout_tokens_per_s": row.get("rollout/tokens_per_s", 0.0),
            "update_tokens_per_s": update_tokens / update_s if update_s > 0 else 0.0,
        })
    return {"phase": phase, "steps_done": result.step, "steps": steps, "seconds": seconds, "fsdp2": sharded,
            "peak_mib": peak, "peak_kind": "GPU (max_memory_allocated)" if cuda else "RSS",
            "device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__}


def healthy(report: dict) -> list[str]:
    """What is wrong with a phase's report (empty when it trained both steps)."""
    problems = []
    if report.get("steps_done") != 2 or len(report.get("steps", [])) != 2:
        problems.append(f"trained {report.get('steps_done')} of 2 steps")
    if (report.get("phase") == "full-fsdp2") != bool(report.get("fsdp2")):
        problems.append(f"FSDP2 sharding calls: {report.get('fsdp2')}")
    for s in report.get("steps", []):
        for role in ROLES:
            loss = s.get(f"{role}_loss")
            if loss is None or not math.isfinite(loss):
                problems.append(f"step {s['step']}: {role} loss {loss}")
    return problems


def print_phase(report: dict) -> None:
    print(f"\n{report['phase']}: {report['device']}, torch {report['torch']}, {report['seconds']:.1f} s, "
          f"peak {report['peak_kind']} {report['peak_mib']:.0f} MiB")
    for call in report["fsdp2"]:
        print(f"  FSDP2: {call['world']} rank, {call['master_dtype']} master weights, {call['compute_dtype']} compute")
    print(f"  {'step':>4} {'code loss':>10} {'test loss':>10} {'code |g|':>9} {'test |g|':>9} "
          f"{'code rew':>8} {'test rew':>8} {'rollout tok/s':>13} {'update tok/s':>12}")
    fmt = lambda v, w, p: f"{'-':>{w}}" if v is None else f"{v:>{w}.{p}f}"  # noqa: E731
    for s in report["steps"]:
        print(f"  {s['step']:>4} {fmt(s['code_loss'], 10, 4)} {fmt(s['test_loss'], 10, 4)} "
              f"{fmt(s['code_grad_norm'], 9, 3)} {fmt(s['test_grad_norm'], 9, 3)} {fmt(s['code_reward'], 8, 2)} "
              f"{fmt(s['test_reward'], 8, 2)} {s['rollout_tokens_per_s']:>13.0f} {s['update_tokens_per_s']:>12.0f}")


def sandbox_check(timeout_s: float) -> int:
    """`codea1 sandbox check`, printed as it is; its exit status."""
    print("\ncodea1 sandbox check:")
    env = {**os.environ, "COLUMNS": "160"}
    try:
        done = subprocess.run([sys.executable, "-c", "from codea1.cli import main; main()", "sandbox", "check"],
                              capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        print(f"  did not finish within {timeout_s:.0f} s")
        return 1
    print(done.stdout.rstrip())
    if done.stderr.strip():
        print(done.stderr.rstrip())
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="run the same phases on the CPU (float32, gloo): for machines without a GPU")
    ap.add_argument("--max-new-tokens", type=int, default=64, help="tokens per completion (default 64)")
    ap.add_argument("--problems", type=int, default=2, help="problems a step (default 2)")
    ap.add_argument("--hidden-size", type=int, default=256, help="the tiny model's width (default 256)")
    ap.add_argument("--phase-timeout", type=float, default=240.0, help="seconds one phase may take")
    ap.add_argument("--skip-sandbox", action="store_true", help="do not run `codea1 sandbox check`")
    ap.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    ap.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)   # one phase, in a child process
    ap.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cuda = not args.cpu_dry_run

    if args.phase is not None:   # the child: one phase, its report as JSON
        if not cuda:
            import torch

            torch.set_num_threads(1)
        report = run_phase(args.phase, args.model, args.run_dir, cuda, args.max_new_tokens, args.problems)
        args.report.write_text(json.dumps(report))
        return 0

    import torch

    if cuda and not torch.cuda.is_available():
        print(f"gpu_smoke: no CUDA device here (torch {torch.__version__}, torch.cuda.is_available() is False); "
              "run it on a GPU machine, or add --cpu-dry-run to run the same path on the CPU", file=sys.stderr)
        return 2
    from tiny_model import tiny_test_model

    started = time.perf_counter()
    reports, failures = [], []
    with tempfile.TemporaryDirectory(prefix="codea1-gpu-smoke-") as tmp:
        model = tiny_test_model(Path(tmp) / "model", hidden_size=args.hidden_size, layers=2)
        print(f"gpu_smoke: tiny random Qwen2 (hidden {args.hidden_size}, 2 layers) at {model}; "
              f"{'CUDA, bf16, NCCL' if cuda else 'CPU dry run, float32, gloo'}")
        for phase in PHASES:
            report_path = Path(tmp) / f"{phase}.json"
            cmd = [sys.executable, __file__, "--phase", phase, "--model", str(model), "--run-dir",
                   str(Path(tmp) / phase), "--report", str(report_path), "--max-new-tokens", str(args.max_new_tokens),
                   "--problems", str(args.problems)] + (["--cpu-dry-run"] if not cuda else [])
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.phase_timeout)
            except subprocess.TimeoutExpired:
                failures.append(f"{phase}: did not finish within {args.phase_timeout:.0f} s")
                continue
            if done.returncode != 0 or not report_path.is_file():
                tail = (done.stderr or done.stdout).strip().splitlines()[-12:]
                failures.append(f"{phase}: exit {done.returncode}\n    " + "\n    ".join(tail))
                continue
            report = json.loads(report_path.read_text())
            reports.append(report)
            print_phase(report)
            failures += [f"{phase}: {p}" for p in healthy(report)]
    sandbox_status = None if args.skip_sandbox else sandbox_check(args.phase_timeout)
    if sandbox_status:
        failures.append(f"codea1 sandbox check: exit {sandbox_status}")
    total = time.perf_counter() - started
    if args.json is not None:
        args.json.write_text(json.dumps({"phases": reports, "sandbox_check_exit": sandbox_status,
                                         "failures": failures, "seconds": total}, indent=2) + "\n")
    print(f"\ngpu_smoke: {'FAILED' if failures else 'passed'} in {total:.0f} s")
    for f in failures:
        print(f"  {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
