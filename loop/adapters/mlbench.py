"""ML-Bench instances as fitness functions.

ML-Bench (gersteinlab/ML-Bench) publishes its instances as a Hugging Face dataset
(super-dainiu/ml-bench; columns github_id, github, repo_id, id, path, arguments,
instruction, oracle, type, output, prefix_code) and its target repositories as git
submodules. Save the instances once on a connected machine:

    python -c "from datasets import load_dataset; \
        load_dataset('super-dainiu/ml-bench', split='quarter').to_json('ml-bench-quarter.jsonl')"

`make_task` writes a task folder for the instances of one repository:

    instructions.jsonl  what the agent is told: id, path, instruction (protected)
    agent.py            the editable agent (mlbench_agent.py)
    grade.py            the protected grader (mlbench_grade.py): ML-Bench's pass rule
    mlbench.yaml        the grader's settings (exec timeout, environment activation)

and a private folder, `<AUTORESEARCH_MLBENCH>/<task name>.private/instances.jsonl`, with the
expected arguments and output types, seen by the grader only. The checkout is found through
$AUTORESEARCH_MLBENCH too (the folder holding it, e.g. ML-Bench's repos/), so task.yaml
names no path of this machine."""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

from loop.adapters.taskfile import dump_task_yaml
from loop.errors import UsageError
from loop.repo.queries import origin_url

ROOT_VAR = "AUTORESEARCH_MLBENCH"
COLUMNS = ("id", "github", "path", "arguments", "instruction", "type")
HERE = Path(__file__).resolve().parent


def read_rows(path: Path) -> list[dict]:
    """Instances from a JSONL file (datasets' to_json) or a JSON list."""
    if not path.is_file():
        raise UsageError(f"{path}: instances file not found (save them once on a connected "
                         f"machine: docs/benchmarks.md, ML-Bench)")
    text = path.read_text(errors="replace").strip()
    try:
        rows = json.loads(text) if text.startswith("[") else \
            [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON lines ({exc.msg}, line {exc.lineno})") from None
    for n, row in enumerate(rows, 1):
        missing = [c for c in COLUMNS if not isinstance(row, dict) or c not in row]
        if missing:
            raise UsageError(f"{path}: instance {n} lacks {', '.join(missing)}: not ML-Bench's "
                             f"instance format")
    return rows


def repo_names(checkout: Path) -> set[str]:
    """Names the checkout answers to: its folder's, and its origin URL's last part."""
    names = {checkout.name.lower()}
    if not checkout.is_dir():
        return names
    url = origin_url(checkout)
    if url:
        names.add(re.sub(r"\.git$", "", url.rstrip("/")).rsplit("/", 1)[-1].lower())
    return names


def select(rows: list[dict], checkout: Path, github_id: int | None) -> list[dict]:
    if github_id is not None:
        picked = [r for r in rows if str(r.get("github_id")) == str(github_id)]
    else:
        names = repo_names(checkout)
        picked = [r for r in rows
                  if str(r["github"]).rstrip("/").rsplit("/", 1)[-1].lower() in names]
    if not picked:
        repos = sorted({str(r["github"]) for r in rows})
        raise UsageError(f"no instance is for {checkout.name} (the instances are for "
                         f"{', '.join(repos[:5])}{' ...' if len(repos) > 5 else ''}); pass "
                         f"--github-id or the matching checkout")
    return picked


def from_args(args: argparse.Namespace) -> Path:
    """`autoresearch task mlbench`'s parsed arguments -> make_task."""
    return make_task(Path(args.rows), Path(args.repo), Path(args.out),
                     github_id=args.github_id, limit=args.limit,
                     exec_timeout_s=args.exec_timeout_s, activate=args.activate,
                     time_budget_s=args.time_budget_s)


def make_task(rows_path: Path, repo: Path, out: Path, github_id: int | None = None,
              limit: int | None = None, exec_timeout_s: float = 10.0, activate: str = "",
              time_budget_s: float = 600.0, warn=None) -> Path:
    warn = warn or (lambda line: print(line, file=sys.stderr))
    repo = Path(repo).expanduser().resolve()
    if not repo.is_dir():
        raise UsageError(f"{repo}: the target repository's checkout is not a folder")
    rows = select(read_rows(Path(rows_path).expanduser()), repo, github_id)
    if limit:
        rows = rows[:limit]
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose a new --out folder")
    missing = [r["id"] for r in rows if not _folder(repo, r["path"]).is_dir()]
    if missing:
        raise UsageError(f"{repo}: the folders of instances {missing[:5]} are not in this "
                         f"checkout (is it the right repository, and its submodule commit?)")
    name = f"mlbench-{repo.name.lower()}"
    root = Path(os.environ.get(ROOT_VAR) or repo.parent).expanduser().resolve()
    if root != repo.parent:
        raise UsageError(f"${ROOT_VAR} is {root}, but the checkout is in {repo.parent}; "
                         f"unset it or point it at the folder holding the checkout")
    _write_instances(repo.parent / f"{name}.private", out, rows)
    shutil.copyfile(HERE / "mlbench_grade.py", out / "grade.py")
    shutil.copyfile(HERE / "mlbench_agent.py", out / "agent.py")
    (out / "mlbench.yaml").write_text(dump_task_yaml({"exec_timeout_s": float(exec_timeout_s),
                                                      "activate": activate}))
    listing = "\n".join(f"- [{r['id']}] ({r['path']}) {r['instruction']}" for r in rows)
    (out / "task.yaml").write_text(dump_task_yaml({
        "name": name,
        "description": f"agent.py is a repository-level agent. For each ML-Bench instruction "
                       f"below (instructions.jsonl) it writes the command or code that does it "
                       f"in {repo.name} ($MLBENCH_REPO) to $AUTORESEARCH_ARTIFACT_DIR/"
                       f"commands.jsonl. The protected grade.py applies ML-Bench's pass rule "
                       f"(expected argument values present, output type, exit 0 or still "
                       f"running at the timeout); higher pass_rate is better. Only agent.py "
                       f"may change.\n\n{listing}\n",
        "editable": ["agent.py"],
        "protected": ["grade.py", "mlbench.yaml", "instructions.jsonl"],
        "run": "python agent.py",
        "evaluate": "python grade.py",
        "artifact": "commands.jsonl",
        "private": "${%s}/%s.private" % (ROOT_VAR, name),
        "env": {"MLBENCH_REPO": "${%s}/%s" % (ROOT_VAR, repo.name)},
        "pass_env": ["AGENT_BASE_URL", "AGENT_API_KEY", "AGENT_MODEL"],
        "metric": {"name": "pass_rate", "direction": "maximize"},
        "time_budget_s": float(time_budget_s),
        "grace_s": 60.0,
        "grade_timeout_s": float(60 + len(rows) * 5 * (exec_timeout_s + 5)),
    }))
    if os.environ.get(ROOT_VAR) is None:
        warn(f"note: the task finds the checkout and its held-out instances through "
             f"${ROOT_VAR}; before running it, export {ROOT_VAR}={repo.parent}")
    return out


def _write_instances(private: Path, out: Path, rows: list[dict]) -> None:
    """The held-out half of each instance (its expected arguments) into `private`, made
    afresh; the agent's half (id, folder, instruction) into the task folder."""
    if private.exists():
        shutil.rmtree(private)
    private.mkdir()
    with open(private / "instances.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({k: r[k] for k in ("id", "github_id", "path", "arguments",
                                                  "type") if k in r}) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "instructions.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({"id": r["id"], "path": r["path"],
                                "instruction": r["instruction"]}) + "\n")


def _folder(repo: Path, path: str) -> Path:
    rel = str(path).strip().lstrip(".").lstrip("/")
    return repo / rel if rel else repo
