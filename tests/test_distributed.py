"""Several ranks on gloo (CPU): a 2-rank run equals a 1-rank run; a lost rank stops the run.

Each rank is a spawned process that joins the process group through the variables
torchrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and calls `train` as
`codea1 train` does; the tiny model's completions are scripted per prompt stream as in
tests/test_train_loop.py, so rewards, Mistake Book and updates are real.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import socket
import time
from pathlib import Path

import pytest
import torch

from codea1.mistakes import MistakeBook
from codea1.train.config import load_config
from codea1.train.loop import train
from codea1.train.metrics import read_metrics
from test_train_loop import _weights
from tiny_run import HELDOUT, PROBLEMS, make_scripted
from tiny_run import problems as _problems

torch.set_num_threads(1)

COMPARED = ("code/reward_mean", "code/reward_std", "test/reward_mean", "test/reward_std",
            "judge/code_valid_rate", "mistakes/size", "mistakes/added", "mistakes/removed",
            "rollout/code_samples", "rollout/test_samples", "rollout/code_tokens",
            "update/code/sequences", "update/test/sequences", "update/code/tokens")
# step 3 validates: 3 held-out problems, rank 0 validates 2 and rank 1 one (uneven on purpose)
VALIDATED = ("val/problems", "val/code_pass_rate", "val/code_golden_rate", "val/test/avg@2", "val/test/pass@2",
             "val/test_valid_ratio", "val/test_pass_on_reference", "val/test_kill_rate", "val/test_wrong_candidates")


def _overrides(tiny_dist, mode):
    return [f"model.name={tiny_dist['model']}", "model.dtype=float32", "model.lora_r=4", f"model.mode={mode}",
            "steps=3", f"data.train={tiny_dist['train']}", f"data.heldout={tiny_dist['heldout']}",
            # 3 problems a step: rank 0 holds slots 0 and 2, rank 1 slot 1 (uneven on purpose)
            "data.problems_per_step=3", "rollout.n_code=4", "rollout.n_test=2",
            "rollout.code.max_new_tokens=6", "rollout.test.max_new_tokens=6",
            # validation after step 3 only (not at step 0: the kill test counts rank 1's rollouts)
            "validation.every=3", "validation.at_start=false", "validation.n_code=2", "validation.n_test=2", "validation.test_problems=2",
            "validation.sampling.temperature=1.0", "validation.sampling.max_new_tokens=6",
            "validation.sampling.batch_size=2", "validation.timeout_s=10",
            "grpo.lr=1e-3", "grpo.warmup_steps=1", "grpo.micro_batch_tokens=512", "grpo.mini_batches=2",
            "judge.workers=1", "checkpoint.every=1", "checkpoint.keep=10", "distributed.timeout_s=60",
            "logging.progress=none", "logging.tensorboard=false", "threads=1"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, tiny_dist: dict, mode: str, run_dir: str, resume: bool,
          kill_at: int | None, report: str) -> None:
    """One rank: the scripted sampler, the launcher's variables, then `train`."""
    import codea1.engines.hf_engine as hf_engine

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    fake = make_scripted(hf_engine.generate, tiny_dist["problems"], {"junk": 0})
    calls = {"n": 0}

    def generate(*args, **kwargs):
        calls["n"] += 1
        if kill_at is not None and calls["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)   # this rank dies mid-step, no goodbye
        return fake(*args, **kwargs)

    hf_engine.generate = generate
    out: dict = {"rank": rank}
    try:
        cfg = None if resume else load_config(preset="cpu-demo", overrides=_overrides(tiny_dist, mode))
        result = train(cfg, run_dir, resume=resume)
        out.update(step=result.step, stopped=result.stopped)
    except BaseException as exc:  # reported to the test, which asserts on it
        out["error"] = f"{type(exc).__name__}: {exc}"
    Path(report).write_text(json.dumps(out))


def _launch(tmp_path, tiny_dist, mode, run_dir, world=2, resume=False, kill=None, limit=240.0):
    """Run `world` ranks; returns each rank's (exit code, report)."""
    ctx = mp.get_context("spawn")
    port = _free_port()
    procs, reports = [], []
    for r in range(world):
        report = tmp_path / f"report-{r}-{time.monotonic_ns()}.json"
        kill_at = kill[1] if kill is not None and kill[0] == r else None
        p = ctx.Process(target=_rank, args=(r, world, port, tiny_dist, mode, str(run_dir), resume, kill_at, str(report)))
        p.start()
        procs.append(p)
        reports.append(report)
    deadline = time.monotonic() + limit
    for p in procs:
        p.join(max(1.0, deadline - time.monotonic()))
    hung = [i for i, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
    assert not hung, f"ranks {hung} still running after {limit} s: the run hangs"
    return [(p.exitcode, json.loads(rep.read_text()) if rep.exists() else None) for p, rep in zip(procs, reports)]


@pytest.fixture(scope="module")
def tiny_dist(tmp_path_factory):
    from codea1.data import save_problems
    from tiny_model import tiny_test_model

    root = tmp_path_factory.mktemp("tiny-dist")
    model = tiny_test_model(root / "model")
    train_path = root / "train.jsonl"
    save_problems(_problems(PROBLEMS[:4], "train"), train_path)   # no over-long prompt: fast
    heldout_path = root / "heldout.jsonl"
    save_problems(_problems(HELDOUT + PROBLEMS[1:3], "heldout"), heldout_path)
    return {"model": str(model), "train": str(train_path), "heldout": str(heldout_path),
            "problems": _problems(PROBLEMS + HELDOUT, "x")}


def _one_rank(tmp_path, tiny_dist, mode, name="one"):
    """The reference: the same run in this process (one rank), same scripted sampler."""
    import codea1.engines.hf_engine as hf_engine

    real = hf_engine.generate
    hf_engine.generate = make_scripted(real, tiny_dist["problems"], {"junk": 0})
    try:
        train(load_config(preset="cpu-demo", overrides=_overrides(tiny_dist, mode)), tmp_path / name)
    finally:
        hf_engine.generate = real
    return tmp_path / name


def _book(run: Path):
    with MistakeBook(run / "mistakes.sqlite", readonly=True) as book:
        return [(e.problem_id, e.test, e.frequency) for e in book.entries()]


def _assert_same_run(a: Path, b: Path, atol: float) -> None:
    ra, rb = read_metrics(a), read_metrics(b)
    assert [r["step"] for r in ra] == [r["step"] for r in rb] == [1, 2, 3]
    for x, y in zip(ra, rb):
        for key in COMPARED:
            assert key in x and key in y, (x["step"], key)   # a renamed metric fails, never skips
            assert x[key] == pytest.approx(y[key], rel=1e-9, abs=1e-9), (x["step"], key)
        # validation: every rank its share with its own seeds, gathered: the one-rank figures
        for key in VALIDATED:
            assert (key in x) == (key in y) == (x["step"] == 3), (x["step"], key)
            if key in x:
                assert x[key] == pytest.approx(y[key], rel=1e-9, abs=1e-9, nan_ok=True), (x["step"], key)
        # the update's figures are sums over ranks: equal up to the order of float additions
        for key in ("update/code/loss", "update/code/kl", "update/code/grad_norm"):
            assert key in x and key in y, (x["step"], key)
            assert x[key] == pytest.approx(y[key], rel=1e-4, abs=1e-6), (x["step"], key)
    assert _book(a) == _book(b) and _book(a)
    assert (a / "samples.jsonl").read_text() == (b / "samples.jsonl").read_text()
    for step in (1, 3):
        wa, wb = _weights(a / "checkpoints" / f"step-{step}"), _weights(b / "checkpoints" / f"step-{step}")
        assert wa.keys() == wb.keys()
        for f in wa:
            assert wa[f].keys() == wb[f].keys()
            for k in wa[f]:
                torch.testing.assert_close(wa[f][k], wb[f][k], atol=atol, rtol=1e-4, msg=f"{step} {f} {k}")
    # the weights moved, so equal weights mean equal updates
    w1, w3 = _weights(a / "checkpoints" / "step-1"), _weights(a / "checkpoints" / "step-3")
    assert any(not torch.equal(w1[f][k], w3[f][k]) for f in w1 for k in w1[f])


@pytest.mark.parametrize("mode, atol", [("lora-shared", 1e-6), ("full", 1e-5)], ids=["lora_shared", "full_fsdp2"])
def test_two_ranks_equal_one_rank(tmp_path, tiny_dist, mode, atol):
    """LoRA gradients all-reduced, or full weights sharded with FSDP2: the same run as one rank."""
    one = _one_rank(tmp_path, tiny_dist, mode)
    results = _launch(tmp_path, tiny_dist, mode, tmp_path / "two")
    for code, report in results:
        assert code == 0 and report and "error" not in report and report["step"] == 3, results
    _assert_same_run(one, tmp_path / "two", atol=atol)
    # seconds in collectives: some every step on two ranks, none recorded on one
    rows = read_metrics(tmp_path / "two")
    assert all(0 < r["time/comm_s"] < r["time/step_s"] for r in rows), [r["time/comm_s"] for r in rows]
    assert not any("time/comm_s" in r for r in read_metrics(one))


def test_killed_rank_stops_every_rank_and_resume_is_exact(tmp_path, tiny_dist):
    """Rank 1 is SIGKILLed in step 2's test rollout: rank 0 stops (no hang) with one clear
    error; resuming on 2 ranks from step 1's checkpoint ends where an unbroken run ends."""
    one = _one_rank(tmp_path, tiny_dist, "lora-shared")
    run = tmp_path / "broken"
    results = _launch(tmp_path, tiny_dist, "lora-shared", run, kill=(1, 4), limit=150.0)
    (code0, rep0), (code1, rep1) = results
    assert code1 == -signal.SIGKILL and rep1 is None
    assert rep0 is not None and "RankLost" in rep0.get("error", ""), rep0
    assert f"codea1 train --resume {run}" in rep0["error"]   # the run's own path, not a placeholder
    assert sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.startswith("step-")) == ["step-1"]
    results = _launch(tmp_path, tiny_dist, "lora-shared", run, resume=True)
    for code, report in results:
        assert code == 0 and report and "error" not in report and report["step"] == 3, results
    _assert_same_run(one, run, atol=1e-6)
