"""The kinds a run config and the command line may name, each the one list of its names:
proposers (with what each needs), backends, tune's samplers, sandbox modes. The registries
build from these tables (loop/proposers/registry.py, loop/run/backends/__init__.py), config.py
refuses any other name in one line, and the parser offers exactly these. A table holds strings
only ("module:attribute" targets): it imports no implementation, so every layer above may read
it."""
from __future__ import annotations

from dataclasses import dataclass

from loop.registry import Registry


@dataclass(frozen=True)
class ProposerKind:
    target: str                 # its factory `(ProposerConfig, seed) -> Proposer`
    searches_settings: bool     # moves the task's settings: refused with nothing to search
    asks_an_llm: bool           # reads program.md and needs a model (`--model`)


PROPOSER_KINDS = {
    "mutate": ProposerKind("loop.proposers.mutate:make", True, False),
    "tune": ProposerKind("loop.proposers.tune:make", True, False),
    "llm": ProposerKind("loop.proposers.llm:make", False, True),
    # the LLM and the tuner, composed by `proposer.llm_every`
    "hybrid": ProposerKind("loop.proposers.registry:make_hybrid", True, True),
}
PROPOSERS = Registry("proposer", {name: k.target for name, k in PROPOSER_KINDS.items()})

BACKENDS = Registry("backend", {
    "local": "loop.run.backends.local:LocalBackend",     # this machine, a worktree per slot
    "ray": "loop.run.backends.ray:RayBackend",           # a Ray cluster
    "slurm": "loop.run.backends.slurm:SlurmBackend",     # each run a Slurm job
})

TUNE_SAMPLERS = ("tpe", "cmaes")            # Optuna's TPE, CMA-ES (loop/proposers/tune.py)
SANDBOX_MODES = ("off", "auto", "required")  # loop/run/sandbox.py
