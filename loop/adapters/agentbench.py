"""AgentBench's OS-interaction tasks as fitness functions.

A checkout of THUDM/AgentBench holds them as data/os_interaction/data/<n>/*.json (items:
`description`, `create: {local: <image>, init: <script(s)>}`, `start`, `evaluation:
{match | check [+ example]}`), their scripts under data/os_interaction/scripts/<n>/ and the
images' Dockerfiles under data/os_interaction/res/dockerfiles/. A script is a string (bash),
or {"language", "file" | "code"}; a null check entry stands for the example script.

`make_task` resolves every script into the item (so the grader needs only the items) and
writes a task folder whose protected grade.py (agentbench_grade.py) plays the episodes in
Docker containers with the editable agent.py and prints success_rate. The items and the
Dockerfiles go to the private folder, `<checkout>/autoresearch-private/<task name>/`, found
through $AUTORESEARCH_AGENTBENCH (the checkout). Docker is required: without it (`docker
info` fails) the task is not made."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from loop.adapters.taskfile import dump_task_yaml
from loop.errors import UsageError

ROOT_VAR = "AUTORESEARCH_AGENTBENCH"
HERE = Path(__file__).resolve().parent


def docker_unavailable() -> str | None:
    """Why Docker cannot run containers here (`docker info` failing), or None."""
    try:
        out = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return "the docker command is not installed"
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer in 30 s"
    if out.returncode != 0:
        lines = [l for l in out.stderr.strip().splitlines() if l.strip()]
        return f"`docker info` failed: {lines[-1] if lines else f'exit {out.returncode}'}"
    return None


def load_script(obj, script_dir: Path):
    """AgentBench's script object -> [language, code] (None stays None)."""
    if obj is None:
        return None
    if isinstance(obj, str):
        return ["bash", obj]
    if not isinstance(obj, dict):
        raise UsageError(f"invalid script object: {obj!r:.80}")
    language = obj.get("language", "bash")
    if "file" in obj:
        path = script_dir / obj["file"]
        if not path.is_file():
            raise UsageError(f"script {path} not found (--scripts-dir?)")
        return [language, path.read_text(encoding="utf-8")]
    if "code" in obj:
        return [language, obj["code"]]
    raise UsageError(f"invalid script object (no file or code): {obj!r:.80}")


def _scripts(value, script_dir: Path) -> list:
    return [load_script(v, script_dir) for v in (value if isinstance(value, list) else [value])]


def load_items(data_file: Path, script_dir: Path) -> list[dict]:
    """The items of one data file, every script resolved, in the grader's form."""
    text = data_file.read_text(encoding="utf-8")
    try:
        raw = [json.loads(l) for l in text.splitlines() if l.strip()] \
            if data_file.suffix == ".jsonl" else json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{data_file}: not JSON ({exc.msg}, line {exc.lineno})") from None
    raw = [raw] if isinstance(raw, dict) else raw
    items = []
    for n, item in enumerate(raw, 1):
        if not isinstance(item, dict) or "description" not in item or "evaluation" not in item:
            raise UsageError(f"{data_file}: item {n} lacks description or evaluation: not "
                             f"AgentBench's OS-interaction item format")
        # AgentBench reads a `create` that is not a mapping (one item of data/5/new.json
        # holds a list there) as the default image with no init: so do we
        create = item["create"] if isinstance(item.get("create"), dict) else {}
        evaluation = item["evaluation"]
        out = {"description": item["description"], "image": create.get("local", "default"),
               "init": _scripts(create["init"], script_dir) if "init" in create else [],
               "start": load_script(item["start"], script_dir) if "start" in item else None,
               "match": None, "check": None, "example": None,
               "labels": item.get("labels", [])}
        if "match" in evaluation:
            m = evaluation["match"]
            out["match"] = {"answer": m, "strip": True} if isinstance(m, str) else m
        elif "check" in evaluation:
            out["check"] = _scripts(evaluation["check"], script_dir)
            if "example" in evaluation:
                out["example"] = load_script(evaluation["example"], script_dir)
        else:
            raise UsageError(f"{data_file}: item {n}: evaluation has neither match nor check")
        items.append(out)
    return items


def default_scripts(data_file: Path) -> Path:
    """AgentBench's pairing (configs/tasks/os.yaml): data/<n>/*.json -> scripts/<n>/; a file
    directly in data/ (dev.json) -> scripts/<its stem>/."""
    os_root = checkout_of(data_file) / "data" / "os_interaction"
    folder = data_file.parent.name if data_file.parent != os_root / "data" else data_file.stem
    return os_root / "scripts" / folder


def checkout_of(data_file: Path) -> Path:
    for folder in data_file.parents:
        if (folder / "data" / "os_interaction").is_dir():
            return folder
    raise UsageError(f"{data_file}: not inside an AgentBench checkout (no data/os_interaction "
                     f"above it)")


def from_args(args: argparse.Namespace) -> Path:
    """`autoresearch task agentbench`'s parsed arguments -> make_task."""
    return make_task(Path(args.data_file), Path(args.out),
                     scripts_dir=Path(args.scripts_dir) if args.scripts_dir else None,
                     limit=args.limit, round_limit=args.round_limit)


def make_task(data_file: Path, out: Path, scripts_dir: Path | None = None,
              limit: int | None = None, round_limit: int = 8, warn=None) -> Path:
    warn = warn or (lambda line: print(line, file=sys.stderr))
    why = docker_unavailable()
    if why:
        raise UsageError(f"task agentbench needs Docker, which is not available here ({why}): "
                         f"AgentBench's OS tasks run every episode in a container")
    data_file = Path(data_file).expanduser().resolve()
    if not data_file.is_file():
        raise UsageError(f"{data_file}: data file not found")
    checkout = checkout_of(data_file)
    os_root = checkout / "data" / "os_interaction"
    scripts_dir = Path(scripts_dir).resolve() if scripts_dir else default_scripts(data_file)
    items = load_items(data_file, scripts_dir)[:limit or None]
    images = sorted({i["image"] for i in items})
    dockerfiles = os_root / "res" / "dockerfiles"
    missing = [i for i in images if not (dockerfiles / i).is_file()]
    if missing:
        raise UsageError(f"{dockerfiles}: no Dockerfile for image(s) {', '.join(missing)}")
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose a new --out folder")
    name = f"agentbench-os-{data_file.parent.name}-{data_file.stem}".lower()
    private = checkout / "autoresearch-private" / name
    shutil.rmtree(private, ignore_errors=True)
    (private / "dockerfiles").mkdir(parents=True)
    (private / "items.json").write_text(json.dumps(items, indent=1))
    for image in images:
        shutil.copyfile(dockerfiles / image, private / "dockerfiles" / image)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "agentbench_grade.py", out / "grade.py")
    shutil.copyfile(HERE / "agentbench_agent.py", out / "agent.py")
    (out / "agentbench.yaml").write_text(dump_task_yaml({
        "round_limit": int(round_limit), "command_timeout_s": 30, "output_chars": 800,
        "network": "bridge"}))
    (out / "task.yaml").write_text(dump_task_yaml({
        "name": name,
        "description": f"agent.py is an LLM agent for AgentBench's OS-interaction tasks "
                       f"({len(items)} items of {data_file.parent.name}/{data_file.name}): "
                       f"given a question about a Linux machine it runs bash commands and "
                       f"answers. The protected grade.py plays every item in a fresh Docker "
                       f"container and checks the answer with the item's own match or check "
                       f"scripts; higher success_rate is better. Only agent.py may change.\n",
        "editable": ["agent.py"],
        "protected": ["grade.py", "agentbench.yaml"],
        "run": "python agent.py",
        "evaluate": "python grade.py",
        "private": "${%s}/autoresearch-private/%s" % (ROOT_VAR, name),
        "pass_env": ["AGENT_BASE_URL", "AGENT_API_KEY", "AGENT_MODEL"],
        "metric": {"name": "success_rate", "direction": "maximize"},
        "time_budget_s": 60.0,
        "grade_timeout_s": float(300 + len(items) * round_limit * 60),
    }))
    warn("note: the grader drives Docker, which the sandbox does not let it reach (and the "
         "Docker socket is root on this machine): run this task with `sandbox: off`")
    if Path(os.environ.get(ROOT_VAR) or "/nonexistent").resolve() != checkout:
        warn(f"note: export {ROOT_VAR}={checkout} before running it")
    return out
