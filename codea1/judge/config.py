"""`JudgeConfig`: the judge's settings, declared once (pydantic, torch-free).

The training config's `judge` section (`codea1.train.config.JudgeSection`) is a
`JudgeConfig` with the trainer's own keys added (sandbox workers and limits, the Ray
backend), so every `judge.<switch>` key a user writes is the field below of the same
name, with its description (`codea1 config keys` prints it) and its check.

Fields declared with `exclude=True` (`limits`, `reference_limits`, `golden_limits`,
`resume_rounds`, `switch_interval_s`) are set by the code that builds a judge, not by a
config file: they are no config keys and are never written to a run's config.yaml.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import ConfigDict, Field, InstanceOf, ValidationError

from codea1.configs import ConfigModel
from codea1.interpreter import HANDOFF_INTERVAL_S
from codea1.judge.extract import extract_code
from codea1.sandbox.stdio import DEFAULT_MAX_OUTPUT_BYTES
from codea1.sandbox.types import GOLDEN_MEMORY_MB, Limits

__all__ = ["JudgeConfig", "REFERENCE_SWITCHES"]


def _switch(default: Any, description: str, **checks: Any) -> Any:
    """A field that picks between the reference's semantics (the default) and one of the
    project's alternatives (docs/ARCHITECTURE.md, "Fidelity to the reference")."""
    return Field(default, description=description, json_schema_extra={"reference_switch": True}, **checks)


def _golden_limits() -> Limits:
    return Limits(timeout_s=60.0, call_timeout_s=10.0, memory_mb=GOLDEN_MEMORY_MB)


class JudgeConfig(ConfigModel):
    """The judge's knobs, with the reference implementation's defaults.

    Each switch (`REFERENCE_SWITCHES`) turns on one of the project's stricter or older
    alternatives; the fidelity table of docs/ARCHITECTURE.md says what each changes and
    why one would flip it. `own_namespace` and `per_call_timeouts` need the older
    execution (`isolate_calls`) and imply it: by default each candidate is one program
    (`codea1.judge.one_program`) under one time budget, `limits.timeout_s`, as the
    reference runs it. Without `strict_tests` every expression that uses more than the
    function, safe builtins and modules is evaluated in a fork of its own
    (`Job.isolated`), so a test that rebinds globals cannot fail the others.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(0.5, ge=0.0, le=1.0, description="weight of validity in the test reward")
    suite_size: int = Field(8, ge=1, description="G, the nominal suite size (also the Mistake Book "
                            "tests replayed per problem)")
    nonprintable_penalty: bool = Field(True, description="lower the test reward by the share of non-printable characters")
    stdin_time_scale: float = Field(
        1.0, gt=0.0, allow_inf_nan=False, description="a stdin problem's time limit per input (meta.time_limit_s, else call_timeout_s) is "
        "multiplied by this, and capped at timeout_s")
    stdin_max_output_mb: float = Field(
        DEFAULT_MAX_OUTPUT_BYTES / 2**20, gt=0.0, le=64.0, description="what one run of a stdin program may print, "
        "in MiB; past it the run is output-limit (a failed run: a reference's tests invalid, a candidate's failed)")
    strict_validity: bool = _switch(False, "a test whose written expectation was wrong earns no validity")
    strict_lines: bool = _switch(False, "non-test statements of a test block count as invalid tests")
    strict_operator: bool = _switch(False, "an assert comparing with anything but one `==` is invalid")
    strict_tests: bool = _switch(False, "tests may use only the function, safe builtins and modules")
    exact_types: bool = _switch(False, "values must have the same type (2 != 2.0, Counter != dict)")
    float_rtol: float = _switch(0.0, "relative float tolerance (0: exact ==)", ge=0.0, lt=1.0)
    float_atol: float = _switch(0.0, "absolute float tolerance (0: exact ==)", ge=0.0, lt=1.0)
    unicode_printable: bool = _switch(False, "non-printable = refused by str.isprintable, not non-ASCII")
    require_entry_point: bool = _switch(False, "a test whose call never names the function is invalid")
    statement_reading: bool = _switch(
        False, "read test blocks statement by statement, substituting every bound name and import "
        "(the reference reads them line by line, substituting only bare-name call arguments)")
    lenient_code_fences: bool = _switch(
        False, "a ```py, bare or unterminated block is the code (the reference: invalid code)")
    own_namespace: bool = _switch(False, "a candidate runs alone, not in the reference solution's namespace")
    require_definition: bool = _switch(
        False, "a candidate is valid only if it defines the function (the reference: its module runs)")
    per_call_timeouts: bool = _switch(
        False, "each test call has call_timeout_s and a cut-short run resumes (the reference: one "
        "timeout_s budget for a candidate's whole program)")
    isolate_calls: bool = _switch(
        False, "each test call runs on its own: a call that exits or crashes fails alone, a call "
        "text is run once and shared by the suites (the reference: one program per candidate, every test in "
        "order, an exit ends the program)")

    # -- set by the code that builds the judge (no config keys) --------------------------
    limits: InstanceOf[Limits] = Field(
        default_factory=Limits, exclude=True, description="limits of a candidate's run")
    reference_limits: InstanceOf[Limits] | None = Field(
        None, exclude=True, description="limits of a problem's reference run, which evaluates every distinct "
        "call of all its suites (None: `limits` with a 60 s run budget)")
    golden_limits: InstanceOf[Limits] = Field(
        default_factory=_golden_limits, exclude=True, description="limits of a golden-test run")
    resume_rounds: int = Field(
        2, ge=0, exclude=True, description="times a run cut short (run budget, output flood) is resumed for its "
        "unrun calls, so one suite's hanging test cannot decide another suite's")
    switch_interval_s: float | None = Field(
        HANDOFF_INTERVAL_S, gt=0.0, le=1.0, exclude=True,
        description="Python's thread switch interval while a step runs, so the executor's threads feed the "
        "workers while the judge parses (`codea1.interpreter`); None leaves it alone")

    @property
    def one_program(self) -> bool:
        """Whether candidates run as the reference's one program each (module docstring of
        `codea1.judge.one_program`)."""
        return not (self.isolate_calls or self.per_call_timeouts or self.own_namespace)

    def code_of(self, completion: str) -> str:
        """The code of a code-model completion by this config's fence rule
        (`lenient_code_fences`): what the judge runs, and so what the trainer's white-box
        test prompts, golden judging and validation must see too."""
        return extract_code(completion, lenient=self.lenient_code_fences)

    @property
    def effective_reference_limits(self) -> Limits:
        if self.reference_limits is not None:
            return self.reference_limits
        return replace(self.limits, timeout_s=max(self.limits.timeout_s, 60.0))


#: The switches between the reference's semantics and the project's alternatives, in
#: declaration order (read off the fields, not a second list).
REFERENCE_SWITCHES: tuple[str, ...] = tuple(
    name for name, info in JudgeConfig.model_fields.items()
    if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("reference_switch"))


def stdin_key_problem(key: str, value: Any) -> str | None:
    """Why `value` cannot be the judge's `key` (`stdin_time_scale`, `stdin_max_output_mb`)
    by `JudgeConfig`'s own rule, or None: the one rule the eval commands' and `data check`'s
    options of the same names are checked by."""
    try:
        JudgeConfig(**{key: value})
    except ValidationError as exc:
        return exc.errors()[0]["msg"]
    return None
