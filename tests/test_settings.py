"""Settings, one interface (loop/script/settings.py): module-level assignments, YAML and JSON
keys found and rewritten in place, in a form the file's own reader takes as a number; the
flags file turned into a command line (loop/setup/flags.py); a script's flags read from its
code (loop/init/command_line.py)."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
import yaml

from loop.script import command_line
from loop.script import settings
from loop.setup import flags
from loop.script.source import Script

CONFIG_YAML = """\
# a training config
seed: 0
optim:
  lr: 0.001        # the peak rate
  betas: [0.9, 0.95]
  sched:
    warmup: 100
model:
  width: 32
name: "run-1"
dropout: .1
"""

CONFIG_JSON = '{"lr": 1e-3, "model": {"n_layer": 4, "dims": [1, 2], "tag": "a:b", "d": -0.5},' \
              ' "bs": 32}'


def test_yaml_keys_are_settings_named_by_their_path():
    found = {s.name: s.text for s in settings.find("cfg.yaml", CONFIG_YAML)}
    assert found == {"seed": "0", "optim.lr": "0.001", "optim.sched.warmup": "100",
                     "model.width": "32", "dropout": ".1"}     # lists and strings are not


def test_json_keys_are_settings_named_by_their_path():
    found = {s.name: s.text for s in settings.find("cfg.json", CONFIG_JSON)}
    assert found == {"lr": "1e-3", "model.n_layer": "4", "model.d": "-0.5", "bs": "32"}


def test_python_settings_of_any_case_and_powers():
    text = "LR = 3e-3  # x\nlearning_rate: float = 6e-4\nB = 2**19\ndef f():\n    x = 3\n"
    assert {s.name: s.text for s in settings.find("t.py", text)} == \
        {"LR": "3e-3", "learning_rate": "6e-4", "B": "2**19"}


@pytest.mark.parametrize("new", ["2e-4", "1.5e5", "3", "0.25", "7e+2"])
def test_a_value_written_into_yaml_reads_back_as_that_number(new):
    out = settings.write(CONFIG_YAML, "cfg.yaml", "optim.lr", new)
    assert out is not None and "# the peak rate" in out        # the comment stays
    data = yaml.safe_load(out)                                 # PyYAML: YAML 1.1 floats
    assert isinstance(data["optim"]["lr"], (int, float)) and data["optim"]["lr"] == float(new)
    assert data["optim"]["sched"]["warmup"] == 100 and data["model"]["width"] == 32


@pytest.mark.parametrize("new", [".25", "1.", "+3", "2e-4"])
def test_a_value_written_into_json_stays_valid_json(new):
    out = settings.write(CONFIG_JSON, "cfg.json", "model.d", new)
    assert out is not None
    assert json.loads(out)["model"]["d"] == float(new)


def test_write_refuses_a_value_that_is_not_what_was_read():
    assert settings.write(CONFIG_YAML, "cfg.yaml", "optim.lr", "0.5", old="0.002") is None
    assert settings.write(CONFIG_YAML, "cfg.yaml", "nope", "0.5") is None


def test_flags_file_to_command_line_through_a_real_shell():
    text = "lr: 0.001\nbatch-size: 64\nname: a b\namp: true\nno-cuda: false\n" \
           "seed: $AUTORESEARCH_SEED\n"
    suffix = flags.argv(flags.read(text, "f.yaml"))
    printed = subprocess.run(
        ["/bin/sh", "-c", f"{shlex.quote(sys.executable)} -c 'import sys; "
                          f"print(sys.argv[1:])'" + suffix],
        env={"AUTORESEARCH_SEED": "1007", "PATH": "/usr/bin:/bin"}, capture_output=True,
        text=True, check=True).stdout
    assert printed.strip() == str(["--lr=0.001", "--batch-size=64", "--name=a b", "--amp",
                                   "--seed=1007"])


def test_a_hydra_flags_file_is_overrides_through_a_real_shell():
    text = "training.lr: 0.001\nmodel.name: a b\ntraining.amp: true\nuse_cuda: false\n" \
           "skip: null\nseed: $AUTORESEARCH_SEED\n"
    suffix = flags.argv(flags.read(text, "f.yaml"), flags.HYDRA)
    printed = subprocess.run(
        ["/bin/sh", "-c", f"{shlex.quote(sys.executable)} -c 'import sys; "
                          f"print(sys.argv[1:])'" + suffix],
        env={"AUTORESEARCH_SEED": "1007", "PATH": "/usr/bin:/bin"}, capture_output=True,
        text=True, check=True).stdout
    assert printed.strip() == str(["training.lr=0.001", "model.name=a b", "training.amp=true",
                                   "use_cuda=false", "seed=1007"])


@pytest.mark.parametrize("text, expect", [
    ("- a\n- b\n", "expected `name: value` lines"),
    ("lr: [1, 2]\n", "lr: a flag takes one value"),
    ("lr: {a: 1}\n", "lr: a flag takes one value"),
    ("'bad name!': 1\n", "is not a flag name"),
    ("lr: [\n", "not valid YAML"),
])
def test_a_flags_file_that_is_no_command_line_says_why(text, expect):
    with pytest.raises(flags.FlagsError, match=expect):
        flags.read(text, "f.yaml")


def test_an_unreadable_flags_file_makes_a_run_that_fails_saying_why(tmp_path):
    (tmp_path / "f.yaml").write_text("lr: [1\n")
    cmd = flags.command("python train.py", "f.yaml", tmp_path)
    done = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True)
    assert done.returncode == 2 and "the flags file f.yaml: not valid YAML" in done.stderr


ARGPARSE = '''\
import argparse
WIDTH = 32
p = argparse.ArgumentParser()
p.add_argument("--lr", "-l", type=float, default=1e-3)
p.add_argument("--batch-size", type=int, default=2**6, dest="bs")
p.add_argument("--width", type=int, default=WIDTH)
p.add_argument("--momentum", type="float", default="0.9")
p.add_argument("--act", choices=["relu", "gelu"], default="relu")
p.add_argument("--heads", type=int, choices=[2, 4, 8], default=4)
p.add_argument("--amp", action="store_true")
p.set_defaults(bs=128)
'''

CLICK = '''\
import click
@click.command()
@click.option("--lr", default=0.01, type=float)
@click.option("--layers", default=3)
@click.option("--verbose", is_flag=True)
def main(lr, layers, verbose):
    pass
'''

FIRE = '''\
import fire
def train(data="x", lr: float = 3e-4, epochs: int = 10, *, wd=0.1):
    pass
if __name__ == "__main__":
    fire.Fire(train)
'''


CONFIG_TREE = '''\
import sys


class Node:
    def merge_from_args(self, args):
        for arg in args:
            keys, _, value = arg.removeprefix("--").partition("=")
            *path, leaf = keys.split(".")
            node = self
            for key in path:
                node = getattr(node, key)
            setattr(node, leaf, float(value) if "." in value or "e" in value else int(value))


def data_defaults():
    C = Node()
    C.ndigit = 2
    return C


def get_config():
    C = Node()
    C.system = Node()
    C.system.seed = 3407
    C.system.work_dir = "./out"
    C.data = data_defaults()
    C.trainer = Node()
    C.trainer.learning_rate = 5e-4
    return C


if __name__ == "__main__":
    config = get_config()
    config.merge_from_args(sys.argv[1:])
    print(f"lr: {config.trainer.learning_rate} seed: {config.system.seed}")
'''


def test_the_numbers_a_config_builder_sets_are_flags_its_command_line_overrides(tmp_path):
    """minGPT's projects: `get_config()` sets `C.trainer.learning_rate = 5e-4`, the script
    merges `sys.argv[1:]` into it: `--trainer.learning_rate=...` is a flag, and the command
    line the flags file makes reaches the config (run for real)."""
    found = {f.name: f for f in command_line.flags(Script("adder.py", CONFIG_TREE))}
    assert {n: f.default for n, f in found.items()} == {"system.seed": 3407,
                                                       "trainer.learning_rate": 5e-4}
    assert found["trainer.learning_rate"].how == "config"
    (tmp_path / "adder.py").write_text(CONFIG_TREE)
    (tmp_path / "flags.yaml").write_text("trainer.learning_rate: 0.002\nsystem.seed: 7\n")
    cmd = flags.command(f"{shlex.quote(sys.executable)} adder.py", "flags.yaml", tmp_path)
    out = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert out.stdout.strip() == "lr: 0.002 seed: 7", (cmd, out.stderr)
    # no merge of the command line, no flags: the builder's numbers stay module code
    alone = CONFIG_TREE.replace("    config.merge_from_args(sys.argv[1:])\n", "")
    assert command_line.flags(Script("adder.py", alone)) == []


def test_argparse_flags_their_defaults_types_and_constants():
    found = {f.name: f for f in command_line.flags(Script("train.py", ARGPARSE))}
    assert found["lr"].default == 1e-3 and found["lr"].type == "float" and found["lr"].numeric
    assert found["batch-size"].dest == "bs" and found["batch-size"].default == 128  # set_defaults
    assert found["width"].default == 32 and found["width"].constant == "WIDTH"
    assert found["heads"].choices == (2, 4, 8)
    assert not found["act"].numeric and not found["amp"].numeric


def test_click_and_fire_flags():
    click = {f.name: f.default for f in command_line.flags(Script("c.py", CLICK)) if f.numeric}
    assert click == {"lr": 0.01, "layers": 3}
    fire = {f.name: f.default for f in command_line.flags(Script("f.py", FIRE)) if f.numeric}
    assert fire == {"lr": 3e-4, "epochs": 10, "wd": 0.1}


LITERALS_PY = """\
import torch
from sklearn.linear_model import LogisticRegression

LR = 3e-4
params = {"learning_rate": 0.05, "num_leaves": 31, "objective": "binary",
          "tree": {"max_depth": -1}}
xgb_params = dict(eta=0.3, max_depth=6)
clf = LogisticRegression(max_iter=1000, C=1.0)   # the regularization, inverse
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, betas=(0.9, 0.95))
clf2 = LogisticRegression(max_iter=50)           # a second call: not a setting
"""


def test_dict_keys_and_keyword_arguments_are_settings_of_a_python_file():
    found = {s.name: (s.text, s.kind) for s in settings.find("train.py", LITERALS_PY)}
    assert found == {
        "LR": ("3e-4", "constant"),
        "params.learning_rate": ("0.05", "dict"), "params.num_leaves": ("31", "dict"),
        "params.tree.max_depth": ("-1", "dict"),
        "xgb_params.eta": ("0.3", "dict"), "xgb_params.max_depth": ("6", "dict"),
        "LogisticRegression.max_iter": ("1000", "kwarg"), "LogisticRegression.C": ("1.0", "kwarg"),
        "AdamW.lr": ("3e-4", "kwarg"), "AdamW.weight_decay": ("0.1", "kwarg"),
        "AdamW.betas.0": ("0.9", "kwarg"), "AdamW.betas.1": ("0.95", "kwarg")}


@pytest.mark.parametrize("name, new, line", [
    ("params.num_leaves", "63", '"num_leaves": 63,'),
    ("params.tree.max_depth", "8", '"tree": {"max_depth": 8}}'),
    ("xgb_params.eta", "0.1", "dict(eta=0.1, max_depth=6)"),
    ("LogisticRegression.C", "0.25", "LogisticRegression(max_iter=1000, C=0.25)   # the"),
    ("AdamW.betas.1", "0.99", "betas=(0.9, 0.99))"),
])
def test_a_literal_setting_is_rewritten_in_place_and_the_file_still_runs_as_python(name, new,
                                                                                    line):
    out = settings.write(LITERALS_PY, "train.py", name, new)
    assert out is not None and line in out
    compile(out, "train.py", "exec")
    assert {s.name: s.text for s in settings.find("train.py", out)}[name] == new
    # only that value changed
    changed = [(a, b) for a, b in zip(LITERALS_PY.splitlines(), out.splitlines()) if a != b]
    assert len(changed) == 1 and line in changed[0][1]



def test_a_file_read_again_gives_the_same_settings_and_each_caller_its_own_list():
    """find remembers what it read (a proposal asks about the same text several times): a
    repeat must be the same answer, a list a caller changes must not change the next answer,
    and the same text under another path is that path's."""
    first = settings.find("train.py", LITERALS_PY)
    first.clear()
    again = settings.find("train.py", LITERALS_PY)
    assert [s.name for s in again][:2] == ["LR", "params.learning_rate"] and len(again) == 12
    assert {s.path for s in settings.find("other.py", LITERALS_PY)} == {"other.py"}
    assert settings.find("train.yaml", LITERALS_PY) == []
    out = settings.write(LITERALS_PY, "train.py", "LR", "1e-3")
    assert out is not None and {s.name: s.text for s in settings.find("train.py", out)}["LR"] \
        == "1e-3"


def test_each_setting_is_written_where_find_says_it_is():
    """write takes a module constant by its regex, skipping the `ast` walk: the place it
    writes is still the one `find` gives, for every setting of a file whose names repeat
    across kinds (a constant, then the same name as a dict key and a keyword argument)."""
    src = ("lr = 0.1\nLR = 3e-4\nparams = {'lr': 0.5, 'depth': 4}\nopt = AdamW(p, lr=2e-3)\n"
           "def f():\n    lr = 9\n")
    for s in settings.find("train.py", src):
        want = src[:s.start] + "7" + src[s.end:]
        assert settings.write(src, "train.py", s.name, "7") == want, s


def test_keyword_numbers_inside_an_f_string_are_read_where_they_are_written():
    src = 'x = 1\nprint(f"{round(v, ndigits=2)} {g(a=3)}")\nopt = AdamW(p, lr=-3e-4)\n'
    found = {s.name: s for s in settings.find("t.py", src)}
    assert {n: s.text for n, s in found.items()} == {"x": "1", "round.ndigits": "2", "g.a": "3",
                                                      "AdamW.lr": "-3e-4"}
    assert all(src[s.start:s.end] == s.text for s in found.values())
    assert settings.write(src, "t.py", "g.a", "5") == src.replace("g(a=3)", "g(a=5)")


def test_a_candidate_that_does_not_parse_keeps_its_constants_only():
    broken = LITERALS_PY + "def oops(:\n"
    assert [s.name for s in settings.find("train.py", broken)] == ["LR"]
