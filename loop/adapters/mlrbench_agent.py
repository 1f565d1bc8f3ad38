"""Editable: the research agent under improvement, copied into the task folder by
`autoresearch task mlrbench` as agent.py. Given the workshop task (task.md) it asks its
model for a paper and writes it to $AUTORESEARCH_ARTIFACT_DIR/paper.md, which the protected
review.py has the judge score. (It may also write idea.md, related_work.md, proposal.md and
results.md there: the reviewer reads them as MLR-Bench's does.)

Its model: AGENT_BASE_URL, AGENT_API_KEY and AGENT_MODEL (task.yaml `pass_env`), never the
judge's variables. Everything here may change: the prompts, the stages, the numbers."""
import os
import sys
from pathlib import Path

TEMPERATURE = 0.7
MAX_TOKENS = 6000
SECTIONS = ("Title", "Abstract", "Introduction", "Related Work", "Method", "Experiments",
            "Results", "Analysis", "Limitations", "Conclusion")

PROMPT = """You are a machine learning researcher. Write a complete research paper in
Markdown for the workshop task below. Use these sections: {sections}. Make the claims
specific, describe the experiments so they could be reproduced, and report results in
tables.

# Workshop task

{task}
"""


def main() -> int:
    model = os.environ.get("AGENT_MODEL")
    if not model:
        print("error: agent.py needs its model: set AGENT_MODEL (and AGENT_BASE_URL, "
              "AGENT_API_KEY) in the engine's environment")
        return 1
    import openai
    client = openai.OpenAI(base_url=os.environ.get("AGENT_BASE_URL") or None,
                           api_key=os.environ.get("AGENT_API_KEY") or "none")
    task = (Path(__file__).resolve().parent / "task.md").read_text()
    reply = client.chat.completions.create(
        model=model, temperature=TEMPERATURE, max_tokens=MAX_TOKENS,
        messages=[{"role": "user", "content": PROMPT.format(sections=", ".join(SECTIONS),
                                                            task=task)}])
    paper = reply.choices[0].message.content or ""
    out = Path(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".") / "paper.md"
    out.write_text(paper)
    print(f"wrote {len(paper.split())} words to {out.name}")
    return 0 if paper.strip() else 1


if __name__ == "__main__":
    sys.exit(main())
