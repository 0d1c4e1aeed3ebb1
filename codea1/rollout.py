"""The spec's prompts and fast batched sampling that keeps the token ids for the update.

`generate` is a hand-written sampling loop over a KV cache rather than `model.generate`
because on a CPU the wins come from things `generate` does not do: the prompt of a
problem is encoded once and its KV cache shared by its `n` samples; batches are wide
(64 rows) with prompts sorted by length to keep left padding small; finished rows are
dropped from the batch (and their cache) as they end, so late steps stay cheap.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, Union

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

if TYPE_CHECKING:
    from codea1.models import Policies

from codea1.configs import SamplingConfig  # torch-free settings, re-exported here
from codea1.data.stdin_io import is_stdin, stdin_code_messages, stdin_test_messages
from codea1.lean_forward import KVCache, LeanModel, unsupported

Message = Mapping[str, str]
Prompt = Union[Sequence[Message], str, Sequence[int]]  # chat messages, raw text or token ids

# --- prompts (our wording in the reference implementation's structure, see CODE_A1_SPEC.md) ----

CODE_SYSTEM = "You are a helpful code-completion assistant."
CODE_INSTRUCTION = (
    "Complete the Python function described by the question below. Output the complete "
    "function (with any imports it needs) inside one ```python code block and nothing else."
)
TEST_SYSTEM = "You are a helpful test-generation assistant."
TEST_COUNT = 8


def _get(problem: Any, name: str) -> str:
    value = problem.get(name) if isinstance(problem, Mapping) else getattr(problem, name, None)
    if not isinstance(value, str):
        raise ValueError(f"problem field {name!r}: expected a string, got {type(value).__name__}")
    return value


def row_prompt(problem: Any) -> list[dict[str, str]] | None:
    """The chat prompt the problem's data row carries (`meta["prompt"]`: the `prompt`
    column of the paper's parquet rows), or None. A malformed one is an error naming the
    problem, not silently replaced by ours."""
    meta = problem.get("meta") if isinstance(problem, Mapping) else getattr(problem, "meta", None)
    prompt = meta.get("prompt") if isinstance(meta, Mapping) else None
    if prompt is None:
        return None
    pid = problem.get("id") if isinstance(problem, Mapping) else getattr(problem, "id", "?")
    if (not isinstance(prompt, Sequence) or isinstance(prompt, str) or not prompt
            or not all(isinstance(m, Mapping) and isinstance(m.get("role"), str)
                       and isinstance(m.get("content"), str) for m in prompt)):
        raise ValueError(f"problem {pid}: meta.prompt: expected a list of chat messages "
                         f"({{role, content}} strings), got {prompt!r:.80}")
    return [{"role": m["role"], "content": m["content"]} for m in prompt]


def code_messages(problem: Any, own_prompt: bool = True) -> list[dict[str, str]]:
    """Chat messages asking the code model to complete the problem's function.

    The row's own prompt where the data has one (the reference uses the paper rows'
    `prompt` column as is, in training and validation); else, or with `own_prompt=False`
    (`rollout.project_code_prompt`), our wording of the reference's instruction.
    """
    if own_prompt:
        messages = row_prompt(problem)
        if messages is not None:
            return messages
    question = _get(problem, "question").strip()
    if is_stdin(problem):  # a complete program that reads standard input (codea1.data.stdin_io)
        return stdin_code_messages(question)
    return [
        {"role": "system", "content": CODE_SYSTEM},
        {"role": "user", "content": f"{CODE_INSTRUCTION}\n\nQuestion:\n{question}"},
    ]


def _test_question(problem: Any) -> str:
    """The problem text the test model reads: the row's `clean_description` where the data
    has one (the field the reference's test prompt shows), else the code model's question."""
    meta = problem.get("meta") if isinstance(problem, Mapping) else getattr(problem, "meta", None)
    clean = meta.get("clean_description") if isinstance(meta, Mapping) else None
    return clean.strip() if isinstance(clean, str) and clean.strip() else _get(problem, "question").strip()


def test_messages(problem: Any, code: str | None = None, white_box: bool = True,
                  n_tests: int = TEST_COUNT) -> list[dict[str, str]]:
    """Chat messages asking the test model for `n_tests` assert tests.

    Our own wording in the reference prompt's structure: Role, Task, Strategy, Context
    (the question, then the candidate labelled as code that may be wrong), Output format.
    White-box (the default, the paper's setting): the candidate `code` is shown, labelled
    as buggy code (the reference tells the model so, whether or not it is), and the model
    is asked to attack it. Black-box (`white_box=False`): the code is not shown.
    """
    if white_box and code is None:
        raise ValueError("test_messages: white_box=True needs the candidate code")
    return _kind_test_prompt(problem, _test_question(problem), code, white_box, n_tests)


def _kind_test_prompt(problem: Any, question: str, code: str | None, white_box: bool,
                      n_tests: int) -> list[dict[str, str]]:
    """The test prompt for the problem's kind: asserts on its function, or input/output
    pairs for a stdin problem (codea1.data.stdin_io)."""
    if is_stdin(problem):
        return stdin_test_messages(question, code, white_box, n_tests)
    return _test_prompt(question, _get(problem, "entry_point").strip(), code, white_box, n_tests)


def _test_prompt(question: str, fn: str, code: str | None, white_box: bool, n_tests: int) -> list[dict[str, str]]:
    form = f"assert {fn}(parameters) == answer"
    if white_box:
        role = ("You find inputs on which the `Buggy code` does not do what the `Question` "
                "requires.")
        task = (f"Write {n_tests} tests of the form `{form}` that expose the bugs of the function in "
                "`Buggy code`, judged against the `Question`.")
        gaps = ("1. **Logic gaps**: find where the `Buggy code` is simpler than the `Question` "
                "(missing constraints, misread rules, over-simplified logic) and choose inputs "
                "that land there.")
    else:
        role = "You write tests that check whether a solution does what the `Question` requires."
        task = f"Write {n_tests} tests of the form `{form}` for the function the `Question` describes."
        gaps = ("1. **Likely mistakes**: choose inputs where a solution is easily wrong (edge cases, "
                "easily misread rules, constraints that are easy to miss).")
    strategy = "\n".join([
        gaps,
        "2. **Complex inputs first**: prefer boundary values, nested data, compound conditions and "
        "rare branches to simple inputs; stress every branch.",
        "3. **No redundancy**: no trivial or repeated tests. Only the first few tests are "
        "evaluated, so order them by how much they reveal.",
    ])
    context = f"Question:\n{question}"
    if white_box:
        context += f"\n\nBuggy code:\n```python\n{code.rstrip()}\n```"
    output = ("Put ALL the assert statements in ONE ```python code block, one per line.\n"
              f"Format: `{form}`")
    user = "\n\n".join([f"# Role\n{role}", f"# Task\n{task}", f"# Strategy\n{strategy}",
                         f"# Context\n{context}", f"# Output format\n{output}"])
    return [
        {"role": "system", "content": TEST_SYSTEM},
        {"role": "user", "content": user},
    ]


test_messages.__test__ = False  # not a pytest test, though its name starts with "test"


# --- sampling -------------------------------------------------------------------------------------


@dataclass
class Sample:
    """One completion. `truncated`: stopped by max_new_tokens; `finished`: ended with EOS.

    `completion_ids` includes the final EOS token when `finished` (the update trains the
    model to stop); `text` is the decoded completion without special tokens.
    `logprobs`: the sampler's log-probability of each completion token where the rollout
    engine reports them (vLLM), checked against the trainer's (`codea1.engines.correction`).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    truncated: bool
    finished: bool
    prompt_truncated: bool = False
    logprobs: list[float] | None = None


@dataclass
class GenerationStats:
    """Counters of one `generate` call (added to when an instance is passed in)."""

    prompts: int = 0
    samples: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompts_truncated: int = 0
    completions_truncated: int = 0
    empty_completions: int = 0
    seconds: float = 0.0
    forward_passes: int = 0
    prompt_tokens_dropped: int = 0
    prompts_shortened: int = 0  # test prompts whose candidate code was cut to fit (`fit_test_prompt`)
    tokens_decoded: int = 0  # grows as decoding goes (the live display reads it mid-call)
    prefill_tokens: int = 0  # prompt tokens run through the model (each prompt once a chunk)
    decode_passes: int = 0   # one-token forward passes (each reads every weight once)

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        """Flat numbers for the metrics log, names prefixed (e.g. "rollout/code/")."""
        values = {k: float(v) for k, v in asdict(self).items()}
        values["tokens_per_s"] = self.tokens_per_s
        return {prefix + k: v for k, v in values.items()}


def stop_token_ids(tokenizer, model=None) -> set[int]:
    """Every id that ends a completion: EOS, the chat end token, the generation config's EOS."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    for token in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"):
        if token in vocab:
            ids.add(int(vocab[token]))
    gen_cfg = getattr(model, "generation_config", None)
    eos = getattr(gen_cfg, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(i) for i in eos)
    return ids


def encode_prompts(tokenizer, prompts: Sequence[Prompt]) -> list[list[int]]:
    """Token ids of each prompt: chat messages through the chat template, strings as they
    are, token ids (a list of ints, as the rollout engines take them) unchanged."""
    encoded: list[list[int]] = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        elif isinstance(prompt, Sequence) and prompt and all(isinstance(t, int) for t in prompt):
            ids = list(prompt)
        elif isinstance(prompt, Sequence) and all(isinstance(m, Mapping) for m in prompt) and prompt:
            text = tokenizer.apply_chat_template(
                [dict(m) for m in prompt], add_generation_prompt=True, tokenize=False
            )
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            raise ValueError(f"prompt {i}: expected a list of chat messages, a string or token ids, "
                             f"got {prompt!r:.80}")
        if not ids:
            raise ValueError(f"prompt {i}: encodes to no tokens")
        encoded.append(list(ids))
    return encoded


def context_length(model) -> int | None:
    """The model's context in tokens, from its config (None: not stated)."""
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


class PromptTooLong(ValueError):
    """A prompt is longer than its limit; prompts are never cut from the left by default."""


def prompt_limit(cfg: SamplingConfig, context: int | None) -> int | None:
    """The longest prompt `cfg` allows: `max_prompt_tokens`, and no more than the model's
    `context` leaves beside `max_new_tokens` (None: no limit known)."""
    limit = cfg.max_prompt_tokens
    if context:
        room = max(1, context - cfg.max_new_tokens)
        limit = room if limit is None else min(limit, room)
    return limit


def fit_prompts(encoded: Sequence[list[int]], cfg: SamplingConfig, context: int | None,
                stats: GenerationStats) -> tuple[list[list[int]], list[bool]]:
    """Check every prompt against `prompt_limit`; returns the ids and which were cut.

    A longer prompt is an error (`PromptTooLong`): cutting it from the left, as
    `cfg.cut_prompts_left` does, would remove its system message and task. Every rollout
    engine applies this one rule, so all see the same prompts.
    """
    limit = prompt_limit(cfg, context)
    prompt_ids: list[list[int]] = []
    cut: list[bool] = []
    for i, ids in enumerate(encoded):
        if limit is not None and len(ids) > limit:
            if not cfg.cut_prompts_left:
                raise PromptTooLong(
                    f"prompt {i}: {len(ids)} tokens, over the limit of {limit} (max_prompt_tokens="
                    f"{cfg.max_prompt_tokens}, model context {context} minus max_new_tokens="
                    f"{cfg.max_new_tokens}); a prompt is never cut from the left: shorten it or drop "
                    "it from the data (or set cut_prompts_left=true)")
            stats.prompt_tokens_dropped += len(ids) - limit
            ids = ids[len(ids) - limit:]
            cut.append(True)
        else:
            cut.append(False)
        prompt_ids.append(list(ids))
    return prompt_ids, cut


CUT_MARK = "# ... (cut: too long for the prompt)"
QUESTION_CUT_MARK = "... (cut: too long for the prompt)"


def fit_test_prompt(tokenizer, problem: Any, code: str | None, limit: int | None, *,
                    white_box: bool = True, n_tests: int = TEST_COUNT) -> tuple[list[int], bool]:
    """The test prompt's token ids, fitted to `limit` without losing its head; and
    whether it had to be shortened.

    The reference never cuts a prompt (its verl data path raises on an over-long one,
    8,192 tokens for the test model). So that one long candidate cannot end a run, an
    over-long test prompt keeps its system message, Role, Task, Strategy and Output
    format, and loses the tail of the candidate's code (marked as cut: `CUT_MARK`), then,
    if that is not enough, the tail of the question. Only a limit too small for the fixed
    parts alone is an error.
    """
    if white_box and code is None:
        raise ValueError("fit_test_prompt: white_box=True needs the candidate code")
    parts = {"question": _test_question(problem), "code": code if white_box else None}

    def encode() -> list[int]:
        return encode_prompts(tokenizer, [_kind_test_prompt(problem, parts["question"], parts["code"], white_box,
                                                            n_tests)])[0]

    ids = encode()
    if limit is None or len(ids) <= limit:
        return ids, False
    for part, mark in (("code", CUT_MARK), ("question", QUESTION_CUT_MARK)):
        if not parts[part]:
            continue
        # keep a prefix of the part's own tokens, then the mark on a line of its own (the mark
        # alone when nothing is left); the prefix shrinks at every try, so this ends
        base = tokenizer(parts[part], add_special_tokens=False)["input_ids"]
        keep = len(base) - len(tokenizer(mark, add_special_tokens=False)["input_ids"]) - 1
        while len(ids) > limit and keep > 0:
            keep -= len(ids) - limit
            parts[part] = tokenizer.decode(base[:keep]).rstrip() + "\n" + mark if keep > 0 else mark
            ids = encode()
        if len(ids) <= limit:
            return ids, True
    raise PromptTooLong(f"test prompt of problem {getattr(problem, 'id', '?')}: its fixed parts alone take "
                        f"{len(ids)} tokens, over the limit of {limit} (rollout.test.max_prompt_tokens, or "
                        "the model's context minus max_new_tokens)")


def split_overlong(problems: Sequence[Any], tokenizer, limit: int | None,
                   own_prompt: bool = True) -> tuple[list[Any], list[Any]]:
    """(kept, dropped): the problems whose code prompt fits `limit` tokens and those that
    do not, in order, as the reference's data filter drops over-long prompts."""
    if limit is None:
        return list(problems), []
    kept, dropped = [], []
    for p in problems:
        n = len(encode_prompts(tokenizer, [code_messages(p, own_prompt)])[0])
        (kept if n <= limit else dropped).append(p)
    return kept, dropped


def derive_seed(*parts: Any) -> int:
    """A 63-bit seed from the parts (e.g. run seed, step, role, problem slot, sample).

    Training seeds every sample's stream from where the sample sits in the step, not from
    a stream shared by the batch, so a sample is the same whichever rank draws it and
    whatever else is batched with it (1 rank or N ranks sample identically).
    """

    digest = hashlib.blake2b(repr(tuple(parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def sample_seeds(seed: int, step: int, role: str, places: Sequence[tuple]) -> list[int]:
    """One stream seed per prompt from where it sits in the step (`derive_seed`)."""
    return [derive_seed(seed, step, role, *place) for place in places]


def _row_uniforms(generators: "Sequence[torch.Generator]", like: "torch.Tensor") -> "torch.Tensor":
    """One uniform number per row, each from its own (CPU) generator, shaped [B, 1] as `like`."""

    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in generators])
    return u.to(device=like.device, dtype=like.dtype).unsqueeze(-1)


def sample_next(logits: "torch.Tensor", temperature: float, top_p: float,
                generator: "torch.Generator | Sequence[torch.Generator] | None") -> "torch.Tensor":
    """Draw one token per row from float logits [B, V] (greedy when temperature is 0).

    `generator` is one generator for the batch, or a list of one generator per row.
    """

    if temperature == 0.0:
        return logits.argmax(dim=-1)
    if temperature == 1.0:  # the same numbers as below (x / 1.0 == x), one pass over the vocabulary fewer
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    else:
        probs = torch.softmax(logits.float() / temperature, dim=-1)
    order = None
    if top_p < 1.0:
        probs, order = probs.sort(dim=-1, descending=True)
        # keep the smallest prefix whose mass reaches top_p (the first token always stays)
        probs = probs.masked_fill((probs.cumsum(dim=-1) - probs) >= top_p, 0.0)
    # inverse-CDF draw: one uniform number a row (torch.multinomial draws one a vocabulary entry)
    cumulative = probs.cumsum(dim=-1)
    if isinstance(generator, (list, tuple)):
        u = _row_uniforms(generator, cumulative[:, :1])
    else:
        u = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=cumulative.dtype)
    picked = torch.searchsorted(cumulative, u * cumulative[:, -1:], right=True)
    picked = picked.clamp_(max=probs.shape[-1] - 1)
    # a zero-probability entry can only be hit at the float edge: step back to a live one
    dead = probs.gather(-1, picked) == 0
    if bool(dead.any()):
        live_last = (probs > 0).long().cumsum(-1).argmax(-1, keepdim=True)
        picked = torch.where(dead, torch.minimum(picked, live_last), picked)
    if order is not None:
        picked = order.gather(-1, picked)
    return picked.squeeze(-1)


def _plan_chunks(order: list[int], n: int, batch_size: int) -> list[list[tuple[int, int]]]:
    """Group (prompt, sample count) pieces into chunks of at most `batch_size` rows.

    A prompt's samples stay together (they share one prefill) unless `n > batch_size`.
    """
    chunks: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    rows = 0
    for p in order:
        remaining = n
        while remaining > 0:
            take = min(remaining, batch_size)
            if rows + take > batch_size and current:
                chunks.append(current)
                current, rows = [], 0
            current.append((p, take))
            rows += take
            remaining -= take
    if current:
        chunks.append(current)
    return chunks


def _growing_cache(model, capacity: int):
    """A DynamicCache whose full-attention layers append into preallocated buffers.

    transformers' DynamicLayer concatenates the whole cache at every step (O(length)
    copies per token); this layer writes the new step into spare room instead.
    """

    class GrowingLayer(DynamicLayer):
        def lazy_initialization(self, key_states, value_states):
            super().lazy_initialization(key_states, value_states)
            self._k = self._v = None
            self._len = 0

        def _alloc(self, like, rows: int, room: int):
            return like.new_empty((rows, like.shape[1], room, like.shape[3]))

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = key_states.shape[-2]
            if self._k is None or self._len + n > self._k.shape[-2]:
                room = max(capacity, 2 * (self._len + n))
                k = self._alloc(key_states, key_states.shape[0], room)
                v = self._alloc(value_states, value_states.shape[0], room)
                if self._k is not None:
                    k[..., : self._len, :] = self._k[..., : self._len, :]
                    v[..., : self._len, :] = self._v[..., : self._len, :]
                self._k, self._v = k, v
            self._k[..., self._len: self._len + n, :] = key_states
            self._v[..., self._len: self._len + n, :] = value_states
            self._len += n
            self.keys = self._k[..., : self._len, :]
            self.values = self._v[..., : self._len, :]
            return self.keys, self.values

        def batch_select_indices(self, indices):
            if self.get_seq_length() > 0:
                # copy only the filled part into a fresh buffer with the same spare room
                room = self._k.shape[-2]
                k = self._alloc(self._k, len(indices), room)
                v = self._alloc(self._v, len(indices), room)
                k[..., : self._len, :] = self.keys[indices]
                v[..., : self._len, :] = self.values[indices]
                self._k, self._v = k, v
                self.keys = k[..., : self._len, :]
                self.values = v[..., : self._len, :]

        def batch_repeat_interleave(self, repeats: int):
            if self.get_seq_length() > 0:
                idx = torch.arange(self._k.shape[0], device=self._k.device).repeat_interleave(repeats)
                self.batch_select_indices(idx)

        def crop(self, tokens_to_remove: int):
            raise NotImplementedError("rollout caches are never cropped")

    cache = DynamicCache(config=model.config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


@contextlib.contextmanager
def _adapters_in_model_dtype(model, dtype) -> Iterator[None]:
    """Run the active LoRA adapters in the base model's dtype while sampling.

    peft keeps adapters in float32 (an update of lr 1e-6 vanishes in bf16), so every
    adapted layer casts its input to float32 and its output back: about a fifth of a
    bf16 decode step on a CPU. Sampling needs no float32 adapters: their weights are
    swapped for `dtype` copies for the duration and the float32 tensors put back after,
    untouched (the optimiser's parameters are the same objects throughout).
    """

    swapped: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
    try:
        active = getattr(model, "active_adapters", None)
        if active and dtype in (torch.bfloat16, torch.float16):
            names = set(active if isinstance(active, (list, tuple)) else [active])
            for module in model.modules():
                for attr in ("lora_A", "lora_B"):
                    holder = getattr(module, attr, None)
                    if not isinstance(holder, torch.nn.ModuleDict):
                        continue
                    for name in names & set(holder.keys()):
                        weight = getattr(holder[name], "weight", None)
                        if isinstance(weight, torch.nn.Parameter) and weight.dtype != dtype:
                            swapped.append((weight, weight.data))
                            weight.data = weight.data.to(dtype)
        yield
    finally:
        for weight, original in swapped:
            weight.data = original


def _weights_state(model) -> tuple:
    """What the merged weights depend on: the active adapters, whether they are on, and
    every parameter's identity and in-place version (an optimiser step bumps it)."""
    layers = [m for m in model.modules() if hasattr(m, "lora_A")]
    flags = tuple((tuple(m.active_adapters), m.disable_adapters, m.merged) for m in layers[:1])
    return (id(model), flags, tuple((p.data_ptr(), p._version) for p in model.parameters()))


def lean_model(model, cfg: SamplingConfig, device) -> "LeanModel | None":
    """The model's `LeanModel` for sampling as its weights are now, or None where the
    transformers forward samples instead (`cfg.lean_forward` off, not a CPU, or an
    architecture `codea1.lean_forward` does not cover). Kept on the model until its
    weights change or `release_lean` drops it (before an update needs the memory)."""
    if not cfg.lean_forward or torch.device(device).type != "cpu" or unsupported(model) is not None:
        return None
    key = _weights_state(model)
    cached = getattr(model, "_codea1_lean", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    model._codea1_lean = None  # the old copy goes before the new one is built
    with torch.no_grad():
        lean = LeanModel(model)
    model._codea1_lean = (key, lean)
    return lean


def release_lean(model) -> None:
    """Drop the merged sampling weights kept on `model` (see `lean_model`)."""
    if getattr(model, "_codea1_lean", None) is not None:
        model._codea1_lean = None


class GenerationInterrupted(Exception):
    """`generate` was asked to stop (its `should_stop` returned true) before it finished."""


class _TransformersForward:
    """Sampling through the model's own forward (any architecture transformers runs)."""

    def __init__(self, model, pieces: list[tuple[int, int]], prompt_ids: list[list[int]],
                 cfg: SamplingConfig, pad_id: int, device, stats: GenerationStats) -> None:
        self.model, self.pieces, self.prompt_ids, self.cfg = model, pieces, prompt_ids, cfg
        self.pad_id, self.device, self.stats = pad_id, device, stats

    def first(self) -> "torch.Tensor":
        """Prefill every prompt of the chunk once; the logits of each row's first token [rows, V]."""
        unique = [p for p, _ in self.pieces]
        width = max(len(self.prompt_ids[p]) for p in unique)
        ids = torch.full((len(unique), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(unique), width), dtype=torch.long)
        for row, p in enumerate(unique):
            seq = self.prompt_ids[p]
            ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        self.cache = _growing_cache(self.model, capacity=width + self.cfg.max_new_tokens)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=self.cache,
                         use_cache=True, logits_to_keep=1)
        self.stats.forward_passes += 1
        self.stats.prefill_tokens += sum(len(self.prompt_ids[p]) for p in unique)
        # share each prompt's prefill among its samples
        repeat = torch.tensor([k for _, k in self.pieces], device=self.device)
        expand = torch.repeat_interleave(torch.arange(len(unique), device=self.device), repeat)
        self.cache.batch_select_indices(expand)
        self.mask, self.next_pos = mask[expand], positions[expand, -1] + 1
        return out.logits[:, -1, :][expand]

    def next(self, tokens: "torch.Tensor", keep: "torch.Tensor | None") -> "torch.Tensor":
        """Feed each live row's token (rows not in `keep` dropped first); the next logits."""
        if keep is not None:
            self.cache.batch_select_indices(keep)
            tokens, self.mask, self.next_pos = tokens[keep], self.mask[keep], self.next_pos[keep]
        self.mask = torch.cat([self.mask, torch.ones((self.mask.shape[0], 1), dtype=self.mask.dtype,
                                                     device=self.device)], dim=1)
        out = self.model(input_ids=tokens[:, None], attention_mask=self.mask, position_ids=self.next_pos[:, None],
                         cache=self.cache, use_cache=True)
        self.stats.forward_passes += 1
        self.stats.decode_passes += 1
        self.next_pos = self.next_pos + 1
        return out.logits[:, -1, :]


class _LeanForward:
    """Sampling through `codea1.lean_forward.LeanModel` (merged LoRA, fused projections)."""

    def __init__(self, lean: "LeanModel", pieces: list[tuple[int, int]], prompt_ids: list[list[int]],
                 cfg: SamplingConfig, stats: GenerationStats) -> None:
        self.lean, self.pieces, self.prompt_ids, self.cfg, self.stats = lean, pieces, prompt_ids, cfg, stats

    def first(self) -> "torch.Tensor":
        """Prefill each prompt once, alone (no padding work), into the rows of its samples."""
        lengths = [len(self.prompt_ids[p]) for p, k in self.pieces for _ in range(k)]
        width = max(lengths)
        self.cache = KVCache(self.lean, len(lengths), width, self.cfg.max_new_tokens, lengths)
        logits, row = [], 0
        for p, k in self.pieces:
            rows = torch.arange(row, row + k, device=self.lean.embed.device)
            last = self.lean.prefill(self.prompt_ids[p], self.cache, rows)
            logits.append(last.expand(k, -1))
            row += k
            self.stats.prefill_tokens += len(self.prompt_ids[p])
        self.stats.forward_passes += 1
        self.positions = torch.tensor(lengths, dtype=torch.long, device=self.lean.embed.device)
        return torch.cat(logits)

    def next(self, tokens: "torch.Tensor", keep: "torch.Tensor | None") -> "torch.Tensor":
        if keep is not None:
            self.cache.keep_rows(keep)
            tokens, self.positions = tokens[keep], self.positions[keep]
        logits = self.lean.decode(tokens, self.positions, self.cache)
        self.stats.forward_passes += 1
        self.stats.decode_passes += 1
        self.positions = self.positions + 1
        return logits


def _decode_chunk(forward: "_TransformersForward | _LeanForward", pieces: list[tuple[int, int]],
                  cfg: SamplingConfig, stops: "torch.Tensor",
                  generator: "torch.Generator | list[torch.Generator] | None", stats: GenerationStats,
                  device, should_stop: "Callable[[], bool] | None" = None,
                  ) -> list[tuple[int, list[int], bool]]:
    """Sample the rows of one chunk; returns (prompt index, completion ids, finished) per row."""

    logits = forward.first()
    row_prompt = [p for p, k in pieces for _ in range(k)]
    rows = len(row_prompt)
    active = torch.arange(rows, device=device)           # original row of each live batch row
    row_gens = generator if isinstance(generator, list) else None  # one per row of the chunk
    tokens: list[list[int]] = [[] for _ in range(rows)]
    finished = [False] * rows
    step_limit = cfg.max_new_tokens
    for step in range(step_limit):
        if should_stop is not None and should_stop():
            raise GenerationInterrupted(f"stopped after {step} of {step_limit} decoding steps")
        gens = [row_gens[r] for r in active.tolist()] if row_gens is not None else generator
        nxt = sample_next(logits, cfg.temperature, cfg.top_p, gens)
        done = torch.isin(nxt, stops)
        nxt_list = nxt.tolist()
        done_list = done.tolist()
        stats.tokens_decoded += len(nxt_list)
        for i, r in enumerate(active.tolist()):
            tokens[r].append(nxt_list[i])
            if done_list[i]:
                finished[r] = True
        if step == step_limit - 1:
            break
        n_done = sum(done_list)
        if n_done == len(done_list):
            break
        keep = None
        if n_done:
            # drop finished rows (and their cache) so later steps only pay for live ones
            keep = (~done).nonzero().squeeze(-1)
            active = active[keep]
        logits = forward.next(nxt, keep)
    return [(row_prompt[r], tokens[r], finished[r]) for r in range(rows)]


def generate(policies: "Policies", role: str, prompts: Sequence[Prompt], n: int = 1,
             sampling: SamplingConfig | None = None, *, generator: "torch.Generator | None" = None,
             seeds: Sequence[int] | None = None, stats: GenerationStats | None = None,
             should_stop: "Callable[[], bool] | None" = None) -> list[list[Sample]]:
    """Sample `n` completions for each prompt with `role`'s weights.

    `should_stop` is polled at every decoding step; when it returns true the call raises
    `GenerationInterrupted`, so a Ctrl-C during a long rollout is answered in one token's
    time instead of after the whole batch.

    Prompts are chat messages (formatted with the model's chat template) or raw strings.
    Returns, per prompt in order, `n` `Sample`s. A prompt longer than `max_prompt_tokens`
    (or the context) raises `PromptTooLong`; under `cut_prompts_left` it is cut from the
    left instead (counted in `stats.prompts_truncated`). Reproducible for a given
    `generator` (or `sampling.seed`) and the same inputs. With `seeds` (one per prompt),
    sample j of prompt p draws from its own stream `derive_seed(seeds[p], j)` instead: the
    same whatever the other prompts of the call, their order or the batch size.
    """

    cfg = sampling or SamplingConfig()
    if n < 0:
        raise ValueError(f"n={n}: expected a non-negative number of samples per prompt")
    stats = stats if stats is not None else GenerationStats()
    if not prompts or n == 0:
        return [[] for _ in prompts]
    if seeds is not None and len(seeds) != len(prompts):
        raise ValueError(f"seeds: {len(seeds)} given for {len(prompts)} prompts (one a prompt)")
    started = time.perf_counter()
    tokenizer = policies.tokenizer
    encoded = encode_prompts(tokenizer, prompts)

    with policies.role(role) as model:
        device = next(model.parameters()).device
        prompt_ids, cut = fit_prompts(encoded, cfg, context_length(model), stats)
        stats.prompts += len(prompts)
        stats.prompts_truncated += sum(cut)
        if generator is None and cfg.seed is not None:
            generator = torch.Generator(device=device).manual_seed(cfg.seed)
        stops = torch.tensor(sorted(stop_token_ids(tokenizer, model)), dtype=torch.long, device=device)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else int(stops[0])

        order = sorted(range(len(prompt_ids)), key=lambda p: len(prompt_ids[p]), reverse=True)
        chunks = _plan_chunks(order, n, cfg.batch_size)
        results: list[list[tuple[list[int], bool]]] = [[] for _ in prompts]
        was_training = model.training
        model.eval()
        drawn = [0] * len(prompts)  # samples of each prompt given a stream so far
        try:
            lean = lean_model(model, cfg, device)
            swap = contextlib.nullcontext() if lean is not None else _adapters_in_model_dtype(model, policies.dtype)
            with torch.inference_mode(), swap:
                for pieces in chunks:
                    chunk_gen = generator
                    if seeds is not None:
                        chunk_gen = []
                        for p, k in pieces:
                            chunk_gen += [torch.Generator().manual_seed(derive_seed(seeds[p], drawn[p] + j))
                                          for j in range(k)]
                            drawn[p] += k
                    forward = (_LeanForward(lean, pieces, prompt_ids, cfg, stats) if lean is not None else
                               _TransformersForward(model, pieces, prompt_ids, cfg, pad_id, device, stats))
                    for p, completion, done in _decode_chunk(forward, pieces, cfg, stops, chunk_gen, stats,
                                                            device, should_stop):
                        results[p].append((completion, done))
        finally:
            model.train(was_training)

    out = make_samples(tokenizer, prompt_ids, cut, results, stats)
    stats.seconds += time.perf_counter() - started
    return out


def make_samples(tokenizer, prompt_ids: Sequence[Sequence[int]], cut: Sequence[bool],
                 results: Sequence[Sequence[tuple[list[int], bool]]],
                 stats: GenerationStats) -> list[list[Sample]]:
    """`Sample`s from each prompt's (completion ids, ended by a stop token) pairs, counted
    in `stats`: the one place every engine turns decoded tokens into samples."""
    out: list[list[Sample]] = []
    for p, rows in enumerate(results):
        samples = []
        for completion, done in rows:
            text = tokenizer.decode(completion, skip_special_tokens=True)
            samples.append(Sample(prompt_ids=list(prompt_ids[p]), completion_ids=list(completion),
                                  text=text, truncated=not done, finished=done,
                                  prompt_truncated=cut[p]))
            stats.completion_tokens += len(completion)
            stats.prompt_tokens += len(prompt_ids[p])
            stats.completions_truncated += int(not done)
            stats.empty_completions += int(not text.strip())
        out.append(samples)
    stats.samples += sum(len(s) for s in out)
    return out
