"""Input the commands and the config refuse up front, each in one clear line (audit D):
export's --max-shard-size, a bool given for a number in any config key, every input of a
new run reported at once, one-line YAML errors, non-finite timeouts, --greedy with an --n or
--temperature it would override, and the help of --temperature, --data and logging.progress."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from codea1.cli import app
from codea1.train.config import ConfigError, TrainConfig, config_fields, load_config

WIDE = {"COLUMNS": "250"}


def run_refused(args: list[str], code: int = 2) -> str:
    """The one `error:` line of a refused command (exit `code`, no traceback)."""
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


# --- 1. export --max-shard-size ----------------------------------------------------------------


@pytest.mark.parametrize("size", ["abc", "0", "-5GB", "0GB", "nanGB", "infGB", "5", "5 GiB"])
def test_export_refuses_a_bad_shard_size_before_loading_anything(tmp_path, monkeypatch, size):
    import codea1.export

    def no_export(*_a, **_k):
        raise AssertionError("export_run was called: the size must be checked first")

    monkeypatch.setattr(codea1.export, "export_run", no_export)
    monkeypatch.chdir(tmp_path)
    line = run_refused(["export", "no-such-run", "out", "--role", "code", "--max-shard-size", size])
    assert "'--max-shard-size'" in line and repr(size) in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("size", ["5GB", "500MB", "0.5gb", "10KB", "1TB"])
def test_export_takes_a_size_with_a_unit(tmp_path, monkeypatch, size):
    import codea1.export

    seen = {}

    class Reached(Exception):
        pass

    def fake_export(run_dir, out, role, **kwargs):
        seen.update(kwargs)
        raise Reached

    monkeypatch.setattr(codea1.export, "export_run", fake_export)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["export", "run", "out", "--role", "code", "--max-shard-size", size])
    assert isinstance(result.exception, Reached), (result.output, result.exception)
    assert seen["max_shard_size"] == size


# --- 2. a bool is no number --------------------------------------------------------------------


def _takes_number(annotation) -> bool:
    origin = typing.get_origin(annotation)
    if annotation in (int, float):
        return True
    if origin in (typing.Union, types.UnionType):
        return bool not in typing.get_args(annotation) and any(_takes_number(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        args = typing.get_args(annotation)
        return any(isinstance(a, int) and not isinstance(a, bool) for a in args) and \
            not any(isinstance(a, bool) for a in args)
    return False


def number_keys(model=TrainConfig, prefix: str = "") -> list[str]:
    """Every config key of an int, float (optional or not) or int-Literal field."""
    keys = []
    for name, info in config_fields(model).items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, __import__("pydantic").BaseModel):
            keys += number_keys(ann, f"{prefix}{name}.")
        elif _takes_number(ann):
            keys.append(prefix + name)
    return keys


def test_every_number_key_refuses_a_bool_naming_the_key():
    keys = number_keys()
    assert {"grpo.lr", "steps", "judge.alpha", "judge.workers", "rollout.vllm.sleep_level",
            "validation.sampling.temperature", "model.lora_alpha"} <= set(keys)
    accepted = []
    for key in keys:
        for word in ("true", "no"):
            try:
                load_config(preset="cpu-demo", overrides=[f"{key}={word}"])
            except ConfigError as exc:
                text = str(exc)
                assert text.count("\n") == 0 and f"config key {key!r}" in text, text
                assert "not a boolean" in text and "Value error" not in text, text
                assert text.count("(got ") == 1, text  # not "got True (got True)"
            else:
                accepted.append(f"{key}={word}")
    assert accepted == []


@pytest.mark.parametrize("setting, expected", [
    ("grpo.lr=true", "config key 'grpo.lr': expected a number, not a boolean"),
    ("steps=true", "config key 'steps': expected an integer, not a boolean"),
    ("judge.alpha=yes", "config key 'judge.alpha': expected a number, not a boolean"),
    ("grpo.betas=[0.9, yes]", "config key 'grpo.betas': expected a number in each item, not a boolean"),
])
def test_config_show_refuses_a_bool_for_a_number(setting, expected):
    line = run_refused(["config", "show", "--preset", "cpu-demo", "--set", setting])
    assert expected in line, line
    assert "got True (got True)" not in line and "Value error" not in line, line


def test_an_int_for_a_float_and_real_bools_still_load(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("grpo:\n  lr: 1\n  betas: [0, 0.5]\njudge:\n  alpha: 1\n  strict_tests: yes\ndata:\n  check: off\n")
    cfg = load_config(path=path, overrides=["steps=3", "grpo.std_unbiased=false"])
    assert cfg.grpo.lr == 1.0 and isinstance(cfg.grpo.lr, float) and cfg.grpo.betas == (0.0, 0.5)
    assert cfg.judge.alpha == 1.0 and cfg.judge.strict_tests is True and cfg.data.check == "off"
    assert cfg.steps == 3 and cfg.grpo.std_unbiased is False


def test_the_rule_lives_in_one_base_class():
    from codea1.configs import ConfigModel, GRPOConfig, ModelConfig, SamplingConfig, VLLMConfig
    from codea1.train import config as train_config

    for model in (GRPOConfig, ModelConfig, SamplingConfig, VLLMConfig, train_config.TrainConfig,
                  train_config.DataConfig, train_config.LoggingConfig):
        assert issubclass(model, ConfigModel), model
    with pytest.raises(Exception, match="expected an integer, not a boolean"):
        SamplingConfig(max_new_tokens=True)


# --- 3. every input of a new run reported at once ------------------------------------------------


def test_a_new_run_reports_a_bad_train_file_and_a_missing_heldout_file_together(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "BAD.jsonl").write_text('{"id": "x", "question": \n')
    line = run_refused(["train", "--preset", "paper-1.5b", "--run-dir", "pp", "--set", "data.train=BAD.jsonl",
                        "--set", "data.heldout=nosuch.parquet", "--set", "model.hub_probe_timeout_s=0.1"])
    assert "BAD.jsonl, row 1" in line, line
    assert "nosuch.parquet: no such problem file" in line, line
    assert "model.name" in line, line
    assert not (tmp_path / "pp").exists()


def test_a_bad_heldout_file_is_reported_while_train_is_still_required(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = run_refused(["train", "--preset", "paper-1.5b", "--run-dir", "pp",
                        "--set", "data.heldout=nosuch.parquet", "--set", "model.hub_probe_timeout_s=0.1"])
    assert "data.train is required" in line and "nosuch.parquet: no such problem file" in line, line


# --- 4. messages --------------------------------------------------------------------------------


def test_a_run_dir_refusal_names_the_option_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notrun").mkdir()
    (tmp_path / "notrun" / "file.txt").write_text("mine\n")
    line = run_refused(["train", "--preset", "cpu-demo", "--run-dir", "notrun"])
    assert line.startswith("error: --run-dir: notrun is not empty and not a codea1 run"), line
    assert "Invalid value" not in line and line.count("--run-dir:") == 1, line


def test_invalid_yaml_names_the_file_line_and_column(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bad.yaml").write_text("mode: a1\n  steps: 3\n")
    line = run_refused(["config", "show", "--config", "bad.yaml"])
    assert line.startswith("error: bad.yaml, line 2, column 8: mapping values are not allowed here"), line
    assert "^" not in line and "<unicode string>" not in line, line
    Path("open.yaml").write_text("steps: [1, 2\n")
    line = run_refused(["train", "--config", "open.yaml"])
    assert line.startswith("error: open.yaml, line 2, column 1: expected ',' or ']'"), line
    assert "flow sequence from line 1, column 8" in line, line


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
@pytest.mark.parametrize("command", [["sandbox", "run", "prog.py"], ["data", "check", "bundled:demo"]])
def test_timeouts_must_be_positive_and_finite_naming_the_option(tmp_path, monkeypatch, command, value):
    monkeypatch.chdir(tmp_path)
    Path("prog.py").write_text("print(1)\n")
    line = run_refused([*command, "--timeout", value])
    assert "Invalid value for '--timeout'" in line and "positive, finite" in line, line
    assert "Limits." not in line, line


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_the_call_timeout_option_refuses_what_is_not_positive_and_finite(value):
    from codea1.cli_options import CALL_TIMEOUT_OPTION

    probe = typer.Typer()

    @probe.command()
    def run(call_timeout: float = CALL_TIMEOUT_OPTION) -> None:
        typer.echo(f"ok {call_timeout}")

    result = CliRunner().invoke(probe, ["--call-timeout", value])
    assert result.exit_code == 2 and "Invalid value for '--call-timeout'" in result.output, result.output
    assert CliRunner().invoke(probe, ["--call-timeout", "0.5"]).output.strip() == "ok 0.5"


def test_data_check_refuses_an_infinite_call_timeout(tmp_path, monkeypatch):
    """`data check --call-timeout inf` was accepted (its own option's `min` let inf through)."""
    monkeypatch.chdir(tmp_path)
    line = run_refused(["data", "check", "bundled:demo", "--call-timeout", "inf"])
    assert "Invalid value for '--call-timeout'" in line and "positive, finite" in line, line


def test_a_judge_config_built_directly_refuses_a_bool_once():
    """JudgeConfig (the library's judge, without the training config) takes the one rule:
    before, its own validator said "expected a number, got True (got True)"."""
    from pydantic import ValidationError

    from codea1.judge import JudgeConfig

    with pytest.raises(ValidationError) as err:
        JudgeConfig(alpha=True)
    assert "not a boolean" in str(err.value) and "(got True) (got True)" not in str(err.value)
    with pytest.raises(ValidationError):
        JudgeConfig(float_rtol=False)
    assert JudgeConfig(alpha=1).alpha == 1.0


# --- 5. --greedy ------------------------------------------------------------------------------


@pytest.mark.parametrize("extra, named", [
    (["--n", "8"], "--n 8"),
    (["--temperature", "0.9"], "--temperature 0.9"),
    (["--n", "2", "--temperature", "1"], "--n 2 and --temperature 1"),
])
def test_greedy_refuses_an_n_or_temperature_it_would_override(tmp_path, monkeypatch, extra, named):
    monkeypatch.chdir(tmp_path)
    line = run_refused(["eval", "code", "--model", "x", "--data", "bundled:demo", "--out", "e", "--greedy", *extra])
    assert named in line and "--greedy" in line, line
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("extra", [[], ["--n", "1"], ["--temperature", "0"], ["--n", "1", "--temperature", "0.0"]])
def test_greedy_takes_the_values_it_implies(tmp_path, monkeypatch, extra):
    import codea1.eval.code

    class Reached(Exception):
        pass

    seen = {}

    def fake_evaluate(model, data, out, config, on_progress=None):
        seen["config"] = config
        raise Reached

    monkeypatch.setattr(codea1.eval.code, "evaluate_code", fake_evaluate)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["eval", "code", "--model", "x", "--data", "bundled:demo", "--out", "e",
                                      "--greedy", *extra])
    assert isinstance(result.exception, Reached), (result.output, result.exception)
    assert seen["config"].n == 1 and seen["config"].temperature == 0.0


# --- 6. help ------------------------------------------------------------------------------------


def _help(args: list[str]) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_select_temperature_help_shows_its_maximum():
    assert "[0.0<=x<=2.0]" in _help(["eval", "select"])


@pytest.mark.parametrize("command", [["eval", "code"], ["eval", "tests"], ["eval", "select"]])
def test_data_help_lists_the_bundled_stdin_problems(command):
    assert "bundled-stdin" in _help(command)


def test_config_keys_describes_plain_progress_as_it_prints():
    result = CliRunner().invoke(app, ["config", "keys"], env=WIDE)
    row = next(line for line in result.output.splitlines() if line.startswith("logging.progress "))
    assert "a line a step" not in row and "per phase" in row and "per step" in row, row
