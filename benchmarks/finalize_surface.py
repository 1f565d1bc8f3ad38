"""`autoresearch finalize` on a surface whose true value is known: does it keep the kept
changes that matter and drop the ones that do not?

For each seed: a fresh git repo holding a copy of a surface task (benchmarks/surface/, or
benchmarks/hard_surface/ with --surface hard; its NOISE and RUN_S rewritten), a night of
random search with keep-any-gain (`autoresearch run`: the offline `mutate` proposer,
`judge: {rule: strict, min_delta: 0}`, --iterations N, one worker, no sandbox, MLflow in a
throwaway SQLite file), then `autoresearch finalize --workers W` on it. The surface's noise
is made partly the code's own (`--shared`, see own_noise): as shipped, paired runs on one
seed would see none. Then, from the task's own `true_loss`:

- the true value of the night's best (the branch's tip) and of the finalized branch
  (`autoresearch/<tag>-final`), and their difference in noise sd;
- per kept commit its TRUE leave-one-out effect: the true loss of the final code with that
  commit's constants put back to what they were before it (those a later commit rewrote
  stay: it is superseded there), minus the final code's; positive = the change helps;
- which finalize kept on the branch (the `Autoresearch-Kept-Commit:` trailers).

A kept change is **real** when its true effect exceeds `--large` noise sd (default 1/3),
**null or harmful** when it is at most 0 (a constant the surface ignores, a superseded
change, a step that made things worse), small otherwise. Reported: runs finalize spent per
kept change, the share of null-or-harmful keeps dropped, the share of real keeps lost, and
whether the report names every kept commit (with a measured effect unless dropped without a
run).

    python benchmarks/finalize_surface.py [--seeds 0,1,2] [--surface bar] [--noise 0.05]
        [--iterations 40] [--run-s 0.05] [--workers 2] [--large 0.333]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import surface_compute as sc  # noqa: E402
import surface_nights as sn  # noqa: E402

CONFIG = """\
task: surface
sandbox: "off"
seed: {seed}
iterations: {iterations}
judge: {{rule: strict, min_delta: 0}}
"""
TRAILER = re.compile(r"^Autoresearch-Kept-Commit: ([0-9a-f]{40})$", re.M)
PART = re.compile(r"^Autoresearch-Part: \d+/\d+ ([A-Z][A-Z0-9_]*): ", re.M)
HERE = Path(__file__).resolve().parent
# surfaces written for finalize (issue 38): settings the score ignores and settings that
# interact (benchmarks/finalize_surfaces/*/surface.py say how); `coupled` was written after
# finalize's rules were chosen on the other two, to check they were not tuned to them
SURFACES = {**sc.SURFACES,
            **{name: sc.Surface(name, HERE / "finalize_surfaces" / name, 0.05, ())
               for name in ("ridge", "plateau", "coupled")}}


@dataclass
class Night:
    seed: int
    base: float                      # true loss of the start
    best: float                      # ... of the night's best (the branch's tip)
    final: float                     # ... of the finalized branch
    effects: dict = field(default_factory=dict)     # kept sha -> true leave-one-out effect
    kept_by_finalize: set = field(default_factory=set)
    verdicts: dict = field(default_factory=dict)    # short sha -> finalize's verdict
    measured: dict = field(default_factory=dict)    # short sha -> effect column
    runs: int = 0
    night_runs: int = 0
    check: str = ""
    units: dict = field(default_factory=dict)       # (sha, setting) -> true effect
    multi: set = field(default_factory=set)         # (sha, setting) of commits setting several
    kept_units: set = field(default_factory=set)    # (sha, setting) on the finalized branch
    unit_verdicts: dict = field(default_factory=dict)   # (sha, setting) -> verdict column
    dead: set = field(default_factory=set)          # (sha, setting) a later commit rewrote
    planned: str = ""
    log: str = ""                                   # finalize's console


def unit_effects(surface: sc.Surface, texts: list[str], shas: list[str]):
    """(sha, setting) -> the true effect of putting that one setting back to what it was
    before its commit (0 when a later commit rewrote it: superseded), and the units of
    commits that set several settings."""
    states = [{k: float(v) for k, v in sc.CONSTANT.findall(t)} for t in texts]
    truth = surface.module().true_loss
    final = states[-1]
    effects, multi, dead = {}, set(), set()
    for i in range(1, len(states)):
        changed = [c for c in states[i] if states[i][c] != states[i - 1].get(c)]
        for c in changed:
            alive = all(states[j][c] == states[i][c] for j in range(i, len(states)))
            effects[(shas[i - 1], c)] = truth({**final, c: states[i - 1][c]}) - truth(final) \
                if alive else 0.0
            if len(changed) > 1:
                multi.add((shas[i - 1], c))
            if not alive:
                dead.add((shas[i - 1], c))
    return effects, multi, dead


def kept_units(log: str, effects: dict) -> set:
    """(sha, setting) the finalized branch holds, from its commits' trailers: a commit's
    every setting unless it says which part it is."""
    out = set()
    for message in log.split("\x00"):
        sha = TRAILER.search(message)
        if not sha:
            continue
        part = PART.search(message)
        out |= {(s, c) for s, c in effects if s == sha.group(1)
                and (part is None or c == part.group(1))}
    return out


def true_effects(surface: sc.Surface, texts: list[str]) -> dict[int, float]:
    """Kept commit i (1-based; texts[0] is the start) -> its true leave-one-out effect."""
    states = [{k: float(v) for k, v in sc.CONSTANT.findall(t)} for t in texts]
    tricks = sn.TRICK.findall(texts[-1])
    truth = surface.module().true_loss
    final = states[-1]
    out = {}
    for i in range(1, len(states)):
        changed = [c for c in states[i] if states[i][c] != states[i - 1].get(c)]
        alive = [c for c in changed
                 if all(states[j][c] == states[i][c] for j in range(i, len(states)))]
        without = {**final, **{c: states[i - 1][c] for c in alive}}
        out[i] = truth(without, tricks) - truth(final, tricks)
    return out


def report_rows(md: str) -> dict[str, tuple[str, str]]:
    """finalize.md's table: short sha (/part) -> (effect column, verdict column)."""
    rows = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) >= 6 and re.fullmatch(r"[0-9a-f]{7}(/\d+)?",
                                                                      cells[0]):
            rows[cells[0]] = (cells[3], cells[4])
    return rows


def own_noise(path: Path, shared: float) -> None:
    """The surface's noise made partly the code's own: as shipped, a run's offset is drawn
    from its seed alone, so two versions run on one seed differ by exactly their true
    values and a paired comparison sees no noise at all. Here only `shared` of its variance
    comes from the seed; the rest is drawn from the seed AND the point (constants, tricks),
    as a real run's noise depends on the code it runs (0: none shared, the hardest case)."""
    src = path.read_text()
    line = "    offset = rng.gauss(0.0, 1.0)"
    assert line in src, f"{path}: no `{line.strip()}` to rewrite"
    own = (f"{line}\n    offset = {shared ** 0.5!r} * offset + {(1 - shared) ** 0.5!r} * "
           f"random.Random(repr((seed, sorted(values.items()), sorted(set(tricks)))))"
           f".gauss(0.0, 1.0)")
    path.write_text(src.replace(line, own, 1))


def one_night(surface: sc.Surface, seed: int, noise: float, iterations: int, run_s: float,
              workers: int, shared: float, share: float | None = None,
              nights: Path | None = None) -> Night:
    """One night and its finalize. `nights`: a folder keeping each night's repo, so that
    finalize can be run again on the same nights (its own state is cleared first)."""
    with tempfile.TemporaryDirectory(prefix="finalize-surface-") as scratch:
        tmp = Path(scratch) if nights is None else \
            nights / f"{surface.name}-seed{seed}-noise{noise:g}-shared{shared:g}-it{iterations}"
        done = tmp / "night.done"
        if not done.exists():
            shutil.rmtree(tmp / "repo", ignore_errors=True)
            tmp.mkdir(parents=True, exist_ok=True)
            repo = sn.make_repo(tmp, noise, run_s, surface.task)
            own_noise(repo / "surface" / "surface.py", shared)
            # the night on one worker: the same seed makes the same night, run after run
            (repo / "autoresearch.yaml").write_text(CONFIG.format(seed=seed,
                                                                  iterations=iterations))
            sn.git(repo, "add", "-A")
            sn.git(repo, "commit", "-qm", "config; the noise partly the code's own")
        repo = tmp / "repo"
        state = repo / ".autoresearch" / "night"
        (state / "finalize.jsonl").unlink(missing_ok=True)
        shutil.rmtree(state / "finalize", ignore_errors=True)
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'mlflow.db'}"}
        for cmd in ([] if done.exists() else [["run", "--tag", "night"]]) + \
                [["finalize", "--tag", "night", "--workers", str(workers)]]:
            if cmd[0] == "finalize" and share is not None:     # another share of the night
                done = (repo / ".autoresearch" / "night" / "results.tsv").read_text()
                cmd += ["--max-runs", str(max(6, int(share * (len(done.splitlines()) - 1))))]
            proc = subprocess.run([sys.executable, "-m", "loop", *cmd], cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=3600)
            ended = "no untried mutation left" in proc.stdout
            out = proc.stdout
            if proc.returncode != 0 and not (cmd[0] == "run" and ended):
                raise RuntimeError(f"seed {seed}: `autoresearch {' '.join(cmd)}` exited "
                                   f"{proc.returncode}: {(proc.stderr or proc.stdout)[-3000:]}")
            if cmd[0] == "run":
                done.write_text("")
        show = lambda ref: sn.git(repo, "show", f"{ref}:surface/train.py")  # noqa: E731
        kept = sn.git(repo, "rev-list", "--first-parent", "--reverse",
                      "main..autoresearch/night").split()
        texts = [show("main")] + [show(sha) for sha in kept]
        night = Night(seed, surface.truth(texts[0]), surface.truth(texts[-1]),
                      surface.truth(show("autoresearch/night-final")))
        night.effects = {kept[i - 1]: e for i, e in true_effects(surface, texts).items()}
        log = sn.git(repo, "log", "--format=%B%x00", "main..autoresearch/night-final")
        night.kept_by_finalize = set(TRAILER.findall(log))
        night.units, night.multi, night.dead = unit_effects(surface, texts, kept)
        night.log = out
        night.kept_units = kept_units(log, night.units)
        state = repo / ".autoresearch" / "night"
        md = (state / "finalize.md").read_text()
        night.planned = next((line for line in md.splitlines()
                              if line.startswith("Runs made by finalize")), "")
        for line in md.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if len(cells) >= 6 and re.fullmatch(r"[0-9a-f]{7}(/\d+)?", cells[0]):
                for sha, c in night.units:
                    if sha[:7] == cells[0].split("/")[0] and (
                            "/" not in cells[0] or cells[1].startswith(f"{c}:")):
                        night.unit_verdicts[(sha, c)] = cells[4]
        for short, (effect, verdict) in report_rows(md).items():
            night.measured[short], night.verdicts[short] = effect, verdict
        night.check = next((line for line in md.splitlines()
                            if line.startswith(("Branch vs final", "Its code is"))), "")
        night.runs = sum('"event": "measure"' in line
                         for line in (state / "finalize.jsonl").read_text().splitlines())
        night.night_runs = len([r for r in (state / "results.tsv").read_text().splitlines()[1:]
                                if r.strip()])
        return night


def summarize(nights: list[Night], noise: float, large: float) -> list[str]:
    out = ["| seed | kept | real (> %.2g sd) kept by finalize | null or harmful dropped | "
           "small kept | finalize runs (per kept change) | true loss: start, night's best, "
           "finalized | finalized - best (noise sd) | report names every kept commit |"
           % large, "|---|---|---|---|---|---|---|---|---|"]
    tot = {"real": 0, "lost": 0, "null": 0, "dropped": 0, "runs": 0, "kept": 0}
    gaps = []
    for n in nights:
        real = [s for s, e in n.effects.items() if e > large * noise]
        null = [s for s, e in n.effects.items() if e <= 1e-12]
        small = [s for s in n.effects if s not in real and s not in null]
        lost = [s for s in real if s not in n.kept_by_finalize]
        dropped = [s for s in null if s not in n.kept_by_finalize]
        named = all(any(k.split("/")[0] == s[:7] for k in n.verdicts) for s in n.effects)
        gap = (n.final - n.best) / noise
        gaps.append(gap)
        tot["real"] += len(real)
        tot["lost"] += len(lost)
        tot["null"] += len(null)
        tot["dropped"] += len(dropped)
        tot["runs"] += n.runs
        tot["kept"] += len(n.effects)
        out.append(f"| {n.seed} | {len(n.effects)} | {len(real) - len(lost)} of {len(real)} | "
                   f"{len(dropped)} of {len(null)} | "
                   f"{sum(s in n.kept_by_finalize for s in small)} of {len(small)} | "
                   f"{n.runs} ({n.runs / max(1, len(n.effects)):.1f}) | "
                   f"{n.base:.4f}, {n.best:.4f}, {n.final:.4f} | {gap:+.2f} | "
                   f"{'yes' if named else 'NO'} |")
    out.append("")
    out.append(f"All seeds: {tot['kept']} kept changes; real keeps lost "
               f"{tot['lost']} of {tot['real']} ({tot['lost'] / max(1, tot['real']):.0%}); "
               f"null-or-harmful keeps dropped {tot['dropped']} of {tot['null']} "
               f"({tot['dropped'] / max(1, tot['null']):.0%}); finalize runs per kept change "
               f"{tot['runs'] / max(1, tot['kept']):.1f}; finalized - night's best "
               f"{statistics.fmean(gaps):+.2f} noise sd on average (worst {max(gaps):+.2f}; "
               f"negative = the finalized branch is truly better)")
    for n in nights:
        out.append(f"seed {n.seed}: {n.check}")
    return out


def summarize_units(nights: list[Night], noise: float) -> list[str]:
    """Per setting (a unit: one setting a kept commit changed, still live at the end):
    passengers (a commit's setting the score ignores, beside one it does not) kept, null
    units (true effect 0 or less) dropped, real units (>= 1 noise sd) lost, finalize's runs
    per night run, the finalized branch's true loss minus the night's best's."""
    out = ["| seed | kept commits | units | passengers kept | null units dropped | "
           "real (>= 1 sd) units lost | finalize runs / night runs | finalized - best "
           "(noise sd) |", "|---|---|---|---|---|---|---|---|"]
    tot = dict(passengers=0, pkept=0, null=0, dropped=0, real=0, lost=0, runs=0, night=0)
    gaps = []
    for n in nights:
        live = {u: e for u, e in n.units.items() if u not in n.dead}
        null = [u for u, e in live.items() if e <= 1e-12]
        passengers = [u for u in null if u in n.multi]
        real = [u for u, e in live.items() if e >= noise]
        pkept = sum(u in n.kept_units for u in passengers)
        dropped = sum(u not in n.kept_units for u in null)
        lost = sum(u not in n.kept_units for u in real)
        gap = (n.final - n.best) / noise
        gaps.append(gap)
        for key, v in (("passengers", len(passengers)), ("pkept", pkept), ("null", len(null)),
                       ("dropped", dropped), ("real", len(real)), ("lost", lost),
                       ("runs", n.runs), ("night", n.night_runs)):
            tot[key] += v
        out.append(f"| {n.seed} | {len(n.effects)} | {len(live)} | {pkept} of "
                   f"{len(passengers)} | {dropped} of {len(null)} | {lost} of {len(real)} | "
                   f"{n.runs} / {n.night_runs} = {n.runs / max(1, n.night_runs):.2f} | "
                   f"{gap:+.2f} |")
    out.append("")
    out.append("Per verdict (units still live at the end), how often it was wrong by the true "
               "effect: `matters` on a null unit, `dropped` on a unit worth >= 1 noise sd, "
               "`kept: not re-measured` on a null unit:")
    for label, match, wrong in (
            ("matters (measured or inferred)", lambda v: v.startswith("matters"),
             lambda e: e <= 1e-12),
            ("dropped: noise or harmful", lambda v: v.startswith("dropped: noise")
             or v.startswith("dropped: harmful"), lambda e: e >= noise),
            ("dropped: null by the night (no run)",
             lambda v: v.startswith("dropped: null by the night"), lambda e: e >= noise),
            ("kept: not re-measured", lambda v: v.startswith("kept: not re-measured"),
             lambda e: e <= 1e-12)):
        got = [n.units[u] for n in nights for u, v in n.unit_verdicts.items()
               if u not in n.dead and match(v)]
        bad = sum(wrong(e) for e in got)
        out.append(f"- {label}: {len(got)} units, wrong {bad} ({bad / max(1, len(got)):.0%})")
    out.append("")
    out.append(f"All seeds: passengers kept {tot['pkept']} of {tot['passengers']}; null units "
               f"dropped {tot['dropped']} of {tot['null']} "
               f"({tot['dropped'] / max(1, tot['null']):.0%}); real (>= 1 noise sd) units lost "
               f"{tot['lost']} of {tot['real']}; finalize runs per night run "
               f"{tot['runs'] / max(1, tot['night']):.2f}; finalized - night's best "
               f"{statistics.fmean(gaps):+.2f} noise sd on average (worst {max(gaps):+.2f})")
    return out


def detail(n: Night, noise: float) -> list[str]:
    rows = [line for line in n.log.splitlines() if line.startswith("finalize:")]
    rows += [f"seed {n.seed}: commit | true effect (noise sd) | measured | verdict"]
    for sha, e in n.effects.items():
        for name in [k for k in n.verdicts if k.split("/")[0] == sha[:7]] or [sha[:7]]:
            rows.append(f"  {name} | {e / noise:+.2f} (commit) | {n.measured.get(name, '')} | "
                        f"{n.verdicts.get(name, 'MISSING')}")
    for (sha, c), e in n.units.items():
        rows.append(f"  unit {sha[:7]} {c}: true {e / noise:+.2f} sd, "
                    f"{'kept' if (sha, c) in n.kept_units else 'dropped'}"
                    f"{' (superseded)' if (sha, c) in n.dead else ''}"
                    f"{' (passenger candidate)' if (sha, c) in n.multi else ''}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--surface", choices=sorted(SURFACES), default="bar")
    ap.add_argument("--share", type=float, default=None,
                    help="finalize's runs as a share of the night's (--max-runs); default: "
                         "finalize's own (a quarter)")
    ap.add_argument("--noise", type=float, default=0.05, help="run-to-run noise sd")
    ap.add_argument("--iterations", type=int, default=40, help="proposals in the night")
    ap.add_argument("--run-s", type=float, default=0.05, help="seconds one run takes")
    ap.add_argument("--workers", type=int, default=2, help="finalize's runs at once (the "
                    "night's: one)")
    ap.add_argument("--shared", type=float, default=0.0,
                    help="share of a run's noise variance its seed alone decides (paired "
                         "runs cancel it); 1: the surface as shipped")
    ap.add_argument("--large", type=float, default=1 / 3,
                    help="a real keep's true effect, at least, in noise sd")
    ap.add_argument("--detail", action="store_true", help="every kept commit's numbers")
    ap.add_argument("--nights", type=Path, default=None,
                    help="keep each night's repo in this folder and reuse it when it is "
                         "there (finalize run again on the same nights)")
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        ap.error("--seeds: comma-separated integers")
    surface = SURFACES[args.surface]
    print(f"{args.surface} surface, noise sd {args.noise:g}; random search (mutate), "
          f"keep-any-gain (strict, min_delta 0), {args.iterations} iterations, runs of "
          f"{args.run_s:g} s; finalize on {args.workers} workers; "
          f"noise shared by a seed {args.shared:g}; seeds {seeds}", flush=True)
    nights = []
    for seed in seeds:
        nights.append(one_night(surface, seed, args.noise, args.iterations, args.run_s,
                                args.workers, args.shared, args.share, args.nights))
        if args.detail:
            print("\n".join(detail(nights[-1], args.noise)), flush=True)
    print("\n".join(summarize(nights, args.noise, args.large)))
    print("\n".join(summarize_units(nights, args.noise)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
