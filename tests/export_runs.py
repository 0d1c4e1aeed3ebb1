"""Runs with a checkpoint written directly (no training), for the export and selection tests.

`make_run` loads the tiny model in a mode, fills every adapter (or the full weights) with
seeded random values so each role differs from the base and from the other role, and saves
the policies as a trainer's checkpoint does: `checkpoints/step-N/` with `policies/`,
`state.json` (the step and the resolved config) and a `metrics.jsonl` with validation rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from codea1.models import ModelConfig, load_policies


def perturb(policies, seed: int = 0, scale: float = 0.05) -> None:
    """Give every trainable weight set values of its own (LoRA B starts at zero)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for key in policies.weight_keys:
            role = "code" if key == "shared" else key
            for _name, param in policies.named_trainable_parameters(role):
                param.add_(scale * torch.randn(param.shape, generator=gen).to(param.dtype))


def make_run(root: Path, model_dir: Path, *, mode: str = "a1", model_mode: str = "lora-shared",
             steps: tuple[int, ...] = (1, 2), seed: int = 0) -> Path:
    """A run directory with one checkpoint per step in `steps` (each with its own weights)."""
    from codea1.train.config import TrainConfig

    extra = {"selfplay_weights": "full"} if model_mode == "full-selfplay" else {}
    model_mode = "selfplay" if model_mode == "full-selfplay" else model_mode
    cfg = TrainConfig(mode=mode, steps=max(steps), model=ModelConfig(
        name=str(model_dir), mode=model_mode, dtype="float32", lora_r=4, lora_alpha=8, **extra))
    policies = load_policies(cfg.model)
    run = Path(root)
    rows = []
    for k, step in enumerate(steps):
        perturb(policies, seed + k)
        ckpt = run / "checkpoints" / f"step-{step}"
        policies.save(ckpt / "policies")
        (ckpt / "state.json").write_text(json.dumps({"step": step, "config": cfg.model_dump(mode="json")}))
        rows.append({"step": step, "code/reward_mean": 0.1 * step, "val/code_pass_rate": 0.25 * step,
                     "val/test/avg@4": 0.5})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run
