"""The command line's plumbing (loop/ui/cli.py, loop/ui/parser.py): every flag of `run`
reaches the config key it names, through one table (setup/config.py FLAG_KEYS), and every
`task <kind>` is an adapter of the registry (loop/adapters ADAPTERS), and the help is
quick: it imports none of the heavy libraries."""
import subprocess
import sys

import pytest

from loop.adapters import ADAPTERS
from loop.errors import UsageError
from loop.setup.config import FLAG_KEYS, load_config
from loop.ui.cli import build_parser

RUN = ("run --task t --tag night1 --iterations 3 --time-budget 2 --max-wall 9 "
       "--proposer hybrid --sampler cmaes --llm-every 2 --model m --base-url http://u "
       "--judge strict --seed 5 --sandbox off --workers 2 --devices 0,1 --backend ray "
       "--concurrency 3 --llm-timeout 7 --max-tokens 9")


def subparsers(parser):
    return next(a for a in parser._actions if a.dest in ("command", "kind")).choices


def test_every_run_flag_but_config_has_a_config_key():
    run = subparsers(build_parser())["run"]
    dests = {a.dest for a in run._actions if a.dest not in ("help", "config")}
    assert dests == set(FLAG_KEYS)


def test_run_flags_set_the_keys_they_name_nested_ones_included():
    args = build_parser().parse_args(RUN.split())
    cfg = load_config(None).with_overrides(vars(args))
    assert (cfg.task, cfg.tag, cfg.iterations, cfg.time_budget_s, cfg.max_wall_s, cfg.seed) == \
        ("t", "night1", 3, 2.0, 9.0, 5)
    assert (cfg.sandbox, cfg.workers, cfg.devices, cfg.backend) == ("off", 2, ("0", "1"), "ray")
    p = cfg.proposer
    assert (p.kind, p.sampler, p.llm_every, p.model, p.base_url, p.concurrency, p.timeout_s,
            p.max_tokens) == ("hybrid", "cmaes", 2, "m", "http://u", 3, 7.0, 9)
    assert cfg.judge.rule == "strict"


def test_a_flag_not_given_leaves_the_config_as_it_is(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("iterations: 7\nproposer: {max_tokens: 123}\n")
    cfg = load_config(path).with_overrides(vars(build_parser().parse_args(["run"])))
    assert (cfg.iterations, cfg.proposer.max_tokens) == (7, 123)


def test_a_named_override_that_is_no_flag_is_refused():
    with pytest.raises(TypeError, match="no command-line flag proposer_kindd"):
        load_config(None).with_overrides(proposer_kindd="llm")


def test_every_task_kind_is_a_registered_adapter_with_its_reader():
    kinds = subparsers(subparsers(build_parser())["task"])
    assert list(kinds) == ADAPTERS.names()
    for kind in kinds:
        assert callable(ADAPTERS.get(kind))
    with pytest.raises(UsageError, match="unknown adapter 'nope': one of mlebench"):
        ADAPTERS.get("nope")


HEAVY = ("mlflow", "torch", "openai", "git", "optuna", "ray", "submitit")


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["finalize", "--help"]])
def test_help_imports_no_heavy_library(argv):
    """docs/design.md: mlflow, torch, openai and git are imported lazily."""
    code = ("import sys\nfrom loop.ui.cli import main\nsys.argv = ['autoresearch', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         check=True).stdout
    assert out.splitlines()[-1] == "[]", out[-500:]
