"""Which settings change what the metric measures (loop/script/measurement.py), on a script of
the shape issue 36 found searched wrongly: lucidrains' enwik8 train.py, whose validation loss
is one batch of SEQ_LEN x BATCH_SIZE bytes, whose PRIME_LEN only feeds a generated sample,
whose GRADIENT_ACCUMULATE_EVERY sets the effective batch, and whose model asserts the longest
sequence it embeds. Real git repos, real init, a real night (torch on the CPU)."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import git, run_cli
from loop.init.onboard import analyse

MODEL_PY = """\
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, num_tokens, dim, max_seq_len):
        super().__init__()
        assert max_seq_len <= 256, "positions beyond 256 are not embedded"
        self.emb = nn.Embedding(num_tokens, dim)
        self.pos = nn.Embedding(256, dim)
        self.out = nn.Linear(dim, num_tokens)

    def forward(self, x, return_loss=True):
        inp, target = x[:, :-1], x[:, 1:]
        h = self.emb(inp) + self.pos(torch.arange(inp.shape[1]))
        logits = self.out(torch.tanh(h))
        if not return_loss:
            return logits
        return nn.functional.cross_entropy(logits.transpose(1, 2), target)

    @torch.no_grad()
    def generate(self, start, length):
        out = start
        for _ in range(length):
            logits = self(out[:, -255:], return_loss=False)[:, -1]
            out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=-1)
        return out[:, start.shape[1]:]
"""

ENWIK8_TRAIN = """\
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from model import TinyLM

# constants

NUM_BATCHES = 12
BATCH_SIZE = 4
GRADIENT_ACCUMULATE_EVERY = 2
LEARNING_RATE = 1e-2
VALIDATE_EVERY = 4
GENERATE_EVERY = 6
PRIME_LEN = 16
GENERATE_LENGTH = 32
SEQ_LEN = 64
DIM = 32

# helpers


def cycle(loader):
    while True:
        for data in loader:
            yield data


def decode_token(token):
    return str(chr(max(32, token)))


def decode_tokens(tokens):
    return "".join(list(map(decode_token, tokens)))


# instantiate model

model = TinyLM(num_tokens=256, dim=DIM, max_seq_len=SEQ_LEN)

# prepare enwik8-like data

rng = np.random.default_rng(0)
data = np.frombuffer(bytes(rng.integers(97, 123, 20000, dtype=np.uint8)), dtype=np.uint8)
train_x, valid_x = np.split(data, [18000])
data_train, data_val = torch.from_numpy(train_x.copy()), torch.from_numpy(valid_x.copy())


class TextSamplerDataset(Dataset):
    def __init__(self, data, seq_len):
        super().__init__()
        self.data = data
        self.seq_len = seq_len

    def __getitem__(self, index):
        rand_start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,))
        return self.data[rand_start: rand_start + self.seq_len + 1].long()

    def __len__(self):
        return self.data.size(0) // self.seq_len


train_dataset = TextSamplerDataset(data_train, SEQ_LEN)
val_dataset = TextSamplerDataset(data_val, SEQ_LEN)
train_loader = cycle(DataLoader(train_dataset, batch_size=BATCH_SIZE))
val_loader = cycle(DataLoader(val_dataset, batch_size=BATCH_SIZE))

# optimizer

optim = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)

# training

for i in range(NUM_BATCHES):
    model.train()

    for __ in range(GRADIENT_ACCUMULATE_EVERY):
        loss = model(next(train_loader))
        (loss / GRADIENT_ACCUMULATE_EVERY).backward()

    print(f"training loss: {loss.item()}")
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optim.step()
    optim.zero_grad()

    if i % VALIDATE_EVERY == 0 or i == NUM_BATCHES - 1:
        model.eval()
        with torch.no_grad():
            loss = model(next(val_loader))
            print(f"validation loss: {loss.item()}")

    if i % GENERATE_EVERY == 0:
        model.eval()
        inp = random.choice(val_dataset)[:PRIME_LEN]
        prime = decode_tokens(inp)
        print(f"{prime} \\n\\n {'*' * 100}")

        sample = model.generate(inp[None, ...], GENERATE_LENGTH)
        output_str = decode_tokens(sample[0])
        print(output_str)
"""


def make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).write_text(textwrap.dedent(text))
    commit(root, "initial")
    return root


def commit(repo: Path, msg: str = "files") -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=Tester", "-c", "user.email=t@example.com", "commit", "-qm", msg)


def enwik8(tmp_path: Path, train: str = ENWIK8_TRAIN) -> Path:
    return make_repo(tmp_path / "enwik8", {"train.py": train, "model.py": MODEL_PY})


def test_the_enwik8_wrong_keep_no_longer_searches_what_sets_the_validation_batch(tmp_path):
    repo = enwik8(tmp_path)
    done = run_cli("init", "--metric", "validation_loss", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    # the validation loss is one batch of SEQ_LEN x BATCH_SIZE: both would change what it
    # measures; PRIME_LEN and GENERATE_LENGTH only feed the generated sample
    assert set(task["search_space"]) == {"GRADIENT_ACCUMULATE_EVERY", "LEARNING_RATE", "DIM",
                                         "AdamW.weight_decay"}
    for said in ("BATCH_SIZE (sets the validation batch)",
                 "SEQ_LEN (sets the validation sequence length)",
                 "PRIME_LEN (only feeds output validation_loss never reads)",
                 "GENERATE_LENGTH (only feeds output validation_loss never reads)"):
        assert said in done.stdout
    # the effective batch is trained, not a cadence: searched
    assert task["search_space"]["GRADIENT_ACCUMULATE_EVERY"] == {"range": [1, 4],
                                                                 "integer": True}


def test_a_range_stays_inside_the_limit_the_code_asserts(tmp_path):
    """SEQ_LEN feeding only the model and the training data (validation on a fixed 64) is
    searched, but never past the 256 the model asserts (2**8), though 128 * 4 would be."""
    train = ENWIK8_TRAIN.replace("SEQ_LEN = 64", "SEQ_LEN = 128").replace(
        "val_dataset = TextSamplerDataset(data_val, SEQ_LEN)",
        "val_dataset = TextSamplerDataset(data_val, 64)")
    plan = analyse(enwik8(tmp_path, train), metric="validation_loss")
    assert plan.space["SEQ_LEN"] == {"pow2": [4, 8]}
    assert "BATCH_SIZE (sets the validation batch)" in plan.skipped


def test_a_train_test_split_size_is_left_out_and_the_classifiers_keywords_searched(tmp_path):
    repo = make_repo(tmp_path / "tab", {"train.py": TABULAR_TRAIN})
    plan = analyse(repo)
    assert plan.metric == "val_accuracy"
    assert set(plan.space) == {"LogisticRegression.C"}
    assert "LogisticRegression.max_iter" in plan.skipped       # the training's length
    # the split and the data it is drawn from decide what the accuracy is measured on
    assert {"train_test_split.test_size", "train_test_split.random_state",
            "make_classification.n_samples (sets the evaluation's size)",
            "make_classification.n_features (flows into the validation data or its "
            "evaluation)"} <= set(plan.skipped)


def test_where_the_script_does_not_compute_its_metric_init_says_it_cannot_tell(tmp_path):
    """The metric printed by a method of the module's class: the slice cannot follow it."""
    train = PRINTED_ELSEWHERE.replace("from report import report", "from report import Report")\
        .replace("report(loss)", "Report().report(loss)")
    report = "class Report:\n" + textwrap.indent(
        REPORT_PY.replace("(value)", "(self, value)"), "    ")
    repo = make_repo(tmp_path / "elsewhere", {"train.py": train, "report.py": report})
    plan = analyse(repo, metric="val_loss")
    assert "LR" in plan.space
    assert any("could not be read" in n for n in plan.notes), plan.notes


def test_a_metric_a_called_module_function_prints_is_followed_into_the_script(tmp_path):
    """`report(loss)` of a module that prints what it is given: the slice goes on from the
    argument, through the script (a loss formula that reads LR does not make LR a measure)."""
    repo = make_repo(tmp_path / "elsewhere", {"train.py": PRINTED_ELSEWHERE,
                                             "report.py": REPORT_PY})
    plan = analyse(repo, metric="val_loss")
    assert "LR" in plan.space
    assert not any("could not be read" in n for n in plan.notes), plan.notes


@pytest.mark.slow
def test_a_night_on_the_enwik8_shape_moves_only_what_leaves_the_measure_alone(tmp_path,
                                                                             mlflow_uri):
    repo = enwik8(tmp_path)
    assert run_cli("init", "--metric", "validation_loss", cwd=repo).returncode == 0
    commit(repo, "autoresearch task")
    done = run_cli("run", "--tag", "m", "--proposer", "mutate", "--iterations", "2", cwd=repo,
                   timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    table = (repo / ".autoresearch" / "m" / "results.tsv").read_text().splitlines()[2:]
    assert table
    for row in table:
        moved = set(re.findall(r"(?:Set |, )([\w.]+) to", row))
        assert moved and moved <= {"GRADIENT_ACCUMULATE_EVERY", "LEARNING_RATE", "DIM",
                                   "AdamW.weight_decay"}, row


TABULAR_TRAIN = """\
import os

from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

X, y = make_classification(n_samples=400, n_features=10, random_state=0)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0)
clf = LogisticRegression(max_iter=1000, C=1.0)
clf.fit(X_train, y_train)
acc = accuracy_score(y_val, clf.predict(X_val))
print(f"val_accuracy: {acc:.4f}")
"""

PRINTED_ELSEWHERE = """\
from report import report

LR = 0.01
loss = (LR - 0.02) ** 2
report(loss)
"""

REPORT_PY = """\
def report(value):
    print(f"val_loss: {value:.4f}")
"""


def test_asserted_limits_at_module_level_and_in_a_called_function():
    from loop.script.measurement import asserted_limits
    from loop.script.source import Script
    src = Script("train.py", textwrap.dedent("""\
        MAX_LEN = 512
        SEQ_LEN = 128
        WIDTH = 64
        DEPTH = 4
        assert SEQ_LEN < MAX_LEN

        def build(width, depth):
            assert width <= 1024
            assert 2 <= depth
            return width * depth

        build(WIDTH, depth=DEPTH)
        """))
    limits = asserted_limits(src, [], {"SEQ_LEN", "WIDTH", "DEPTH"}, {})
    assert limits == {"SEQ_LEN": [("<", 512.0)], "WIDTH": [("<=", 1024.0)],
                      "DEPTH": [(">=", 2.0)]}


# -- shapes of the public repos (benchmarks/init_corpus) the slice once missed ------------------
def test_a_loss_that_calls_backward_is_no_trained_model(tmp_path):
    """lucidrains' own train.py (reformer, routing-transformer, PaLM, MEGABYTE): `loss.
    backward()` on the name the validation loss is later read back through: the loss is
    not the model being trained, and the validation batch is still found."""
    train = ENWIK8_TRAIN.replace(
        "        (loss / GRADIENT_ACCUMULATE_EVERY).backward()",
        "        loss.backward()")
    assert "        loss.backward()" in train
    plan = analyse(enwik8(tmp_path, train), metric="validation_loss")
    assert {"BATCH_SIZE (sets the validation batch)",
            "SEQ_LEN (sets the validation sequence length)"} <= set(plan.skipped)
    assert {"LEARNING_RATE", "GRADIENT_ACCUMULATE_EVERY", "DIM"} <= set(plan.space)


GET_BATCH_TRAIN = """\
import torch

batch_size = 8
block_size = 16
learning_rate = 1e-3
n_embd = 32
max_iters = 40
eval_interval = 10
eval_iters = 4

data = torch.randint(0, 65, (4000,))
n = int(0.9 * len(data))
train_data = data[:n]
val_data = data[n:]


def get_batch(split):
    data = train_data if split == "train" else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + block_size + 1] for i in ix])
    x, y = x.to("cpu"), y.to("cpu")
    return x, y


class Bigram(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(65, n_embd)
        self.head = torch.nn.Linear(n_embd, 65)

    def forward(self, idx, targets):
        logits = self.head(self.emb(idx))
        return torch.nn.functional.cross_entropy(logits.view(-1, 65), targets.view(-1))


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


model = Bigram()
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
for it in range(max_iters):
    if it % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    xb, yb = get_batch("train")
    loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
"""


def test_a_value_set_from_itself_is_followed_to_what_it_was_before(tmp_path):
    """nanoGPT's and ng-video-lecture's get_batch: `x, y = x.to(device), y.to(device)` reads
    the x stacked from the batch before it; the validation batch and block are found."""
    repo = make_repo(tmp_path / "ngv", {"gpt.py": GET_BATCH_TRAIN})
    plan = analyse(repo, script="gpt.py", metric="val_loss")
    assert {"batch_size (sets the validation batch)",
            "block_size (sets the validation sequence length)"} <= set(plan.skipped)
    assert {"learning_rate", "n_embd"} <= set(plan.space)


FIRE_TRAIN = """\
import fire
import torch
from torch.utils.data import DataLoader


class Accelerator:
    def prepare(self, *things):
        return things


def cycle(loader):
    while True:
        for data in loader:
            yield data


def train(
    num_batches = 20,
    batch_size = 4,
    learning_rate = 1e-3,
    validate_every = 5,
    seq_len = 32,
    dim = 16,
):
    accelerator = Accelerator()
    model = torch.nn.Sequential(torch.nn.Embedding(256, dim), torch.nn.Linear(dim, 256))
    data = torch.randint(0, 256, (4000,))
    data_train, data_val = data[:3000], data[3000:]
    train_set = [data_train[i:i + seq_len + 1] for i in range(0, 2900, seq_len)]
    val_set = [data_val[i:i + seq_len + 1] for i in range(0, 900, seq_len)]
    train_loader = cycle(DataLoader(train_set, batch_size = batch_size, drop_last = True))
    val_loader = cycle(DataLoader(val_set, batch_size = batch_size, drop_last = True))
    optim = torch.optim.Adam(model.parameters(), lr=learning_rate)
    model, optim, train_loader, val_loader = accelerator.prepare(
        model, optim, train_loader, val_loader
    )
    for i in range(num_batches):
        model.train()
        batch = next(train_loader)
        logits = model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:])
        loss.backward()
        optim.step()
        optim.zero_grad()
        if i % validate_every == 0:
            model.eval()
            with torch.no_grad():
                batch = next(val_loader)
                logits = model(batch[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:])
                print(f'validation loss: {loss.item()}')


if __name__ == '__main__':
    fire.Fire(train)
"""


def test_an_entry_points_parameters_are_the_settings_the_slice_reaches(tmp_path):
    """x-transformers' train_enwik8.py: `fire.Fire(train)`, whose keyword defaults are the
    settings; `model.train()` is no call of that train; the loaders pass through a
    multi-line `model, optim, train_loader, val_loader = accelerator.prepare(...)`."""
    repo = make_repo(tmp_path / "xt", {"train_enwik8.py": FIRE_TRAIN})
    plan = analyse(repo, script="train_enwik8.py", metric="validation_loss")
    assert {"batch_size (sets the validation batch)",
            "seq_len (sets the validation sequence length)"} <= set(plan.skipped), plan.skipped
    assert {"learning_rate", "dim"} <= set(plan.space)


SEGMENTS_TRAIN = ENWIK8_TRAIN.replace("SEQ_LEN = 64\n", "SEQ_LEN = 16\nSEGMENTS = 4\n").replace(
    """            loss = model(next(val_loader))
            print(f"validation loss: {loss.item()}")""",
    """            data = next(train_loader)
            valid_loss = 0.
            for segment in data.chunk(SEGMENTS, dim=-1):
                loss = model(segment)
                valid_loss += loss.item() / SEGMENTS
        print(f"valid loss: {valid_loss}")""")


def test_what_the_metric_reads_without_gradients_is_the_validation_side(tmp_path):
    """memorizing-transformers' train.py: the valid loss is averaged over SEGMENTS segments
    inside `with torch.no_grad()`, of a batch named `data` (the training batch, in fact):
    SEGMENTS changes what it measures, though no name on the way says validation."""
    assert "valid_loss += loss.item() / SEGMENTS" in SEGMENTS_TRAIN
    plan = analyse(enwik8(tmp_path, SEGMENTS_TRAIN), metric="valid_loss")
    assert "SEGMENTS (flows into the validation data or its evaluation)" in plan.skipped
    assert {"LEARNING_RATE", "GRADIENT_ACCUMULATE_EVERY"} <= set(plan.space)


def test_lowercase_settings_beside_uppercase_ones_are_searched(tmp_path):
    """build-nanogpt's train_gpt2.py: `B = 64`, `T = 1024` (UPPER_CASE, one letter) beside
    `max_lr = 6e-4` and `warmup_steps = 715`: the learning rate is searched too."""
    train = GET_BATCH_TRAIN.replace("batch_size = 8\n", "B = 8\n").replace(
        "(batch_size,)", "(B,)").replace("learning_rate = 1e-3\n",
                                         "max_lr = 6e-4\nmin_lr = max_lr * 0.1\n").replace(
        "lr=learning_rate", "lr=max_lr")
    plan = analyse(make_repo(tmp_path / "bng", {"train_gpt2.py": train}),
                   script="train_gpt2.py", metric="val_loss")
    assert "max_lr" in plan.space
    assert "B" not in plan.space and "min_lr" not in plan.space


WLM_MODEL = """\
import torch


class RNNModel(torch.nn.Module):
    def __init__(self, ntoken, nhid, nlayers):
        super().__init__()
        self.nhid, self.nlayers = nhid, nlayers
        self.rnn = torch.nn.GRU(ntoken, nhid, nlayers)
        self.out = torch.nn.Linear(nhid, ntoken)

    def init_hidden(self, bsz):
        return torch.zeros(self.nlayers, bsz, self.nhid)

    def forward(self, x, hidden):
        out, hidden = self.rnn(x, hidden)
        return self.out(out), hidden
"""

WLM_MAIN = """\
import argparse

import torch

import model as model_module

parser = argparse.ArgumentParser()
parser.add_argument('--lr', type=float, default=20)
parser.add_argument('--nhid', type=int, default=16)
parser.add_argument('--nlayers', type=int, default=2)
parser.add_argument('--bptt', type=int, default=8)
args = parser.parse_args()

eval_batch_size = 4
val_data = torch.randn(64, eval_batch_size, 10)
train_data = torch.randn(256, eval_batch_size, 10)
model = model_module.RNNModel(10, args.nhid, args.nlayers)
criterion = torch.nn.MSELoss()


def evaluate(data_source):
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data = data_source[i:i + args.bptt]
            output, hidden = model(data, hidden)
            total_loss += len(data) * criterion(output, data).item()
    return total_loss / len(data_source)


def train():
    model.train()
    for i in range(0, train_data.size(0) - 1, args.bptt):
        model.zero_grad()
        output, _ = model(train_data[i:i + args.bptt], model.init_hidden(eval_batch_size))
        criterion(output, train_data[i:i + args.bptt]).backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-args.lr)


for epoch in range(2):
    train()
    val_loss = evaluate(val_data)
    print('| end of epoch {:3d} | valid loss {:5.2f}'.format(epoch, val_loss))
"""


def test_a_method_of_the_trained_model_is_not_the_measurement(tmp_path):
    """pytorch/examples' word_language_model: `hidden = model.init_hidden(eval_batch_size)`
    in evaluate reaches the model's own code, whose `self.nhid`, `self.nlayers` are model
    dims: searched; the validation's bptt is left out."""
    repo = make_repo(tmp_path / "wlm", {"main.py": WLM_MAIN, "model.py": WLM_MODEL})
    plan = analyse(repo, metric="valid_loss")
    assert {"nhid", "nlayers", "lr"} <= set(plan.space), plan.skipped
    assert any(s.startswith("bptt (") for s in plan.skipped)


LAST_LOSS_TRAIN = """\
from functools import partial

import torch

batch_size = 8
max_seq_len = 16
learning_rate = 5e-4
dim = 32
max_iters = 20
eval_interval = 10
eval_iters = 2


class Model(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.emb = torch.nn.Embedding(64, dim)
        self.out = torch.nn.Linear(dim, 64)
        self.last_loss = None

    def forward(self, x, y):
        logits = self.out(self.emb(x))
        self.last_loss = torch.nn.functional.cross_entropy(logits.view(-1, 64), y.view(-1))
        return logits


def batches(split, batch_size, max_seq_len):
    data = torch.randint(0, 64, (2000 if split == "train" else 500,))
    while True:
        ix = torch.randint(len(data) - max_seq_len - 1, (batch_size,))
        yield (torch.stack([data[i:i + max_seq_len] for i in ix]),
               torch.stack([data[i + 1:i + 1 + max_seq_len] for i in ix]))


iter_batches = partial(batches, batch_size=batch_size, max_seq_len=max_seq_len)
model = Model(dim)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
raw_model = model


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        batch_iter = iter_batches(split=split)
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = next(batch_iter)
            logits = model(X, Y)
            loss = raw_model.last_loss
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


train_iter = iter_batches(split="train")
for it in range(max_iters):
    if it % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    X, Y = next(train_iter)
    model(X, Y)
    raw_model.last_loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def test_the_data_an_evaluating_function_calls_the_model_on_is_the_measurement(tmp_path):
    """llama2.c's estimate_loss: `logits = model(X, Y)`, then `loss = raw_model.last_loss`
    (state the call leaves), X, Y from `iter_batches = partial(..., batch_size=batch_size,
    max_seq_len=max_seq_len)`: the loss never names X, yet they are what it measures."""
    repo = make_repo(tmp_path / "l2c", {"train.py": LAST_LOSS_TRAIN})
    plan = analyse(repo, metric="val_loss")
    assert {"batch_size (sets the validation batch)",
            "max_seq_len (sets the validation sequence length)"} <= set(plan.skipped)
    assert {"learning_rate", "dim"} <= set(plan.space)


def test_a_setting_the_data_fixes_is_not_searched(tmp_path):
    """yunjey's pytorch-tutorial: `num_classes = 10` (MNIST has 10) beside `learning_rate`:
    the classes the accuracy is over are the data's, not a setting to search."""
    train = GET_BATCH_TRAIN.replace("n_embd = 32\n", "n_embd = 32\nnum_classes = 65\n").replace(
        "torch.nn.Linear(n_embd, 65)", "torch.nn.Linear(n_embd, num_classes)")
    plan = analyse(make_repo(tmp_path / "cls", {"gpt.py": train}), script="gpt.py",
                   metric="val_loss")
    assert "num_classes (fixed by the data)" in plan.skipped
    assert {"learning_rate", "n_embd"} <= set(plan.space)


TRAINER_FINETUNE = '''\
import fire
import transformers
from datasets import load_dataset


def train(data_path: str = "data.json", learning_rate: float = 3e-4, cutoff_len: int = 256,
          val_set_size: int = 200, lora_r: int = 8):
    tokenizer = transformers.AutoTokenizer.from_pretrained("gpt2")

    def tokenize(prompt):
        result = tokenizer(prompt, truncation=True, max_length=cutoff_len)
        result["labels"] = result["input_ids"].copy()
        return result

    def tokenize_point(point):
        return tokenize(point["text"])

    data = load_dataset("json", data_files=data_path)
    if val_set_size > 0:
        split = data["train"].train_test_split(test_size=val_set_size)
        train_data = split["train"].map(tokenize_point)
        val_data = split["test"].map(tokenize_point)
    else:
        train_data = data["train"].map(tokenize_point)
        val_data = None
    model = transformers.AutoModelForCausalLM.from_pretrained("gpt2")
    trainer = transformers.Trainer(
        model=model, train_dataset=train_data, eval_dataset=val_data,
        args=transformers.TrainingArguments(learning_rate=learning_rate, output_dir="out"))
    trainer.train()


if __name__ == "__main__":
    fire.Fire(train)
'''


def test_what_a_trainer_evaluates_on_is_the_measurement(tmp_path):
    """alpaca-lora's finetune.py: the Trainer prints eval_loss over `eval_dataset=val_data`,
    made in one branch of an `if` (the other sets None) by mapping a local function that
    truncates to the entry point's `cutoff_len` through a closure: cutoff_len changes what
    eval_loss measures; the learning rate does not."""
    repo = make_repo(tmp_path / "finetune", {"finetune.py": TRAINER_FINETUNE})
    plan = analyse(repo, script="finetune.py")
    assert plan.metric == "eval_loss"
    assert "cutoff_len (sets the validation sequence length)" in plan.skipped, plan.skipped
    assert "cutoff_len" not in plan.space and "--cutoff_len" not in plan.space
    assert {"learning_rate", "lora_r"} <= {n.lstrip("-") for n in plan.space}, plan.space


TYPER_CLI = '''\
import typer
import trainer

app = typer.Typer()


@app.command()
def train_cli(epochs: int = 100, batch_size: int = 4, block_size: int = 64,
              lr: float = 3e-4):
    trainer.train(epochs=epochs, batch_size=batch_size, block_size=block_size, lr=lr)


@app.command()
def download(local_dir: str = "data"):
    print("downloading to", local_dir)


if __name__ == "__main__":
    app()
'''

TYPER_TRAINER = '''\
import torch


def batches(data, batch_size, block_size):
    starts = torch.randint(0, len(data) - block_size - 1, (batch_size,))
    return torch.stack([data[s:s + block_size + 1] for s in starts])


def train(epochs=100, batch_size=4, block_size=64, lr=3e-4):
    data = torch.randint(0, 16, (4096,))
    train_data, val_data = data[:3000], data[3000:]
    model = torch.nn.Sequential(torch.nn.Embedding(16, 32), torch.nn.Linear(32, 16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for epoch in range(epochs):
        xy = batches(train_data, batch_size, block_size)
        loss = torch.nn.functional.cross_entropy(model(xy[:, :-1]).transpose(1, 2), xy[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            xy = batches(val_data, batch_size, block_size)
            val_loss = torch.nn.functional.cross_entropy(
                model(xy[:, :-1]).transpose(1, 2), xy[:, 1:])
        print(f"epoch {epoch} | val_loss: {val_loss.item():.4f}")


if __name__ == "__main__":
    train()
'''


def test_a_typer_commands_options_are_settings_measured_through_the_module_it_calls(tmp_path):
    """gpt2-style-transformer's cli.py: a typer app of two commands; `train-cli` passes its
    options on to the imported trainer.train, which prints val_loss over a validation batch
    of batch_size x block_size (and calls `train()` itself, leaving them at their defaults):
    the run names the command, lr is searched as `--lr`, batch and block size are left out."""
    repo = make_repo(tmp_path / "typer", {"cli.py": TYPER_CLI, "trainer.py": TYPER_TRAINER})
    plan = analyse(repo, script="cli.py", metric="val_loss")
    assert plan.args.split()[:1] == ["train-cli"], plan.args
    assert plan.flags_how == "typer" and "batch-size" in plan.flags, plan.flags
    assert "lr" in plan.space, (plan.space, plan.skipped)
    assert {"batch-size (sets the validation batch)",
            "block-size (sets the validation sequence length)"} <= set(plan.skipped)


MAKEMORE_SHAPED = """\
import argparse

import torch
from torch import nn


def evaluate(model, data, batch_size=50):
    with torch.no_grad():
        x, y = data
        return nn.functional.mse_loss(model(x[:batch_size]), y[:batch_size]).item()


def print_samples(num=10):
    with torch.no_grad():
        print(model(torch.randn(num, 4)).sum(dim=1).tolist())


parser = argparse.ArgumentParser()
parser.add_argument('--sample-only', action='store_true')
parser.add_argument('--max-steps', type=int, default=40)
parser.add_argument('--learning-rate', type=float, default=1e-2)
args = parser.parse_args()

torch.manual_seed(0)
train = (torch.randn(64, 4), torch.randn(64, 1))
test = (torch.randn(64, 4), torch.randn(64, 1))
model = nn.Linear(4, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
if args.sample_only:
    print_samples(num=50)
    raise SystemExit
for step in range(args.max_steps):
    loss = nn.functional.mse_loss(model(train[0]), train[1])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print_samples(num=4)
print(f"step {step} test loss: {evaluate(model, test)}")
"""


def test_a_keyword_argument_of_a_printed_sample_is_not_searched(tmp_path):
    """karpathy/makemore: `print_samples(num=50)`, in the --sample-only branch, was searched
    by the corpus's night (`Set print_samples.num to 52 (was 50)`): a keyword of a call that
    only prints, its result dropped, cannot reach the metric; the optimizer's stay."""
    repo = make_repo(tmp_path / "makemore", {"makemore.py": MAKEMORE_SHAPED})
    done = run_cli("init", "--script", "makemore.py", "--metric", "test_loss", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    space = yaml.safe_load((repo / "task.yaml").read_text())["search_space"]
    assert not any(name.startswith("print_samples") for name in space), space
    assert "print_samples.num (only feeds output test_loss never reads)" in done.stdout
    assert {"AdamW.weight_decay", "learning-rate"} <= set(space)


ADDER_SHAPED = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x_train, y_train = torch.randn(64, 4), (torch.randn(64) > 0).long()
x_test, y_test = torch.randn(40, 4), (torch.randn(40) > 0).long()
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    loss = nn.functional.cross_entropy(model(x_train), y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def eval_split(split):
    results = []
    loader = DataLoader(TensorDataset(x_test, y_test), batch_size=10, drop_last=False)
    for b, (x, y) in enumerate(loader):
        correct = model(x).argmax(-1) == y
        for i in range(x.size(0)):
            results.append(int(correct[i]))
    rt = torch.tensor(results, dtype=torch.float)
    print("%s final score: %d/%d = %.2f%% correct" % (split, rt.sum(), len(results),
                                                       100 * rt.mean()))


eval_split('test')
"""


def test_a_metric_gathered_with_append_is_followed_to_its_loader(tmp_path):
    """karpathy/minGPT's adder: `eval_split` appends each example's result to a list the score
    is computed from; the corpus's night searched its evaluation loader's batch_size, since
    the slice did not follow `results.append(...)` back to the loop over the loader."""
    repo = make_repo(tmp_path / "adder", {"adder.py": ADDER_SHAPED})
    done = run_cli("init", "--script", "adder.py", "--metric", "test_final_score", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    space = yaml.safe_load((repo / "task.yaml").read_text())["search_space"]
    assert set(space) == {"SGD.lr"}, space
    assert "DataLoader.batch_size (sets the validation batch)" in done.stdout
