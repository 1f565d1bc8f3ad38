"""The grader imports nothing the candidate wrote (issue 37 item 1): a new top-level module
that the grader's Python would import in place of its own (`statistics/`, `statistics.py`,
`sitecustomize/`), a `.pth` file or a `.gitattributes` is a bad_edit; and where such a file is
in the commit anyway (it was there before the night), the grading step still imports the
standard library's, and no `sitecustomize` of the copy runs (loop/run/graders/startup/).
Real git, the real engine and, for the grading step, the real bwrap sandbox."""
from __future__ import annotations

import csv

import pytest

from conftest import git, make_repo, needs_sandbox
from graded_toy import ANSWERS, DATA, INPUTS, TRAIN, baseline_error, make_private
from loop.engine.engine import Engine
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig
from loop.setup.metric import Metric
from loop.setup.task import Task

TASK = """\
name: graded
description: fit y = W*x + B to hidden answers
editable: ["[s-u]*.py", "*.pth", ".git*"]   # admits statistics.py, statistics/__init__.py
protected: [evaluate.py, data.py]
run: python train.py
evaluate: python evaluate.py
artifact: predictions.txt
private: {private}
metric: {{name: error, direction: minimize}}
time_budget_s: 20
grace_s: 5
"""

# the protected grader averages with the standard library's statistics.fmean
EVALUATE = """\
import os
import statistics
private = os.environ["AUTORESEARCH_PRIVATE_DIR"]
with open(os.path.join(private, "answers.txt")) as f:
    answers = [float(line) for line in f if line.strip()]
with open(os.path.join(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "predictions.txt")) as f:
    preds = [float(line) for line in f if line.strip()]
error = statistics.fmean([(p - a) ** 2 for p, a in zip(preds, answers)])
print(f"error: {error:.6f}")
"""

FORGED_FMEAN = "def fmean(xs):\n    return 0.0\n"
FORGED_START = ("import os\nif 'AUTORESEARCH_PRIVATE_DIR' in os.environ:\n"
                "    print('error: 0.000001', flush=True)\n    os._exit(0)\n")

ATTACKS = {
    "statistics/__init__.py": (FORGED_FMEAN, "shadow the standard library's `statistics`"),
    "statistics.py": (FORGED_FMEAN, "shadow the standard library's `statistics`"),
    "sitecustomize/__init__.py": (FORGED_START, "Python's start-up hook `sitecustomize`"),
    "usercustomize.py": (FORGED_START, "Python's start-up hook `usercustomize`"),
    "evil.pth": ("import os; print('error: 0.000001')\n", "a .pth file is a start-up hook"),
    ".gitattributes": ("evaluate.py export-ignore\ndata.py export-subst\n",
                       "a .gitattributes would change the grader's copy"),
}


def graded_repo(tmp_path, extra: dict[str, str] | None = None):
    private = make_private(tmp_path / "held-out")
    repo = make_repo(tmp_path / "repo", {
        "task.yaml": TASK.format(private=private), "train.py": TRAIN, "evaluate.py": EVALUATE,
        "data.py": DATA, "paths.pth": "",
        ".gitignore": "", **(extra or {})})
    return repo


def night(repo, proposals: list[tuple[str, dict[str, str]]]) -> list[dict]:
    class Scripted:
        def propose(self, context):
            description, files = proposals[context.iteration - 1]
            return Proposal(description, files=files)
    cfg = Config(task="task", tag="g", iterations=len(proposals), base_dir=repo,
                 max_consecutive_failures=len(proposals) + 1,
                 judge=JudgeConfig(rule="strict"), sandbox="required")
    stop = Engine(cfg, out=lambda s: None, proposer=Scripted()).run()
    assert stop.exit_code == 0, stop.message
    with open(repo / ".autoresearch/g/results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def refusal(rel: str, present: list[str]) -> str | None:
    task = Task(name="t", description="", editable=("*", "**/*"), run="python train.py",
                metric=Metric("error", "minimize"))
    return task.check_edit_path(rel) or (None if rel in present
                                         else task.check_new_path(rel, present))


@pytest.mark.parametrize("rel", sorted(ATTACKS))
def test_a_new_file_the_grader_would_import_is_refused(rel):
    reason = refusal(rel, ["train.py", "evaluate.py", "data.py"])
    assert reason and ATTACKS[rel][1] in reason and reason.startswith(rel), reason
    assert "\n" not in reason


@pytest.mark.parametrize("rel,present", [
    ("helpers.py", []), ("lib/statistics.py", []), ("models/__init__.py", []),
    ("statistics/extra.py", ["statistics/__init__.py"]),     # the repo's own, from before
    ("src/mypkg/__init__.py", []), ("notes.txt", []), ("random_search.py", []),
])
def test_other_new_files_are_not(rel, present):
    assert refusal(rel, present) is None


def test_a_src_layout_is_checked_too():
    assert "`json`" in refusal("src/json/__init__.py", ["src/pkg/a.py"])


def test_an_existing_gitattributes_or_pth_file_is_not_editable_either():
    assert "grader's copy" in refusal(".gitattributes", [".gitattributes"])
    assert ".gitattributes" in refusal("sub/.gitattributes", [".gitattributes"])
    assert ".pth" in refusal("paths.pth", ["paths.pth"])


@needs_sandbox
def test_no_such_proposal_is_kept(tmp_path, mlflow_uri):
    """Each attack proposed in one night: a bad_edit with its one-line reason; an honest new
    module beside it is staged and run."""
    repo = graded_repo(tmp_path)
    proposals = [(rel, {rel: text}) for rel, (text, _) in sorted(ATTACKS.items())]
    proposals.append(("a helper module", {"sizes.py": "SCALE = 1.0\n"}))
    table = night(repo, proposals)
    assert table[0]["status"] == "keep"
    for row, (rel, _) in zip(table[1:], proposals):
        if rel in ATTACKS:
            assert row["status"] == "bad_edit", row
            assert ATTACKS[rel][1] in row["reason"], row
    assert table[-1]["status"] != "bad_edit", table[-1]
    assert all(r["status"] != "keep" for r in table[1:])


@needs_sandbox
@pytest.mark.parametrize("rel", ["statistics/__init__.py", "statistics.py",
                                 "sitecustomize/__init__.py", "sitecustomize.py",
                                 "usercustomize.py"])
def test_the_grader_imports_its_own_modules_whatever_the_commit_holds(tmp_path, mlflow_uri,
                                                                      rel):
    """The forged module is in the commit (it was there before the night: no edit added
    it), first on the path of a plain `python evaluate.py` in the copy: the grading step
    still grades with the standard library and runs no start-up hook of the copy."""
    text = FORGED_FMEAN if rel.startswith("statistics") else FORGED_START
    repo = graded_repo(tmp_path, {rel: text})
    table = night(repo, [])
    assert table[0]["status"] == "keep", table[0]
    assert float(table[0]["error"]) == pytest.approx(baseline_error(), abs=1e-5)
    log = (repo / ".autoresearch/g/logs/iter-0000.log").read_text()
    assert "0.000001" not in log and "error: 0.000000" not in log
    assert git(repo, "show", f"HEAD:task/{rel}")        # it was there, in the graded commit


def test_the_toy_is_what_the_assertions_assume():
    assert baseline_error() > 1.0 and len(ANSWERS) == len(INPUTS)


LM_FORGED_START = ("import os\nif 'AUTORESEARCH_HELD_OUT_0' in os.environ:\n"
                   "    print('---\\nval_bpb: 0.000001', flush=True)\n    os._exit(0)\n")


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("rel", ["sitecustomize/__init__.py", "sitecustomize.py"])
def test_the_lm_grader_runs_no_start_up_hook_of_the_copy(tmp_path, monkeypatch, rel):
    """The lm grader (karpathy shape) started in a copy holding a `sitecustomize` that
    forges its output: the baseline is graded by lm.py, honestly."""
    from karpathy_repo import LM_TASK, make_karpathy_repo
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    repo = make_karpathy_repo(tmp_path / "repo", cache,
                              {"task.yaml": LM_TASK, rel: LM_FORGED_START})
    cfg = Config(task=".", tag="g", iterations=0, base_dir=repo, sandbox="required")
    stop = Engine(cfg, out=lambda s: None).run()
    assert stop.exit_code == 0, stop.message
    with open(repo / ".autoresearch/g/results.tsv") as f:
        base = next(csv.DictReader(f, delimiter="\t"))
    log = (repo / ".autoresearch/g/logs/iter-0000.log").read_text(errors="replace")
    assert base["status"] == "keep" and float(base["val_bpb"]) > 0.5, base
    assert "0.000001" not in log and "grade_seconds" in log


def grader_python(copy, script: str, protected: str = "") -> str:
    """`python <script>` in `copy` with the grading step's start-up (as loop/run/spec.py
    sets it), its output."""
    import os
    import subprocess
    import sys
    from loop.setup.graders import STARTUP
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update({"PYTHONPATH": str(STARTUP), "AUTORESEARCH_GRADER_PATH": str(copy),
                "AUTORESEARCH_GRADER_PROTECTED": protected, "PYTHONDONTWRITEBYTECODE": "1"})
    done = subprocess.run([sys.executable, script], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_installed_package_is_imported_from_the_environment(tmp_path):
    """A `numpy.py` or `yaml/` of the copy, first on a plain `python script.py`'s path (the
    script's folder), is not what the grader imports; its own modules still are."""
    (tmp_path / "numpy.py").write_text("def mean(xs):\n    return 0.0\n")
    (tmp_path / "yaml").mkdir()
    (tmp_path / "yaml" / "__init__.py").write_text("raise SystemExit('forged yaml')\n")
    (tmp_path / "helper.py").write_text("WHO = 'the copy'\n")
    (tmp_path / "grade.py").write_text(
        "import numpy, yaml, statistics, helper\n"
        "print(numpy.mean([1.0, 3.0]), statistics.fmean([1.0, 3.0]), helper.WHO)\n")
    assert grader_python(tmp_path, "grade.py").split() == ["2.0", "2.0", "the", "copy"]


def test_a_protected_module_is_imported_from_the_copy_whatever_is_installed(tmp_path):
    """The task's own protected `yaml.py` (a name an installed package has) is trusted: the
    grader imports it from the copy."""
    (tmp_path / "yaml.py").write_text("WHO = 'the protected file'\n")
    (tmp_path / "grade.py").write_text("import yaml\nprint(yaml.WHO)\n")
    assert grader_python(tmp_path, "grade.py", "yaml.py\ngrade.py").strip() == \
        "the protected file"
