"""Rollout speed: `codea1.engines.hf_engine.generate` against plain batch-8 `model.generate`, side by side.

Target (issue 4): at least 2x the tokens/s of plain batch-8 `generate` on the same model,
prompts and sampling settings, measured in the same run.

Both sides get the same rows: the code prompt and the white-box test prompt (with the
reference solution as the candidate) of the first `--problems` bundled training
problems, `--n` samples each, temperature 1, top_p 1 (the paper's rollout settings).
The baseline decodes rows 8 at a time with `model.generate` (KV cache, left padding,
sampling), with the LoRA adapters switched off; ours runs with the code adapter on (the
training configuration), so any LoRA overhead counts against us. Tokens are the
completion tokens up to and including the stop token; what `generate` pads after a
row's end is not counted.

    python benchmarks/generation.py                 # the offline 0.5B in bf16 (auto)
    python benchmarks/generation.py --problems 1 --max-new-tokens 64   # quicker
    python benchmarks/generation.py --model tests-tiny   # a tiny random model, seconds

`--engine vllm` instead runs the two rollout engines side by side on a CUDA GPU at the
paper's shapes (Qwen2.5-Coder-1.5B-Instruct, 8 problems, 8 codes a problem, 8 test suites
a code, 1,024 new tokens; each flag can be changed) and prints the tokens/s of each:

    pip install 'codea1[vllm]'
    python benchmarks/generation.py --engine vllm

`--engine llamacpp` runs codea1's sampler and llama.cpp (through llama-cpp-python, built
from source by pip with this CPU's instruction set) side by side on the same GGUF file,
the same prompt token ids, the same sampling (temperature 1, top_p 1, no top-k, min-p or
repetition penalty) and the same thread count, three ways: codea1's sampler, llama.cpp
decoding one sequence at a time (a prompt's KV cache reused by its n samples), and the
`rollout.engine=llamacpp` engine, which decodes all rows together (each in its own KV
stream). llama.cpp computes with the Q4_K_M weights as stored, where codea1 computes with
them dequantised (the trainer's weights):

    pip install 'codea1[llamacpp]'
    python benchmarks/generation.py --engine llamacpp --threads 2

Peak memory is the process's peak resident set size (`ru_maxrss`); ours runs first so
the figure after it is its own peak. Run it on a quiet machine: other processes on the
same cores slow both sides, unevenly when the load changes during the run.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_model.py: the tiny random-weight model


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("hf", "vllm", "llamacpp"), default="hf",
                    help="hf: codea1's sampler vs plain generate; vllm: the vllm and hf engines side by side; "
                    "llamacpp: codea1's sampler vs llama.cpp on the same GGUF file")
    ap.add_argument("--model", default=None,
                    help="model name or path; 'tests-tiny' builds a tiny random model "
                    "(default qwen2.5-coder-0.5b-instruct; with --engine vllm Qwen/Qwen2.5-Coder-1.5B-Instruct)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--problems", type=int, default=None, help="default 2 (8 with --engine vllm)")
    ap.add_argument("--n", type=int, default=8, help="samples per prompt (codes a problem)")
    ap.add_argument("--n-test", type=int, default=8, help="--engine vllm: test suites a code")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default 128 (1024 with --engine vllm)")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.5,
                    help="--engine vllm: the share of the GPU vLLM takes")
    ap.add_argument("--batch-size", type=int, default=64, help="rows decoded together by ours")
    ap.add_argument("--baseline-batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    paper = args.engine == "vllm"
    args.model = args.model or ("Qwen/Qwen2.5-Coder-1.5B-Instruct" if paper else "qwen2.5-coder-0.5b-instruct")
    args.problems = args.problems or (8 if paper else 2)
    args.max_new_tokens = args.max_new_tokens or (1024 if paper else 128)
    if paper:
        engines_side_by_side(args)
        return
    if args.engine == "llamacpp":
        llamacpp_side_by_side(args)
        return

    import torch

    from codea1.data import bundled_problems
    from codea1.models import ModelConfig, load_policies
    from tiny_model import tiny_test_model
    from codea1.engines.hf_engine import generate
    from codea1.rollout import GenerationStats, SamplingConfig, code_messages, encode_prompts, stop_token_ids, test_messages

    if args.threads:
        torch.set_num_threads(args.threads)
    name = args.model
    if name == "tests-tiny":
        name = str(tiny_test_model(tempfile.mkdtemp(prefix="codea1-tiny-"), hidden_size=64))
    t0 = time.perf_counter()
    policies = load_policies(ModelConfig(name=name, mode="lora-shared", dtype=args.dtype))
    load_s = time.perf_counter() - t0
    rss_loaded = _peak_rss_mib()
    problems = bundled_problems("train")[: args.problems]
    prompts = [code_messages(p) for p in problems] + [test_messages(p, p.reference) for p in problems]
    tok = policies.tokenizer
    print(f"model: {policies.resolved.describe() if policies.resolved else name}, dtype {policies.dtype}, "
          f"threads {torch.get_num_threads()}, loaded in {load_s:.1f}s")
    print(f"rows: {len(prompts)} prompts x {args.n} samples, max_new_tokens {args.max_new_tokens}, "
          f"temperature 1.0, top_p 1.0")

    # --- ours ------------------------------------------------------------------------------------
    stats = GenerationStats()
    cfg = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens,
                         batch_size=args.batch_size, seed=args.seed)
    samples = generate(policies, "code", prompts, n=args.n, sampling=cfg, stats=stats)
    print(f"  ours: {stats.completion_tokens} tokens in {stats.seconds:.0f}s", flush=True)
    rss_ours = _peak_rss_mib()

    # --- baseline: plain model.generate, 8 rows at a time -----------------------------------
    encoded = encode_prompts(tok, prompts)
    rows = [ids for ids in encoded for _ in range(args.n)]
    with policies.reference() as base:
        stops = sorted(stop_token_ids(tok, base))
        torch.manual_seed(args.seed)
        base_tokens = 0
        t0 = time.perf_counter()
        for start in range(0, len(rows), args.baseline_batch):
            batch = rows[start: start + args.baseline_batch]
            width = max(len(r) for r in batch)
            ids = torch.tensor([[tok.pad_token_id] * (width - len(r)) + r for r in batch])
            mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in batch])
            out = base.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                                top_p=1.0, top_k=0, max_new_tokens=args.max_new_tokens,
                                eos_token_id=stops, pad_token_id=tok.pad_token_id)
            for row in out[:, width:].tolist():
                ends = [i for i, t in enumerate(row) if t in stops]
                base_tokens += ends[0] + 1 if ends else len(row)
            print(f"  baseline: {start + len(batch)}/{len(rows)} rows, {time.perf_counter() - t0:.0f}s", flush=True)
        base_s = time.perf_counter() - t0
    rss_base = _peak_rss_mib()

    base_tps = base_tokens / base_s
    ours_tps = stats.tokens_per_s
    print(f"plain generate (batch {args.baseline_batch}): {base_tokens} tokens in {base_s:.1f}s = {base_tps:.1f} tokens/s")
    print(f"codea1 generate (batch {args.batch_size}): {stats.completion_tokens} tokens in {stats.seconds:.1f}s = "
          f"{ours_tps:.1f} tokens/s ({stats.forward_passes} forward passes, "
          f"{stats.completions_truncated}/{stats.samples} hit max_new_tokens, "
          f"{stats.prompts_truncated} prompts truncated)")
    print(f"speed-up: {ours_tps / base_tps:.2f}x (target >= 2x)")
    print(f"peak RSS: {rss_loaded:.0f} MiB after loading, {rss_ours:.0f} MiB after ours (run first), "
          f"{rss_base:.0f} MiB after the baseline")
    print(f"example completion: {samples[0][0].text[:200]!r}")


def llamacpp_side_by_side(args) -> None:
    """The same rows through codea1's sampler (code adapter on, as in training), then llama.cpp."""
    import os
    from pathlib import Path

    import torch

    try:
        import llama_cpp
    except ImportError:
        raise SystemExit("benchmarks/generation.py --engine llamacpp: llama-cpp-python is not installed "
                         "(pip install 'codea1[llamacpp]'; it compiles llama.cpp, a few minutes)") from None
    from codea1.data import bundled_problems
    from codea1.models import ModelConfig, load_policies, resolve_model
    from codea1.engines.hf_engine import generate
    from codea1.rollout import GenerationStats, SamplingConfig, code_messages, encode_prompts, stop_token_ids, test_messages

    resolved = resolve_model(args.model)
    if not resolved.gguf_file:
        raise SystemExit(f"--engine llamacpp needs a GGUF model; {args.model} resolves to {resolved.describe()}")
    gguf = Path(resolved.source) / resolved.gguf_file
    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    policies = load_policies(ModelConfig(name=args.model, mode="lora-shared", dtype=args.dtype))
    tok = policies.tokenizer
    problems = bundled_problems("train")[: args.problems]
    prompts = [code_messages(p) for p in problems] + [test_messages(p, p.reference) for p in problems]
    encoded = encode_prompts(tok, prompts)
    print(f"model: {gguf} ({gguf.stat().st_size / 2**20:.0f} MiB); codea1 dtype {policies.dtype}; threads {threads}")
    print(f"rows: {len(prompts)} prompts x {args.n} samples, max_new_tokens {args.max_new_tokens}, "
          f"temperature 1.0, top_p 1.0")

    stats = GenerationStats()
    cfg = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens,
                         batch_size=args.batch_size, seed=args.seed)
    generate(policies, "code", prompts, n=args.n, sampling=cfg, stats=stats)
    print(f"  codea1: {stats.completion_tokens} tokens in {stats.seconds:.1f}s", flush=True)
    with policies.reference() as base:
        stops = set(stop_token_ids(tok, base))

    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=max(len(r) for r in encoded) + args.max_new_tokens + 8,
                          n_threads=threads, n_threads_batch=threads, n_batch=512, seed=args.seed, verbose=False)
    tokens = prompt_tokens = 0
    t0 = time.perf_counter()
    for row in encoded:
        for _ in range(args.n):
            made = 0
            for token in llm.generate(row, temp=1.0, top_p=1.0, top_k=0, min_p=0.0, typical_p=1.0,
                                      repeat_penalty=1.0, reset=True):
                made += 1
                if token in stops or made >= args.max_new_tokens:
                    break
            tokens += made
        prompt_tokens += len(row)
        print(f"  llama.cpp: {tokens} tokens, {time.perf_counter() - t0:.0f}s", flush=True)
    cpp_s = time.perf_counter() - t0
    llm.close()

    from codea1.engines import make_engine

    engine = make_engine("llamacpp", policies, threads=threads)
    engine._llm("code")   # the adapter export and model load are not decoding
    batched = GenerationStats()
    engine.generate("code", encoded, n=args.n, sampling=cfg, seeds=list(range(len(encoded))), stats=batched)
    engine.close()
    print(f"codea1 generate (batch {args.batch_size}, {policies.dtype}): {stats.completion_tokens} tokens in "
          f"{stats.seconds:.1f}s = {stats.tokens_per_s:.1f} tokens/s")
    print(f"llama.cpp {llama_cpp.__version__} (one sequence at a time, Q4_K_M): {tokens} tokens in {cpp_s:.1f}s = "
          f"{tokens / cpp_s:.1f} tokens/s (prompts: {prompt_tokens} tokens, each evaluated once)")
    print(f"rollout.engine=llamacpp (rows decoded together, up to {args.batch_size}, Q4_K_M): "
          f"{batched.completion_tokens} tokens in {batched.seconds:.1f}s = {batched.tokens_per_s:.1f} tokens/s")
    print(f"llama.cpp one at a time / codea1: {tokens / cpp_s / stats.tokens_per_s:.2f}x tokens/s; "
          f"llamacpp engine / codea1: {batched.tokens_per_s / stats.tokens_per_s:.2f}x")


def engines_side_by_side(args) -> None:
    """Code then test rollouts of the same rows on the vllm engine, then on the hf engine."""
    import torch

    from codea1.data import bundled_problems
    from codea1.engines import EngineUnavailable, VLLMConfig, make_engine, resolve_engine
    from codea1.grpo import Trajectory
    from codea1.logprobs import trajectory_logprobs
    from codea1.models import ModelConfig, load_policies
    from tiny_model import tiny_test_model
    from codea1.rollout import (GenerationStats, SamplingConfig, context_length, code_messages, encode_prompts,
                                fit_test_prompt, prompt_limit)

    try:
        resolve_engine("vllm", "cuda" if torch.cuda.is_available() else "cpu")
    except EngineUnavailable as exc:
        raise SystemExit(f"benchmarks/generation.py --engine vllm: {exc}") from None
    name = args.model
    if name == "tests-tiny":
        name = str(tiny_test_model(tempfile.mkdtemp(prefix="codea1-tiny-"), hidden_size=64))
    t0 = time.perf_counter()
    policies = load_policies(ModelConfig(name=name, mode="lora-shared", dtype=args.dtype, device="auto"))
    print(f"model: {policies.resolved.describe()}, dtype {policies.dtype}, loaded in {time.perf_counter() - t0:.1f}s")
    problems = bundled_problems("train")[: args.problems]
    tok = policies.tokenizer
    code_prompts = encode_prompts(tok, [code_messages(p) for p in problems])
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens,
                              batch_size=args.batch_size, seed=args.seed)
    # white-box test prompts: the reference solution stands in for each of the n codes; fitted
    # to the model's context as the trainer fits them (the head kept, the code's tail cut)
    limit = prompt_limit(sampling, context_length(policies.module("test")))
    test_prompts = [fit_test_prompt(tok, p, p.reference, limit)[0] for p in problems for _ in range(args.n)]
    print(f"rows: {len(code_prompts)} code prompts x {args.n} + {len(test_prompts)} test prompts x "
          f"{args.n_test}, max_new_tokens {args.max_new_tokens}, temperature 1.0, top_p 1.0")
    results = {}
    for name in ("vllm", "hf"):
        t0 = time.perf_counter()
        engine = make_engine(name, policies, VLLMConfig(gpu_memory_utilization=args.gpu_memory_utilization))
        start_s = time.perf_counter() - t0
        gen = torch.Generator().manual_seed(args.seed)
        code, test = GenerationStats(), GenerationStats()
        code_out = engine.generate("code", code_prompts, n=args.n, sampling=sampling, generator=gen, stats=code)
        engine.generate("test", test_prompts, n=args.n_test, sampling=sampling, generator=gen, stats=test)
        results[name] = (code, test, start_s)
        print(f"  {name}: started in {start_s:.0f}s; code {code.completion_tokens} tokens in {code.seconds:.1f}s, "
              f"test {test.completion_tokens} tokens in {test.seconds:.1f}s", flush=True)
        if name == "vllm":
            seqs = [Trajectory(s.prompt_ids, s.completion_ids, 0.0, s.logprobs) for g in code_out[:2] for s in g]
            with policies.role("code") as model:
                old = trajectory_logprobs(model, seqs, 8192)
            gap = [float((o - torch.tensor(s.rollout_logprobs, device=o.device)).abs().mean()) for o, s in zip(old, seqs)]
            print(f"  vllm vs trainer log-probs (rollout/logp_mismatch) on {len(seqs)} code samples: "
                  f"{sum(gap) / len(gap):.4f}")
            engine.release_memory()
            engine.close()
            del engine
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    print(f"{'engine':<6} {'code tokens/s':>14} {'test tokens/s':>14} {'all tokens/s':>13} {'truncated':>10}")
    for name, (code, test, _start) in results.items():
        tokens = code.completion_tokens + test.completion_tokens
        seconds = code.seconds + test.seconds
        print(f"{name:<6} {code.tokens_per_s:>14.0f} {test.tokens_per_s:>14.0f} {tokens / seconds:>13.0f} "
              f"{code.completions_truncated + test.completions_truncated:>10}")
    v, h = results["vllm"], results["hf"]
    ratio = ((v[0].completion_tokens + v[1].completion_tokens) / (v[0].seconds + v[1].seconds)) / \
        ((h[0].completion_tokens + h[1].completion_tokens) / (h[0].seconds + h[1].seconds))
    print(f"vllm / hf: {ratio:.1f}x tokens/s")


if __name__ == "__main__":
    main()
