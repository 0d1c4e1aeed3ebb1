"""The model card (`README.md`) of an exported model: where it came from and how it scored.

It names the base model, the training mode and the role, the step of the checkpoint, the
run's last validation figures up to that step (from `metrics.jsonl`), how to load the
export, the resolved training config, and the command that made it, so the card alone
says how to reproduce the export.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from codea1 import __version__

if TYPE_CHECKING:
    from codea1.export import RunCheckpoint

_LOADING = {
    "merged": """```python
from transformers import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained("{out}")
tokenizer = AutoTokenizer.from_pretrained("{out}")
```
vLLM serves it as is: `vllm serve {out}`.""",
    "peft": """```python
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

base = {base_load}
model = PeftModel.from_pretrained(base, "{out}")
tokenizer = AutoTokenizer.from_pretrained("{out}")
```""",
    "gguf-lora": """llama.cpp applies it over the run's GGUF base:
`llama-cli -m {base} --lora {out}/{adapter}` (llama-cpp-python: `Llama(model_path=..., lora_path=...)`).""",
}


def last_validation(run_dir, step: int) -> tuple[int | None, dict[str, Any]]:
    """The `val/` figures of the last metrics row at or before `step` that has any."""
    from codea1.train.metrics import read_metrics  # inside: see the note at the top of codea1.export

    found: tuple[int | None, dict[str, Any]] = (None, {})
    for row in read_metrics(run_dir):
        if int(row.get("step", 0)) > step:
            continue
        figures = {k: v for k, v in row.items() if k.startswith("val/")}
        if figures:
            found = (int(row["step"]), figures)
    return found


def gguf_adapter_name(role: str) -> str:
    """The file name of `role`'s llama.cpp LoRA adapter in a GGUF export (re-exported by
    `codea1.export`, which writes it)."""
    return f"{role}-lora.gguf"


def _figure(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "-" if value is None else str(value)


def _base_load(base: str) -> str:
    """The Python expression that loads the base (a GGUF base dequantised by transformers)."""
    if base.lower().endswith(".gguf"):
        folder, _, name = base.rpartition("/")
        return f'AutoModelForCausalLM.from_pretrained("{folder}", gguf_file="{name}")'
    return f'AutoModelForCausalLM.from_pretrained("{base}")'


def model_card(run: "RunCheckpoint", role: str, fmt: str, dtype: str, base: str, base_described: str,
               out: str, command: str, validation: tuple[int | None, dict[str, Any]]) -> str:
    """The card's Markdown text; `validation` is `last_validation`'s, read before the model
    loads so that a bad metrics.jsonl costs no loading."""
    cfg = run.model_config
    steps = run.train_config.get("steps")
    weights = (f"LoRA r={cfg.get('lora_r')}, alpha={cfg.get('lora_alpha')}" if run.uses_lora()
               else "full fine-tune")
    lines = [
        "---",
        f"base_model: {base}",
        f"library_name: {'peft' if fmt == 'peft' else 'transformers'}",
        "tags: [code-a1, code, reinforcement-learning]",
        "---",
        "",
        f"# The {role} model of the Code-A1 run `{run.run_dir.name}`, step {run.step}",
        "",
        f"Exported by codea1 {__version__} as `{fmt}` ({dtype}).",
        "",
        "| | |",
        "|---|---|",
        f"| base model | `{base_described}` |",
        f"| training mode | {run.train_mode} (model.mode {cfg.get('mode')}; {weights}) |",
        f"| role | {role} |",
        f"| checkpoint | step {run.step} of {steps} (`{run.path}`) |",
        f"| format | {fmt}, {dtype} |",
        f"| made by | `{command}` |",
        "",
    ]
    val_step, figures = validation
    if figures:
        lines += [f"## Last validation (step {val_step})", "", "| figure | value |", "|---|---|"]
        lines += [f"| {key} | {_figure(figures[key])} |" for key in sorted(figures)]
    else:
        lines += ["## Last validation", "", f"No validation ran up to step {run.step}."]
    lines += ["", "## Loading", "",
              _LOADING[fmt].format(out=out, base=base, base_load=_base_load(base),
                                   adapter=gguf_adapter_name(role)), "",
              "## Training config", "", "```yaml",
              yaml.safe_dump(run.train_config, sort_keys=False).rstrip(), "```", ""]
    return "\n".join(lines)
