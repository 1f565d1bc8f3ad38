"""init's guess of a task's `inputs:` (loop/setup/inputs.py links them at run time): the
ignored files and folders of the task folder the script names. Reads git's list of ignored
files and the parsed scripts; runs nothing of the repo's."""
from __future__ import annotations

import ast

from loop.init.plan import Guess
from loop.repo.queries import ignored_untracked
from loop.setup.taskfiles import COPY_SKIP

DATA_SUFFIXES = (".bin", ".npy", ".npz", ".pkl", ".pickle", ".txt", ".csv", ".tsv", ".parquet",
                 ".arrow", ".json", ".jsonl", ".h5", ".hdf5", ".tfrecord", ".idx", ".model")
# ignored folders a run writes or a tool keeps, never its input
NOT_INPUTS = {"out", "outs", "output", "outputs", "ckpt", "ckpts", "checkpoint", "checkpoints",
              "runs", "logs", "wandb", "mlruns", "lightning_logs", "results", ".autoresearch"}


def guess_inputs(plan, sources, given: list[str] | None) -> None:
    """plan.inputs: `--inputs` as given, else the ignored files and folders of the task
    folder that the script (its local modules, its settings file) names in string literals
    (`os.path.join('data', dataset, 'train.bin')`): a folder whose first part it names,
    holding data by its suffix or by a name it names; grouped by their folder."""
    flag = "--inputs PATH"
    if given is not None:
        plan.inputs = list(dict.fromkeys(given))
        plan.guesses["inputs"] = Guess("--inputs", True, flag)
        return
    named = {n.value.strip("/") for src in sources for n in ast.walk(src.tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.strip()}
    found: dict[str, None] = {}
    for entry in ignored_untracked(plan.root):
        parts = entry.rstrip("/").split("/")
        if not entry or parts[0] not in named or set(parts) & (NOT_INPUTS | set(COPY_SKIP)):
            continue
        if entry.endswith("/"):                      # a folder git ignores whole
            found[entry.rstrip("/")] = None
        elif parts[-1] in named or parts[-1].endswith(DATA_SUFFIXES):
            found["/".join(parts[:-1]) or parts[0]] = None
    plan.inputs = sorted(found)
    if plan.inputs:
        tops = sorted(named & {p.split("/")[0] for p in found})
        plan.guesses["inputs"] = Guess(f"ignored data {plan.script} names ({', '.join(tops)})",
                                       False, flag)
