"""Editable: the repository agent under improvement. For each instruction in tasks.jsonl it
writes the shell command that carries it out in the tinyfit repository (repo/) to
$AUTORESEARCH_ARTIFACT_DIR/commands.jsonl; the protected grader (evaluate.py) executes the
commands and checks what they produced.

Offline stand-in: a rule-based agent whose switches are plain numbers (mutate can flip
them). A real ML-Bench agent reads the repository's README with a model and writes the
command; the loop improves its prompts and code the same way.
"""
import json
import os
import re

PARSE_EPOCHS = 1        # 1: take the epoch count from the instruction
PARSE_LR = 0            # 1: take the learning rate from the instruction
PARSE_OUT = 1           # 1: take the output file name from the instruction
DEFAULT_EPOCHS = 1


def command(instruction):
    text = instruction.lower()
    model = "mlp" if "mlp" in text else "linear"
    parts = ["python repo/train.py", f"--model {model}"]
    epochs = re.search(r"(\d+)\s+epochs?", text)
    parts.append(f"--epochs {epochs.group(1) if epochs and PARSE_EPOCHS >= 1 else DEFAULT_EPOCHS}")
    lr = re.search(r"learning rate (?:of )?([0-9.]*[0-9])", text)
    if lr and PARSE_LR >= 1:
        parts.append(f"--lr {lr.group(1)}")
    out = re.search(r"([\w-]+\.json)", text)
    if out and PARSE_OUT >= 1:
        parts.append(f"--out {out.group(1)}")
    return " ".join(parts)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "tasks.jsonl")) as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    out = os.path.join(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".", "commands.jsonl")
    with open(out, "w") as f:
        for t in tasks:
            f.write(json.dumps({"id": t["id"], "command": command(t["instruction"])}) + "\n")
    print(f"wrote {len(tasks)} commands to {out}")


if __name__ == "__main__":
    main()
