"""init on a corpus of public repos: does `autoresearch init` write the task a researcher would?

For each repo of the manifest (benchmarks/init_corpus/manifest.yaml: names, pinned commits,
the CPU scale-down arguments a user would pass, and the task read by hand from the repo),
this checks the pinned commit out of a local mirror into a temporary folder, runs
`autoresearch init <dir> [scale-down args]` there, and compares what init wrote (task.yaml,
autoresearch.flags.yaml) with the expected task, field by field:

  right      the field is what the manifest expects
  hint:right init refused with a hint naming a flag; the runner followed it (re-ran init
             with that flag) and then the field was right
  hint:wrong the hint, followed, gave a wrong field
  refused    init refused and named no flag to follow (or the hint did not lead to a task)
  WRONG      init exited 0 and wrote a wrong field
  -          the manifest expects nothing of this field

Nothing is downloaded: the mirrors are bare git directories, one per repo, at
<mirror>/<owner>+<name>/repo (what the session tool `fetch github:<owner>/<name>` brings).
A repo missing from the mirror is reported as "not fetched". None of the repos' code is
in this repository; `--list` prints the repos to fetch.

    python benchmarks/init_corpus.py --mirror /path/to/mirror            # the whole corpus
    python benchmarks/init_corpus.py --mirror /path/to/mirror -k nanogpt # entries matching
    python benchmarks/init_corpus.py --list                              # the repos to fetch
"""
from __future__ import annotations

import argparse
import fnmatch
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "init_corpus" / "manifest.yaml"
DEFAULT_MIRROR = os.environ.get("AUTORESEARCH_CORPUS_MIRROR", "")
FIELDS = ["script", "metric", "reads", "direction", "editable", "protected", "search", "on_timeout",
          "next"]
FLAGS_FILE = "autoresearch.flags.yaml"
SETUP = re.compile(r"uv sync|prepare the data|names no validation file|needs the project's env")
# one flag of a hint, and a hint: `pass --metric val_bpb --metric-pattern '^val_bpb:...'`
FLAG = (r"--(?:metric-pattern|metric|script|direction|args|inputs|time-budget)"
        r"(?:[ =](?!--)(?:'[^']*'|\"[^\"]*\"|[^\s,;:)]+))?")
HINT = re.compile(rf"\b(?:pass|with|use|add)\s+({FLAG}(?:\s+{FLAG})*)")


# -- the manifest ---------------------------------------------------------------------------------
@dataclass
class Expect:
    """The task a researcher would write for one repo, read by hand from its code."""
    script: str | None = None
    metric: str | list[str] | None = None       # a name, or equivalent names
    direction: str | None = None
    editable: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)
    measurement: dict[str, str] = field(default_factory=dict)   # changes what the metric measures
    no_effect: dict[str, str] = field(default_factory=dict)     # a change cannot reach the metric
    not_searched: dict[str, str] = field(default_factory=dict)  # other settings to leave out
    on_timeout: str | None = None
    refuse: str | None = None       # init should stop (the reason): no task can be read
    # lines the script prints (their form read from its code, the numbers made up) and the
    # number each metric name should read from them: {output: str, values: {name: number}}
    sample: dict = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return [] if self.metric is None else \
            [self.metric] if isinstance(self.metric, str) else list(self.metric)


@dataclass
class Entry:
    id: str
    repo: str
    commit: str
    dir: str = "."
    shape: str = ""
    init_args: list[str] = field(default_factory=list)
    data: str = ""
    setup: str = ""     # needed before init and not possible offline (an environment, data)
    # an offline stand-in for that setup, with --standin: {venv: true (a .venv seeing this
    # Python's packages), stub_modules: [download-only modules, empty], files: [~/... paths
    # of the data prepare.py would write, created empty under the run's own HOME]}
    standin: dict = field(default_factory=dict)
    # how benchmarks/init_nights.py runs a short night on it (its docstring): {args, prepare,
    # path, needs, time_budget} where the night can run offline on CPU, else {skip: why}
    night: dict = field(default_factory=dict)
    expect: Expect = field(default_factory=Expect)

    @property
    def mirror_name(self) -> str:
        return self.repo.replace("/", "+")


def load_manifest(path: Path) -> list[Entry]:
    raw = yaml.safe_load(path.read_text())
    out = []
    for item in raw["repos"]:
        item = dict(item)
        exp = item.pop("expect", {}) or {}
        unknown = set(exp) - set(Expect.__dataclass_fields__)
        if unknown:
            raise SystemExit(f"{path}: {item.get('id')}: unknown expect keys {sorted(unknown)}")
        out.append(Entry(**item, expect=Expect(**exp)))
    ids = [e.id for e in out]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise SystemExit(f"{path}: duplicate ids {sorted(dup)}")
    return out


# -- what init wrote ------------------------------------------------------------------------------
@dataclass
class Written:
    """What one init call did: its exit status, its output and the task it wrote."""
    rc: int
    output: str
    task: dict = field(default_factory=dict)
    flags: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)      # the run config, autoresearch.yaml

    @property
    def refusal(self) -> str:
        lines = [l for l in self.output.strip().splitlines() if l.strip()]
        return lines[-1] if lines else f"exit {self.rc}, no output"


def norm(name: str) -> str:
    return name.strip().lstrip("-").replace("-", "_").lower()


def same_setting(expected: str, written: str) -> bool:
    """`lr` is `--lr`, `optim.lr` is `optim.lr`; a bare name also matches the last part of
    a dotted path (`learning_rate` is `training.learning_rate`)."""
    e, w = norm(expected), norm(written)
    return e == w or ("." not in e and w.rsplit(".", 1)[-1] == e)


def _paths(value) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _covered(name: str, globs: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, g) or name == g for g in globs)


def script_of(task: dict) -> str | None:
    """The script the run executes: the first .py word of `run`, else the grader's."""
    grader = task.get("grader") or {}
    if isinstance(grader, dict) and grader.get("script"):
        return str(grader["script"])
    for word in shlex.split(str(task.get("run") or "")):
        if word.endswith(".py"):
            return word
    words = shlex.split(str(task.get("run") or ""))
    if "-m" in words and words.index("-m") + 1 < len(words):
        return words[words.index("-m") + 1]
    return None


def metric_of(task: dict) -> tuple[str | None, str | None]:
    m = task.get("metric")
    if isinstance(m, str):
        return m, "minimize"
    if isinstance(m, dict):
        return m.get("name"), m.get("direction", "minimize")
    return None, None


def searched_of(task: dict) -> list[str]:
    return [str(k) for k in (task.get("search_space") or {})]


# -- the comparison -------------------------------------------------------------------------------
@dataclass
class Verdict:
    value: str          # right | WRONG | refused | -
    why: str = ""       # for WRONG: what init did
    kind: str = ""      # for WRONG: its kinds, ", "-separated (wrong metric, measurement
    #                     searched, no effect searched, other setting searched, setting missed)


def compare(exp: Expect, task: dict, config: dict | None = None) -> dict[str, Verdict]:
    """Each field of the task init wrote against the expected one (and, given the run config
    it wrote, whether the next step it prints can run)."""
    out: dict[str, Verdict] = {}
    if exp.refuse:      # init exited 0 where it should have stopped: its metric is made up
        metric, _ = metric_of(task)
        out["metric"] = Verdict("WRONG", f"wrote metric {metric}; should refuse: {exp.refuse}",
                                "wrong metric")
        return out

    def check(name: str, wanted, got, ok: bool, kind: str = "") -> None:
        if wanted in (None, [], {}):
            out[name] = Verdict("-")
        else:
            out[name] = Verdict("right") if ok else Verdict("WRONG", f"{got} (want {wanted})",
                                                            kind)

    script = script_of(task)
    check("script", exp.script, script, script is not None and exp.script is not None
          and Path(script).as_posix() == Path(exp.script).as_posix())
    metric, direction = metric_of(task)
    check("metric", exp.metric, metric, metric is not None
          and any(norm(metric) == norm(m) for m in exp.metrics), "wrong metric")
    out["reads"] = _reads(exp, task)
    check("direction", exp.direction, direction, direction == exp.direction)
    editable = _paths(task.get("editable"))
    protected = _paths(task.get("protected"))
    missing = [f for f in exp.editable if not _covered(f, editable)]
    bad = [f for f in exp.protected if _covered(f, editable)]
    check("editable", exp.editable or None, f"editable {editable}",
          not missing and not bad)
    if missing or bad:
        out["editable"].why = ("missing " + ", ".join(missing) if missing else "") + \
            ("; protected files made editable: " + ", ".join(bad) if bad else "")
    lost = [f for f in exp.protected if not _covered(f, protected)]
    check("protected", exp.protected or None, f"protected {protected}", not lost)
    if lost:
        out["protected"].why = "not protected: " + ", ".join(lost)
    out["search"] = _search(exp, searched_of(task))
    want_to = exp.on_timeout
    got_to = str(task.get("on_timeout", "fail"))
    check("on_timeout", want_to, got_to, got_to == want_to)
    out["next"] = _next_step(task, config)
    return out


def proposer_of(config: dict) -> str | None:
    p = config.get("proposer")
    return str(p.get("kind")) if isinstance(p, dict) and p.get("kind") else \
        (str(p) if isinstance(p, str) else None)


def _next_step(task: dict, config: dict | None) -> Verdict:
    """`autoresearch run`, the step init prints last, refuses an offline proposer with
    nothing to search (`--proposer mutate: nothing to search`, exit 2)."""
    if config is None:
        return Verdict("-")
    proposer = proposer_of(config)
    if proposer in ("mutate", "tune") and not task.get("search_space"):
        return Verdict("WRONG", f"proposer {proposer} with an empty search_space: the "
                                f"`autoresearch run` init prints exits 2", "next step fails")
    return Verdict("right")


def _reads(exp: Expect, task: dict) -> Verdict:
    """Does the metric's pattern read the right number from a sample of the script's output
    (the engine's own reader: the last match)?"""
    from loop.run.capture import CappedLog
    from loop.setup.metric import Metric
    metric, _ = metric_of(task)
    values = {norm(k): v for k, v in (exp.sample.get("values") or {}).items()}
    if not exp.sample or metric is None or norm(metric) not in values:
        return Verdict("-")
    m = task.get("metric")
    pattern = m.get("pattern", "") if isinstance(m, dict) else ""
    read = Metric(metric, pattern=pattern or "").pattern
    log = CappedLog(io.BytesIO(), 1 << 16, {"metric": read})
    log.feed(exp.sample["output"].encode())      # read as the engine reads a run's output
    log.close()
    got = log.value("metric")
    want = float(values[norm(metric)])
    if got is not None and abs(got - want) <= 1e-9 * max(1.0, abs(want)):
        return Verdict("right")
    return Verdict("WRONG", f"{metric} reads {got} from the sample output, not {want}",
                   "wrong metric")


def _search(exp: Expect, space: list[str]) -> Verdict:
    if not (exp.searched or exp.measurement or exp.no_effect or exp.not_searched):
        return Verdict("-")

    def hits(names: dict[str, str]) -> list[str]:
        return [f"{n} ({why})" for n, why in names.items()
                if any(same_setting(n, s) for s in space)]

    measured, dead, other = hits(exp.measurement), hits(exp.no_effect), hits(exp.not_searched)
    missing = [n for n in exp.searched if not any(same_setting(n, s) for s in space)]
    shown = ", ".join(space[:8]) + ("..." if len(space) > 8 else "") or "nothing"
    problems = [(kind, f"searched {'; '.join(names)}") for kind, names in (
        ("measurement searched", measured), ("no effect searched", dead),
        ("other setting searched", other)) if names]
    if missing:
        problems.append(("setting missed", f"not searched: {', '.join(missing)} "
                                           f"(the space: {shown})"))
    if problems:
        return Verdict("WRONG", "; ".join(p for _, p in problems),
                       ", ".join(k for k, _ in problems))
    return Verdict("right")


# -- running init ---------------------------------------------------------------------------------
def checkout(mirror: Path, entry: Entry, into: Path) -> Path | str:
    """A fresh clone of the pinned commit, or why there is none."""
    src = mirror / entry.mirror_name / "repo"
    if not src.is_dir():
        return "not fetched"
    dest = into / entry.mirror_name.split("+", 1)[1]
    if dest.exists():
        shutil.rmtree(dest)
    done = subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(src), str(dest)],
                          capture_output=True, text=True)
    if done.returncode == 0:
        done = subprocess.run(["git", "-C", str(dest), "checkout", "-q", entry.commit],
                              capture_output=True, text=True)
    if done.returncode != 0:
        return f"checkout failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    for cmd in (["config", "user.email", "corpus@example.com"], ["config", "user.name", "corpus"]):
        subprocess.run(["git", "-C", str(dest), *cmd], check=True)
    return dest


def init_argv(args: list[str]) -> list[str]:
    """The manifest's init arguments, `--args VALUE` joined as `--args=VALUE` (a value that
    starts with `--`, as `--cpu=True` does, is otherwise read as an option of init's own)."""
    out, i = [], 0
    while i < len(args):
        if args[i] == "--args" and i + 1 < len(args):
            out.append(f"--args={args[i + 1]}")
            i += 2
        else:
            out.append(args[i])
            i += 1
    return out


def stand_in(repo: Path, entry: Entry, home: Path) -> None:
    """The entry's offline stand-in for `uv sync && uv run prepare.py`: a .venv whose Python
    sees this Python's packages and empty modules for those only the download needs, and
    empty files where prepare.py would write its data. Enough for init, which imports
    prepare.py for its constants and checks that the data exists; no run could use it."""
    spec = entry.standin
    folder = repo / entry.dir
    if spec.get("venv"):
        venv = folder / ".venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                       capture_output=True)
        stubs = repo.parent / "stubs"
        for mod in spec.get("stub_modules", []):
            path = stubs / Path(*mod.split("."))
            path.mkdir(parents=True, exist_ok=True)
            (path / "__init__.py").write_text("")
            for parent in list(path.relative_to(stubs).parents)[:-1]:
                (stubs / parent / "__init__.py").touch()
        site = next(venv.glob("lib/python*/site-packages"))
        own = [p for p in sys.path if p.endswith("site-packages")]
        own += [sysconfig.get_paths()["purelib"]]
        (site / "corpus_standin.pth").write_text(
            f"import site; list(map(site.addsitedir, {sorted(set(own))!r}))\n{stubs}\n")
    for name in spec.get("files", []):
        path = home / name.removeprefix("~/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def run_init(autoresearch: list[str], repo: Path, entry: Entry, extra: list[str],
             timeout: float, standin: bool = False) -> Written:
    folder = repo / entry.dir
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], capture_output=True)
    subprocess.run(["git", "-C", str(repo), "clean", "-qfdx"], capture_output=True)
    home = repo.parent / "home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    if standin and entry.standin:
        stand_in(repo, entry, home)
    env = {**os.environ, "NO_COLOR": "1", "AUTORESEARCH_CACHE": str(repo.parent / "cache"),
           "HOME": str(home)}
    try:
        argv = [*autoresearch, "init", str(folder), *init_argv(entry.init_args), *extra]
        done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=timeout,
                              env=env)
        rc, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        return Written(124, f"init ran past {timeout:.0f}s")
    written = Written(rc, output)
    if rc == 0 and (folder / "task.yaml").is_file():
        written.task = yaml.safe_load((folder / "task.yaml").read_text()) or {}
        flags = folder / FLAGS_FILE
        if flags.is_file():
            written.flags = yaml.safe_load(flags.read_text()) or {}
        config = repo / "autoresearch.yaml"
        if config.is_file():
            written.config = yaml.safe_load(config.read_text()) or {}
    elif rc == 0:
        written.rc, written.output = 1, output + "\n(init exited 0 but wrote no task.yaml)"
    return written


def hint_of(text: str, tried: list[str]) -> list[str] | None:
    """The flags a refusal names (`pass --metric test_loss`, `pass --metric val_bpb
    --metric-pattern '^val_bpb:...'`), as init arguments; none with a placeholder."""
    for m in HINT.finditer(text):
        words: list[str] = []
        for flag in re.finditer(FLAG, m.group(1)):
            pair = shlex.split(flag.group(0).replace("=", " ", 1))
            if len(pair) == 1 or pair[1].isupper() or pair[1] in ("NAME", "FILE", "REGEX",
                                                                  "S", "PATH"):
                break               # `--metric NAME`, a placeholder: nothing to follow
            words += pair
        else:
            if " ".join(words) not in tried:
                return words
    return None


@dataclass
class Result:
    entry: Entry
    status: str                     # ok | refused | not fetched | checkout failed ...
    fields: dict[str, Verdict] = field(default_factory=dict)
    first: Written | None = None
    followed: list[str] = field(default_factory=list)
    final: Written | None = None


def onboard(autoresearch: list[str], mirror: Path, entry: Entry, tmp: Path,
            timeout: float, standin: bool = False) -> Result:
    repo = checkout(mirror, entry, tmp)
    if isinstance(repo, str):
        return Result(entry, repo)
    first = run_init(autoresearch, repo, entry, [], timeout, standin)
    first.output = first.output.replace(str(repo), "<checkout>")
    result = Result(entry, "ok" if first.rc == 0 else "refused", first=first, final=first)
    if first.rc != 0 and entry.setup and SETUP.search(first.refusal):
        result.status = "needs setup"
        return result
    if first.rc != 0 and entry.expect.refuse:
        result.fields = {"metric": Verdict("right", "refused, as expected")}
        return result
    if first.rc == 0:
        result.fields = compare(entry.expect, first.task, first.config)
        return result
    written, extra, tried = first, [], []
    for _ in range(3):              # follow up to three hints in turn
        words = hint_of(written.refusal, tried)
        if words is None:
            break
        extra += words
        tried.append(" ".join(words))
        result.followed.append(" ".join(shlex.quote(w) for w in words))
        written = run_init(autoresearch, repo, entry, extra, timeout, standin)
        written.output = written.output.replace(str(repo), "<checkout>")
        if written.rc == 0:
            break
    result.final = written
    if written.rc == 0:
        for name, verdict in compare(entry.expect, written.task, written.config).items():
            if verdict.value == "right":
                verdict.value = "hint:right"
            elif verdict.value == "WRONG":
                verdict.value = "hint:wrong"
            result.fields[name] = verdict
    else:       # every field the manifest expects is refused; "next" had no config to check
        expected = compare(entry.expect, {}, {})
        result.fields = {f: Verdict("-" if v.value == "-" else "refused")
                         for f, v in expected.items()}
    return result


# -- the report -----------------------------------------------------------------------------------
SHORT = {"right": "ok", "WRONG": "WRONG", "hint:right": "hint+", "hint:wrong": "hint-",
         "refused": "ref", "-": "-"}


def report(results: list[Result], out=None) -> dict:
    """The per-repo per-field table, the failures one line each, and the totals."""
    out = out or sys.stdout
    width = max([len(r.entry.id) for r in results] + [4])
    head = f"{'repo':<{width}}  {'init':<11}" + "".join(f"{f[:9]:>10}" for f in FIELDS)
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in results:
        cells = "".join(f"{SHORT[r.fields[f].value] if f in r.fields else '':>10}"
                        for f in FIELDS)
        status = r.status if r.status in ("ok", "refused") else r.status[:11]
        if r.status == "refused" and r.entry.expect.refuse:
            status = "refused*"
        print(f"{r.entry.id:<{width}}  {status:<11}{cells}", file=out)
    print("\nfailures:", file=out)
    for r in results:
        if r.status == "needs setup":
            print(f"  {r.entry.id}: needs setup ({r.entry.setup}): {r.first.refusal}"
                  if r.first else "", file=out)
            continue
        if r.status not in ("ok", "refused"):
            print(f"  {r.entry.id}: {r.status} (fetch github:{r.entry.repo})", file=out)
            continue
        if r.status == "refused" and r.entry.expect.refuse:
            continue
        if r.status == "refused":
            tail = f"; followed {', '.join(r.followed)}" if r.followed else ""
            end = "" if r.final is r.first or r.final is None else \
                (" -> ok" if r.final.rc == 0 else f" -> still refused: {r.final.refusal}")
            print(f"  {r.entry.id}: refused: {r.first.refusal if r.first else ''}{tail}{end}",
                  file=out)
        for name, v in r.fields.items():
            if v.value in ("WRONG", "hint:wrong"):
                print(f"  {r.entry.id}: {name}: {v.why}", file=out)
    ran = [r for r in results if r.status in ("ok", "refused")]
    setup = [r for r in results if r.status == "needs setup"]
    all_right = [r for r in ran if (r.status == "ok" or r.entry.expect.refuse)
                 and all(v.value in ("right", "-") for v in r.fields.values())]
    hinted = [r for r in ran if r.status == "refused" and r.fields
              and all(v.value in ("hint:right", "-") for v in r.fields.values())]
    field_right = sum(v.value == "right" for r in ran for v in r.fields.values())
    field_all = sum(v.value != "-" for r in ran for v in r.fields.values())
    kinds: dict[str, int] = {}
    for r in ran:
        if r.status != "ok":
            continue
        for v in r.fields.values():
            if v.value == "WRONG":
                for kind in (v.kind or "other").split(", "):
                    kinds[kind] = kinds.get(kind, 0) + 1
    totals = {
        "repos": len(results), "ran": len(ran),
        "needs_setup": len(setup),
        "not_fetched": len(results) - len(ran) - len(setup),
        "right": len(all_right), "right_pct": 100 * len(all_right) / max(len(ran), 1),
        "refused": sum(r.status == "refused" and not r.entry.expect.refuse for r in ran),
        "refused_as_expected": sum(r.status == "refused" and bool(r.entry.expect.refuse)
                                   for r in ran),
        "refused_hint_right": len(hinted),
        "fields_right": field_right, "fields_checked": field_all,
        "wrong_exit0": kinds,
    }
    print("\ntotals:", file=out)
    print(f"  entries: {totals['repos']} ({totals['ran']} judged; {totals['needs_setup']} need a "
          f"setup this offline run cannot do; {totals['not_fetched']} not fetched or checked out)",
          file=out)
    print(f"  right with no flags but scale-down: {totals['right']}/{totals['ran']} "
          f"({totals['right_pct']:.0f} %)", file=out)
    print(f"  fields right: {field_right}/{field_all}", file=out)
    print(f"  refused: {totals['refused']} (hint followed gave a right task: {len(hinted)}); "
          f"refused as expected: {totals['refused_as_expected']}", file=out)
    order = ["wrong metric", "measurement searched", "no effect searched",
             "other setting searched", "setting missed", "next step fails"]
    wrong = ", ".join(f"{k}: {kinds[k]}" for k in order + sorted(set(kinds) - set(order))
                      if k in kinds) or "none"
    print(f"  wrong with exit 0, by kind: {wrong}", file=out)
    return totals


def add_corpus_args(parser: argparse.ArgumentParser) -> None:
    """--mirror, --manifest and -k: which corpus, read from where (init_nights.py too)."""
    parser.add_argument("--mirror", default=DEFAULT_MIRROR,
                        help="the folder of bare git mirrors, <owner>+<name>/repo each "
                             "(default: $AUTORESEARCH_CORPUS_MIRROR)")
    parser.add_argument("--manifest", default=str(MANIFEST),
                        help="the corpus (default: benchmarks/init_corpus/manifest.yaml)")
    parser.add_argument("-k", dest="match", default="",
                        help="only the entries whose id or repo contains this")


def main(argv: list[str] | None = None) -> int:
    try:
        repos = sorted({e.repo for e in load_manifest(MANIFEST)}, key=str.lower)
    except (OSError, SystemExit, yaml.YAMLError):
        repos = []
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.fill(
            "To fetch the mirrors (nothing is downloaded at run time): call the session tool "
            "`fetch github:<owner>/<name>` for each repo below; each leaves a bare git "
            "directory at <mirror>/<owner>+<name>/repo, which must hold the pinned commit "
            "(`--list` prints repo and commit). Any bare clone there serves as well:", 88)
        + "\n"
               "  git clone --bare https://github.com/<owner>/<name> <mirror>/<owner>+<name>/repo\n"
               "The repos of the corpus:\n" + "\n".join(f"  fetch github:{r}" for r in repos))
    add_corpus_args(parser)
    parser.add_argument("--list", action="store_true",
                        help="print the repos to fetch (owner/name commit) and exit")
    parser.add_argument("--autoresearch", default=None,
                        help="the autoresearch command (default: the one beside this Python)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds per init call")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each init's output")
    parser.add_argument("--no-standin", dest="standin", action="store_false",
                        help="skip the manifest's offline stand-ins for a setup (uv sync, "
                             "downloaded data: a .venv seeing this Python's packages, empty "
                             "download-only modules, empty data files); those entries are "
                             "then reported as needs setup")
    args = parser.parse_args(argv)
    entries = [e for e in load_manifest(Path(args.manifest))
               if args.match.lower() in (e.id + " " + e.repo).lower()]
    if args.list:
        for repo in dict.fromkeys((e.repo, e.commit) for e in entries):
            print(f"{repo[0]} {repo[1]}")
        return 0
    if not args.mirror:
        parser.error("--mirror DIR is needed (or $AUTORESEARCH_CORPUS_MIRROR)")
    mirror = Path(args.mirror)
    exe = args.autoresearch or shutil.which("autoresearch", path=str(Path(sys.executable).parent))
    autoresearch = shlex.split(exe) if exe else [sys.executable, "-m", "loop"]
    results = []
    with tempfile.TemporaryDirectory(prefix="init-corpus-") as tmp:
        for entry in entries:
            work = Path(tmp) / entry.id
            work.mkdir()
            result = onboard(autoresearch, mirror, entry, work, args.timeout, args.standin)
            results.append(result)
            if args.verbose and result.first:
                print(f"==== {entry.id}: init {' '.join(entry.init_args)}\n{result.first.output}")
                if result.final is not result.first and result.final:
                    print(f"---- after {', '.join(result.followed)}\n{result.final.output}")
            shutil.rmtree(work, ignore_errors=True)
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
