"""The typed training configuration: YAML file or preset, plus `key=value` overrides.

`load_config(path=..., preset=..., overrides=["grpo.lr=2e-6", ...])` merges, in order,
the config's defaults, a preset or a YAML file, and the overrides, then validates
everything with pydantic. A wrong key or value is a `ConfigError` naming the key, what was
expected and, for a typo, the closest key.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from fnmatch import fnmatchcase
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from codea1.configs import (
    ConfigModel,
    GRPOConfig,
    ModelConfig,
    SamplingConfig,
    VLLMConfig,
    check_vllm_lora_targets,
)
from codea1.judge.config import JudgeConfig
from codea1.sandbox.types import Limits
from codea1.train.key_hints import key_hint

PRESETS = ("cpu-demo", "cpu-demo-stdin", "paper-1.5b", "paper-3b", "paper-7b")


class ConfigError(ValueError):
    """A config file, preset or override is wrong; the message says where and why."""


class _Strict(ConfigModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RolloutConfig(_Strict):
    """Group sizes and sampling of the two roles (`codea1.rollout.SamplingConfig` each)."""

    n_code: int = Field(8, ge=1, description="code completions per problem (a code group; at least 2)")
    n_test: int = Field(8, ge=1, description="test suites per candidate (a test group; at least 2 but in golden mode)")
    code: SamplingConfig = SamplingConfig(max_new_tokens=1024)
    test: SamplingConfig = SamplingConfig(max_new_tokens=1024)
    white_box: bool = Field(True, description="show the test model the candidate's code")
    project_code_prompt: bool = Field(
        False, description="ask the code model in codea1's own wording even where the data row has its "
        "own `prompt` (off: the row's prompt, as the reference)")
    engine: Literal["auto", "hf", "vllm", "llamacpp"] = Field(
        "auto", description="who samples the rollouts: hf (codea1's sampler, any device), vllm "
        "(CUDA, the codea1[vllm] extra), llamacpp (CPU, LoRA modes on a GGUF base, the "
        "codea1[llamacpp] extra: decodes the rows together with the quantised weights), auto (vllm "
        "when installed and on CUDA, else hf)")
    vllm: VLLMConfig = VLLMConfig()


REQUIRED = "required"  # a preset's placeholder for a file the user must name

PAPER_TRAIN_FILE = (
    "the paper's training file, kodcode_hard_dual_model_training_data_mix.parquet (9,688 hard "
    "KodCode-V1 questions in the Code-A1 row format): in the Code-A1 reference repository "
    "(github.com/ZJU-REAL/Code-A1), folder Code-A1/code/rl/train_data/; KodCode-V1 itself "
    "(KodCode/KodCode-V1 on the Hugging Face hub, CC BY-NC 4.0) is read too"
)
PAPER_HELDOUT_FILE = (
    "the paper's validation file, validation_data_mix.parquet (164 HumanEval+ and 378 MBPP+ "
    "rows): in the Code-A1 reference repository (github.com/ZJU-REAL/Code-A1), folder "
    "Code-A1/code/rl/val_data/"
)


class DataConfig(_Strict):
    """Where problems come from: 'bundled' or a path any `load_problems` format reads."""

    train: str = Field(
        "bundled",
        description="'bundled' (the bundled train split), 'bundled:SPLIT' (train, heldout, "
        "all, demo), or a problem file; 'required' (the paper presets): the run refuses to "
        "start until a file is given",
    )
    heldout: str | None = Field(
        "bundled",
        description="'bundled' (the bundled held-out split), 'bundled:SPLIT' (train, heldout, "
        "all, demo), a problem file, null for none, or 'required' (the paper presets: the "
        "paper's validation file must be given)",
    )
    include: list[str] | None = Field(
        None,
        description="train only on these problems of data.train: ids or shell patterns "
        "(`a1/0*`), kept in file order; null = all. Each must match a problem",
    )
    problems_per_step: int = Field(256, ge=1, description="problems a training step samples")
    check: Literal["refuse", "skip", "off"] = Field(
        "refuse", description="before the models load, run each training problem's reference against its "
        "golden tests in the sandbox, under the judge's limits (judge.timeout_s, call_timeout_s, memory_mb, "
        "stdin_time_scale, stdin_max_output_mb: `codea1 data check` with --timeout, --call-timeout, --memory-mb, "
        "--stdin-time-scale and --stdin-max-output-mb set to them): refuse a run whose "
        "data has a broken row (each named), skip such rows (each named), or off")
    shuffle: bool = Field(True, description="a new order of the training problems every epoch (seeded)")
    cross_epochs: bool = Field(
        False, description="fill a step that the epoch cannot fill from the next epoch's order (a step "
        "may then hold a problem twice); off: the epoch's last incomplete batch is dropped, as the "
        "reference's sampler does")

    @field_validator("check", mode="before")
    @classmethod
    def _check_off(cls, value: Any) -> Any:
        """YAML reads a bare `off` (`data.check=off`, `check: off`) as false: it means "off"."""
        return "off" if value is False else value


class JudgeSection(JudgeConfig):
    """The `judge` section: the judge's settings (`codea1.judge.config.JudgeConfig`, whose
    fields are the `judge.*` keys of the same names) and the trainer's keys of where and
    under which limits the tests run (the sandbox, or sandbox actors on a Ray cluster)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    workers: int | None = Field(None, ge=1, description="sandbox processes; null = CPU count")
    timeout_s: float = Field(10.0, gt=0, description="wall time of one sandbox job")
    call_timeout_s: float = Field(3.0, gt=0, description="wall time of one test call: of a stdin problem's input, "
                                  "a golden test, the data check, and with judge.per_call_timeouts of a generated "
                                  "test (off, the reference's one program: a candidate's whole run has timeout_s)")
    memory_mb: int = Field(1024, ge=64, description="memory cap of one sandbox job, in MiB")
    backend: Literal["local", "ray"] = Field(
        "local", description="where tests run: local (each process's own sandbox) or ray (sandbox actors "
        "on the nodes of a Ray cluster; the codea1[ray] extra; docs/SCALING.md)")
    ray_address: str | None = Field(
        None, description="Ray cluster to join ('auto', 'ray://host:10001'); null: start one on this machine")
    ray_actors: int | None = Field(None, ge=1, description="sandbox actors; null: one per live Ray node")
    ray_batch_problems: int = Field(8, ge=1, description="problems an actor judges per call")
    ray_in_flight: int = Field(2, ge=1, description="batches queued on one actor at a time")
    ray_retries: int = Field(1, ge=0, description="times a batch whose actor died is retried before "
                             "its problems count as infra failures")
    ray_require: list[str] = Field(
        default_factory=list,
        description="sandbox protections every Ray node must hold (e.g. [net-namespace, memory-cgroup]; "
        "`codea1 sandbox check` lists them); a node lacking one is refused")

    def sandbox_limits(self) -> Limits:
        """The limits of one sandbox job (`timeout_s`, `call_timeout_s`, `memory_mb`)."""
        return Limits(timeout_s=self.timeout_s, call_timeout_s=self.call_timeout_s, memory_mb=self.memory_mb)

    def judge_config(self) -> JudgeConfig:
        """The judge's settings with this section's limits: what `Judge` and `RayJudge` take."""
        return self.model_copy(update={"limits": self.sandbox_limits()})


class MistakeConfig(_Strict):
    enabled: bool = Field(True, description="keep a Mistake Book and replay its tests to the code model")
    top_k: int | None = Field(None, ge=1, description="tests replayed per problem; null = suite_size")
    once_per_candidate: bool = Field(
        False, description="a failed test gains 1 per failing candidate, not per (candidate, suite) pair")
    net_changes: bool = Field(
        False, description="apply a step's net frequency change (the reference: decrements and removals first, "
        "then increments, a removed test re-entering last)")


class ValidationConfig(_Strict):
    """Every `every` steps, before the first and after the last: the code model on the
    held-out golden tests (avg@n and pass@k per data source, as the reference's
    validation), optionally the test model's pass/kill. The defaults are the reference's:
    every 10 steps, every problem, 32 samples at temperature 0.7 and top_p 0.95."""

    every: int = Field(10, ge=0, description="0 disables validation")
    problems: int | None = Field(None, ge=1, description="held-out problems used (the first N); null = all")
    n_code: int = Field(32, ge=1, description="samples per problem (avg@n_code, pass@k per data source)")
    n_test: int = Field(1, ge=1, description="test suites per candidate when test_model is on")
    sampling: SamplingConfig = SamplingConfig(temperature=0.7, top_p=0.95, max_new_tokens=1024)
    test_model: bool = Field(
        False,
        description="also validate the test model (suite validity, kills of wrong held-out "
        "codes) on the first test_problems problems; the reference validates the code model only",
    )
    test_problems: int = Field(64, ge=1, description="held-out problems the test-model validation uses")
    timeout_s: float = Field(
        10.0, gt=0, description="wall time of one sample's golden program (the reference's 10 s)")
    memory_mb: int = Field(4096, ge=64, description="memory of one sample's golden run (MBPP+ needs > 2 GiB)")
    at_start: bool = Field(True, description="also validate before the first step (step 0), as the reference "
                           "(verl's val_before_train); false: the project's older rule")
    at_end: bool = Field(True, description="also validate after the last step when `every` does not divide "
                         "`steps`, as the reference; false: the project's older rule")


class CheckpointConfig(_Strict):
    every: int = Field(10, ge=1, description="steps between checkpoints")
    keep: int = Field(3, ge=1, description="checkpoints kept (the oldest go)")


class WandbConfig(_Strict):
    """Weights & Biases logging (`codea1.train.wandb_logger`); off until a project is named."""

    project: str | None = Field(None, description="W&B project; null: no W&B logging (needs the codea1[wandb] extra)")
    entity: str | None = Field(None, description="W&B team or user; null: your default entity")
    name: str | None = Field(None, description="W&B run name; null: W&B picks one")
    mode: Literal["online", "offline", "disabled"] = Field(
        "online", description="online; offline (no network: `wandb sync RUN_DIR/wandb/offline-run-*` later); disabled")


class LoggingConfig(_Strict):
    samples_per_step: int = Field(2, ge=0, description="codes and tests written to samples.jsonl")
    samples_every: int = Field(10, ge=0, description="steps between W&B samples tables (code, tests, rewards); 0: none")
    tensorboard: bool = Field(True, description="write TensorBoard events under RUN_DIR/tb")
    wandb: WandbConfig = WandbConfig()
    progress: Literal["auto", "rich", "plain", "none"] = Field(
        "auto", description="progress display: rich (live), plain (a line per phase and one per step, for "
        "a log file), none; auto: rich on a terminal, else plain")


class DistributedConfig(_Strict):
    """Runs over several processes (torchrun, srun, accelerate launch: docs/SCALING.md). One
    process (no WORLD_SIZE in the environment) ignores this section."""

    backend: Literal["auto", "nccl", "gloo"] = Field(
        "auto", description="torch.distributed backend: auto = nccl on CUDA, gloo on CPU")
    timeout_s: float = Field(
        1800.0, gt=0,
        description="seconds a collective waits for the other ranks; a rank that is gone or stuck "
        "for longer stops the run on every rank (resume with --resume)")
    fsdp: bool = Field(
        True,
        description="full-weight modes shard the policies with FSDP2 (fully_shard, float32 master "
        "weights, compute in model.dtype); false: every rank holds whole copies and sums gradients")


class TrainConfig(_Strict):
    """Everything a run needs. The defaults of the algorithm (rewards, Mistake Book, GRPO,
    optimiser) are the paper's; its budgets (the model, 1,024 new tokens a sample, 100
    steps) are one machine's start: the `paper-*` presets carry the paper's (4,096 new
    tokens, 111 steps, its model sizes)."""

    mode: Literal["a1", "golden", "selfplay"] = Field(
        "a1", description="a1: two policies; golden: code model on golden tests; selfplay: one model"
    )
    steps: int = Field(100, ge=1, description="training steps (the schedule spans them)")
    seed: int = Field(0, ge=0, description="seed of everything random in a run (sampling, data order, init)")
    threads: int | None = Field(None, ge=1, description="torch CPU threads; null = torch's default")
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    rollout: RolloutConfig = RolloutConfig()
    judge: JudgeSection = JudgeSection()
    mistakes: MistakeConfig = MistakeConfig()
    grpo: GRPOConfig = GRPOConfig()
    validation: ValidationConfig = ValidationConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    logging: LoggingConfig = LoggingConfig()
    distributed: DistributedConfig = DistributedConfig()

    @model_validator(mode="before")
    @classmethod
    def _selfplay_model(cls, data: Any) -> Any:
        """mode=selfplay turns the model into one set of weights of the same kind."""
        if isinstance(data, dict) and data.get("mode") == "selfplay":
            model = dict(data.get("model") or {})
            kind = model.get("mode", "lora-shared")
            if kind != "selfplay":
                model["mode"] = "selfplay"
                model.setdefault("selfplay_weights", "full" if kind == "full" else "lora")
            data = {**data, "model": model}
        return data

    @model_validator(mode="after")
    def _modes_agree(self) -> "TrainConfig":
        if self.mode != "selfplay" and self.model.mode == "selfplay":
            raise ValueError(f"model.mode 'selfplay' shares one set of weights: use mode 'selfplay', not {self.mode!r}")
        return self

    @model_validator(mode="after")
    def _groups_learn(self) -> "TrainConfig":
        """Settings a run would only fail on (or learn nothing from) after the model loads."""
        groups = [("rollout.n_code", self.rollout.n_code, "rollout.code.temperature", self.rollout.code.temperature)]
        if self.mode != "golden":  # golden mode trains the code model alone: no test groups
            groups.append(("rollout.n_test", self.rollout.n_test, "rollout.test.temperature",
                           self.rollout.test.temperature))
        for n_key, n, t_key, temperature in groups:
            if n < 2:
                raise ValueError(f"{n_key}={n}: a GRPO group of one sample has no advantage and learns "
                                 "nothing; expected at least 2")
            if temperature == 0:
                raise ValueError(f"{t_key}=0 is greedy decoding: the {n_key}={n} samples of a group would "
                                 "all be the same and learn nothing; expected a temperature above 0")
        checks = [("validation.n_code", self.validation.n_code)]
        if self.validation.test_model:
            checks.append(("validation.n_test", self.validation.n_test))
        for n_key, n in checks:
            if self.validation.sampling.temperature == 0 and n > 1:
                raise ValueError(f"validation.sampling.temperature=0 is greedy decoding: the {n_key}={n} "
                                 f"samples would all be the same; set {n_key}=1 or a temperature above 0")
        if self.rollout.engine == "vllm" and self.model.uses_lora:
            check_vllm_lora_targets(self.model.lora_target_modules, "model.lora_target_modules")
        return self


def missing_data(cfg: TrainConfig) -> list[str]:
    """One message per data file still at the preset's 'required' placeholder."""
    missing = []
    if cfg.data.train == REQUIRED:
        missing.append(f"data.train is required: give {PAPER_TRAIN_FILE}, with --set data.train=PATH")
    if cfg.data.heldout == REQUIRED:
        missing.append(f"data.heldout is required: give {PAPER_HELDOUT_FILE}, with --set "
                       "data.heldout=PATH (or data.heldout=null to train without validation)")
    return missing


def require_data(cfg: TrainConfig) -> None:
    """Refuse a config whose data files are still the preset's 'required' placeholders
    (both named at once)."""
    missing = missing_data(cfg)
    if missing:
        raise ConfigError("; ".join(missing))


# --------------------------------------------------------------------------- loading


def preset_path(name: str) -> Path:
    """The YAML file of a bundled preset."""
    if name not in PRESETS:
        close = difflib.get_close_matches(name, PRESETS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown preset {name!r}{hint}; expected one of {', '.join(PRESETS)}")
    return Path(str(resources.files("codea1.train") / "presets" / f"{name}.yaml"))


def yaml_error_text(exc: yaml.YAMLError, where: str | None = None) -> str:
    """A YAML syntax error as one line: "FILE, line L, column C: <problem> (not valid YAML)",
    not PyYAML's display of the line with a caret under the column."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        text = "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())
        return f"{where}: not valid YAML: {text}" if where else f"not valid YAML: {text}"
    place = f"line {mark.line + 1}, column {mark.column + 1}"
    context = getattr(exc, "context", None)
    if context:
        start = getattr(exc, "context_mark", None)
        if start is not None and (start.line, start.column) != (mark.line, mark.column):
            context += f" from line {start.line + 1}, column {start.column + 1}"
        context += "; "
    return f"{where + ', ' if where else ''}{place}: {problem} ({context or ''}not valid YAML)"


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a YAML config (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_error_text(exc, str(path))) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys at the top level, got {type(data).__name__}")
    return data


def config_fields(model: type[BaseModel]) -> dict[str, Any]:
    """The fields of a config section that are config keys: those a dump writes, so not the
    ones set by the code that uses the section (`exclude=True`, as `JudgeConfig.limits`)."""
    return {name: info for name, info in model.model_fields.items() if not info.exclude}


def _known_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, info in config_fields(model).items():
        key = prefix + name
        keys.append(key)
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys.extend(_known_keys(ann, key + "."))
    return keys


def _set_dotted(data: dict[str, Any], key: str, value: Any, where: str) -> None:
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"{where}: {key!r} is not a config key (empty part)")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{where}: {'.'.join(parts[:-1])!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """'grpo.lr=2e-6' -> ('grpo.lr', 2e-06); the value is read as YAML ('null', '[a, b]')."""
    if "=" not in text:
        raise ConfigError(f"override {text!r}: expected KEY=VALUE, e.g. grpo.lr=2e-6")
    key, raw = text.split("=", 1)
    key = key.strip()
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def _check_keys(data: dict[str, Any], where: str, model: type[BaseModel] = TrainConfig, prefix: str = "") -> None:
    """Reject unknown keys with the closest known key as a hint."""
    known = _known_keys(TrainConfig)
    for name, value in data.items():
        key = prefix + str(name)
        fields = config_fields(model)
        if name not in fields:
            hint = key_hint(key, known, value)
            section = f" in section {prefix[:-1]!r}" if prefix else ""
            raise ConfigError(f"{where}: unknown config key {key!r}{section}{hint}")
        ann = fields[name].annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            if isinstance(value, dict):
                _check_keys(value, where, ann, key + ".")
        elif isinstance(value, dict) and "dict" not in str(ann):
            raise ConfigError(f"{where}: {key!r} is a value, not a section "
                              f"(got the keys {', '.join(map(str, value))})")


def _format_validation(exc: ValidationError, where: str) -> str:
    lines = []
    for err in exc.errors():
        if not err["loc"]:  # a check across keys: its message names them
            lines.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
            continue
        loc = ".".join(str(p) for p in err["loc"])
        got = err.get("input")
        got_text = f" (got {got!r})" if not isinstance(got, dict) else ""
        lines.append(f"{where}: config key {loc!r}: {err['msg']}{got_text}")
    return "\n".join(lines)


def load_config(path: str | Path | None = None, preset: str | None = None,
                overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Defaults <- preset <- YAML file <- overrides, validated into a `TrainConfig`."""
    data: dict[str, Any] = {}
    sources = []
    if preset is not None:
        p = preset_path(preset)
        layer = _read_yaml(p)
        _check_keys(layer, f"preset {preset}")
        data = _merge(data, layer)
        sources.append(f"preset {preset}")
    if path is not None:
        layer = _read_yaml(Path(path))
        _check_keys(layer, str(path))
        data = _merge(data, layer)
        sources.append(str(path))
    for text in overrides:
        key, value = parse_override(text)
        layer: dict[str, Any] = {}
        _set_dotted(layer, key, value, f"--set {text}")
        _check_keys(layer, f"--set {text}")
        data = _merge(data, layer)
    where = " + ".join(sources + (["--set"] if overrides else [])) or "defaults"
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, where)) from None


def _merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in layer.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def config_to_yaml(cfg: TrainConfig) -> str:
    """The full resolved config as YAML (written to RUN_DIR/config.yaml)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def save_config(cfg: TrainConfig, path: str | Path) -> None:
    """Write a run's config.yaml atomically: a crash leaves the old file or the new one."""
    from codea1.train.checkpoint import atomic_write_text  # inside: this module stays torch-free

    atomic_write_text(path, config_to_yaml(cfg))


# Keys a resumed run may change: the total (`codea1 train --resume RUN --steps N`) and the
# settings on which no figure of the run depends (how many threads and sandbox workers do
# the work, what the display shows, where the figures are also sent, which checkpoints are
# kept), through `--resume RUN --set KEY=VALUE`. Any other difference between a run's
# config.yaml and its checkpoint's config is refused.
RESUME_OVERRIDES = ("steps",)
RESUME_CHANGEABLE = ("steps", "threads", "judge.workers", "logging.progress", "logging.tensorboard",
                     "logging.wandb.project", "logging.wandb.entity", "logging.wandb.name", "logging.wandb.mode",
                     "checkpoint.every", "checkpoint.keep", "distributed.timeout_s")


def changeable_text() -> str:
    """The keys a resume may change, as a refusal lists them."""
    return "--steps, and with --set: " + ", ".join(k for k in RESUME_CHANGEABLE if k != "steps")


def resume_changes(saved: dict[str, Any], new: dict[str, Any], where: str, what: str = "the run") -> list[str]:
    """The keys whose values differ between two config mappings (a run's and what a resume
    asks for); refuses, naming the first, any key a resume may not change."""
    saved_flat, new_flat = _flatten(saved), _flatten(new)
    defaults = _flatten(TrainConfig().model_dump(mode="json"))

    def value(flat: dict[str, Any], key: str) -> Any:
        # a key a mapping lacks (written before a newer codea1 added the key) stands for the
        # default that loading it fills in
        return flat.get(key, defaults.get(key, "<absent>"))

    changed = [k for k in dict.fromkeys([*saved_flat, *new_flat]) if value(saved_flat, k) != value(new_flat, k)]
    refused = [k for k in changed if k not in RESUME_CHANGEABLE]
    if refused:
        k = refused[0]
        more = f" (and {len(refused) - 1} more keys)" if len(refused) > 1 else ""
        raise ConfigError(f"{where}: {k!r} is {value(new_flat, k)!r} but {what} was trained with "
                          f"{value(saved_flat, k)!r}{more}; a resumed run keeps its config: only "
                          f"{changeable_text()} may change")
    return changed


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix[:-1]: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def raw_digest(data: dict[str, Any]) -> str:
    """sha256 of a config mapping (a `TrainConfig`'s `model_dump(mode="json")`): state.json's
    `config_sha256`, which the trainer computes once when it starts."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def read_run_config(path: str | Path) -> tuple[TrainConfig, dict[str, Any]]:
    """A run directory's own config.yaml: (the config, the file's mapping as written).

    Unlike `load_config`, an empty file is an error, not the defaults: a run's config is
    always written whole, so an empty one means the file was damaged.
    """
    path = Path(path)
    raw = _read_yaml(path)
    if not raw:
        raise ConfigError(f"{path}: empty; a run's config.yaml holds its whole config "
                          "(written by codea1 train), so this run cannot be resumed from it")
    return load_config(path), raw


#: keys added since run directories were first written: a config.yaml of an earlier version
#: lacks them and stands for their defaults (a file cut short lacks others too, and is refused)
KEYS_ADDED_LATER = ("judge.stdin_time_scale", "judge.stdin_max_output_mb")


def check_run_config(raw: dict[str, Any], path: str | Path, state: dict[str, Any] | None,
                     checkpoint: str | Path | None = None) -> None:
    """Refuse a run config that is not the one its checkpoint was trained with.

    `state` is the checkpoint's state.json (None: no checkpoint yet). It records the
    config (`config`, since crash-safe resumes) or only its digest (`config_sha256`,
    older checkpoints); the keys of `RESUME_OVERRIDES` may differ. With no checkpoint
    the file must hold every key of the config but those added later (a file cut short
    would silently fill the rest with defaults).
    """
    raw_flat = _flatten(raw)
    if state is None or ("config" not in state and "config_sha256" not in state):
        full = _flatten(TrainConfig().model_dump(mode="json"))
        missing = [k for k in full if k not in raw_flat and k not in KEYS_ADDED_LATER
                   and not any(k.startswith(f"{r}.") for r in raw_flat)]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise ConfigError(f"{path}: incomplete, {shown} missing; a run's config.yaml holds its "
                              "whole config (written by codea1 train)")
        return
    where = f"checkpoint {Path(checkpoint).name}" if checkpoint is not None else "the checkpoint"
    if "config" in state:
        saved, started = state["config"], started_on_all_stdin(state)
        if started is not None:  # what its bare `bundled-stdin` named then is what it must say now
            if _data_of(raw).get("train") == BARE_STDIN:
                raise ConfigError(f"{path}: {_bare_stdin_story(started)}, so the run would resume on other "
                                  f"problems. Write {_as_started_keys(raw)} in {path}: the problems it trained "
                                  f"on (`codea1 train --resume {Path(path).parent}` does this itself)")
            saved = as_started(saved)
        resume_changes(saved, raw, str(path), where)
        return
    if raw_digest(raw) != state["config_sha256"]:
        raise ConfigError(f"{path}: changed since {where} was written (its sha256 does not match the "
                          "checkpoint's config_sha256); a resumed run keeps its config")


# --------------------------------------------------------------------------- bare bundled-stdin

#: `bundled-stdin` alone named all the bundled stdin problems, in data.train and data.heldout,
#: until it came to name their train (held-out) split, as `bundled` alone does; what a run
#: started before trained on is `bundled-stdin:all` now
BARE_STDIN, ALL_STDIN = "bundled-stdin", "bundled-stdin:all"


def _data_of(mapping: dict[str, Any]) -> dict[str, Any]:
    data = mapping.get("data") if isinstance(mapping, dict) else None
    return data if isinstance(data, dict) else {}


def started_on_all_stdin(state: dict[str, Any] | None) -> tuple[int, int, int] | None:
    """Whether a checkpoint is of a run started when `data.train: bundled-stdin` named all
    the bundled stdin problems: its config says `bundled-stdin`, and its data position counts
    more problems than their train split holds (after data.include and the rows data.check=skip
    left out; dropping over-long prompts only lowers the count), and no ids digest (recorded
    only by runs started since). Returns (the problems it counts, how many the train split
    and all of them hold), or None."""
    from codea1.data.bundled import STDIN_PREFIX, bundled_problems

    config = state.get("config") if isinstance(state, dict) else None
    position = state.get("data") if isinstance(state, dict) else None
    if not isinstance(config, dict) or _data_of(config).get("train") != BARE_STDIN or not isinstance(position, dict) \
            or "ids_sha256" in position or not isinstance(position.get("n"), int):
        return None
    include, skipped = _data_of(config).get("include"), set(state.get("skipped_problems") or [])

    def count(split: str) -> int:
        return sum(1 for p in bundled_problems(STDIN_PREFIX + split) if p.id not in skipped
                   and (include is None or any(fnmatchcase(p.id, pattern) for pattern in include)))

    n, train, everything = position["n"], count("train"), count("all")
    return (n, train, everything) if train < n <= everything else None


def as_started(mapping: dict[str, Any]) -> dict[str, Any]:
    """A config mapping of a run `started_on_all_stdin` with what its bare `bundled-stdin`
    named then: `bundled-stdin:all` in data.train, and in data.heldout where it says so too."""
    data = {**_data_of(mapping), "train": ALL_STDIN}
    if data.get("heldout") == BARE_STDIN:
        data["heldout"] = ALL_STDIN
    return {**mapping, "data": data}


def _as_started_keys(mapping: dict[str, Any]) -> str:
    keys = ["train"] + (["heldout"] if _data_of(mapping).get("heldout") == BARE_STDIN else [])
    return " and ".join(f"data.{k}: {ALL_STDIN}" for k in keys)


def _bare_stdin_story(started: tuple[int, int, int]) -> str:
    n, train, everything = started
    return (f"data.train '{BARE_STDIN}' named all {everything} bundled stdin problems when this run was started "
            f"(its checkpoint's data position counts {n}); it names their train split ({train}) now, as "
            "'bundled' alone does")


def migrate_bare_stdin(path: str | Path, state: dict[str, Any] | None) -> str | None:
    """Rewrite the config.yaml of a run `started_on_all_stdin` (its checkpoint's `state`) to
    say what it trained on, `bundled-stdin:all`, the same problems in the same order, so that
    it resumes on them (`check_run_config` takes the pair); returns the line that says so,
    or None where there is nothing to do."""
    from codea1.output_files import atomic_write_text

    raw = _read_yaml(Path(path))
    started = started_on_all_stdin(state)
    if started is None or _data_of(raw).get("train") != BARE_STDIN:
        return None
    keys = _as_started_keys(raw)
    atomic_write_text(path, yaml.safe_dump(as_started(raw), sort_keys=False))
    return f"{path}: now says {keys}, what the run trained on: {_bare_stdin_story(started)}"
