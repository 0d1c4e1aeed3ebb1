"""Run `codea1 ARGS...` in this process with one part of the run made slow, for the tests
that Ctrl-C a real trainer (tests/test_stop_signals.py).

    python tests/signal_harness.py SLOW -- train --preset cpu-demo ...

SLOW is "generate:ROLE:CALL:SECONDS" (the CALL-th call, 1-based, of
`codea1.engines.hf_engine.generate` for ROLE first spends SECONDS in torch matrix products: a stand-in
for a long prefill, real torch operations that a signal handler can only run between) or
"book:CALL:SECONDS" (the CALL-th Mistake Book commit does, before it writes: a part of the
step that a first Ctrl-C must not cut short), or "none" (nothing slowed). Nothing in codea1 knows about this file.
"""

from __future__ import annotations

import sys
import time


def spin(seconds: float) -> None:
    import torch

    a = torch.randn(256, 256)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        a = torch.tanh(a @ a)


def install(spec: str) -> None:
    kind, *rest = spec.split(":")
    if kind == "generate":
        import codea1.engines.hf_engine as hf_engine

        role, call, seconds = rest[0], int(rest[1]), float(rest[2])
        inner, calls = hf_engine.generate, {"n": 0}

        def slow(policies, r, prompts, *args, **kwargs):
            if r == role:
                calls["n"] += 1
                if calls["n"] == call:
                    print(f"harness: slow {role} rollout", file=sys.stderr, flush=True)
                    spin(seconds)
            return inner(policies, r, prompts, *args, **kwargs)

        hf_engine.generate = slow
    elif kind == "book":
        from codea1.mistakes import MistakeBook

        call, seconds = int(rest[0]), float(rest[1])
        inner_apply, calls = MistakeBook.apply_step, {"n": 0}

        def slow_apply(self, *args, **kwargs):
            calls["n"] += 1
            if calls["n"] == call:
                print("harness: slow book commit", file=sys.stderr, flush=True)
                spin(seconds)
            return inner_apply(self, *args, **kwargs)

        MistakeBook.apply_step = slow_apply
    elif kind != "none":
        raise SystemExit(f"signal_harness: unknown SLOW {spec!r}")


if __name__ == "__main__":
    spec, sep, *args = sys.argv[1:]
    assert sep == "--", "usage: signal_harness.py SLOW -- ARGS..."
    install(spec)
    from codea1.cli import app

    sys.argv = ["codea1", *args]
    app()
