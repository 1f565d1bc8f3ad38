"""MLR-Bench tasks as fitness functions.

An MLR-Bench checkout (chchenhui/mlrbench) holds its 201 workshop tasks as `tasks/<id>.md`
and its paper reviewer in `mlrbench/evals/review_writeup.py`, whose rubric (the string
RESEARCH_PAPER_RUBRIC) asks a judge model for JSON scores: Consistency, Clarity,
Completeness, Soundness and an OverallAssessment, each 1-10.

`make_task` writes an ordinary task folder from one task file:

    task.md      the task's own text (protected)
    rubric.md    the rubric, read from the checkout now (protected; found by parsing the
                 module, not importing it: its imports need MLR-Bench's dependencies)
    review.py    the protected grader (mlrbench_review.py): the judge reviews paper.md
    judge.yaml   the grader's settings: model, reviews per run, attempts per review
    agent.py     the editable research agent (mlrbench_agent.py): writes paper.md

The judge's endpoint and key reach the grader alone (`grader_env`); the agent has its own
(`pass_env`: AGENT_*). Endpoints named with --judge-endpoint / --agent-endpoint become the
sandbox's `grader_network` / `network` (loop/run/netbridge.py)."""
from __future__ import annotations

import argparse
import ast
import re
import shutil
from pathlib import Path

from loop.adapters.taskfile import dump_task_yaml
from loop.errors import UsageError

REVIEWER = Path("mlrbench") / "evals" / "review_writeup.py"
RUBRIC_NAME = "RESEARCH_PAPER_RUBRIC"
HERE = Path(__file__).resolve().parent


def find_checkout(task_md: Path) -> Path:
    """The MLR-Bench checkout holding `task_md` (the folder with mlrbench/evals/)."""
    for folder in task_md.parents:
        if (folder / REVIEWER).is_file():
            return folder
    raise UsageError(f"{task_md}: not inside an MLR-Bench checkout (no {REVIEWER.as_posix()} "
                     f"above it); clone https://github.com/chchenhui/mlrbench and pass "
                     f"tasks/<id>.md from it")


def read_rubric(checkout: Path) -> str:
    """RESEARCH_PAPER_RUBRIC's text, by parsing review_writeup.py (nothing is run)."""
    path = checkout / REVIEWER
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except SyntaxError as exc:
        raise UsageError(f"{path}: cannot parse it ({exc.msg}, line {exc.lineno})") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == RUBRIC_NAME
                                                for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                rubric = node.value.value
                missing = [d for d in ("Consistency", "Clarity", "Completeness", "Soundness",
                                       "OverallAssessment") if d not in rubric]
                if missing:
                    raise UsageError(f"{path}: {RUBRIC_NAME} does not name "
                                     f"{', '.join(missing)}; this adapter parses those scores")
                return rubric
    raise UsageError(f"{path}: no string constant {RUBRIC_NAME} (the writeup rubric); this "
                     f"checkout's reviewer is not the one the adapter knows")


def endpoint(value: str) -> str:
    """`host:port` or a URL -> `host:port` (the form task.yaml's `network` takes)."""
    m = re.fullmatch(r"(?:(https?)://)?([A-Za-z0-9.\-]+|\[[0-9a-fA-F:]+\])(?::(\d+))?(?:/.*)?",
                     value.strip())
    if not m:
        raise UsageError(f"endpoint '{value}': expected host:port or a URL")
    scheme, host, port = m.groups()
    if not port:
        if not scheme:
            raise UsageError(f"endpoint '{value}': name the port (host:port)")
        port = "443" if scheme == "https" else "80"
    return f"{host}:{port}"


def from_args(args: argparse.Namespace) -> Path:
    """`autoresearch task mlrbench`'s parsed arguments -> make_task."""
    return make_task(Path(args.task_md), Path(args.out), judge_model=args.judge_model,
                     reviews=args.reviews, attempts=args.attempts,
                     judge_endpoint=args.judge_endpoint, agent_endpoint=args.agent_endpoint,
                     time_budget_s=args.time_budget_s)


def make_task(task_md: Path, out: Path, judge_model: str = "gpt-4o", reviews: int = 1,
              attempts: int = 3, judge_endpoint: str | None = None,
              agent_endpoint: str | None = None, time_budget_s: float = 1800.0) -> Path:
    task_md = Path(task_md).expanduser().resolve()
    if not task_md.is_file():
        raise UsageError(f"{task_md}: task file not found (expected tasks/<id>.md of an "
                         f"MLR-Bench checkout)")
    checkout = find_checkout(task_md)
    rubric = read_rubric(checkout)
    text = task_md.read_text(errors="replace")
    if not text.strip():
        raise UsageError(f"{task_md}: the task file is empty")
    if reviews < 1 or attempts < 1:
        raise UsageError("--reviews and --attempts must be at least 1")
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose a new --out folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / "task.md").write_text(text)
    (out / "rubric.md").write_text(rubric.strip() + "\n")
    shutil.copyfile(HERE / "mlrbench_review.py", out / "review.py")
    shutil.copyfile(HERE / "mlrbench_agent.py", out / "agent.py")
    (out / "judge.yaml").write_text(dump_task_yaml({
        "model": judge_model, "reviews": int(reviews), "attempts": int(attempts),
        "temperature": 1.0, "max_tokens": 4096, "timeout_s": 600}))
    title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.strip()),
                 task_md.stem)
    data = {
        "name": f"mlrbench-{task_md.stem}",
        "description": f"agent.py is a research agent: for the workshop task in task.md "
                       f"(MLR-Bench {task_md.stem}: {title}) it writes a paper to "
                       f"$AUTORESEARCH_ARTIFACT_DIR/paper.md. The protected review.py has a "
                       f"judge model score it with MLR-Bench's writeup rubric (rubric.md); "
                       f"higher overall_assessment is better. Only agent.py may change.\n",
        "editable": ["agent.py"],
        "protected": ["review.py", "rubric.md", "judge.yaml", "task.md"],
        "run": "python agent.py",
        "evaluate": "python review.py",
        "artifact": "paper.md",
        "metric": {"name": "overall_assessment", "direction": "maximize"},
        "pass_env": ["AGENT_BASE_URL", "AGENT_API_KEY", "AGENT_MODEL"],
        "grader_env": ["OPENAI_BASE_URL", "OPENAI_API_KEY"],
        "time_budget_s": float(time_budget_s),
        "grace_s": 60.0,
        "grade_timeout_s": 600.0 * reviews * attempts,
    }
    if agent_endpoint:
        data["network"] = [endpoint(agent_endpoint)]
    if judge_endpoint:
        data["grader_network"] = [endpoint(judge_endpoint)]
    (out / "task.yaml").write_text(dump_task_yaml(data))
    return out
