"""Protected harness for the classify task: the data, the train/test split, the submission.

The data is generated, not downloaded: three spiral arms in a 2-D plane, hidden in 10
dimensions by a fixed rotation, plus 4 pure-noise features and 5% flipped labels. A linear
model scores about 0.5, a well-tuned small MLP about 0.9. Only rng.random() is called, so
the numbers are the same on every Python version.

The experiment (train.py) gets the training set and the test *inputs*; the test labels are
made by `test_labels()`, which only the protected grader (evaluate.py) calls, at grading
time, in memory. Caveat, stated plainly: for generated data the generator is itself the
answer key; a task whose held-out answers must stay secret keeps them in a `private`
folder instead (see docs/tasks.md).
"""
import math
import random

N_CLASSES = 3
N_FEATURES = 10          # 2 informative directions (rotated) + 4 rotated distractors + 4 noise
N_TRAIN = 1500
N_TEST = 1000
LABEL_NOISE = 0.05       # fraction of labels flipped to another class (train and test)
TRAIN_SEED = 1234
TEST_SEED = 98765        # a different seed: no test point is a copy of a training point
ROTATION_SEED = 7
SUBMISSION = "submission.csv"   # written by train.py in $AUTORESEARCH_ARTIFACT_DIR: id,label


def _gauss(rng):
    """A standard normal draw from two uniforms (Box-Muller), stable across versions."""
    u1, u2 = 1.0 - rng.random(), rng.random()
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def _rotation(n, seed):
    """A fixed random orthonormal n x n matrix (Gram-Schmidt on Gaussian rows)."""
    rng = random.Random(seed)
    rows = []
    while len(rows) < n:
        v = [_gauss(rng) for _ in range(n)]
        for r in rows:
            dot = sum(a * b for a, b in zip(v, r))
            v = [a - dot * b for a, b in zip(v, r)]
        norm = math.sqrt(sum(a * a for a in v))
        if norm > 1e-6:
            rows.append([a / norm for a in v])
    return rows


def _generate(n, seed):
    """n points (features, label): spiral arm `label`, rotated into N_FEATURES dims."""
    rng = random.Random(seed)
    rot = _rotation(N_FEATURES - 4, ROTATION_SEED)
    xs, ys = [], []
    for _ in range(n):
        label = int(rng.random() * N_CLASSES)
        t = rng.random()
        radius = 0.3 + 2.2 * t
        angle = 2 * math.pi * label / N_CLASSES + 3.5 * t + 0.15 * _gauss(rng)
        plane = [radius * math.cos(angle), radius * math.sin(angle)]
        hidden = plane + [0.6 * _gauss(rng) for _ in range(N_FEATURES - 6)]
        rotated = [sum(r[j] * hidden[j] for j in range(len(hidden))) for r in rot]
        noise = [_gauss(rng) for _ in range(4)]
        if rng.random() < LABEL_NOISE:
            label = (label + 1 + int(rng.random() * (N_CLASSES - 1))) % N_CLASSES
        xs.append(rotated + noise)
        ys.append(label)
    return xs, ys


def load_train():
    """(features, labels): N_TRAIN rows of N_FEATURES floats, labels in 0..N_CLASSES-1."""
    return _generate(N_TRAIN, TRAIN_SEED)


def load_test():
    """(ids, features) of the test set; its labels are the grader's."""
    xs, _ = _generate(N_TEST, TEST_SEED)
    return list(range(N_TEST)), xs


def test_labels():
    """The held-out labels, by id. Called by the protected grader only."""
    return _generate(N_TEST, TEST_SEED)[1]
