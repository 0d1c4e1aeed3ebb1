"""Write one role's LoRA adapter as a peft adapter directory, in the rollout engine's dtype.

vLLM loads LoRA adapters from peft's on-disk format (`adapter_config.json` +
`adapter_model.safetensors`, keys without the adapter's name). The trainer keeps its
adapters in float32; the engine computes in bf16/fp16, so the tensors are cast once here
and the file is half the size. Files are written under a temporary name and renamed, so
the engine never reads a half-written adapter.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from peft import get_peft_model_state_dict
from safetensors.torch import save_file

if TYPE_CHECKING:
    import torch

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def export_adapter(peft_model, adapter_name: str, directory: str | os.PathLike[str],
                   dtype: "torch.dtype") -> Path:
    """Save `adapter_name` of `peft_model` to `directory` in `dtype`; returns the directory."""

    if adapter_name not in getattr(peft_model, "peft_config", {}):
        raise ValueError(f"adapter {adapter_name!r}: the model has adapters "
                         f"{sorted(getattr(peft_model, 'peft_config', {}))}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = peft_model.peft_config[adapter_name].to_dict()
    targets = config.get("target_modules") or ()
    targets = {targets} if isinstance(targets, str) else set(targets)
    # codea1 never resizes the vocabulary: the embeddings are saved only where the adapter
    # trains them (peft's "auto" asks the base's config, the hub for a hub id, and warns
    # when it finds none, as for a GGUF base)
    state = get_peft_model_state_dict(peft_model, adapter_name=adapter_name,
                                      save_embedding_layers=bool(targets & {"embed_tokens", "lm_head"}))
    tensors = {name: t.detach().to(device="cpu", dtype=dtype).contiguous() for name, t in state.items()}
    # target_modules may be a set after peft resolved "all-linear": JSON wants a list
    if isinstance(config.get("target_modules"), (set, frozenset)):
        config["target_modules"] = sorted(config["target_modules"])
    weights_tmp = directory / f".{ADAPTER_WEIGHTS}.tmp"
    config_tmp = directory / f".{ADAPTER_CONFIG}.tmp"
    save_file(tensors, str(weights_tmp), metadata={"format": "pt"})
    config_tmp.write_text(json.dumps(config, indent=2, default=_json_default) + "\n")
    os.replace(config_tmp, directory / ADAPTER_CONFIG)
    os.replace(weights_tmp, directory / ADAPTER_WEIGHTS)
    return directory


def _json_default(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "value"):  # enums (task_type, peft_type)
        return value.value
    raise TypeError(f"adapter config value {value!r} is not JSON")
