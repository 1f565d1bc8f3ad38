"""The LLM proposer inside the real loop: the real `openai` client talks HTTP to a local
OpenAI-compatible server; edits in each format are applied, run, judged and logged."""
import csv
import os
from pathlib import Path

from conftest import git, run_cli
from loop.setup.config import JudgeConfig
from loop.engine.engine import Engine
from llm_task import SEARCH_REPLACE, UNIFIED_DIFF, WHOLE_FILE, llm_config
from openai_server import Reply


def rows(repo):
    with open(repo / ".autoresearch" / "llm" / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_each_edit_format_runs_end_to_end(toy_repo, mlflow_uri, openai_server):
    openai_server.script(SEARCH_REPLACE, UNIFIED_DIFF, WHOLE_FILE)
    stop = Engine(llm_config(toy_repo, openai_server, iterations=3), out=lambda s: None).run()
    assert stop.reason == "iterations", stop.message
    table = rows(toy_repo)
    assert [r["status"] for r in table] == ["keep", "keep", "keep", "discard"]
    assert [float(r["score"]) for r in table] == [8.0, 4.0, 0.0, 0.0]
    assert table[1]["description"] == "move X to 1.0, the minimum of the quadratic term"
    subjects = git(toy_repo, "log", "--format=%s", "main..autoresearch/llm").splitlines()
    assert subjects == ["raise Y to 4 so the second term vanishes",
                        "move X to 1.0, the minimum of the quadratic term"]
    # the prompt carried program.md and, by the third request, the research journal
    user = [m["content"] for m in openai_server.requests[2]["messages"] if m["role"] == "user"]
    assert "Minimize the score. Prefer small changes." in user[0]
    assert "move X to 1.0" in user[0] and "raise Y to 4" in user[0]
    # tokens and cost per iteration in MLflow, prompt and reply as artifacts
    from mlflow.tracking import MlflowClient
    client = MlflowClient(mlflow_uri)
    run = client.get_run(table[1]["mlflow_run_id"])
    assert run.data.metrics["llm.prompt_tokens"] == 100
    assert run.data.metrics["llm.completion_tokens"] == 20
    assert abs(run.data.metrics["llm.cost_usd"] - (100 * 2 + 20 * 10) / 1e6) < 1e-12
    assert run.data.tags["description"] == table[1]["description"]
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"prompt.md", "response.md", "diff.txt"} <= names


def test_program_md_is_reread_every_iteration(toy_repo, mlflow_uri, openai_server):
    openai_server.script(SEARCH_REPLACE, UNIFIED_DIFF)
    Engine(llm_config(toy_repo, openai_server, iterations=1), out=lambda s: None).run()
    (toy_repo / "program.md").write_text("NEW STEERING: only touch Y from now on.\n")
    Engine(llm_config(toy_repo, openai_server, iterations=2), out=lambda s: None).run()
    first, second = (r["messages"][-1]["content"] for r in openai_server.requests)
    assert "NEW STEERING" not in first and "NEW STEERING" in second
    params = [r["program_sha"] for r in _runs(mlflow_uri)]
    assert len(set(params[1:])) == 2


def _runs(uri):
    from mlflow.tracking import MlflowClient
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("autoresearch/toy")
    runs = [r for r in client.search_runs([exp.experiment_id], max_results=100)
            if "mlflow.parentRunId" in r.data.tags]
    return [r.data.params for r in sorted(runs, key=lambda r: int(r.data.tags["iteration"]))]


def test_unrepairable_edit_is_bad_edit_and_not_run(toy_repo, mlflow_uri, openai_server):
    wrong = SEARCH_REPLACE.replace("X = 3.0\n=", "Z = 42\n=")
    openai_server.script(wrong, wrong, wrong)            # the reply and two repair turns
    Engine(llm_config(toy_repo, openai_server, iterations=1), out=lambda s: None).run()
    table = rows(toy_repo)
    assert table[1]["status"] == "bad_edit" and table[1]["wall_s"] == "0.0"
    assert len(openai_server.requests) == 3
    assert "Z = 42" in openai_server.requests[1]["messages"][-1]["content"]


def test_cost_budget_stops_the_loop(toy_repo, mlflow_uri, openai_server):
    openai_server.script(Reply(SEARCH_REPLACE, prompt_tokens=600_000), UNIFIED_DIFF)
    stop = Engine(llm_config(toy_repo, openai_server, iterations=5, max_cost_usd=1.0),
                  out=lambda s: None).run()
    assert stop.reason == "cost" and len(rows(toy_repo)) == 2


def test_cli_with_openai_base_url_and_a_401(toy_repo, mlflow_uri, openai_server):
    env = {**os.environ, "OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-test"}
    openai_server.models = ["m"]            # `run` checks the model is served before starting
    openai_server.script(SEARCH_REPLACE)
    res = run_cli("run", "--task", "task", "--tag", "cli", "--iterations", "1", "--judge",
                  "strict", "--proposer", "llm", "--model", "m", cwd=toy_repo, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert openai_server.headers[0]["authorization"] == "Bearer sk-test"
    assert "move X to 1.0" in git(toy_repo, "log", "-1", "--format=%B", "autoresearch/cli")
    openai_server.script(Reply(status=401, error={"message": "Incorrect API key provided"}))
    res = run_cli("run", "--task", "task", "--tag", "cli", "--iterations", "3", "--judge",
                  "strict", "--proposer", "llm", "--model", "m", cwd=toy_repo, env=env)
    assert res.returncode == 1
    assert "401" in res.stdout and len(openai_server.requests) == 2   # no retry on 401


def test_prompt_states_the_measured_noise(toy_repo, mlflow_uri, openai_server):
    from conftest import git
    (toy_repo / "task" / "train.py").write_text(
        (toy_repo / "task" / "train.py").read_text().replace("NOISE = 0.0", "NOISE = 0.5"))
    git(toy_repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qam", "noisy")
    openai_server.script(SEARCH_REPLACE)
    cfg = llm_config(toy_repo, openai_server, iterations=1)
    cfg.judge = JudgeConfig(rule="noise", baseline_runs=3)
    Engine(cfg, out=lambda s: None).run()
    user = openai_server.requests[0]["messages"][-1]["content"]
    assert "Run-to-run noise (different seeds, same code): sd 0." in user


def test_reasoning_model_thinking_is_an_mlflow_artifact_and_never_applied(
        toy_repo, mlflow_uri, openai_server):
    draft = SEARCH_REPLACE.replace("X = 1.0\n>>>", "X = 99.0\n>>>")   # would be a wrong edit
    openai_server.script(Reply(f"<think>\nFirst idea:\n{draft}\nNo, the minimum is 1.0.\n"
                               f"</think>\n{SEARCH_REPLACE}", shape="ollama"))
    Engine(llm_config(toy_repo, openai_server, iterations=1), out=lambda s: None).run()
    table = rows(toy_repo)
    assert table[1]["status"] == "keep" and float(table[1]["score"]) == 4.0
    from mlflow.tracking import MlflowClient
    client = MlflowClient(mlflow_uri)
    run_id = table[1]["mlflow_run_id"]
    names = {a.path for a in client.list_artifacts(run_id)}
    assert {"prompt.md", "response.md", "reasoning.md"} <= names
    reasoning = (Path(client.download_artifacts(run_id, "reasoning.md"))).read_text()
    assert "X = 99.0" in reasoning and "No, the minimum is 1.0." in reasoning
    assert client.get_run(run_id).data.metrics["llm.reasoning_tokens"] > 0


def test_a_change_already_tried_is_refused_before_staging_and_the_model_told(
        toy_repo, mlflow_uri, openai_server):
    worse = SEARCH_REPLACE.replace("X = 1.0\n>", "X = 5.0\n>").replace("to 1.0", "to 5.0")
    again = worse.replace("X = 5.0\n>", "X  =  5.0\n>")    # the same change, other spacing
    openai_server.script(worse, again, UNIFIED_DIFF.replace("X = 1.0", "X = 3.0"))
    stop = Engine(llm_config(toy_repo, openai_server, iterations=2), out=lambda s: None).run()
    assert stop.reason == "iterations", stop.message
    table = rows(toy_repo)
    assert [r["status"] for r in table] == ["keep", "discard", "keep"]
    assert table[2]["description"] == "raise Y to 4 so the second term vanishes"
    told = openai_server.user_messages(2)[-1]              # the repair turn of iteration 2
    assert "repeats iteration 1's change" in told and "move X to 5.0" in told
    # the repeat was never staged: iteration 2's attempt is the Y change, nothing was dropped
    diff = git(toy_repo, "diff", "main", "refs/autoresearch/llm/attempt-2")
    assert "+Y = 4" in diff and "X  =  5.0" not in diff
    journal = (toy_repo / ".autoresearch" / "llm" / "journal.jsonl").read_text()
    assert '"drop"' not in journal
    # the journal in the prompt lists the tried change; requests asked for the json format
    assert "move X to 5.0" in openai_server.user_messages(1)[0]
    assert all("response_format" in r for r in openai_server.requests)
