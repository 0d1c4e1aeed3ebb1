"""Unbiased pass@k and avg@n, the code-evaluation numbers the paper reports.

pass@k is the probability that at least one of k samples, drawn without replacement from
the n generated for a problem, is correct: ``1 - C(n-c, k) / C(n, k)`` (Chen et al.,
2021). Computed as a running product so it stays exact for large n instead of
overflowing binomials.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct samples out of ``n``."""
    if n < 1:
        raise ValueError(f"pass@k needs at least one sample, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"correct count c={c} must lie in [0, n={n}]")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must lie in [1, n={n}]")
    if n - c < k:
        return 1.0
    # 1 - prod_{i=n-c+1}^{n} (1 - k / i)  ==  1 - C(n-c, k) / C(n, k)
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def avg_at_n(n: int, c: int) -> float:
    """Mean pass rate of one problem's n samples (the paper's avg@32)."""
    if n < 1:
        raise ValueError(f"avg@n needs at least one sample, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"correct count c={c} must lie in [0, n={n}]")
    return c / n


def default_ks(n: int) -> list[int]:
    """The k values reported for n samples: 1, 5, 10, 20, 50, 100, ... below n, and n."""
    ks, scale = [1, 5], 10
    while scale < n:
        ks += [scale, 2 * scale, 5 * scale]
        scale *= 10
    return sorted({k for k in ks if k < n} | {n})


def aggregate(counts: Iterable[tuple[int, int]], ks: Sequence[int] | None = None) -> dict[str, float]:
    """Mean pass@k (in percent) and avg@n over problems given ``(n, c)`` per problem.

    A k larger than a problem's n is skipped for the whole set (the estimate would be
    undefined for that problem), so ks are taken up to the smallest n.
    """
    pairs = list(counts)
    if not pairs:
        return {}
    n_min = min(n for n, _ in pairs)
    n_max = max(n for n, _ in pairs)
    if ks is None:
        ks = default_ks(n_min)
    out: dict[str, float] = {}
    for k in ks:
        if k > n_min:
            continue
        out[f"pass@{k}"] = 100.0 * sum(pass_at_k(n, c, k) for n, c in pairs) / len(pairs)
    label = f"avg@{n_max}" if n_min == n_max else "avg@n"
    out[label] = 100.0 * sum(avg_at_n(n, c) for n, c in pairs) / len(pairs)
    return out
