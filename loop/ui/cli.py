"""Command line: parse arguments, call the engine, print, map outcomes to exit codes.

Exit codes: 0 done, 1 the loop stopped on a failure, 2 bad input (one line), 130 interrupted,
141 the reader of our output went away (`autoresearch tasks | head`), as for other tools.
Heavy modules (mlflow, torch, openai, git) are imported only by the commands that need them."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from loop.errors import UsageError

DEFAULT_CONFIG = Path("configs") / "default.yaml"
REPO_CONFIG = Path("autoresearch.yaml")       # what `autoresearch init` writes at a repo's root


def default_config() -> Path | None:
    """The config a bare command reads: ./autoresearch.yaml (written by init), else
    ./configs/default.yaml (this project's own repo), else none (the defaults)."""
    return next((p for p in (REPO_CONFIG, DEFAULT_CONFIG) if p.is_file()), None)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autoresearch",
                                description="Run the keep-or-revert research loop on a task.")
    sub = p.add_subparsers(dest="command", required=True)

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
    run.add_argument("--proposer", choices=["mutate", "tune", "llm", "hybrid"],
                     dest="proposer_kind",
                     help="who proposes changes: tune (Optuna's TPE, or CMA-ES with --sampler "
                          "cmaes, over the task's search_space; pip install "
                          "'autoresearch[tune]'), mutate (offline random search over the "
                          "task's search_space, the default), llm (needs --model) or hybrid "
                          "(the LLM's code changes every --llm-every'th iteration, the "
                          "tuner's constants between; needs --model)")
    run.add_argument("--sampler", choices=["tpe", "cmaes"], dest="proposer_sampler",
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
    run.add_argument("--seed", type=int,
                     help="base seed of the proposer and of each run's AUTORESEARCH_SEED "
                          "(default 0; the same seed gives the same proposals)")
    run.add_argument("--sandbox", choices=["off", "auto", "required"],
                     help="confine each experiment (bubblewrap); auto: where it works (default)")
    run.add_argument("--workers", type=int,
                     help="experiments at once, one slot each (default 1)")
    run.add_argument("--devices", type=lambda s: tuple(s.split(",")),
                     help="GPU ids for the slots, comma-separated (default: all visible)")
    run.add_argument("--backend", choices=["local", "ray", "slurm"],
                     help="where runs execute: this machine, a Ray cluster ($RAY_ADDRESS), or "
                          "Slurm jobs (the config's slurm: section)")
    run.add_argument("--concurrency", type=int, dest="proposer_concurrency",
                     help="proposals requested at once (parallel LLM calls)")
    run.add_argument("--llm-timeout", type=float, dest="proposer_timeout_s", metavar="S",
                     help="seconds the LLM may take to its first token (a local server "
                          "reads the prompt first; default 600); the answer is streamed")
    run.add_argument("--max-tokens", type=int, dest="proposer_max_tokens", metavar="N",
                     help="the longest LLM reply, in tokens (default 4096)")

    st = sub.add_parser("status", help="where a tag stands")
    st.add_argument("--tag", help="default: the most recent tag in this repo")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.add_argument("--repo", default=".", help="the research repo (default: here)")

    rp = sub.add_parser("report", help="a tag's iterations: markdown, HTML or a picture "
                                       "(always writes .autoresearch/<tag>/progress.png)")
    rp.add_argument("--tag", help="default: the most recent tag in this repo")
    rp.add_argument("--repo", default=".", help="the research repo (default: here)")
    rp.add_argument("--format", choices=["md", "html", "png"], default="md",
                    help="md: print a markdown table (default); html: write report.html and "
                         "print its path; png: print the picture's path")
    rp.add_argument("--no-mlflow", action="store_true",
                    help="do not attach progress.png to the tag's parent MLflow run")

    fz = sub.add_parser("finalize", help="the morning after: re-measure a night's gain, "
                                         "leave each kept change out to see which matter, "
                                         "and write branch autoresearch/<tag>-final")
    fz.add_argument("--tag", required=True, help="the night to finalize")
    fz.add_argument("--config", help=f"YAML run config (default: {REPO_CONFIG}, else "
                                     f"{DEFAULT_CONFIG}, if present)")
    fz.add_argument("--workers", type=int, help="runs at once, one slot each (default 1)")
    fz.add_argument("--backend", choices=["local", "ray", "slurm"], help="where runs execute")
    fz.add_argument("--max-runs", type=int, help="make at most this many runs in all")
    fz.add_argument("--max-wall", type=float, dest="max_wall_s",
                    help="start no new round of runs after this many seconds")

    sub.add_parser("tasks", help="list the built-in tasks")

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

    dr = sub.add_parser("doctor", help="what protects experiments on this machine (sandbox, "
                                       "network, PID, filesystem, git, secrets), GPU and "
                                       "torch, MLflow store, disk; exit 1 if a required "
                                       "one is missing")
    dr.add_argument("--config", help=f"YAML run config (default: {REPO_CONFIG}, else "
                                     f"{DEFAULT_CONFIG}, if present)")
    dr.add_argument("--repo", default=".", help="the research repo (default: here)")

    ck = sub.add_parser("check-task", help="validate a task folder and run its baseline once "
                                           "as `run` would: in a throwaway worktree of HEAD "
                                           "(a copy of the folder outside git)")
    ck.add_argument("path", help="the task folder (or its task.yaml)")
    ck.add_argument("--time-budget", type=float, dest="time_budget_s",
                    help="per-experiment budget in seconds (overrides the task's)")
    ck.add_argument("--config", help=f"YAML run config whose sandbox, limits and devices the "
                                     f"run gets (default: {REPO_CONFIG}, else "
                                     f"{DEFAULT_CONFIG}, if present)")
    ck.add_argument("--sandbox", choices=["off", "auto", "required"],
                    help="confine the run (bubblewrap); auto: where it works (default)")

    tk = sub.add_parser("task", help="make a task folder from a benchmark's task")
    tk_sub = tk.add_subparsers(dest="kind", required=True)
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
    _benchmark_parsers(tk_sub)
    return p


def _benchmark_parsers(tk_sub) -> None:
    """`task mlrbench`, `task mlbench`, `task agentbench` (loop/adapters/)."""
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
    agb = tk_sub.add_parser("agentbench", help="AgentBench OS-interaction items, played in "
                                               "Docker containers (Docker required)")
    agb.add_argument("data_file", help="data/os_interaction/data/<n>/<file>.json of a checkout")
    agb.add_argument("--out", required=True, help="the task folder to write")
    agb.add_argument("--scripts-dir", help="where the items' script files are (default: "
                                           "data/os_interaction/scripts/<n>/)")
    agb.add_argument("--limit", type=int, help="only the first N items")
    agb.add_argument("--round-limit", type=int, default=8, help="agent turns per episode")


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    _exit_quietly_on_sigint()
    return code


def _exit_quietly_on_sigint() -> None:
    """Ctrl-C while the interpreter shuts down (MLflow's exit handlers, threads) would end
    the process by the signal (-2) with a traceback; it means the same as any Ctrl-C."""
    import os
    import signal

    def handler(signum, frame):
        sys.stdout.flush()
        os._exit(130)
    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:
        pass      # not the main thread (tests calling main in a thread)


def _bad_seconds(args: argparse.Namespace) -> str | None:
    """A seconds flag that is not a finite number > 0 (`nan`, `inf` parse as floats)."""
    import math
    for name, flag in (("time_budget_s", "--time-budget"), ("max_wall_s", "--max-wall"),
                       ("proposer_timeout_s", "--llm-timeout")):
        value = getattr(args, name, None)
        if value is not None and not (math.isfinite(value) and value > 0):
            return f"{flag} must be a finite number of seconds > 0, got {value:g}"
    return None


def _main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    bad = _bad_seconds(args)
    if bad:
        print(f"autoresearch: error: {bad}", file=sys.stderr)
        return 2
    from loop.proposers.base import ProposerFatal
    from loop.repo.gitsafe import GitError
    try:
        code = COMMANDS[args.command](args)
        sys.stdout.flush()         # a closed pipe shows here, inside the handler below
        return code
    except BrokenPipeError:
        # The reader closed the pipe (`| head`): stop quietly. Point stdout at /dev/null so
        # the interpreter's final flush does not raise the same error again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (UsageError, ProposerFatal) as exc:
        print(f"autoresearch: error: {exc}", file=sys.stderr)
        return 2
    except GitError as exc:     # outside the loop (it stops on its own, journal intact)
        print(f"autoresearch: error: {exc.first_line()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("autoresearch: interrupted", file=sys.stderr)
        return 130


def cmd_run(args) -> int:
    from loop.setup.config import load_config
    path = args.config or default_config()
    config = load_config(path).with_overrides(
        task=args.task, tag=args.tag, iterations=args.iterations,
        time_budget_s=args.time_budget_s, max_wall_s=args.max_wall_s, seed=args.seed,
        proposer_kind=args.proposer_kind, proposer_model=args.proposer_model,
        proposer_sampler=args.proposer_sampler, proposer_llm_every=args.proposer_llm_every,
        proposer_base_url=args.proposer_base_url, judge_rule=args.judge_rule,
        sandbox=args.sandbox, workers=args.workers, devices=args.devices,
        backend=args.backend, proposer_concurrency=args.proposer_concurrency,
        proposer_timeout_s=args.proposer_timeout_s, proposer_max_tokens=args.proposer_max_tokens)
    from loop.engine.engine import Engine
    from loop.ui.progress import make_progress
    progress = make_progress()
    try:
        engine = Engine(config, out=progress.line, progress=progress)
        progress.line(f"autoresearch: tag {engine.tag}, branch {engine.workspace.branch}, "
                      f"task {engine.task_rel}, proposer {config.proposer.kind}")
        check = getattr(engine.proposer, "check_endpoint", None)
        if check:          # before the baseline's runs, not after them
            progress.line(check())
        stop = engine.run()
    finally:
        progress.close()
    print(stop.message, flush=True)
    from loop.ui.status import final_line, summary
    print(final_line(summary(engine.repo_root, engine.tag)), flush=True)
    return stop.exit_code


def _repo(path: str) -> Path:
    """The research repo holding `path` (its git top level), so a subfolder works too."""
    from loop.repo.workspace import git_toplevel
    return git_toplevel(Path(path)) or Path(path).resolve()


def cmd_status(args) -> int:
    from loop.ui.status import find_tag, format_summary, summary
    repo = _repo(args.repo)
    tag = args.tag or find_tag(repo)
    s = summary(repo, tag)
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        print("\n".join(format_summary(s)))
    return 0


def cmd_report(args) -> int:
    from loop.ui.report import build
    from loop.ui.status import find_tag, load_state
    repo = _repo(args.repo)
    tag = args.tag or find_tag(repo)
    path, _ = load_state(repo, tag)             # a clear error for an unknown tag
    text, notes = build(path.parent, tag, args.format, mlflow=not args.no_mlflow)
    for note in notes:
        print(note, file=sys.stderr)
    print(text)
    return 0


def cmd_finalize(args) -> int:
    from loop.finalize.morning import finalize
    from loop.setup.config import load_config
    config = load_config(args.config or default_config()).with_overrides(
        tag=args.tag, workers=args.workers, backend=args.backend)
    return finalize(config, out=lambda line: print(line, flush=True), max_runs=args.max_runs,
                    max_wall_s=args.max_wall_s)


def cmd_tasks(args) -> int:
    from loop.setup.task import find_tasks
    roots = [Path.cwd() / "experiments", Path(__file__).resolve().parents[2] / "experiments"]
    seen = set()
    print(f"{'task':<16} {'metric':<14} {'direction':<9} {'budget_s':>8}  path")
    for root in roots:
        if not root.is_dir() or root.resolve() in seen:
            continue
        seen.add(root.resolve())
        for t in find_tasks(root):
            print(f"{t.name:<16} {t.metric.name:<14} {t.metric.direction:<9} "
                  f"{t.time_budget_s:>8g}  {t.root}")
    return 0


def cmd_init(args) -> int:
    from loop.init.onboard import init
    inputs = None if args.inputs is None else \
        [p.strip() for flag in args.inputs for p in flag.split(",") if p.strip()]
    init(args.repo, metric=args.metric, direction=args.direction, script=args.script,
         time_budget_s=args.time_budget_s, force=args.force, metric_pattern=args.metric_pattern,
         script_args=args.script_args, inputs=inputs,
         out=lambda line: print(line, flush=True))
    return 0


def cmd_check_task(args) -> int:
    from loop.engine.resume import install_signals
    from loop.run import sandbox
    from loop.run.backends.devices import slot_envs
    from loop.run.check import check_task
    from loop.run.process import Limits
    from loop.setup.config import load_config
    config = load_config(args.config or default_config()).with_overrides(
        time_budget_s=args.time_budget_s, sandbox=args.sandbox)
    out = lambda line: print(line, flush=True)   # noqa: E731
    sandbox.startup(config.sandbox, out)        # as `run` starts: required without one: exit 2
    install_signals()                            # SIGTERM, SIGHUP: the worktree is removed too
    task, result = check_task(args.path, config.time_budget_s, out=out,
                              limits=Limits.from_config(config),
                              slot_env=slot_envs(config.workers, config.devices)[0])
    metric = "n/a" if result.metric is None else f"{result.metric:.6f}"
    print(f"{task.name}: status {result.status}; {task.metric.name} = {metric} "
          f"({task.metric.direction}); {result.wall_s:.1f}s"
          + (f"; {result.detail}" if result.detail else ""))
    if re.search(r"at the time box \(.*\bstep 0\)", result.detail):
        print(f"check-task: note: the last {task.metric.name} before the time box was step "
              f"0's, before any training: every run would be scored on its untrained model; "
              f"evaluate more often (the script's eval interval) or give a longer "
              f"--time-budget")
    if task.progress_pattern:
        from loop.run.early_stop import progress_line
        print(progress_line(result.curve))
    return 0 if result.status == "ok" else 1


def cmd_doctor(args) -> int:
    from loop.setup.config import load_config
    from loop.ui.doctor import report, run_checks
    path = args.config or default_config()
    config = load_config(path)
    task = config.resolve(config.task)
    checks = run_checks(config.sandbox, config.tracking.uri, _repo(args.repo),
                        task if (task / "task.yaml").is_file() else None)
    return report(checks, out=lambda line: print(line, flush=True))


def cmd_task(args) -> int:
    if args.kind == "mlrbench":
        from loop.adapters.mlrbench import make_task as make_mlr
        folder = make_mlr(Path(args.task_md), Path(args.out), judge_model=args.judge_model,
                          reviews=args.reviews, attempts=args.attempts,
                          judge_endpoint=args.judge_endpoint,
                          agent_endpoint=args.agent_endpoint, time_budget_s=args.time_budget_s)
    elif args.kind == "mlbench":
        from loop.adapters.mlbench import make_task as make_mlb
        folder = make_mlb(Path(args.rows), Path(args.repo), Path(args.out),
                          github_id=args.github_id, limit=args.limit,
                          exec_timeout_s=args.exec_timeout_s, activate=args.activate,
                          time_budget_s=args.time_budget_s)
    elif args.kind == "agentbench":
        from loop.adapters.agentbench import make_task as make_agb
        folder = make_agb(Path(args.data_file), Path(args.out),
                          scripts_dir=Path(args.scripts_dir) if args.scripts_dir else None,
                          limit=args.limit, round_limit=args.round_limit)
    elif args.kind == "mlebench":
        from loop.adapters.mlebench import make_task as make_mle
        folder = make_mle(args.competition, Path(args.out), data_dir=args.data_dir,
                          metric=args.metric, direction=args.direction,
                          time_budget_s=args.time_budget_s)
    else:
        from loop.adapters.mlagentbench import make_task as make_mlab
        folder = make_mlab(Path(args.benchmark), Path(args.out), direction=args.direction,
                           metric=args.metric, time_budget_s=args.time_budget_s,
                           timed_grader=args.timed_grader)
    print(f"wrote task folder {folder}; commit it, check it with `autoresearch check-task "
          f"{folder}` (it runs what is committed, as run does), then "
          f"`autoresearch run --task {folder}`")
    return 0


COMMANDS = {"run": cmd_run, "status": cmd_status, "report": cmd_report, "tasks": cmd_tasks,
            "check-task": cmd_check_task, "task": cmd_task, "doctor": cmd_doctor,
            "init": cmd_init, "finalize": cmd_finalize}

if __name__ == "__main__":
    raise SystemExit(main())
