"""`codea1 export`: each format loads where it should and computes what codea1's own policy
computes; bad input is one line and leaves nothing behind. On the tiny model, in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from export_runs import make_run
from typer.testing import CliRunner

from codea1.cli import app
from codea1.eval.loading import load_eval_policies
from codea1.export import export_run

torch.set_num_threads(1)
PROMPTS = ["def f(x):\n    return x + 1\n", "assert f(2) == 3\nfor i in range(n):"]


@pytest.fixture(scope="module")
def run(tiny_model_dir, tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs") / "run", tiny_model_dir)


def _ids(tokenizer):
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    return batch["input_ids"], batch["attention_mask"]


def _policy_logits(run_dir: Path, role: str, step: int | None = None):
    policies, _ = load_eval_policies(str(run_dir), device="cpu", dtype="float32", step=step)
    ids, mask = _ids(policies.tokenizer)
    with policies.role(role) as model, torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits, ids, mask


def _hf_logits(model, ids, mask):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def _cli(*args):
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


@pytest.mark.parametrize("role", ["code", "test"])
def test_merged_computes_what_the_policy_computes(run, tmp_path, role):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "merged"
    result = export_run(run, out, role, max_shard_size="20KB")
    assert result.step == 2 and result.dtype == "float32"          # the latest; the tiny base's dtype
    files = {p.name for p in out.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors.index.json", "tokenizer.json",
            "README.md"} <= files
    assert len([f for f in files if f.endswith(".safetensors")]) > 1   # sharded
    assert not list(tmp_path.glob(".*tmp*"))
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template
    expected, ids, mask = _policy_logits(run, role)
    assert torch.equal(ids, _ids(tokenizer)[0])
    got = _hf_logits(model, ids, mask)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    other, _, _ = _policy_logits(run, "test" if role == "code" else "code")
    assert (got - other).abs().max() > 1e-3      # the role's own weights, not the other's


def test_an_earlier_step_and_a_dtype(run, tmp_path):
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    out = tmp_path / "step1"
    result = export_run(run, out, "code", step=1, dtype="bfloat16")
    assert (result.step, result.dtype) == (1, "bfloat16")
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    expected, ids, mask = _policy_logits(run, "code", step=1)
    later, _, _ = _policy_logits(run, "code", step=2)
    got = _hf_logits(model, ids, mask)
    torch.testing.assert_close(got, expected, rtol=0.05, atol=0.05)   # bf16 weights
    assert (got - later).abs().max() > (got - expected).abs().max()


def test_model_card_names_base_step_validation_and_command(run, tmp_path):
    out = tmp_path / "card"
    export_run(run, out, "test", step=1)
    card = (out / "README.md").read_text()
    assert "# The test model of the Code-A1 run `run`, step 1" in card
    assert "| checkpoint | step 1 of 2" in card
    assert "| val/code_pass_rate | 0.2500 |" in card           # step 1's row, not step 2's (0.5)
    assert f"`codea1 export {run} {out} --role test --step 1 --format merged`" in card
    assert "model.mode lora-shared; LoRA r=4" in card and "lora_r: 4" in card


def test_peft_adapter_loads_with_peft_model(run, tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = tmp_path / "peft"
    result = export_run(run, out, "test", fmt="peft")
    assert result.dtype == "float32"
    assert {"adapter_config.json", "adapter_model.safetensors", "README.md"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_model_dir)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), out)
    expected, ids, mask = _policy_logits(run, "test")
    torch.testing.assert_close(_hf_logits(model, ids, mask), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_mode", ["full", "selfplay", "full-selfplay"])
def test_other_weight_layouts_merge_too(tiny_model_dir, tmp_path, model_mode):
    from transformers import AutoModelForCausalLM

    mode = "a1" if model_mode == "full" else "selfplay"
    run_dir = make_run(tmp_path / "run", tiny_model_dir, mode=mode, model_mode=model_mode, steps=(3,))
    export_run(run_dir, tmp_path / "out", "test")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype=torch.float32)
    expected, ids, mask = _policy_logits(run_dir, "test")
    torch.testing.assert_close(_hf_logits(model, ids, mask), expected, rtol=1e-5, atol=1e-5)
    if model_mode == "full":
        code, exit_lines = _cli("export", str(run_dir), str(tmp_path / "peft"), "--role", "code", "--format", "peft")
        assert code == 2 and exit_lines == [
            f"error: --format peft: {run_dir} fine-tunes the full model (model.mode full), which has no "
            "LoRA adapter; use --format merged"]
        assert not (tmp_path / "peft").exists()


def test_cli_writes_and_says_what(run, tmp_path):
    out = tmp_path / "cli" / "nested"
    code, lines = _cli("export", str(run), str(out), "--role", "code", "--step", "1")
    assert code == 0, lines
    assert f"wrote {out} (merged, float32, step 1): README.md, " in lines[-1]
    assert (out / "config.json").is_file()


@pytest.mark.parametrize("case", ["no-run", "no-checkpoint", "missing-step", "out-not-empty", "out-is-file",
                                  "golden-test-role", "bad-format", "bad-role", "gguf-on-hf-base"])
def test_bad_input_is_one_line_and_nothing_written(tiny_model_dir, run, tmp_path, case):
    out = tmp_path / "out"
    run_dir = run
    args = ["--role", "code"]
    if case == "no-run":
        run_dir = tmp_path / "nope"
        expected = f"error: {run_dir}: no such run directory"
    elif case == "no-checkpoint":
        run_dir = tmp_path / "empty-run"
        run_dir.mkdir()
        expected = (f"error: {run_dir}: no checkpoint (no complete checkpoints/step-N/ with a state.json); "
                    "expected a training run directory")
    elif case == "missing-step":
        args += ["--step", "7"]
        expected = f"error: {run}: no checkpoint at step 7 (it has steps 1, 2)"
    elif case == "out-not-empty":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
        expected = f"error: {out}: already exists and is not an empty directory; export into a new OUT"
    elif case == "out-is-file":
        out.write_text("mine")
        expected = f"error: Invalid value for OUT: {out} is a file, expected a directory (see 'codea1 export --help')"
    elif case == "golden-test-role":
        run_dir = make_run(tmp_path / "golden", tiny_model_dir, mode="golden", steps=(1,))
        args = ["--role", "test"]
        expected = (f"error: --role test: {run_dir} is a golden run, which trains the code model only "
                    "(its test weights are the base model's)")
    elif case == "bad-format":
        args += ["--format", "onnx"]
        expected = "error: --format 'onnx': expected one of merged, peft, gguf-lora"
    elif case == "bad-role":
        args = ["--role", "judge"]
        expected = "error: --role 'judge': expected one of code, test"
    else:
        args += ["--format", "gguf-lora"]
        expected = (f"error: --format gguf-lora: llama.cpp applies the adapter to a GGUF base, but this run's "
                    f"base is {tiny_model_dir} (local-dir: {tiny_model_dir}); use --format peft or merged")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code, lines = _cli("export", str(run_dir), str(out), *args)
    assert (code, lines) == (2, [expected])
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_failure_while_writing_leaves_nothing(run, tmp_path, monkeypatch):
    import codea1.export as export

    def broken(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "write_merged", broken)
    out = tmp_path / "a" / "b" / "out"
    with pytest.raises(OSError, match=f"no space left on device.*{out}"):  # (DiskFull, naming OUT)
        export_run(run, out, "code")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_names_the_export_and_leaves_nothing(run, small_disk):
    """A real full disk: the command exits 3 naming OUT (it said "a file: no space left on
    device": a write's own ENOSPC names no file), and nothing of OUT is left."""
    from conftest import fill_disk

    fill_disk(small_disk)
    out = small_disk / "exported"
    code, lines = _cli("export", str(run), str(out), "--role", "code")
    assert code == 3, lines
    assert lines[-1].startswith(f"error: {out}: no space left on device"), lines
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


def _pruned_while_loading(monkeypatch, where, name, live: Path):
    """Patch `where.name` (a loader) to do what a training run does meanwhile: save step 3 and
    prune step 2 (checkpoint.keep), once."""
    import shutil

    real, done = getattr(where, name), []

    def loading(*args, **kwargs):
        out = real(*args, **kwargs)
        if not done:
            done.append(True)
            shutil.copytree(live / "checkpoints" / "step-2", live / "checkpoints" / "step-3")
            state = json.loads((live / "checkpoints" / "step-3" / "state.json").read_text())
            (live / "checkpoints" / "step-3" / "state.json").write_text(json.dumps({**state, "step": 3}))
            shutil.rmtree(live / "checkpoints" / "step-2")
            shutil.rmtree(live / "checkpoints" / "step-1")
        return out

    monkeypatch.setattr(where, name, loading)


@pytest.mark.parametrize("command", ["eval", "export"])
def test_a_run_still_training_prunes_the_checkpoint_being_read(run, tmp_path, monkeypatch, command):
    """`eval --model RUN` and `export RUN` read the run's latest checkpoint, which a run
    still training deletes at its next save (checkpoint.keep). Measured on a live tiny run:
    2 of 12 `eval code` calls failed with "policies.json: missing; not a policies
    checkpoint". Now the run's new latest is read instead; a checkpoint named by its step
    (or path) says it was deleted while it was read."""
    import shutil

    from codea1 import models
    from codea1.eval.loading import load_eval_policies
    from codea1.train.checkpoint import CheckpointError

    live = tmp_path / "live"
    shutil.copytree(run, live)
    if command == "eval":
        _pruned_while_loading(monkeypatch, models, "load_policies", live)
        _, meta = load_eval_policies(str(live), device="cpu", dtype="float32")
        assert meta["checkpoint"] == str(live / "checkpoints" / "step-3" / "policies")
    else:
        _pruned_while_loading(monkeypatch, models, "load_model_and_tokenizer", live)
        result = export_run(live, tmp_path / "out", "code")
        assert result.step == 3 and "step 3" in (tmp_path / "out" / "README.md").read_text()
    shutil.rmtree(live)
    shutil.copytree(run, live)
    monkeypatch.undo()
    if command == "eval":
        _pruned_while_loading(monkeypatch, models, "load_policies", live)
        with pytest.raises(CheckpointError, match="step-2/policies: deleted while it was read .*checkpoint.keep"):
            load_eval_policies(str(live), device="cpu", dtype="float32", step=2)
    else:
        _pruned_while_loading(monkeypatch, models, "load_model_and_tokenizer", live)
        with pytest.raises(CheckpointError, match="step-2: deleted while it was read"):
            export_run(live, tmp_path / "out2", "code", step=2)
        assert not (tmp_path / "out2").exists()


def test_eval_code_on_the_export_equals_eval_code_on_the_run(run, tmp_path):
    """`codea1 eval code --model OUT` and `--model RUN_DIR` sample the same completions."""
    from tiny_run import make_tiny

    problems = make_tiny(tmp_path / "tiny")["train"]
    export_run(run, tmp_path / "merged", "code")
    summaries, completions = [], []
    for name, model in (("run", run), ("merged", tmp_path / "merged")):
        out = tmp_path / f"eval-{name}"
        code, lines = _cli("eval", "code", "--model", str(model), "--data", str(problems), "--out", str(out),
                           "--n", "3", "--max-new-tokens", "12", "--limit", "3", "--device", "cpu",
                           "--dtype", "float32", "--engine", "hf", "--workers", "1")
        assert code == 0, lines
        summaries.append(json.loads((out / "summary.json").read_text())["sources"])
        rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
        completions.append(sorted((r["problem_id"], r["sample"], r["completion"]) for r in rows))
    assert summaries[0] == summaries[1]
    assert completions[0] == completions[1] and len(completions[0]) == 9
    assert len({c for _, _, c in completions[0]}) > 1


def test_a_torn_last_metrics_line_is_skipped_and_another_bad_line_named_before_loading(run, tmp_path, monkeypatch):
    """A run killed mid-write leaves a torn last line in metrics.jsonl: the export goes on (the
    card from the whole rows); a bad line elsewhere is one error naming `path:line`, before
    the model loads, and nothing is written. Fault tried: `read_metrics` parsed every line,
    after the export's work, with an error naming no file."""
    import shutil

    import codea1.export as export

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    metrics = copy / "metrics.jsonl"
    whole = metrics.read_text()
    metrics.write_text(whole + '{"step": 3, "val/code_pa')
    export_run(copy, tmp_path / "out", "code", fmt="peft")
    assert "## Last validation (step 2)" in (tmp_path / "out" / "README.md").read_text()

    def no_loading(*_args, **_kwargs):
        raise AssertionError("the model loaded before metrics.jsonl was read")

    monkeypatch.setattr(export, "load_role", no_loading)
    lines = whole.splitlines(keepends=True)
    metrics.write_text(lines[0] + '{"step": 2, oops\n' + "".join(lines[1:]))
    code, output = _cli("export", str(copy), str(tmp_path / "out2"), "--role", "code", "--format", "peft")
    assert (code, output) == (2, [f"error: {metrics}:2: not a JSON object (Expecting property name enclosed "
                                  "in double quotes)"])
    assert not (tmp_path / "out2").exists()
