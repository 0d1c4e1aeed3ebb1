"""The `llamacpp` rollout engine: llama.cpp samples from the run's GGUF base plus each role's LoRA.

On a CPU, llama.cpp decodes one sequence faster than PyTorch (it computes with the
quantised weights as stored, with kernels written for this one job): measured 2.45x
codea1's tokens/s on 8 rows, but no faster than codea1's batched sampler on the 32 test
rows of a cpu-demo step, since it decodes the rows one after another. The base it
runs is the very GGUF file the trainer dequantised, so both hold the same weight values;
llama.cpp also quantises activations inside its dot products, so its distribution is
close to the trainer's but not bit-equal (the off-policy gap any separate engine has, as
vLLM's does on a GPU; it reports no log-probabilities, so `grpo.rollout_is` is off).

After each update the changed role's adapter is written as a GGUF LoRA adapter
(`export_lora_gguf`: llama.cpp's format, `general.type=adapter`, tensors
`<base tensor>.lora_a` / `.lora_b`) and that role's llama.cpp context is rebuilt on it.
Sequences are decoded one at a time; a prompt is evaluated afresh, then its KV cache is
reused by its n samples.
Each sample is seeded from its place in the step (`derive_seed`), like the `hf` engine.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from codea1.engines.base import EngineUnavailable, RolloutEngine

if TYPE_CHECKING:
    import torch

    from codea1.models import Policies
    from codea1.rollout import GenerationStats, Sample, SamplingConfig

LLAMACPP_EXTRA_HINT = "pip install 'codea1[llamacpp]'"


def llamacpp_installed() -> bool:
    """True when `llama_cpp` (llama-cpp-python) can be imported (without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def base_gguf(policies: "Policies") -> Path:
    """The GGUF file the policies' base was loaded from; the engine runs it as is."""
    resolved = policies.resolved
    if resolved is None or not resolved.gguf_file:
        where = resolved.describe() if resolved is not None else "an in-memory model"
        raise EngineUnavailable(f"rollout.engine=llamacpp: llama.cpp runs the base model as a GGUF file, "
                                f"but this run's model is {where}; give model.name a .gguf file (or the "
                                f"offline qwen2.5-coder-0.5b-instruct), or use rollout.engine=hf")
    return Path(resolved.source) / resolved.gguf_file


def export_lora_gguf(peft_model, adapter_name: str, path: str | os.PathLike[str], base: str | os.PathLike[str]) -> Path:
    """Write `adapter_name` of `peft_model` as a llama.cpp LoRA adapter for the GGUF `base`.

    Tensor names are the base's (`blk.N.attn_q.weight`) plus `.lora_a` / `.lora_b`; A keeps
    peft's (r, in) layout and B its (out, r), which llama.cpp reads as transposed ggml
    shapes. llama.cpp scales by alpha / r, so alpha is written as peft's scaling times r
    (rsLoRA included). Written under a temporary name and renamed into place.
    """
    import gguf
    import numpy as np
    from peft import get_peft_model_state_dict

    config = peft_model.peft_config.get(adapter_name)
    if config is None:
        raise ValueError(f"adapter {adapter_name!r}: the model has adapters {sorted(peft_model.peft_config)}")
    reader = gguf.GGUFReader(str(base))
    field = reader.get_field(gguf.Keys.General.ARCHITECTURE)
    arch = field.contents() if field is not None else None
    arch_ids = {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}
    if arch not in arch_ids:
        raise ValueError(f"{base}: unknown GGUF architecture {arch!r}")
    base_names = {t.name for t in reader.tensors}
    blocks = 1 + max((int(n.split(".")[1]) for n in base_names if n.startswith("blk.")), default=-1)
    names = gguf.get_tensor_name_map(arch_ids[arch], blocks)
    scale = config.lora_alpha / (config.r ** 0.5 if getattr(config, "use_rslora", False) else config.r)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    writer = gguf.GGUFWriter(str(tmp), arch)
    writer.add_string(gguf.Keys.General.TYPE, gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(scale * config.r))
    state = get_peft_model_state_dict(peft_model, adapter_name=adapter_name)
    for key in sorted(state):
        if ".lora_A." in key:
            part, suffix = key.split(".lora_A."), "lora_a"
        elif ".lora_B." in key:
            part, suffix = key.split(".lora_B."), "lora_b"
        else:
            raise ValueError(f"adapter {adapter_name!r}: {key} is not a LoRA A or B matrix "
                             "(llama.cpp adapters hold only those)")
        module = part[0].removeprefix("base_model.model.")
        target = names.get_name(module + ".weight", try_suffixes=(".weight",))
        if target is None or target not in base_names:
            raise ValueError(f"adapter {adapter_name!r}: {module} has no tensor in {base} (got {target})")
        writer.add_tensor(f"{target}.{suffix}", state[key].detach().float().cpu().numpy().astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, path)
    return path


class LlamaCppEngine(RolloutEngine):
    """llama.cpp on the GGUF base with the role's adapter (see the module's docstring)."""

    name = "llamacpp"
    reports_logprobs = False

    def __init__(self, policies: "Policies", threads: int | None = None, context: int = 4096) -> None:
        if not llamacpp_installed():
            raise EngineUnavailable(f"rollout.engine=llamacpp: llama-cpp-python is not installed; "
                                    f"{LLAMACPP_EXTRA_HINT} (it compiles llama.cpp), or use rollout.engine=hf")
        if not policies.config.uses_lora:
            raise EngineUnavailable("rollout.engine=llamacpp: only LoRA modes (lora-shared, selfplay with "
                                    "LoRA) run on llama.cpp, whose base stays the GGUF file; use rollout.engine=hf")
        self.policies = policies
        self.base = base_gguf(policies)
        self.threads = threads or _cpu_threads()
        self.context = context
        self._dir = Path(tempfile.mkdtemp(prefix="codea1-llamacpp-"))
        self._llms: dict[str, object] = {}   # adapter name -> llama_cpp.Llama on its current adapter
        self._stale: set[str] = set()
        self._version = 0

    def _adapter(self, role: str) -> str:
        return self.policies._adapter_name(role)

    def _llm(self, role: str):
        import llama_cpp

        key = self._adapter(role)
        if key in self._llms and key not in self._stale:
            return self._llms[key]
        self._llms.pop(key, None)
        self._version += 1
        adapter = export_lora_gguf(self.policies.module(role), key, self._dir / f"{key}-{self._version}.gguf", self.base)
        for old in self._dir.glob(f"{key}-*.gguf"):
            if old != adapter:
                old.unlink(missing_ok=True)
        with _native_stderr_silenced():
            self._llms[key] = llama_cpp.Llama(model_path=str(self.base), lora_path=str(adapter), lora_scale=1.0,
                                              n_ctx=self.context, n_threads=self.threads,
                                              n_threads_batch=self.threads, n_batch=512, verbose=False)
        self._stale.discard(key)
        return self._llms[key]

    def generate(self, role: str, prompt_ids: Sequence[Sequence[int]], n: int = 1,
                 sampling: "SamplingConfig | None" = None, *,
                 generator: "torch.Generator | None" = None,
                 seeds: Sequence[int] | None = None,
                 stats: "GenerationStats | None" = None,
                 should_stop: Callable[[], bool] | None = None) -> list[list["Sample"]]:
        import torch

        from codea1.rollout import (GenerationInterrupted, GenerationStats, Sample, SamplingConfig,
                                    derive_seed, fit_prompts, stop_token_ids)

        cfg = sampling or SamplingConfig()
        stats = stats if stats is not None else GenerationStats()
        if not prompt_ids or n == 0:
            return [[] for _ in prompt_ids]
        if seeds is not None and len(seeds) != len(prompt_ids):
            raise ValueError(f"seeds: {len(seeds)} given for {len(prompt_ids)} prompts (one a prompt)")
        started = time.perf_counter()
        llm = self._llm(role)
        tokenizer = self.policies.tokenizer
        with self.policies.reference() as base:
            stops = stop_token_ids(tokenizer, base)
        prompts, cut = fit_prompts([list(p) for p in prompt_ids], cfg, self.context, stats)
        if generator is None and seeds is None:
            generator = torch.Generator().manual_seed(cfg.seed if cfg.seed is not None else 0)
        greedy = cfg.temperature == 0
        out: list[list[Sample]] = []
        for p, ids in enumerate(prompts):
            samples = []
            for j in range(n):
                seed = derive_seed(seeds[p], j) if seeds is not None else \
                    int(torch.randint(0, 2 ** 31 - 1, (1,), generator=generator))
                llm.set_seed(seed & 0x7FFFFFFF)
                if j == 0:  # a prompt's KV cache is its own (not a prefix of the last prompt's):
                    llm.reset()  # its samples then depend on the prompt and seed, not the batch
                completion: list[int] = []
                done = False
                for token in llm.generate(ids, temp=0.0 if greedy else cfg.temperature, top_p=cfg.top_p,
                                          top_k=0, min_p=0.0, typical_p=1.0, repeat_penalty=1.0, reset=True):
                    completion.append(int(token))
                    if token in stops:
                        done = True
                        break
                    if len(completion) >= cfg.max_new_tokens:
                        break
                    if should_stop is not None and should_stop():
                        raise GenerationInterrupted(f"{role} rollout stopped")
                stats.forward_passes += len(completion)
                text = tokenizer.decode(completion, skip_special_tokens=True)
                samples.append(Sample(prompt_ids=list(ids), completion_ids=completion, text=text,
                                      truncated=not done, finished=done, prompt_truncated=cut[p]))
                stats.completion_tokens += len(completion)
                stats.prompt_tokens += len(ids)
                stats.completions_truncated += int(not done)
                stats.empty_completions += int(not text.strip())
            out.append(samples)
        stats.prompts += len(prompts)
        stats.prompts_truncated += sum(cut)
        stats.samples += sum(len(s) for s in out)
        stats.seconds += time.perf_counter() - started
        return out

    def weights_changed(self, keys: Iterable[str]) -> None:
        """An updated adapter is exported again, and its context rebuilt, at its next rollout."""
        self._stale.update(keys)

    def close(self) -> None:
        for llm in self._llms.values():
            close = getattr(llm, "close", None)
            if close is not None:
                close()
        self._llms.clear()
        shutil.rmtree(self._dir, ignore_errors=True)


@contextlib.contextmanager
def _native_stderr_silenced():
    """Silence stderr while llama.cpp loads an adapter: it warns once per adapter tensor
    (through llama-cpp-python's log callback, which prints warnings even when not verbose,
    and from C), at every update. A failure still raises, with its message."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _cpu_threads() -> int:
    """The cores this process may use (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
