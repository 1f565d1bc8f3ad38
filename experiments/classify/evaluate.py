"""Protected grader for the classify task: run by the engine after train.py, from a pristine
copy of this folder. It reads the predictions train.py handed over in
$AUTORESEARCH_ARTIFACT_DIR/submission.csv (columns id,label; one row per test id) and
scores them against the held-out test labels, which exist only here, in memory.

Exit codes: 0 graded, 2 missing or malformed submission.
"""
import csv
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import prepare  # noqa: E402  (this folder's protected prepare.py, never the run's)


def fail(message):
    print(f"error: {message}", flush=True)
    sys.exit(2)


def read_submission(path):
    if not path.is_file():
        fail(f"submission not found: {path}")
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or [c.strip() for c in rows[0]] != ["id", "label"]:
        fail(f"{path.name}: the header must be 'id,label'")
    preds = {}
    for line, row in enumerate(rows[1:], start=2):
        try:
            i, label = int(row[0]), int(row[1])
        except (ValueError, IndexError):
            fail(f"{path.name}:{line}: expected two integers, got {row!r}")
        if i in preds:
            fail(f"{path.name}:{line}: id {i} appears twice")
        if not 0 <= label < prepare.N_CLASSES:
            fail(f"{path.name}:{line}: label {label} is not a class (0..{prepare.N_CLASSES - 1})")
        preds[i] = label
    missing = set(range(prepare.N_TEST)) - set(preds)
    if missing or len(preds) != prepare.N_TEST:
        fail(f"{path.name}: expected ids 0..{prepare.N_TEST - 1} once each "
             f"({len(missing)} missing, {len(set(preds) - set(range(prepare.N_TEST)))} unknown)")
    return preds


def main():
    art = Path(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "artifacts")
    preds = read_submission(art / prepare.SUBMISSION)
    labels = prepare.test_labels()
    correct = sum(preds[i] == y for i, y in enumerate(labels))
    print(f"test_rows:  {len(labels)}")
    print(f"accuracy:   {correct / len(labels):.6f}")


if __name__ == "__main__":
    main()
