"""The command line's grammar: each subcommand, its flags and their help text.

Builds the argparse parser and does nothing else: no command runs here, nothing heavy is
imported (`autoresearch --help` stays fast). loop/ui/cli.py runs what this parses."""
from __future__ import annotations

import argparse
from pathlib import Path

from loop.kinds import BACKENDS, PROPOSERS, SANDBOX_MODES, TUNE_SAMPLERS

DEFAULT_CONFIG = Path("configs") / "default.yaml"
REPO_CONFIG = Path("autoresearch.yaml")       # what `autoresearch init` writes at a repo's root


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autoresearch",
                                description="Run the keep-or-revert research loop on a task.")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_run, _status, _report, _finalize, _tasks, _init, _doctor, _check_task, _task):
        add(sub)
    return p


def _run(sub) -> None:
    """`run`: the loop; its flags override the config (setup/config.py FLAG_KEYS)."""
    run = sub.add_parser("run", help="run (or resume) the loop for a tag")
    run.add_argument("--config", help=f"YAML run config (default: {REPO_CONFIG}, else "
                                      f"{DEFAULT_CONFIG}, if present)")
    run.add_argument("--task", help="task folder (overrides the config)")
    run.add_argument("--tag", help="run tag; an existing tag resumes (default: today, e.g. nov29)")
    run.add_argument("--iterations", type=int, help="proposals after the baseline, in total")
    run.add_argument("--time-budget", type=float, dest="time_budget_s",
                     help="per-experiment budget in seconds (overrides the task's)")
    run.add_argument("--max-wall", type=float, dest="max_wall_s",
                     help="stop starting new iterations after this many seconds")
    _run_proposer(run)
    run.add_argument("--seed", type=int,
                     help="base seed of the proposer and of each run's AUTORESEARCH_SEED "
                          "(default 0; the same seed gives the same proposals)")
    run.add_argument("--sandbox", choices=list(SANDBOX_MODES),
                     help="confine each experiment (bubblewrap); auto: where it works (default)")
    run.add_argument("--workers", type=int,
                     help="experiments at once, one slot each (default 1)")
    run.add_argument("--devices", type=lambda s: tuple(s.split(",")),
                     help="GPU ids for the slots, comma-separated (default: all visible)")
    run.add_argument("--backend", choices=BACKENDS.names(),
                     help="where runs execute: this machine, a Ray cluster ($RAY_ADDRESS), or "
                          "Slurm jobs (the config's slurm: section)")
    _run_llm(run)


def _run_proposer(run) -> None:
    """`run`: who proposes, and how a change is judged."""
    run.add_argument("--proposer", choices=PROPOSERS.names(),
                     dest="proposer_kind",
                     help="who proposes changes: tune (Optuna's TPE, or CMA-ES with --sampler "
                          "cmaes, over the task's search_space; pip install "
                          "'autoresearch[tune]'), mutate (offline random search over the "
                          "task's search_space, the default), llm (needs --model) or hybrid "
                          "(the LLM's code changes every --llm-every'th iteration, the "
                          "tuner's constants between; needs --model)")
    run.add_argument("--sampler", choices=list(TUNE_SAMPLERS), dest="proposer_sampler",
                     help="the tune proposer's sampler: tpe (the default) or cmaes")
    run.add_argument("--llm-every", type=int, dest="proposer_llm_every", metavar="K",
                     help="hybrid: the LLM proposes iterations 1, K+1, 2K+1, ..., the tuner "
                          "the others (default 4)")
    run.add_argument("--model", dest="proposer_model", help="LLM model name")
    run.add_argument("--base-url", dest="proposer_base_url", help="OpenAI-compatible endpoint")
    run.add_argument("--judge", choices=["sequential", "paired", "noise", "strict"],
                     dest="judge_rule",
                     help="keep rule: sequential (the default: a gain must beat the measured "
                          "run-to-run noise, each idea stopped as soon as that is decided), "
                          "paired or noise (every would-be keep confirmed next to runs of the "
                          "best) or strict (any gain, one run each)")


def _run_llm(run) -> None:
    """`run`: the LLM's requests."""
    run.add_argument("--concurrency", type=int, dest="proposer_concurrency",
                     help="proposals requested at once (parallel LLM calls)")
    run.add_argument("--llm-timeout", type=float, dest="proposer_timeout_s", metavar="S",
                     help="seconds the LLM may take to its first token (a local server "
                          "reads the prompt first; default 600); the answer is streamed")
    run.add_argument("--max-tokens", type=int, dest="proposer_max_tokens", metavar="N",
                     help="the longest LLM reply, in tokens (default 4096)")


def _status(sub) -> None:
    """`status`."""
    st = sub.add_parser("status", help="where a tag stands")
    st.add_argument("--tag", help="default: the most recent tag in this repo")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.add_argument("--repo", default=".", help="the research repo (default: here)")


def _report(sub) -> None:
    """`report`."""
    rp = sub.add_parser("report", help="a tag's iterations: markdown, HTML or a picture "
                                       "(always writes .autoresearch/<tag>/progress.png)")
    rp.add_argument("--tag", help="default: the most recent tag in this repo")
    rp.add_argument("--repo", default=".", help="the research repo (default: here)")
    rp.add_argument("--format", choices=["md", "html", "png"], default="md",
                    help="md: print a markdown table (default); html: write report.html and "
                         "print its path; png: print the picture's path")
    rp.add_argument("--no-mlflow", action="store_true",
                    help="do not attach progress.png to the tag's parent MLflow run")


def _finalize(sub) -> None:
    """`finalize`."""
    fz = sub.add_parser("finalize", help="the morning after: re-measure a night's gain, "
                                         "leave each kept change out to see which matter, "
                                         "and write branch autoresearch/<tag>-final")
    fz.add_argument("--tag", required=True, help="the night to finalize")
    fz.add_argument("--config", help=f"YAML run config (default: {REPO_CONFIG}, else "
                                     f"{DEFAULT_CONFIG}, if present)")
    fz.add_argument("--workers", type=int, help="runs at once, one slot each (default 1)")
    fz.add_argument("--backend", choices=BACKENDS.names(), help="where runs execute")
    fz.add_argument("--max-runs", type=int, help="make at most this many runs in all")
    fz.add_argument("--max-wall", type=float, dest="max_wall_s",
                    help="start no new round of runs after this many seconds")
    fz.add_argument("--scale", type=float, metavar="K",
                    help="then measure the branch against the start at K times the night's "
                         "time box (with task.yaml's scale.settings, if any) and say whether "
                         "the gain held, shrank or reversed")


def _tasks(sub) -> None:
    sub.add_parser("tasks", help="list the built-in tasks")


def _init(sub) -> None:
    """`init`."""
    it = sub.add_parser("init", help="read a repo (karpathy/autoresearch shape, or a script "
                                     "printing `name: value` lines) and write its task.yaml "
                                     f"and {REPO_CONFIG}")
    it.add_argument("repo", nargs="?", default=".", help="the repo (default: here)")
    it.add_argument("--metric", help="the printed value to optimize (default: the evaluation's "
                                     "result, else a loss/bpb/accuracy-like name)")
    it.add_argument("--metric-pattern", help="a regex with one group: the number of --metric "
                                             "NAME in the run's output, for a line that is not "
                                             "`name: value` (e.g. 'val loss ([0-9.]+)')")
    it.add_argument("--direction", choices=["minimize", "maximize"],
                    help="whether lower or higher is better (default: read from the metric's name)")
    it.add_argument("--script", help="the editable script (default: train.py, main.py, run.py, "
                                     "or the only one printing values)")
    it.add_argument("--args", dest="script_args",
                    help="the script's arguments, as the run passes them (e.g. "
                         "'config/train_shakespeare_char.py': a .py file of the repo given "
                         "there is read as the settings it overrides, and made editable)")
    it.add_argument("--inputs", action="append", metavar="PATH",
                    help="an uncommitted (ignored) file or folder the run reads, linked "
                         "read-only into every worktree; repeatable or comma-separated "
                         "(default: the ignored data the script names, a guess)")
    it.add_argument("--time-budget", type=float, dest="time_budget_s",
                    help="seconds per run, for a script with no budget of its own")
    it.add_argument("--force", action="store_true", help="overwrite an existing task.yaml "
                                                         f"and {REPO_CONFIG}")


def _doctor(sub) -> None:
    """`doctor`."""
    dr = sub.add_parser("doctor", help="what protects experiments on this machine (sandbox, "
                                       "network, PID, filesystem, git, secrets), GPU and "
                                       "torch, MLflow store, disk; exit 1 if a required "
                                       "one is missing")
    dr.add_argument("--config", help=f"YAML run config (default: {REPO_CONFIG}, else "
                                     f"{DEFAULT_CONFIG}, if present)")
    dr.add_argument("--repo", default=".", help="the research repo (default: here)")


def _check_task(sub) -> None:
    """`check-task`."""
    ck = sub.add_parser("check-task", help="validate a task folder and run its baseline once "
                                           "as `run` would: in a throwaway worktree of HEAD "
                                           "(a copy of the folder outside git)")
    ck.add_argument("path", help="the task folder (or its task.yaml)")
    ck.add_argument("--time-budget", type=float, dest="time_budget_s",
                    help="per-experiment budget in seconds (overrides the task's)")
    ck.add_argument("--config", help=f"YAML run config whose sandbox, limits and devices the "
                                     f"run gets (default: {REPO_CONFIG}, else "
                                     f"{DEFAULT_CONFIG}, if present)")
    ck.add_argument("--sandbox", choices=list(SANDBOX_MODES),
                    help="confine the run (bubblewrap); auto: where it works (default)")


def _task(sub) -> None:
    """`task <kind>`: one subcommand per adapter (loop/adapters/__init__.py ADAPTERS)."""
    tk = sub.add_parser("task", help="make a task folder from a benchmark's task")
    tk_sub = tk.add_subparsers(dest="kind", required=True)
    for add in (_mlebench, _mlagentbench, _mlrbench, _mlbench, _agentbench):
        add(tk_sub)


def _mlebench(tk_sub) -> None:
    """`task mlebench`."""
    mle = tk_sub.add_parser("mlebench", help="an MLE-bench competition (after `mlebench prepare`)")
    mle.add_argument("competition", help="competition id, or its folder holding config.yaml")
    mle.add_argument("--data-dir", help="MLE-bench data dir holding <id>/prepared/{public,private}"
                                        " (default: mlebench's, ~/.cache/mle-bench/data)")
    mle.add_argument("--metric", help="grade with this built-in metric instead of the "
                                      "competition's grader (accuracy, auc, logloss, rmse, "
                                      "mse, mae); needed when it has none")
    mle.add_argument("--direction", choices=["minimize", "maximize"],
                     help="the metric's direction (default: read from the leaderboard or the "
                          "metric; needed when neither tells)")
    mle.add_argument("--out", required=True, help="the task folder to write")
    mle.add_argument("--time-budget", type=float, default=300.0, dest="time_budget_s",
                     help="the task's time_budget_s, seconds per experiment (default 300)")


def _mlagentbench(tk_sub) -> None:
    """`task mlagentbench`."""
    mlab = tk_sub.add_parser("mlagentbench", help="an MLAgentBench task (env/ + scripts/)")
    mlab.add_argument("benchmark", help="the task's folder, e.g. MLAgentBench/benchmarks/cifar10")
    mlab.add_argument("--direction", choices=["minimize", "maximize"], required=True,
                      help="of its eval.py's get_score (accuracy: maximize, MAE: minimize)")
    mlab.add_argument("--metric", default="score", help="the metric's name (default: score)")
    mlab.add_argument("--out", required=True, help="the task folder to write")
    mlab.add_argument("--time-budget", type=float, default=300.0, dest="time_budget_s",
                     help="the task's time_budget_s, seconds per experiment (default 300)")
    mlab.add_argument("--timed-grader", action="store_true",
                      help="vectorization: grade by timing the edited forward and checking "
                           "its output, not by the time train.py reports")


def _mlrbench(tk_sub) -> None:
    """`task mlrbench`."""
    mlr = tk_sub.add_parser("mlrbench", help="an MLR-Bench task (tasks/<id>.md of a checkout), "
                                             "judged by a model with its writeup rubric")
    mlr.add_argument("task_md", help="tasks/<id>.md in a checkout of chchenhui/mlrbench")
    mlr.add_argument("--out", required=True, help="the task folder to write")
    mlr.add_argument("--judge-model", default="gpt-4o", help="the reviewer model (judge.yaml)")
    mlr.add_argument("--reviews", type=int, default=1,
                     help="independent reviews per run, averaged (default 1)")
    mlr.add_argument("--attempts", type=int, default=3,
                     help="tries per review when the reply is not the JSON asked for")
    mlr.add_argument("--judge-endpoint", help="host:port (or URL) of the judge, opened to the "
                                              "sandboxed grader only (grader_network)")
    mlr.add_argument("--agent-endpoint", help="host:port (or URL) of the agent's model, "
                                              "opened to both steps (network)")
    mlr.add_argument("--time-budget", type=float, default=1800.0, dest="time_budget_s",
                     help="the task's time_budget_s, seconds per experiment (default 1800)")


def _mlbench(tk_sub) -> None:
    """`task mlbench`."""
    mlb = tk_sub.add_parser("mlbench", help="ML-Bench instances of one repository, graded by "
                                            "its pass rule")
    mlb.add_argument("rows", help="ML-Bench instances saved as JSON lines (docs/benchmarks.md)")
    mlb.add_argument("--repo", required=True, help="a checkout of the target repository")
    mlb.add_argument("--out", required=True, help="the task folder to write")
    mlb.add_argument("--github-id", type=int, help="pick instances by github_id (default: "
                                                   "those whose github URL names the checkout)")
    mlb.add_argument("--limit", type=int, help="only the first N instances")
    mlb.add_argument("--exec-timeout", type=float, default=10.0, dest="exec_timeout_s",
                     help="seconds an answer runs; still running then is a pass (ML-Bench: 10)")
    mlb.add_argument("--activate", default="", help="shell line run before each answer, "
                                                    "e.g. 'source activate dgl_DS'")
    mlb.add_argument("--time-budget", type=float, default=600.0, dest="time_budget_s",
                     help="the task's time_budget_s, seconds per experiment (default 600)")


def _agentbench(tk_sub) -> None:
    """`task agentbench`."""
    agb = tk_sub.add_parser("agentbench", help="AgentBench OS-interaction items, played in "
                                               "Docker containers (Docker required)")
    agb.add_argument("data_file", help="data/os_interaction/data/<n>/<file>.json of a checkout")
    agb.add_argument("--out", required=True, help="the task folder to write")
    agb.add_argument("--scripts-dir", help="where the items' script files are (default: "
                                           "data/os_interaction/scripts/<n>/)")
    agb.add_argument("--limit", type=int, help="only the first N items")
    agb.add_argument("--round-limit", type=int, default=8, help="agent turns per episode")
