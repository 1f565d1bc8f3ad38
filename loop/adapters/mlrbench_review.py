"""Protected grader, copied into the task folder by `autoresearch task mlrbench` as review.py:
a judge model reviews the paper the run wrote, with MLR-Bench's own writeup rubric
(rubric.md, read from the benchmark's checkout when the task was made), and its JSON
verdict becomes the metric.

Settings (judge.yaml beside this file): `model`, `reviews` (independent reviews averaged
per run), `attempts` (tries per review when a reply is not the JSON asked for),
`temperature`, `max_tokens`. The endpoint and key come from the variables task.yaml's
`grader_env` names: the one ending in URL is the endpoint, the one ending in KEY the key
(default OPENAI_BASE_URL, OPENAI_API_KEY); the training step never sees them.

Prints one line per dimension (`consistency: 7.00`, ...) and `overall_assessment: <mean>`
last, the task's metric. A reply that stays unparseable, or a judge that cannot be reached,
ends with exit 1 and the reason: never a number made up."""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

DIMENSIONS = ("Consistency", "Clarity", "Completeness", "Soundness", "OverallAssessment")
METRIC = "overall_assessment"
# What the agent may hand over beside paper.md: MLR-Bench's reviewer reads these stages too.
STAGES = (("idea.md", "Research idea"), ("related_work.md", "Literature review"),
          ("proposal.md", "Research proposal"), ("results.md", "Experimental results"))
HERE = Path(__file__).resolve().parent


class ReviewError(Exception):
    """The judge's reply is not a usable review (the message says what is wrong)."""


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def parse_review(text: str) -> dict[str, float]:
    """The five scores from a judge's reply: a ```json block, else the outermost {...}.
    Raises ReviewError when there is no JSON object or a score is missing or not 1-10."""
    fenced = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    candidates = fenced or ([text[text.find("{"):text.rfind("}") + 1]] if "{" in text else [])
    if not candidates:
        raise ReviewError("no JSON object in the reply")
    errors = []
    for blob in candidates:
        try:
            data = json.loads(blob)
        except json.JSONDecodeError as exc:
            errors.append(f"invalid JSON ({exc.msg} at line {exc.lineno})")
            continue
        if not isinstance(data, dict):
            errors.append("the JSON is not an object")
            continue
        return _scores(data)
    raise ReviewError(errors[-1])


def _scores(data: dict) -> dict[str, float]:
    out = {}
    for key in DIMENSIONS:
        entry = data.get(key)
        value = entry.get("score") if isinstance(entry, dict) else entry
        if isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            missing = "missing" if entry is None else f"has no numeric score ({entry!r:.60})"
            raise ReviewError(f"{key} {missing}")
        if not 1 <= value <= 10:
            raise ReviewError(f"{key} score {value} is outside 1-10")
        out[key] = float(value)
    return out


def build_prompt(rubric: str, task: str, paper: str, stages: dict[str, str]) -> str:
    parts = [rubric.strip(), "", "## Paper to review", "", paper.strip(), "",
             "## Task description", "", task.strip()]
    for title, text in stages.items():
        parts += ["", f"## {title}", "", text.strip()]
    return "\n".join(parts) + "\n"


def endpoint_vars(task_yaml: Path) -> tuple[str, str]:
    """(endpoint variable, key variable) from task.yaml's grader_env."""
    import yaml
    names = (yaml.safe_load(task_yaml.read_text()) or {}).get("grader_env") or []
    url = next((n for n in names if n.upper().endswith("URL")), "OPENAI_BASE_URL")
    key = next((n for n in names if n.upper().endswith("KEY")), "OPENAI_API_KEY")
    return url, key


def review_once(client, settings: dict, prompt: str, say) -> dict[str, float]:
    """One review; a reply that is not the JSON asked for is asked for again, up to
    `attempts` times, then ReviewError."""
    attempts = max(1, int(settings.get("attempts", 3)))
    for attempt in range(1, attempts + 1):
        reply = client.chat.completions.create(
            model=settings["model"], messages=[{"role": "user", "content": prompt}],
            temperature=float(settings.get("temperature", 1.0)),
            max_tokens=int(settings.get("max_tokens", 4096)))
        text = reply.choices[0].message.content or ""
        try:
            return parse_review(text)
        except ReviewError as exc:
            excerpt = " ".join(text.split())[:120]
            say(f"review: attempt {attempt}/{attempts}: {exc}: '{excerpt}'")
            if attempt == attempts:
                raise ReviewError(f"the judge's reply was not the review JSON after "
                                  f"{attempts} attempts ({exc})") from None
    raise AssertionError("unreachable")


def main() -> int:
    import yaml
    settings = yaml.safe_load((HERE / "judge.yaml").read_text()) or {}
    artifacts = Path(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".")
    paper = artifacts / "paper.md"
    if not paper.is_file() or not paper.read_text(errors="replace").strip():
        print(f"error: no paper to review ({paper.name} missing or empty)")
        return 1
    url_var, key_var = endpoint_vars(HERE / "task.yaml")
    if not os.environ.get(key_var):
        print(f"error: the judge's key {key_var} is not set in the engine's environment "
              f"(task.yaml grader_env passes it to this grader only)")
        return 1
    stages = {title: (artifacts / name).read_text(errors="replace")
              for name, title in STAGES if (artifacts / name).is_file()}
    prompt = build_prompt((HERE / "rubric.md").read_text(), (HERE / "task.md").read_text(),
                          paper.read_text(errors="replace"), stages)
    import openai
    client = openai.OpenAI(base_url=os.environ.get(url_var) or None,
                           api_key=os.environ[key_var],
                           timeout=float(settings.get("timeout_s", 600)), max_retries=2)
    reviews = []
    try:
        for _ in range(max(1, int(settings.get("reviews", 1)))):
            reviews.append(review_once(client, settings, prompt, print))
    except ReviewError as exc:
        print(f"error: {exc}")
        return 1
    except openai.APIError as exc:
        print(f"error: the judge at {os.environ.get(url_var) or 'api.openai.com'} failed: "
              f"{type(exc).__name__}: {exc}")
        return 1
    for key in DIMENSIONS:
        values = [r[key] for r in reviews]
        mean = sum(values) / len(values)
        if key != "OverallAssessment":
            print(f"{snake(key)}: {mean:.2f}")
    overall = [r["OverallAssessment"] for r in reviews]
    print(f"reviews: {len(reviews)} (overall {', '.join(f'{v:g}' for v in overall)})")
    print(f"{METRIC}: {sum(overall) / len(overall):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
