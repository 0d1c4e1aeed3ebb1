"""End-to-end training runs on a tiny random-weight model, in every mode, in seconds.

The `scripted` fixture replaces some of the tiny model's completions by scripted ones
(tests/tiny_run.py says which), so the judge, rewards, Mistake Book, GRPO update and
checkpoints all run for real on completions that carry a signal.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch
from tiny_run import make_scripted, tiny_overrides

from codea1.train.config import load_config
from codea1.train.loop import train
from codea1.train.metrics import read_metrics

torch.set_num_threads(1)


@pytest.fixture
def scripted(monkeypatch, tiny):
    """Wrap `codea1.engines.hf_engine.generate` with scripted completions drawn from its generator."""
    import codea1.engines.hf_engine as hf_engine

    counts = {"junk": 0}
    monkeypatch.setattr(hf_engine, "generate", make_scripted(hf_engine.generate, tiny["problems"], counts))
    return counts


def _config(tiny, mode="a1", steps=3, *extra):
    return load_config(preset="cpu-demo", overrides=[*tiny_overrides(tiny, mode, steps), *extra])


def _stable(rows):
    """Metrics without wall-clock figures (time/*, tokens per second)."""
    return [{k: v for k, v in r.items() if not k.startswith("time/") and not k.endswith("tokens_per_s")}
            for r in rows]


def _steps(rows):
    """The rows of training steps (not step 0's validation)."""
    return [r for r in rows if r["step"] > 0]


def _weights(ckpt: Path):
    from safetensors.torch import load_file

    return {f.name: load_file(str(f)) for f in sorted((ckpt / "policies").glob("*.safetensors"))}


@pytest.mark.parametrize("mode", ["a1", "golden", "selfplay"])
def test_end_to_end_every_mode(tmp_path, tiny, scripted, mode):
    result = train(_config(tiny, mode, 3), tmp_path / "run")
    assert result.step == 3 and not result.stopped
    run = tmp_path / "run"
    for name in ("config.yaml", "metrics.jsonl", "samples.jsonl", "mistakes.sqlite"):
        assert (run / name).is_file(), name
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-1", "step-2", "step-3"]
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    # validation before the first step, every 2 steps and after the last (as the reference)
    assert ["val/code_pass_rate" in r for r in rows] == [True, False, True, True]
    assert set(rows[0]) == {k for k in rows[0] if k.startswith("val/")} | {"step", "time/validation_s"}
    assert "val/test/avg@1" in rows[2] and "val/test/pass@1" in rows[2]   # per data source ("test")
    assert rows[3]["data/train_dropped_overlong"] == 1      # T/long's code prompt: over the context
    rows = _steps(rows)
    # every step trains, by default, every code sample (2 problems x 4) and, per problem, the
    # 2 suites of one candidate (the top std); one optimiser step each (cpu-demo: 1 mini-batch)
    trained = {"a1": {"code": 8, "test": 4}, "golden": {"code": 8}, "selfplay": {"shared": 12}}[mode]
    for key, sequences in trained.items():
        assert [r[f"update/{key}/sequences"] for r in rows] == [sequences] * 3, key
        assert [r[f"update/{key}/optimizer_steps"] for r in rows] == [1] * 3, key
        assert all(r[f"update/{key}/update_skipped"] == 0 for r in rows), key   # finite gradients
    # 4 problems (T/long dropped), 2 a step: epoch 0 is steps 1-2, step 3 starts epoch 1
    assert [r["data/epoch"] for r in rows] == [0, 0, 1]
    for r in rows:
        assert 0.0 <= r["code/reward_mean"] <= 1.0
        assert r["rollout/code_samples"] == 8
    if mode != "golden":
        assert "val/test_valid_ratio" in rows[1]
        assert any(r["mistakes/size"] > 0 for r in rows)      # wrong codes failed golden-like tests
        from codea1.mistakes import MistakeBook
        with MistakeBook(run / "mistakes.sqlite", readonly=True) as book:   # the figure against the book itself
            assert rows[-1]["mistakes/size"] == len(book.entries())
        assert rows[0]["rollout/test_samples"] == 16
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert {s["role"] for s in samples} == ({"code"} if mode == "golden" else {"code", "test"})
    # the trained weights moved away from the initial ones
    w1, w3 = _weights(run / "checkpoints" / "step-1"), _weights(run / "checkpoints" / "step-3")
    assert any(not torch.equal(w1[f][k], w3[f][k]) for f in w1 for k in w1[f])


def test_junk_completions_are_counted_never_fatal(tmp_path, tiny, scripted):
    """Every kept problem each step: T/long's code prompt is over the tiny context, so it is
    dropped from the data (counted). Test prompts take 687-705 tokens here before the
    candidate's code (733 with the code cut to its mark alone), 704-730 with a scripted
    code, more with the tiny model's own 60-token junk: over 740, the junk is cut, the
    question never (the scripted sampler finds each prompt's problem by its question)."""
    cfg = _config(tiny, "a1", 3, "data.problems_per_step=4", "rollout.code.max_new_tokens=60",
                  "rollout.test.max_prompt_tokens=740")
    result = train(cfg, tmp_path / "run")
    rows = _steps(read_metrics(tmp_path / "run"))
    assert result.step == 3 and scripted["junk"] > 0
    assert all(r["data/train_dropped_overlong"] == 1 and r["data/heldout_dropped_overlong"] == 0 for r in rows)
    assert sum(r["rollout/code_prompts_truncated"] + r["rollout/test_prompts_truncated"] for r in rows) == 0
    assert sum(r["rollout/test_prompts_shortened"] for r in rows) > 0
    assert sum(r["rollout/test_samples"] for r in rows) == 3 * 4 * 4 * 2   # every candidate tested
    assert sum(r["rollout/code_empty"] + r["rollout/test_empty"] for r in rows) > 0
    assert sum(r["rollout/code_truncated"] + r["rollout/test_truncated"] for r in rows) > 0
    assert all(r["judge/code_valid_rate"] < 1.0 for r in rows)


def test_cut_prompts_left_keeps_and_cuts_the_long_problem(tmp_path, tiny, scripted):
    """The project's older rule (the switch): nothing dropped, the long prompt cut from the left."""
    cfg = _config(tiny, "a1", 2, "data.problems_per_step=5", "rollout.code.cut_prompts_left=true",
                  "rollout.test.cut_prompts_left=true", "validation.every=0")
    assert train(cfg, tmp_path / "run").step == 2
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]                     # every=0: no validation at all
    assert all(r["data/train_dropped_overlong"] == 0 for r in rows)
    assert sum(r["rollout/code_prompts_truncated"] for r in rows) == 2   # T/long, once a step
    assert sum(r["rollout/test_prompts_shortened"] for r in rows) == 0


def test_pure_random_model_runs_without_any_signal(tmp_path, tiny):
    """No scripting: the tiny model's own junk flows through every phase."""
    result = train(_config(tiny, "a1", 2), tmp_path / "run")
    rows = _steps(read_metrics(tmp_path / "run"))
    assert result.step == 2
    assert all(r["judge/code_valid_rate"] == 0.0 for r in rows)
    # the reference trains zero-variance groups (advantage 0: only the KL term moves them)
    assert all(r["update/code/sequences"] == 8 for r in rows)
    assert all(r["update/test/sequences"] == 2 * 2 for r in rows)  # update_n = 1 suite group a problem
    filtered = train(_config(tiny, "a1", 1, "grpo.filter_zero_variance=true"), tmp_path / "filtered")
    assert filtered.step == 1
    assert _steps(read_metrics(tmp_path / "filtered"))[0]["update/code/sequences"] == 0   # dynamic sampling


def test_resume_is_exact(tmp_path, tiny, scripted):
    """4 steps straight == 2 steps, stop, resume, 2 more: same weights, metrics, book, samples."""
    from codea1.mistakes import MistakeBook

    a, b = tmp_path / "a", tmp_path / "b"
    train(_config(tiny, "a1", 4), a)
    first = train(_config(tiny, "a1", 4), b, stop_after=2)
    assert first.stopped and first.step == 2
    assert (b / "checkpoints" / "step-2").is_dir() and not (b / "checkpoints" / "step-3").exists()
    second = train(None, b, resume=True)
    assert second.step == 4
    wa, wb = _weights(a / "checkpoints" / "step-4"), _weights(b / "checkpoints" / "step-4")
    assert wa and all(wa[f] for f in wa) and {f: wa[f].keys() for f in wa} == {f: wb[f].keys() for f in wb}
    for f in wa:
        for k in wa[f]:
            assert torch.equal(wa[f][k], wb[f][k]), (f, k)
    assert _stable(read_metrics(a)) == _stable(read_metrics(b))
    assert (a / "samples.jsonl").read_text() == (b / "samples.jsonl").read_text()
    with MistakeBook(a / "mistakes.sqlite", readonly=True) as ba, \
            MistakeBook(b / "mistakes.sqlite", readonly=True) as bb:
        ea = [(e.problem_id, e.test, e.frequency) for e in ba.entries()]
        assert ea == [(e.problem_id, e.test, e.frequency) for e in bb.entries()] and ea
    oa = torch.load(a / "checkpoints" / "step-4" / "optim.pt", weights_only=False)
    ob = torch.load(b / "checkpoints" / "step-4" / "optim.pt", weights_only=False)
    assert oa["schedulers"] == ob["schedulers"]
    for role in oa["optimizers"]:
        for pid, st in oa["optimizers"][role]["state"].items():
            assert torch.equal(st["exp_avg"], ob["optimizers"][role]["state"][pid]["exp_avg"])


def test_time_limit_stops_with_a_checkpoint_and_resumes(tmp_path, tiny, scripted, monkeypatch):
    """A budget step 1 would overrun: the step is dropped when the budget ends (it had
    changed nothing), step 0 is checkpointed, and the call ends within a second or two of
    the budget; resume finishes the run as an uninterrupted one. A budget already spent
    stops before the models load. Fault tried: the old rule (a first step always runs,
    the budget is judged after each step) took the sleeping step's 60 s and failed."""
    import time

    import codea1.engines.hf_engine as hf_engine

    a, run = tmp_path / "a", tmp_path / "run"
    train(_config(tiny, "a1", 3), a)
    inner, calls = hf_engine.generate, {"test": 0}

    def slow_step_one(policies, role, prompts, n=1, sampling=None, **kw):
        if role == "test":
            calls["test"] += 1
            if calls["test"] == 2:  # step 0's validation, then step 1's test rollout: slow
                time.sleep(60)
        return inner(policies, role, prompts, n=n, sampling=sampling, **kw)

    monkeypatch.setattr(hf_engine, "generate", slow_step_one)
    t = time.monotonic()
    first = train(_config(tiny, "a1", 3), run, time_limit_s=15)
    took = time.monotonic() - t
    assert first.stopped and first.step == 0 and calls["test"] == 2
    assert 15 <= took < 18, took
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-0"]
    assert [r["step"] for r in read_metrics(run)] == [0]
    monkeypatch.setattr(hf_engine, "generate", inner)
    assert train(None, run, resume=True, time_limit_s=1e6).step == 3
    assert _stable(read_metrics(a)) == _stable(read_metrics(run))
    spent = train(_config(tiny, "a1", 1), tmp_path / "spent", time_limit_s=1e-3)
    assert spent.stopped and spent.step == 0 and not (tmp_path / "spent" / "checkpoints").exists()
    assert train(None, tmp_path / "spent", resume=True).step == 1


def test_parse_duration():
    import typer

    from codea1.train.cli import parse_duration

    assert [parse_duration(t) for t in ("2h", "90m", "1h30m", "45s", "3600", "1.5h")] == \
        [7200, 5400, 5400, 45, 3600, 5400]
    for bad in ("", "abc", "2x", "h", "-5", "0", "inf", "nan"):
        with pytest.raises(typer.BadParameter):
            parse_duration(bad)


def test_sigterm_mid_run_checkpoints_and_resumes_exactly(tmp_path, tiny, scripted):
    """SIGTERM during step 2 abandons it (nothing committed yet), saves step 1, resumes."""
    a, b = tmp_path / "a", tmp_path / "b"
    train(_config(tiny, "a1", 3), a)

    def kill_after_first(step, _metrics):
        if step == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    first = train(_config(tiny, "a1", 3), b, on_step=kill_after_first)
    assert first.stopped and first.step == 1
    assert [r["step"] for r in read_metrics(b)] == [0, 1]
    second = train(None, b, resume=True)
    assert second.step == 3
    assert _stable(read_metrics(a)) == _stable(read_metrics(b))
    wa, wb = _weights(a / "checkpoints" / "step-3"), _weights(b / "checkpoints" / "step-3")
    assert wa and all(wa[f] for f in wa) and {f: wa[f].keys() for f in wa} == {f: wb[f].keys() for f in wb}
    assert all(torch.equal(wa[f][k], wb[f][k]) for f in wa for k in wa[f])


def test_sigterm_during_a_rollout_stops_at_once_and_resumes_exactly(tmp_path, tiny, scripted, monkeypatch):
    """SIGTERM while step 2's tests are being sampled: decoding stops at its next token,
    the step is abandoned (nothing committed), step 1 is saved, and resume is exact."""
    import codea1.engines.hf_engine as hf_engine
    import codea1.rollout as rollout

    a, b = tmp_path / "a", tmp_path / "b"
    train(_config(tiny, "a1", 3), a)

    inner = hf_engine.generate
    calls = {"test": 0}

    def signal_then_generate(policies, role, prompts, n=1, sampling=None, **kw):
        if role == "test":
            calls["test"] += 1
            if calls["test"] == 3:  # step 0's validation, step 1, then step 2's rollout
                os.kill(os.getpid(), signal.SIGTERM)
                with pytest.raises(rollout.GenerationInterrupted):
                    inner(policies, role, prompts, n=n, sampling=sampling, **kw)
                raise rollout.GenerationInterrupted("re-raised for the loop")
        return inner(policies, role, prompts, n=n, sampling=sampling, **kw)

    monkeypatch.setattr(hf_engine, "generate", signal_then_generate)
    first = train(_config(tiny, "a1", 3), b)
    assert first.stopped and first.step == 1
    monkeypatch.setattr(hf_engine, "generate", inner)
    second = train(None, b, resume=True)
    assert second.step == 3
    assert _stable(read_metrics(a)) == _stable(read_metrics(b))
    wa, wb = _weights(a / "checkpoints" / "step-3"), _weights(b / "checkpoints" / "step-3")
    assert wa and all(wa[f] for f in wa) and {f: wa[f].keys() for f in wa} == {f: wb[f].keys() for f in wb}
    assert all(torch.equal(wa[f][k], wb[f][k]) for f in wa for k in wa[f])


def test_a_new_run_refuses_an_existing_run_dir(tmp_path, tiny, scripted):
    train(_config(tiny, "golden", 1), tmp_path / "run")
    with pytest.raises(FileExistsError, match="--resume"):
        train(_config(tiny, "golden", 1), tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        train(None, tmp_path / "elsewhere", resume=True)


@pytest.mark.parametrize("lenient", [False, True])
def test_the_step_takes_each_candidates_code_by_the_judges_fence_rule(tmp_path, tiny, lenient):
    """The code the white-box test prompts and golden mode see is the code the judge runs:
    `judge.lenient_code_fences` decides both (a ```py block is code only under the lenient rule).
    Fault tried: the step's extraction back on the strict rule alone (the lenient case fails)."""
    from codea1.rollout import Sample
    from codea1.train.loop import Trainer

    cfg = _config(tiny, "a1", 1, f"judge.lenient_code_fences={str(lenient).lower()}")
    text = "Here it is:\n```py\ndef f():\n    return 1\n```"
    trainer = Trainer(cfg, tmp_path / "run")
    try:
        trainer.generate = lambda role, prompts, n, *a, **k: [
            [Sample(prompt_ids=[1], completion_ids=[2], text=text, truncated=False, finished=True) for _ in range(n)]
            for _ in prompts]
        r = trainer._draw_problems(1)
        trainer._code_rollout(r)
    finally:
        trainer.close()
    want = "def f():\n    return 1\n" if lenient else text
    assert r.codes and all(code == want for group in r.codes for code in group)


@pytest.mark.parametrize("lenient", [False, True])
def test_validation_takes_each_candidates_code_by_the_judges_fence_rule(tmp_path, tiny, lenient):
    """Validation's golden check and its white-box test prompts see the code the judge runs,
    as a step's do: a correct solution in a ```py block passes under the lenient rule only.
    Fault tried: validation's extraction on the strict rule whatever the config (the lenient
    case fails: pass rate 0, and the test prompts show the whole completion)."""
    from codea1.rollout import Sample
    from codea1.train.loop import Trainer

    cfg = _config(tiny, "a1", 1, f"judge.lenient_code_fences={str(lenient).lower()}")
    trainer = Trainer(cfg, tmp_path / "run")
    shown = []
    reference = next(p for p in trainer.heldout).reference

    def scripted(role, prompts, n, *a, **k):
        text = f"Here it is:\n```py\n{reference}```" if role == "code" else "```python\nassert True\n```"
        shown.extend(prompts if role == "test" else [])
        return [[Sample(prompt_ids=[1], completion_ids=[2], text=text, truncated=False, finished=True)
                 for _ in range(n)] for _ in prompts]

    try:
        trainer.generate = scripted
        trainer.test_prompt = lambda problem, code, *a: code   # the code each test prompt would show
        metrics = trainer.validate()
    finally:
        trainer.close()
    assert metrics["val/code_pass_rate"] == (1.0 if lenient else 0.0)
    assert shown and all((code == reference) == lenient for code in shown)


def test_code_stop_strings_reach_the_code_rollout_alone(tmp_path, tiny, monkeypatch):
    """`rollout.code.stop` (here a newline) ends the code model's completions on it during
    training while the test model samples without it; rows ended by the string train
    like rows ended by EOS. `validation.sampling.stop` ends the validated code answers
    alone, not the validated tests."""
    import codea1.engines.hf_engine as hf_engine
    from transformers import AutoTokenizer

    from codea1.rollout import stop_token_ids

    real, calls = hf_engine.generate, []

    def spy(policies, role, prompts, n=1, sampling=None, **kw):
        out = real(policies, role, prompts, n=n, sampling=sampling, **kw)
        calls.append((role, tuple(sampling.stop), [s for group in out for s in group]))
        return out

    monkeypatch.setattr(hf_engine, "generate", spy)
    cfg = _config(tiny, "a1", 2, 'rollout.code.stop=["\\n"]', "rollout.code.max_new_tokens=40",
                  "rollout.test.max_new_tokens=40", 'validation.sampling.stop=["\\n"]',
                  "validation.test_model=true", "validation.test_problems=1")
    assert cfg.rollout.code.stop == ["\n"] and cfg.rollout.test.stop == []
    assert train(cfg, tmp_path / "run").step == 2
    assert {(role, stop) for role, stop, _ in calls} == {("code", ("\n",)), ("test", ())}
    tok = AutoTokenizer.from_pretrained(tiny["model"])
    eos = stop_token_ids(tok)

    def newline_at(s):   # tokens up to the first that completes a newline, or None
        return next((i for i in range(1, len(s.completion_ids) + 1)
                     if "\n" in tok.decode(s.completion_ids[:i], skip_special_tokens=True)), None)

    code = [s for role, _, samples in calls if role == "code" for s in samples]
    tests = [s for role, _, samples in calls if role == "test" for s in samples]
    assert all(newline_at(s) in (None, len(s.completion_ids)) for s in code)   # never past one
    by_string = [s for s in code if newline_at(s) and s.completion_ids[-1] not in eos]
    assert by_string and all(s.finished and not s.truncated for s in by_string)
    assert any((newline_at(s) or len(s.completion_ids)) < len(s.completion_ids) for s in tests)
