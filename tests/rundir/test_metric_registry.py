"""One registry of metric names (grpo_lab.rundir.metrics): the doc is written from it, the Live
panels and the eval columns name only what it holds, and no name is registered twice."""

from pathlib import Path

from grpo_lab.dashboard.views import metrics as panels
from grpo_lab.rundir import metrics

DOC = Path(__file__).resolve().parents[2] / "docs" / "run-directory.md"


def test_the_docs_metric_tables_are_the_registry():
    text = DOC.read_text()
    assert text.count("<!-- metrics:") == len(metrics.TABLES)  # every table of the registry has its place
    assert metrics.render_doc(text) == text, "run: python -m grpo_lab.rundir.metrics docs/run-directory.md"


def test_no_name_is_registered_twice_and_patterns_expand_per_reward():
    every = [n for table in metrics.TABLES.values() for row in table.rows for n in row.names]
    assert len(every) == len(set(every))
    grpo = metrics.names("grpo", ["a", "b"])
    assert {"rewards/a/mean", "rewards/b/none_frac"} <= grpo and not any("<fn>" in n for n in grpo)
    assert "value/loss" not in grpo and "value/loss" in metrics.names("ppo", ["a"])
    assert "time/update_s_max" not in grpo and "time/update_s_max" in metrics.names("grpo", ["a"], processes=2)
    assert "eval/accuracy" not in grpo and "eval/rewards/a/mean" in metrics.names("grpo", ["a"], evaluated=True)


def test_every_metric_a_live_panel_draws_is_registered():
    registered = (metrics.names("grpo", ["correctness"], processes=2, evaluated=True, cuda=True)
                  | metrics.names("ppo", ["correctness"], evaluated=True))
    drawn = {m for p in panels.panels(sorted(registered)) for m in p.metrics}
    assert drawn and drawn <= registered
    asked = {m for p in panels.panels(["x/never"] + sorted(registered)) for m in p.metrics}
    assert asked == drawn  # a panel draws only columns the run has


def test_panels_and_phases_come_from_the_registry():
    from grpo_lab.trainer import timing

    assert timing.PHASES is metrics.PHASES and timing.RANK_PHASES is metrics.RANK_PHASES
    assert all(name in metrics.ROWS for p in metrics.PANELS for name in p.names)
    columns = ["reward/mean", "rewards/acc/mean", "rewards/log/mean", "rewards/log/hits", "tools/error_frac", "x/y"]
    assert metrics.registered_name("rewards/log/mean") == "rewards/log/<name>"  # a logged figure, not reward "log"
    assert metrics.registered_name("eval/rewards/acc/mean") == "eval/rewards/<fn>/mean"
    assert metrics.registered_name("x/y") is None
    drawn = {p.title: p.metrics for p in panels.panels(columns)}
    assert drawn["Reward"] == ("reward/mean", "rewards/acc/mean")
    assert drawn["Reward functions' own figures"] == ("rewards/log/hits", "rewards/log/mean")
    assert drawn["Tool errors"] == ("tools/error_frac",)


def test_a_panels_subtitle_is_the_registrys_meaning(monkeypatch):
    import dataclasses

    row = metrics.ROWS["clip/low"]
    assert "clip/low: A < 0 and ratio < 1 - epsilon" in " ".join(panels.subtitle(("clip/low",)))
    changed = dataclasses.replace(row, meaning="tokens below the lower bound (whatever)")
    monkeypatch.setitem(metrics.ROWS, "clip/low", changed)
    assert panels.subtitle(("clip/low",)) == ["clip/low: tokens below the lower bound"]


def test_every_row_a_panel_draws_has_its_chinese_meaning_and_no_other():
    drawn = {metrics.ROWS[n].names[0] for p in metrics.PANELS for n in p.names}
    zh = panels.translated_meanings("zh")
    assert drawn == set(zh), (drawn ^ set(zh))
    assert all(text.strip() for text in zh.values())
