"""benchmarks/reward_semantics.py end to end on the tiny model with a scripted model (fixed,
hand-made completions, no sampling): the same rollouts judged under the reference
semantics, the rules before issue 27 and the strict switches, and the figures they change."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from tiny_run import make_tiny, tiny_overrides


def scripted_generate(problems):
    """`codea1.engines.hf_engine.generate` replaced by fixed completions: per problem, the code model
    writes [right in ```python, wrong in ```python, right in ```py, right unterminated], the
    test model [a pytest-style suite of the golden asserts, a top-level suite with wrong
    expectations and `assert len([1, 2]) == 2`]."""
    from codea1.rollout import Sample
    from tiny_run import WRONG

    by_question = [(p.question.strip()[:200], p) for p in problems]

    def fake(policies, role, prompts, n=1, sampling=None, **_ignored):
        tok = policies.tokenizer
        out = []
        for prompt in prompts:
            text = tok.decode(prompt)
            p = next(p for q, p in by_question if q in text)
            if role == "code":
                texts = [f"```python\n{p.reference}```", f"```python\n{WRONG[p.id]}```",
                         f"```py\n{p.reference}```", f"```python\n{p.reference}"]
            else:
                indented = "\n".join("    " + t for t in p.tests)
                bad = [t.rsplit("==", 1)[0] + "== 12345" for t in p.tests]
                texts = ["```python\ndef test_golden():\n" + indented + "\n```",
                         "```python\n" + "\n".join(p.tests[:1] + bad[1:]) + "\nassert len([1, 2]) == 2\n```"]
            group = []
            for k in range(n):
                completion = texts[k % len(texts)]
                ids = tok(completion, add_special_tokens=False)["input_ids"]
                group.append(Sample(list(prompt), ids, completion, truncated=False, finished=True))
            out.append(group)
        return out

    return fake


def test_reward_semantics_benchmark_shows_what_the_switches_change(tmp_path, monkeypatch, capsys):
    from codea1.engines import hf_engine

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "reward_semantics.py"
    spec = importlib.util.spec_from_file_location("reward_semantics_bench", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tiny = make_tiny(tmp_path)
    monkeypatch.setattr(hf_engine, "generate", scripted_generate(tiny["problems"]))
    sets = [a for o in tiny_overrides(tiny, steps=1) for a in ("--set", o)]
    out_json = tmp_path / "figures.json"
    monkeypatch.setattr(sys, "argv", ["reward_semantics.py", *sets, "--json", str(out_json)])
    bench.main()
    out = capsys.readouterr().out
    assert "step 1: rollouts judged thrice" in out
    cell = r" +(?:-?\d+\.\d{3}|n/a)"
    for key in bench.SHOWN:  # one row per metric, a figure (or n/a) in each column
        assert re.search(rf"^{re.escape(key)}{cell * 3}$", out, re.M), out
    figures = json.loads(out_json.read_text())["figures"]
    # 2 problems x 4 candidates: the reference runs only the two closed ```python blocks
    # (the ```py and the unterminated one are invalid code); before issue 27 all four ran
    assert figures["judge/code_valid_rate"] == {"reference": 0.5, "before": 1.0, "strict": 0.5}
    assert figures["tests/pytest_style_share"] == {"reference": 0.5, "before": 0.5, "strict": 0.5}
    valid = figures["judge/valid_ratio"]
    # the pytest-style suite's asserts count only in the reference's line reading, and the
    # `len` test only without the entry-point rule
    assert valid["reference"] > valid["before"] and valid["reference"] > valid["strict"]
    assert figures["judge/valid_tests"]["reference"] > figures["judge/valid_tests"]["before"]
    # the wrong candidates fail the golden asserts: the book grows under every rule
    assert all(v > 0 for v in figures["mistakes/frequency_added"].values())


def test_an_absent_figure_prints_as_n_a():
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "reward_semantics.py"
    spec = importlib.util.spec_from_file_location("reward_semantics_bench", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.figure(None) == "n/a" and bench.figure(0.0) == "0.000"
    assert bench.pytest_style("```python\ndef test_a():\n    assert f(1) == 2\n```")
    assert not bench.pytest_style("```python\nassert f(1) == 2\n```\n    assert f(2) == 3")
