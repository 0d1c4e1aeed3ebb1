"""Where a run's randomness comes from: the `seed` setting, the step, and the saved RNG.

Every other test runs seed 0, so runs of different seeds could be identical, or every
step could sample the same way, unseen. Tiny runs here (tests/tiny_run.py's model and
problems) record what the rollout engine was asked and what it sampled:

- the data order follows `seed` (two seeds, two orders);
- each step samples afresh: the same prompts in the same places at steps 1 and 2, on
  unchanged weights, give different completions; and so do two runs of different seeds;
  validation's samples likewise (before the first step and after the last);
- a resumed run whose steps draw from torch's global RNG (as LoRA dropout would, were the
  update run in train mode) ends with the weights of the run it continues: torch's RNG
  is restored.

Faults tried (each made a test here fail): `ProblemSampler` given seed 0 instead of
`cfg.seed`; the step left out of the sampling seeds (`sample_seeds(seed, 0, ...)`, in
training and in validation); the run seed left out (`sample_seeds(0, step, ...)`);
`restore_rng` not restoring torch's state on resume (LoRA dropout alone did not show it: the update runs
the model in eval mode, so dropout never draws; the test draws from the global RNG itself).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiny_run import make_scripted, tiny_overrides  # noqa: E402

from codea1.train.config import load_config  # noqa: E402
from codea1.train.loop import train  # noqa: E402

torch.set_num_threads(1)


def _recording(real, tiny, calls: list):
    """`real` generate, recording per call: role, samples per prompt, each prompt's problem
    and each group's completion ids (what the tiny model sampled)."""
    by_question = [(p.question.strip()[:200], p.id) for p in tiny["problems"]]

    def fake(policies, role, prompts, n=1, sampling=None, **kw):
        out = real(policies, role, prompts, n=n, sampling=sampling, **kw)
        tok = policies.tokenizer
        texts = [tok.decode(p) if isinstance(p[0], int) else p[-1]["content"] for p in prompts]
        calls.append({"role": role, "n": n,
                      "problems": [next((pid for q, pid in by_question if q in t), None) for t in texts],
                      "ids": [[tuple(s.completion_ids) for s in group] for group in out]})
        return out

    return fake


def _run(tiny, tmp: Path, name: str, mode: str, steps: int, *extra: str) -> list[dict]:
    import codea1.engines.hf_engine as hf_engine

    calls: list[dict] = []
    real = hf_engine.generate
    hf_engine.generate = _recording(real, tiny, calls)
    try:
        cfg = load_config(preset="cpu-demo", overrides=[*tiny_overrides(tiny, mode, steps), "checkpoint.every=5",
                                                        "logging.tensorboard=false", *extra])
        assert train(cfg, tmp / name).step == steps
    finally:
        hf_engine.generate = real
    return calls


@pytest.fixture(scope="module")
def golden_runs(tiny, tmp_path_factory):
    """Seeds 1 and 2: golden mode, shuffled data, 2 problems a step (one epoch in 2 steps),
    3 validation samples per held-out problem at temperature 1 before step 1 and after step 2.
    Every sample is the tiny model's junk (reward 0): the weights never move."""
    tmp = tmp_path_factory.mktemp("golden")
    extra = ("validation.n_code=3", "validation.sampling.temperature=1.0", "rollout.n_code=2")
    return {seed: _run(tiny, tmp, f"seed{seed}", "golden", 2, f"seed={seed}", *extra) for seed in (1, 2)}


@pytest.fixture(scope="module")
def a1_runs(tiny, tmp_path_factory):
    """Seeds 1 and 2: a1 mode, data in file order, all 4 problems every step (the same
    prompt in the same place at steps 1 and 2); step 1 trains at learning rate 0, so step 2
    samples from the same weights."""
    tmp = tmp_path_factory.mktemp("a1")
    extra = ("data.shuffle=false", "data.problems_per_step=4", "rollout.n_code=2", "rollout.n_test=2",
             "validation.every=0", "validation.at_start=false", "validation.at_end=false")
    return {seed: _run(tiny, tmp, f"seed{seed}", "a1", 2, f"seed={seed}", *extra) for seed in (1, 2)}


def _training(calls, role="code", n=2):
    return [c for c in calls if c["role"] == role and c["n"] == n]


def test_the_data_order_follows_the_seed(golden_runs):
    orders = {seed: [pid for c in _training(calls) for pid in c["problems"]] for seed, calls in golden_runs.items()}
    for order in orders.values():
        assert sorted(order) == ["T/add", "T/even", "T/max", "T/vowels"]   # one epoch, each problem once
    assert orders[1] != orders[2]


def test_each_step_and_each_seed_samples_afresh(a1_runs):
    for role, n in (("code", 2), ("test", 2)):
        steps = {seed: _training(calls, role, n) for seed, calls in a1_runs.items()}
        for seed, (first, second) in steps.items():
            assert first["problems"] == second["problems"] and None not in first["problems"]
            same = [a == b for a, b in zip(first["ids"], second["ids"])]
            assert not any(same), f"{role}, seed {seed}: steps 1 and 2 sampled the same completions {same}"
        same = [a == b for a, b in zip(steps[1][0]["ids"], steps[2][0]["ids"])]
        assert steps[1][0]["problems"] == steps[2][0]["problems"]
        assert not any(same), f"{role}: seeds 1 and 2 sampled the same completions at step 1"


def test_validation_samples_afresh_at_each_validation_and_seed(golden_runs):
    val = {seed: [c for c in calls if c["n"] == 3] for seed, calls in golden_runs.items()}
    for seed, (before, after) in val.items():
        assert before["problems"] == after["problems"] == ["H/sub"]
        assert before["ids"] != after["ids"], f"seed {seed}: step 0 and step 2 validated on the same samples"
    assert val[1][0]["ids"] != val[2][0]["ids"]


def _drawing_from_torch(scripted, tiny):
    """`scripted` generate, then per group one sample, picked with torch's *global* RNG (as
    LoRA dropout or any sampler on the global stream draws), turned into the reference
    solution: what the run learns then depends on torch's RNG state at every step."""
    refs = {p.question.strip()[:200]: p.reference for p in tiny["problems"]}

    def fake(policies, role, prompts, n=1, sampling=None, **kw):
        out = scripted(policies, role, prompts, n=n, sampling=sampling, **kw)
        tok = policies.tokenizer
        for prompt, group in zip(prompts, out):
            pick = int(torch.randint(0, len(group), (1,)))
            if role != "code":
                continue
            text = tok.decode(prompt)
            ref = next(r for q, r in refs.items() if q in text)
            s = group[pick]
            s.text = f"```python\n{ref}```"
            s.completion_ids = tok(s.text, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
            s.truncated, s.finished = False, True
        return out

    return fake


def test_resume_restores_torchs_rng(tiny, tmp_path, monkeypatch):
    """3 steps straight == 2 steps, stop, resume for the third, when the step draws from
    torch's global RNG (`_drawing_from_torch`; LoRA dropout on too)."""
    import codea1.engines.hf_engine as hf_engine
    from safetensors.torch import load_file

    monkeypatch.setattr(hf_engine, "generate", _drawing_from_torch(make_scripted(hf_engine.generate, tiny["problems"]), tiny))
    over = [*tiny_overrides(tiny, "golden", 3), "model.lora_dropout=0.3", "validation.every=0",
            "validation.at_start=false", "validation.at_end=false", "logging.tensorboard=false",
            "grpo.lr=2e-2", "grpo.min_lr_ratio=1.0"]
    train(load_config(preset="cpu-demo", overrides=over), tmp_path / "straight")
    assert train(load_config(preset="cpu-demo", overrides=over), tmp_path / "resumed", stop_after=2).stopped
    torch.manual_seed(12345)   # whatever the process did in between must not matter
    torch.rand(1000)
    assert train(None, tmp_path / "resumed", resume=True).step == 3

    def weights(run: Path, step: int) -> dict:
        return {f.name + "/" + k: v for f in sorted((run / "checkpoints" / f"step-{step}" / "policies").glob("*.safetensors"))
                for k, v in load_file(str(f)).items()}

    a, b = weights(tmp_path / "straight", 3), weights(tmp_path / "resumed", 3)
    assert a.keys() == b.keys() and a
    assert not all(torch.equal(a[k], v) for k, v in weights(tmp_path / "straight", 2).items())   # step 3 trained
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    assert not differ, f"resumed run's weights differ from the straight run's: {differ[:3]}"
    assert (tmp_path / "straight" / "samples.jsonl").read_text() == (tmp_path / "resumed" / "samples.jsonl").read_text()
