"""The `vllm` rollout engine: one vLLM engine per process, beside the trainer on the same GPU.

- `lora-shared` (and self-play with a LoRA): ONE engine over the frozen base with
  `enable_lora=True, max_loras=2`; each role's requests carry that role's `LoRARequest`.
  After an update the role's adapter is written in the engine's dtype to a RAM-backed
  directory and loaded again in place (`add_lora` with `load_inplace=True`); the base
  never changes.
- `full` / `selfplay` with full weights: the engine's weights are replaced by the active
  role's before that role's rollout (`load_weights` on the engine's model through
  `LLM.apply_model`, then a prefix-cache reset: the pattern of TRL's colocate mode).
- The engine sleeps (`enable_sleep_mode`) while the trainer updates, so training gets the
  memory back; level 2 (full modes) frees the weights too, which are pushed on waking.
- Under torchrun (`WORLD_SIZE` > 1) every rank runs its own engine with vLLM's
  `external_launcher` executor; with `tensor_parallel_size` > 1 the ranks of a
  tensor-parallel group run one engine together, so they pool their prompts (identical
  requests on every rank of the group) and each keeps its own share of the results.

The engine runs in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) so the weights pass from
the trainer to the engine as tensors, never through files or pickles. Samples carry vLLM's
raw (temperature-free) log-probability of each sampled token, which is what the trainer
recomputes, for `rollout/logp_mismatch` and truncated importance sampling.

Written against vLLM 0.30.0's API (the pinned `codea1[vllm]` extra). Tested on CPU with a
stand-in `vllm` module that has vLLM's call signatures (tests/fake_vllm.py); it was not
run against a real vLLM while it was developed (no GPU was available).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import torch
import torch.distributed as dist

from codea1.configs import ROLES, VLLM_EXTRA_HINT, VLLMConfig, check_vllm_lora_targets
from codea1.engines.adapters import export_adapter
from codea1.engines.interface import EngineUnavailable, RolloutEngine
from codea1.models import _converted_dir
from codea1.rollout import GenerationInterrupted, GenerationStats, Sample, SamplingConfig, fit_prompts, stop_token_ids

if TYPE_CHECKING:
    from codea1.models import Policies

# vllm (the codea1[vllm] extra, CUDA only) is imported where it is used, through
# `import_vllm`: it is optional, and this module is imported by `codea1.engines.base` on
# every machine. `torch.distributed.tensor` (DTensor, FSDP2 runs only) stays in
# `whole_tensor`: importing it costs about a second.

# vLLM accepts these LoRA ranks only (vllm.config.lora.MaxLoRARanks)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
ADAPTER_IDS = {"code": 1, "test": 2, "shared": 3}
# left free between the memory measured here and vLLM's own measurement when it starts
GPU_HEADROOM_BYTES = 512 * 2**20
# besides its weights, an engine needs room for activations and at least a small KV cache
ENGINE_EXTRA_BYTES = 2**30
GIB = 2**30

log = logging.getLogger(__name__)


def gpu_memory(device: "torch.device") -> tuple[int, int] | None:
    """(free, total) bytes of a CUDA device, after handing this process's cached but unused
    blocks back to the driver (vLLM empties the cache too before it measures); None elsewhere."""

    if torch.device(device).type != "cuda":
        return None
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info(device)


def fit_gpu_memory_utilization(wanted: float, free: int, total: int, weight_bytes: int) -> float:
    """The share of the GPU the engine asks vLLM for: `wanted`, or less when the GPU already
    holds other things (the trainer's policies): vLLM refuses to start when the free memory
    is below `ceil(total * share)`. EngineUnavailable when even all that is free cannot hold
    the weights plus a minimal KV cache."""
    room = free - GPU_HEADROOM_BYTES
    if math.ceil(total * wanted) <= room:
        return wanted
    share = math.floor(room / total * 1000) / 1000
    needed = weight_bytes + ENGINE_EXTRA_BYTES
    if share * total < needed:
        raise EngineUnavailable(
            f"gpu_memory_utilization: the GPU has {free / GIB:.1f} of {total / GIB:.1f} GiB free, and the vLLM "
            f"engine needs at least {needed / GIB:.1f} GiB ({weight_bytes / GIB:.1f} GiB of weights, a KV cache); "
            "free GPU memory (a smaller model, fewer processes on this GPU) or use the hf engine")
    log.warning("vLLM engine: gpu_memory_utilization lowered from %s to %s (%.1f of %.1f GiB free)",
                wanted, share, free / GIB, total / GIB)
    return share


def engine_weight_bytes(policies: "Policies", dtype: "torch.dtype") -> int:
    """Bytes of the weights the engine loads: the base model's parameters (not the LoRA
    adapters) in the engine's dtype. An FSDP2 shard counts its whole tensor."""

    size = torch.empty((), dtype=dtype).element_size()
    return sum(p.numel() for name, p in policies.module("code").named_parameters() if "lora_" not in name) * size


def import_vllm():
    """The `vllm` module, or one clear line saying how to install it."""
    try:
        import vllm
    except ImportError as exc:
        raise EngineUnavailable(
            f"rollout.engine=vllm: vLLM cannot be imported ({exc}); install it on a CUDA machine "
            f"with {VLLM_EXTRA_HINT}, or use rollout.engine=hf") from None
    return vllm


def engine_model_path(policies: "Policies") -> str:
    """What vLLM loads: the hub id or directory of the policies' model (a GGUF's converted copy)."""
    resolved = policies.resolved
    if resolved is None:
        raise EngineUnavailable("rollout.engine=vllm: the policies were built from an in-memory "
                                "model; vLLM needs a model name or directory")
    if resolved.gguf_file is None:
        return resolved.source

    converted = _converted_dir(resolved, policies.dtype)
    if (converted / "codea1-converted.json").is_file():
        return str(converted)
    raise EngineUnavailable(f"rollout.engine=vllm: {resolved.describe()} is a GGUF file whose "
                            f"safetensors copy ({converted}) is missing; load it once with the hf "
                            "engine to write it, or give a Hugging Face model")


def lora_rank_for_vllm(rank: int) -> int:
    """The smallest `max_lora_rank` vLLM accepts that holds `rank`."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise EngineUnavailable(f"model.lora_r={rank}: vLLM supports LoRA ranks up to {VLLM_LORA_RANKS[-1]}")


def whole_tensor(param: "torch.Tensor") -> "torch.Tensor":
    """A parameter's whole value, detached: an FSDP2 shard (a DTensor, when the push runs
    outside `gathered()`) is all-gathered first, so the engine never gets one rank's slice."""
    from torch.distributed.tensor import DTensor

    value = param.detach()
    return value.full_tensor() if isinstance(value, DTensor) else value


def _dtype_name(dtype: "torch.dtype") -> str:
    return str(dtype).removeprefix("torch.")


class VLLMEngine(RolloutEngine):
    """One in-process vLLM engine serving both roles (see the module docstring)."""

    name = "vllm"
    reports_logprobs = True

    def __init__(self, policies: "Policies", cfg: VLLMConfig, *, llm_kwargs: dict[str, Any] | None = None,
                 dtype: "torch.dtype | None" = None) -> None:
        self.lora = policies.lora
        if self.lora:
            check_vllm_lora_targets(policies.config.lora_target_modules, "model.lora_target_modules")
        vllm = import_vllm()
        self.llm = None
        self.policies = policies
        self.cfg = cfg
        self.dtype = dtype or policies.dtype
        level = cfg.sleep_level
        if level == "auto":
            level = 1 if self.lora else 2
        if self.lora and level == 2:
            raise ValueError("rollout.vllm.sleep_level=2 frees the engine's base weights, which LoRA "
                             "modes never push again: use 0 or 1 (or auto)")
        self.sleep_level = int(level)
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        tp = cfg.tensor_parallel_size
        if tp > 1 and self.world_size % tp:
            raise EngineUnavailable(f"rollout.vllm.tensor_parallel_size={tp} does not divide the "
                                    f"{self.world_size} processes of this run (launch with torchrun "
                                    f"--nproc-per-node a multiple of {tp})")
        if tp > 1 and self.world_size == 1:
            raise EngineUnavailable(f"rollout.vllm.tensor_parallel_size={tp}: launch the run with "
                                    f"torchrun --nproc-per-node {tp} (one process per GPU of the engine)")
        # in-process engine: the trainer's tensors reach the engine's model directly
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        share = cfg.gpu_memory_utilization
        measured = gpu_memory(policies.device)
        if measured is not None:
            share = fit_gpu_memory_utilization(share, *measured, engine_weight_bytes(policies, self.dtype))
        self.gpu_memory_utilization = share

        # a process group vLLM starts itself (one process) is torn down with the engine
        self._owns_process_group = not dist.is_initialized()
        kwargs: dict[str, Any] = dict(
            model=engine_model_path(policies),
            dtype=_dtype_name(self.dtype),
            seed=cfg.seed,
            gpu_memory_utilization=share,
            tensor_parallel_size=tp,
            enable_sleep_mode=self.sleep_level > 0,
            enforce_eager=cfg.enforce_eager,
            # prompts arrive as token ids and completions are decoded here; the engine's own
            # tokenizer detokenizes only where the sampling config has `stop` strings to check
            skip_tokenizer_init=False,
            logprobs_mode="raw_logprobs",    # before temperature/top-p: what the trainer recomputes
        )
        if cfg.max_model_len is not None:
            kwargs["max_model_len"] = cfg.max_model_len
        if self.world_size > 1:
            kwargs["distributed_executor_backend"] = "external_launcher"
        if self.lora:
            kwargs.update(enable_lora=True, max_loras=2, max_cpu_loras=2,
                          max_lora_rank=lora_rank_for_vllm(policies.config.lora_r))
        kwargs.update(llm_kwargs or {})
        self.llm = vllm.LLM(**kwargs)
        self.max_model_len = int(self.llm.model_config.max_model_len)
        self._asleep = False
        self._loaded: str | None = None          # full modes: whose weights the engine holds
        self._stale: set[str] = set(policies.weight_keys)  # engine copy older than the trainer's
        self._adapter_root: Path | None = None
        self._tp_group = self._make_tp_group(tp) if tp > 1 else None
        self.syncs: dict[str, int] = {}          # weight key -> times pushed (for tests and logs)

    # ------------------------------------------------------------------ weights

    def _key(self, role: str) -> str:
        return "shared" if self.policies.mode == "selfplay" else role

    def weights_changed(self, keys: Iterable[str]) -> None:
        self._stale.update(keys)

    def release_memory(self) -> None:
        if self.sleep_level and not self._asleep:
            self.llm.sleep(level=self.sleep_level)
            self._asleep = True
            if self.lora:
                # the adapters' GPU copies are not guaranteed across a sleep: load them on waking
                self._stale.update(self.policies.weight_keys)

    def _adapter_path(self, key: str) -> Path:
        if self._adapter_root is None:
            base = self.cfg.adapter_dir or ("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
            self._adapter_root = Path(base) / f"codea1-adapters-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            self._adapter_root.mkdir(parents=True, exist_ok=False)
        return self._adapter_root / key

    def _lora_request(self, key: str, *, load_inplace: bool = False):
        from vllm.lora.request import LoRARequest

        return LoRARequest(
            lora_name=key, lora_int_id=ADAPTER_IDS[key], lora_path=str(self._adapter_path(key)),
            load_inplace=load_inplace)

    def _push_adapter(self, key: str) -> None:
        role = "code" if key == "shared" else key
        export_adapter(self.policies.module(role), key, self._adapter_path(key), self.dtype)
        # load_inplace: replace the adapter of this id even though one is loaded already
        self.llm.llm_engine.add_lora(self._lora_request(key, load_inplace=True))

    def _push_weights(self, key: str) -> None:
        role = "code" if key == "shared" else key
        dtype = self.dtype
        params = list(self.policies.module(role).named_parameters())

        def load(model) -> None:
            model.load_weights(weights=((name, whole_tensor(p).to(dtype)) for name, p in params))

        self.llm.apply_model(load)
        self._loaded = key

    def _prepare(self, role: str) -> None:
        """Wake the engine and bring `role`'s weights up to date in it."""
        key = self._key(role)
        pushed = False
        if self.lora:
            if self._asleep:
                self.llm.wake_up()
                self._asleep = False
            if key in self._stale:
                self._push_adapter(key)
                pushed = True
        elif self._asleep and self.sleep_level == 2:
            # level 2 freed the weights: restore them before the KV cache takes the memory
            self.llm.wake_up(tags=["weights"])
            self._push_weights(key)
            self.llm.wake_up(tags=["kv_cache"])
            self._asleep = False
            pushed = True
        else:
            if self._asleep:
                self.llm.wake_up()
                self._asleep = False
            if self._loaded != key or key in self._stale:
                self._push_weights(key)
                pushed = True
        if pushed:
            # cached prefixes were computed with the old weights (vLLM keys them by LoRA name only)
            self.llm.reset_prefix_cache()
            self._stale.discard(key)
            self.syncs[key] = self.syncs.get(key, 0) + 1

    # ------------------------------------------------------------------ sampling

    def generate(self, role: str, prompt_ids: Sequence[Sequence[int]], n: int = 1,
                 sampling: "SamplingConfig | None" = None, *,
                 generator: "torch.Generator | None" = None,
                 seeds: Sequence[int] | None = None,
                 stats: "GenerationStats | None" = None,
                 should_stop: Callable[[], bool] | None = None) -> list[list["Sample"]]:
        """See `RolloutEngine.generate`; `should_stop` is polled before the batch starts."""

        cfg = sampling or SamplingConfig()
        if n < 0:
            raise ValueError(f"n={n}: expected a non-negative number of samples per prompt")
        if role not in ROLES:
            raise ValueError(f"role {role!r}: expected one of {', '.join(ROLES)}")
        stats = stats if stats is not None else GenerationStats()
        if n == 0 or (not prompt_ids and self._tp_group is None):
            return [[] for _ in prompt_ids]   # a tensor-parallel peer joins its group's call even with none
        if should_stop is not None and should_stop():
            raise GenerationInterrupted("stopped before the vLLM rollout started")
        started = time.perf_counter()
        ids, cut = fit_prompts([list(p) for p in prompt_ids], cfg, self.max_model_len, stats)
        stats.prompts += len(ids)
        stats.prompts_truncated += sum(cut)
        if seeds is not None:
            if len(seeds) != len(ids):
                raise ValueError(f"seeds: {len(seeds)} given for {len(ids)} prompts (one a prompt)")
            base_seed = None
        elif generator is not None:
            base_seed = int(torch.randint(0, 2**30, (1,), generator=generator))
        elif cfg.seed is not None:
            base_seed = cfg.seed
        else:
            base_seed = int(torch.randint(0, 2**30, (1,)))
        stops = sorted(stop_token_ids(self.policies.tokenizer, self.policies.module(role)))
        # one seed a prompt; vLLM gives the n samples of a request seeds seed + 0..n-1
        if base_seed is not None:
            seeds = [base_seed + i * n for i in range(len(ids))]
        else:  # vLLM takes 64-bit seeds as ints; keep them in its (signed) range
            seeds = [int(s) % 2**62 for s in seeds]
        if self._tp_group is not None:
            outputs = self._generate_tp(role, ids, seeds, n, cfg, stops)
        else:
            self._prepare(role)
            outputs = self._run(role, ids, seeds, n, cfg, stops)
        out = samples_from_outputs(outputs, ids, cut, n, self.policies.tokenizer, stats)
        stats.seconds += time.perf_counter() - started
        return out

    def _run(self, role: str, ids: list[list[int]], seeds: list[int], n: int, cfg, stops: list[int]):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        # vLLM decodes greedily at temperature 0 and then refuses n > 1: the n samples of a
        # greedy request are one completion, copied (what the hf engine returns too)
        greedy = cfg.temperature == 0
        params = [SamplingParams(n=1 if greedy else n, temperature=cfg.temperature, top_p=cfg.top_p,
                                 max_tokens=cfg.max_new_tokens, seed=seed, logprobs=0,
                                 stop_token_ids=stops, **stop_string_params(cfg.stop))
                  for seed in seeds]
        lora = self._lora_request(self._key(role)) if self.lora else None
        prompts = [TokensPrompt(prompt_token_ids=p) for p in ids]
        outputs = self.llm.generate(prompts, params, use_tqdm=False, lora_request=lora)
        if greedy and n > 1:
            for out in outputs:
                out.outputs = [dataclasses.replace(out.outputs[0], index=i) for i in range(n)]
        return outputs

    # ------------------------------------------------------------------ tensor parallel

    def _make_tp_group(self, tp: int):
        if not dist.is_initialized():
            raise EngineUnavailable("rollout.vllm.tensor_parallel_size > 1 needs torch.distributed "
                                    "initialised (launch the run with torchrun)")
        group, _ = dist.new_subgroups_by_enumeration(
            [list(range(start, start + tp)) for start in range(0, self.world_size, tp)])
        return group

    def _generate_tp(self, role, ids, seeds, n, cfg, stops):
        """Every rank of a tensor-parallel group sends the group's pooled prompts; each keeps its own."""

        size = dist.get_world_size(self._tp_group)
        pooled: list[Any] = [None] * size
        dist.all_gather_object(pooled, (ids, seeds), group=self._tp_group)
        all_ids = [p for part, _ in pooled for p in part]
        all_seeds = [s for _, part in pooled for s in part]
        if not all_ids:
            return []
        self._prepare(role)
        outputs = self._run(role, all_ids, all_seeds, n, cfg, stops)
        me = dist.get_rank(self._tp_group)
        start = sum(len(part) for part, _ in pooled[:me])
        return outputs[start:start + len(ids)]

    def close(self) -> None:
        """Remove the adapter files and give the engine's GPU memory back, so that another
        engine (or the trainer) in this process can have it: dropping the `LLM` alone leaves
        its weights and KV cache allocated (the engine core holds them until it shuts down)."""
        if getattr(self, "_adapter_root", None) is not None:
            shutil.rmtree(self._adapter_root, ignore_errors=True)
            self._adapter_root = None
        llm, self.llm = getattr(self, "llm", None), None
        if llm is None:
            return
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()
        del llm, core
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        if self._owns_process_group:  # never the trainer's (torchrun) process group
            destroy_distributed_environment()
        gc.collect()

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def stop_string_params(stop: Sequence[str]) -> dict[str, Any]:
    """SamplingParams keywords for the sampling config's `stop` strings: vLLM checks them on
    its detokenized text (so it detokenizes only when there are some), and ends the request
    with finish_reason "stop" and the completing token kept in `token_ids`, as the other
    engines keep it."""
    if not stop:
        return {"detokenize": False}
    return {"detokenize": True, "stop": list(stop), "include_stop_str_in_output": True}


def samples_from_outputs(outputs: Sequence[Any], prompt_ids: list[list[int]], cut: list[bool], n: int,
                         tokenizer, stats: "GenerationStats") -> list[list["Sample"]]:
    """vLLM `RequestOutput`s (one per prompt, in order) as `Sample`s, counted into `stats`.

    finish_reason "stop" (EOS or a stop token, which vLLM keeps in `token_ids`) is a
    finished completion; "length" (max_tokens or the context) a truncated one; anything
    else (an aborted request) is an error, never a silent sample.
    """

    if len(outputs) != len(prompt_ids):
        raise RuntimeError(f"vLLM returned {len(outputs)} results for {len(prompt_ids)} prompts")
    result: list[list[Sample]] = []
    for p, out in enumerate(outputs):
        completions = sorted(out.outputs, key=lambda c: c.index)
        if len(completions) != n:
            raise RuntimeError(f"vLLM returned {len(completions)} completions for prompt {p}, expected {n}")
        samples = []
        for c in completions:
            tokens = [int(t) for t in c.token_ids]
            if c.finish_reason not in ("stop", "length"):
                raise RuntimeError(f"vLLM ended completion {c.index} of prompt {p} with finish_reason "
                                   f"{c.finish_reason!r}: expected 'stop' or 'length'")
            if c.logprobs is None or len(c.logprobs) != len(tokens):
                got = "none" if c.logprobs is None else len(c.logprobs)
                raise RuntimeError(f"vLLM returned {got} log-probs for the {len(tokens)} tokens of "
                                   f"completion {c.index} of prompt {p} (requested logprobs=0)")
            logprobs = [float(position[t].logprob) for position, t in zip(c.logprobs, tokens)]
            finished = c.finish_reason == "stop"
            text = tokenizer.decode(tokens, skip_special_tokens=True)
            samples.append(Sample(prompt_ids=list(prompt_ids[p]), completion_ids=tokens, text=text,
                                  truncated=not finished, finished=finished, prompt_truncated=cut[p],
                                  logprobs=logprobs))
            stats.completion_tokens += len(tokens)
            stats.prompt_tokens += len(prompt_ids[p])
            stats.completions_truncated += int(not finished)
            stats.empty_completions += int(not text.strip())
        stats.samples += len(samples)
        result.append(samples)
    return result
