"""`codea1 export`: one role of a training run as a model that other tools load.

A run ends as `RUN_DIR/checkpoints/step-N/` in codea1's own layout (a base model's name
plus the trained adapters or full weights). `export_run` turns one role (code or test) of
one checkpoint into:

- `merged`: a standard Hugging Face model directory (config, safetensors shards,
  tokenizer with its chat template, generation config), the role's adapter merged into the
  base, in the dtype asked (default: the base's). `AutoModelForCausalLM.from_pretrained`
  and vLLM load it as is.
- `peft`: the role's LoRA adapter as `PeftModel.from_pretrained(base, OUT)` loads it
  (LoRA modes only), with the tokenizer.
- `gguf-lora`: the role's LoRA adapter as llama.cpp loads it over the run's GGUF base
  (the writer of the llamacpp rollout engine).

Every format gets a model card (`README.md`: base model, mode, step, config, the run's
last validation figures, the command that made it). The merge is done in float32 on the
CPU, then cast. Everything that can be wrong with the input (no checkpoint, a step that is
not there, a role or format the run cannot give, an OUT that is not empty) is refused
before a model loads; the export is written into a temporary directory next to OUT and
renamed into place, so a failed export leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codea1.configs import ROLES, ModelConfig
from codea1.export.card import gguf_adapter_name, last_validation, model_card
from codea1.output_files import naming_full_disk

# torch, transformers, safetensors and the modules that compute with them (codea1.models,
# codea1.engines, codea1.eval.loading) are imported inside the functions, and so are
# codea1.train's checkpoint helpers: `codea1 --help` imports this package (export.cli is
# its submodule), and it must not load the compute stack.

if TYPE_CHECKING:
    import torch

FORMATS: tuple[str, ...] = ("merged", "peft", "gguf-lora")
DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")
CARD_FILE = "README.md"


class ExportError(ValueError):
    """The export cannot be made from this input; the message says why, in one line."""


@dataclass(frozen=True)
class RunCheckpoint:
    """What an export reads from one checkpoint of a run."""

    run_dir: Path
    path: Path                    # RUN_DIR/checkpoints/step-N
    step: int
    train_config: dict[str, Any]  # the run's resolved TrainConfig, as the checkpoint recorded it
    manifest: dict[str, Any]      # policies/policies.json: the model config and the weight sets

    @property
    def policies_dir(self) -> Path:
        return self.path / "policies"

    @property
    def model_config(self) -> dict[str, Any]:
        return dict(self.manifest.get("config") or {})

    @property
    def train_mode(self) -> str:
        return str(self.train_config.get("mode", "a1"))

    def uses_lora(self) -> bool:
        return ModelConfig(**self.model_config).uses_lora


def read_run(run_dir: str | os.PathLike[str], step: int | None = None) -> RunCheckpoint:
    """The checkpoint `step` (None: the latest) of a run, its state and weights manifest."""
    from codea1.eval.loading import run_checkpoint
    from codea1.train.checkpoint import CheckpointError, read_state

    path = run_checkpoint(run_dir, step)
    state = read_state(path)
    manifest_path = path / "policies" / "policies.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{manifest_path}: missing; {path} holds no weights") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{manifest_path}: not valid JSON ({exc.msg})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise CheckpointError(f"{manifest_path}: expected an object with the model's 'config'")
    return RunCheckpoint(Path(run_dir), path, int(state.get("step", 0)), dict(state.get("config") or {}), manifest)


def check_request(run: RunCheckpoint, role: str, fmt: str, dtype: str | None) -> None:
    """Refuse, before anything loads, a role, format or dtype this run cannot give."""
    if role not in ROLES:
        raise ExportError(f"--role {role!r}: expected one of {', '.join(ROLES)}")
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if dtype is not None and dtype not in DTYPES:
        raise ExportError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    if role == "test" and run.train_mode == "golden":
        raise ExportError(f"--role test: {run.run_dir} is a golden run, which trains the code model only "
                          "(its test weights are the base model's)")
    if fmt != "merged" and not run.uses_lora():
        raise ExportError(f"--format {fmt}: {run.run_dir} fine-tunes the full model (model.mode "
                          f"{run.model_config.get('mode')}), which has no LoRA adapter; use --format merged")
    if fmt == "gguf-lora":
        if dtype not in (None, "float32"):
            raise ExportError("--dtype: llama.cpp LoRA adapters are written in float32; leave --dtype out")
        base = resolved_base(run)
        if not base.gguf_file:
            raise ExportError(f"--format gguf-lora: llama.cpp applies the adapter to a GGUF base, but this run's "
                              f"base is {base.describe()}; use --format peft or merged")


def check_out(out: str | os.PathLike[str]) -> None:
    """OUT must not exist yet, or be an empty directory: an export never mixes with other files."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out}: already exists and is not an empty directory; export into a new OUT")


def resolved_base(run: RunCheckpoint):
    """Where the run's base model comes from (`codea1.models.ResolvedModel`)."""
    from codea1.models import resolve_model

    cfg = ModelConfig(**run.model_config)
    return resolve_model(cfg.name, probe_timeout_s=cfg.hub_probe_timeout_s)


def base_dtype(resolved) -> "torch.dtype":
    """The dtype the base model's config declares; float32 for a GGUF base (its dequantised
    values are exact only in float32) or a config that declares none."""
    import torch

    if resolved.gguf_file:
        return torch.float32
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(resolved.source)
    declared = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(declared, str):
        declared = getattr(torch, declared, None)
    return declared if isinstance(declared, torch.dtype) else torch.float32


@dataclass
class RoleModel:
    """One role's weights, loaded in float32 on the CPU: a peft model holding the role's
    adapter (`adapter` names it) or, for a full fine-tune, the plain model."""

    model: Any
    tokenizer: Any
    resolved: Any
    adapter: str | None


def load_role(run: RunCheckpoint, role: str) -> RoleModel:
    """The base model with `role`'s trained weights of the checkpoint, float32 on the CPU."""
    import torch

    from codea1.models import load_model_and_tokenizer, resolve_model, wrap_policies

    cfg = ModelConfig(**{**run.model_config, "device": "cpu", "dtype": "float32", "gradient_checkpointing": False})
    resolved = resolve_model(cfg.name, probe_timeout_s=cfg.hub_probe_timeout_s)
    base, tokenizer, resolved = load_model_and_tokenizer(resolved, torch.float32, torch.device("cpu"))
    key = "shared" if cfg.mode == "selfplay" else role
    if cfg.uses_lora:
        policies = wrap_policies(cfg, base, tokenizer, resolved=resolved)
        policies.load(run.policies_dir)
        return RoleModel(policies.module(role), tokenizer, resolved, key)
    _load_full_weights(base, run.policies_dir / f"{key}.safetensors")
    return RoleModel(base, tokenizer, resolved, None)


def _load_full_weights(model, path: Path) -> None:
    """Copy a full fine-tune's saved weights into `model`, every name and shape checked."""
    import torch
    from safetensors.torch import load_file

    from codea1.train.checkpoint import CheckpointError

    if not path.is_file():
        raise CheckpointError(f"{path}: missing")
    tensors = load_file(str(path))
    params = dict(model.named_parameters())
    missing, unexpected = sorted(set(params) - set(tensors)), sorted(set(tensors) - set(params))
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not match the base model (missing {missing[:3]}, "
                              f"unexpected {unexpected[:3]})")
    with torch.no_grad():
        for name, param in params.items():
            if tensors[name].shape != param.shape:
                raise CheckpointError(f"{path}: {name} has shape {tuple(tensors[name].shape)}, "
                                      f"expected {tuple(param.shape)}")
            param.copy_(tensors[name].to(param.dtype))


# --------------------------------------------------------------------------- writers


def write_merged(loaded: RoleModel, directory: Path, dtype: "torch.dtype", max_shard_size: str | int) -> list[str]:
    """The role merged into the base, saved as a Hugging Face model directory."""
    from codea1.models import save_model

    model = loaded.model
    if loaded.adapter is not None:
        model = model.merge_and_unload(adapter_names=[loaded.adapter])
    model.to(dtype)
    model.config.use_cache = True
    with _quiet_progress():  # the command prints one line of its own
        save_model(model, directory, max_shard_size=max_shard_size)
    loaded.tokenizer.save_pretrained(directory)
    return sorted(p.name for p in directory.iterdir())


@contextlib.contextmanager
def _quiet_progress():
    """transformers' progress bars off for the block, as they were after it."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def write_peft(loaded: RoleModel, directory: Path, dtype: "torch.dtype", base_name: str) -> list[str]:
    """The role's adapter as a peft adapter directory (named for the base it applies to)."""
    from codea1.engines.adapters import ADAPTER_CONFIG, export_adapter

    export_adapter(loaded.model, loaded.adapter, directory, dtype)
    config_path = directory / ADAPTER_CONFIG
    config = json.loads(config_path.read_text())
    config["base_model_name_or_path"] = base_name
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    loaded.tokenizer.save_pretrained(directory)
    return sorted(p.name for p in directory.iterdir())


def write_gguf_lora(loaded: RoleModel, directory: Path, role: str) -> list[str]:
    """The role's adapter in llama.cpp's LoRA format, for the run's GGUF base."""
    from codea1.engines.llamacpp_engine import export_lora_gguf

    base = Path(loaded.resolved.source) / loaded.resolved.gguf_file
    export_lora_gguf(loaded.model, loaded.adapter, directory / gguf_adapter_name(role), base)
    return [gguf_adapter_name(role)]


# --------------------------------------------------------------------------- the export


def base_name(resolved) -> str:
    """How a model card and an adapter config name the base: a hub id, a directory, a .gguf."""
    return f"{resolved.source}/{resolved.gguf_file}" if resolved.gguf_file else resolved.source


def export_command_line(run_dir, out, role: str, step: int, fmt: str, dtype: str | None) -> str:
    """The command that makes this export (recorded in the model card)."""
    parts = ["codea1", "export", str(run_dir), str(out), "--role", role, "--step", str(step), "--format", fmt]
    if dtype is not None:
        parts += ["--dtype", dtype]
    return " ".join(shlex.quote(p) for p in parts)


@dataclass(frozen=True)
class ExportResult:
    out: Path
    step: int
    format: str
    dtype: str
    files: list[str]


def _readable(directory: Path) -> None:
    """Give every file written the mode a plain new file gets (0644 under the usual umask):
    some writers (safetensors) leave 0600, which other users of a shared model folder
    cannot read."""
    umask = os.umask(0)
    os.umask(umask)
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(0o666 & ~umask)


def export_run(run_dir: str | os.PathLike[str], out: str | os.PathLike[str], role: str = "code", *,
               step: int | None = None, fmt: str = "merged", dtype: str | None = None,
               max_shard_size: str | int = "5GB") -> ExportResult:
    """Export `role` of checkpoint `step` (None: the latest) of the run in `run_dir` into the
    new directory `out` (see the module's docstring)."""
    import torch

    from codea1.eval.loading import load_while_kept, run_checkpoint

    out = Path(out)
    run = read_run(run_dir, step)
    check_request(run, role, fmt, dtype)
    check_out(out)

    validation = last_validation(run.run_dir, run.step)  # a bad metrics.jsonl fails before the model loads

    def load(path: Path) -> tuple[RunCheckpoint, RoleModel]:  # (a live run may prune it meanwhile: then its latest)
        read = run if path == run.path else read_run(run_dir, None)
        return read, load_role(read, role)

    _, (loaded_run, loaded) = load_while_kept(load, run.path,
                                              lambda: run_checkpoint(run_dir) if step is None else None)
    if loaded_run.step != run.step:
        validation = last_validation(loaded_run.run_dir, loaded_run.step)
    run = loaded_run
    if fmt == "merged":
        target = getattr(torch, dtype) if dtype else base_dtype(loaded.resolved)
    else:
        target = getattr(torch, dtype) if dtype else torch.float32  # adapters train in float32
    dtype_name = str(target).removeprefix("torch.")
    created = [p for p in reversed(out.parents) if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-export-{os.getpid()}"
    try:
        with naming_full_disk(out):  # (a write's own ENOSPC names no file)
            tmp.mkdir()
            if fmt == "merged":
                files = write_merged(loaded, tmp, target, max_shard_size)
            elif fmt == "peft":
                files = write_peft(loaded, tmp, target, base_name(loaded.resolved))
            else:
                files = write_gguf_lora(loaded, tmp, role)
            command = export_command_line(run_dir, out, role, run.step, fmt, dtype)
            (tmp / CARD_FILE).write_text(model_card(run, role, fmt, dtype_name, base_name(loaded.resolved),
                                                    loaded.resolved.describe(), str(out), command, validation),
                                         encoding="utf-8")
            files = sorted({*files, CARD_FILE})
            _readable(tmp)
            if out.exists():
                out.rmdir()  # empty (check_out): the rename needs the name free
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for parent in reversed(created):  # directories this export made for OUT, innermost first
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise
    return ExportResult(out, run.step, fmt, dtype_name, files)
