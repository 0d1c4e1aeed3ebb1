"""The `llamacpp` rollout engine: llama.cpp samples from the run's GGUF base plus each role's LoRA.

On a CPU, llama.cpp decodes one sequence faster than PyTorch (it computes with the
quantised weights as stored, with kernels written for this one job): measured 2.45x
codea1's tokens/s on 8 rows. This engine decodes all rows of a rollout together: each
prompt is evaluated once, its KV cache copied to its n samples, and every unfinished row
advances by one token per `llama_decode`, each row in its own KV stream (so it attends
over its own tokens only, and its samples depend on its prompt and seed, not on the other
rows, up to the rounding of batched kernels). Each row is sampled here from its logits
with its own generator. The base it
runs is the very GGUF file the trainer dequantised, so both hold the same weight values;
llama.cpp also quantises activations inside its dot products, so its distribution is
close to the trainer's but not bit-equal (the off-policy gap any separate engine has, as
vLLM's does on a GPU; it reports no log-probabilities, so `grpo.rollout_is` is off).

After each update the changed role's adapter is written as a GGUF LoRA adapter
(`export_lora_gguf`: llama.cpp's format, `general.type=adapter`, tensors
`<base tensor>.lora_a` / `.lora_b`) and that role's llama.cpp model and context are
rebuilt on it. Each sample is seeded from its place in the step (`derive_seed`), like the `hf` engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import gguf
import numpy as np
import torch
from peft import get_peft_model_state_dict

from codea1.engines.interface import EngineUnavailable, RolloutEngine
from codea1.rollout import (
    GenerationInterrupted,
    GenerationStats,
    SamplingConfig,
    StopStrings,
    derive_seed,
    fit_prompts,
    make_samples,
    stop_token_ids,
)

if TYPE_CHECKING:
    from codea1.models import Policies
    from codea1.rollout import Sample

# llama_cpp (llama-cpp-python, the codea1[llamacpp] extra) is imported where it is used: it
# is optional, and this module is imported by `codea1.engines.base` on every machine.

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
        if not policies.lora:
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
        self._decoders: dict[str, _BatchDecoder] = {}   # adapter name -> its batched decoder
        with policies.reference() as base:
            self._stops = frozenset(stop_token_ids(policies.tokenizer, base))

    def _adapter(self, role: str) -> str:
        return self.policies._adapter_name(role)

    def _llm(self, role: str):
        import llama_cpp

        key = self._adapter(role)
        if key in self._llms and key not in self._stale:
            return self._llms[key]
        self._llms.pop(key, None)
        dec = self._decoders.pop(key, None)
        if dec is not None:
            dec.close()
        self._version += 1
        adapter = export_lora_gguf(self.policies.module(role), key, self._dir / f"{key}-{self._version}.gguf", self.base)
        for old in self._dir.glob(f"{key}-*.gguf"):
            if old != adapter:
                old.unlink(missing_ok=True)
        with _native_stderr_silenced():
            # the Llama's own context only serves as the template `_BatchDecoder` copies (which
            # sizes its own): kept small, it holds no unused 4k-token KV cache
            self._llms[key] = llama_cpp.Llama(model_path=str(self.base), lora_path=str(adapter), lora_scale=1.0,
                                              n_ctx=min(self.context, 512), n_threads=self.threads,
                                              n_threads_batch=self.threads, n_batch=512, verbose=False)
        self._stale.discard(key)
        return self._llms[key]

    def _decoder(self, role: str, rows: int, per_row: int) -> "_BatchDecoder":
        """The role's batched decoder; made again (never smaller) when a call needs more
        rows or a longer row than it holds. `_llm` drops it when the adapter changes."""
        llm = self._llm(role)
        key = self._adapter(role)
        dec = self._decoders.get(key)
        if dec is not None and dec.rows >= rows and dec.per_row >= per_row:
            return dec
        if dec is not None:
            rows, per_row = max(rows, dec.rows), max(per_row, dec.per_row)
            dec.close()
        self._decoders[key] = _BatchDecoder(llm, rows, per_row, self.threads)
        return self._decoders[key]

    def generate(self, role: str, prompt_ids: Sequence[Sequence[int]], n: int = 1,
                 sampling: "SamplingConfig | None" = None, *,
                 generator: "torch.Generator | None" = None,
                 seeds: Sequence[int] | None = None,
                 stats: "GenerationStats | None" = None,
                 should_stop: Callable[[], bool] | None = None) -> list[list["Sample"]]:
        cfg = sampling or SamplingConfig()
        stats = stats if stats is not None else GenerationStats()
        if not prompt_ids or n == 0:
            return [[] for _ in prompt_ids]
        if seeds is not None and len(seeds) != len(prompt_ids):
            raise ValueError(f"seeds: {len(seeds)} given for {len(prompt_ids)} prompts (one a prompt)")
        started = time.perf_counter()
        prompts, cut = fit_prompts([list(p) for p in prompt_ids], cfg, self.context, stats)
        stats.prompts += len(prompts)
        stats.prompts_truncated += sum(cut)
        if generator is None and seeds is None:
            generator = torch.Generator().manual_seed(cfg.seed if cfg.seed is not None else 0)
        row_seeds = [[derive_seed(seeds[p], j) if seeds is not None else
                      int(torch.randint(0, 2 ** 31 - 1, (1,), generator=generator)) for j in range(n)]
                     for p in range(len(prompts))]
        results: list[list[tuple[list[int], bool]]] = [[] for _ in prompts]
        strings = StopStrings(self.policies.tokenizer, cfg.stop)
        for wave in _waves([len(p) for p in prompts], n, min(cfg.batch_size, _MAX_ROWS)):
            per_row = max(len(prompts[p]) for p in wave) + cfg.max_new_tokens + 1
            decoder = self._decoder(role, len(wave) * n, per_row)
            done = decoder.run([prompts[p] for p in wave], n, [row_seeds[p] for p in wave], cfg,
                               self._stops, stats, should_stop, role, strings)
            for p, rows in zip(wave, done):
                results[p] = rows
        out = make_samples(self.policies.tokenizer, prompts, cut, results, stats)
        stats.seconds += time.perf_counter() - started
        return out

    def weights_changed(self, keys: Iterable[str]) -> None:
        """An updated adapter is exported again, and its context rebuilt, at its next rollout."""
        self._stale.update(keys)

    def release_memory(self) -> None:
        """Before the update: free every llama.cpp model copy, KV cache and compute buffer
        (some GiB) so that they do not add to the update's peak. An update changes the
        adapters, which rebuilds them at the next rollout anyway."""
        for dec in self._decoders.values():
            dec.close()
        self._decoders.clear()
        for llm in self._llms.values():
            close = getattr(llm, "close", None)
            if close is not None:
                close()
        self._llms.clear()

    def close(self) -> None:
        self.release_memory()
        shutil.rmtree(self._dir, ignore_errors=True)


_MAX_ROWS = 64   # rows decoded together at most (and llama.cpp's limit of parallel sequences)


def _waves(lengths: Sequence[int], n: int, max_rows: int) -> list[list[int]]:
    """Prompt indices grouped so that each group's rows (n a prompt) fit `max_rows`
    (a prompt with more than max_rows samples is a group of its own), longest first so a
    group's rows end at about the same time."""
    order = sorted(range(len(lengths)), key=lambda p: -lengths[p])
    per_wave = max(1, max_rows // max(n, 1))
    return [order[i:i + per_wave] for i in range(0, len(order), per_wave)]


def _sample_token(logits, temperature: float, top_p: float, rng) -> int:
    """One token from next-token logits: greedy at temperature 0, else softmax(logits / T)
    restricted to the top-p nucleus, drawn with the row's own generator."""

    if temperature == 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    probs = np.exp(z - z.max())
    ids = None
    if top_p < 1.0:  # narrow to the nucleus: the fewest most likely tokens holding top_p of the mass
        order = np.argsort(-probs)
        cum = np.cumsum(probs[order])
        ids = order[: int(np.searchsorted(cum, top_p * cum[-1])) + 1]
        probs = probs[ids]
    cum = np.cumsum(probs)
    k = min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), len(probs) - 1)
    return int(k if ids is None else ids[k])


class _BatchDecoder:
    """A llama.cpp context of `rows` sequences of `per_row` tokens each (one KV stream per
    sequence, so a row attends only over its own tokens) on a loaded model and adapter.

    `run` evaluates each prompt once, copies its KV cache to its n rows, then decodes all
    rows together, one token of every unfinished row per `llama_decode`.
    """

    def __init__(self, llm, rows: int, per_row: int, threads: int) -> None:
        import llama_cpp

        self.llm, self.rows = llm, rows
        self.per_row = -(-per_row // 256) * 256
        params = type(llm.context_params).from_buffer_copy(llm.context_params)
        params.n_ctx = self.rows * self.per_row
        params.n_seq_max = self.rows
        params.kv_unified = False
        params.n_batch = params.n_ubatch = max(512, self.rows)
        params.n_threads = params.n_threads_batch = threads
        params.n_outputs_max = params.n_outputs_max_per_seq = 0   # up to n_batch logits a decode
        self.n_batch = params.n_batch
        with _native_stderr_silenced():
            self.ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not make a context of {self.rows} x {self.per_row} tokens")
        if llm._lora_adapter is not None:
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(llm._lora_adapter)
            scales = (ctypes.c_float * 1)(llm.lora_scale)
            if llama_cpp.llama_set_adapters_lora(self.ctx, adapters, 1, scales):
                self.close()
                raise RuntimeError("llama.cpp could not set the LoRA adapter on the batched context")
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self.n_vocab = llm.n_vocab()

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """One `llama_decode` of (token, position, sequence, wants logits) entries."""
        import llama_cpp

        b = self.batch
        for i, (token, pos, seq, logits) in enumerate(entries):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, logits
            b.seq_id[i][0] = seq
        b.n_tokens = len(entries)
        code = llama_cpp.llama_decode(self.ctx, b)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code} ({len(entries)} tokens)")

    def _logits(self, i: int):
        import llama_cpp

        ptr = llama_cpp.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(self.n_vocab,))

    def run(self, prompts: list[list[int]], n: int, seeds: list[list[int]], cfg, stops: frozenset[int],
            stats, should_stop, role: str, strings: StopStrings | None = None,
            ) -> list[list[tuple[list[int], bool]]]:
        """Per prompt, its n (completion ids, ended by a stop token or string) pairs."""
        import llama_cpp

        llama_cpp.llama_memory_clear(self.memory, True)
        rngs = [[np.random.default_rng(seed) for seed in row] for row in seeds]
        completions: list[list[list[int]]] = [[[] for _ in range(n)] for _ in prompts]
        finished = [[False] * n for _ in prompts]
        active: list[tuple[int, int]] = []   # (prompt, sample) rows still decoding

        def take(p: int, j: int, logits) -> None:
            token = _sample_token(logits, cfg.temperature, cfg.top_p, rngs[p][j])
            completions[p][j].append(token)
            stats.tokens_decoded += 1
            if token in stops or (strings and strings.ended(completions[p][j])):
                finished[p][j] = True
            elif len(completions[p][j]) < cfg.max_new_tokens:
                active.append((p, j))

        for p, ids in enumerate(prompts):
            seq = p * n
            for start in range(0, len(ids), self.n_batch):
                chunk = ids[start:start + self.n_batch]
                self._decode([(t, start + k, seq, start + k == len(ids) - 1) for k, t in enumerate(chunk)])
                stats.forward_passes += 1
            logits = self._logits(len(ids) - 1 - (len(ids) - 1) // self.n_batch * self.n_batch).copy()
            for j in range(1, n):
                llama_cpp.llama_memory_seq_cp(self.memory, seq, seq + j, -1, -1)
            for j in range(n):
                take(p, j, logits)
        while active:
            if should_stop is not None and should_stop():
                raise GenerationInterrupted(f"{role} rollout stopped")
            rows, active = active, []
            self._decode([(completions[p][j][-1], len(prompts[p]) + len(completions[p][j]) - 1, p * n + j, True)
                          for p, j in rows])
            stats.forward_passes += 1
            for i, (p, j) in enumerate(rows):
                take(p, j, self._logits(i))
        return [[(completions[p][j], finished[p][j]) for j in range(n)] for p in range(len(prompts))]

    def close(self) -> None:
        import llama_cpp

        if getattr(self, "batch", None) is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
        if getattr(self, "ctx", None):
            llama_cpp.llama_free(self.ctx)
            self.ctx = None


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
