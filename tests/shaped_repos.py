"""Fixture repos of the shapes people have, written here (no public repo's code): a
karpathy-shaped tabular repo whose protected module evaluates and prints, and a
nanoGPT-style script with lowercase settings and a log line. Pure Python: they run in a
second on any interpreter."""
from __future__ import annotations

# karpathy's layout for tabular data: prepare.py (protected) splits the data with a fixed
# seed, evaluates a model and prints the summary, validation first; train.py is what the
# user runs, and it fixes its own seed.
TABULAR_PREPARE = '''\
"""Data, split and evaluation. Do not edit: the validation metric is the target, the test
metric is for reporting only."""
import random

RANDOM_STATE = 42          # the data split's seed
TIME_BUDGET = 2            # seconds of training
N_ROWS = 400


def load_data():
    rng = random.Random(RANDOM_STATE)
    rows = [(x, int(x + rng.gauss(0, 0.3) > 0.5)) for x in (rng.random() for _ in range(N_ROWS))]
    return rows[:200], rows[200:300], rows[300:]


def _auc(model, rows):
    pos = [model(x) for x, y in rows if y]
    neg = [model(x) for x, y in rows if not y]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / max(1, len(pos) * len(neg))


def evaluate(model, val, test):
    val_auc = _auc(model, val)
    test_auc = _auc(model, test)
    print("---")
    print(f"val_auc: {val_auc:.6f}")
    print(f"test_auc: {test_auc:.6f}")
    return val_auc
'''

TABULAR_TRAIN = '''\
import random
from prepare import TIME_BUDGET, evaluate, load_data

THRESHOLD = 0.4
NOISE = 0.05
random.seed(42)

train, val, test = load_data()
print(f"Task: {'toy-auc'}")
model = lambda x: x - THRESHOLD + random.gauss(0, NOISE)
evaluate(model, val, test)
'''

TABULAR_README = "# tabular\n\nPredict the label of a row from its one feature.\n"

# nanoGPT's style: lowercase module-level settings a configurator may override, a fixed
# seed, counters, and a log line carrying the validation loss.
NANO_TRAIN = '''\
import math
import random
out_dir = 'out'
eval_interval = 5
log_interval = 1
eval_iters = 2
batch_size = 12
block_size = 64
n_layer = 4
dropout = 0.0
learning_rate = 6e-4
beta2 = 0.95
max_iters = 20
seed_offset = 0
config_keys = [k for k, v in globals().items() if not k.startswith('_')]
exec(open('configurator.py').read())
random.seed(1337 + seed_offset)
iter_num = 0
best_val_loss = 1e9
while iter_num <= max_iters:
    loss = 2.0 + abs(math.log(learning_rate / 1e-3)) + 1.0 / (n_layer * (iter_num + 1))
    loss += dropout + (1 - beta2) + 1.0 / (batch_size * block_size)
    if iter_num % eval_interval == 0:
        losses = {'train': loss - 0.05, 'val': loss + random.random() * 0.01}
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        best_val_loss = min(best_val_loss, losses['val'])
    if iter_num % log_interval == 0:
        print(f"iter {iter_num}: loss {loss:.4f}, time {12.5:.2f}ms")
    iter_num += 1
'''

NANO_CONFIGURATOR = '''\
import sys
for arg in sys.argv[1:]:
    key, val = arg.split('=')
    key = key[2:]
    attempt = val
    print(f"Overriding: {key} = {attempt}")
    globals()[key] = type(globals()[key])(attempt)
'''

# nanoGPT's layout, as a repo that is checked out and prepared: a committed
# data/<dataset>/prepare.py writes train.bin, val.bin and meta.pkl, all git-ignored; train.py
# builds their path itself from `dataset`; a config file under config/ (plain `name = value`
# assignments) is passed on the command line and read by the configurator.
NANOGPT_PREPARE = '''\
import os
import pickle
here = os.path.dirname(os.path.abspath(__file__))
text = bytes(range(32, 127)) * 40
cut = int(len(text) * 0.9)
with open(os.path.join(here, 'train.bin'), 'wb') as f:
    f.write(text[:cut])
with open(os.path.join(here, 'val.bin'), 'wb') as f:
    f.write(text[cut:])
with open(os.path.join(here, 'meta.pkl'), 'wb') as f:
    pickle.dump({'vocab_size': 95}, f)
'''

NANOGPT_TRAIN = '''\
import math
import os
import random
out_dir = 'out'
eval_interval = 5
eval_iters = 2
dataset = 'openwebtext'
batch_size = 12
n_layer = 12
learning_rate = 6e-4
dropout = 0.0
max_iters = 10
config_keys = [k for k, v in globals().items() if not k.startswith('_')]
exec(open('configurator.py').read())
random.seed(int(os.environ.get('AUTORESEARCH_SEED', '0')))
data_dir = os.path.join('data', dataset)
train_data = open(os.path.join(data_dir, 'train.bin'), 'rb').read()
val_data = open(os.path.join(data_dir, 'val.bin'), 'rb').read()
iter_num = 0
while iter_num <= max_iters:
    loss = 2.0 + abs(math.log(learning_rate / 1e-3)) + 1.0 / (n_layer * (iter_num + 1))
    loss += dropout + 1.0 / batch_size + 100.0 / len(train_data)
    if iter_num % eval_interval == 0:
        val = loss + 10.0 / len(val_data) + random.random() * 0.01
        print(f"step {iter_num}: train loss {loss:.4f}, val loss {val:.4f}")
    print(f"iter {iter_num}: loss {loss:.4f}, time {12.5:.2f}ms")
    iter_num += 1
'''

NANOGPT_CONFIGURATOR = '''\
import sys
for arg in sys.argv[1:]:
    if '=' not in arg:
        print(f"Overriding config with {arg}:")
        exec(open(arg).read())
    else:
        key, val = arg.split('=')
        key = key[2:]
        globals()[key] = type(globals()[key])(val)
'''

NANOGPT_CONFIG = '''\
out_dir = 'out-shakespeare-char'
dataset = 'shakespeare_char'
n_layer = 4
learning_rate = 1e-3
max_iters = 10
'''

NANOGPT_IGNORE = "__pycache__/\n*.bin\n*.pkl\nout*/\n"


def nanogpt_repo(root, prepared: bool = True):
    """A nanoGPT-shaped git repo at `root`, committed; its data prepared (ignored files
    written by the committed prepare.py) unless `prepared` is False."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(root)
    files = {"train.py": NANOGPT_TRAIN, "configurator.py": NANOGPT_CONFIGURATOR,
             "config/train_shakespeare_char.py": NANOGPT_CONFIG,
             "data/shakespeare_char/prepare.py": NANOGPT_PREPARE,
             ".gitignore": NANOGPT_IGNORE, "README.md": "# nano\n\nA tiny character model.\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    def git(*args):
        subprocess.run(["git", "-c", "user.name=Tester", "-c", "user.email=t@example.com",
                        *args], cwd=root, check=True, capture_output=True)
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "nano")
    if prepared:
        subprocess.run([sys.executable, "data/shakespeare_char/prepare.py"], cwd=root,
                       check=True)
    return root
