"""One run, defined once (loop/run/spec.py): a job's numbers, the environment of both steps
assembled in one place, and the spec every backend and check-task run."""
from loop.advice.check_task import check_task
from loop.run.spec import JOB_ENV, RunJob, grade_log, make_spec, run_envs
from loop.setup.task import load_task
from loop.words import RunKey

TASK = """\
name: t
editable: [train.py]
protected: [evaluate.py]
run: python train.py
evaluate: python evaluate.py
metric: {name: score, direction: maximize}
time_budget_s: 7
grace_s: 3
grade_timeout_s: 11
env: {MY_SETTING: "on"}
pass_env: [AGENT_TOKEN_NAME]
grader_env: [JUDGE_SETTING]
"""


def write_task(folder, text=TASK, train="print('score: 1')\n"):
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(text)
    (folder / "train.py").write_text(train)
    (folder / "evaluate.py").write_text("print('score: 2')\n")
    return load_task(folder)


def test_a_job_keeps_the_on_disk_numbers_of_its_key(tmp_path):
    """Seeds, job ids and log names use the same numbers as before the key had a type, so
    old journals and logs read the same."""
    cand = RunJob.make(3, RunKey.candidate(1), "c", "r", 42, tmp_path / "l", tmp_path)
    assert cand.seed == 42 + 3000 + 1 and cand.job_id.startswith("3-1-")
    pair = RunJob.make(7, RunKey.pair(2, beside=1), "c", "r", 0, tmp_path / "l", tmp_path)
    assert pair.seed == 7000 + 152 and pair.job_id.startswith("7-152-")
    assert pair.priority == RunKey.pair(2, beside=1).priority(7) < \
        RunJob.make(7, RunKey.candidate(1), "c", "r", 0, tmp_path, tmp_path).priority
    assert cand.job_id != RunJob.make(3, RunKey.candidate(1), "c", "r", 42, tmp_path,
                                      tmp_path).job_id   # unique: marks one run's processes


def test_both_steps_environments_are_assembled_in_one_place(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_TOKEN_NAME", "agent")
    monkeypatch.setenv("JUDGE_SETTING", "judge")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never")
    task = write_task(tmp_path / "t")
    job = RunJob.make(2, RunKey.best(0), "c", "run-9", 5, tmp_path / "l", tmp_path / "run")
    train, grader = run_envs(task, job, tmp_path / "run" / "artifacts",
                             {"CUDA_VISIBLE_DEVICES": "3", JOB_ENV: "a slot's mistake"})
    assert {k: v for k, v in train.items() if k.startswith("AUTORESEARCH_")} == {
        "AUTORESEARCH_SEED": str(5 + 2000 + 100), "AUTORESEARCH_TIME_BUDGET": "7",
        "AUTORESEARCH_ITERATION": "2", "AUTORESEARCH_RUN_ID": "run-9",
        "AUTORESEARCH_ARTIFACT_DIR": str(tmp_path / "run" / "artifacts"),
        JOB_ENV: job.job_id}
    assert train["CUDA_VISIBLE_DEVICES"] == "3"          # the slot's device
    assert train["MY_SETTING"] == "on" and train["AGENT_TOKEN_NAME"] == "agent"
    assert "OPENAI_API_KEY" not in train and "OPENAI_API_KEY" not in grader
    assert "JUDGE_SETTING" not in train and grader["JUDGE_SETTING"] == "judge"
    assert {k: v for k, v in grader.items() if k in train} == train   # and more, never less


def test_the_spec_holds_both_steps_and_their_time_limits(tmp_path):
    task = write_task(tmp_path / "t")
    job = RunJob.make(0, RunKey.candidate(0), "c", "r", 0, tmp_path / "logs" / "iter.log",
                      tmp_path / "run")
    spec = make_spec(job, task, tmp_path / "t", tmp_path / "grader")
    assert (spec.command, spec.folder, spec.timeout_s) == (task.train_command, tmp_path / "t", 10)
    assert spec.log_path == job.log_path and spec.artifacts == tmp_path / "run" / "artifacts"
    assert spec.grade is not None
    assert (spec.grade.command, spec.grade.folder, spec.grade.timeout_s) == \
        ("python evaluate.py", tmp_path / "grader", 11)
    assert spec.grade_log == grade_log(job.log_path) == tmp_path / "logs" / "iter.grade.log"
    ungraded = write_task(tmp_path / "u", TASK.replace("evaluate: python evaluate.py\n", "")
                          .replace("grader_env: [JUDGE_SETTING]\n", ""))
    assert make_spec(job, ungraded, tmp_path / "u", tmp_path / "grader").grade is None


def test_check_task_runs_a_job_as_a_backend_does(tmp_path):
    """check-task's run sees every variable a loop's run sees (it goes through the same
    `run_in_folder`), not a hand-made subset."""
    names = ["SEED", "TIME_BUDGET", "ITERATION", "RUN_ID", "ARTIFACT_DIR", "JOB_ID"]
    train = (f"import os, sys\nmissing = [n for n in {names!r} "
             f"if 'AUTORESEARCH_' + n not in os.environ]\n"
             f"sys.exit('missing: ' + ' '.join(missing)) if missing else print('score: 1')\n")
    text = TASK.replace("evaluate: python evaluate.py\n", "").replace(
        "grader_env: [JUDGE_SETTING]\n", "")
    write_task(tmp_path / "t", text, train)
    lines = []
    _, result = check_task(tmp_path / "t", out=lines.append)
    assert (result.status, result.metric) == ("ok", 1.0), "\n".join(lines)
