"""Editable baseline for an MLE-bench competition, written by `autoresearch task mlebench`.

Reads $DATA_DIR/train.csv and test.csv, trains a small MLP on the numeric columns (and
one-hot codes of the few-valued text columns), and writes predictions in
sample_submission.csv's format to $AUTORESEARCH_ARTIFACT_DIR/submission.csv, which the
protected grader scores. A starting point for tabular data; for images, text or other
layouts, rewrite it.
"""
import csv
import math
import os
import time

import torch
import torch.nn as nn

HIDDEN = 32             # hidden units
DEPTH = 1               # hidden layers
LEARNING_RATE = 0.01    # AdamW learning rate
WEIGHT_DECAY = 0.0001   # AdamW weight decay
EPOCHS = 20             # passes over the training data (the time budget may stop it earlier)
BATCH_SIZE = 64         # rows per step
MAX_CATEGORIES = 10     # text columns with at most this many values are one-hot coded
PREDICT = 'label'       # 'label' (the class itself) or 'probability' (of the positive class)

DATA = os.environ.get("DATA_DIR", ".")


def read(name):
    with open(os.path.join(DATA, name), newline="") as f:
        return list(csv.DictReader(f))


def number(text):
    try:
        x = float(text)
        return x if math.isfinite(x) else None
    except (TypeError, ValueError):
        return None


def encoder(train, test, id_col, targets):
    """Feature columns: numbers as they are (blank -> mean), few-valued text one-hot."""
    cols = [c for c in test[0] if c != id_col and c in train[0] and c not in targets]
    parts: list = []     # row -> its features from one column
    for c in cols:
        values = [r[c] for r in train]
        nums = [number(v) for v in values if v != ""]
        if nums and all(x is not None for x in nums):
            mean = sum(nums) / len(nums)
            sd = math.sqrt(sum((x - mean) ** 2 for x in nums) / len(nums)) or 1.0
            parts.append(lambda r, c=c, m=mean, s=sd: [((number(r[c]) or m) - m) / s])
        else:
            cats = sorted(set(values))
            if len(cats) <= MAX_CATEGORIES:
                parts.append(lambda r, c=c, cats=cats: [float(r[c] == k) for k in cats])
    return lambda rows: torch.tensor([[v for p in parts for v in p(r)] for r in rows])


def main():
    t0 = time.time()
    budget = float(os.environ.get("AUTORESEARCH_TIME_BUDGET", "60"))
    torch.manual_seed(int(os.environ.get("AUTORESEARCH_SEED", "0")))
    sample, train, test = read("sample_submission.csv"), read("train.csv"), read("test.csv")
    id_col, targets = list(sample[0])[0], list(sample[0])[1:]
    if len(targets) != 1 or targets[0] not in train[0]:
        raise SystemExit(f"this starter predicts one column present in train.csv; the "
                         f"submission wants {targets}: rewrite train.py for this competition")
    target = targets[0]
    encode = encoder(train, test, id_col, targets)
    x, x_test = encode(train), encode(test)
    values = [r[target] for r in train]
    classes = sorted(set(values))
    regression = len(classes) > 20 and all(number(v) is not None for v in values)
    loss_fn: nn.Module
    if regression:
        y = torch.tensor([[number(v)] for v in values])
        y_mean, y_sd = y.mean(), y.std() + 1e-9
        y = (y - y_mean) / y_sd
        n_out, loss_fn = 1, nn.MSELoss()
    else:
        y = torch.tensor([classes.index(v) for v in values])
        n_out, loss_fn = len(classes), nn.CrossEntropyLoss()
    layers, width = [], x.shape[1]
    for _ in range(DEPTH):
        layers += [nn.Linear(width, HIDDEN), nn.ReLU()]
        width = HIDDEN
    model = nn.Sequential(*layers, nn.Linear(width, n_out))
    opt = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    for epoch in range(EPOCHS):  # noqa: B007 (printed after the loop)
        order = torch.randperm(len(x))
        for i in range(0, len(x), BATCH_SIZE):
            batch = order[i:i + BATCH_SIZE]
            loss = loss_fn(model(x[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if time.time() - t0 > budget:
            break
    print(f"epochs: {epoch + 1}, final train loss: {loss.item():.4f}")
    with torch.no_grad():
        out = model(x_test)
    if regression:
        preds = (out[:, 0] * y_sd + y_mean).tolist()
    elif PREDICT == "probability" and len(classes) == 2:
        preds = torch.softmax(out, dim=1)[:, 1].tolist()
    else:
        preds = [classes[i] for i in out.argmax(dim=1).tolist()]
    path = os.path.join(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".", "submission.csv")
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([id_col, target])
        writer.writerows(zip([r[id_col] for r in test], preds))
    print(f"wrote {len(preds)} predictions to {path} in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
