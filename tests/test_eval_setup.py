"""The evaluation commands' configs nest `SamplingConfig` (the sampling settings declared
once) and still take and read them as the command-line options name them."""

from __future__ import annotations

import pytest

from codea1.configs import SamplingConfig
from codea1.eval.code import CodeEvalConfig
from codea1.eval.select import SelectConfig
from codea1.eval.setup import SAMPLING_KEYS, config_record
from codea1.eval.tests_eval import TestEvalConfig


@pytest.mark.parametrize("cls", [CodeEvalConfig, TestEvalConfig, SelectConfig])
def test_sampling_keywords_go_into_the_nested_sampling(cls):
    """Fault tried: building the config's sampling from the class default alone, dropping
    the keywords (`sampling.top_p` stayed the default and this test failed)."""
    config = cls(top_p=0.5, max_new_tokens=77, seed=3)
    assert isinstance(config.sampling, SamplingConfig)
    assert (config.sampling.top_p, config.sampling.max_new_tokens, config.sampling.seed) == (0.5, 77, 3)
    assert (config.top_p, config.max_new_tokens, config.seed) == (0.5, 77, 3)
    assert config.temperature == cls().sampling.temperature  # the command's own default is kept
    given = cls(sampling=SamplingConfig(temperature=0.3, top_p=0.9, max_new_tokens=5))
    assert (given.temperature, given.top_p, given.max_new_tokens) == (0.3, 0.9, 5)
    record = config_record(config)
    assert {k: record[k] for k in SAMPLING_KEYS} == config.sampling.model_dump()
    assert "sampling" not in record


@pytest.mark.parametrize("cls", [CodeEvalConfig, TestEvalConfig, SelectConfig])
def test_sampling_options_are_checked_naming_the_option(cls):
    """One check for the three commands (eval select used to take --temperature 2.5 and
    fail only when the first model sampled). Fault tried: dropping `check_sampling` (the
    errors became pydantic's, naming no option, and this test failed)."""
    for kwargs, message in ((dict(temperature=2.5), r"^--temperature must lie in \[0, 2\], got 2.5"),
                            (dict(top_p=0), r"^--top-p must lie in \(0, 1\], got 0"),
                            (dict(max_new_tokens=0), r"^--max-new-tokens must be at least 1"),
                            (dict(batch_size=0), r"^--batch-size must be at least 1"),
                            (dict(threads=0), r"^--threads must be at least 1"),
                            (dict(engine="tpu"), r"--engine")):
        with pytest.raises(ValueError, match=message):
            cls(**kwargs)


def test_greedy_sets_the_nested_temperature():
    config = CodeEvalConfig(greedy=True, temperature=0.9)
    assert (config.n, config.sampling.temperature, config.temperature) == (1, 0.0, 0.0)
