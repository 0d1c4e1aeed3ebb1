"""Steps per second of the tiny-model Code-A1 loop on 1 and 2 CPU ranks (gloo), side by side.

    python benchmarks/scaling.py [--steps 4] [--problems 8] [--mode lora-shared|full]

Each rank is a process joined through torchrun's variables (as `torchrun --nproc-per-node
2 -m codea1.cli train ...` would start it) running `codea1.train.train` on a tiny random
model (no download) over the bundled problems. The step time is rank 0's `time/step_s`
(the slowest rank's), the communication time `time/comm_s` (seconds inside collectives:
stop agreement, Mistake Book exchange, mini-batch layout, gradient and statistic sums,
metric gathering; waiting for a slower rank counts here too). The first step (warm-up)
is left out. With 2 ranks each step's problems are split in two, so on a machine with at
least 2 free cores the step time should fall towards half; on a busy 2-core machine the
ranks share the cores with each other and with the sandbox workers.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_model.py: the tiny random-weight model


def _overrides(model: str, args) -> list[str]:
    return [f"model.name={model}", "model.dtype=float32", "model.lora_r=4", f"model.mode={args.mode}",
            f"steps={args.steps}", "data.train=bundled", "data.heldout=null",
            f"data.problems_per_step={args.problems}", "rollout.n_code=4", "rollout.n_test=2",
            f"rollout.code.max_new_tokens={args.tokens}", f"rollout.test.max_new_tokens={args.tokens}",
            "validation.every=0", "grpo.warmup_steps=1", "grpo.mini_batches=2", "judge.workers=1",
            f"checkpoint.every={args.steps}", "logging.progress=none", "logging.tensorboard=false",
            "threads=1"]


def _rank(rank: int, world: int, port: int, model: str, run_dir: str, args) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch

    from codea1.train.config import load_config
    from codea1.train.loop import train

    torch.set_num_threads(1)
    train(load_config(preset="cpu-demo", overrides=_overrides(model, args)), run_dir)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(world: int, model: str, root: Path, args) -> dict[str, float]:
    run_dir = root / f"ranks-{world}"
    ctx = mp.get_context("spawn")
    port = _free_port()
    started = time.perf_counter()
    procs = [ctx.Process(target=_rank, args=(r, world, port, model, str(run_dir), args)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    wall = time.perf_counter() - started
    if any(p.exitcode != 0 for p in procs):
        sys.exit(f"the {world}-rank run failed (exit codes {[p.exitcode for p in procs]})")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    timed = rows[1:] or rows
    step_s = sum(r["time/step_s"] for r in timed) / len(timed)
    comm_s = sum(r.get("time/comm_s", 0.0) for r in timed) / len(timed)
    update_s = sum(r.get("time/update_s", 0.0) for r in timed) / len(timed)
    return {"ranks": world, "steps_per_s": 1.0 / step_s, "step_s": step_s, "comm_s": comm_s,
            "update_s": update_s, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--problems", type=int, default=8, help="problems a step (split among the ranks)")
    ap.add_argument("--tokens", type=int, default=24, help="new tokens per completion")
    ap.add_argument("--mode", default="lora-shared", choices=["lora-shared", "full"])
    args = ap.parse_args()
    from tiny_model import tiny_test_model

    with tempfile.TemporaryDirectory(prefix="codea1-scaling-") as tmp:
        root = Path(tmp)
        model = str(tiny_test_model(root / "model"))
        results = [run(w, model, root, args) for w in (1, 2)]
    print(f"tiny model, {args.mode}, {args.problems} problems a step, {args.steps} steps "
          f"(first left out), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'ranks':>5} {'steps/s':>9} {'step s':>8} {'comm s/step':>12} {'update s':>9} {'wall s':>8}")
    for r in results:
        print(f"{r['ranks']:>5} {r['steps_per_s']:>9.3f} {r['step_s']:>8.2f} {r['comm_s']:>12.3f} "
              f"{r['update_s']:>9.2f} {r['wall_s']:>8.1f}")
    print(f"speed-up with 2 ranks: {results[1]['steps_per_s'] / results[0]['steps_per_s']:.2f}x")


if __name__ == "__main__":
    main()
