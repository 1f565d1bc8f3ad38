"""Gains that hold at scale: after `finalize` wrote its branch, the branch is measured against
the night's start twice, at the night's own time box and at scale (K times that box, and/or
a larger model: the settings the task's `scale:` names, set in both versions), and the
report says whether the gain held, shrank or reversed. `finalize --scale K` or a task's
`scale:` key (loop/setup/scale.py) asks for it.

The comparison at the night's box reuses finalize's runs (the start's runs of the gain, the
branch's of its check: the same seeds) from finalize.jsonl; the runs at scale are
journalled in their own file, `finalize-<label>.jsonl` (a run's value depends on its box, so
they never share a key with the night's box), so a kill -9 and the same command repeat none.

Verdicts, from the two intervals at the judge's confidence (positive = the branch better):
**reversed** (at scale the start is better beyond noise), **held** (at scale the branch is
better beyond noise, and not by less than at the night's box beyond the two intervals
combined), **shrank** (better at scale, but by less beyond noise), **gone** (within noise at
scale: the gain did not show there), **not measured**. A task whose time box lives in its
code (`budget_constant`) can be scaled by settings only."""
from __future__ import annotations

import math
from dataclasses import dataclass

from loop.engine.scheduler import Scheduler
from loop.errors import UsageError
from loop.finalize.estimate import Estimate
from loop.finalize.measure import MeasuredRuns, Comparison, Version, budget_check
from loop.run import grading
from loop.run.backends import make_backend
from loop.script import settings as setting_text
from loop.setup.scale import ScaleSpec, factor_of, parse
from loop.setup.task import load_task, with_budget
from loop.setup.taskfiles import list_files
from loop.state.journal import Journal
from loop.errors import TaskError
from loop.words import plural

WORDS = {"held": "held", "shrank": "shrank", "gone": "is gone (within noise at scale)",
         "reversed": "REVERSED", "not measured": "was not measured"}


def spec_for(flag: float | None, task) -> ScaleSpec | None:
    """What finalize measures at: `--scale K` (over the task's time factor) or the task's
    `scale:` key; None when neither asks."""
    try:
        from_task = parse(task.scale, f"{task.root}/task.yaml")
        if flag is None:
            spec = from_task
        else:
            factor = factor_of(flag, "--scale")
            spec = ScaleSpec(factor, from_task.settings if from_task else {})
    except TaskError as exc:
        raise UsageError(str(exc)) from None
    if spec is not None and spec.factor == 1.0 and not spec.settings:
        raise UsageError("--scale 1 with no scale.settings in task.yaml: the runs at scale "
                         "would be the night's own")
    if spec is not None and spec.settings:
        files = {p: (task.root / p).read_text(errors="replace") for p in list_files(task.root)
                 if task.is_editable(p)}
        known = {s.name for s in setting_text.find_all(files)}
        missing = [name for name in spec.settings if name not in known]
        if missing:
            raise UsageError(f"{task.root}/task.yaml: scale.settings: no numeric setting "
                             f"{missing[0]} in the task's editable files")
    if spec is not None and spec.factor != 1.0 and task.budget_constant:
        raise UsageError(f"--scale: {task.name} trains for {task.budget_constant}, set in its "
                         f"code (the script does not read AUTORESEARCH_TIME_BUDGET); scale it "
                         f"by settings instead (task.yaml scale.settings)")
    return spec


@dataclass
class AtScale:
    spec: ScaleSpec
    budget_s: float             # the night's time box
    small: Comparison           # the branch vs the start at the night's box
    large: Comparison           # the same at scale
    verdict: str = ""


def verdict(small: Estimate, large: Estimate) -> str:
    if large.mean is None:
        return "not measured"
    if large.sign < 0:
        return "reversed"
    if large.sign == 0:
        return "gone"
    if small.mean is None or small.half is None or large.half is None:
        return "held"
    shrink = small.mean - large.mean       # (exact runs: equal but for rounding)
    return "shrank" if shrink > math.hypot(small.half, large.half) + 1e-9 * abs(small.mean) \
        else "held"


class ScaleCheck:
    """The branch against the start, at the night's box and at scale, through the night's
    backend (a scheduler of its own for each box)."""

    def __init__(self, setup, spec: ScaleSpec, direction: str, confidence: float,
                 max_pairs: int):
        self.setup, self.spec, self.out = setup, spec, setup.out
        self.ws, self.rel, self.config = setup.workspace, setup.task_rel, setup.config
        self.direction, self.confidence, self.max_pairs = direction, confidence, max_pairs

    def run(self, base: str, tip: str) -> AtScale | None:
        """Measure both comparisons; None when interrupted (the same command goes on)."""
        task = self._task()
        budget_s = with_budget(task, self.config.time_budget_s).time_budget_s
        branch, start = self._version(tip), self._version(base)
        small = Comparison("branch vs start", "scale", branch, start)
        big_branch, big_start = (branch, start) if not self.spec.settings else \
            (self._scaled(tip, "branch"), self._scaled(base, "start"))
        large = Comparison(f"branch vs start at {self.spec.label()}", "scale", big_branch,
                           big_start)
        at = AtScale(self.spec, budget_s, small, large)
        seconds = budget_s * self.spec.factor
        self.out(f"finalize: at scale ({self.spec.label()}, time box {seconds:g} s): the "
                 f"branch against the start, at the night's box (finalize's runs reused) and "
                 f"at scale ({2 * 2} to {2 * self.max_pairs} runs there)")
        if not self._measure(small, "finalize.jsonl", budget_s, task) or \
                not self._measure(large, f"finalize-{self._file_label()}.jsonl", seconds, task):
            return None
        at.verdict = verdict(small.est, large.est)
        return at

    def _measure(self, comp: Comparison, journal: str, seconds: float, task) -> bool:
        sched = self._scheduler(task, seconds)
        logs = self.setup.dir / "finalize" / ("logs" if journal == "finalize.jsonl" else
                                             f"logs-{self._file_label()}")
        measured_runs = MeasuredRuns(Journal(self.setup.dir / journal), sched, self.direction,
                      self.config.seed, logs, f"finalize-{self.setup.tag}", self.out)
        if measured_runs.earlier and journal != "finalize.jsonl":
            self.out(f"finalize: resuming at scale: {plural(measured_runs.earlier, 'run')} already "
                     f"in {journal}, not made again")
        try:
            measured_runs.measure([comp], self.confidence, self.max_pairs,
                          budget_check(measured_runs, None, None))
        except KeyboardInterrupt:
            sched.cancel_all()
            self.out("finalize: interrupted; run the same command to go on (no run is "
                     "made twice)")
            return False
        finally:
            sched.backend.close()
            self.ws.restore()
        return True

    def _task(self):
        return load_task(self.ws.worktree / self.rel, origin=self.setup.repo_root / self.rel)

    def _scheduler(self, task, seconds: float) -> Scheduler:
        setup, config = self.setup, self.config
        task = with_budget(task, seconds)
        guard = grading.Guard.at_commit(task, self.ws, self.rel, setup.dir / "pristine")
        backend = make_backend(config.backend, workspace=self.ws, task=task,
                               task_rel=self.rel, guard=guard, workers=config.workers,
                               devices=config.devices,
                               slot_root=setup.repo_root / ".autoresearch" / ".slots" / setup.tag,
                               limits=setup.limits, slurm=config.slurm)
        return Scheduler(backend)

    def _version(self, commit: str) -> Version:
        return Version(commit, self.ws.trees([commit])[0])

    def _scaled(self, commit: str, who: str) -> Version:
        """`commit` with the scale's settings written in its editable files, staged on it."""
        paths = self.ws.list_at(commit, self.rel)
        files = self.ws.read_at(commit, self.rel, paths)
        changed: dict[str, str] = {}
        for name, value in self.spec.settings.items():
            found = next((s for s in setting_text.find_all(files) if s.name == name), None)
            if found is None:
                raise UsageError(f"scale.settings: no setting {name} in the task's files at "
                                 f"{commit[:7]} ({who}); name a numeric setting of them")
            text = setting_text.write(changed.get(found.path, files[found.path]), found.path,
                                      name, value)
            if text is not None:
                changed[found.path] = text
        made = self.ws.stage_on(commit, self.rel, changed,
                                f"finalize {self.setup.tag}: {who} at {self.spec.label()}")
        self.ws.keep_ref(f"finalize/scale-{who}", made)
        return self._version(made)

    def _file_label(self) -> str:
        return "".join(c if c.isalnum() or c in ".=_-" else "_" for c in
                       self.spec.label().replace(" ", "-"))


def section(at: AtScale, metric: str) -> list[str]:
    """finalize.md's part on scale (the console prints it too)."""
    s, big = at.small.est, at.large.est
    scale = at.spec.label()
    box = f"{at.budget_s * at.spec.factor:g} s time box" + \
        (f", {at.spec.factor:g} × the night's {at.budget_s:g} s" if at.spec.factor != 1 else "")
    if at.spec.settings:
        box += f"; {', '.join(f'{k} = {v}' for k, v in at.spec.settings.items())} in both"
    out = ["", f"## At scale: {scale}", "", f"The branch against the night's start at the "
           f"night's box and at scale ({box}); positive = the branch is better.", "",
           "| | the night's box | at scale |", "|---|---|---|",
           f"| branch vs start | {s.text(metric)} ({plural(2 * s.pairs, 'run')}) | "
           f"{big.text(metric)} ({plural(2 * big.pairs, 'run')}) |", "",
           f"At scale the gain {WORDS[at.verdict]}: {_why(at)}"]
    return out


def _why(at: AtScale) -> str:
    s, big = at.small.est, at.large.est
    return {
        "reversed": "the start is better beyond noise there; the changes found at the night's "
                    "box do not carry over (review them before merging).",
        "gone": "the branch and the start are within noise of each other there.",
        "shrank": f"the branch is still better there, by less beyond noise "
                  f"({big.mean or 0.0:+.3g} against {s.mean or 0.0:+.3g}).",
        "held": "the branch is better beyond noise there, by no less beyond noise.",
        "not measured": "no pair of runs at scale succeeded.",
    }[at.verdict]


def append_report(folder, lines: list[str]) -> None:
    """The section added to finalize.md and finalize.html (report.py wrote them)."""
    md = folder / "finalize.md"
    if md.exists():
        md.write_text(md.read_text() + "\n".join(lines) + "\n")
    page = folder / "finalize.html"
    if page.exists():
        import html
        body = "".join(f"<h2>{html.escape(line[3:])}</h2>" if line.startswith("## ") else
                       f"<p>{html.escape(line)}</p>" for line in lines
                       if line and not line.startswith("|---"))
        page.write_text(page.read_text() + body + "\n")


def check(setup, spec: ScaleSpec, morning, max_pairs: int) -> int:
    """After finalize wrote its branch: the check at scale, printed and added to the
    report; 130 when interrupted."""
    trees = setup.workspace.trees([morning.base, morning.tip])
    if trees[0] == trees[1]:
        lines = ["", f"## At scale: {spec.label()}", "",
                 "Not measured: the branch holds none of the night's changes (its code is the "
                 "start's)."]
        append_report(setup.dir, lines)
        for line in lines:
            setup.out(line)
        return 0
    at = ScaleCheck(setup, spec, morning.direction, setup.config.judge.confidence,
                    max_pairs).run(morning.base, morning.tip)
    if at is None:
        return 130
    lines = section(at, morning.metric)
    append_report(setup.dir, lines)
    for line in lines:
        setup.out(line)
    return 0
