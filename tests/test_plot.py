"""`codea1 plot`: figures from metrics.jsonl, clear errors on bad files."""

from __future__ import annotations

import json

import pytest

from codea1.plot import MetricsError, make_plots, read_metrics


def write_metrics(run, rows, tail=""):
    run.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows) + tail
    (run / "metrics.jsonl").write_text(text)


def rows(steps=12):
    out = []
    for s in range(1, steps + 1):
        row = {"step": s, "code_reward": 0.1 * s, "test_reward": 0.5 - 0.01 * s, "valid_ratio": 0.8,
               "pass_rate": 0.6, "attack_rate": 0.2, "mistake_book_size": 3 * s, "loss": {"code": 0.1, "test": 0.2},
               "note": "text is ignored"}
        if s % 5 == 0:
            row["eval/mbppplus/pass@1"] = 30.0 + s
        out.append(row)
    return out


def is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 2000


def test_all_known_figures_are_written(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, rows())
    written = make_plots(run)
    names = sorted(p.name for p in written)
    assert names == ["eval.png", "mistake_book.png", "rates.png", "rewards.png"]
    assert all(p.parent == run / "plots" and is_png(p) for p in written)


def test_only_logged_metrics_are_drawn(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, [{"step": s, "code_reward": s / 10} for s in range(3)])
    names = sorted(p.name for p in make_plots(run, tmp_path / "figs"))
    assert names == ["rewards.png"]
    assert (tmp_path / "figs" / "rewards.png").is_file()


def test_series_flatten_nested_and_skip_sparse_points(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, rows())
    m = read_metrics(run)
    assert m.series["loss/code"][0] == (1.0, 0.1)
    assert [s for s, _ in m.series["eval/mbppplus/pass@1"]] == [5.0, 10.0]
    assert "note" not in m.series


def test_torn_last_line_is_ignored_but_a_bad_middle_line_is_not(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, rows(3), tail='{"step": 4, "code_rew')
    assert len(read_metrics(run).series["code_reward"]) == 3
    (run / "metrics.jsonl").write_text('{"step": 1, "code_reward": 1}\nnot json\n{"step": 2, "code_reward": 1}\n')
    with pytest.raises(MetricsError, match=r"metrics.jsonl:2: not a JSON object"):
        read_metrics(run)


def test_missing_file_and_missing_step_are_clear_errors(tmp_path):
    with pytest.raises(MetricsError, match="not found"):
        read_metrics(tmp_path)
    write_metrics(tmp_path, [{"code_reward": 1.0}])
    with pytest.raises(MetricsError, match=r":1: field 'step' must be a number"):
        read_metrics(tmp_path)


def test_cli_names_the_files(tmp_path):
    from typer.testing import CliRunner

    from codea1.cli import app

    run = tmp_path / "run"
    write_metrics(run, rows(4))
    result = CliRunner().invoke(app, ["plot", str(run)])
    assert result.exit_code == 0, result.output
    assert "rewards.png" in result.output and str(run / "plots") in result.output.replace("\n", "")
    bad = CliRunner().invoke(app, ["plot", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: ") and "not found" in bad.stderr


def test_training_loop_metric_names_are_recognised(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, [
        {"step": s, "code/reward_mean": 0.1 * s, "code/reward_std": 0.05, "test/reward_mean": 0.3,
         "judge/pass_rate": 0.5, "judge/attack_rate": 0.2, "judge/valid_ratio": 0.7, "mistakes/size": s,
         **({"val/code_pass_rate": 0.4, "val/problems": 8} if s % 2 == 0 else {})}
        for s in range(1, 7)
    ])
    names = sorted(p.name for p in make_plots(run))
    assert names == ["eval.png", "mistake_book.png", "rates.png", "rewards.png"]  # nothing else changed


def test_ema_is_debiased_and_hand_computed():
    from codea1.plot import ema

    # smoothing 0.5: acc = 0.5, 1.5, 1.75 over weights 0.5, 0.75, 0.875
    # acc: 0.5, 1.25, 1.125; weight: 0.5, 0.75, 0.875
    assert ema([1.0, 2.0, 1.0], 0.5) == pytest.approx([1.0, 1.25 / 0.75, 1.125 / 0.875])
    assert ema([3.0, 4.0], 0.0) == [3.0, 4.0]
    assert ema([5.0] * 20, 0.9) == pytest.approx([5.0] * 20)  # a constant stays itself from the first point
    with pytest.raises(ValueError, match="smoothing"):
        ema([1.0], 1.0)


def test_learning_summary_tells_a_rise_from_noise():
    import random

    from codea1.plot import Metrics, learning_summary

    rnd = random.Random(0)
    rising = [(s, 0.2 + 0.01 * s + rnd.uniform(-0.05, 0.05)) for s in range(1, 41)]
    flat = [(s, 0.5 + rnd.uniform(-0.05, 0.05)) for s in range(1, 41)]
    m = Metrics({"code/reward_mean": rising, "judge/valid_ratio": flat, "judge/pass_rate": rising[:5]}, path=None)
    trends = {t.key: t for t in learning_summary(m, ["code/reward_mean", "judge/valid_ratio", "judge/pass_rate"])}
    assert set(trends) == {"code/reward_mean", "judge/valid_ratio"}  # 5 points are too few to judge
    up = trends["code/reward_mean"]
    first = sum(v for _, v in rising[:10]) / 10
    last = sum(v for _, v in rising[-10:]) / 10
    assert up.first[0] == pytest.approx(first) and up.last[0] == pytest.approx(last)
    assert up.first[1] < first < up.first[2] and up.rose
    assert up.delta[0] == pytest.approx(last - first)
    level = trends["judge/valid_ratio"]
    assert not level.rose and level.delta[1] < 0 < level.delta[2]


def test_two_runs_are_overlaid_in_one_set_of_figures(tmp_path):
    from typer.testing import CliRunner

    from codea1.cli import app

    a1, golden = tmp_path / "a1", tmp_path / "golden"
    write_metrics(a1, rows(12))
    write_metrics(golden, [{"step": s, "code_reward": 0.05 * s, "pass_rate": 0.4} for s in range(1, 13)])
    written = make_plots([a1, golden])
    assert {p.parent for p in written} == {a1 / "plots" / "vs-golden"}
    assert sorted(p.name for p in written) == ["eval.png", "mistake_book.png", "rates.png", "rewards.png"]
    assert all(is_png(p) for p in written)
    result = CliRunner().invoke(app, ["plot", str(a1), str(golden), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cmp" / "rewards.png").is_file()
    assert "first vs last quarter" in result.output and "code_reward" in result.output
    # a missing second run fails before anything is written
    bad = CliRunner().invoke(app, ["plot", str(a1), str(tmp_path / "nope"), "--out", str(tmp_path / "never")])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: ") and not (tmp_path / "never").exists()


def test_chosen_metrics_get_their_own_figure_and_summary(tmp_path):
    from typer.testing import CliRunner

    from codea1.cli import app

    run = tmp_path / "run"
    write_metrics(run, [{"step": s, "code_reward": 0.4, "judge": {"code_valid_rate": 0.5 + 0.04 * s}}
                        for s in range(1, 13)])
    out = tmp_path / "plots"
    result = CliRunner().invoke(app, ["plot", str(run), "--out", str(out), "--metric", "judge/code_valid_rate"])
    assert result.exit_code == 0, result.output
    assert is_png(out / "selected.png")
    line = next(r for r in result.output.splitlines() if r.startswith("judge/code_valid_rate"))
    assert line.endswith("rose")
    bad = CliRunner().invoke(app, ["plot", str(run), "--out", str(tmp_path / "never"), "--metric", "judge/nope"])
    assert bad.exit_code == 2 and "--metric judge/nope: no run logged it" in bad.stderr
    assert "judge/code_valid_rate" in bad.stderr and not (tmp_path / "never").exists()


def loop_rows(steps):
    """Rows named as the training loop names them; some series constant, as in a real run."""
    return [{"step": s, "code/reward_mean": 0.05 + 0.01 * s, "code/reward_std": 0.3,
             "test/reward_mean": 0.4, "test/reward_std": 0.1, "judge/pass_rate": 0.5 + 0.005 * s,
             "judge/attack_rate": 0.1, "rollout/code_tokens": 1000 + 7 * s, "rollout/code_prompts_truncated": 0,
             "time/update_s": 100.0 + s % 3, "update/code/grad_norm": 0.2 + 0.01 * (s % 4)}
            for s in range(1, steps + 1)]


def test_overview_sheets_are_per_phase_and_leave_constant_series_out(tmp_path):
    from codea1.plot import constant_metrics, overview_groups

    run = tmp_path / "run"
    write_metrics(run, loop_rows(40))
    runs = [("run", read_metrics(run))]
    assert constant_metrics(runs) == {"code/reward_std": 0.3, "judge/attack_rate": 0.1,
                                      "rollout/code_prompts_truncated": 0.0, "test/reward_mean": 0.4,
                                      "test/reward_std": 0.1}
    # (rewards and rates are drawn in rewards.png and rates.png, not again here)
    assert overview_groups(runs) == {"rollout": ["rollout/code_tokens"], "update": ["update/code/grad_norm"],
                                     "time": ["time/update_s"]}
    names = sorted(p.name for p in make_plots(run))
    assert [n for n in names if n.startswith("metrics-")] == [
        "metrics-rollout.png", "metrics-time.png", "metrics-update.png"]


def test_reward_band_is_labelled_in_words_and_clipped_at_zero(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codea1.plot import _draw

    run = tmp_path / "run"
    write_metrics(run, loop_rows(10))
    fig, ax = plt.subplots()
    _draw(ax, [("run", read_metrics(run))], ["code/reward_mean"], 0.6)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["code reward (EMA 0.6)", "code reward: ±1 std over the step's samples"]
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == 0.0  # mean 0.06 - std 0.3 would be -0.24
    plt.close(fig)


def test_summary_says_why_it_is_missing_under_eight_steps(tmp_path):
    from typer.testing import CliRunner

    from codea1.cli import app

    run = tmp_path / "run"
    write_metrics(run, loop_rows(2))
    result = CliRunner().invoke(app, ["plot", str(run)])
    assert result.exit_code == 0, result.output
    assert "run: no first- vs last-quarter summary: 2 steps logged, it needs 8 (2 a quarter)" in result.output
    assert "not drawn in metrics-*.png, constant throughout: code/reward_std=0.3" in result.output
