"""`codea1 plot RUN_DIR`: a training run's metrics as PNG figures.

Reads ``RUN_DIR/metrics.jsonl`` (one JSON object per step, written by the training loop)
and draws whichever of the known curves the run logged: code and test rewards; pass,
attack and valid rates; the Mistake Book's size; evaluation scores (keys ``eval/...`` or
``val/...``); and every numeric metric on one overview sheet. The figures go to ``RUN_DIR/plots/``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import typer

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
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise MetricsError(f"{path}: not found (is {run_dir} a training run directory?)")
    from codea1.eval.store import iter_jsonl

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


def _draw(ax, metrics: Metrics, keys: list[str]) -> None:
    for key in keys:
        points = metrics.series[key]
        xs, ys = zip(*points)
        (line,) = ax.plot(xs, ys, marker="o" if len(points) <= 30 else None, markersize=3, label=key)
        std = dict(metrics.series.get(STD_OF.get(key, ""), []))
        if std and all(x in std for x in xs):
            lo = [y - std[x] for x, y in zip(xs, ys)]
            hi = [y + std[x] for x, y in zip(xs, ys)]
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.grid(alpha=0.3)
    if len(keys) > 1:
        ax.legend(fontsize=8)


def _panels(plt, metrics: Metrics, keys: list[str], title: str):
    """One small panel per metric (their scales differ)."""
    cols = min(4, len(keys))
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows + 0.4), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        _draw(ax, metrics, [key])
        ax.set_title(key, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle(title)
    return fig


def make_plots(run_dir: Path, out_dir: Path | None = None) -> list[Path]:
    """Draw the run's figures; returns the PNG files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    metrics = read_metrics(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(fig, stem: str) -> None:
        target = out_dir / f"{stem}.png"
        fig.tight_layout()
        fig.savefig(target, dpi=110)
        plt.close(fig)
        written.append(target)

    for stem, title, ylabel, wanted in FIGURES:
        keys = [k for k in wanted if metrics.has(k)]
        if not keys:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        _draw(ax, metrics, keys)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        save(fig, stem)

    eval_keys = sorted(k for k in metrics.series if k.startswith(EVAL_PREFIXES))
    if eval_keys:
        save(_panels(plt, metrics, eval_keys, "Evaluation scores"), "eval")

    fig = _panels(plt, metrics, sorted(metrics.series), "All metrics")
    save(fig, "all_metrics")
    return written


def plot_command(
    run_dir: Path = typer.Argument(..., help="Training run directory (holds metrics.jsonl)."),
    out: Path | None = typer.Option(None, "--out", help="Where to write the PNGs (default RUN_DIR/plots)."),
) -> None:
    """Draw a training run's rewards, rates, Mistake Book size and evaluation scores as PNGs."""
    from rich.console import Console

    console = Console(soft_wrap=True)  # paths stay whole, copy-pasteable
    try:
        written = make_plots(run_dir, out)
    except MetricsError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    for path in written:
        console.print(f"wrote {path}")
