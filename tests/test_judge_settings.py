"""The judge's settings are declared once: `JudgeConfig` is the training config's `judge`
section (with the trainer's keys added), and a run directory written before keeps loading."""

from __future__ import annotations

import pytest
import yaml

from codea1.judge import JudgeConfig
from codea1.judge.config import REFERENCE_SWITCHES
from codea1.sandbox import Limits
from codea1.train.config import ConfigError, JudgeSection, TrainConfig, check_run_config, load_config

# The `judge` section as codea1 wrote it to RUN_DIR/config.yaml before JudgeConfig was
# nested (JudgeSection's own order), with one switch and the limits changed.
OLD_JUDGE_SECTION = """\
alpha: 0.5
suite_size: 4
nonprintable_penalty: true
workers: 2
timeout_s: 7.5
call_timeout_s: 2.0
memory_mb: 512
strict_validity: false
strict_lines: false
strict_operator: false
strict_tests: false
exact_types: true
float_rtol: 0.0
float_atol: 0.0
unicode_printable: false
require_entry_point: false
statement_reading: false
lenient_code_fences: false
own_namespace: false
require_definition: false
per_call_timeouts: false
isolate_calls: false
backend: local
ray_address: null
ray_actors: null
ray_batch_problems: 8
ray_in_flight: 2
ray_retries: 1
ray_require: []
"""


def test_every_judge_setting_is_the_judge_key_of_the_same_name():
    """Fault tried: re-declaring `alpha` in JudgeSection with another default (0.7): the
    defaults and descriptions no longer come from JudgeConfig and this test fails."""
    assert issubclass(TrainConfig.model_fields["judge"].annotation, JudgeConfig)
    section, judge = TrainConfig().judge, JudgeConfig()
    for name, info in JudgeConfig.model_fields.items():
        if info.exclude:
            continue
        assert JudgeSection.model_fields[name] is info or JudgeSection.model_fields[name].description == info.description
        assert getattr(section, name) == getattr(judge, name), name
    assert set(REFERENCE_SWITCHES) <= set(JudgeConfig.model_fields)
    assert "isolate_calls" in REFERENCE_SWITCHES and "alpha" not in REFERENCE_SWITCHES


def test_the_settings_the_code_sets_are_no_config_keys():
    """`limits`, `resume_rounds`... are set by whoever builds a judge: `--set` refuses them
    and config.yaml never holds them."""
    for key in ("judge.limits=1", "judge.resume_rounds=1", "judge.golden_limits=1", "judge.switch_interval_s=0.1"):
        with pytest.raises(ConfigError, match=r"unknown config key 'judge\.\w+' in section 'judge'"):
            load_config(overrides=[key])
    dumped = TrainConfig().model_dump(mode="json")["judge"]
    assert not {"limits", "reference_limits", "golden_limits", "resume_rounds", "switch_interval_s"} & set(dumped)


def test_the_trainers_judge_gets_the_sections_settings_and_limits():
    cfg = load_config(overrides=["judge.exact_types=true", "judge.timeout_s=7.5", "judge.call_timeout_s=2",
                                 "judge.memory_mb=512", "judge.alpha=0.25"])
    judge = cfg.judge.judge_config()
    assert isinstance(judge, JudgeConfig)
    assert judge.exact_types and judge.alpha == 0.25
    assert judge.limits == Limits(timeout_s=7.5, call_timeout_s=2.0, memory_mb=512) == cfg.judge.sandbox_limits()
    with pytest.raises(ConfigError, match=r"config key 'judge\.alpha': Input should be less than or equal to 1"):
        load_config(overrides=["judge.alpha=1.5"])


def test_a_run_directory_written_before_loads_and_resumes(tmp_path):
    """A config.yaml (and a checkpoint's recorded config) whose judge section has the old
    order of keys: read back, the same settings, and a resume accepts it."""
    saved = TrainConfig().model_dump(mode="json")
    saved["judge"] = yaml.safe_load(OLD_JUDGE_SECTION)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(saved, sort_keys=False))
    cfg = load_config(path)
    assert cfg.judge.suite_size == 4 and cfg.judge.exact_types and cfg.judge.sandbox_limits().memory_mb == 512
    check_run_config(saved, path, None)  # no checkpoint yet: every key present but those added since
    assert cfg.judge.stdin_max_output_mb == 4.0   # (a key added later: its default)
    cut = dict(saved, judge={k: v for k, v in saved["judge"].items() if k != "suite_size"})
    with pytest.raises(ConfigError, match="incomplete, judge.suite_size missing"):
        check_run_config(cut, path, None)   # an older key missing: a file cut short
    check_run_config(cfg.model_dump(mode="json"), path, {"config": saved})  # resumed: nothing changed


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0"])
def test_the_stdin_time_scale_is_a_positive_finite_number(value):
    """`judge.stdin_time_scale: inf` was taken (each input's limit then timeout_s, silently)
    while the eval commands' `--stdin-time-scale inf` is refused: both refuse it now."""
    with pytest.raises(ConfigError, match="stdin_time_scale"):
        load_config(preset="cpu-demo", overrides=[f"judge.stdin_time_scale={value}"])
