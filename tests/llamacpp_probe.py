"""Does llama-cpp-python's batched decoding run on this machine, or crash it?

llama-cpp-python 0.3.36, compiled by pip for a 2-core Xeon with AVX-512 and AMX, dies
with a segmentation fault inside `llama_decode` on the `llamacpp` engine's batched
decoding (reproduced on main before and after stop 36, in tests/test_llamacpp_engine.py
and tests/test_eval_slow.py). A crash in native code takes the whole pytest process
with it, so the real-model llama.cpp tests first run the engine once in a child process:
where that child is killed by a signal they skip, naming it; any other failure is left
to the tests themselves to report.
"""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import torch
    from codea1.engines import make_engine
    from codea1.models import ModelConfig, load_policies
    from codea1.rollout import SamplingConfig
    pol = load_policies(ModelConfig(name="qwen2.5-coder-0.5b-instruct", mode="lora-shared", dtype="float32"))
    engine = make_engine("llamacpp", pol, threads=2)
    engine.generate("code", [[151644, 872, 198, 9707]], n=2, sampling=SamplingConfig(max_new_tokens=8, seed=0))
    engine.close()
""")


@functools.lru_cache(maxsize=1)
def llamacpp_crash() -> str | None:
    """Why llama.cpp cannot be tested here (it crashed a child process), or None."""
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600)
    if run.returncode < 0:
        name = signal.Signals(-run.returncode).name
        return (f"llama-cpp-python's batched decoding crashes on this machine ({name} in a child process "
                "running the llamacpp engine once): a native fault of the llama.cpp build, see tests/llamacpp_probe.py")
    return None
