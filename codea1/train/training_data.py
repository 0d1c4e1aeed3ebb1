"""The problems a run trains and validates on, as `data.train`, `data.heldout` and
`data.include` name them (the order they are drawn in is `codea1.data.sampler`'s)."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Callable

from codea1.data import bundled_problems, bundled_split, load_problems
from codea1.data.bundled import STDIN_PREFIX
from codea1.train.config import REQUIRED, TrainConfig, require_data


def load_training_data(cfg: TrainConfig, say: Callable[[str], None] | None = None):
    """(train problems, held-out problems) as the config names them. Training problems with
    no reference solution (CodeContests rows without a Python 3 solution, LiveCodeBench)
    are left out, as `say` is told: the judge needs a reference, and such a file is the
    data set as it ships, not a broken one. None left is an error."""
    if REQUIRED in (cfg.data.train, cfg.data.heldout):
        require_data(cfg)

    def load(field: str, text: str, bundled_means: str) -> list:
        try:
            split = bundled_split(text)   # `bundled` (`bundled-stdin`) alone: the train (or held-out) split
        except ValueError as exc:
            raise ValueError(f"data.{field}: {exc}") from None
        if split is None:
            return load_problems(text)
        if text == "bundled":
            split = bundled_means
        elif text == "bundled-stdin":
            split = STDIN_PREFIX + bundled_means
        return bundled_problems(split)

    train = load("train", cfg.data.train, "train")
    heldout = [] if cfg.data.heldout is None else load("heldout", cfg.data.heldout, "heldout")
    if not train:
        raise ValueError(f"data.train {cfg.data.train!r}: no problems")
    if cfg.data.include is not None:
        train = select_problems(train, cfg.data.include, source=cfg.data.train)
    unreferenced = [p.id for p in train if not p.reference.strip()]
    if len(unreferenced) == len(train):
        raise ValueError(f"data.train {cfg.data.train!r}: no problem has a reference solution (the judge needs "
                         "one); such problems can be evaluated (codea1 eval code), not trained on")
    if unreferenced:
        if say is not None:
            shown = ", ".join(unreferenced[:3]) + (" ..." if len(unreferenced) > 3 else "")
            say(f"data.train: left out {len(unreferenced)} of {len(train)} problems that have no reference "
                f"solution (the judge needs one; they can be evaluated, not trained on): {shown}")
        train = [p for p in train if p.reference.strip()]
    return train, heldout


def select_problems(problems: list, include: list[str], source: str = "data.train") -> list:
    """The problems whose id is one of `include` or matches one of its shell patterns, in
    their original order. A pattern that matches no problem is an error (a typo would
    otherwise shrink the training set in silence)."""
    if not include:
        raise ValueError("data.include is empty: list problem ids or patterns, or set it to null for all")
    chosen, used = [], set()
    for p in problems:
        hits = {pat for pat in include if fnmatchcase(p.id, pat)}
        if hits:
            chosen.append(p)
            used |= hits
    missing = [pat for pat in include if pat not in used]
    if missing:
        raise ValueError(
            f"data.include: no problem of {source!r} matches {', '.join(repr(m) for m in missing)} "
            + (f"(its ids look like {problems[0].id!r})" if problems else "(it holds no problems)")
            + "; --set data.include=null trains on all"
        )
    return chosen


def broken_training_rows(cfg: TrainConfig, problems: list) -> list[tuple[str, str]]:
    """(id, reason) for each training problem whose reference does not run and pass its
    golden tests in the sandbox under the judge's limits (`codea1 data check`'s check):
    the judge validates every test against the reference, so a broken one spoils every
    reward of its problem. Seconds for the bundled sets (a sandbox run per problem)."""
    from codea1.data.check import check_problems
    from codea1.judge.golden import StdinSettings

    limits, stdin = cfg.judge.sandbox_limits(), StdinSettings.of(cfg.judge)
    return [(row.id, "; ".join(row.reasons))
            for row in check_problems(problems, limits=limits, workers=cfg.judge.workers,
                                      stdin_time_scale=stdin.time_scale, stdin_max_output_bytes=stdin.max_output_bytes)
            if row.status == "broken"]


def checked_training_data(cfg: TrainConfig) -> tuple[list[str], list[str]]:
    """(ids of the training problems to leave out, a line for each) as `data.check` says:
    refuse (a ValueError naming every broken row), skip, or off (nothing checked)."""
    if cfg.data.check == "off":
        return [], []
    train, _heldout = load_training_data(cfg)
    broken = broken_training_rows(cfg, train)
    if not broken:
        return [], []
    named = [f"{pid}: {reason}" for pid, reason in broken]
    if cfg.data.check == "refuse" or len(broken) == len(train):
        j = cfg.judge
        stdin = "".join(f" --{key.replace('_', '-')} {getattr(j, key):g}" for key in ("stdin_time_scale",
                        "stdin_max_output_mb") if getattr(j, key) != type(j).model_fields[key].default)
        raise ValueError(f"data.train {cfg.data.train}: {len(broken)} of {len(train)} problems have a broken "
                         f"reference (`codea1 data check --timeout {j.timeout_s:g} --call-timeout "
                         f"{j.call_timeout_s:g} --memory-mb {j.memory_mb}{stdin}` shows each); fix or remove them"
                         + (", or --set data.check=skip to train without them" if len(broken) < len(train) else "")
                         + ":\n" + "\n".join(named))
    return [pid for pid, _ in broken], [f"data.train: skipped {line}" for line in named]
