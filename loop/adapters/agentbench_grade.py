"""Protected grader, copied into the task folder by `autoresearch task agentbench` as
grade.py: plays AgentBench's OS-interaction episodes with the attempt's agent.py, each in a
fresh Docker container, and prints the success rate.

Per item (private/items.json, normalized from AgentBench's data files by the adapter), as
AgentBench's os_interaction task does: start a container from the item's image (built once
from private/dockerfiles/<image>), run its init scripts, start its background script, then
up to `round_limit` rounds in which the agent either runs a bash command (its output comes
back) or answers. The answer is judged by `match` (exact answer after strip, or a regex) or
by the `check` scripts in turn: each runs in the container with the answer and the earlier
scripts' outputs as arguments, a null entry standing for the item's example script, and
all must exit 0. Settings: agentbench.yaml beside this file."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
Execute = Callable[[str, str, list], tuple]     # (language, code, params) -> (exit, stdout)


def judge(answer, item: dict, execute: Execute) -> bool:
    """AgentBench's verdict on one answer: `match` or the chain of `check` scripts."""
    match = item.get("match")
    if match:
        if isinstance(answer, str) and match.get("strip", True):
            answer = answer.strip()
        if "answer" in match:
            return answer == match["answer"]
        if "regex" in match:
            return re.search(match["regex"], str(answer)) is not None
        return False
    params = [str(answer)]
    for script in item.get("check") or []:
        script = script or item.get("example")
        if not script:
            return False
        code, out = execute(script[0], script[1], params)
        if code != 0:
            return False
        params.append(out)
    return True


def argv_for(language: str, code: str, params: list) -> list[str]:
    if language == "bash":
        return ["bash", "-c", code, "--", *params] if params else ["bash", "-c", code]
    if language == "python":
        return ["python3", "-c", code, *params]
    raise ValueError(f"unsupported check language: {language}")


class Container:
    """One episode's container, driven with the docker CLI."""

    def __init__(self, image: str, network: str, timeout_s: float):
        self.timeout_s = timeout_s
        self.id = subprocess.run(["docker", "run", "-d", "--rm", f"--network={network}",
                                  image, "sleep", "infinity"], capture_output=True, text=True,
                                 check=True, timeout=120).stdout.strip()

    def run(self, argv: list[str], detach: bool = False) -> tuple[int, str]:
        try:
            out = subprocess.run(["docker", "exec", *(["-d"] if detach else []), self.id,
                                  *argv], capture_output=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            return 124, f"(timed out after {self.timeout_s:g}s)"
        return out.returncode, (out.stdout + out.stderr).decode(errors="replace")

    def execute(self, language: str, code: str, params: list) -> tuple[int, str]:
        return self.run(argv_for(language, code, params))

    def close(self) -> None:
        subprocess.run(["docker", "rm", "-f", self.id], capture_output=True, timeout=60)


def image_for(name: str, private: Path, built: dict) -> str:
    if name not in built:
        tag = f"autoresearch-agentbench-{re.sub(r'[^a-z0-9_.-]', '-', name.lower())}"
        have = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
        if have.returncode != 0:
            dockerfile = private / "dockerfiles" / name
            subprocess.run(["docker", "build", "-t", tag, "-f", str(dockerfile),
                            str(dockerfile.parent)], check=True, capture_output=True,
                           timeout=3600)
        built[name] = tag
    return built[name]


def episode(agent, item: dict, box, round_limit: int, output_chars: int, say) -> bool:
    for script in item.get("init") or []:
        code, out = box.execute(script[0], script[1], [])
        if code != 0:
            say(f"  init script failed (exit {code}): {out.strip()[-200:]}")
    if item.get("start"):
        box.run(argv_for(item["start"][0], item["start"][1], []), detach=True)
    history: list[dict] = []
    for _ in range(round_limit):
        action = agent.act(item["description"], history)
        if "answer" in action:
            return judge(action["answer"], item, box.execute)
        if "bash" not in action:
            return False
        code, out = box.run(["bash", "-c", str(action["bash"])])
        history.append({"bash": action["bash"], "exit": code, "output": out[:output_chars]})
    say("  round limit reached")
    return False


def main() -> int:
    import yaml
    settings = yaml.safe_load((HERE / "agentbench.yaml").read_text()) or {}
    private = Path(os.environ.get("AUTORESEARCH_PRIVATE_DIR") or "/nonexistent")
    if not (private / "items.json").is_file():
        print("error: the held-out items are not available (AUTORESEARCH_PRIVATE_DIR)")
        return 2
    info = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if info.returncode != 0:
        print(f"error: Docker is not available to the grader: "
              f"{(info.stderr.strip().splitlines() or ['docker info failed'])[-1]}")
        return 2
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location("agent", HERE / "agent.py")
    assert spec is not None and spec.loader is not None   # a .py file always has both
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    items = json.loads((private / "items.json").read_text())
    built: dict = {}
    passed = 0
    for n, item in enumerate(items, 1):
        box = Container(image_for(item.get("image") or "default", private, built),
                        str(settings.get("network", "bridge")),
                        float(settings.get("command_timeout_s", 30)))
        try:
            ok = episode(module.Agent(), item, box, int(settings.get("round_limit", 8)),
                         int(settings.get("output_chars", 800)), print)
        except Exception as exc:            # the agent's own failure fails its episode
            print(f"  agent failed: {type(exc).__name__}: {exc}")
            ok = False
        finally:
            box.close()
        passed += ok
        print(f"item {n}: {'pass' if ok else 'fail'}")
    print(f"passed: {passed}/{len(items)}")
    print(f"success_rate: {passed / max(1, len(items)):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
