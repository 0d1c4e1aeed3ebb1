"""The judge: from raw completions to the rewards of Code-A1 (see ../shared/CODE_A1_SPEC.md).

Code and tests are extracted from completions (`extract`), tests parsed by AST
(`parse`), validated on the reference solution and run against each candidate in the
sandbox (`judge`), and scored (`rewards`).
"""

from codea1.judge.backend import StepJudge
from codea1.judge.config import JudgeConfig
from codea1.judge.golden import GoldenResult
from codea1.judge.extract import code_blocks, extract_code, extract_test_source
from codea1.judge.judge import (
    DUPLICATE,
    REFERENCE_RAISED,
    UNPARSABLE,
    WRONG_EXPECTATION,
    Judge,
    JudgeProgress,
    ProblemJudgement,
    ProblemRollout,
    SuiteResult,
    TestOutcome,
)
from codea1.judge.parse import LineCache, ParsedTest, normalize_assert, parse_tests
from codea1.judge.stdin import StdinJudge  # (registers the judge of "stdin" problems)

__all__ = [
    "DUPLICATE",
    "REFERENCE_RAISED",
    "UNPARSABLE",
    "WRONG_EXPECTATION",
    "GoldenResult",
    "Judge",
    "JudgeConfig",
    "JudgeProgress",
    "LineCache",
    "ParsedTest",
    "ProblemJudgement",
    "ProblemRollout",
    "StdinJudge",
    "StepJudge",
    "SuiteResult",
    "TestOutcome",
    "code_blocks",
    "extract_code",
    "extract_test_source",
    "normalize_assert",
    "parse_tests",
]
