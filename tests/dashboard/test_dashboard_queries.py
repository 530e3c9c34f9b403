"""DuckDB queries behind Groups and Compare: groups told apart, filters, search, tokens.

Every test runs on a schema-2 run (the `group` column written) and on a schema-1 run (no such
column: rundir.query derives it from row order), which must read the same."""

import pytest

from grpo_lab.dashboard.reading import queries
from grpo_lab.rundir.layout import RunPaths, part_name
from grpo_lab.rundir.writer import TableWriter


def sample_rows(step, groups, v2):
    """groups: [(prompt_id, [rewards]), ...] -> samples columns, advantages centred per group."""
    cols = {k: [] for k in ("step", "group", "prompt_id", "sample_idx", "prompt", "completion", "reward", "advantage")}
    for g, (pid, rewards) in enumerate(groups):
        mean = sum(rewards) / len(rewards)
        for i, r in enumerate(rewards):
            cols["step"].append(step)
            cols["group"].append(g)
            cols["prompt_id"].append(pid)
            cols["sample_idx"].append(i)
            cols["prompt"].append(pid + "=")
            cols["completion"].append(f"{pid} answer {i} {'100%' if r else 'no'}")
            cols["reward"].append(r)
            cols["advantage"].append(r - mean)
    return cols if v2 else {k: v for k, v in cols.items() if k != "group"}


@pytest.fixture(params=[2, 1], ids=["schema2", "schema1"])
def run(tmp_path, monkeypatch, request):
    v2 = request.param == 2
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    paths = RunPaths(tmp_path / "syn")
    samples = TableWriter(paths.table("samples"), 1000)
    # Step 1: prompt 1+1 drawn twice (two groups), 2+2 once with no spread.
    samples.append(sample_rows(1, [("1+1", [1.0, 0.0]), ("2+2", [1.0, 1.0]), ("1+1", [0.0, 0.0])], v2))
    samples.flush()
    samples.append(sample_rows(2, [("2+2", [3.0, 0.0]), ("1+1", [0.0, 1.0])], v2))
    samples.flush()
    tokens = TableWriter(paths.table("tokens"), 1000)
    rows = {k: [] for k in ("step", "group", "prompt_id", "sample_idx", "position", "token", "ratio", "kl", "advantage")}
    for g, pid in enumerate(["1+1", "2+2"]):  # token detail: the first two groups of step 1, two tokens each
        for i in range(2):
            for pos in range(2):
                for k, v in zip(rows, (1, g, pid, i, pos, f"t{g}{i}{pos}", 1.0, 0.0, 0.0)):
                    rows[k].append(v)
    tokens.append(rows if v2 else {k: v for k, v in rows.items() if k != "group"})
    tokens.flush()
    return "syn"


def test_a_prompt_drawn_twice_in_a_step_gives_two_groups(run):
    rows, problems = queries.step_samples(run, 1)
    assert not problems
    groups = rows.drop_duplicates("group")[["group", "prompt_id"]].values.tolist()
    assert groups == [[0, "1+1"], [1, "2+2"], [2, "1+1"]]
    assert rows.groupby("group")["reward"].apply(list).tolist() == [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    assert queries.sample_steps(run)[0] == [1, 2]


def test_filters_no_signal_most_positive_most_negative_and_prompt_history(run):
    flat, _ = queries.group_summaries(run, "no_signal")
    assert flat[["step", "group", "prompt_id"]].values.tolist() == [[1, 1, "2+2"], [1, 2, "1+1"]]
    top, _ = queries.group_summaries(run, "positive")
    assert top.iloc[0][["step", "prompt_id", "a_max"]].tolist() == [2, "2+2", 1.5]
    bottom, _ = queries.group_summaries(run, "negative")
    assert bottom.iloc[0][["step", "prompt_id", "a_min"]].tolist() == [2, "2+2", -1.5]
    history, _ = queries.group_summaries(run, "prompt", "1+1")
    assert history[["step", "group"]].values.tolist() == [[1, 0], [1, 2], [2, 1]]


def test_search_is_literal_and_case_insensitive(run):
    assert len(queries.search_completions(run, "100%")[0]) == 5  # the five rewards that are not 0
    assert queries.search_completions(run, "a%r")[0].empty  # '%' is a character here, not a wildcard
    assert queries.search_completions(run, "a_s")[0].empty
    assert len(queries.search_completions(run, "ANSWER 1")[0]) == 5
    assert queries.search_completions(run, "'; DROP TABLE x; --")[0].empty


def test_tokens_of_a_group(run):
    first, _ = queries.group_tokens(run, 1, 0)
    second, _ = queries.group_tokens(run, 1, 1)
    assert first["token"].tolist() == ["t000", "t001", "t010", "t011"]
    assert second["token"].tolist() == ["t100", "t101", "t110", "t111"]
    assert queries.group_tokens(run, 1, 2)[0].empty and queries.group_tokens(run, 2, 0)[0].empty


def test_a_corrupt_part_is_skipped_and_reported(run, tmp_path):
    folder = RunPaths(tmp_path / run).table("samples")
    (folder / part_name(3, 3)).write_bytes(b"PAR1 garbage")
    steps, problems = queries.sample_steps(run)
    assert steps == [1, 2] and any("could not be read" in p for p in problems)
