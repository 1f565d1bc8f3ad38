"""Editable: the research agent under improvement. Given the workshop task (task.md), it
writes a short paper to $AUTORESEARCH_ARTIFACT_DIR/paper.md, which the protected reviewer
(review.py) scores.

Offline stand-in: this "agent" fills a template, and its knobs are plain numbers so the
mutate proposer can search them. A real MLR-Bench agent calls a model here (its key passed
with `pass_env: [OPENAI_API_KEY]` in task.yaml) and the loop improves its prompts and code.
"""
import os
import re

N_IDEAS = 1             # ideas sketched before one is chosen
N_EXPERIMENTS = 1       # experiments reported
KEYWORD_COVERAGE = 0.3  # fraction of the task's keywords the paper engages with
LIMITATIONS = 0         # 1: include a limitations section
WORDS_PER_SECTION = 40  # length of each section's body


def keywords(task_text):
    line = next((l for l in task_text.splitlines() if l.startswith("Keywords:")), "")
    return [k.strip() for k in line.split(":", 1)[-1].split(",") if k.strip()]


def section(title, seed_words, n):
    words = (seed_words * (n // max(1, len(seed_words)) + 1))[:n]
    return f"## {title}\n\n{' '.join(words)}.\n"


def write_paper(task_text):
    kws = keywords(task_text)
    used = kws[:max(0, round(KEYWORD_COVERAGE * len(kws)))]
    title = re.sub(r"^#\s*", "", task_text.splitlines()[0])
    parts = [f"# A proposal for: {title}\n",
             section("Hypothesis", ["we", "hypothesize"] + used, WORDS_PER_SECTION),
             section("Method", ["our", "method", "uses"] + used, WORDS_PER_SECTION)]
    for i in range(int(N_IDEAS) - 1):
        parts.append(section(f"Alternative idea {i + 1}", ["alternative"], WORDS_PER_SECTION // 2))
    for i in range(int(N_EXPERIMENTS)):
        parts.append(section(f"Experiment {i + 1}", ["baseline", "versus", "method"] + used,
                             WORDS_PER_SECTION))
    if LIMITATIONS >= 1:
        parts.append(section("Limitations", ["limitations", "include"], WORDS_PER_SECTION))
    return "\n".join(parts)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "task.md")) as f:
        paper = write_paper(f.read())
    out = os.path.join(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".", "paper.md")
    with open(out, "w") as f:
        f.write(paper)
    print(f"wrote {len(paper.split())} words to {out}")


if __name__ == "__main__":
    main()
