"""Which metrics the Live page draws together: the registry's panels (grpo_lab/rundir/metrics.py
PANELS) for the columns a run has. Names, units and meanings are the registry's; a panel's title
is in dashboard/locales/ (panel.<id>.title), and its subtitle is the meaning of each row it draws,
in English from the registry, in another language from locales/metric_meanings/<code>.yaml."""

from __future__ import annotations

import functools
import os
import re
import textwrap
from dataclasses import dataclass

import yaml

from grpo_lab.dashboard.i18n import DEFAULT, LOCALES, lang, t, texts
from grpo_lab.rundir import metrics as registry

MEANINGS = LOCALES / "metric_meanings"
SUBTITLE_WIDTH = 72  # characters a subtitle line holds at two charts a row


@dataclass(frozen=True)
class Panel:
    title: str
    metrics: tuple[str, ...]
    help: str | list[str]  # the chart's subtitle: a line or lines
    y_title: str = ""
    ratio: bool = False  # a ratio chart: log y-axis, with the clip bounds drawn as rules
    stacked: bool = False  # parts of a whole (the step's phases): stacked areas, not lines
    section: str = "overview"  # one of SECTIONS: where Live draws it (only "overview" on first paint)


SECTIONS = registry.SECTIONS  # Live's sections in page order, as the registry's panels declare them

# the registry's units that have a translation (locales unit.*); the others ("nats", "GB") are symbols
UNIT_KEYS = {"reward": "unit.reward", "fraction": "unit.fraction", "fraction of tokens": "unit.fraction",
             "ratio": "unit.ratio", "tokens": "unit.tokens", "tokens/s": "unit.tokens_per_s", "s": "unit.seconds",
             "count": "unit.count", "std units": "unit.std_units"}


@functools.cache
def translated_meanings(code: str) -> dict[str, str]:
    """Registered name (a row's first) -> its short meaning in language `code`; empty for English,
    whose meanings are the registry's own."""
    path = MEANINGS / f"{code}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}


ASIDE = re.compile(r"`[^`]*`| \(|; |: ")  # a code span is skipped whole: its brackets are not asides


def short_meaning(row: registry.Metric) -> str:
    """The registry's meaning of `row` up to its first aside (a bracket, a semicolon, a colon)."""
    cut = next((m.start() for m in ASIDE.finditer(row.meaning) if not m.group().startswith("`")), None)
    return row.meaning[:cut]


def meaning(row: registry.Metric) -> str:
    """`row`'s short meaning in the current language (English where no translation exists), as plain
    text: a chart's subtitle shows a backtick as it is.

    >>> meaning(registry.ROWS["clip/total"])
    'clip/low + clip/high'
    """
    return (translated_meanings(lang()).get(row.names[0]) or short_meaning(row)).replace("`", "")


def _rows(names: tuple[str, ...]) -> list[registry.Metric]:
    return list({id(registry.ROWS[n]): registry.ROWS[n] for n in names}.values())


def _label(drawn: list[str]) -> str:
    """One name, or several as their shared start up to a / or _ and a star (ratio/*, time/update_s_*)."""
    if len(drawn) == 1:
        return drawn[0]
    start = os.path.commonprefix(drawn)
    return start[:max(start.rfind("/"), start.rfind("_")) + 1] + "*"


def subtitle(names: tuple[str, ...]) -> list[str]:
    """What the drawn rows mean, one piece per registry row ("name: meaning"), packed into lines."""
    pieces = [f"{_label([n for n in row.names if n in names])}: {meaning(row)}" for row in _rows(names)]
    return textwrap.wrap(" · ".join(pieces), SUBTITLE_WIDTH) or [""]


def y_title(names: tuple[str, ...]) -> str:
    """The drawn rows' unit, translated where the locales have it; none when they differ."""
    units = {registry.ROWS[n].unit for n in names}
    if len(units) != 1:
        return ""
    unit = units.pop()
    return t(UNIT_KEYS[unit]) if unit in UNIT_KEYS else unit


def panels(columns: list[str]) -> list[Panel]:
    """The Live page's charts for the columns this run has: each registry panel with at least one of
    its names present (PPO adds value/*, several processes the slowest and mean rank's times, a run
    with tools tools/*)."""
    out = []
    for spec in registry.PANELS:
        drawn = tuple(c for name in spec.names for c in registry.columns_of(name, columns))
        if not drawn:
            continue
        present = tuple(n for n in spec.names if registry.columns_of(n, columns))
        normal = f"panel.{spec.id}.normal"  # what a healthy run reads here, where a figure alone says nothing
        hint = textwrap.wrap(t(normal), SUBTITLE_WIDTH) if normal in texts(DEFAULT) else []
        out.append(Panel(t(f"panel.{spec.id}.title"), drawn, subtitle(present) + hint, y_title(present),
                         ratio=spec.ratio, stacked=spec.stacked, section=spec.section))
    return out


def other_metrics(columns: list[str]) -> list[str]:
    """Metric columns no panel shows (lr, reward/std, rewards/<fn>/none_frac, ...)."""
    shown = {m for p in panels(columns) for m in p.metrics}
    return [c for c in columns if c not in shown and c not in ("step", "time", "wall_s")]
