"""The run's settings live in one torch-free module, `codea1.configs`, and keep their old homes."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the fresh interpreter imports this checkout's codea1

HEAVY = ("torch", "transformers", "peft", "vllm")


def imported_after(*modules: str) -> list[str]:
    """The heavy packages in `sys.modules` of a fresh interpreter after importing `modules`."""
    code = (f"import sys\nfor m in {list(modules)!r}: __import__(m)\n"
            f"print(__import__('json').dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_config_modules_import_neither_torch_nor_transformers():
    assert imported_after("codea1.configs") == []
    assert imported_after("codea1.train.config") == []


def test_the_command_line_imports_neither_torch_nor_transformers():
    """`codea1 --help` loads codea1.cli and every command module it imports at top level."""
    assert imported_after("codea1.cli", "codea1.cli_options") == []


def test_each_config_is_re_exported_from_its_old_module():
    from codea1 import configs
    from codea1.engines import VLLMConfig as from_engines
    from codea1.engines.base import ENGINE_NAMES, MAX_TEMPERATURE, VLLMConfig, check_engine_name
    from codea1.grpo import GRPOConfig
    from codea1.models import ROLES, ModelConfig
    from codea1.rollout import SamplingConfig

    assert GRPOConfig is configs.GRPOConfig and ModelConfig is configs.ModelConfig
    assert SamplingConfig is configs.SamplingConfig and VLLMConfig is configs.VLLMConfig is from_engines
    assert ROLES is configs.ROLES and ENGINE_NAMES is configs.ENGINE_NAMES
    assert MAX_TEMPERATURE == configs.MAX_TEMPERATURE and check_engine_name is configs.check_engine_name
