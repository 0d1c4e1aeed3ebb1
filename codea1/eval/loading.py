"""What both evaluations share: reading the problem set and loading the model to test.

``--data`` is any file the loaders read, or ``bundled`` / ``bundled:train`` /
``bundled:heldout`` for the problems shipped with the project. ``--model`` is a model
name or path (``codea1.models.resolve_model``), or a saved policies checkpoint (a
directory with ``policies.json``, e.g. a run's ``checkpoints/step-N``, or the run
directory itself, which means its latest checkpoint) whose trained adapters are loaded.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from codea1 import models  # `models.load_policies` is looked up when called (tests replace it)
from codea1.configs import ModelConfig, VLLMConfig
from codea1.data import bundled_problems, bundled_split, load_problems
from codea1.engines import make_engine
from codea1.rollout import derive_seed, encode_prompts
from codea1.train.checkpoint import CheckpointError, CheckpointManager

if TYPE_CHECKING:
    from codea1.data import Problem
    from codea1.engines import RolloutEngine
    from codea1.models import Policies
    from codea1.rollout import Sample, SamplingConfig

#: the share of a GPU an evaluation's vLLM engine takes (no trainer shares it)
EVAL_GPU_MEMORY = 0.85


def load_eval_problems(data: str | Path, limit: int | None = None) -> list[Problem]:
    """The problems of ``data`` (a file, or ``bundled[:split]``), the first ``limit`` of them."""

    text = str(data)
    split = bundled_split(text)
    if split is not None:
        problems = bundled_problems(split)
    else:
        path = Path(text)
        if not path.exists():
            raise FileNotFoundError(f"--data {path}: no such file (or use 'bundled' for the bundled problems)")
        problems = load_problems(path)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"--limit must be at least 1, got {limit}")
        problems = problems[:limit]
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise ValueError(f"--data {data}: problem ids must be unique, repeated: {dup}")
    return problems


def missing_libraries(problem: Problem) -> list[str]:
    """Libraries a problem declares (BigCodeBench's ``libs``) that are not importable here."""
    libs = problem.meta.get("libs") or []
    missing = []
    for lib in libs:
        name = str(lib).strip()
        if not name:
            continue
        top = name.split(".")[0]
        try:
            found = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def set_threads(threads: int | None) -> None:
    """Set torch's CPU threads (None leaves its default)."""
    if threads is None:
        return
    if threads < 1:
        raise ValueError(f"--threads must be at least 1, got {threads}")

    torch.set_num_threads(threads)


def run_checkpoint(run_dir: str | Path, step: int | None = None) -> Path:
    """The checkpoint ``checkpoints/step-N`` of a training run (``step`` None: the latest);
    a `CheckpointError` naming the run and the steps it has when there is none."""

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: no such run directory")
    found = dict(CheckpointManager(run_dir).list())
    if not found:
        raise CheckpointError(f"{run_dir}: no checkpoint (no complete checkpoints/step-N/ with a state.json); "
                              "expected a training run directory")
    if step is None:
        return found[max(found)]
    if step not in found:
        steps = ", ".join(str(s) for s in sorted(found))
        raise CheckpointError(f"{run_dir}: no checkpoint at step {step} (it has steps {steps})")
    return found[step]


def run_step(model: str, step: int | None = None) -> int | None:
    """The checkpoint step `model` stands for when it is a training run directory: `step`
    if given, else its latest; None for any other model. An evaluation records it, so
    that resuming one after the run saved a newer checkpoint cannot mix the two."""
    path = Path(model).expanduser()
    if step is not None or not (path / "checkpoints").is_dir():
        return step
    found = dict(CheckpointManager(path).list())   # the complete checkpoints, as `run_checkpoint` reads them
    return max(found) if found else None


def _checkpoint_dir(path: Path) -> Path | None:
    """The policies checkpoint ``path`` names, if it names one."""
    if (path / "policies.json").is_file():
        return path
    if (path / "policies" / "policies.json").is_file():
        return path / "policies"
    ckpts = path / "checkpoints"
    if ckpts.is_dir():
        steps = []
        for child in ckpts.iterdir():
            m = re.fullmatch(r"step-(\d+)", child.name)
            if m and child.is_dir():
                steps.append((int(m.group(1)), child))
        for _, child in sorted(steps, reverse=True):
            found = _checkpoint_dir(child)
            if found is not None:
                return found
    return None


def require_model(cfg: ModelConfig) -> None:
    """A model neither on disk, in the Hugging Face cache nor answered by the hub within
    `hub_probe_timeout_s` (3 s) is one line (`ModelNotFound`), as `codea1 train` says it,
    instead of a minute of the hub client's retries."""
    why = models.model_unavailable(cfg.name, cfg.hub_probe_timeout_s)
    if why is not None:
        raise models.ModelNotFound(why)


def load_eval_policies(model: str, device: str = "auto", dtype: str = "auto",
                       step: int | None = None) -> tuple[Policies, dict[str, Any]]:
    """The policies to evaluate and a description of where they came from (`step`: that
    checkpoint of a training run directory instead of its latest).

    A plain model is wrapped as self-play with a LoRA adapter whose update starts at zero
    (peft initialises B = 0), so the evaluated model is exactly the base model.
    `dtype="auto"` is the models' rule (bf16 on CUDA and on CPUs with bf16 units, else
    float32): measured side by side on the 2-core dev box, greedy decoding of the 0.5B
    ran 18.9 tokens/s in bf16 against 14.6 in float32.
    """

    path = Path(model).expanduser()
    if step is not None:
        path = run_checkpoint(path, step)
    ckpt = _checkpoint_dir(path) if path.is_dir() else None
    if ckpt is not None:
        manifest = json.loads((ckpt / "policies.json").read_text())
        cfg = ModelConfig(**{**manifest.get("config", {}), "device": device, "dtype": dtype,
                             "gradient_checkpointing": False})
        require_model(cfg)
        policies = models.load_policies(cfg)
        ckpt, _ = load_while_kept(policies.load, ckpt, lambda: _checkpoint_dir(path) if step is None else None)
        return policies, {"model": str(model), "checkpoint": str(ckpt), "base": cfg.name, "mode": cfg.mode}
    cfg = ModelConfig(name=str(model), mode="selfplay", selfplay_weights="lora", lora_r=1,
                      device=device, dtype=dtype)
    require_model(cfg)
    policies = models.load_policies(cfg)
    resolved = policies.resolved.describe() if policies.resolved is not None else str(model)
    return policies, {"model": str(model), "resolved": resolved}


def load_while_kept(load, checkpoint: Path, latest=lambda: None, tries: int = 3) -> tuple[Path, Any]:
    """`load(checkpoint)`, for a checkpoint of a run that may be training still: pruning
    (`checkpoint.keep`) can delete it while it is read. Then, where `latest()` names the
    run's newer latest checkpoint (a run directory asked for its latest), that one is loaded
    instead (up to `tries` times); otherwise a `CheckpointError` says what happened. Returns
    the checkpoint loaded and what `load` returned."""
    for _ in range(tries):
        try:
            return checkpoint, load(checkpoint)
        except Exception as exc:
            if checkpoint.exists():
                raise
            newer = latest()
            if newer is None or newer == checkpoint:
                raise CheckpointError(f"{checkpoint}: deleted while it was read (its run pruned it: "
                                      "checkpoint.keep); name a checkpoint the run keeps") from exc
            checkpoint = newer
    raise CheckpointError(f"{checkpoint}: the run's latest checkpoint was deleted while it was read, "
                          f"{tries} times (a run that checkpoints faster than it can be read); try again")


def eval_engine(name: str, policies: "Policies", threads: int | None = None) -> "RolloutEngine":
    """The rollout engine an evaluation samples with, as training picks it (`--engine`):
    auto is vLLM on a GPU where it is installed (taking most of the GPU), else codea1's own
    sampler (`hf`); `llamacpp` samples on the CPU with llama.cpp on the model's GGUF weights."""

    return make_engine(name, policies, VLLMConfig(gpu_memory_utilization=EVAL_GPU_MEMORY), threads=threads)


def sample_problems(engine: "RolloutEngine", policies: "Policies", role: str, prompts, problem_ids,
                    n: int, sampling: "SamplingConfig", seed: int) -> list[list["Sample"]]:
    """`n` samples a prompt; each problem's stream seeded from (seed, role, problem id), so
    its samples do not depend on the problems batched with it or on where a resumed
    evaluation starts, and are the same with any batch size."""

    seeds = [derive_seed(seed, f"eval/{role}", pid) for pid in problem_ids]
    return engine.generate(role, encode_prompts(policies.tokenizer, prompts), n=n, sampling=sampling, seeds=seeds)
