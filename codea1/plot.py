"""`codea1 plot RUN_DIR [RUN_DIR ...]`: training runs' metrics as PNG figures.

Reads ``RUN_DIR/metrics.jsonl`` (one JSON object per step, written by the training loop)
and draws whichever of the known curves the run logged: code and test rewards; pass,
attack and valid rates; the Mistake Book's size; evaluation scores (keys ``eval/...`` or
``val/...``); and every other metric that changed, one sheet per phase
(``metrics-judge.png``, ``metrics-rollout.png``, ...; constant series are named on the
console instead of drawn flat). Raw points are drawn faint
with an exponential moving average (EMA, TensorBoard's debiased smoothing) over them, so a
trend shows through step-to-step noise. Several runs (an a1 run and a golden run, say) are
overlaid in one set of figures. `learning_summary` says whether a curve rose: the mean of the
last quarter of steps against the first, each with a bootstrap 95% interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from codea1.cli_options import check_output_dir
from codea1.output_files import atomic_output
from codea1.output_files import iter_jsonl
from codea1.train.metrics import METRICS_FILE

# numpy and matplotlib are imported where they are used: `codea1 --help` imports this module
# (it holds `plot_command`), and they cost a good part of a second.

# (file stem, title, y label, metric keys in drawing order). Both the training loop's
# names (`code/reward_mean`, `judge/pass_rate`, `mistakes/size`, ...) and the short ones
# (`code_reward`, `pass_rate`, `mistake_book_size`, ...) are recognised.
FIGURES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("rewards", "Rewards", "mean reward",
     ("code_reward", "code/reward_mean", "test_reward", "test/reward_mean")),
    ("rates", "Pass, attack and valid rates", "rate",
     ("pass_rate", "judge/pass_rate", "attack_rate", "judge/attack_rate", "valid_ratio", "judge/valid_ratio")),
    ("mistake_book", "Mistake Book size", "tests stored", ("mistake_book_size", "mistakes/size")),
)
# Legend words for the curves of the named figures (any other key is shown as logged).
LABELS = {
    "code/reward_mean": "code reward", "code_reward": "code reward",
    "test/reward_mean": "test reward", "test_reward": "test reward",
    "judge/pass_rate": "pass rate", "pass_rate": "pass rate",
    "judge/attack_rate": "attack rate", "attack_rate": "attack rate",
    "judge/valid_ratio": "valid test ratio", "valid_ratio": "valid test ratio",
    "mistakes/size": "Mistake Book size", "mistake_book_size": "Mistake Book size",
}
# The range a metric can take, to clip its +-std band to (a code reward is never below 0).
BOUNDS = {"code/reward_mean": (0.0, 1.0), "test/reward_mean": (-1.0, 1.0)}
# The per-phase overview sheets: a key's part before its first '/' names its sheet.
GROUPS = {
    "code": "Code model", "test": "Test model", "judge": "Judge", "mistakes": "Mistake Book",
    "rollout": "Rollouts", "update": "Updates", "time": "Seconds per phase", "data": "Data",
}
OTHER_GROUP = "other"
# Evaluation scores: periodic, on their own scales, one panel each.
EVAL_PREFIXES = ("eval/", "val/")
# A mean drawn with a +-std band when the run logged both.
STD_OF = {"code/reward_mean": "code/reward_std", "test/reward_mean": "test/reward_std"}


class MetricsError(ValueError):
    """metrics.jsonl is missing or unreadable; the message names the file and line."""


@dataclass
class Metrics:
    """Per-metric series of (step, value), in file order."""

    series: dict[str, list[tuple[float, float]]]
    path: Path

    def has(self, key: str) -> bool:
        return bool(self.series.get(key))


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _flatten(row: dict, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "/"))
        else:
            flat[name] = value
    return flat


def read_metrics(run_dir: Path) -> Metrics:
    """Every numeric metric of a run. Nested objects become ``a/b`` keys; a truncated
    last line (a run killed mid-write) is ignored, any other bad line is an error."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise MetricsError(f"{path}: not found (is {run_dir} a training run directory?)")

    series: dict[str, list[tuple[float, float]]] = {}
    try:
        rows = list(iter_jsonl(path))
    except ValueError as exc:
        raise MetricsError(str(exc)) from exc
    for lineno, row in rows:
        flat = _flatten(row)
        step = _number(flat.get("step"))
        if step is None:
            raise MetricsError(f"{path}:{lineno}: field 'step' must be a number, got {flat.get('step')!r}")
        for key, value in flat.items():
            number = _number(value)
            if key != "step" and number is not None:
                series.setdefault(key, []).append((step, number))
    if not series:
        raise MetricsError(f"{path}: no numeric metrics in it")
    return Metrics(series, path)


def ema(values: list[float], smoothing: float) -> list[float]:
    """TensorBoard's smoothing: an exponential moving average whose start is debiased (the
    first point is itself, not pulled towards 0). `smoothing` 0 returns the values."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    out: list[float] = []
    acc, weight = 0.0, 0.0
    for value in values:
        acc = smoothing * acc + (1.0 - smoothing) * value
        weight = smoothing * weight + (1.0 - smoothing)
        out.append(acc / weight)
    return out


@dataclass
class Trend:
    """A metric's mean over the first and the last quarter of a run's steps, each with a
    bootstrap 95% interval, and the interval of their difference (last - first)."""

    key: str
    steps: int
    first: tuple[float, float, float]  # mean, low, high
    last: tuple[float, float, float]
    delta: tuple[float, float, float]

    @property
    def rose(self) -> bool:
        """The last quarter is higher than the first beyond resampling noise."""
        return self.delta[1] > 0.0


def _bootstrap_mean(rng, values, n_boot: int):
    import numpy as np

    values = np.asarray(values, dtype=float)
    means = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    return means


# Fewer logged steps give quarters of one point each, whose bootstrap interval is no interval.
MIN_SUMMARY_STEPS = 8


def learning_summary(metrics: Metrics, keys: list[str], fraction: float = 0.25,
                     n_boot: int = 4000, seed: int = 0) -> list[Trend]:
    """First-quarter vs last-quarter means of each key the run logged at least
    `MIN_SUMMARY_STEPS` times.
    The interval is a percentile bootstrap over the quarter's steps (steps resampled
    independently; consecutive steps are correlated, so read it as a lower bound on the noise)."""
    import numpy as np

    if not 0.0 < fraction <= 0.5:
        raise ValueError(f"fraction must be in (0, 0.5], got {fraction}")
    trends = []
    for key in keys:
        points = metrics.series.get(key, [])
        if len(points) < MIN_SUMMARY_STEPS:
            continue
        values = [v for _, v in sorted(points)]
        k = max(2, int(len(values) * fraction))
        rng = np.random.default_rng(seed)
        a, b = _bootstrap_mean(rng, values[:k], n_boot), _bootstrap_mean(rng, values[-k:], n_boot)

        def interval(samples, centre):
            lo, hi = np.percentile(samples, [2.5, 97.5])
            return (float(centre), float(lo), float(hi))

        first, last = float(np.mean(values[:k])), float(np.mean(values[-k:]))
        trends.append(Trend(key, len(values), interval(a, first), interval(b, last),
                            interval(b - a, last - first)))
    return trends


# What a user asks of a run that should learn: these, first quarter against last.
SUMMARY_KEYS = ("code/reward_mean", "test/reward_mean", "judge/valid_ratio", "judge/pass_rate",
                "judge/attack_rate", "code_reward", "test_reward", "valid_ratio")


def format_summary(trends: list[Trend]) -> str:
    lines = [f"{'metric':<22} {'steps':>5}  {'first quarter':>22}  {'last quarter':>22}  {'change':>24}"]
    for t in trends:
        def cell(m):
            return f"{m[0]:.3f} [{m[1]:.3f}, {m[2]:.3f}]"

        verdict = "rose" if t.rose else ("fell" if t.delta[2] < 0 else "within noise")
        lines.append(f"{t.key:<22} {t.steps:>5}  {cell(t.first):>22}  {cell(t.last):>22}  "
                     f"{t.delta[0]:+.3f} [{t.delta[1]:+.3f}, {t.delta[2]:+.3f}] {verdict}")
    return "\n".join(lines)


def _draw(ax, runs: list[tuple[str, Metrics]], keys: list[str], smoothing: float) -> None:
    """Each (run, key) series: raw points faint, its EMA solid in the same colour."""
    labelled = 0
    for name, metrics in runs:
        for key in keys:
            points = metrics.series.get(key)
            if not points:
                continue
            xs, ys = zip(*points)
            word = LABELS.get(key, key)
            label = word if len(runs) == 1 else (name if len(keys) == 1 else f"{name}: {word}")
            faint = smoothing > 0 and len(points) > 2
            (line,) = ax.plot(xs, ys, marker="o" if len(points) <= 30 else None, markersize=3,
                              alpha=0.3 if faint else 1.0, label=None if faint else label)
            if faint:
                ax.plot(xs, ema(list(ys), smoothing), color=line.get_color(), linewidth=1.8,
                        label=f"{label} (EMA {smoothing:g})")
            std = dict(metrics.series.get(STD_OF.get(key, ""), []))
            if len(runs) == 1 and std and all(x in std for x in xs):
                low, high = BOUNDS.get(key, (-math.inf, math.inf))
                lo = [max(low, y - std[x]) for x, y in zip(xs, ys)]
                hi = [min(high, y + std[x]) for x, y in zip(xs, ys)]
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.12, linewidth=0,
                                label=f"{word}: ±1 std over the step's samples")
            labelled += 1
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.grid(alpha=0.3)
    if labelled > 1 or smoothing > 0:
        ax.legend(fontsize=7)


def _panels(plt, runs, keys: list[str], title: str, smoothing: float):
    """One small panel per metric (their scales differ)."""
    cols = min(4, len(keys))
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows + 0.6), squeeze=False,
                             layout="constrained")  # the title above the panels, never on them
    for ax, key in zip(axes.flat, keys):
        _draw(ax, runs, [key], smoothing)
        ax.set_title(key, fontsize=9)
        ax.tick_params(labelsize=7)
        legend = ax.get_legend()
        if legend is not None and len(runs) == 1:
            legend.remove()  # one series a panel: its title names it
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle(title)
    return fig


def run_names(run_dirs: list[Path]) -> list[str]:
    """Short, distinct legend names: the directory names, or their paths where names clash."""
    names = [Path(d).name or str(d) for d in run_dirs]
    if len(set(names)) < len(names):
        names = [str(d) for d in run_dirs]
    return names


def make_plots(run_dirs: Path | list[Path], out_dir: Path | None = None,
               smoothing: float = 0.6, metrics: list[str] | None = None) -> list[Path]:
    """Draw the figures of one run, or of several runs overlaid; returns the PNGs written.
    `metrics`: keys drawn together in one more figure, `selected.png` (one panel each).
    Every run's metrics are read (and any error raised) before anything is written."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"--smooth must be in [0, 1), got {smoothing}")
    dirs = [Path(run_dirs)] if isinstance(run_dirs, (str, Path)) else [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("no run directory given")
    runs = list(zip(run_names(dirs), [read_metrics(d) for d in dirs]))
    unknown = [k for k in metrics or [] if not any(m.has(k) for _, m in runs)]
    if unknown:
        known = sorted({k for _, m in runs for k in m.series})
        raise MetricsError(f"--metric {', '.join(unknown)}: no run logged it; the runs logged {', '.join(known)}")
    if out_dir is not None:
        out_dir = Path(out_dir)
    elif len(dirs) == 1:
        out_dir = dirs[0] / "plots"
    else:  # an overlay belongs to no single run: beside the first, named after the others
        out_dir = dirs[0] / "plots" / ("vs-" + "-".join(n.replace("/", "_") for n, _ in runs[1:]))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(fig, stem: str) -> None:
        target = out_dir / f"{stem}.png"
        if fig.get_layout_engine() is None:
            fig.tight_layout()
        try:
            with atomic_output(target) as tmp:  # a failed save keeps the previous figure
                fig.savefig(tmp, dpi=110, format="png")
        finally:
            plt.close(fig)
        written.append(target)

    def logged(key: str) -> bool:
        return any(m.has(key) for _, m in runs)

    for stem, title, ylabel, wanted in FIGURES:
        keys = [k for k in wanted if logged(k)]
        if not keys:
            continue
        if len(runs) == 1:
            fig, ax = plt.subplots(figsize=(7, 4))
            _draw(ax, runs, keys, smoothing)
            ax.set_title(title)
            ax.set_ylabel(ylabel)
        else:  # several runs: one panel per metric, the runs overlaid in each
            fig = _panels(plt, runs, keys, title, smoothing)
        save(fig, stem)

    eval_keys = sorted({k for _, m in runs for k in m.series if k.startswith(EVAL_PREFIXES)})
    if eval_keys:
        save(_panels(plt, runs, eval_keys, "Evaluation scores", smoothing), "eval")

    if metrics:
        save(_panels(plt, runs, list(dict.fromkeys(metrics)), "Selected metrics", smoothing), "selected")

    for group, keys in overview_groups(runs).items():
        title = GROUPS.get(group, "Other metrics")
        save(_panels(plt, runs, keys, f"{title}: the other metrics that changed", smoothing), f"metrics-{group}")
    return written


def _group(key: str) -> str:
    head = key.split("/", 1)[0] if "/" in key else OTHER_GROUP
    return head if head in GROUPS else OTHER_GROUP


def constant_metrics(runs: list[tuple[str, Metrics]]) -> dict[str, float]:
    """The metrics whose every logged value, in every run, is one number (and that number)."""
    out: dict[str, float] = {}
    for key in sorted({k for _, m in runs for k in m.series}):
        values = {v for _, m in runs for _, v in m.series.get(key, [])}
        if len(values) == 1:
            out[key] = values.pop()
    return out


def overview_groups(runs: list[tuple[str, Metrics]]) -> dict[str, list[str]]:
    """Every metric that changed, by the phase it belongs to (its key's first part); those
    of the named figures (rewards, rates, Mistake Book, evaluation) are drawn there, and
    constant series are left out."""
    constant = constant_metrics(runs)
    named = {k for _, _, _, keys in FIGURES for k in keys}
    groups: dict[str, list[str]] = {}
    for key in sorted({k for _, m in runs for k in m.series}):
        if key not in constant and key not in named and not key.startswith(EVAL_PREFIXES):
            groups.setdefault(_group(key), []).append(key)
    order = [*GROUPS, OTHER_GROUP]
    return {g: groups[g] for g in order if g in groups}


def plot_command(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Training run directories (each holds metrics.jsonl); several are overlaid."),
    out: Path | None = typer.Option(None, "--out", help="Where to write the PNGs (default RUN_DIR/plots; for several runs RUN_DIR/plots/vs-OTHERS)."),
    smooth: float = typer.Option(0.6, "--smooth", min=0.0, max=0.99,
                                 help="EMA smoothing of the curves drawn over the raw points, 0 to 0.99 (0 = raw only)."),
    summary: bool = typer.Option(True, "--summary/--no-summary",
                                 help="Print first- vs last-quarter means with bootstrap 95% intervals for the reward and rate curves."),
    metric: Optional[List[str]] = typer.Option(
        None, "--metric", help="A logged metric (e.g. judge/code_valid_rate) to draw in selected.png and "
        "add to the summary (repeatable)."),
) -> None:
    """Draw training runs' rewards, rates, Mistake Book size and evaluation scores as PNGs."""

    if out is not None:  # (RUN_DIR itself is checked by reading its metrics.jsonl)
        check_output_dir(out, "--out")
    console = Console(soft_wrap=True)  # paths stay whole, copy-pasteable
    for path in make_plots(run_dirs, out, smoothing=smooth, metrics=metric):
        console.print(f"wrote {path}", markup=False)
    runs = [(name, read_metrics(d)) for name, d in zip(run_names(run_dirs), run_dirs)]
    constant = constant_metrics(runs)
    if constant:
        shown = ", ".join(f"{k}={v:g}" for k, v in list(constant.items())[:6])
        more = f" and {len(constant) - 6} more" if len(constant) > 6 else ""
        console.print(f"not drawn in metrics-*.png, constant throughout: {shown}{more}", markup=False,
                      highlight=False)
    if summary:
        wanted = list(dict.fromkeys([*SUMMARY_KEYS, *(metric or [])]))
        for name, metrics in runs:
            trends = learning_summary(metrics, wanted)
            if trends:
                console.print(f"\n{name}: first vs last quarter of steps (mean [bootstrap 95% interval])",
                              markup=False, highlight=False)
                console.print(format_summary(trends), markup=False, highlight=False)
            else:
                steps = max((len(metrics.series.get(k, [])) for k in wanted), default=0)
                console.print(f"\n{name}: no first- vs last-quarter summary: {steps} step"
                              f"{'s' if steps != 1 else ''} logged, it needs {MIN_SUMMARY_STEPS} "
                              f"({MIN_SUMMARY_STEPS // 4} a quarter)", markup=False, highlight=False)
