"""Protected reviewer: scores $AUTORESEARCH_ARTIFACT_DIR/paper.md on MLR-Judge's criteria
(consistency, clarity, novelty, feasibility, significance; 1-10 each) and prints their mean
over REVIEWS independent reviews as review_score.

Offline stand-in for MLR-Judge: a rubric over the paper's structure, plus reviewer noise
drawn from $AUTORESEARCH_SEED, because an LLM reviewer sampled at temperature > 0 gives a
different score each time. Real use: call the judge model here (its key passed with
`grader_env: [OPENAI_API_KEY]`, which the agent's run never sees); keep REVIEWS > 1 and let
the loop's `noise` judge repeat runs (see docs/benchmarks.md).
"""
import os
import random
import re
import sys

REVIEWS = 3             # independent reviews averaged per paper
NOISE = 0.6             # sd of one reviewer's score, in points


def rubric(paper, task):
    sections = re.findall(r"^## (.+)$", paper, re.M)
    kws = [k.strip().lower() for k in task.split("Keywords:", 1)[-1].split(",") if k.strip()]
    coverage = sum(k in paper.lower() for k in kws) / max(1, len(kws))
    experiments = sum(s.startswith("Experiment") for s in sections)
    words = len(paper.split())
    return {
        "consistency": 4 + 3 * ("Hypothesis" in sections) + 3 * ("Method" in sections),
        "clarity": 9 - min(6, abs(words - 450) / 80),
        "novelty": 4 + 4 * coverage + min(2, sum(s.startswith("Alternative") for s in sections)),
        "feasibility": 3 + 2 * min(experiments, 3),
        "significance": 3 + 4 * coverage + 3 * ("Limitations" in sections),
    }


def main():
    art = os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "."
    path = os.path.join(art, "paper.md")
    if not os.path.isfile(path):
        print(f"error: no paper at {path}")
        sys.exit(2)
    with open(path) as f:
        paper = f.read()
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "task.md")) as f:
        task = f.read()
    scores = rubric(paper, task)
    rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
    reviews = [sum(min(10, max(1, v + rng.gauss(0, NOISE))) for v in scores.values()) / len(scores)
               for _ in range(REVIEWS)]
    for name, value in scores.items():
        print(f"{name:<13} {value:.2f}")
    print(f"review_score: {sum(reviews) / len(reviews):.4f}")


if __name__ == "__main__":
    main()
