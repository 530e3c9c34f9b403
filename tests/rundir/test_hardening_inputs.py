"""Everything read from a runs folder is input: one bad JSON file is that run's problem line and
every page still lists the other runs; every path handed to the trainer, reward_params' included, goes
through the data-folder check; the key folder lives outside every runs and data folder; the TRL importer
keeps the limits the verl importer does."""

import json

import pytest

from grpo_lab.launching import form_checks, launch_queue, launch_records, launcher, process_control
from grpo_lab.launching.keys import KEY_DIR_ENV, KeyDirError, sign_entry
from grpo_lab.rundir import annotations, json_file, reader
from grpo_lab.rundir.layout import write_json_atomic
from queue_helpers import plant, refused, runs  # noqa: F401 (runs: a fixture; a runs folder, its key outside, no process)

DEEP = 100_000


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def good_run(runs, name, started):
    write_json_atomic(runs / name / "status.json", {"state": "finished", "pid": 0, "step": 2, "total_steps": 2,
                                                    "started_at": started})
    write_json_atomic(runs / name / "config.json", {"name": name, "algo": "grpo"})


# --- one JSON reader, with size and depth limits ---------------------------------------------------


@pytest.mark.parametrize("text, why", [
    (deep(DEEP), "nested deeper than 64 levels"),
    (deep(70), "nested deeper than 64 levels"),  # within the parser's reach: measured after parsing
    ('{"a": ' + "1" * 10 + "}" + " " * (json_file.MAX_BYTES + 1), "larger than 4 MiB"),
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "holds list, not a JSON object"),
])
def test_the_json_reader_refuses_with_one_line_naming_the_file(tmp_path, text, why):
    (tmp_path / "status.json").write_text(text)
    data, problem = json_file.read(tmp_path / "status.json")
    assert data is None and problem.startswith("status.json ") and why in problem and "\n" not in problem


def test_a_deep_status_and_config_are_that_runs_problem_lines(tmp_path):
    runs = tmp_path / "runs"
    good_run(runs, "good", 2.0)
    (runs / "bad").mkdir()
    (runs / "bad" / "status.json").write_text(deep(DEEP))
    (runs / "bad" / "config.json").write_text(deep(DEEP))
    listed = {r.name: r for r in reader.list_runs(runs)}
    assert set(listed) == {"good", "bad"} and listed["good"].status["state"] == "finished"
    assert listed["bad"].problems == ["status.json is nested deeper than 64 levels, so it is not read",
                                      "config.json is nested deeper than 64 levels, so it is not read"]


def test_the_runs_page_lists_the_others_beside_deep_status_config_and_annotations(tmp_path, monkeypatch):
    from app_helpers import open_page

    runs = tmp_path / "runs"
    good_run(runs, "good", 2.0)
    good_run(runs, "tagged", 3.0)
    (runs / "tagged" / "annotations.json").write_text(deep(30_000))  # under annotations' 64 KB, 30,000 deep
    (runs / "bad").mkdir()
    (runs / "bad" / "status.json").write_text(deep(DEEP))
    (runs / "bad" / "config.json").write_text(deep(DEEP))
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    for pick, line in (("bad", "status.json is nested deeper than 64 levels"),
                       ("tagged", "annotations.json is nested deeper than 64 levels")):
        at = open_page("runs", runs_pick=pick)
        assert set(at.dataframe[0].value["name"]) == {"good", "tagged", "bad"}
        assert any(line in str(w.value) for w in at.warning), [str(w.value) for w in at.warning]
    assert annotations.read(runs / "tagged").problems == [
        "annotations.json is nested deeper than 64 levels, so it is not read"]


# --- paths inside reward_params go through the data-runs check -----------------------------------


OUTSIDE = [
    ({"human_feedback": {"path": "/etc/ratings.csv"}}, {"human_feedback": 1.0},
     "reward_params.human_feedback.path: /etc/ratings.csv is outside the folders"),
    ({"reward_model": {"model": "/root/elsewhere"}}, {"reward_model": 1.0},
     "reward_params.reward_model.model: /root/elsewhere is outside the folders"),
    ({"code_tests": {"python": "/opt/evil/python"}}, {"code_tests": 1.0},
     "reward_params.code_tests.python: /opt/evil/python is outside the folders"),
]


@pytest.mark.parametrize("params, rewards, reason", OUTSIDE)
def test_the_form_refuses_a_reward_param_path_outside_the_data_folders(runs, params, rewards, reason):
    with pytest.raises(form_checks.LaunchError, match="^" + reason.replace(".", r"\.")):
        launcher.validate({"name": "r", "rewards": rewards, "reward_params": params}, runs)


def test_a_hub_id_for_the_reward_model_still_passes(runs):
    values = {"name": "r", "rewards": {"reward_model": 1.0}, "reward_params": {"reward_model": {"model": "org/rm"}}}
    assert form_checks.checked_config(values, runs).reward_params["reward_model"]["model"] == "org/rm"


@pytest.mark.parametrize("params, rewards, reason", OUTSIDE)
def test_a_resume_refuses_a_reward_param_path_planted_in_config_json(runs, params, rewards, reason):
    from grpo_lab.trainer.config import from_dict

    record = {**from_dict({"name": "planted", "runs_dir": str(runs)}).run_record(), "rewards": rewards,
              "reward_params": params}
    write_json_atomic(runs / "planted" / "config.json", record)
    write_json_atomic(runs / "planted" / "status.json", {"state": "stopped", "pid": 0, "step": 3})
    with pytest.raises(form_checks.LaunchError) as err:
        process_control.resume(runs, "planted")
    assert str(err.value).startswith("resume refused: config.json of planted: " + reason)


def test_a_sweep_config_file_with_a_reward_param_path_outside_is_refused(runs, tmp_path, capsys):
    from grpo_lab.launching import sweep

    config = tmp_path / "base.json"
    config.write_text(json.dumps({"rewards": {"human_feedback": 1.0},
                                  "reward_params": {"human_feedback": {"path": "/etc/ratings.csv"}}}))
    assert sweep.main(["--name", "s", "--seeds", "2", "--runs-dir", str(runs), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reward_params.human_feedback.path: /etc/ratings.csv is outside" in err
    assert [p.name for p in runs.iterdir()] == [launch_records.LAUNCH_DIR]


def test_a_queue_entry_cannot_carry_a_reward_param_path(runs):
    plant(runs, "planted", ["--name", "planted", "--reward-params", '{"human_feedback": {"path": "/etc/ratings.csv"}}'],
          sign=True)
    plant(runs, "garbled", ["--name", "garbled", "--reward-params", "human_feedback=/etc/ratings.csv"], sign=True)
    assert launch_queue.start_queued(runs) == []
    assert refused(runs)["planted"].startswith("reward_params.human_feedback.path: /etc/ratings.csv is outside")
    assert refused(runs)["garbled"].startswith("reward_params is not valid JSON")


# --- the key folder outside every runs and data folder ---------------------------------------------


@pytest.mark.parametrize("inside", ["runs", "data"])
def test_a_key_folder_inside_a_runs_or_data_folder_is_refused_at_start_in_one_line(tmp_path, monkeypatch, capsys, inside):
    from grpo_lab.launching import sweep
    from grpo_lab.dashboard import serve

    runs, data = tmp_path / "runs", tmp_path / "data"
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    monkeypatch.setenv("GRPO_LAB_DATA_DIRS", str(data))
    monkeypatch.setenv(KEY_DIR_ENV, str((runs if inside == "runs" else data) / "keys"))
    monkeypatch.setattr("os.execv", lambda *a: pytest.fail("the server was started"))
    kind = "the runs folder" if inside == "runs" else "a data folder"
    assert serve.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"GRPO_LAB_KEY_DIR: {tmp_path}/{inside}/keys lies inside {kind}" in err
    assert sweep.main(["--name", "s", "--runs-dir", str(runs)]) == 2
    assert f"lies inside {kind}" in capsys.readouterr().err
    with pytest.raises(KeyDirError):
        sign_entry(runs, {"name": "x"})
    assert not (runs / "keys").exists() and not (data / "keys").exists()  # no key was made there


# --- the TRL importer keeps the verl importer's limits for log_extra -------------------------------


@pytest.mark.parametrize("values, expected", [
    ([float("inf"), 0.0], "row 0: log_extra acc must be a finite number"),
    ([1e300, 0.0], "row 0: log_extra acc must be at most 1e+12 in size"),
    (["x" * 5_000_000, "b"], "row 0: log_extra acc has 5,000,000 characters"),
])
def test_trl_log_extra_values_are_held_to_the_verl_limits(tmp_path, capsys, values, expected):
    import importlib

    from run_sources import trl_folder  # noqa: PLC0415

    cli = importlib.import_module("grpo_lab.rundir.import")
    source = trl_folder(tmp_path / "src", acc=values)
    runs = tmp_path / "runs"
    assert cli.main([str(source), "--name", "x", "--runs-dir", str(runs), "--reward-weights", "correct=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err[:300]
    assert not runs.exists() or list(runs.iterdir()) == []


def test_trl_log_extra_within_the_limits_is_kept(tmp_path):
    import importlib

    from run_sources import trl_folder  # noqa: PLC0415
    from trainer_helpers import read_table

    cli = importlib.import_module("grpo_lab.rundir.import")
    source = trl_folder(tmp_path / "src", acc=[1.0, float("nan")], pred=["4", "5"])
    assert cli.main([str(source), "--name", "x", "--runs-dir", str(tmp_path / "runs"), "--reward-weights", "correct=1"]) == 0
    samples = read_table(tmp_path / "runs" / "x", "samples")
    assert samples["extra/acc"].tolist()[0] == 1.0 and samples["extra/pred"].tolist() == ["4", "5"]
