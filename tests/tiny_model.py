"""A tiny random-weight Qwen2 chat model for the tests and benchmarks (no download).

    from tiny_model import tiny_test_model   # tests/ on sys.path (pytest puts it there;
    tiny_test_model(tmp_path / "tiny")        # benchmarks insert it, as kill_trials.py does)

It lived in `codea1.models`; no command of the package uses it, so it is test code.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
from tokenizers import models as tokenizer_models
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from codea1.models import QWEN_CHAT_TEMPLATE


def tiny_test_model(directory: str | os.PathLike[str], *, seed: int = 0, vocab_size: int = 384,
                    hidden_size: int = 32, layers: int = 2) -> Path:
    """Write a tiny random-weight Qwen2 chat model with its own tokenizer to `directory`.

    No download: a byte-level BPE tokenizer (any text round-trips) is trained on a few
    lines of code, with Qwen's special tokens and chat template. Used by the tests of every module that
    needs a real `transformers` model in seconds. Returns the directory.
    """

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    corpus = [
        "def f(x):\n    return x + 1\n", "assert f(2) == 3\n", "```python\n", "```\n",
        "system\nYou are a helpful assistant.\n", "user\nWrite a function.\n", "assistant\n",
        "for i in range(n):\n    if x[i] > 0:\n        s += x[i]\n", "import math\n",
        "Write 8 tests for the code of the question. Complete the function.\n",
    ] * 4
    tok = Tokenizer(tokenizer_models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    vocab = tok.get_vocab()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        bos_token=None, padding_side="left",
    )
    fast.chat_template = QWEN_CHAT_TEMPLATE
    fast.save_pretrained(directory)

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(vocab), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<|endoftext|>"],
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = [vocab["<|im_end|>"], vocab["<|endoftext|>"]]
    model.generation_config.pad_token_id = vocab["<|endoftext|>"]
    model.save_pretrained(directory)
    return directory
