"""MLR-Bench through `autoresearch task mlrbench`: a checkout of the real layout (tasks/<id>.md,
mlrbench/evals/review_writeup.py with its rubric constant; our own short texts here), the
protected reviewer talking to a local OpenAI-compatible judge through the real `openai`
client, from inside the sandbox."""
import json
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import needs_sandbox, run_cli
from loop.adapters import mlrbench
from loop.adapters.mlrbench_review import ReviewError, parse_review
from loop.errors import UsageError
from loop.advice.check_task import check_task

SCORES = ("Consistency", "Clarity", "Completeness", "Soundness", "OverallAssessment")
needs_bwrap = needs_sandbox


def make_checkout(root: Path, rubric_note: str = "Score the paper.") -> Path:
    """The shape of chchenhui/mlrbench: tasks/<id>.md and the writeup reviewer module, whose
    rubric is a module-level string constant (the module imports things we lack)."""
    (root / "tasks").mkdir(parents=True)
    (root / "tasks" / "iclr2099_demo.md").write_text(
        "# Workshop on Tiny Models\n\n## Workshop Description\n\nSmall models, big ideas.\n")
    evals = root / "mlrbench" / "evals"
    evals.mkdir(parents=True)
    keys = ", ".join(SCORES)
    (evals / "review_writeup.py").write_text(textwrap.dedent(f'''\
        import numpy as np
        from mlrbench.lmm.lmm import *

        RESEARCH_PAPER_RUBRIC = """
        {rubric_note} Give JSON with {keys}, each with a "score" from 1 to 10.
        """

        def review_writeup(file_path, client):
            raise RuntimeError("not used by the adapter")
        '''))
    return root


def review_json(scores=(7, 6, 8, 5, 6), fenced=True) -> str:
    body = json.dumps({k: {"score": v, "justification": "because"} for k, v in
                       zip(SCORES, scores)}, indent=2)
    return f"Here is my review.\n```json\n{body}\n```\n" if fenced else body


# -- the reply parser ------------------------------------------------------------------------
def test_a_review_is_read_from_a_json_block_or_a_bare_object():
    assert parse_review(review_json())["OverallAssessment"] == 6.0
    assert parse_review(review_json((9, 9, 9, 9, 10), fenced=False))["Consistency"] == 9.0


@pytest.mark.parametrize("text,why", [
    ("I think this paper is quite good, 8/10.", "no JSON object"),
    ('```json\n{"Consistency": {"score": 7}, "Clarity": 6}\n```', "Completeness missing"),
    (review_json((7, 6, 8, 5, 11)), "outside 1-10"),
    ('```json\n{"Consistency": {"score": 7,}}\n```', "invalid JSON"),
    (review_json((7, 6, 8, 5, "high")), "no numeric score"),
])
def test_a_reply_that_is_not_the_review_asked_for_is_refused(text, why):
    with pytest.raises(ReviewError, match=why):
        parse_review(text)


# -- making the task ------------------------------------------------------------------------
def test_the_task_carries_the_real_task_text_and_the_checkouts_own_rubric(tmp_path):
    checkout = make_checkout(tmp_path / "mlrbench", rubric_note="Be strict, reviewer 42.")
    out = mlrbench.make_task(checkout / "tasks" / "iclr2099_demo.md", tmp_path / "t",
                             judge_model="judge-m", reviews=3,
                             judge_endpoint="http://127.0.0.1:8000/v1",
                             agent_endpoint="localhost:9000")
    assert (out / "task.md").read_text().startswith("# Workshop on Tiny Models")
    assert "Be strict, reviewer 42." in (out / "rubric.md").read_text()
    spec = yaml.safe_load((out / "task.yaml").read_text())
    assert spec["editable"] == ["agent.py"]
    assert {"review.py", "rubric.md", "judge.yaml", "task.md"} <= set(spec["protected"])
    assert spec["grader_env"] == ["OPENAI_BASE_URL", "OPENAI_API_KEY"]
    assert not {"OPENAI_BASE_URL", "OPENAI_API_KEY"} & set(spec["pass_env"])
    assert spec["grader_network"] == ["127.0.0.1:8000"] and spec["network"] == ["localhost:9000"]
    assert spec["metric"] == {"name": "overall_assessment", "direction": "maximize"}
    assert yaml.safe_load((out / "judge.yaml").read_text())["reviews"] == 3


def test_a_task_file_outside_a_checkout_or_a_checkout_without_the_rubric_is_refused(tmp_path):
    loose = tmp_path / "loose.md"
    loose.write_text("# a task\n")
    with pytest.raises(UsageError, match="not inside an MLR-Bench checkout"):
        mlrbench.make_task(loose, tmp_path / "t")
    checkout = make_checkout(tmp_path / "mlrbench")
    (checkout / "mlrbench" / "evals" / "review_writeup.py").write_text("RUBRIC = 'x'\n")
    with pytest.raises(UsageError, match="no string constant RESEARCH_PAPER_RUBRIC"):
        mlrbench.make_task(checkout / "tasks" / "iclr2099_demo.md", tmp_path / "t")


def test_the_cli_makes_the_task_in_one_line(tmp_path):
    checkout = make_checkout(tmp_path / "mlrbench")
    out = run_cli("task", "mlrbench", str(checkout / "tasks" / "iclr2099_demo.md"),
                  "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    bad = run_cli("task", "mlrbench", str(tmp_path / "nope.md"), "--out",
                  str(tmp_path / "u"), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not found" in bad.stderr


# -- grading through a local judge, sandboxed ------------------------------------------------
def judged_task(tmp_path, server, monkeypatch, reviews=2, attempts=2) -> Path:
    checkout = make_checkout(tmp_path / "mlrbench")
    out = mlrbench.make_task(checkout / "tasks" / "iclr2099_demo.md", tmp_path / "task",
                             judge_model="judge-m", reviews=reviews, attempts=attempts,
                             judge_endpoint=server.base_url, agent_endpoint=server.base_url)
    monkeypatch.setenv("AGENT_MODEL", "agent-m")
    monkeypatch.setenv("AGENT_BASE_URL", server.base_url)
    monkeypatch.setenv("AGENT_API_KEY", "agent-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "judge-key")
    return out


@needs_bwrap
def test_a_paper_is_judged_from_inside_the_sandbox_and_reviews_are_averaged(
        tmp_path, openai_server, monkeypatch):
    task = judged_task(tmp_path, openai_server, monkeypatch, reviews=2, attempts=2)
    openai_server.script("# Tiny Models Win\n\n## Abstract\n\nWe show ...",    # the agent
                         "The paper is fine. Score: 8.",                       # not JSON: retried
                         review_json((7, 6, 8, 5, 6)), review_json((9, 8, 8, 7, 8)))
    lines = []
    _, result = check_task(task, out=lines.append)
    assert result.status == "ok", (result.detail, lines)
    assert result.metric == pytest.approx(7.0)              # (6 + 8) / 2
    agent, *judge = openai_server.requests
    assert agent["model"] == "agent-m" and all(r["model"] == "judge-m" for r in judge)
    assert len(judge) == 3
    prompt = judge[0]["messages"][0]["content"]
    assert "Give JSON with Consistency" in prompt and "Tiny Models Win" in prompt
    assert "Workshop on Tiny Models" in prompt
    keys = [h.get("authorization") or h.get("Authorization") for h in openai_server.headers]
    assert keys == ["Bearer agent-key"] + ["Bearer judge-key"] * 3   # the judge's key: grader only


@needs_bwrap
def test_a_judge_that_never_answers_in_json_is_a_failure_not_a_number(
        tmp_path, openai_server, monkeypatch):
    task = judged_task(tmp_path, openai_server, monkeypatch, reviews=1, attempts=2)
    openai_server.script("# Paper\n\ntext", "Good paper.", "Still no JSON, sorry.")
    lines = []
    _, result = check_task(task, out=lines.append)
    assert result.status != "ok" and result.metric is None
    assert "not the review JSON after 2 attempts" in "\n".join(lines)


@needs_bwrap
def test_without_the_declared_endpoint_the_sandboxed_grader_cannot_reach_the_judge(
        tmp_path, openai_server, monkeypatch):
    task = judged_task(tmp_path, openai_server, monkeypatch, reviews=1, attempts=1)
    spec = yaml.safe_load((task / "task.yaml").read_text())
    del spec["grader_network"], spec["network"]
    (task / "task.yaml").write_text(yaml.safe_dump(spec))
    openai_server.script("# Paper", review_json())
    _, result = check_task(task, out=lambda line: None)
    assert result.status != "ok" and openai_server.requests == []
