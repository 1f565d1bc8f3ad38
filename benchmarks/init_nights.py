"""Nights on the corpus: does `autoresearch init`, then the commands it prints, run a night in
which mutate and tune change real settings that are run and judged?

benchmarks/init_corpus.py checks what init writes; this runs it. For each entry of the same
manifest (benchmarks/init_corpus/manifest.yaml) with a `night:` block, it clones the pinned
commit out of the local mirror into a temporary folder under $HOME (where users clone), makes
the entry's data with the manifest's offline recipe, runs `autoresearch init` with the
night's scale-down arguments (following a refusal's hint, `pass --metric test_loss`, as
init_corpus.py does), then exactly the commands init printed: `git add ... && git commit`,
`autoresearch check-task DIR`, and `autoresearch run` twice, once with `--proposer mutate`
and once with `--proposer tune`, each with `--iterations N --time-budget S --tag <proposer>`
added (a short night; nothing in the task files is edited by hand). Then, from each night's
results.tsv, its attempt commits and mlflow.db, every proposal is checked:

  changed  the attempt's diff changes a setting of the task's search_space: a line of an
           editable file that held it (a module setting, a keyword argument, a dict key), or a
           flag of the flags file whose name the repo's code reads
  ran      the run did not crash or time out
  metric   a number was read for the task's metric
  judged   a keep or discard verdict was recorded, and the run is in mlflow.db

and a proposal whose metric equals the baseline's to every printed digit is counted as
`same` (a change that may not have reached the metric: a hint, not a failure).

A `night:` block: `args` (init's arguments for the night, default the entry's init_args:
smaller, so a run ends within a short box), `prepare` (shell commands run in the entry's
folder before init, offline: e.g. writing a generated input.txt and running the repo's own
prepare.py), `path` (repo folders put on the night's Python path, as `pip install -e .`
would: a package the script imports from the repo), `needs` (Python modules the runs import
beyond this Python's: with --pip they are installed from PyPI into a throwaway venv that
also sees this Python's packages; without, the entry is reported `needs`), `time_budget`
(seconds per run, default --time-budget), or `skip: why` where no night can run here (the
reason is printed). Nothing of the repos is kept.

    python benchmarks/init_nights.py --mirror DIR               # every entry with a night
    python benchmarks/init_nights.py --mirror DIR -k makemore   # entries matching
    python benchmarks/init_nights.py --mirror DIR --pip         # install `needs` from PyPI
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from init_corpus import (Entry, add_corpus_args, checkout, hint_of, init_argv,  # noqa: E402
                         load_manifest)

PROPOSERS = ("mutate", "tune")
VERDICTS = ("keep", "discard")
NEXT = re.compile(r"^wrote .*; next:\s*$", re.M)


# -- one proposal, one night ---------------------------------------------------------------------
@dataclass
class Proposal:
    iteration: int
    description: str
    status: str
    reason: str
    settings: list[str] = field(default_factory=list)   # search_space keys the diff changes
    unread: list[str] = field(default_factory=list)     # changed flags no code of the repo reads
    metric: float | None = None
    in_mlflow: bool = False

    @property
    def ran(self) -> bool:
        return self.status in VERDICTS

    @property
    def ok(self) -> bool:
        return bool(self.settings) and not self.unread and self.ran \
            and self.metric is not None and self.in_mlflow


@dataclass
class Night:
    proposer: str
    rc: int = 0
    output: str = ""
    baseline: float | None = None
    baseline_text: str = ""
    proposals: list[Proposal] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def settings(self) -> set[str]:
        return {s for p in self.proposals for s in p.settings}

    @property
    def same(self) -> int:
        return sum(p.metric is not None and p.metric == self.baseline for p in self.proposals)

    def cell(self) -> str:
        if not self.proposals:
            return "no night" if self.rc else "0 iters"
        ok = sum(p.ok for p in self.proposals)
        return f"{len(self.proposals)} it, {len(self.settings)} set, {ok}/{len(self.proposals)}"


@dataclass
class Outcome:
    entry: Entry
    status: str = "ok"          # ok | skip | needs | init refused | check failed | ...
    why: str = ""
    init: str = ""              # ok | hint+ (followed) | refused
    followed: list[str] = field(default_factory=list)
    check: str = ""
    nights: dict[str, Night] = field(default_factory=dict)
    seconds: float = 0.0


# -- reading what a night left -------------------------------------------------------------------
def next_commands(output: str) -> list[str]:
    """The commands init printed after `wrote ...; next:`, each without its trailing note."""
    m = NEXT.search(output)
    if not m:
        return []
    out = []
    for line in output[m.end():].strip("\n").splitlines():
        if not line.startswith("  ") or not line.strip():
            break
        out.append(re.split(r"\s{3,}\(", line.strip(), maxsplit=1)[0])
    return out


def _norm(text: str) -> str:
    return text.replace("-", "_")


def _names(line: str, leaf: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(_norm(leaf))}(?!\w)", _norm(line)) is not None


def changed_settings(repo: Path, ref: str, space: dict, flags_files: set[str]) \
        -> tuple[list[str], list[str]]:
    """The search_space keys whose setting the attempt `ref` changes, and those of them that
    are flags no tracked .py file of the repo names (a flag nothing reads)."""
    diff = subprocess.run(["git", "-C", str(repo), "diff", "-U0", f"{ref}~1", ref],
                          capture_output=True, text=True).stdout
    removed: dict[str, list[str]] = {}
    added: dict[str, list[str]] = {}
    name = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[6:] if line.startswith("+++ b/") else ""
        elif line.startswith("-") and not line.startswith("---"):
            removed.setdefault(name, []).append(line[1:])
        elif line.startswith("+") and not line.startswith("+++"):
            added.setdefault(name, []).append(line[1:])
    settings, unread = [], []
    for key in space:
        leaf = str(key).rsplit(".", 1)[-1]      # a keyword, a dict key; or the whole key
        files = [f for f, lines in added.items()
                 if any(_names(x, leaf) or _names(x, str(key)) for x in lines)]
        if not files:
            continue
        settings.append(str(key))
        if all(Path(f).name in flags_files for f in files) and not _read_by_code(repo, leaf):
            unread.append(str(key))
    return settings, unread


def _read_by_code(repo: Path, leaf: str) -> bool:
    for form in {leaf, leaf.replace("_", "-"), leaf.replace("-", "_")}:
        found = subprocess.run(["git", "-C", str(repo), "grep", "-q", "-w", "-F", form, "--",
                                "*.py"], capture_output=True)
        if found.returncode == 0:
            return True
    return False


def read_night(repo: Path, folder: Path, night: Night) -> None:
    task = yaml.safe_load((folder / "task.yaml").read_text()) or {}
    metric = task.get("metric")
    name = metric.get("name") if isinstance(metric, dict) else str(metric)
    space = task.get("search_space") or {}
    flags_files = {"autoresearch.flags.yaml"}
    table = repo / ".autoresearch" / night.proposer / "results.tsv"
    if not table.is_file():
        return
    runs = set()
    db = repo / "mlflow.db"
    if db.is_file():
        with sqlite3.connect(db) as con:
            runs = {r[0] for r in con.execute("select run_uuid from runs")}
    with table.open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    for row in rows:
        value = _number(row.get(name, ""))
        if row.get("iteration") == "0":
            night.baseline, night.baseline_text = value, row.get(name, "")
            continue
        ref = row.get("attempt_ref") or row.get("commit", "")
        settings, unread = changed_settings(repo, ref, space, flags_files) if ref else ([], [])
        night.proposals.append(Proposal(
            int(row.get("iteration") or 0), row.get("description", ""), row.get("status", ""),
            row.get("reason", ""), settings, unread, value,
            bool(row.get("mlflow_run_id")) and row.get("mlflow_run_id") in runs))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


# -- running one entry ---------------------------------------------------------------------------
def python_for(entry: Entry, repo: Path, work: Path, pip: bool) -> tuple[str, str]:
    """The Python the night runs under (the engine's interpreter, so the runs' too), or why
    there is none: this one, or a throwaway venv that sees this Python's packages, the
    night's `path` folders of the repo and its `needs` installed from PyPI."""
    spec = entry.night
    missing = [m for m in spec.get("needs", []) if importlib.util.find_spec(m) is None]
    if missing and not pip:
        return "", "needs " + ", ".join(missing) + " (pass --pip to install them from PyPI)"
    if not missing and not spec.get("path"):
        return sys.executable, ""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    site = next(venv.glob("lib/python*/site-packages"))
    own = list(dict.fromkeys(p for p in sys.path if p.endswith("site-packages")))  # in order:
    # the first `loop` found (an editable install's finder) is the one this Python runs
    lines = [f"import site; list(map(site.addsitedir, {own!r}))"]
    lines += [str(repo / p) for p in spec.get("path", [])]
    (site / "corpus_night.pth").write_text("\n".join(lines) + "\n")
    python = str(venv / "bin" / "python")
    if missing:
        done = subprocess.run([python, "-m", "pip", "install", "-q", *spec.get("pip", missing)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return "", f"pip install {' '.join(missing)} failed: " + \
                (done.stderr.strip().splitlines() or ["?"])[-1]
    return python, ""


def run_entry(mirror: Path, entry: Entry, work: Path, iterations: int, budget: float,
              pip: bool, verbose: bool) -> Outcome:
    out = Outcome(entry)
    spec = entry.night
    if spec.get("skip"):
        out.status, out.why = "skip", spec["skip"]
        return out
    repo = checkout(mirror, entry, work)
    if isinstance(repo, str):
        out.status, out.why = repo, f"fetch github:{entry.repo}"
        return out
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-B", "main"], check=True)
    python, why = python_for(entry, repo, work, pip)
    if not python:
        out.status, out.why = "needs", why
        return out
    ar = [python, "-m", "loop"]
    env = {**os.environ, "NO_COLOR": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    folder = repo / entry.dir

    def sh(argv: list[str] | str, cwd: Path = repo, timeout: float = 900) \
            -> subprocess.CompletedProcess:
        done = subprocess.run(argv, cwd=cwd, env=env, shell=isinstance(argv, str), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        if verbose:
            shown = argv if isinstance(argv, str) else shlex.join(argv)
            print(f"$ {shown}\n{done.stdout}", flush=True)
        return done

    for step in spec.get("prepare", []):
        done = sh(step, cwd=folder)
        if done.returncode != 0:
            out.status, out.why = "prepare failed", f"{step}: {_last(done.stdout)}"
            return out
    where = [] if entry.dir in ("", ".") else [entry.dir]
    args = init_argv(spec.get("args", entry.init_args))
    done, extra, tried = sh([*ar, "init", *where, *args]), [], []
    out.init = "ok"
    while done.returncode != 0 and len(tried) < 3:
        words = hint_of(_last(done.stdout), tried)
        if words is None:
            break
        tried.append(" ".join(words))
        extra += words
        out.followed.append(shlex.join(words))
        out.init = "hint+"
        done = sh([*ar, "init", *where, *args, *extra])
    if done.returncode != 0:
        out.status, out.init, out.why = "init refused", "refused", _last(done.stdout)
        return out
    commands = next_commands(done.stdout)
    if not commands:
        out.status, out.why = "no next step", "init printed no commands"
        return out
    budget = float(spec.get("time_budget", budget))
    for line in commands:
        words = shlex.split(line.split("&&")[0]) if line.startswith("autoresearch") else []
        if not words:               # `git add ... && git commit ...`
            done = sh(line)
            if done.returncode != 0:
                out.status, out.why = "step failed", f"{line}: {_last(done.stdout)}"
                return out
        elif words[1:2] == ["check-task"]:
            done = sh([*ar, *words[1:], "--time-budget", f"{budget:g}"])
            out.check = "ok" if done.returncode == 0 else "FAIL"
            if done.returncode != 0:
                out.status, out.why = "check failed", _last(done.stdout)
                return out
        elif words[1:2] == ["run"]:
            if "--proposer" in words and words[words.index("--proposer") + 1] == "llm":
                out.status, out.why = "llm only", f"init printed `{line}`: nothing to search"
                return out
            for proposer in PROPOSERS:
                night = Night(proposer)
                start = time.monotonic()
                done = sh([*ar, *words[1:], "--proposer", proposer, "--iterations",
                           str(iterations), "--time-budget", f"{budget:g}", "--tag", proposer])
                night.seconds = time.monotonic() - start
                night.rc, night.output = done.returncode, done.stdout
                read_night(repo, folder, night)
                out.nights[proposer] = night
        else:
            out.status, out.why = "unknown step", line
            return out
    return out


def _last(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


# -- the report ----------------------------------------------------------------------------------
def report(outcomes: list[Outcome], out=None) -> dict:
    out = out or sys.stdout
    width = max([len(o.entry.id) for o in outcomes] + [5])
    head = (f"{'entry':<{width}}  {'shape':<28} {'init':<8} {'check':<6} "
            + "".join(f"{p + ': it, settings, ok':<26}" for p in PROPOSERS) + "s")
    print(head, file=out)
    print("-" * len(head), file=out)
    for o in outcomes:
        shape = o.entry.night.get("shape") or o.entry.shape
        if o.status in ("ok",):
            cells = "".join(f"{o.nights[p].cell() if p in o.nights else '-':<26}"
                            for p in PROPOSERS)
            print(f"{o.entry.id:<{width}}  {shape[:28]:<28} {o.init:<8} {o.check:<6} {cells}"
                  f"{o.seconds:.0f}", file=out)
        else:
            print(f"{o.entry.id:<{width}}  {shape[:28]:<28} {o.status}: {o.why}", file=out)
    print("\nproposals that were not a real setting, run and judged; nights that failed:",
          file=out)
    for o in outcomes:
        if o.followed:
            print(f"  {o.entry.id}: init refused, followed its hint {', '.join(o.followed)}",
                  file=out)
        for p, night in o.nights.items():
            if night.rc != 0:
                print(f"  {o.entry.id} {p}: `autoresearch run` exit {night.rc}: "
                      f"{_last(night.output)}", file=out)
            for prop in night.proposals:
                if prop.ok:
                    continue
                why = []
                if not prop.settings:
                    why.append("no setting of search_space changed")
                if prop.unread:
                    why.append("flags no code reads: " + ", ".join(prop.unread))
                if not prop.ran:
                    why.append(f"{prop.status}: {prop.reason}")
                elif prop.metric is None:
                    why.append("no metric read")
                if not prop.in_mlflow:
                    why.append("not in mlflow.db")
                print(f"  {o.entry.id} {p} #{prop.iteration} ({prop.description}): "
                      + "; ".join(why), file=out)
            if night.same:
                print(f"  {o.entry.id} {p}: {night.same} of {len(night.proposals)} proposals "
                      f"gave exactly the baseline's {night.baseline_text} (no effect?)", file=out)
    ran = [o for o in outcomes if o.status == "ok"]
    nights = [n for o in ran for n in o.nights.values()]
    props = [p for n in nights for p in n.proposals]
    totals = {
        "entries": len(outcomes), "ran": len(ran),
        "skipped": sum(o.status in ("skip", "needs") for o in outcomes),
        "failed": sum(o.status not in ("ok", "skip", "needs") for o in outcomes),
        "nights": len(nights),
        "nights_all_ok": sum(n.rc == 0 and bool(n.proposals) and all(p.ok for p in n.proposals)
                             for n in nights),
        "proposals": len(props), "proposals_ok": sum(p.ok for p in props),
        "crashed": sum(not p.ran for p in props),
    }
    print(f"\ntotals: {totals['ran']}/{totals['entries']} entries ran init and both nights "
          f"({totals['skipped']} skipped or needing packages, {totals['failed']} failed before "
          f"the nights); nights with every proposal a real setting, run and judged: "
          f"{totals['nights_all_ok']}/{totals['nights']}; proposals ok "
          f"{totals['proposals_ok']}/{totals['proposals']} ({totals['crashed']} did not run "
          f"to a verdict)", file=out)
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(parser)
    parser.add_argument("--iterations", type=int, default=2,
                        help="proposals after the baseline, per night (default 2)")
    parser.add_argument("--time-budget", type=float, default=30,
                        help="seconds per run, where the entry gives none (default 30)")
    parser.add_argument("--pip", action="store_true",
                        help="install an entry's `needs` from PyPI into a throwaway venv "
                             "(else such entries are reported `needs`)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every command and its output")
    parser.add_argument("--keep", action="store_true",
                        help="keep the clones (their logs, results.tsv, mlflow.db) and print "
                             "where")
    args = parser.parse_args(argv)
    if not args.mirror:
        parser.error("--mirror DIR is needed (or $AUTORESEARCH_CORPUS_MIRROR)")
    entries = [e for e in load_manifest(Path(args.manifest))
               if e.night and args.match.lower() in (e.id + " " + e.repo).lower()]
    outcomes = []
    tmp = tempfile.mkdtemp(prefix="init-nights-", dir=Path.home())
    if args.keep:
        print(f"clones kept in {tmp}")
    try:
        for entry in entries:
            work = Path(tmp) / entry.id
            work.mkdir()
            start = time.monotonic()
            outcome = run_entry(Path(args.mirror), entry, work, args.iterations,
                                args.time_budget, args.pip, args.verbose)
            outcome.seconds = time.monotonic() - start
            outcomes.append(outcome)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    report(outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
