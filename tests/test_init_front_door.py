"""`autoresearch init` at the front door, on repos of the shapes issue 36 met (real tmp git
repos, the real CLI): flags only from what the run executes, metrics in a sentence or printed
twice, the script it read and where it looked, a package the script imports, and a next step
that runs."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import git, run_cli
from helpers import checked, commit, init_on_the_test_split, refused


def make_repo(root: Path, files: dict[str, str]) -> Path:
    """A git repo holding `files` (nested paths allowed), one commit."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    commit(root, "initial")
    return root


def task_of(repo: Path) -> dict:
    return yaml.safe_load((repo / "task.yaml").read_text())


# -- item 1: flags come from what the run executes ------------------------------------------------
ARGS_MODULE = """\
import argparse


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.01)
    return p.parse_args()


def download(n):
    print(f"downloaded {n}")


def _cli():
    p = argparse.ArgumentParser()
    p.add_argument("--num-shards", type=int, default=10)
    return p.parse_args()


if __name__ == "__main__":
    q = argparse.ArgumentParser()
    q.add_argument("--download-workers", type=int, default=8)
    download(_cli().num_shards)
"""

ARGS_SCRIPT = """\
from common import get_args
args = get_args()
print(f"val_loss: {(args.lr - 0.02) ** 2:.5f}")
"""


def test_flags_come_from_the_parser_the_run_calls_not_a_modules_own_main(tmp_path):
    """common.get_args() parses the run's command line: its --lr is a flag of the run;
    common.py's own `python common.py --num-shards N` (its __main__, and a function only
    that calls) is not."""
    repo = make_repo(tmp_path / "toy", {"train.py": ARGS_SCRIPT, "common.py": ARGS_MODULE})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    flags = yaml.safe_load((repo / "autoresearch.flags.yaml").read_text())
    assert flags == {"lr": 0.01}
    assert task_of(repo)["protected"] == ["common.py"]
    assert "lr" in task_of(repo)["search_space"]


# -- item 5: metrics in a sentence, printed twice; where init looked ------------------------------
# LightGBM's examples/python-guide shape: a library at the root, the training scripts in the
# folders its README points at, data beside them read by a relative path, the result said in
# a sentence
RMSE_EXAMPLE = """\
import os
import random

LEARNING_RATE = 0.05
NUM_LEAVES = 31
rows = open("../regression/regression.train").read().split()
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
print("Starting training...")
rmse_test = abs(LEARNING_RATE - 0.1) * 10 + abs(NUM_LEAVES - 40) / 100 + rng.random() * 0.01
print("Starting predicting...")
print(f"The RMSE of prediction is: {rmse_test}")
"""

LIBRARY_README = """\
# toylib

A gradient boosting toy. See [the Python examples](examples/python-guide) and
`examples/regression/` for the data.
"""


def library_repo(root: Path, extra: dict[str, str] | None = None) -> Path:
    return make_repo(root, {
        "README.md": LIBRARY_README,
        "setup.py": "from setuptools import setup\nsetup(name='toylib', version='0.1')\n",
        "toylib/__init__.py": "VERSION = '0.1'\n",
        "examples/python-guide/simple_example.py": RMSE_EXAMPLE,
        "examples/regression/regression.train": "1 2 3\n4 5 6\n",
        **(extra or {})})


def test_a_metric_said_in_a_sentence_found_in_the_folder_the_readme_points_at(tmp_path):
    repo = library_repo(tmp_path / "toylib")
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    guide = repo / "examples" / "python-guide"
    assert (guide / "task.yaml").is_file() and not (repo / "task.yaml").exists()
    assert "looked in examples/python-guide/, examples/regression/ (the folders README.md " \
        "points at)" in done.stdout
    assert "autoresearch check-task examples/python-guide" in done.stdout
    task = task_of(guide)
    assert task["run"] == "python simple_example.py"
    assert task["metric"]["name"] == "rmse" and task["metric"]["direction"] == "minimize"
    assert set(task["search_space"]) == {"LEARNING_RATE", "NUM_LEAVES"}
    # the pattern reads the sentence's number, run where the script reads its data
    assert checked(repo, "examples/python-guide") == pytest.approx(0.5 + 0.09, abs=0.011)


def test_metric_rmse_names_the_sentences_metric(tmp_path):
    repo = library_repo(tmp_path / "toylib")
    done = run_cli("init", "examples/python-guide", "--metric", "rmse", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "metric:     rmse (found: --metric" in done.stdout
    assert checked(repo, "examples/python-guide") == pytest.approx(0.59, abs=0.011)


def test_several_scripts_in_the_pointed_folders_refused_with_the_command_that_picks_one(
        tmp_path):
    repo = library_repo(tmp_path / "toylib", {
        "examples/python-guide/sklearn_example.py": RMSE_EXAMPLE.replace("0.05", "0.07")})
    line = refused(repo)
    assert "no script at toylib/ reports numbers; looked in examples/python-guide/, " \
        "examples/regression/ (the folders README.md points at): 2 do (" \
        "examples/python-guide/simple_example.py, " \
        "examples/python-guide/sklearn_example.py)" in line
    command = re.search(r"`autoresearch (init [^`]+)`", line)[1].split()  # type: ignore
    done = run_cli(*command, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert task_of(repo / "examples" / "python-guide")["metric"]["name"] == "rmse"


def test_nothing_found_says_where_it_looked(tmp_path):
    repo = library_repo(tmp_path / "toylib", {
        "examples/python-guide/simple_example.py": "print('hello')\n"})
    line = refused(repo)
    assert "no metric found" in line and "looked in examples/python-guide/, " \
        "examples/regression/ (the folders README.md points at) too" in line


# `step N train loss: X test loss: Y`, and on improvement the same test loss again
BEST_SO_FAR = """\
import math
import os
import random

LR = 3e-3
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
best = float("inf")
for step in range(41):
    loss = 2.0 + abs(math.log(LR / 1e-3)) + 5.0 / (step + 1) + rng.random() * 0.1
    if step % 10 == 0:
        train_loss = loss - 0.05
        test_loss = loss + 0.2 + rng.random() * 0.01
        print(f"step {step} train loss: {train_loss:.4f} test loss: {test_loss:.4f}")
        if test_loss < best:
            best = test_loss
            print(f"test loss {test_loss:.4f} is the best so far, saving model to model.pt")
"""


def test_the_same_value_printed_twice_is_one_metric(tmp_path):
    repo = make_repo(tmp_path / "best", {"train.py": BEST_SO_FAR})
    init_on_the_test_split(repo, "test_loss")
    out = subprocess.run([sys.executable, "train.py"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout
    want = float(re.findall(r"test loss: ([\d.]+)", out)[-1])
    assert checked(repo) == pytest.approx(want, abs=1e-4)


def test_a_loop_printing_one_expression_on_two_lines_is_still_two_values(tmp_path):
    """`'%s acc %.4f' % (phase, acc)` over train and val: one print, two values; reading
    both lines is refused, unlike one value printed twice."""
    train = ("LR = 0.1\nfor epoch in range(2):\n    for phase in ['train', 'val']:\n"
             "        acc = 1 - LR / (epoch + 1)\n"
             "        print('%s loss %.4f acc %.4f' % (phase, LR, acc))\n")
    repo = make_repo(tmp_path / "pct", {"train.py": train})
    assert "it would read 2 numbers of the lines printed, not one" in refused(
        repo, "--metric", "acc")


UTILS = """\
import time


def timed(start):
    print(f"time: {time.time() - start:.2f}")
"""


def test_a_refusal_names_the_script_and_the_file_each_number_came_from(tmp_path):
    train = "import time\nfrom utils import timed\nstart = time.time()\ntimed(start)\n"
    repo = make_repo(tmp_path / "timed", {"train.py": train, "utils.py": UTILS})
    line = refused(repo)
    assert "no metric found among the numbers train.py and the modules it imports print " \
        "(time (by utils.py))" in line


# -- item 6: a package of the repo the script imports: the model, editable -----------------------
# lucidrains' shape: train.py at the root, `from MEGABYTE_pytorch import MEGABYTE`, the model in
# the package (its __init__ importing it relatively); here the data loader lives there too
PACKAGE_FILES = {
    "toynet/__init__.py": "from .net import Net\n",
    "toynet/net.py": """\
        class Net:
            def __init__(self, width):
                self.width = width

            def loss(self, batch):
                return abs(self.width - 48) / 100 + sum(batch) / len(batch)
        """,
    "toynet/data.py": """\
        import os
        import random


        def batches(split):
            rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")) + len(split))
            while True:
                yield [rng.random() * 0.01 for _ in range(4)]
        """,
    "train.py": """\
        from toynet import Net
        from toynet.data import batches

        WIDTH = 32
        LEARNING_RATE = 2e-3
        model = Net(WIDTH)
        val = batches("val")
        for step in range(3):
            print(f"validation loss: {model.loss(next(val)) + LEARNING_RATE:.5f}")
        """,
}


def test_a_package_the_script_builds_its_model_from_is_editable_its_data_protected(tmp_path):
    repo = make_repo(tmp_path / "toynet", PACKAGE_FILES)
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = task_of(repo)
    assert task["editable"] == ["train.py", "toynet/__init__.py", "toynet/net.py"]
    assert task["protected"] == ["toynet/data.py"]
    assert "toynet/ is a package of the repo that train.py builds its model from: editable" \
        in done.stdout
    assert "toynet/data.py (its name says data, evaluation or metric)" in done.stdout
    assert task["metric"]["name"] == "validation_loss"
    checked(repo)


def test_a_packages_data_and_helpers_folders_stay_protected(tmp_path):
    """resnet-training's `datamodules/cifar10.py` and lightning-hydra-template's
    `src/utils/*.py`: the folder, not the file's name, says data or helpers."""
    files = {**PACKAGE_FILES,
             "toynet/datamodules/__init__.py": "",
             "toynet/datamodules/cifar.py": "from toynet.data import batches\n",
             "toynet/utils/__init__.py": "",
             "toynet/utils/logging.py": "def note(x):\n    return x\n",
             "train.py": PACKAGE_FILES["train.py"].replace(
                 "from toynet.data import batches\n",
                 "from toynet.datamodules.cifar import batches\n"
                 "        from toynet.utils.logging import note\n")}
    repo = make_repo(tmp_path / "toynet", files)
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = task_of(repo)
    assert "toynet/net.py" in task["editable"]
    assert {"toynet/datamodules/cifar.py", "toynet/utils/logging.py"} <= set(task["protected"])
    assert "toynet/datamodules/cifar.py (its name says data, evaluation or metric)" in done.stdout
    assert "toynet/utils/logging.py (it is in a helpers folder)" in done.stdout


def test_a_package_that_prints_the_metric_stays_protected(tmp_path):
    files = {**PACKAGE_FILES,
             "toynet/report.py": "def report(x):\n    print(f'val_loss: {x:.5f}')\n",
             "train.py": "from toynet import Net\nfrom toynet.report import report\n"
                         "WIDTH = 32\nreport(Net(WIDTH).loss([0.1, 0.2]))\n"}
    repo = make_repo(tmp_path / "toynet", files)
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = task_of(repo)
    assert "toynet/report.py" in task["protected"] and "toynet/net.py" in task["editable"]
    assert "toynet/report.py (it prints val_loss)" in done.stdout


# -- build item 3: the next step init prints runs -------------------------------------------------
NOTHING_TO_SEARCH = """\
import os
import random


def main():
    width = 0.3
    rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
    print(f"val_loss: {abs(width - 1.0) + rng.random() * 0.001:.5f}")


main()
"""

WIDEN = """Description: widen the layer toward its optimum

train.py
```python
<<<<<<< SEARCH
    width = 0.3
=======
    width = 0.9
>>>>>>> REPLACE
```
"""


def test_with_nothing_to_search_the_printed_next_step_runs(tmp_path, mlflow_uri, openai_server):
    repo = make_repo(tmp_path / "bare", {"train.py": NOTHING_TO_SEARCH})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    steps = done.stdout.split("; next:\n")[1].splitlines()
    assert "  autoresearch run" not in steps               # mutate would be refused
    command = next(s for s in steps if s.startswith("  autoresearch run --proposer llm"))
    assert "or, offline: add one line to task.yaml, `search_space: {LR: {log_range: " \
        "[0.0001, 0.01]}}`" in done.stdout
    config = yaml.safe_load((repo / "autoresearch.yaml").read_text())
    assert "proposer" not in config                       # no mutate over nothing
    commit(repo, "autoresearch task")
    bare = run_cli("run", cwd=repo)          # not printed: says why and what to pass instead
    assert bare.returncode == 2 and "nothing to search" in bare.stderr and "--proposer llm" \
        in bare.stderr
    # the printed command, MODEL filled in, against an OpenAI-compatible endpoint
    argv = command.split("(")[0].split()[1:]
    argv[argv.index("MODEL")] = "m"
    openai_server.models = ["m"]
    openai_server.script(WIDEN)
    env = {**os.environ, "OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-t"}
    ran = run_cli(*argv, "--iterations", "1", cwd=repo, env=env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "proposer llm" in ran.stdout and "widen the layer" in ran.stdout


def test_a_readme_linking_its_own_github_tree_points_at_that_folder(tmp_path):
    """LightGBM's README links `https://github.com/microsoft/LightGBM/tree/master/examples`:
    the folder of this checkout it names is looked in."""
    readme = "# toylib\n\n- [**Examples**](https://github.com/someone/toylib/tree/master/examples)\n"
    repo = library_repo(tmp_path / "toylib", {"README.md": readme})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "looked in examples/ (the folders README.md points at)" in done.stdout
    assert task_of(repo / "examples" / "python-guide")["metric"]["name"] == "rmse"


# -- init in a task's sub-folder: the printed next steps work from where the user stands -----------
SUB_TASK = """\
import os
import random
LEARNING_RATE = 0.1
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
print(f"val_loss: {abs(LEARNING_RATE - 0.02) + rng.random() * 0.001:.5f}")
"""


def test_init_in_a_sub_folder_prints_next_steps_that_run_from_there(tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "mono", {"experiments/tinylm/train.py": SUB_TASK})
    sub = repo / "experiments" / "tinylm"
    done = run_cli("init", cwd=sub)
    assert done.returncode == 0, done.stderr
    assert (repo / "autoresearch.yaml").is_file() and (sub / "task.yaml").is_file()
    steps = [s.strip() for s in done.stdout.split("; next:\n")[1].splitlines()]
    assert steps[0] == f"cd {repo.resolve()}"
    assert steps[2] == "autoresearch check-task experiments/tinylm" and steps[3] == \
        "autoresearch run"
    commit(repo, "autoresearch task")
    checked = run_cli(*steps[2].split()[1:], cwd=repo)              # after the printed cd
    assert checked.returncode == 0 and "status ok" in checked.stdout, checked.stderr
    # the printed `autoresearch run`, without the cd: it finds the config at the repo's top
    ran = run_cli("run", "--iterations", "1", cwd=sub)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "task folder not found" not in ran.stderr and "best val_loss" in ran.stdout


# -- alpaca-lora: the Hugging Face Trainer prints the eval loss; a utils package is no model -------
HF_FINETUNE = {
    "utils/__init__.py": "",
    "utils/prompter.py": """\
        class Prompter:
            def generate_prompt(self, instruction):
                return f"### Instruction: {instruction}"
        """,
    "finetune.py": """\
        import transformers
        from utils.prompter import Prompter


        def train(learning_rate: float = 3e-4, val_set_size: int = 200, num_epochs: int = 3):
            print(f"Training with params: num_epochs: {num_epochs}")
            prompter = Prompter()
            data = [prompter.generate_prompt(str(i)) for i in range(1000)]
            val_data = data[:val_set_size] if val_set_size > 0 else None
            trainer = transformers.Trainer(
                train_dataset=data[val_set_size:], eval_dataset=val_data,
                args=transformers.TrainingArguments(learning_rate=learning_rate,
                                                    num_train_epochs=num_epochs))
            trainer.train()


        if __name__ == "__main__":
            train()
        """,
}


def test_a_hugging_face_trainers_eval_loss_and_a_utils_package_kept_protected(tmp_path):
    from helpers import read_metric
    from loop.setup.task import load_task
    repo = make_repo(tmp_path / "alpaca", HF_FINETUNE)
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("eval_loss", "minimize")
    assert "printed by the Hugging Face transformers.Trainer finetune.py builds" in done.stdout
    logged = ("{'loss': 1.9, 'learning_rate': 0.0003, 'epoch': 0.4}\n"
              "{'eval_loss': 1.2345, 'eval_runtime': 3.2, 'epoch': 0.5}\n"
              "{'eval_loss': 1.1, 'eval_runtime': 3.1, 'epoch': 1.0}\n")
    assert read_metric(logged, task.metric.pattern) == 1.1
    assert list(task.editable) == ["finetune.py"]
    assert "utils/prompter.py" in task_of(repo)["protected"]


def test_run_before_init_says_to_run_init_not_a_missing_demo_folder(tmp_path):
    repo = make_repo(tmp_path / "fresh", {"train.py": SUB_TASK})
    done = run_cli("run", cwd=repo)
    assert done.returncode == 2 and "run `autoresearch init` first" in done.stderr
    assert "task folder not found" not in done.stderr and len(done.stderr.splitlines()) == 1


PROGRESS_BAR_MAIN = """\
import sys

import torch


def progress_bar(current, total, msg):
    sys.stdout.write(f"[{current + 1}/{total}] {msg}\\n")


def test(model, batches):
    correct = total = 0
    test_loss = 0.0
    with torch.no_grad():
        for i, (x, y) in enumerate(batches):
            out = model(x)
            test_loss += torch.nn.functional.cross_entropy(out, y).item()
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
            progress_bar(i, len(batches), 'Loss: %.3f | Acc: %.3f%%'
                         % (test_loss / (i + 1), 100. * correct / total))
    acc = 100. * correct / total
    return acc


model = torch.nn.Linear(4, 2)
batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(2)]
best_acc = 0
for epoch in range(2):
    acc = test(model, batches)
    if acc > best_acc:
        best_acc = acc
"""


def test_a_refusal_names_the_metric_a_script_formats_outside_a_print(tmp_path):
    """pytorch-cifar's main.py: the test metrics go through progress_bar('Loss: %.3f | Acc:
    %.3f%%' % ...), a string no print init reads. The refusal's hint names a concrete metric
    and pattern (the accuracy, which the script keeps its best by), and followed as written it
    gives a task whose pattern reads the line."""
    import io
    import shlex

    from loop.init.onboard import analyse
    from loop.init.plan import InitError
    from loop.run.capture import CappedLog
    from loop.setup.metric import Metric
    repo = make_repo(tmp_path / "cifar", {"main.py": PROGRESS_BAR_MAIN})
    with pytest.raises(InitError) as refused:
        analyse(repo, script="main.py")
    said = str(refused.value)
    assert "pass --metric acc --metric-pattern" in said and "in test()" in said, said
    words = shlex.split(said.partition("pass ")[2])
    plan = analyse(repo, script="main.py", metric=words[1], metric_pattern=words[3])
    assert plan.metric == "acc" and plan.direction == "maximize"
    log = CappedLog(io.BytesIO(), 1 << 16,
                    {"metric": Metric(plan.metric, pattern=plan.metric_pattern).pattern})
    log.feed(b"[1/2] Loss: 0.701 | Acc: 37.500%\n[2/2] Loss: 0.693 | Acc: 50.000%\n")
    log.close()
    assert log.value("metric") == 50.0
