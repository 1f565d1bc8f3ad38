"""The one YAML reader and writer (loop/yaml_io.py): every number written is read back
as that number (by YAML 1.2 and by PyYAML's YAML 1.1 alike); the flags file is read strictly
and its text is the run's argv (issue 37's attacks: duplicate keys, YAML 1.1 conversions,
merge keys, over-long and over-deep values); init writes a task that loads whatever the
learning rate (2e-4, 2e-5, 4e-5: issue 36)."""
from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings as hsettings, strategies as st

from conftest import make_repo, run_cli
from helpers import PLAIN, plain_repo, rows
from loop.engine.engine import Engine
from loop.init.plan import Plan, task_yaml
from loop.proposers.base import Proposal
from loop import yaml_io
from loop.script import settings
from loop.setup import flags
from loop.setup.config import Config, JudgeConfig
from loop.setup.search_space import parse_space
from loop.setup.task import load_task
from loop.untrusted import parse_number

finite = st.floats(allow_nan=False, allow_infinity=False)
PROPERTY = hsettings(max_examples=200, deadline=None)   # no clock: a busy machine is no failure


def both(text: str) -> tuple[object, object]:
    """`text` as the engine reads it (YAML 1.2 core) and as PyYAML's safe_load (1.1) does."""
    return yaml_io.load(text, "t.yaml"), yaml.safe_load(text)


# -- written, read back the same ---------------------------------------------------------------
@PROPERTY
@given(finite)
def test_any_float_written_reads_back_equal_in_both_schemas(x):
    for read in both(f"x: {yaml_io.number(x)}\n"):
        assert isinstance(read, dict) and isinstance(read["x"], float) and read["x"] == x


@PROPERTY
@given(st.integers(min_value=-10 ** 30, max_value=10 ** 30))
def test_any_int_written_reads_back_equal_in_both_schemas(n):
    for read in both(f"n: {yaml_io.number(n)}\n"):
        assert isinstance(read, dict) and read["n"] == n and not isinstance(read["n"], bool)


@PROPERTY
@given(finite.filter(lambda v: abs(v) < 1e50), st.sampled_from(["{!r}", "{:e}", "{:g}",
                                                                  "{:.3E}", "{:f}"]))
def test_a_number_text_written_reads_back_as_the_number_it_says(x, form):
    text = form.format(x)
    for read in both(f"v: {yaml_io.number(text)}\n"):
        assert isinstance(read, dict) and read["v"] == parse_number(text)


@PROPERTY
@given(st.lists(finite, min_size=1, max_size=4))
def test_a_range_in_flow_style_reads_back_as_numbers(values):
    for read in both(f"log_range: {yaml_io.flow(values)}\n"):
        assert isinstance(read, dict) and read["log_range"] == values


@PROPERTY
@given(st.text(max_size=40))
@example(s="\n")      # a `|` block cut from its document lost its line breaks
def test_any_string_written_reads_back_as_that_string(s):
    for read in both(f"s: {yaml_io.scalar(s)}\n"):
        assert isinstance(read, dict) and read["s"] == s


@PROPERTY
@given(st.dictionaries(st.text(min_size=1, max_size=8),
                       st.one_of(finite, st.integers(), st.booleans(), st.none(),
                                 st.text(max_size=20)), max_size=5))
@example(data={"<<": None})      # a quoted `<<` is a string key, not YAML 1.1's merge key
def test_a_mapping_dumped_reads_back_equal(data):
    assert yaml_io.load(yaml_io.dump(data), "t.yaml") == data


@hsettings(max_examples=60, deadline=None)
@given(finite.filter(lambda v: abs(v) < 1e300))
def test_a_setting_written_into_a_yaml_file_is_found_again_as_that_number(x):
    text = "optim:\n  lr: 0.001   # peak\n"
    out = settings.write(text, "cfg.yaml", "optim.lr", repr(x))
    assert out is not None and "# peak" in out
    found = settings.lookup({"cfg.yaml": out}, "cfg.yaml", "optim.lr")
    assert found is not None and parse_number(found.text) == x
    assert yaml.safe_load(out)["optim"]["lr"] == x


@PROPERTY
@given(finite.filter(lambda v: abs(v) < 1e300))
def test_a_number_written_into_a_json_file_reads_back_equal(x):
    out = settings.write('{"optim": {"lr": 0.001}}', "cfg.json", "optim.lr", repr(x))
    assert out is not None and json.loads(out)["optim"]["lr"] == x


@pytest.mark.parametrize("text, expect", [
    ("lr: 5e-05\n", 5e-05), ("a: 1:00\n", "1:00"), ("a: 0777\n", 777), ("a: 0o17\n", 15),
    ("a: no\n", "no"), ("a: yes\n", "yes"), ("a: off\n", "off"), ("a: True\n", True),
    ("a: 2024-01-02\n", "2024-01-02"), ("a: 1_000\n", "1_000"), ("a: ~\n", None),
])
def test_values_read_as_yaml_1_2_says(text, expect):
    assert list(yaml_io.load(text, "t.yaml").values()) == [expect]


@pytest.mark.parametrize("bounds", [[5e-05, 0.0008], ["5e-05", 0.0008], ["2e-5", "4e-4"]])
def test_a_range_written_without_a_dot_is_a_number(bounds):
    space = parse_space({"LR": {"log_range": bounds}}, "task.yaml")
    assert space["LR"].low == pytest.approx(float(bounds[0]))
    text = "search_space:\n  LR: {log_range: [" + ", ".join(map(str, bounds)) + "]}\n"
    assert parse_space(yaml_io.load(text, "t")["search_space"], "t")["LR"].kind == "log_range"


@PROPERTY
@given(st.text(max_size=60), st.lists(finite.filter(lambda v: v > 0), min_size=2, max_size=2),
       finite)
def test_the_task_yaml_init_writes_reads_back_what_it_decided(description, bounds, budget):
    plan = Plan(root=Path("/r"), top=Path("/r"), shape="plain", script="train.py", name="toy",
                description=description, editable=["train.py"], metric="val_loss",
                budget=abs(budget), space={"LR": {"log_range": sorted(bounds)}})
    for read in both(task_yaml(plan)):
        assert isinstance(read, dict) and read["search_space"]["LR"]["log_range"] == sorted(bounds)
        assert read["time_budget_s"] == abs(budget)
        assert " ".join(read["description"].split()) == " ".join(description.split()) \
            if description.isprintable() else read["description"] == description


# -- init: the learning rates that were refused ---------------------------------------------------
ARGPARSE_LR = """\
import argparse
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default={lr})
p.add_argument("--width", type=int, default=32)
a = p.parse_args()
print(f"val_loss: {{(a.lr - 1e-4) ** 2 * 1e6 + (a.width - 48) ** 2 / 100:.4f}}")
"""


@pytest.mark.parametrize("lr", ["2e-4", "2e-5", "4e-5"])
@pytest.mark.parametrize("where", ["constant", "flag"])
def test_init_writes_a_task_that_loads_whatever_the_learning_rate(tmp_path, lr, where):
    files = ({"train.py": PLAIN.replace("LR = 0.01", f"LR = {lr}")} if where == "constant"
             else {"train.py": ARGPARSE_LR.format(lr=lr)})
    repo = plain_repo(tmp_path / "toy", files)
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    name = "LR" if where == "constant" else "lr"
    dim = parse_space(task.search_space, "task.yaml")[name]
    assert dim.kind == "log_range" and dim.low < float(lr) < dim.high
    raw = yaml.safe_load((repo / "task.yaml").read_text())        # YAML 1.1 reads numbers too
    assert all(isinstance(b, float) for b in raw["search_space"][name]["log_range"])
    if where == "flag":
        assert yaml.safe_load((repo / task.flags).read_text())["lr"] == float(lr)


# -- the flags file: strict, and its text is the argv ---------------------------------------------
def shell_argv(suffix: str) -> list[str]:
    """What a script run as `python -c ...` + suffix receives, through a real shell."""
    out = subprocess.run(["/bin/sh", "-c", f"{shlex.quote(sys.executable)} -c 'import sys; "
                          f"print(repr(sys.argv[1:]))'" + suffix],
                         env={"PATH": "/usr/bin:/bin", "AUTORESEARCH_SEED": "7"},
                         capture_output=True, text=True, check=True).stdout
    return eval(out)    # noqa: S307 - the repr of a list of str, printed just above


def test_yaml_1_1_conversions_reach_the_run_as_written():
    text = "b: 1:00\nm: 0777\nx: no\ny: yes\nz: off\nlr: 1e-3\nq: '0.5'\nt: true\nf: false\n"
    assert shell_argv(flags.argv(flags.read(text, "f.yaml"))) == [
        "--b=1:00", "--m=0777", "--x=no", "--y=yes", "--z=off", "--lr=1e-3", "--q=0.5", "--t"]
    found = {s.name: s.text for s in settings.find("f.yaml", text)}
    assert found == {"m": "0777", "lr": "1e-3"}        # the settings search reads the same text


@pytest.mark.parametrize("text, expect", [
    ("w: 1.0\nlr: 0.1\nw: 3.0\n", r"w: a duplicate key \(lines 1 and 3\)"),
    ("base: &b\n  w: 1\n<<: *b\n", "anchors, aliases and tags"),
    ("<<: {w: 1}\nlr: 0.1\n", "a merge key `<<` is not read"),
    ("w: !!float 1\n", "w: anchors, aliases and tags"),
    ("w: " + "9" * 300_000 + "\n", "w: the value is 300000 characters long, over the 4096"),
    ("w: " + "[" * 20_000 + "]" * 20_000 + "\n", "w: nested deeper than 64 levels"),
    ("w:" + "".join("\n" + " " * i + "a:" for i in range(1, 200)) + " 1\n",
     "w: nested deeper than 64 levels"),
    ("w: \"a\\0b\"\n", "w: a NUL character"),
    ("".join(f"k{i}: {'v' * 4000}\n" for i in range(30)), "k24: the flags up to here make"),
])
def test_a_flags_file_that_hides_what_the_run_gets_is_refused_in_one_line(text, expect):
    with pytest.raises(flags.FlagsError, match=expect) as refused:
        flags.read(text, "f.yaml")
    assert str(refused.value).startswith("f.yaml: ") and "\n" not in str(refused.value)
    assert len(str(refused.value)) < 400


@pytest.mark.parametrize("text, expect", [
    ("w: " + "9" * 300_000 + "\n", "w: the value is 300000 characters long"),
    ("w: " + "[" * 20_000 + "]" * 20_000 + "\n", "w: nested deeper than 64 levels"),
])
def test_a_run_given_an_over_long_or_over_deep_flag_fails_in_one_line(tmp_path, text, expect):
    (tmp_path / "f.yaml").write_text(text)
    cmd = flags.command("python train.py", "f.yaml", tmp_path)
    done = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"autoresearch: the flags file f.yaml: {expect}")
    assert "OSError" not in done.stderr and "RecursionError" not in done.stderr


def test_the_settings_search_sees_no_setting_in_a_file_the_run_refuses():
    assert settings.find("f.yaml", "w: 1.0\nw: 3.0\n") == []
    assert [s.name for s in settings.find("f.yaml", "a: 1\n<<: {w: 2}\n")] == []


FLAGS_TASK = """\
name: flagged
editable: [train.py, f.yaml]
run: python train.py
flags: f.yaml
metric: {name: score, direction: minimize}
time_budget_s: 30
grace_s: 5
"""
FLAGS_TRAIN = """\
import sys
print("argv:", repr(sys.argv[1:]))
w = float(next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--w=")))
print(f"score: {(w - 3.0) ** 2:.6f}")
"""


class FlagsFiles:
    """Proposes the given flags-file texts in order."""

    def __init__(self, *texts: str):
        self.texts = list(texts)

    def propose(self, context):
        return Proposal(f"flags {context.iteration}",
                        files={"f.yaml": self.texts[context.iteration - 1]})


def test_in_a_night_the_flags_files_diff_is_the_runs_argv(tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "repo", {"task.yaml": FLAGS_TASK, "train.py": FLAGS_TRAIN,
                                         "f.yaml": "w: 1.0\n"})
    hostile = "w: 1.0\nb: 1:00\nw: 3.0\n"          # mutate read 1.0, the run got 3.0: kept
    honest = "w: 2.0\nb: 1:00\nm: 0777\nx: no\ny: yes\n"
    lines: list[str] = []
    Engine(Config(task="task", tag="t", base_dir=repo, iterations=2,
                  judge=JudgeConfig(rule="strict")), out=lines.append,
           proposer=FlagsFiles(hostile, honest)).run()
    table = rows(repo)
    assert table[1]["status"] != "keep"
    log = "\n".join(p.read_text() for p in sorted((repo / ".autoresearch" / "t").rglob(
        "*.log")))
    assert "the flags file f.yaml: w: a duplicate key (lines 1 and 3)" in log, log[-3000:]
    assert table[2]["status"] == "keep", table
    assert "argv: ['--w=2.0', '--b=1:00', '--m=0777', '--x=no', '--y=yes']" in log
    assert not any("Traceback" in line for line in lines)


def test_a_task_yaml_with_a_duplicate_key_is_refused_in_one_line(tmp_path):
    repo = make_repo(tmp_path / "repo", {"task.yaml": FLAGS_TASK + "time_budget_s: 60\n",
                                         "train.py": FLAGS_TRAIN, "f.yaml": "w: 1.0\n"})
    done = run_cli("check-task", "task", cwd=repo)
    assert done.returncode == 2
    assert "time_budget_s: a duplicate key (lines 6 and 8)" in done.stderr


def test_infinities_are_written_as_both_schemas_read_them():
    for x in (math.inf, -math.inf):
        assert both(f"x: {yaml_io.number(x)}\n") == ({"x": x}, {"x": x})
