"""The spec's prompts and what every rollout engine shares: token ids, limits, seeds, samples.

Prompts (`code_messages`, `test_messages`, `fit_test_prompt`), their token ids
(`encode_prompts`) and the limits they must fit (`prompt_limit`, `fit_prompts`); each
sample's random stream from its place in the step (`derive_seed`, `sample_seeds`); the
sampling config's `stop` strings as every engine checks them (`StopStrings`); and the
`Sample`s and `GenerationStats` every engine returns (`make_samples`). The `hf` engine's
own batched sampler is `codea1.engines.hf_engine.generate`.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence, Union

from codea1.configs import SamplingConfig  # torch-free settings, re-exported here
from codea1.data.stdin_io import FUNCTION, STDIN, stdin_code_messages, stdin_test_messages

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


def _field(problem: Any, name: str, default: Any = None) -> Any:
    """A field of `problem`: a Problem, or its dict (the prompts take either)."""
    return problem.get(name, default) if isinstance(problem, Mapping) else getattr(problem, name, default)


def _is_stdin(problem: Any) -> bool:
    """Whether `problem` reads standard input (its prompts come from codea1.data.stdin_io)."""
    return _field(problem, "kind", FUNCTION) == STDIN


def _get(problem: Any, name: str) -> str:
    value = _field(problem, name)
    if not isinstance(value, str):
        raise ValueError(f"problem field {name!r}: expected a string, got {type(value).__name__}")
    return value


def row_prompt(problem: Any) -> list[dict[str, str]] | None:
    """The chat prompt the problem's data row carries (`meta["prompt"]`: the `prompt`
    column of the paper's parquet rows), or None. A malformed one is an error naming the
    problem, not silently replaced by ours."""
    meta = _field(problem, "meta")
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
    if _is_stdin(problem):  # a complete program that reads standard input
        return stdin_code_messages(question)
    return [
        {"role": "system", "content": CODE_SYSTEM},
        {"role": "user", "content": f"{CODE_INSTRUCTION}\n\nQuestion:\n{question}"},
    ]


def _test_question(problem: Any) -> str:
    """The problem text the test model reads: the row's `clean_description` where the data
    has one (the field the reference's test prompt shows), else the code model's question."""
    meta = _field(problem, "meta")
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
    if _is_stdin(problem):
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


# --- what every engine's sampling shares ----------------------------------------------------------


@dataclass
class Sample:
    """One completion. `truncated`: stopped by max_new_tokens; `finished`: ended with EOS
    (or a stop token, or one of the sampling config's `stop` strings).

    `completion_ids` includes the final EOS token when `finished` (the update trains the
    model to stop), or the token that completed a stop string; `text` is the decoded
    completion without special tokens.
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
    # prompt tokens run through the model: each prompt once a chunk, less a start it shares
    # with the prompt before it
    prefill_tokens: int = 0
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


class StopStrings:
    """The sampling config's `stop` strings, checked as a completion grows.

    `ended(ids)` says whether the decoded text of a completion's token ids holds one of
    them. An engine asks after every token, so a string is always new in the last token;
    only the tail is decoded: every text token carries at least one byte, so a window of
    the longest string's bytes plus a margin covers it (the margin keeps a tokenizer's
    trimming of a leading space off the string itself; special tokens, which decode to
    nothing, end a completion before they could pile up inside a string).
    """

    MARGIN = 4

    def __init__(self, tokenizer, strings: Sequence[str]) -> None:
        self.tokenizer, self.strings = tokenizer, tuple(strings)
        self.window = max((len(s.encode()) for s in self.strings), default=0) + self.MARGIN

    def __bool__(self) -> bool:
        return bool(self.strings)

    def ended(self, ids: Sequence[int]) -> bool:
        if not self.strings:
            return False
        tail = self.tokenizer.decode(list(ids[-self.window:]), skip_special_tokens=True)
        return any(s in tail for s in self.strings)


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
    """A prompt is longer than its limit; prompts are never cut from the left by default.
    `index` is the prompt's place in the batch, `tokens` its length, `limit` the limit."""

    def __init__(self, message: str, index: int = -1, tokens: int = 0, limit: int = 0):
        super().__init__(message)
        self.index, self.tokens, self.limit = index, tokens, limit


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
                    "it from the data (or set cut_prompts_left=true)", i, len(ids), limit)
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


class GenerationInterrupted(Exception):
    """An engine's `generate` was asked to stop (its `should_stop` returned true) before it finished."""


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
