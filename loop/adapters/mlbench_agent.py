"""Editable: the repository-level agent under improvement, copied into the task folder by
`autoresearch task mlbench` as agent.py. For each ML-Bench instruction in
instructions.jsonl it answers with a shell command (or Python code) to run in the
instance's folder of the target repository ($MLBENCH_REPO, read-only here), and writes
$AUTORESEARCH_ARTIFACT_DIR/commands.jsonl: one {"id": ..., "outputs": [answer, ...]} per
instruction. The protected grade.py executes the answers (pass@1 is the metric).

Its model: AGENT_BASE_URL, AGENT_API_KEY and AGENT_MODEL (task.yaml `pass_env`)."""
import json
import os
import re
import sys
from pathlib import Path

ANSWERS = 1            # answers per instruction (the grader scores pass@1, @2, @5)
TEMPERATURE = 0.2
README_CHARS = 12000   # how much of the folder's README goes into the prompt

PROMPT = """You work in the repository folder `{path}`. Its README:

{readme}

Task: {instruction}

Answer with one bash command (or a short Python script) that does this from that folder,
in a single ``` block, nothing else."""


def readme(repo: Path, path: str) -> str:
    folder = repo / path.strip().lstrip(".").lstrip("/")
    for candidate in (folder, repo):
        for name in ("README.md", "README.rst", "README.txt", "README"):
            if (candidate / name).is_file():
                return (candidate / name).read_text(errors="replace")[:README_CHARS]
    return "(no README)"


def answer(client, model: str, prompt: str) -> str:
    reply = client.chat.completions.create(model=model, temperature=TEMPERATURE,
                                           messages=[{"role": "user", "content": prompt}])
    text = reply.choices[0].message.content or ""
    block = re.search(r"```(?:\w+)?\n(.*?)```", text, re.S)
    return (block.group(1) if block else text).strip()


def main() -> int:
    model = os.environ.get("AGENT_MODEL")
    if not model:
        print("error: agent.py needs its model: set AGENT_MODEL (and AGENT_BASE_URL, "
              "AGENT_API_KEY) in the engine's environment")
        return 1
    import openai
    client = openai.OpenAI(base_url=os.environ.get("AGENT_BASE_URL") or None,
                           api_key=os.environ.get("AGENT_API_KEY") or "none")
    repo = Path(os.environ.get("MLBENCH_REPO") or ".")
    here = Path(__file__).resolve().parent
    out = Path(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".") / "commands.jsonl"
    with open(out, "w") as f:
        for line in (here / "instructions.jsonl").read_text().splitlines():
            item = json.loads(line)
            prompt = PROMPT.format(path=item["path"], readme=readme(repo, item["path"]),
                                   instruction=item["instruction"])
            outputs = [answer(client, model, prompt) for _ in range(ANSWERS)]
            f.write(json.dumps({"id": item["id"], "outputs": outputs}) + "\n")
    print(f"answered {sum(1 for _ in open(out))} instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
