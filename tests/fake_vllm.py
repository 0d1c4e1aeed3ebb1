"""A stand-in for the `vllm` package with vLLM 0.30.0's call signatures, for CPU tests.

`install(monkeypatch)` puts modules `vllm`, `vllm.inputs`, `vllm.lora`, `vllm.lora.request`,
`vllm.outputs` and `vllm.logprobs` into `sys.modules`. The classes keep the names,
constructor parameters and methods codea1 uses (`LLM(model, *, ..., **engine_args)`,
`LLM.generate(prompts, sampling_params, *, use_tqdm, lora_request)`, `sleep(level, mode)`,
`wake_up(tags)`, `reset_prefix_cache()`, `apply_model(func)`, `llm_engine.add_lora(request)`,
`SamplingParams(...)`, `LoRARequest(lora_name, lora_int_id, lora_path, ..., load_inplace)`,
`TokensPrompt(prompt_token_ids=...)`) and, where a mistake in codea1 could hide, vLLM's
behaviour:

- an adapter id already loaded is NOT reloaded from disk unless the request says
  `load_inplace=True` (vllm/lora/worker_manager.py `add_adapter`);
- prefix caching keyed by LoRA name and prompt, so cached prefixes computed with old
  weights are reused until `reset_prefix_cache()` or a sleep (vllm/v1/core/kv_cache_utils.py);
- sleep level 2 throws the weights away (here: NaN), so sampling before new weights are
  loaded gives NaN log-probs; sampling while asleep is an error;
- completion token ids include the stop token; finish_reason "stop" or "length"; `stop`
  strings are checked on the detokenized completion (refused without `detokenize`, and
  without the engine's tokenizer), the token that completes one kept in `token_ids`;
  log-probs are the raw log-softmax of the logits (logprobs_mode="raw_logprobs");
- `SamplingParams` checks its arguments as vLLM's `_verify_args` does (n >= 1, temperature
  in [0, 2], top_p in (0, 1], max_tokens >= 1, logprobs >= 0 or -1), raises a temperature
  in (0, 0.01) to 0.01, and below 1e-5 decodes greedily and refuses n > 1
  (`_verify_greedy_sampling`): vllm/sampling_params.py;
- the GPU is a ledger (`GPU`): an `LLM` asks for ceil(total * gpu_memory_utilization) bytes
  and refuses to start when less is free (vllm/v1/worker/utils.py `request_memory`), and
  holds them until its engine core shuts down (`llm_engine.engine_core.shutdown()`);
  dropping the `LLM` object alone frees nothing;
- an adapter with LoRA weights on the embedding or the output head is refused when it is
  loaded (vLLM adapts linear layers only).

It generates with the real (tiny) transformers model and peft adapters read from the
adapter directory, one token at a time without a KV cache.
"""

from __future__ import annotations

import importlib.machinery
import math
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypedDict

import torch

ENGINE_ARGS = {  # keyword arguments vLLM 0.30.0's EngineArgs has that codea1 may pass via **kwargs
    "enable_lora", "max_loras", "max_lora_rank", "max_cpu_loras", "enable_sleep_mode",
    "logprobs_mode", "max_model_len", "distributed_executor_backend",
}
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
LOGPROBS_MODES = ("raw_logits", "raw_logprobs", "processed_logits", "processed_logprobs")


# --- vllm.inputs / vllm.lora.request / vllm.outputs / vllm.logprobs -------------------------


class TokensPrompt(TypedDict, total=False):
    prompt_token_ids: list[int]
    prompt: str


@dataclass(eq=False)
class LoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str = ""
    base_model_name: str | None = None
    tensorizer_config_dict: dict | None = None
    load_inplace: bool = False
    is_3d_lora_weight: bool = False

    def __post_init__(self):
        if self.lora_int_id < 1:
            raise ValueError(f"id must be > 0, got {self.lora_int_id}")
        assert self.lora_path, "lora_path cannot be empty"

    def __eq__(self, other):
        return isinstance(other, LoRARequest) and self.lora_name == other.lora_name

    def __hash__(self):
        return hash(self.lora_name)


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: Sequence[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    routed_experts: Any = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    lora_request: LoRARequest | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int] | None
    prompt_logprobs: Any
    outputs: list[CompletionOutput]
    finished: bool
    lora_request: LoRARequest | None = None


_SAMPLING_EPS = 1e-5   # vllm/sampling_params.py: below it a request is greedy
_MAX_TEMP = 1e-2       # a smaller positive temperature is raised to it


@dataclass(kw_only=True)
class SamplingParams:
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False

    def __post_init__(self) -> None:
        if 0 < self.temperature < _MAX_TEMP:
            self.temperature = _MAX_TEMP
        self._verify_args()
        if self.temperature < _SAMPLING_EPS:  # greedy
            self.top_p, self.top_k, self.min_p = 1.0, 0, 0.0
            if self.n > 1:
                raise ValueError(f"n must be 1 when using greedy sampling, got {self.n}.")

    def _verify_args(self) -> None:
        if not isinstance(self.n, int):
            raise ValueError(f"n must be an int, but is of type {type(self.n)}")
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if not math.isfinite(self.temperature):
            raise ValueError(f"temperature must be a finite number, got {self.temperature}.")
        if self.temperature < 0.0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if self.temperature > 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.logprobs is not None and self.logprobs != -1 and self.logprobs < 0:
            raise ValueError(f"logprobs must be non-negative or -1, got {self.logprobs}.")
        if self.stop and not self.detokenize:
            raise ValueError("stop strings are only supported when detokenize is True. "
                             "Set detokenize=True to use stop.")


# --- the GPU ---------------------------------------------------------------------------------


class FakeGPU:
    """One GPU's memory as vLLM sees it: total bytes and what holders (the trainer's policies,
    engines) keep allocated."""

    def __init__(self, total: int = 80 * 2**30):
        self.total = total
        self.held: dict[object, int] = {}

    def reset(self, total: int = 80 * 2**30) -> None:
        self.total = total
        self.held.clear()

    @property
    def free(self) -> int:
        return self.total - sum(self.held.values())

    def mem_get_info(self) -> tuple[int, int]:
        return self.free, self.total


GPU = FakeGPU()
_MODEL_PARALLEL = {"initialized": False, "destroyed": 0, "world_destroyed": 0}


# --- the engine ------------------------------------------------------------------------------


class _ModelConfig:
    def __init__(self, max_model_len: int):
        self.max_model_len = max_model_len


class _WeightLoader:
    """What `apply_model` hands its function: a model with vLLM's `load_weights`."""

    def __init__(self, engine: "LLM"):
        self._engine = engine

    def load_weights(self, weights):
        eng = self._engine
        if "weights" in eng.asleep:
            raise RuntimeError("load_weights while the weights are asleep (freed memory)")
        params = dict(eng.base.named_parameters())
        loaded = set()
        dtypes = set()
        with torch.no_grad():
            for name, tensor in weights:
                if name not in params:
                    raise KeyError(f"load_weights: unknown weight {name!r}")
                if type(tensor) is not torch.Tensor:  # e.g. an FSDP2 shard (DTensor)
                    raise TypeError(f"load_weights: {name!r} is a {type(tensor).__name__}, not a tensor")
                params[name].copy_(tensor.to(params[name].dtype))
                loaded.add(name)
                dtypes.add(tensor.dtype)
        eng.weight_loads.append(loaded)
        eng.weight_dtypes.append(dtypes)
        return loaded


class _EngineCore:
    """`LLM.llm_engine.engine_core` (the in-process client): holds the engine's GPU memory
    until `shutdown()`."""

    def __init__(self, llm: "LLM"):
        self.llm = llm          # the model, its KV cache: a reference cycle with the LLM
        self.shut_down = False

    def shutdown(self) -> None:
        GPU.held.pop(self, None)
        self.shut_down = True


class _Engine:
    """`LLM.llm_engine`: the LoRA calls and model config."""

    def __init__(self, llm: "LLM"):
        self._llm = llm
        self.model_config = llm.model_config
        self.engine_core = _EngineCore(llm)

    def add_lora(self, lora_request: LoRARequest) -> bool:
        return self._llm._add_adapter(lora_request)

    def list_loras(self) -> set[int]:
        return set(self._llm.adapters)


class LLM:
    def __init__(self, model: str, *, runner: str = "auto", convert: str = "auto",
                 tokenizer: str | None = None, tokenizer_mode: str = "auto",
                 skip_tokenizer_init: bool = False, trust_remote_code: bool = False,
                 allowed_local_media_path: str = "", allowed_media_domains: list[str] | None = None,
                 tensor_parallel_size: int = 1, dtype: str = "auto", quantization: str | None = None,
                 revision: str | None = None, tokenizer_revision: str | None = None,
                 chat_template: str | None = None, seed: int = 0, gpu_memory_utilization: float = 0.92,
                 cpu_offload_gb: float = 0, enforce_eager: bool = False, **kwargs: Any) -> None:
        from transformers import AutoModelForCausalLM

        unknown = set(kwargs) - ENGINE_ARGS
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got unexpected keyword arguments {sorted(unknown)}")
        if kwargs.get("max_lora_rank", 16) not in MAX_LORA_RANKS:
            raise ValueError(f"max_lora_rank {kwargs['max_lora_rank']} not in {MAX_LORA_RANKS}")
        if kwargs.get("logprobs_mode", "raw_logprobs") not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode {kwargs['logprobs_mode']!r}")
        if not 0 < gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must be in (0, 1]")
        requested = math.ceil(GPU.total * gpu_memory_utilization)   # vllm/v1/worker/utils.py request_memory
        if GPU.free < requested:
            raise ValueError(
                f"Free memory on device cuda:0 ({GPU.free / 2**30:.2f}/{GPU.total / 2**30:.2f} GiB) on startup "
                f"is less than desired GPU memory utilization ({gpu_memory_utilization}, "
                f"{requested / 2**30:.2f} GiB). Decrease GPU memory utilization or reduce GPU memory used by "
                "other processes.")
        self.init_args = dict(model=model, tokenizer=tokenizer, skip_tokenizer_init=skip_tokenizer_init,
                              tensor_parallel_size=tensor_parallel_size, dtype=dtype, seed=seed,
                              gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
                              **kwargs)
        self.base = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
        self.base.eval()
        context = self.base.config.max_position_embeddings
        self.model_config = _ModelConfig(int(kwargs.get("max_model_len") or context))
        self.llm_engine = _Engine(self)
        GPU.held[self.llm_engine.engine_core] = requested
        _MODEL_PARALLEL["initialized"] = True
        self.skip_tokenizer_init = skip_tokenizer_init
        self.tokenizer = None   # loaded when a request's stop strings need detokenizing
        self.enable_lora = bool(kwargs.get("enable_lora", False))
        self.max_loras = int(kwargs.get("max_loras", 1))
        self.sleep_mode = bool(kwargs.get("enable_sleep_mode", False))
        self.peft = None
        self.adapters: dict[int, str] = {}          # id -> name, in load order (LRU)
        self.asleep: set[str] = set()
        self.prefix_cache: dict[tuple, torch.Tensor] = {}
        self.calls: list[dict[str, Any]] = []        # every generate call's LoRA and params
        self.lora_loads: list[LoRARequest] = []      # every adapter read from disk
        self.weight_loads: list[set[str]] = []
        self.weight_dtypes: list[set] = []  # dtypes of the tensors each load_weights got
        self.prefix_resets = 0
        self.sleeps: list[int] = []
        self.wakes: list[list[str] | None] = []

    # -- LoRA (vllm/lora/worker_manager.py add_adapter) --------------------------------------

    def _add_adapter(self, request: LoRARequest) -> bool:
        from peft import PeftModel, set_peft_model_state_dict
        from safetensors.torch import load_file

        if not self.enable_lora:
            raise ValueError("LoRA is not enabled (enable_lora=False)")
        if request.lora_int_id in self.adapters and not request.load_inplace:
            self.adapters[request.lora_int_id] = self.adapters.pop(request.lora_int_id)  # touch
            return True
        keys = load_file(f"{request.lora_path}/adapter_model.safetensors").keys()
        unexpected = sorted({k for k in keys if "lora_embedding" in k or "embed_tokens" in k or "lm_head" in k})
        if unexpected:
            raise ValueError(f"While loading {request.lora_path}, expected target modules in the linear layers "
                             f"but received {unexpected}. Please verify that the loaded LoRA module is correct")
        name = request.lora_name
        if self.peft is None:
            from codea1.models import quiet_loading

            with quiet_loading():  # (peft's is_gradient_checkpointing FutureWarning)
                self.peft = PeftModel.from_pretrained(self.base, request.lora_path, adapter_name=name)
            self.peft.eval()
        elif name not in self.peft.peft_config:
            self.peft.load_adapter(request.lora_path, adapter_name=name)
        else:
            state = load_file(f"{request.lora_path}/adapter_model.safetensors")
            set_peft_model_state_dict(self.peft, {k: v.float() for k, v in state.items()}, adapter_name=name)
        self.adapters.pop(request.lora_int_id, None)
        if len(self.adapters) + 1 > max(self.max_loras, 2):
            self.adapters.pop(next(iter(self.adapters)))
        self.adapters[request.lora_int_id] = name
        self.lora_loads.append(request)
        return True

    # -- sampling ---------------------------------------------------------------------------

    def _logits(self, lora: LoRARequest | None, ids: list[int]) -> torch.Tensor:
        x = torch.tensor([ids])
        with torch.no_grad():
            if lora is None:
                if self.peft is not None:
                    with self.peft.disable_adapter():
                        return self.peft(input_ids=x).logits[0, -1].float()
                return self.base(input_ids=x).logits[0, -1].float()
            self.peft.set_adapter(lora.lora_name)
            return self.peft(input_ids=x).logits[0, -1].float()

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None,
                 priority=None, tokenization_kwargs=None, mm_processor_kwargs=None) -> list[RequestOutput]:
        if self.asleep:
            raise RuntimeError(f"generate() while the engine sleeps ({sorted(self.asleep)} not woken)")
        if isinstance(prompts, dict):
            prompts = [prompts]
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params or SamplingParams()] * len(prompts)
        loras = lora_request if isinstance(lora_request, list) else [lora_request] * len(prompts)
        if len(params) != len(prompts) or len(loras) != len(prompts):
            raise ValueError("The lengths of prompts and sampling_params/lora_request must be the same.")
        outputs = []
        for i, (prompt, sp, lora) in enumerate(zip(prompts, params, loras)):
            if sp.detokenize and self.skip_tokenizer_init:
                raise ValueError("Cannot detokenize when skip_tokenizer_init=True")
            if lora is not None:
                self._add_adapter(lora)
            ids = list(prompt["prompt_token_ids"])
            if len(ids) >= self.model_config.max_model_len:
                raise ValueError(f"prompt of {len(ids)} tokens is longer than max_model_len")
            self.calls.append({"lora": lora, "params": sp, "prompt": ids})
            completions = [self._sample(ids, sp, lora, k) for k in range(sp.n)]
            outputs.append(RequestOutput(str(i), None, ids, None, completions[::-1], True, lora))
        return outputs

    def _sample(self, prompt: list[int], sp: SamplingParams, lora, index: int) -> CompletionOutput:
        gen = torch.Generator().manual_seed((sp.seed if sp.seed is not None else 0) + index)
        stops = set(sp.stop_token_ids or ())
        tokens: list[int] = []
        logprobs: list[dict[int, Logprob]] = []
        limit = min(sp.max_tokens or 16, self.model_config.max_model_len - len(prompt))
        reason, stop_reason = "length", None
        key = (lora.lora_name if lora else None, tuple(prompt))
        for step in range(limit):
            if step == 0 and key in self.prefix_cache:
                logits = self.prefix_cache[key]       # a cached prefix: computed earlier
            else:
                logits = self._logits(lora, prompt + tokens)
                if step == 0:
                    self.prefix_cache[key] = logits
            raw = torch.log_softmax(logits, dim=-1)
            if sp.temperature < _SAMPLING_EPS:
                tok = int(logits.argmax())
            else:
                probs = torch.softmax(logits / sp.temperature, dim=-1)
                if sp.top_p < 1:
                    p_sorted, order = probs.sort(descending=True)
                    p_sorted[(p_sorted.cumsum(0) - p_sorted) >= sp.top_p] = 0
                    probs = torch.zeros_like(probs).scatter(0, order, p_sorted)
                tok = int(torch.multinomial(probs, 1, generator=gen))
            tokens.append(tok)
            if sp.logprobs is not None:
                logprobs.append({tok: Logprob(float(raw[tok]), rank=int((raw > raw[tok]).sum()) + 1)})
            if tok in stops:
                reason, stop_reason = "stop", tok
                break
            held = self._stop_string_held(sp, tokens)
            if held is not None:   # the completing token stays in token_ids
                reason, stop_reason = "stop", held
                break
        return CompletionOutput(index=index, text="", token_ids=tokens, cumulative_logprob=None,
                                logprobs=logprobs if sp.logprobs is not None else None,
                                finish_reason=reason, stop_reason=stop_reason if reason == "stop" else None,
                                lora_request=lora)

    def _stop_string_held(self, sp: SamplingParams, tokens: list[int]) -> str | None:
        """The first of `sp.stop` the detokenized completion holds (vLLM's StopChecker)."""
        if not sp.stop:
            return None
        if self.tokenizer is None:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(self.init_args["tokenizer"] or self.init_args["model"])
        text = self.tokenizer.decode(tokens, skip_special_tokens=sp.skip_special_tokens)
        return next((s for s in ([sp.stop] if isinstance(sp.stop, str) else sp.stop) if s in text), None)

    # -- sleep, weights, caches -------------------------------------------------------------

    def sleep(self, level: int = 1, mode: str = "abort"):
        if not self.sleep_mode:
            raise AssertionError("Sleep mode is not enabled in the model config")
        self.sleeps.append(level)
        self.prefix_cache.clear()
        self.asleep = {"weights", "kv_cache"}
        if level >= 2:
            with torch.no_grad():
                for p in self.base.parameters():
                    p.fill_(float("nan"))

    def wake_up(self, tags: list[str] | None = None):
        self.wakes.append(tags)
        self.asleep -= set(tags) if tags is not None else set(self.asleep)

    def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        self.prefix_resets += 1
        self.prefix_cache.clear()
        return True

    def apply_model(self, func: Callable[[Any], Any]) -> list[Any]:
        return [func(_WeightLoader(self))]

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        raise NotImplementedError("the fake vLLM has no workers")


def destroy_model_parallel() -> None:
    _MODEL_PARALLEL["initialized"] = False
    _MODEL_PARALLEL["destroyed"] += 1


def destroy_distributed_environment() -> None:
    _MODEL_PARALLEL["world_destroyed"] += 1


def install(monkeypatch) -> types.ModuleType:
    """Put the fake `vllm` package into `sys.modules` for one test (with an empty 80 GiB GPU)."""
    GPU.reset()
    _MODEL_PARALLEL.update(initialized=False, destroyed=0, world_destroyed=0)
    root = types.ModuleType("vllm")
    root.__spec__ = importlib.machinery.ModuleSpec("vllm", None, is_package=True)
    root.__path__ = []
    root.LLM, root.SamplingParams = LLM, SamplingParams
    root.TokensPrompt = TokensPrompt
    mods = {"vllm": root}
    for name, members in {
        "vllm.inputs": {"TokensPrompt": TokensPrompt},
        "vllm.lora": {},
        "vllm.lora.request": {"LoRARequest": LoRARequest},
        "vllm.outputs": {"RequestOutput": RequestOutput, "CompletionOutput": CompletionOutput},
        "vllm.logprobs": {"Logprob": Logprob},
        "vllm.distributed": {},
        "vllm.distributed.parallel_state": {"destroy_model_parallel": destroy_model_parallel,
                                            "destroy_distributed_environment": destroy_distributed_environment},
    }.items():
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
        mod.__dict__.update(members)
        mods[name] = mod
    root.inputs, root.lora, root.outputs = mods["vllm.inputs"], mods["vllm.lora"], mods["vllm.outputs"]
    root.lora.request = mods["vllm.lora.request"]
    root.distributed = mods["vllm.distributed"]
    root.distributed.parallel_state = mods["vllm.distributed.parallel_state"]
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return root


__all__ = ["LLM", "SamplingParams", "LoRARequest", "TokensPrompt", "RequestOutput", "CompletionOutput",
           "Logprob", "GPU", "FakeGPU", "install"]
