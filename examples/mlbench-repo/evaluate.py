"""Protected grader, scored by execution as ML-Bench scores: each command the agent wrote
runs in a fresh copy of the repository (time-limited), and passes if it produced the
expected output file with the expected configuration. Prints pass_rate.

Stand-in caveats: the expected results live here, and commands run on this machine; the
real benchmark keeps its references out of the agent's reach and runs commands in a
container. Run the loop in one too if the agent's commands are not trusted.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

EXPECTED = {   # task id -> (output file, configuration it must hold)
    1: ("run1.json", {"model": "linear", "epochs": 3, "lr": 0.01}),
    2: ("run2.json", {"model": "mlp", "epochs": 10, "lr": 0.001}),
    3: ("run3.json", {"model": "mlp", "epochs": 1, "lr": 0.05}),
    4: ("run4.json", {"model": "linear", "epochs": 5, "lr": 0.1}),
    5: ("run5.json", {"model": "mlp", "epochs": 2, "lr": 0.01}),
}
TIMEOUT_S = 20


def passes(command, out_name, expected, here):
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(os.path.join(here, "repo"), os.path.join(tmp, "repo"))
        try:
            subprocess.run(command, shell=True, cwd=tmp, timeout=TIMEOUT_S,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False
        try:
            with open(os.path.join(tmp, out_name)) as f:
                got = json.load(f)
        except (OSError, ValueError):
            return False
    return all(got.get(k) == v for k, v in expected.items())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".", "commands.jsonl")
    if not os.path.isfile(path):
        print(f"error: no commands at {path}")
        sys.exit(2)
    with open(path) as f:
        commands = {c["id"]: c["command"] for c in map(json.loads, filter(str.strip, f))}
    passed = 0
    for task_id, (out_name, expected) in sorted(EXPECTED.items()):
        ok = task_id in commands and passes(commands[task_id], out_name, expected, here)
        print(f"task {task_id}: {'pass' if ok else 'fail'}")
        passed += ok
    print(f"pass_rate: {passed / len(EXPECTED):.4f}")


if __name__ == "__main__":
    main()
