"""The uncommitted data a script names: the git-ignored files and folders of its task folder
that the script (its local modules, its settings file) names in string literals
(`os.path.join('data', dataset, 'train.bin')`). What `autoresearch init` proposes as
task.yaml's `inputs:` (loop/setup/inputs.py links them into every worktree at run time).
Reads the parsed sources and the list of ignored entries it is given; runs nothing."""
from __future__ import annotations

import ast

DATA_SUFFIXES = (".bin", ".npy", ".npz", ".pkl", ".pickle", ".txt", ".csv", ".tsv", ".parquet",
                 ".arrow", ".json", ".jsonl", ".h5", ".hdf5", ".tfrecord", ".idx", ".model")
# ignored folders a run writes or a tool keeps, never its input
NOT_INPUTS = {"out", "outs", "output", "outputs", "ckpt", "ckpts", "checkpoint", "checkpoints",
              "runs", "logs", "wandb", "mlruns", "lightning_logs", "results", ".autoresearch"}


def named_data(ignored, sources, skip=()) -> tuple[list[str], list[str]]:
    """(the entries to link, sorted; the top folders or files of them the sources name).
    `ignored`: git's ignored, untracked entries of the task folder (a folder ignored whole
    ends in `/`); an entry counts when the sources name its first part and it is a folder
    git ignores whole, or a file holding data by its suffix or by a name they name, grouped
    by its folder. `skip`: folders never listed (environments, caches), besides NOT_INPUTS."""
    named = {n.value.strip("/") for src in sources for n in ast.walk(src.tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.strip()}
    found: dict[str, None] = {}
    for entry in ignored:
        parts = entry.rstrip("/").split("/")
        if not entry or parts[0] not in named or set(parts) & (NOT_INPUTS | set(skip)):
            continue
        if entry.endswith("/"):                      # a folder git ignores whole
            found[entry.rstrip("/")] = None
        elif parts[-1] in named or parts[-1].endswith(DATA_SUFFIXES):
            found["/".join(parts[:-1]) or parts[0]] = None
    return sorted(found), sorted(named & {p.split("/")[0] for p in found})
