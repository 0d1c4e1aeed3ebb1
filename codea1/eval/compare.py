"""`codea1 eval compare A B [C ...]`: evaluations set side by side, problem by problem.

Two evaluations of the same kind (`eval code`, `eval tests` or `eval select`), on the same
data with the same settings, differ only in the model(s) evaluated, so each problem is a
pair: the paired design measures a difference with far fewer problems than comparing two
averages would. Every later directory is compared with the first (A). Per metric:

- the difference of the metric (B - A, in points) with a paired bootstrap 95% interval:
  problems are resampled with replacement, the same problems for both sides, and the
  metric recomputed on each side (so a metric over a subset, as UnLeakedTestBench's mut@k,
  or a product of averages, as Mul, is resampled as it is defined);
- how many problems got better and worse, with the exact two-sided sign test on them
  (for a 0/1 outcome, as greedy pass@1 or a selection's right pick, this is McNemar's
  exact test); problems where the metric is undefined on either side are left out;
- the smallest difference the design could detect (`mde`): at 80% power and a two-sided
  5% level, `(z_0.975 + z_0.8) * sd / sqrt(n)`, where sd is the standard deviation of the
  per-problem differences observed (for Mul, which has no per-problem value, the
  bootstrap's standard error stands for `sd / sqrt(n)`), but never below `K_MIN * step / n`:
  the exact sign test cannot reach p < 0.05 unless at least 6 problems change, all one
  way, so no smaller difference is ever detectable; `step` is the least a problem can
  change by: 100 points for a 0/1 outcome, what the metric fixes where it does (avg@n
  moves by 100/n, pass@k by its least step in the count of right samples, a test model's
  pass@k by 100/k, a random pick by one candidate), else (a share of a problem's own
  tests or mutants) the smallest change seen, 100 when none changed; 80% is each test's power alone: the
  verdict needs both, about 75% in simulation (docs/RESULTS.md);
- a verdict: "B better than A" (or worse) only when both the interval excludes 0 and the
  sign test gives p < 0.05 the same way (the percentile bootstrap alone is too eager with
  few problems); "mixed" when both are significant but point opposite ways (a metric that
  is not 0/1, as avg@n: many problems up a little, a few down a lot); otherwise "no
  difference detected at this size".

Problems evaluated in only some of the directories (skipped, or still pending) are left
out of the pairs and counted. Directories of another kind, data or settings are refused,
naming the directory.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codea1.passk import pass_at_k
from codea1.eval.store import (LATER_SETTINGS, RUN_FILE, SAMPLED_WITH, SAMPLES_FILE, SUMMARY_FILE, iter_jsonl,
                               kind_of, read_json_object, read_samples, with_fixed_before)

KINDS = ("code", "tests", "select")
PROBLEMS_FILE = "problems.jsonl"  # eval select's per-problem rows (codea1.eval.select.PROBLEMS_FILE)
# what may differ between the sides: the models, with the checkpoint a run directory stood for
#: what names how the models were run, not the evaluation's settings: compared evaluations differ here
#: (`sampled_with`, the engine, device kind and dtype that sampled, is reported where it differs)
MODEL_KEYS = ("model", "code_model", "test_model", "codes_from", "step", "code_step", "test_step", SAMPLED_WITH)
Z_SUM = 1.959963984540054 + 0.8416212335729143  # z_0.975 + z_0.80
K_MIN = 6  # fewest one-way changes for which the exact two-sided sign test reaches p < 0.05
LEVEL = 0.05


class CompareError(ValueError):
    """Directories that cannot be compared; the message names the directory."""


# --------------------------------------------------------------------------- statistics


def sign_test(improved: int, worsened: int) -> float:
    """Exact two-sided sign test (McNemar's exact test on the discordant pairs): the
    probability, with each changed problem equally likely to go either way, of a split at
    least as uneven as the one seen."""
    m = improved + worsened
    if m == 0:
        return 1.0
    term = tail = 1  # C(m, 0); then C(m, i) from C(m, i - 1), in exact integers
    for i in range(1, min(improved, worsened) + 1):
        term = term * (m - i + 1) // i
        tail += term
    return min(1.0, tail / 2 ** (m - 1))  # integers: 2.0 ** m overflows from m = 1024


def mde(n: int, sd: float, step: float = 100.0) -> float | None:
    """The smallest difference (points) a paired design of n problems detects with 80%
    power at the 5% level, for per-problem differences of standard deviation `sd`, and
    never below K_MIN problems moving by `step` points, the least one can move (100 for a
    0/1 outcome; see the module docstring). None: fewer than K_MIN problems, where the
    sign test can never reach p < 0.05."""
    if n < K_MIN:
        return None
    return max(Z_SUM * sd / math.sqrt(n), step * K_MIN / n)


def binary_mde(n: int, changed: float) -> float | None:
    """Planning figure before any run: the mde of a 0/1 outcome (points) when a share
    `changed` of the n problems is expected to change between the two models."""
    return mde(n, 100.0 * math.sqrt(max(changed, 0.0)))


# --------------------------------------------------------------------------- the metrics


@dataclass(frozen=True)
class Metric:
    """One figure of an evaluation kind: its per-problem column and how it aggregates.
    `uses` names the columns of a product metric (Mul), which has no per-problem value."""

    name: str
    binary: bool = False
    uses: tuple[str, ...] = ()
    #: the least one problem's value can move, in points, where the metric fixes it (avg@n
    #: moves by 100/n); None: not fixed (a share of a problem's own tests or mutants)
    step: float | None = None

    @property
    def per_problem(self) -> bool:
        return not self.uses

    def value(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        """The metric over the last axis (problems), for every leading row (resamples)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-undefined resample: NaN
            if self.uses:
                a, b = (np.nanmean(cols[c], axis=-1) for c in self.uses)
                return a * b / 100.0
            return np.nanmean(cols[self.name], axis=-1)


def least_move(n: int, k: int) -> float:
    """The least a problem's unbiased pass@k (points) moves when its n samples' count of
    right ones changes: pass@k grows with that count by steps that shrink toward n."""
    values = [100.0 * pass_at_k(n, c, k) for c in range(n + 1)]
    return min(b - a for a, b in zip(values, values[1:]) if b > a)


def code_metrics(n: int) -> list[Metric]:
    from codea1.passk import default_ks

    return [Metric("pass@1", binary=n == 1, step=100.0 / n)] + [
        Metric(f"pass@{k}", step=least_move(n, k)) for k in default_ks(n) if k > 1]


def tests_metrics(k: int) -> list[Metric]:
    return [Metric(f"pass@{k}", step=100.0 / k), Metric(f"mut@{k}"), Metric("Mul", uses=(f"pass@{k}", f"mut@{k}")),
            Metric("valid"), Metric(f"mut@{k}_all")]


def select_metrics(n_code: int) -> list[Metric]:
    """A selection's figures; a random pick's chance (and so the gain over it) moves by one
    candidate of `n_code`."""
    return [Metric("selected", binary=True), Metric("random", step=100.0 / n_code), Metric("oracle", binary=True),
            Metric("gain", step=100.0 / n_code)]


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _code_rows(path: Path, n: int) -> dict[str, dict[str, float]]:
    rows = {}
    for pid, samples in read_samples(path / SAMPLES_FILE).items():
        if len(samples) < n:
            continue  # still pending
        c = sum(1 for i in range(n) if samples[i]["passed"])
        rows[pid] = {m.name: 100.0 * pass_at_k(n, c, int(m.name[5:])) for m in code_metrics(n)}
    return rows


def _tests_rows(path: Path, k: int) -> dict[str, dict[str, float]]:
    rows = {}
    for pid, samples in read_samples(path / SAMPLES_FILE).items():
        r = samples.get(0)
        if r is None:
            continue
        written = r["passes"][:len(r["tests"])]
        rows[pid] = {f"pass@{k}": float(r["pass_at_k"]), f"mut@{k}": _nan(r["mut_at_k"]),
                     "valid": 100.0 * sum(written) / len(written) if written else float("nan"),
                     f"mut@{k}_all": _nan(r["mut_at_k_all"])}
    return rows


def _select_rows(path: Path) -> tuple[dict[str, dict[str, float]], dict[str, list[str]]]:
    rows, codes = {}, {}
    file = path / PROBLEMS_FILE
    for _, r in (iter_jsonl(file) if file.is_file() else ()):
        golden = r["golden"]
        selected = 100.0 * bool(r["selected_correct"])
        random_ = 100.0 * sum(golden) / len(golden)
        rows[str(r["problem_id"])] = {"selected": selected, "random": random_, "oracle": 100.0 * any(golden),
                                      "gain": selected - random_}
        if "code_sha" in r:
            codes[str(r["problem_id"])] = list(r["code_sha"])
    return rows, codes


# --------------------------------------------------------------------------- reading


@dataclass
class Evaluation:
    """One evaluation directory as the comparison reads it."""

    path: Path
    kind: str
    identity: dict[str, Any]
    rows: dict[str, dict[str, float]]   # per problem: metric column -> value (NaN: undefined)
    skipped: set[str] = field(default_factory=set)
    data_digest: str | None = None
    code_sha: dict[str, list[str]] = field(default_factory=dict)   # eval select: the candidates judged

    @property
    def models(self) -> str:
        if self.kind == "select":
            return f"codes {self.identity.get('code_model')}, tests {self.identity.get('test_model')}"
        return str(self.identity.get("model"))

    @property
    def settings(self) -> dict[str, Any]:
        return {k: v for k, v in self.identity.items() if k not in MODEL_KEYS and k != "data"}

    def metrics(self) -> list[Metric]:
        if self.kind == "code":
            return code_metrics(int(self.identity["n"]))
        if self.kind == "tests":
            return tests_metrics(int(self.identity["k"]))
        return select_metrics(int(self.identity["n_code"]))


def read_evaluation(path: str | Path) -> Evaluation:
    """An evaluation directory's settings and per-problem figures (a torn last row skipped)."""
    path = Path(path)
    run_file = path / RUN_FILE
    if not run_file.is_file():
        raise CompareError(f"{path}: not an evaluation directory (no {RUN_FILE}); give directories that "
                           "`codea1 eval code|tests|select --out` wrote")
    try:
        identity = with_fixed_before(read_json_object(run_file))   # (an older one's stdin values: the defaults)
        summary = read_json_object(path / SUMMARY_FILE) if (path / SUMMARY_FILE).is_file() else {}
    except ValueError as exc:
        raise CompareError(str(exc)) from None
    kind = kind_of(identity)
    if kind is None:
        raise CompareError(f"{run_file}: the settings of no known evaluation (code, tests or select)")
    size = {"code": "n", "tests": "k"}.get(kind)
    if size is not None and (not isinstance(identity[size], int) or identity[size] < 1):
        raise CompareError(f"{run_file}: {size} is {identity[size]!r}, expected a whole number of at least 1")
    code_sha: dict[str, list[str]] = {}
    try:
        if kind == "code":
            rows = _code_rows(path, identity["n"])
        elif kind == "tests":
            rows = _tests_rows(path, identity["k"])
        else:
            rows, code_sha = _select_rows(path)
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        raise CompareError(f"{path}: a per-problem row lacks what `eval {kind}` writes ({exc!r})") from None
    skipped = {str(s["id"]) for s in summary.get("skipped", [])}
    rows = {pid: r for pid, r in rows.items() if pid not in skipped}
    return Evaluation(path, kind, identity, rows, skipped, summary.get("data_digest"), code_sha)


def check_comparable(evals: Sequence[Evaluation]) -> None:
    """One line naming the directory when an evaluation is not of the first's kind, data or settings."""
    first = evals[0]
    for e in evals[1:]:
        if e.kind != first.kind:
            raise CompareError(f"{e.path}: an `eval {e.kind}` directory, but {first.path} is `eval {first.kind}`; "
                               "compare evaluations of one kind")
        same_data = (e.data_digest == first.data_digest if e.data_digest and first.data_digest
                     else e.identity.get("data") == first.identity.get("data"))
        if not same_data and e.identity.get("data") == first.identity.get("data"):
            raise CompareError(f"{e.path}: evaluated on other problems of {e.identity.get('data')!r} than {first.path} "
                               "(another --limit, or the file changed); compare evaluations of the same problems")
        if not same_data:
            raise CompareError(f"{e.path}: evaluated on other data ({e.identity.get('data')!r}) than {first.path} "
                               f"({first.identity.get('data')!r}); compare evaluations of the same problems")
        keys = sorted(set(e.settings) | set(first.settings))
        diff = [f"{k} {e.settings.get(k)!r} vs {first.settings.get(k)!r}" for k in keys
                if e.settings.get(k) != first.settings.get(k)
                and (k not in LATER_SETTINGS or (k in e.settings and k in first.settings))]
        if diff:
            raise CompareError(f"{e.path}: evaluated with other settings than {first.path} ({', '.join(diff)}); "
                               "compare evaluations made with the same settings")


# --------------------------------------------------------------------------- comparing


def _columns(e: Evaluation, ids: Sequence[str], names: Sequence[str]) -> dict[str, np.ndarray]:
    return {c: np.array([e.rows[p].get(c, float("nan")) for p in ids], dtype=float) for c in names}


def compare_metric(metric: Metric, a: dict[str, np.ndarray], b: dict[str, np.ndarray],
                   idx: np.ndarray, labels: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """One metric of B against A over the paired problems (`idx`: the bootstrap's resamples)."""
    value_a, value_b = float(metric.value(a)), float(metric.value(b))
    boot = metric.value({c: v[idx] for c, v in b.items()}) - metric.value({c: v[idx] for c, v in a.items()})
    boot = boot[np.isfinite(boot)]
    low, high = (float(x) for x in np.percentile(boot, [2.5, 97.5])) if boot.size else (math.nan, math.nan)
    n = next(iter(a.values())).size
    out: dict[str, Any] = {"metric": metric.name, "a": value_a, "b": value_b, "diff": value_b - value_a,
                           "low": low, "high": high, "problems": n}
    if metric.per_problem:
        d = b[metric.name] - a[metric.name]
        d = d[np.isfinite(d)]
        improved, worsened = int((d > 0).sum()), int((d < 0).sum())
        p = sign_test(improved, worsened)
        sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
        moved = np.abs(d[d != 0])
        step = (100.0 if metric.binary else metric.step if metric.step is not None
                else float(moved.min()) if moved.size else 100.0)
        out.update(paired=int(d.size), improved=improved, worsened=worsened, ties=int(d.size) - improved - worsened,
                   p_sign=p, mde=mde(int(d.size), sd, step))
    else:
        sd = float(boot.std() * math.sqrt(n)) if boot.size else 0.0  # the bootstrap's standard error * sqrt(n)
        out.update(paired=n, improved=None, worsened=None, ties=None, p_sign=None, mde=mde(n, sd))
    out["verdict"] = verdict(out, *labels)
    return out


def verdict(row: dict[str, Any], a: str = "A", b: str = "B") -> str:
    """The one-line reading of a metric's comparison (see the module docstring)."""
    if row["mde"] is None:
        return f"too few problems to tell ({row['paired']}; at least {K_MIN} needed)"
    undefined = [side for side, key in ((a, "a"), (b, "b")) if not math.isfinite(row[key])]
    if undefined:  # a product metric (Mul) over a figure defined nowhere on a side
        return f"undefined on {' and '.join(undefined)}"
    up = row["low"] > 0
    if (up or row["high"] < 0) and (row["p_sign"] is None or row["p_sign"] < LEVEL):
        if row["p_sign"] is not None and (row["improved"] > row["worsened"]) != up:
            return (f"mixed: the mean went {'up' if up else 'down'} but more problems went {'down' if up else 'up'} "
                    f"({row['improved']} up / {row['worsened']} down)")
        return f"{b} better than {a}" if up else f"{b} worse than {a}"
    return f"no difference detected at this size (it could detect about {row['mde']:.1f} points)"


def compare(dirs: Sequence[str | Path], resamples: int = 4000, seed: int = 0) -> dict[str, Any]:
    """Every directory after the first against the first; the whole comparison as plain data."""
    if len(dirs) < 2:
        raise CompareError("give at least two evaluation directories")
    evals = [read_evaluation(d) for d in dirs]
    check_comparable(evals)
    labels = [chr(ord("A") + i) if i < 26 else f"E{i}" for i in range(len(evals))]
    for e in evals:
        if not e.rows:
            raise CompareError(f"{e.path}: no problem evaluated yet (every one pending or skipped)")
    common = set(evals[0].rows)
    for e in evals[1:]:
        if not common & set(e.rows):
            raise CompareError(f"{e.path}: none of its {len(e.rows)} problems is among the {len(common)} evaluated "
                               "in every directory before it; compare evaluations of the same problems")
        common &= set(e.rows)
    shared = sorted(common)
    unpaired = {lab: sorted(set(e.rows) - common) for lab, e in zip(labels, evals)}
    metrics = evals[0].metrics()
    names = sorted({c for m in metrics for c in (m.uses or (m.name,))})
    cols = [_columns(e, shared, names) for e in evals]
    idx = np.random.default_rng(seed).integers(0, len(shared), size=(resamples, len(shared)))
    comparisons = []
    for lab, e, c in zip(labels[1:], evals[1:], cols[1:]):
        rows = [compare_metric(m, cols[0], c, idx, ("A", lab)) for m in metrics]
        same = None
        if evals[0].kind == "select" and evals[0].code_sha and e.code_sha:
            same = all(evals[0].code_sha.get(p) == e.code_sha.get(p) for p in shared)
        comparisons.append({"a": "A", "b": lab, "metrics": rows, "same_candidates": same,
                            "other_sampler": other_sampler(evals[0], e)})
    return {
        "kind": evals[0].kind, "data": evals[0].identity.get("data"), "settings": evals[0].settings,
        "evaluations": [{"label": lab, "dir": str(e.path), "models": e.models} for lab, e in zip(labels, evals)],
        "problems": len(shared), "unpaired": {k: v for k, v in unpaired.items() if v},
        "resamples": resamples, "seed": seed, "comparisons": comparisons,
        "per_problem": {p: {lab: {k: (None if math.isnan(v) else v) for k, v in e.rows[p].items()}
                            for lab, e in zip(labels, evals)} for p in shared},
    }


def other_sampler(a: Evaluation, b: Evaluation) -> dict[str, list[Any]]:
    """Per role both recorded: the engine, device kind and dtype of A's and B's samples,
    where they differ (part of such a difference in the figures is the sampler's)."""
    sa, sb = (x if isinstance(x := e.identity.get(SAMPLED_WITH), dict) else {} for e in (a, b))
    return {role: [sa[role], sb[role]] for role in sorted(set(sa) & set(sb)) if sa[role] != sb[role]}


def finite(value: Any) -> Any:
    """The comparison with NaN (an undefined figure) as null, so its JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def headline(result: dict[str, Any]) -> list[str]:
    """One line per compared pair, on the kind's first metric."""
    def pts(x: float | None) -> str:
        return "-" if x is None or not math.isfinite(x) else f"{x:+.1f}"

    lines = []
    for comp in result["comparisons"]:
        r = comp["metrics"][0]
        counts = "" if r["improved"] is None else f", {r['improved']} up / {r['worsened']} down, sign p {r['p_sign']:.3g}"
        lines.append(f"{comp['b']} vs {comp['a']} on {r['metric']}: {r['verdict']} "
                     f"({pts(r['diff'])} points [{pts(r['low'])}, {pts(r['high'])}]{counts}, "
                     f"{r['problems']} problems)")
        for role, (a, b) in comp.get("other_sampler", {}).items():
            said = [", ".join(f"{k} {v}" for k, v in x.items()) if isinstance(x, dict) else str(x) for x in (a, b)]
            lines.append(f"  note: {comp['b']}'s {role} samples were made with {said[1]}, {comp['a']}'s with "
                         f"{said[0]}: part of the difference may be the sampler's")
    return lines


def plot_comparison(result: dict[str, Any], target: Path) -> Path:
    """Each metric's difference with its interval, one row per metric and compared pair."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codea1.output_files import atomic_output

    def drawn(r: dict[str, Any]) -> bool:  # an undefined figure (None after `finite`, or NaN) has no point
        return all(r[k] is not None and math.isfinite(r[k]) for k in ("diff", "low", "high"))

    rows = [(c["b"], r) for c in result["comparisons"] for r in c["metrics"] if drawn(r)]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    for y, (lab, r) in enumerate(reversed(rows)):
        colour = "tab:green" if "better" in r["verdict"] else "tab:red" if "worse" in r["verdict"] else "tab:gray"
        ax.errorbar(r["diff"], y, xerr=[[r["diff"] - r["low"]], [r["high"] - r["diff"]]], fmt="o", color=colour,
                    capsize=3)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [f"{lab} - A  {r['metric']}" for lab, r in reversed(rows)])
    ax.set_xlabel("difference, points (paired bootstrap 95% interval)")
    ax.set_title(f"eval {result['kind']} on {result['data']}: {result['problems']} paired problems")
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_output(target) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)
    return target
