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
    assert names == ["all_metrics.png", "eval.png", "mistake_book.png", "rates.png", "rewards.png"]
    assert all(p.parent == run / "plots" and is_png(p) for p in written)


def test_only_logged_metrics_are_drawn(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, [{"step": s, "code_reward": s / 10} for s in range(3)])
    names = sorted(p.name for p in make_plots(run, tmp_path / "figs"))
    assert names == ["all_metrics.png", "rewards.png"]
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
    import typer

    from codea1.plot import plot_command

    app = typer.Typer()
    app.command()(plot_command)
    run = tmp_path / "run"
    write_metrics(run, rows(4))
    result = CliRunner().invoke(app, [str(run)])
    assert result.exit_code == 0, result.output
    assert "rewards.png" in result.output and str(run / "plots") in result.output.replace("\n", "")
    bad = CliRunner().invoke(app, [str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "not found" in bad.output


def test_training_loop_metric_names_are_recognised(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, [
        {"step": s, "code/reward_mean": 0.1 * s, "code/reward_std": 0.05, "test/reward_mean": 0.3,
         "judge/pass_rate": 0.5, "judge/attack_rate": 0.2, "judge/valid_ratio": 0.7, "mistakes/size": s,
         **({"val/code_pass_rate": 0.4, "val/problems": 8} if s % 2 == 0 else {})}
        for s in range(1, 7)
    ])
    names = sorted(p.name for p in make_plots(run))
    assert names == ["all_metrics.png", "eval.png", "mistake_book.png", "rates.png", "rewards.png"]
