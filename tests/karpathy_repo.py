"""A tiny CPU repo in karpathy/autoresearch's shape (tests/fixtures/karpathy_shape), copied
into a tmp git repo with its data prepared in a tmp cache (never ~/.cache)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import git

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "karpathy_shape"
FILES = ("program.md", "prepare.py", "train.py", "pyproject.toml", ".gitignore")

# The fixture as a task graded by the lm grader: training hands its model over, the protected
# prepare.evaluate_bpb scores it on the held-out shard.
LM_TASK = """\
name: tinyshape
description: a tiny language model; lower val_bpb is better
editable: [train.py]
protected: [prepare.py]
grader:
  kind: lm
  python: python
  script: train.py
  eval_function: prepare.evaluate_bpb
  eval_call: "evaluate_bpb(model, Tokenizer.from_directory(), 16)"
  input_shape: [16, 64]
held_out: [$AUTORESEARCH_CACHE/tinyshape/data/shard_val.txt]
read_only: [$AUTORESEARCH_CACHE/tinyshape/tokenizer]
metric: {name: val_bpb, direction: minimize}
time_budget_s: 3
grace_s: 60
throughput_pattern: num_steps
"""


def data_dir(cache: Path) -> Path:
    """Where the fixture's prepare.py keeps its shards for AUTORESEARCH_CACHE=cache."""
    return cache / "tinyshape" / "data"


def val_file(cache: Path) -> Path:
    """The held-out split: its own file, which the training run must never read."""
    return data_dir(cache) / "shard_val.txt"


def prepare_data(cache: Path) -> None:
    """Run the fixture's own `python prepare.py` against `cache` (fast: generated text)."""
    env = {**os.environ, "AUTORESEARCH_CACHE": str(cache)}
    subprocess.run([sys.executable, str(FIXTURE / "prepare.py")], cwd=FIXTURE, env=env,
                   check=True, capture_output=True, text=True)


def make_karpathy_repo(root: Path, cache: Path, extra: dict[str, str] | None = None) -> Path:
    """A git repo at `root` with the fixture's files (plus `extra`: relative path -> text,
    e.g. a task.yaml) in one commit, and its data prepared under `cache`. Tests that run it
    must pass AUTORESEARCH_CACHE=cache to the process (the engine passes that variable on)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copy(FIXTURE / name, root / name)
    for rel, text in (extra or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=Tester", "-c", "user.email=t@example.com",
        "commit", "-qm", "initial tinyshape repo")
    prepare_data(cache)
    return root


# -- a variant whose data cache is ~/.cache/<its own name> (issue 29 item 6) -------------------
ENGINE_CACHE = '''CACHE_DIR = os.path.join(os.environ.get("AUTORESEARCH_CACHE")
                         or os.path.join(os.path.expanduser("~"), ".cache", "autoresearch"),
                         "tinyshape")'''
TOKENIZER_LINE = 'TOKENIZER_DIR = os.path.join(CACHE_DIR, "tokenizer")'
SAVED_BYTES = '    torch.save(token_bytes, os.path.join(TOKENIZER_DIR, "token_bytes.pt"))\n'
LOADED_BYTES = ('    return torch.load(os.path.join(TOKENIZER_DIR, "token_bytes.pt"), '
                'map_location=device)\n')
BYTES_ON_FIRST_USE = '''    path = os.path.join(TOKENIZER_DIR, "token_bytes.pt")
    if not os.path.exists(path):        # built on first use, into the cache
        with open(path, "wb") as f:
            torch.save(torch.tensor([1] * 256 + [0] * len(SPECIAL_TOKENS), dtype=torch.int32), f)
    return torch.load(path, map_location=device)
'''


def home_cache_prepare(name: str, fills_on_first_use: bool = False) -> str:
    """The fixture's prepare.py keeping its data in ~/.cache/<name> (karpathy's own line,
    another name), its tokenizer at the cache's root beside data/ (no folder of its own);
    `fills_on_first_use`: token_bytes.pt is not made by `python prepare.py` but by the
    first evaluation, into the cache."""
    text = (FIXTURE / "prepare.py").read_text()
    for old in (ENGINE_CACHE, TOKENIZER_LINE, SAVED_BYTES, LOADED_BYTES):
        assert old in text, old                      # the fixture changed: change this too
    text = text.replace(ENGINE_CACHE, f'CACHE_DIR = os.path.join(os.path.expanduser("~"), '
                                      f'".cache", "{name}")')
    text = text.replace(TOKENIZER_LINE, "TOKENIZER_DIR = CACHE_DIR")
    if fills_on_first_use:
        text = text.replace(SAVED_BYTES, "").replace(LOADED_BYTES, BYTES_ON_FIRST_USE)
    return text


def make_home_cache_repo(root: Path, home: Path, fills_on_first_use: bool = False) -> Path:
    """The fixture as a repo named `root.name` whose prepare.py caches in
    `home`/.cache/<root.name>, committed, data not prepared (run `python prepare.py` with
    HOME=home)."""
    root.mkdir(parents=True)
    for name in FILES:
        shutil.copy(FIXTURE / name, root / name)
    (root / "prepare.py").write_text(home_cache_prepare(root.name, fills_on_first_use))
    home.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=Tester", "-c", "user.email=t@example.com",
        "commit", "-qm", f"initial {root.name} repo")
    return root
