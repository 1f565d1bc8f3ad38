"""Editable research target: a small MLP classifier, trained within the time budget.

The loop edits this file and keeps a change only if the grader's test accuracy goes up.
Contract with the protected grader (evaluate.py): write every test id's predicted class to
$AUTORESEARCH_ARTIFACT_DIR/submission.csv (header `id,label`). Whatever this script
prints about accuracy is for you; the metric is the grader's.
"""
import csv
import os
import time

import torch
import torch.nn as nn

import prepare

# --- hyperparameters (plain numbers, so a mutator can perturb them) ---------------------
HIDDEN = 16             # hidden units per layer
DEPTH = 1               # hidden layers
LEARNING_RATE = 0.003   # AdamW learning rate
WEIGHT_DECAY = 0.0      # AdamW decoupled weight decay
EPOCHS = 15             # passes over the training set (the time budget may stop it earlier)
BATCH_SIZE = 128        # examples per step
VAL_FRACTION = 0.1      # training rows held out to print a validation accuracy


def build_model(n_in, n_out):
    layers, width = [], n_in
    for _ in range(DEPTH):
        layers += [nn.Linear(width, HIDDEN), nn.ReLU()]
        width = HIDDEN
    layers.append(nn.Linear(width, n_out))
    return nn.Sequential(*layers)


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item() if len(y) else float("nan")


def main():
    t0 = time.time()
    budget = float(os.environ.get("AUTORESEARCH_TIME_BUDGET", "10"))
    torch.manual_seed(int(os.environ.get("AUTORESEARCH_SEED", "0")))
    torch.set_num_threads(1)

    xs, ys = prepare.load_train()
    x, y = torch.tensor(xs), torch.tensor(ys)
    mean, std = x.mean(0), x.std(0) + 1e-6
    x = (x - mean) / std
    perm = torch.randperm(len(y))
    n_val = int(len(y) * VAL_FRACTION)
    val, train = perm[:n_val], perm[n_val:]

    model = build_model(prepare.N_FEATURES, prepare.N_CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    loss_fn = nn.CrossEntropyLoss()
    epoch = 0
    for epoch in range(1, EPOCHS + 1):
        order = train[torch.randperm(len(train))]
        for i in range(0, len(order), BATCH_SIZE):
            batch = order[i:i + BATCH_SIZE]
            loss = loss_fn(model(x[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if time.time() - t0 > budget:
            break
    print(f"epochs:         {epoch}")
    print(f"train_accuracy: {accuracy(model, x[train], y[train]):.4f}")
    print(f"val_accuracy:   {accuracy(model, x[val], y[val]):.4f}")

    ids, test_xs = prepare.load_test()
    with torch.no_grad():
        preds = model((torch.tensor(test_xs) - mean) / std).argmax(dim=1).tolist()
    out = os.path.join(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "artifacts",
                       prepare.SUBMISSION)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "label"])
        writer.writerows(zip(ids, preds))
    print(f"wrote {len(preds)} predictions to {out} in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
