"""Protected grader, copied into the task folder by `autoresearch task mlbench` as grade.py:
ML-Bench's own pass rule applied to the commands the agent wrote.

An answer (one of up to five per instance, in $AUTORESEARCH_ARTIFACT_DIR/commands.jsonl as
{"id": ..., "outputs": [...]}) passes when all three hold, as in ML-Bench's utils/exec.py:
- every expected argument value appears in it (case-insensitive substring);
- its kind fits the expected output type: a `Bash Script` answer runs a `.sh ` or `.py `
  file, any other answer does not;
- executed in the instance's folder of a fresh copy of the repository, it exits 0; one that
  is still running after `exec_timeout_s` (ML-Bench: 10 s) counts as a pass and is killed.
A command answer runs with bash (`cd <path>; <answer>`); code is written to temp.py there
and run with python. pass@1 is the first answer passing, pass@2 either of the first two,
pass@5 any of five. The metric `pass_rate` is pass@1 over all instances.

Settings (mlbench.yaml beside this file): `exec_timeout_s`, and `activate`, a shell line run
before each answer (ML-Bench activates the repository's conda environment there).
The held-out instances (private/instances.jsonl) hold the expected arguments and types."""
from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT_MARKS = (".sh ", ".py ")
K = (1, 2, 5)


def arguments_of(row: dict) -> dict:
    """ML-Bench stores `arguments` as a dict or as its Python/JSON text."""
    value = row.get("arguments") or {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = ast.literal_eval(value)
    if not isinstance(value, dict):
        raise ValueError(f"instance {row.get('id')}: arguments is not a mapping")
    return value


def arguments_match(answer: str, arguments: dict) -> bool:
    return all(str(v).lower() in answer.lower() for v in arguments.values())


def type_fits(answer: str, out_type: str) -> bool:
    runs_a_script = any(mark in answer for mark in SCRIPT_MARKS)
    return runs_a_script if out_type == "Bash Script" else not runs_a_script


def execute(answer: str, folder: Path, timeout_s: float, activate: str = "") -> tuple[bool, str]:
    """(passed, how): exit 0 or still running at the timeout passes."""
    prefix = f"{activate}; " if activate.strip() else ""
    if any(mark in answer for mark in SCRIPT_MARKS):
        cmd = f"cd {shlex_quote(str(folder))}; {prefix}{answer}"
    else:
        (folder / "temp.py").write_text(answer)
        cmd = f"cd {shlex_quote(str(folder))}; {prefix}python temp.py"
    proc = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return True, f"still running after {timeout_s:g}s (a pass, as in ML-Bench)"
    finally:
        _kill(proc)
    return code == 0, f"exit {code}"


def shlex_quote(text: str) -> str:
    import shlex
    return shlex.quote(text)


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def instance_folder(repo: Path, path: str) -> Path:
    rel = path.strip().lstrip(".").lstrip("/") if path else ""
    return repo / rel if rel else repo


def assess(row: dict, answers: list[str], repo: Path, timeout_s: float, activate: str,
           say) -> dict[int, int]:
    """{k: 1 if one of the first k answers passes} for k in 1, 2, 5."""
    arguments, out_type = arguments_of(row), str(row.get("type", ""))
    first = None
    for i, answer in enumerate(answers[:5]):
        if not isinstance(answer, str) or not answer.strip():
            why = "empty answer"
        elif not arguments_match(answer, arguments):
            why = "an expected argument value is missing"
        elif not type_fits(answer, out_type):
            why = f"not of the expected type ({out_type or 'code'})"
        else:
            ok, why = execute(answer, instance_folder(repo, str(row.get("path", ""))),
                              timeout_s, activate)
            if ok:
                first = i
                say(f"instance {row['id']}: answer {i + 1} passes ({why})")
                break
        say(f"instance {row['id']}: answer {i + 1} fails: {why}")
    return {k: int(first is not None and first < k) for k in K}


def main() -> int:
    import yaml
    settings = yaml.safe_load((HERE / "mlbench.yaml").read_text()) or {}
    private = Path(os.environ.get("AUTORESEARCH_PRIVATE_DIR") or "/nonexistent")
    repo = Path(os.environ.get("MLBENCH_REPO") or "/nonexistent")
    if not (private / "instances.jsonl").is_file():
        print("error: the held-out instances are not available (AUTORESEARCH_PRIVATE_DIR)")
        return 2
    if not repo.is_dir():
        print(f"error: the target repository {repo} is not there (MLBENCH_REPO)")
        return 2
    rows = [json.loads(l) for l in (private / "instances.jsonl").read_text().splitlines()
            if l.strip()]
    artifact = Path(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".") / "commands.jsonl"
    answers: dict[str, list] = {}
    for n, line in enumerate(artifact.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            outputs = item["outputs"]
            answers[str(item["id"])] = outputs if isinstance(outputs, list) else [outputs]
        except (json.JSONDecodeError, KeyError, TypeError):
            print(f"commands.jsonl line {n}: not {{\"id\": ..., \"outputs\": [...]}}; ignored")
    # a fresh copy per grading: answers may write into the repository
    work = Path(tempfile.mkdtemp(prefix="mlbench-")) / "repo"
    shutil.copytree(repo, work, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    totals = {k: 0 for k in K}
    try:
        for row in rows:
            got = assess(row, answers.get(str(row["id"]), []), work,
                         float(settings.get("exec_timeout_s", 10)),
                         str(settings.get("activate") or ""), print)
            for k in K:
                totals[k] += got[k]
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)
    n = max(1, len(rows))
    print(f"instances: {len(rows)}, answered: {sum(str(r['id']) in answers for r in rows)}")
    print(f"pass@2: {totals[2] / n:.4f}\npass@5: {totals[5] / n:.4f}")
    print(f"pass_rate: {totals[1] / n:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
