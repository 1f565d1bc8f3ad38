"""`autoresearch init` reads a metric from a table the script prints (issue 36: the shape of
airbench and hlb-CIFAR10): a header row printed from a list of column names, `|`-separated,
then rows of values only, padded to the header's widths, a cell blank where a value is not
there yet. init names the column, picks the held-out one by the usual rules (among several,
the one the script's `main()` returns), and writes a pattern that reads that cell of the
last row where it is filled. Real git repos in tmp folders, the real CLI, the script run for
its real output, and the engine's own reader (CappedLog) on it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import checked, init, plain_repo, read_metric, refused
from loop.script.source import Script
from loop.setup.task import load_task

# runs of a few epochs; each row built from the function's locals by column name; the
# test-time-augmented accuracy only on each run's last row, which `main()` returns
RUNS_TABLE = '''\
import os
import random

LR = 0.05
EPOCHS = 3
COLUMNS = ["run   ", "epoch", "train_acc", "val_acc", "tta_val_acc", "seconds"]


def print_cells(cells, head=False):
    line = ""
    for cell in cells:
        line += "|  %s  " % cell
    line += "|"
    if head:
        print("-" * len(line))
    print(line)
    if head:
        print("-" * len(line))


def print_row(values):
    cells = []
    for column in COLUMNS:
        value = values.get(column.strip())
        if isinstance(value, (int, str)):
            text = str(value)
        elif isinstance(value, float):
            text = "{:0.4f}".format(value)
        else:
            text = ""
        cells.append(text.rjust(len(column)))
    print_cells(cells)


def main(run, rng):
    seconds = 0.0
    for epoch in range(EPOCHS):
        train_acc = 0.5 + epoch / 10 + rng.random() / 100
        val_acc = 0.45 + epoch / 10 - abs(LR - 0.05) + rng.random() / 100
        seconds += 0.25
        print_row(locals())
        run = None
    tta_val_acc = val_acc + 0.01 + rng.random() / 1000
    epoch = "eval"
    print_row(locals())
    return tta_val_acc


if __name__ == "__main__":
    rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
    print_cells(COLUMNS, head=True)
    accs = [main(run, rng) for run in range(3)]
    print("Mean: %.4f" % (sum(accs) / len(accs)))
'''

# cells joined by " | " (no edge bars); the EMA's loss blank until it starts; two validation
# columns and no result returned
JOINED_TABLE = '''\
import os
import random

LR = 0.01
COLUMNS = ["epoch", "train_loss", "val_loss", "ema_val_loss"]
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
print(" | ".join(COLUMNS))
ema_val_loss = None
for epoch in range(5):
    train_loss = 2.0 - epoch / 10 + rng.random() / 100
    val_loss = 2.1 - epoch / 10 + abs(LR - 0.01) + rng.random() / 100
    if epoch >= 2:
        ema_val_loss = val_loss - 0.05
    row = locals()
    cells = []
    for name in COLUMNS:
        value = row[name]
        cells.append("" if value is None else str(value) if isinstance(value, int)
                     else f"{value:.4f}")
    print(" | ".join(cells))
print("done | 5")
'''


def output(repo: Path, script: str) -> str:
    """What the script prints, stdout and stderr, as a run records it."""
    done = subprocess.run([sys.executable, script], cwd=repo, capture_output=True, text=True,
                          check=True)
    return done.stdout + done.stderr


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_the_column_main_returns_is_read_from_the_last_row_that_fills_it(tmp_path):
    repo = plain_repo(tmp_path / "runs", {"bench.py": RUNS_TABLE})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert re.search(r"metric: +tta_val_acc \(guessed: the validation metric main\(\) returns "
                     r"as its result", done.stdout), done.stdout
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("tta_val_acc", "maximize")
    # printed row by row inside the loops, with no time budget of its own: a run stopped at
    # the box is scored from its last filled row
    assert task.on_timeout == "last"
    out = output(repo, "bench.py")
    rows = [cells(l) for l in out.splitlines() if l.startswith("|") and "run" not in l]
    filled = [float(r[4]) for r in rows if r[4]]
    assert len(filled) == 3 and len(rows) == 12      # blank in 9 rows of 12
    assert read_metric(out, task.metric.pattern) == filled[-1]
    # cut before the last run's eval row: the last filled cell is the run before's, never
    # another column's number from a row where it is blank
    cut = out[:out.rindex("|   eval  |")]
    assert read_metric(cut, task.metric.pattern) == filled[-2]
    assert checked(repo) == pytest.approx(filled[-1], abs=1e-4)


def test_two_validation_columns_refused_and_the_hint_followed_reads_the_one_named(tmp_path):
    repo = plain_repo(tmp_path / "joined", {"train.py": JOINED_TABLE})
    line = refused(repo)
    assert "several validation metrics printed (val_loss, ema_val_loss): pass --metric " \
           "val_loss, or --metric with another of them" in line, line
    out = output(repo, "train.py")
    rows = [cells(l) for l in out.splitlines()[1:] if l.count("|") == 3]
    for name, column in (("ema_val_loss", 3), ("val_loss", 2)):
        done = init(repo, "--metric", name, "--force")
        assert done.returncode == 0, done.stderr
        task = load_task(repo)
        assert task.metric.direction == "minimize"
        assert read_metric(out, task.metric.pattern) == float(rows[-1][column])
    # the EMA's column is blank in the first rows: read from those alone, nothing is read
    done = init(repo, "--metric", "ema_val_loss", "--force")
    early = "\n".join(out.splitlines()[:3]) + "\n"
    assert read_metric(early, load_task(repo).metric.pattern) is None


def test_a_list_of_names_printed_without_bars_is_no_table():
    """Column names written to a CSV file, or printed without `|`, give no column values."""
    src = Script("train.py", '''\
import csv
COLUMNS = ["epoch", "val_loss"]
writer = csv.writer(open("log.csv", "w"))
writer.writerow(COLUMNS)
for epoch in range(3):
    val_loss = 1.0 / (epoch + 1)
    writer.writerow([epoch, val_loss])
    print(", ".join(COLUMNS))
''')
    assert [v.name for v in src.reported()] == []
    table = Script("train.py", JOINED_TABLE)
    assert [v.name for v in table.reported() if v.column is not None] == [
        "epoch", "train_loss", "val_loss", "ema_val_loss"]


def test_a_best_so_far_column_is_no_second_validation_metric(tmp_path):
    """`ema_val_loss` is another measurement on the validation split; `best_val_loss` is a
    summary of `val_loss` over the run: the one validation metric stays val_loss."""
    best_so_far = JOINED_TABLE.replace('"ema_val_loss"]', '"best_val_loss"]').replace(
        "ema_val_loss = None", "best_val_loss = None").replace(
        "    if epoch >= 2:\n        ema_val_loss = val_loss - 0.05\n",
        "    best_val_loss = min(val_loss, best_val_loss or val_loss)\n")
    repo = plain_repo(tmp_path / "best", {"train.py": best_so_far})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert re.search(r"metric: +val_loss \(found: the validation metric", done.stdout), done.stdout
    out = output(repo, "train.py")
    rows = [cells(l) for l in out.splitlines()[1:] if l.count("|") == 3]
    assert read_metric(out, load_task(repo).metric.pattern) == float(rows[-1][2])
