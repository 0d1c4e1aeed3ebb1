"""benchmarks/reward_semantics.py end to end on the tiny model: the same rollouts judged
under the reference semantics and the strict switches, both columns printed."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from tiny_run import make_tiny, tiny_overrides


def test_reward_semantics_benchmark_judges_one_steps_rollouts_twice(tmp_path, monkeypatch, capsys):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "reward_semantics.py"
    spec = importlib.util.spec_from_file_location("reward_semantics_bench", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tiny = make_tiny(tmp_path)
    sets = [a for o in tiny_overrides(tiny, steps=1) for a in ("--set", o)]
    out_json = tmp_path / "figures.json"
    monkeypatch.setattr(sys, "argv", ["reward_semantics.py", *sets, "--json", str(out_json)])
    bench.main()
    out = capsys.readouterr().out
    assert "step 1: rollouts judged twice" in out
    for key in bench.SHOWN:  # one row per metric, a figure in each column
        assert re.search(rf"^{re.escape(key)} +-?\d+\.\d{{3}} +-?\d+\.\d{{3}}$", out, re.M), out
    data = json.loads(out_json.read_text())
    assert len(data["per_step"]["reference"]) == len(data["per_step"]["strict"]) == 1
    # the same rollouts: how many candidates compiled does not depend on the test semantics
    ref, strict = data["per_step"]["reference"][0], data["per_step"]["strict"][0]
    assert ref["judge/code_valid_rate"] == strict["judge/code_valid_rate"]
