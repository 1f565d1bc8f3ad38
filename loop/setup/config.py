"""Run configuration: YAML -> typed dataclasses, one clear error per bad key.

CLI flags override the file; see `Config.with_overrides`. Imports nothing heavy."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.errors import ConfigError
from loop.edits.formats import FORMATS
from loop.kinds import BACKENDS, PROPOSER_KINDS, SANDBOX_MODES, TUNE_SAMPLERS
from loop.setup.schema import build, load_yaml

EDIT_FORMATS = ("auto", *FORMATS.names())      # auto: json, unless the server refuses
JUDGE_RULES = ("strict", "noise", "paired", "sequential")


@dataclass
class ProposerConfig:
    kind: str = "mutate"
    sampler: str = "tpe"                 # tune, hybrid: tpe (Optuna's TPE) | cmaes (CMA-ES)
    llm_every: int = 4                   # hybrid: the LLM proposes iterations 1, k+1, 2k+1..,
                                         # the tuner the others (loop/proposers/hybrid.py)
    model: str | None = None
    base_url: str | None = None          # default: $OPENAI_BASE_URL, then the OpenAI API
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key (never the key itself)
    temperature: float = 0.7
    max_tokens: int = 4096
    # Waits sized for a local server on 2 CPU cores (a 4k-token prompt read in ~130 s, then
    # ~9 tokens/s); see docs/proposers.md. The answer is streamed: these bound silences.
    timeout_s: float = 600.0             # the first token (reading the prompt shows none)
    stall_s: float = 120.0               # then the longest silence between tokens
    proposal_timeout_s: float = 1800.0   # one proposal, all its requests and retries
    max_retries: int = 6                 # transient errors (connection, timeout, 429, 5xx)
    patience_s: float = 1800.0           # then wait this long for the endpoint, then stop
    repair_turns: int = 2                # edit errors sent back to the model per iteration
    edit_format: str = "auto"            # auto (json where the endpoint accepts a schema,
                                         # else search_replace) | search_replace |
                                         # whole_file | json (docs/proposers.md)
    journal_chars: int = 6000            # bound on the research journal in the prompt
    price_input_per_m: float = 0.0       # USD per million prompt tokens
    price_output_per_m: float = 0.0      # USD per million completion tokens
    price_cached_input_per_m: float | None = None
    log_prompts: bool = True             # store prompt + reply as MLflow artifacts
    tracing: bool = False                # MLflow OpenAI autolog tracing
    concurrency: int = 1                 # proposals requested at once (parallel LLM calls)
    ahead: int | None = None             # proposals kept ready beyond the free slots
                                         # (default: 0 with one worker, else `workers`)


@dataclass
class JudgeConfig:
    """How a candidate is judged (the protocol is in loop/judge/judge.py's docstring).

    Repeated runs of one code state differ only by their seed: the engine passes each run
    its seed in the environment variable AUTORESEARCH_SEED, and a task that honours it
    (seeds torch/numpy/random from it) makes the noise measurable."""
    rule: str = "sequential"             # sequential: as few runs per idea as the decision
                                         # needs, drift-proof pairs for the promising ones |
                                         # noise (alias paired): every would-be keep confirmed
                                         # in pairs | strict: karpathy's "any gain", one run
    min_delta: float = 0.0               # a kept gain must exceed this (metric units, both rules)
    baseline_runs: int = 3               # noise: R, runs of every best state: the baseline, and
                                         # a candidate is only kept once it has R runs
    confirm_runs: int = 4                # noise: extra runs of a candidate, at most; the first
                                         # R - 1 double as the new best's re-measurement
    confidence: float = 0.99             # noise, sequential: one-sided confidence that a kept
                                         # gain is real
    plausible_p: float = 0.3             # noise: p below this but not significant -> re-run
    simplicity_weight: float = 0.01      # noise: extra margin per net added line, in noise sd;
                                         # a net deletion is kept when the metric is within noise
    paired: bool = True                  # noise: confirm a candidate only against runs of the
                                         # best made next to its own (drift-proof; 2x runs)
    remeasure_every: int = 0             # noise: re-run the best every N proposals (0: only
                                         # after a keep, until it has baseline_runs samples)
    screen_p: float = 0.15               # sequential: a candidate goes on (another pair) only
                                         # while its p-value is below this; else it stops
    fast_keep_p: float = 0.002           # sequential: keep on the first run alone when its
                                         # p-value is below this and the best's runs do not
                                         # drift (0: never)
    keep_runs: int = 1                   # sequential: runs a new best needs before the next
                                         # idea (the baseline has baseline_runs)
    refresh_every: int = 16              # sequential: run the best again after this many
                                         # proposals without a run of it, so a drift shows
                                         # (0: never)


@dataclass
class TrackingConfig:
    uri: str | None = None               # default: $MLFLOW_TRACKING_URI, else MLflow's default
    experiment: str | None = None        # default: autoresearch/<task name>


@dataclass
class SlurmConfig:
    """`--backend slurm`: each run is a job with these resources (docs/parallel.md)."""
    partition: str | None = None         # --partition (default: the cluster's default)
    gpus_per_run: int = 0                # --gpus-per-node
    cpus_per_run: int | None = None      # --cpus-per-task (and the run's thread count)
    mem_gb: float | None = None          # --mem
    account: str | None = None           # --account
    qos: str | None = None               # --qos
    extra: tuple[str, ...] = ()          # more sbatch options, e.g. "--constraint=a100"
    pending_limit_s: float | None = None  # a job queued longer is cancelled, its run a
                                          # crash saying so (default: waits)


# A command-line flag (its argparse dest) -> the config key it sets, `section.key` when nested.
FLAG_KEYS = {
    "task": "task", "tag": "tag", "iterations": "iterations", "seed": "seed",
    "time_budget_s": "time_budget_s", "max_wall_s": "max_wall_s", "sandbox": "sandbox",
    "workers": "workers", "devices": "devices", "backend": "backend",
    "proposer_kind": "proposer.kind", "proposer_model": "proposer.model",
    "proposer_sampler": "proposer.sampler", "proposer_llm_every": "proposer.llm_every",
    "proposer_base_url": "proposer.base_url", "proposer_concurrency": "proposer.concurrency",
    "proposer_timeout_s": "proposer.timeout_s", "proposer_max_tokens": "proposer.max_tokens",
    "judge_rule": "judge.rule",
}


@dataclass
class Config:
    task: str = "experiments/tinylm"
    tag: str | None = None
    iterations: int = 20                 # proposals after the baseline (total for the tag)
    time_budget_s: float | None = None   # per-experiment budget; overrides the task's
    max_wall_s: float | None = None      # whole-loop wall clock; stop after it
    max_consecutive_failures: int = 5
    max_cost_usd: float | None = None
    seed: int = 0
    workers: int = 1                     # run slots: experiments at once
    devices: tuple[str, ...] | None = None  # GPU ids, one per slot (default: all visible)
    backend: str = "local"               # local | ray (a Ray cluster; pip install '.[ray]') |
                                         # slurm (Slurm jobs; pip install '.[slurm]')
    program: str = "program.md"          # steering file, re-read every iteration
    sandbox: str = "auto"                # off | auto: bwrap where it works, else a warning |
                                         # required: refuse to start without it (README)
    memory_limit_gb: float | None = None  # per run (cgroup) and process (RLIMIT_DATA); None: none
    log_cap_mb: float = 5.0              # kept log per run (head + tail); metrics read in full
    max_processes: int = 16384           # per run, threads too (a cgroup's pids.max: sandbox.md)
    proposer: ProposerConfig = field(default_factory=ProposerConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    # relative paths resolve here (the config's folder's repo); set by code, not a YAML key
    base_dir: Path = field(default=Path("."), metadata={"internal": True})

    def resolve(self, rel: str) -> Path:
        p = Path(rel).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def with_overrides(self, flags: Mapping[str, Any] | None = None, **named: Any) -> Config:
        """Apply command-line flags, each to the key FLAG_KEYS names for it (None = not
        given). `flags`: the parsed arguments (`vars(args)`), whose other entries (the
        command, --config) are no config key and are left alone; `named`: flags by name."""
        unknown = sorted(set(named) - set(FLAG_KEYS))
        if unknown:
            raise TypeError(f"with_overrides: no command-line flag {', '.join(unknown)}")
        given = {**(flags or {}), **named}
        cfg = dataclasses.replace(self, proposer=dataclasses.replace(self.proposer),
                                  judge=dataclasses.replace(self.judge),
                                  tracking=dataclasses.replace(self.tracking))
        for flag, key in FLAG_KEYS.items():
            if given.get(flag) is None:
                continue
            *sections, name = key.split(".")
            target = cfg
            for section in sections:
                target = getattr(target, section)
            setattr(target, name, given[flag])
        validate(cfg, "command line")
        return cfg


def validate(cfg: Config, where: str) -> None:
    """Raise ConfigError, naming `where` and the key, at the first bad value (in this
    order); normalise `devices` ("0,1" -> ("0", "1"))."""
    _check_kinds(cfg, where)
    _check_judge(cfg, where)
    _check_limits(cfg, where)
    _check_proposer(cfg, where)
    _check_machine(cfg, where)
    if cfg.devices is not None:
        cfg.devices = tuple(d.strip() for item in cfg.devices for d in str(item).split(",")
                            if d.strip())
    if cfg.tag is not None and not _valid_tag(cfg.tag):
        raise ConfigError(f"{where}: tag '{cfg.tag}' must be letters, digits, '.', '_' or '-'")


def _check_kinds(cfg: Config, where: str) -> None:
    """The named choices: proposer.kind, proposer.sampler, judge.rule."""
    if cfg.proposer.kind not in PROPOSER_KINDS:
        raise ConfigError(f"{where}: proposer.kind must be one of {', '.join(PROPOSER_KINDS)}, "
                          f"got '{cfg.proposer.kind}'")
    if cfg.proposer.sampler not in TUNE_SAMPLERS:
        raise ConfigError(f"{where}: proposer.sampler must be one of {', '.join(TUNE_SAMPLERS)}, "
                          f"got '{cfg.proposer.sampler}'")
    if cfg.judge.rule not in JUDGE_RULES:
        raise ConfigError(f"{where}: judge.rule must be one of {', '.join(JUDGE_RULES)}, "
                          f"got '{cfg.judge.rule}'")


def _check_judge(cfg: Config, where: str) -> None:
    """The judge's numbers."""
    j = cfg.judge
    if j.baseline_runs < 1 or j.confirm_runs < 0 or j.remeasure_every < 0:
        raise ConfigError(f"{where}: judge.baseline_runs must be >= 1, judge.confirm_runs and "
                          f"judge.remeasure_every >= 0")
    if not (0.5 < j.confidence < 1 and 0 < j.plausible_p < 1):
        raise ConfigError(f"{where}: judge.confidence must be in (0.5, 1), "
                          f"judge.plausible_p in (0, 1)")
    if not (0 < j.screen_p < 1 and 0 <= j.fast_keep_p < 1):
        raise ConfigError(f"{where}: judge.screen_p must be in (0, 1), "
                          f"judge.fast_keep_p in [0, 1)")
    if j.keep_runs < 1 or j.refresh_every < 0:
        raise ConfigError(f"{where}: judge.keep_runs must be >= 1, judge.refresh_every >= 0")
    if j.simplicity_weight < 0 or j.min_delta < 0:
        raise ConfigError(f"{where}: judge.simplicity_weight and judge.min_delta must be >= 0")


def _check_limits(cfg: Config, where: str) -> None:
    """Counts, budgets and waits: finite, and in range."""
    if cfg.iterations < 0:
        raise ConfigError(f"{where}: iterations must be >= 0")
    for name in ("time_budget_s", "max_wall_s", "max_cost_usd", "memory_limit_gb"):
        value = getattr(cfg, name)          # a flag's `nan` or `inf` is a float too
        if value is not None and not math.isfinite(value):
            raise ConfigError(f"{where}: {name} must be a finite number, got {value}")
    if cfg.time_budget_s is not None and cfg.time_budget_s <= 0:
        raise ConfigError(f"{where}: time_budget_s must be > 0")
    if cfg.proposer.patience_s < 0:
        raise ConfigError(f"{where}: proposer.patience_s must be >= 0 (seconds)")
    for name in ("timeout_s", "stall_s", "proposal_timeout_s"):
        value = getattr(cfg.proposer, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ConfigError(f"{where}: proposer.{name} must be a finite number of "
                              f"seconds > 0, got {value}")
    if cfg.proposer.max_tokens < 1:
        raise ConfigError(f"{where}: proposer.max_tokens must be >= 1")
    if cfg.max_consecutive_failures < 1:
        raise ConfigError(f"{where}: max_consecutive_failures must be >= 1")


def _check_proposer(cfg: Config, where: str) -> None:
    """The LLM proposer's format and model."""
    if cfg.proposer.edit_format not in EDIT_FORMATS:
        raise ConfigError(f"{where}: proposer.edit_format must be one of "
                          f"{', '.join(EDIT_FORMATS)}, got '{cfg.proposer.edit_format}'")
    if cfg.proposer.llm_every < 0:
        raise ConfigError(f"{where}: proposer.llm_every must be >= 0")
    if cfg.proposer.kind in ("llm", "hybrid") and not cfg.proposer.model:
        raise ConfigError(f"{where}: proposer.kind is {cfg.proposer.kind} but no "
                          f"proposer.model is set "
                          f"(use --model M or proposer.model in the config)")


def _check_machine(cfg: Config, where: str) -> None:
    """Where and how runs execute: sandbox, memory, slots, backend, Slurm."""
    if cfg.sandbox not in SANDBOX_MODES:
        raise ConfigError(f"{where}: sandbox must be one of {', '.join(SANDBOX_MODES)}, "
                          f"got '{cfg.sandbox}'")
    if cfg.memory_limit_gb is not None and cfg.memory_limit_gb <= 0 or cfg.log_cap_mb <= 0:
        raise ConfigError(f"{where}: memory_limit_gb and log_cap_mb must be > 0")
    if not isinstance(cfg.max_processes, int) or isinstance(cfg.max_processes, bool) \
            or cfg.max_processes < 8:
        raise ConfigError(f"{where}: max_processes must be a whole number >= 8, got "
                          f"{cfg.max_processes!r}")
    if cfg.workers < 1 or cfg.proposer.concurrency < 1 or (cfg.proposer.ahead or 0) < 0:
        raise ConfigError(f"{where}: workers and proposer.concurrency must be >= 1, "
                          f"proposer.ahead >= 0")
    if cfg.backend not in BACKENDS.names():
        raise ConfigError(f"{where}: backend must be one of {', '.join(BACKENDS.names())}, "
                          f"got '{cfg.backend}'")
    sl = cfg.slurm
    if sl.gpus_per_run < 0 or (sl.cpus_per_run is not None and sl.cpus_per_run < 1) \
            or (sl.mem_gb is not None and sl.mem_gb <= 0) \
            or (sl.pending_limit_s is not None and sl.pending_limit_s <= 0):
        raise ConfigError(f"{where}: slurm.gpus_per_run must be >= 0, slurm.cpus_per_run "
                          f">= 1, slurm.mem_gb and slurm.pending_limit_s > 0")


def _valid_tag(tag: str) -> bool:
    import re
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", tag)) and ".." not in tag \
        and not tag.endswith((".lock", "."))


def load_config(path: str | Path | None, base_dir: Path | None = None) -> Config:
    """Load a YAML config; `None` gives the defaults. Relative paths in it resolve against
    `base_dir` (default: the git repo holding the config, else the config's folder)."""
    if path is None:
        cfg = Config(base_dir=(base_dir or Path.cwd()).resolve())
        validate(cfg, "defaults")
        return cfg
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    data = load_yaml(path, ConfigError) or {}
    if isinstance(data, dict) and "base_dir" in data:
        raise ConfigError(f"{path}: unknown key 'base_dir'")
    if isinstance(data, dict) and isinstance(data.get("sandbox"), bool):
        data["sandbox"] = "auto" if data["sandbox"] else "off"   # `true` / `false`
    cfg = build(Config, data, str(path), ConfigError)
    cfg.base_dir = (base_dir or _repo_root(path.resolve().parent)).resolve()
    validate(cfg, str(path))
    return cfg


def _repo_root(folder: Path) -> Path:
    for p in (folder, *folder.parents):
        if (p / ".git").exists():
            return p
    return folder
