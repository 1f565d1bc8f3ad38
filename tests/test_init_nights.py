"""benchmarks/init_nights.py: init, then the commands it prints, then short mutate and tune
nights on the corpus's repos; checked on a tiny repo of our own (a bare mirror made here, no
network): what it reads of init's output and of an attempt's diff, and a whole run."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import init_nights  # noqa: E402
from init_nights import changed_settings, next_commands  # noqa: E402

TRAIN = '''\
import argparse
import random

LEARNING_RATE = 0.01
WIDTH = 32
parser = argparse.ArgumentParser()
parser.add_argument("--depth", type=int, default=2)
args = parser.parse_args()
random.seed(0)
loss = abs(LEARNING_RATE - 0.02) * 10 + 1.0 / WIDTH + 0.01 * args.depth + random.random() / 1e3
print(f"val_loss: {loss:.5f}")
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def test_the_commands_init_prints_are_read_without_their_notes():
    output = ("init: /x\n  script:     train.py\nwrote task.yaml, autoresearch.yaml; next:\n"
              "  git add task.yaml autoresearch.yaml && git commit -m 'autoresearch task'\n"
              "  autoresearch check-task .\n"
              "  autoresearch run --proposer llm --model MODEL   (nothing to search offline: "
              "the LLM edits train.py)\n\nsomething after\n")
    assert next_commands(output) == [
        "git add task.yaml autoresearch.yaml && git commit -m 'autoresearch task'",
        "autoresearch check-task .", "autoresearch run --proposer llm --model MODEL"]
    assert next_commands("init: refused\n") == []


def test_a_changed_setting_is_found_in_the_diff_and_a_flag_nothing_reads_is_named(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "train.py").write_text(TRAIN)
    (repo / "autoresearch.flags.yaml").write_text("depth: 2\ntrainer.ghost: 3\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    (repo / "train.py").write_text(TRAIN.replace("LEARNING_RATE = 0.01", "LEARNING_RATE = 0.03"))
    (repo / "autoresearch.flags.yaml").write_text("depth: 3\ntrainer.ghost: 4\n")
    _git(repo, "commit", "-qam", "attempt")
    space = {"LEARNING_RATE": {}, "WIDTH": {}, "depth": {}, "trainer.ghost": {}}
    settings, unread = changed_settings(repo, "HEAD", space, {"autoresearch.flags.yaml"})
    assert settings == ["LEARNING_RATE", "depth", "trainer.ghost"]
    assert unread == ["trainer.ghost"]          # no .py file of the repo names it


@pytest.mark.slow
def test_a_whole_run_on_a_mirror_of_our_own(tmp_path, monkeypatch, capsys):
    work = tmp_path / "src"
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    _git(work, "init", "-q")
    _git(work, "add", ".")
    _git(work, "commit", "-qm", "first")
    commit = _git(work, "rev-parse", "HEAD")
    mirror = tmp_path / "mirror"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirror / "me+tiny" / "repo")],
                   check=True)
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({"repos": [
        {"id": "tiny", "repo": "me/tiny", "commit": commit, "night": {"shape": "constants"}},
        {"id": "far", "repo": "me/far", "commit": commit,
         "night": {"shape": "hydra", "skip": "needs the network"}},
        {"id": "no-night", "repo": "me/tiny", "commit": commit}]}))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert init_nights.main(["--mirror", str(mirror), "--manifest", str(manifest),
                             "--iterations", "1", "--time-budget", "20"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("tiny "))
    assert " ok " in row and row.count("1 it, ") == 2, out    # both nights, one iteration
    assert "far  " in out and "skip: needs the network" in out
    assert "no-night" not in out                               # no night block: not run
    assert "2/2; proposals ok 2/2" in out
    assert not list(home.glob("init-nights-*"))               # the clones are gone
