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
from loop.ui.parser import DEFAULT_CONFIG, REPO_CONFIG, build_parser
from loop.words import Status


def default_config() -> Path | None:
    """The config a bare command reads: autoresearch.yaml (written by init at the repo's top)
    here or in a folder above, up to the git repo's top (so `autoresearch run` works from the
    task's sub-folder init ran in), else ./configs/default.yaml (this project's own repo),
    else none (the defaults)."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / REPO_CONFIG).is_file():
            return folder / REPO_CONFIG
        if (folder / ".git").exists():
            break
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    _exit_quietly_on_sigint()
    return code


def _exit_quietly_on_sigint() -> None:
    """Ctrl-C while the interpreter shuts down (MLflow's exit handlers, threads) would end
    the process by the signal (-2) with a traceback; it means the same as any Ctrl-C."""
    import os
    import signal

    def handler(_signum, _frame):
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
    config = load_config(path).with_overrides(vars(args))   # FLAG_KEYS: which flag sets what
    if path is None and not args.task and not config.resolve(config.task).is_dir():
        raise UsageError(f"no {REPO_CONFIG} here or in a folder above it up to the repo's top "
                         f"(nor {DEFAULT_CONFIG}): run `autoresearch init` first, or pass "
                         f"--config FILE or --task FOLDER")
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
                    max_wall_s=args.max_wall_s, scale=args.scale)


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
    from loop.advice.check_task import check_task
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
    return 0 if result.status == Status.OK else 1


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
    from loop.adapters import ADAPTERS
    folder = ADAPTERS.get(args.kind)(args)
    print(f"wrote task folder {folder}; commit it, check it with `autoresearch check-task "
          f"{folder}` (it runs what is committed, as run does), then "
          f"`autoresearch run --task {folder}`")
    return 0


COMMANDS = {"run": cmd_run, "status": cmd_status, "report": cmd_report, "tasks": cmd_tasks,
            "check-task": cmd_check_task, "task": cmd_task, "doctor": cmd_doctor,
            "init": cmd_init, "finalize": cmd_finalize}

if __name__ == "__main__":
    raise SystemExit(main())
