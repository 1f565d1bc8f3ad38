"""The git-ignored data a script names (loop/script/named_data.py): init's guess of task.yaml's
`inputs:`, read from the parsed script and the ignored entries git lists. End to end through
`autoresearch init` on nanoGPT's layout: tests/test_inputs.py."""
from __future__ import annotations

from loop.script.named_data import named_data
from loop.script.source import Script
from loop.setup.taskfiles import COPY_SKIP

TRAIN = """\
import os
data_dir = os.path.join('data', 'shakespeare_char')
train = os.path.join(data_dir, 'train.bin')
vocab = open(os.path.join('tokenizer', 'vocab'))
out_dir = 'out'
"""


def test_ignored_data_the_script_names_is_guessed_by_folder():
    ignored = ["data/shakespeare_char/train.bin", "data/shakespeare_char/val.bin",
               "tokenizer/vocab", "out/", "notes.md", "data/.cache/", "data/readme"]
    inputs, tops = named_data(ignored, [Script("train.py", TRAIN)], COPY_SKIP)
    # files by a data suffix or a name the script names, grouped by their folder; the
    # checkpoint folder the run writes, a file of no data and a tool's cache are never inputs
    assert inputs == ["data/shakespeare_char", "tokenizer"]
    assert tops == ["data", "tokenizer"]


def test_a_folder_git_ignores_whole_is_one_input_and_unnamed_data_is_none():
    inputs, tops = named_data(["data/", "cache/x.bin"], [Script("train.py", TRAIN)])
    assert (inputs, tops) == (["data"], ["data"])
    assert named_data(["elsewhere/x.bin"], [Script("train.py", TRAIN)]) == ([], [])
