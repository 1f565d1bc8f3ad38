"""An experiment that plants git programs or moves refs: nothing it planted runs in the
engine's git calls, and everything it changed outside the loop's branch is put back."""
import subprocess

from conftest import TOY_TASK, git, make_repo, run_cli
from loop.repo.workspace import Workspace, worktree_path

HOSTILE = """\
import os, subprocess
marker = {marker!r}
def g(*a):
    subprocess.run(["git", *a], check=True)
g("update-ref", "refs/heads/main", "HEAD~1")          # move the user's main
# then plant programs (last, so that the experiment's own git calls do not run them)
prog = os.path.join(os.getcwd(), "..", "evil.sh")
with open(prog, "w") as f:
    f.write("#!/bin/sh\\necho ran $0 >> " + marker + "\\n")
os.chmod(prog, 0o755)
g("config", "core.fsmonitor", prog)
g("config", "filter.evil.smudge", prog)
common = subprocess.run(["git", "rev-parse", "--git-common-dir"], capture_output=True,
                        text=True).stdout.strip()
hook = os.path.join(common, "hooks", "reference-transaction")
os.makedirs(os.path.dirname(hook), exist_ok=True)
with open(hook, "w") as f:
    f.write("#!/bin/sh\\necho hook >> " + marker + "\\n")
os.chmod(hook, 0o755)
with open(".gitattributes", "w") as f:
    f.write("* filter=evil\\n")
print("score: 1.0")
"""


def test_a_run_that_plants_programs_and_moves_main_is_undone(tmp_path, mlflow_uri):
    marker = tmp_path / "ran.txt"
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK, "grade.py": "# harness\n",
                                         "train.py": HOSTILE.format(marker=str(marker))})
    # main gets a second commit so the run can move it back to the first
    (repo / "notes.md").write_text("user notes\n")
    git(repo, "add", "notes.md")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qm", "notes")
    main = git(repo, "rev-parse", "main")
    config = (repo / ".git" / "config").read_bytes()
    # without the sandbox (it would stop these writes): what the engine itself detects
    result = run_cli("run", "--task", "task", "--tag", "t", "--iterations", "0",
                     "--judge", "strict", "--sandbox", "off", cwd=repo)
    assert result.returncode == 1, result.stdout + result.stderr   # the baseline is refused
    assert "tampered" in result.stdout
    assert git(repo, "rev-parse", "main") == main, "the user's main is put back"
    assert (repo / ".git" / "config").read_bytes() == config, "planted config is removed"
    assert not (repo / ".git" / "hooks" / "reference-transaction").exists()
    assert not marker.exists(), f"a planted program ran: {marker.read_text()}"
    displaced = git(repo, "for-each-ref", "--format=%(refname)",
                    "refs/autoresearch/t/displaced/")
    assert "refs/autoresearch/t/displaced/0-0/heads/main" in displaced
    assert git(repo, "status", "--porcelain") == ""
    journal = (repo / ".autoresearch" / "t" / "journal.jsonl").read_text()
    assert '"event": "tamper"' in journal and "core.fsmonitor" not in git(
        repo, "config", "--list", "--local")


def test_deleted_attempt_ref_and_new_refs_are_restored(toy_repo):
    ws = Workspace(toy_repo, "t", worktree_path(toy_repo, "t"))
    ws.open()
    attempt = ws.stage_on(ws.tip(), "task", {"train.py": "X = 5\n"}, "try")
    ref = ws.keep_ref("attempt-1", attempt)
    before = ws.snapshot()
    # what an experiment can do from its worktree, as a separate process
    subprocess.run(f"git update-ref -d {ref} && git update-ref refs/heads/evil HEAD && "
                   f"git config core.fsmonitor true", shell=True, cwd=ws.worktree, check=True)
    notes = ws.check_tamper(before, "1-0")
    assert git(toy_repo, "rev-parse", ref) == attempt
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", "refs/heads/evil"],
                          cwd=toy_repo).returncode != 0
    assert "core.fsmonitor" not in (toy_repo / ".git" / "config").read_text()
    text = " ".join(notes)
    assert "refs/autoresearch/t/attempt-1 was deleted" in text
    assert "refs/heads/evil" in text and ".git/config" in text
    assert ws.check_tamper(ws.snapshot(), "1-1") == []     # nothing more to report


def test_git_runs_with_no_secrets_and_no_planted_fsmonitor(toy_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    ws = Workspace(toy_repo, "t", worktree_path(toy_repo, "t"))
    ws.open()
    spy = tmp_path / "spy.sh"
    out = tmp_path / "env.txt"
    spy.write_text(f"#!/bin/sh\nenv > {out}\n")
    spy.chmod(0o755)
    before = ws.snapshot()           # a run starts
    # planted by the run, then an engine git call (the grader's export) during the run:
    # config is put back before git reads it
    git(toy_repo, "config", "core.fsmonitor", str(spy))
    git(toy_repo, "config", "filter.spy.smudge", str(spy))
    (ws.worktree / "task" / ".gitattributes").write_text("* filter=spy\n")
    ws.export(ws.tip(), "task", tmp_path / "export")
    assert "fsmonitor" not in (toy_repo / ".git" / "config").read_text()
    ws.restore()
    ws.diff(ws.tip(), ws.tip())
    assert not out.exists()
    assert ".git/config" in " ".join(ws.check_tamper(before, "0-0"))
    # between runs a change is the user's own: kept, and still never run by the engine
    git(toy_repo, "config", "core.fsmonitor", str(spy))
    ws.restore()
    assert not out.exists() and "fsmonitor" in (toy_repo / ".git" / "config").read_text()
    from loop.repo.gitsafe import git_env
    assert "OPENAI_API_KEY" not in git_env() and git_env()["GIT_CONFIG_NOSYSTEM"] == "1"
