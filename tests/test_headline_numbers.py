"""The numbers a run reports, pinned to hand-counted values: golden pass rates, `val/*`,
and golden-mode rewards.

The other tests check that these figures exist and lie in [0, 1]; a rule changed under
them (a code that passes some golden tests counted as correct, the check that the function
exists counted as one more passed test, a pass@k from the wrong counts) moved no test.
Here every candidate is scripted, so each figure is a fraction counted by hand in the
comments. (The golden tests of tests/tiny_run.py's problems decide each candidate.)

Faults tried (each made these tests fail):
- validation's "correct" taken as "passed at least one golden test" (pass_rate > 0):
  val/code_pass_rate and pass@k differed;
- the golden pass rate counting the entry-point check as a passed test (calls[0:] over
  the golden asserts): every rate, code/reward_mean and val/code_golden_rate differed;
- the golden pass rate divided by one more than the asserts: likewise.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiny_run import PROBLEMS, problems  # noqa: E402

from codea1.sandbox import Executor, Limits  # noqa: E402
from codea1.judge.golden import golden_results  # noqa: E402

torch.set_num_threads(1)

BY_ID = {p.id: p for p in problems(PROBLEMS, "x")}
ALWAYS_TRUE = "def is_even(n):\n    return True\n"   # passes is_even(4) and is_even(0), not is_even(3)
# the wrong solutions of tests/tiny_run.py, counted against each problem's golden asserts:
#   T/even  `n == 0`:       4 -> False (fail), 3 -> False (pass), 0 -> True (pass)   2/3
#   T/vowels `s.count('a')`: banana 3 (pass), xyz 0 (pass), io 0 (fail)              2/3
#   T/max   `xs[0]`:        [1, 3, 2] -> 1 (fail), [5] -> 5 (pass)                  1/2
#   T/add   `a - b`:        -1, -2, 0 against 3, 0, 10: none                        0/3
WRONG = {pid: wrong for pid, _q, _e, _r, wrong, _t in PROBLEMS}
RATE = {"T/even": 2 / 3, "T/vowels": 2 / 3, "T/max": 1 / 2, "T/add": 0.0}


def _code(pid: str, kind: str) -> str:
    p = BY_ID[pid]
    return {"right": p.reference, "wrong": WRONG[pid], "true": ALWAYS_TRUE}[kind]


def test_golden_results_count_only_the_golden_asserts():
    items = [("T/even", p.reference) for p in [BY_ID["T/even"]]]
    items += [(pid, WRONG[pid]) for pid in RATE]
    items += [("T/even", ALWAYS_TRUE),
              ("T/even", "def is_odd(n):\n    return n % 2 == 1\n"),          # no entry point
              ("T/even", "def is_even(n):\n    return n % 2 == 0\nraise ValueError('x')\n")]  # program fails
    with Executor(workers=2, limits=Limits(timeout_s=10.0, call_timeout_s=5.0), preload=()) as ex:
        got = golden_results(ex, [(BY_ID[pid], code) for pid, code in items])
    want = [(1.0, True, "pass")] + [(RATE[pid], False, "fail") for pid in RATE]
    want += [(2 / 3, False, "fail"), (0.0, False, "no-function"), (0.0, False, "error")]
    assert [(pytest.approx(r.pass_rate), r.correct, r.status) for r in got] == want


# --------------------------------------------------------------------------- a whole run

# Each problem's four samples, by index in its group (training and validation alike):
SCRIPT = {
    "T/even": ["right", "wrong", "right", "true"],     # correct 2/4; rates 1, 2/3, 1, 2/3
    "T/vowels": ["wrong", "wrong", "wrong", "right"],  # correct 1/4; rates 2/3, 2/3, 2/3, 1
    "T/max": ["wrong", "wrong", "wrong", "wrong"],     # correct 0/4; rates 1/2 each
}
SOURCES = {"T/even": "alpha", "T/vowels": "alpha", "T/max": "beta"}
# The test model's suite for every candidate of a problem: golden asserts, all valid on the
# reference; T/vowels' two are the ones its wrong solution passes (no kill).
SUITES = {"T/even": "\n".join(BY_ID["T/even"].tests), "T/vowels": "\n".join(BY_ID["T/vowels"].tests[:2]),
          "T/max": "\n".join(BY_ID["T/max"].tests)}


def _scripted(real):
    """`real` generate, each code sample's text replaced by SCRIPT's (ids re-encoded)."""

    def fake(policies, role, prompts, n=1, sampling=None, **kw):
        out = real(policies, role, prompts, n=n, sampling=sampling, **kw)
        tok = policies.tokenizer
        eos = tok.convert_tokens_to_ids("<|im_end|>")
        for prompt, group in zip(prompts, out):
            text = tok.decode(prompt) if isinstance(prompt[0], int) else prompt[-1]["content"]
            pid = next(pid for pid in SCRIPT if BY_ID[pid].question.strip()[:200] in text)
            texts = ([f"```python\n{_code(pid, kind)}```" for kind in SCRIPT[pid]] if role == "code"
                     else [f"```python\n{SUITES[pid]}\n```"] * len(group))
            assert len(group) == len(texts)
            for s, text in zip(group, texts):
                s.text = text
                s.completion_ids = tok(s.text, add_special_tokens=False)["input_ids"] + [eos]
                s.truncated, s.finished = False, True
        return out

    return fake


def _headline_run(root: Path, mode: str, *extra: str):
    """One step on T/even and T/vowels, validated on those and T/max before and after."""
    import codea1.engines.hf_engine as hf_engine
    from codea1.data import Problem, save_problems
    from tiny_model import tiny_test_model
    from codea1.train.config import load_config
    from codea1.train.loop import train
    from codea1.train.metrics import read_metrics

    tiny_test_model(root / "model")
    rows = {pid: BY_ID[pid] for pid in SCRIPT}
    as_source = [Problem(id=p.id, question=p.question, entry_point=p.entry_point, reference=p.reference,
                         tests=p.tests, source=SOURCES[p.id], meta={}) for p in rows.values()]
    save_problems(as_source[:2], root / "train.jsonl")
    save_problems(as_source, root / "heldout.jsonl")
    cfg = load_config(preset="cpu-demo", overrides=[
        f"model.name={root / 'model'}", "model.dtype=float32", "model.lora_r=4", f"mode={mode}", "steps=1",
        f"data.train={root / 'train.jsonl'}", f"data.heldout={root / 'heldout.jsonl'}", "data.problems_per_step=2",
        "rollout.n_code=4", "rollout.code.max_new_tokens=4", "validation.every=1", "validation.n_code=4",
        "validation.sampling.max_new_tokens=4", "validation.sampling.temperature=1.0", "judge.workers=2", "logging.progress=none",
        "logging.tensorboard=false", "threads=1", "grpo.micro_batch_tokens=1024", *extra])
    real = hf_engine.generate
    hf_engine.generate = _scripted(real)
    try:
        train(cfg, root / "run")
    finally:
        hf_engine.generate = real
    samples = [json.loads(x) for x in (root / "run" / "samples.jsonl").read_text().splitlines()]
    return read_metrics(root / "run"), samples


@pytest.fixture(scope="module")
def golden_run(tmp_path_factory):
    return _headline_run(tmp_path_factory.mktemp("golden"), "golden")


@pytest.fixture(scope="module")
def a1_validated_run(tmp_path_factory):
    """The a1 mode with the test model validated too (one suite per held-out candidate)."""
    return _headline_run(tmp_path_factory.mktemp("a1"), "a1", "rollout.n_test=2", "rollout.test.max_new_tokens=4",
                         "validation.test_model=true", "validation.n_test=1")


def test_validation_figures_are_the_hand_counted_ones(golden_run):
    rows, _ = golden_run
    assert [r["step"] for r in rows] == [0, 1]
    for row in rows:   # the samples are scripted: before and after the step alike
        assert row["val/problems"] == 3
        assert row["val/code_pass_rate"] == pytest.approx(3 / 12)            # 2 + 1 + 0 correct of 12
        rates = [1, 2 / 3, 1, 2 / 3] + [2 / 3] * 3 + [1] + [1 / 2] * 4
        assert row["val/code_golden_rate"] == pytest.approx(sum(rates) / 12)
        assert row["val/alpha/problems"] == 2 and row["val/beta/problems"] == 1
        assert row["val/alpha/avg@4"] == pytest.approx((2 / 4 + 1 / 4) / 2)
        assert row["val/alpha/pass@1"] == pytest.approx((2 / 4 + 1 / 4) / 2)
        assert row["val/alpha/pass@4"] == pytest.approx(1.0)
        assert row["val/beta/avg@4"] == 0.0 and row["val/beta/pass@4"] == 0.0
        assert {k for k in row if k.startswith("val/alpha/")} == {
            "val/alpha/problems", "val/alpha/avg@4", "val/alpha/pass@1", "val/alpha/pass@4"}


def test_golden_mode_rewards_are_the_golden_pass_rates(golden_run):
    rows, samples = golden_run
    step = rows[1]
    rates = [1, 2 / 3, 1, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 1]   # T/even's four, then T/vowels' (either order)
    assert step["code/reward_mean"] == pytest.approx(sum(rates) / 8)
    assert step["code/reward_std"] == pytest.approx(statistics.pstdev(rates))
    assert step["judge/pass_rate"] == pytest.approx(sum(rates) / 8)
    assert step["judge/code_correct_rate"] == pytest.approx(3 / 8)
    assert step["judge/code_valid_rate"] == 1.0
    shown = {s["problem_id"]: s["reward"] for s in samples if s["role"] == "code"}
    assert shown == {"T/even": pytest.approx(1.0), "T/vowels": pytest.approx(2 / 3)}   # each group's first sample


def test_test_model_validation_figures_are_the_hand_counted_ones(a1_validated_run):
    """val/test_*: each candidate's one suite. Validity (G = 4, cpu-demo): T/even's 3 asserts 3/4,
    T/vowels' 2 and T/max's 2 asserts 2/4; all hold on the reference. Wrong candidates
    (valid code, not correct): T/even 2 (`n == 0`, always True: both killed), T/vowels 3
    (the suite is what the wrong code passes: none killed), T/max 4 (all killed)."""
    rows, _ = a1_validated_run
    row = rows[0]
    assert row["val/code_pass_rate"] == pytest.approx(3 / 12)   # as in golden mode: the code model alone
    assert row["val/test_valid_ratio"] == pytest.approx((4 * 3 / 4 + 4 * 2 / 4 + 4 * 2 / 4) / 12)
    assert row["val/test_pass_on_reference"] == 1.0
    assert row["val/test_wrong_candidates"] == 9
    assert row["val/test_kill_rate"] == pytest.approx(6 / 9)
