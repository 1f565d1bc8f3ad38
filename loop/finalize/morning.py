"""`autoresearch finalize`: a night's kept commits re-measured and ablated, and the branch
to merge, `autoresearch/<tag>-final`. Under the tag's lock (a night and its finalize never
run at once); the runs go through the night's backend and scheduler (sandbox, grader, seeds
and limits as the night's), every run journalled in `.autoresearch/<tag>/finalize.jsonl`.

Order: the plan (plan.py: kept commits cut into units, one per setting or per independent
region; no-ops and superseded units dropped without a run; units of overlapping lines
joined), the budget (a quarter of the night's runs unless --max-runs), the night's own
evidence (units whose settings every attempt of the night moved within noise dropped with no
run of them: estimate.night_evidence), the screen (units left out of the final code in
groups, split where a group matters; measure.py's rounds),
the night's gain with what is left, the branch rebuilt from the start with the units kept,
its check against the final code, the report (report.py), the runs in MLflow (tracked.py).
Nothing here decides a keep on its own: the numbers are estimate.py's."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from loop.engine.parts import locate
from loop.engine.resume import install_signals
from loop.engine.scheduler import Scheduler
from loop.errors import UsageError
from loop.finalize import plan, tracked
from loop.finalize import scale as at_scale
from loop.finalize.estimate import (GROUP_PAIRS, NIGHT_DF, NIGHT_MIN, NightEvidence,
                                    night_evidence)
from loop.finalize.measure import MeasuredRuns, Comparison, Version, budget_check
from loop.finalize.night import night_config
from loop.finalize.report import write_report
from loop.judge.judge import estimate_noise
from loop.judge.verdict import improvement
from loop.proposers.change import ChangeFailed
from loop.repo.gitsafe import GitError
from loop.run import grading
from loop.run.backends import make_backend
from loop.setup.config import Config
from loop.setup.task import load_task, with_budget
from loop.state.journal import Journal, replay
from loop.repo.taglock import TagLock
from loop.engine.progress import Progress
from loop.words import plural

MAX_PAIRS = 6            # pairs per comparison at most (the trailer's runs: twice that)
KEPT = ("matters", "likely", "unmeasured")
SHARE = 0.25             # finalize's runs, checks included: at most this share of the night's
MIN_RUNS = 6             # ... but never fewer (a night of a few runs: a reference and a group)


@dataclass
class Kept:
    """One kept commit of the night, and what finalize found."""
    index: int
    sha: str
    description: str
    night_gain: float | None
    verdict: str = ""           # matters | likely | noise | harmful | superseded | no-op
    comparison: Comparison | None = None
    together: list[str] = field(default_factory=list)   # units left out with it
    note: str = ""
    part: plan.Part | None = None     # which part of its commit (None: the whole commit)
    prior: float = 0.0                # the night's evidence for it (the screen's order)
    settings: set[str] = field(default_factory=set)     # the settings its part sets
    evidence: NightEvidence | None = None     # what the night's attempts say of them

    @property
    def name(self) -> str:
        """The commit's short sha, with the part's number when the commit was split."""
        if self.part is None or self.part.parts == 1:
            return self.sha[:7]
        return f"{self.sha[:7]}/{self.part.part}"


def finalize(config: Config, out=print, max_runs: int | None = None,
             max_wall_s: float | None = None, max_pairs: int = MAX_PAIRS,
             share: float | None = SHARE, scale: float | None = None) -> int:
    """`share`: finalize's runs at most this share of the night's (None: no such cap);
    `max_runs`, when given, is the cap instead."""
    if not config.tag:
        raise UsageError("finalize needs --tag: the night to finalize")
    if max_runs is not None and max_runs < 1:
        raise UsageError(f"--max-runs must be at least 1, got {max_runs}")
    tag = config.tag
    config = night_config(config, tag)        # the night's task and time box
    setup = locate(config, tag, out, Progress(out), proposer=object())
    if not setup.journal.exists() or not setup.workspace.branch_exists():
        raise UsageError(f"no night for tag '{config.tag}' here (no journal or no branch "
                         f"{setup.workspace.branch}): run `autoresearch run --tag "
                         f"{config.tag}` first")
    spec = at_scale.spec_for(scale, setup.user_task)     # refused before any run
    lock = TagLock(setup.dir / "lock")
    lock.acquire()
    try:
        install_signals()
        morning = Finalizer(setup, max_runs, max_wall_s, max_pairs, share)
        code = morning.run()
        if code == 0 and spec is not None and morning.tip is not None:
            return at_scale.check(setup, spec, morning, max_pairs)
        return code
    finally:
        lock.release()


class Finalizer:
    def __init__(self, setup, max_runs, max_wall_s, max_pairs, share=SHARE):
        self.setup, self.out, self.ws = setup, setup.out, setup.workspace
        self.config, self.rel = setup.config, setup.task_rel
        self.max_runs, self.max_wall_s, self.max_pairs = max_runs, max_wall_s, max_pairs
        self.share = share
        self.planned: int | None = None
        self.groups: list[Comparison] = []
        self.base: str | None = None          # the night's start and the branch's tip, once
        self.tip: str | None = None           # written (what finalize --scale measures)
        self.attempts: dict[str, list[tuple[float, bool]]] = {}   # setting -> (delta, alone)
        self.night_sd: float | None = None    # one run's noise sd, from the night's repeats
        self.by_night = 0                     # units decided by the night's evidence
        self.final_value: float | None = None   # the night's value of its final code
        self.luck = 0.0                       # ... minus finalize's (estimate.night_evidence)

    def run(self) -> int:
        night = replay(self.setup.journal.events())
        start = night.start or {}
        base = start.get("base_commit")
        if not base:
            raise UsageError(f"{self.setup.journal.path} has no start commit: not a night")
        self.metric, self.direction = start.get("metric", "metric"), start["direction"]
        self.ws.open()
        final = self.ws.tip()
        shas = list(reversed(self.ws.kept_commits(base)))
        if not shas:
            self.out(f"finalize: tag {self.setup.tag} kept no change: nothing to finalize")
            return 0
        by_commit = {r.commit: r for r in night.records if r.kept}
        if by_commit.get(final) is not None and by_commit[final].samples:
            self.final_value = statistics.fmean(by_commit[final].samples)
        paths = sorted({p for a, b in zip([base] + shas, shas)
                        for p in self.ws.changed_paths(a, b, self.rel)})
        states, parts = plan.split([self.ws.read_at(c, self.rel, paths)
                                    for c in [base] + shas])
        kept: list[Kept] = []
        for part in parts:
            sha = shas[part.commit - 1]
            gain = getattr(by_commit.get(sha), "delta", None)
            desc = self._subject(sha, by_commit)
            if part.parts > 1:
                desc = f"{part.label} (part {part.part} of {part.parts} of: {desc})"
            kept.append(Kept(len(kept) + 1, sha, desc, gain, part=part,
                             prior=(gain or 0.0) / part.parts))
        self._settings_prior(kept, states, night.records)
        self.night_sd = estimate_noise([r.samples for r in night.records
                                        if len(r.samples) >= 2])
        night_runs = sum(max(1, len(r.samples)) for r in night.records)
        if self.max_runs is None and self.share is not None:
            self.max_runs = max(MIN_RUNS, int(self.share * night_runs))
            self.planned = self.max_runs
        found = plan.facts(states)
        units = plan.units(states, found)
        for k, f in zip(kept, found):
            k.verdict = "no-op" if f.noop else "superseded" if f.superseded else ""
        night_run_s = _mean_run_s(night.records)
        comps, versions = self._comparisons(base, final, states, found, units, kept)
        self._say_cost(kept, comps, night_run_s, night_runs)
        sched = self._scheduler()
        measured_runs = self._measured_runs(sched)
        measured = self._measure(measured_runs, sched, comps, kept, units, versions, base, states,
                                 found)
        if measured is None:
            return 130
        self._finish(start, kept, comps + self.groups, measured_runs, *measured)
        self.base, self.tip = base, measured[0]
        return 0

    def _settings_prior(self, kept, states, records) -> None:
        """A unit that sets settings gets, as its prior, how much the night's proposals that
        set them moved the score (kept or not: the median |gain|, of the proposals that set
        that setting alone when there are two or more, else of all that set it): a setting
        the score ignores moves it by noise alone, while its commit's gain, shared with the
        setting it rode with, says nothing of it. Units without a setting keep their share
        of their commit's gain. Only the screen's order depends on it."""
        moves: dict[str, list[float]] = {}
        alone: dict[str, list[float]] = {}
        for r in records:
            if not r.commit or not r.parent or r.delta is None:
                continue
            try:
                paths = self.ws.changed_paths(r.parent, r.commit, self.rel)
                names = plan.settings_set(self.ws.read_at(r.parent, self.rel, paths),
                                          self.ws.read_at(r.commit, self.rel, paths))
            except GitError:         # an attempt no longer in the repository: no evidence
                continue
            for name in names:
                moves.setdefault(name, []).append(abs(r.delta))
                self.attempts.setdefault(name, []).append((r.delta, len(names) == 1))
                if len(names) == 1:
                    alone.setdefault(name, []).append(abs(r.delta))
        for k in kept:
            names = plan.settings_set(states[k.index - 1], states[k.index])
            k.settings = names
            seen = [alone[n] if len(alone.get(n, [])) >= 2 else moves[n] for n in names
                    if n in moves]
            if names and len(seen) == len(names):
                k.prior = max(statistics.median(m) for m in seen)

    def _measured_runs(self, sched) -> MeasuredRuns:
        """Where the runs are made and journalled (finalize.jsonl: a restart repeats none)."""
        measured_runs = MeasuredRuns(Journal(self.setup.dir / "finalize.jsonl"), sched,
                                     self.direction, self.config.seed,
                                     self.setup.dir / "finalize" / "logs",
                                     f"finalize-{self.setup.tag}", self.out)
        if measured_runs.earlier:
            self.out(f"finalize: resuming: {plural(measured_runs.earlier, 'run')} already in "
                     f"{measured_runs.journal.path.name}, not made again")
        return measured_runs

    def _measure(self, measured_runs, sched, comps, kept, units, versions, base, states, found):
        """Measure the comparisons, give the verdicts, write the branch and check it (a
        dropped change re-added while the branch is worse): (tip, notes, last check, all
        checks), or None when interrupted. The worktree is restored either way."""
        budget = budget_check(measured_runs, self.max_runs, self.max_wall_s)
        conf = self.config.judge.confidence
        try:
            self._screen(measured_runs, budget, conf, versions["ref"], kept, units, base, states,
                         found)
            # the gain: what is left
            measured_runs.measure(comps[:1], conf, self.max_pairs, budget)
            tip, notes = self._branch(base, states, found, kept)
            check = self._check(tip, versions["final"], measured_runs, budget, conf)
            checks = [check] if check else []
            while check is not None and check.est.sign < 0 and self._readd(kept, notes):
                tip, more = self._branch(base, states, found, kept)
                notes += more
                check = self._check(tip, versions["final"], measured_runs, budget, conf)
                checks += [check] if check else []
        except KeyboardInterrupt:
            sched.cancel_all()
            self.out("finalize: interrupted; run the same command to go on (no run is "
                     "made twice)")
            return None
        finally:
            sched.backend.close()
            self.ws.restore()
        return tip, notes, check, checks

    def _finish(self, start, kept, comps, measured_runs, tip, notes, check, checks) -> None:
        """The report written and printed, the journal's `done`, the MLflow record."""
        gain = comps[0]
        report = write_report(self.setup.dir, self.setup.tag, self.metric, kept, gain, check,
                              f"autoresearch/{self.setup.tag}-final", measured_runs.runs, notes,
                              self.planned if self.planned is not None else self.max_runs)
        measured_runs.journal.write("done", branch=f"autoresearch/{self.setup.tag}-final", tip=tip,
                            verdicts={k.name: k.verdict for k in kept}, runs=measured_runs.runs)
        for line in report:
            self.out(line)
        uri, experiment = tracked.where(self.config, start, self.setup.user_task.name)
        tracked.record(uri, experiment, self.setup.tag, self.setup.dir, self.metric, kept, comps,
                       checks, measured_runs, self.out)

    def _subject(self, sha: str, by_commit) -> str:
        rec = by_commit.get(sha)
        return rec.description if rec else self.ws.message(sha).splitlines()[0]

    def _comparisons(self, base, final, states, found, units, kept):
        """The final code against the start (the night's gain), and the reference each
        group of units is left out of: the final code made again from the start without its
        no-ops and superseded commits (the final code itself when that is the same)."""
        versions = {"final": self._version(final), "base": self._version(base)}
        comps = [Comparison("gain", "gain", versions["final"], versions["base"])]
        try:
            ref_files = plan.reference(states, found)
        except ChangeFailed:     # the live changes do not apply made again: the final code
            ref_files = states[-1]
        versions["ref"] = versions["final"] if ref_files == states[-1] else self._made(
            base, ref_files, "the final code without its no-ops and superseded changes",
            "reference")
        for unit in units:
            members = [kept[i - 1] for i in unit.members]
            for k in members:
                k.together = [m.name for m in members if m is not k]
                if unit.variant is None:
                    k.note = f"cannot be left out ({unit.why_not}): kept unmeasured"
                    k.verdict = "matters"
        return comps, versions

    def _screen(self, measured_runs, budget, conf, ref, kept, units, base, states, found) -> None:
        """Adaptive group testing: units left out of the reference in groups, one comparison
        per group, stopped as soon as the group's call is made (estimate.group_call). The
        units are ordered by the night's evidence for them (_settings_prior; inflated by
        selection, it orders and does not decide); those that look null (less than half the
        mean; else the lower half) are left out first, together, then the rest. A
        group called null drops every unit in it at once; a group that matters (or hurts)
        is split in two halves, the lower first; when the lower half of a group that
        matters is null, the upper one must hold what mattered, so it is split (or, one
        unit, kept) without a comparison. When the run budget is spent, every unit not yet
        decided stays, unmeasured.

        First, units whose settings the night's own attempts show to be null
        (_night_null) are dropped without a run of them; one run's noise, which that needs,
        comes from the night's repeats or, for a night without any, from NIGHT_DF + 1 runs of
        the reference (each also one pair of every group measured after)."""
        live = [u for u in units if u.variant is not None]
        could = [k for u in live for k in (kept[i - 1] for i in u.members)
                 if k.settings and all(len(self.attempts.get(n, [])) >= NIGHT_MIN
                                       for n in k.settings)]
        if self.night_sd is None and could:      # only when the night could decide one
            measured_runs.runs_of(ref, NIGHT_DF + 1, budget)    # one run's noise: the reference's
            if measured_runs.run_df() >= NIGHT_DF:              # runs, each one pair of every group
                self.night_sd = measured_runs.run_sd()
                self.luck = self._luck(measured_runs, ref)
        if self.night_sd is not None:
            live = self._night_null(live, kept, self.night_sd)
        order = sorted(live, key=lambda u: (sum(kept[i - 1].prior for i in u.members),
                                            u.members))
        all_members = {i for u in live for i in u.members}
        queue: list[tuple[list, object]] = []
        prior = [sum(kept[i - 1].prior for i in u.members) for u in order]
        low = sum(p < 0.5 * statistics.fmean(prior) for p in prior) if prior else 0
        if not 0 < low < len(order):
            low = len(order) // 2
        if len(order) > 1:
            queue = [(order[:low], None), (order[low:], None)]
        elif order:
            queue = [(order, None)]
        last: Comparison | None = None
        while queue:
            group, inferable = queue.pop(0)
            members = [kept[i - 1] for u in group for i in u.members]
            if inferable is _SIBLING and last is not None and last.call is not None \
                    and last.call.verdict == "null":
                # its parent mattered and its sibling is null: what mattered is in here
                if len(group) == 1:
                    for k in members:
                        k.verdict, k.note = "matters", "inferred: its group mattered and " \
                            "the rest of that group was null"
                else:
                    queue += self._halves(group)
                continue
            comp = self._group(base, states, found, all_members, group, kept, ref)
            measured_runs.measure([comp], conf, GROUP_PAIRS, budget)
            last = comp
            call = comp.call
            if not comp.est.pairs:       # the budget was spent before it: what it had stays
                for k in members:
                    k.verdict = "unmeasured"
                continue
            self.groups.append(comp)
            for k in members:
                k.comparison = comp
                k.together = [m.name for m in members if m is not k]
            if call is None or not call.verdict:
                for k in members:
                    k.verdict = "unmeasured"
                continue
            if call.verdict == "null" or (call.verdict == "harmful" and len(group) == 1):
                for k in members:
                    k.verdict = "harmful" if call.verdict == "harmful" else "noise"
            elif len(group) == 1:
                for k in members:
                    k.verdict = "matters"
            else:       # matters, or harmful: what it holds is told apart by its halves
                queue += self._halves(group, inferable=call.verdict == "matters")

    def _luck(self, measured_runs, ref: Version) -> float:
        """How much better the night's value of its final code was than the mean of
        finalize's runs of the reference (the same code, bar no-ops and superseded lines):
        the luck it was kept with; 0 when not known."""
        runs = [v for (tree, _), v in measured_runs.values.items()
                if tree == ref.tree and v is not None]
        if self.final_value is None or not runs:
            return 0.0
        return max(0.0, improvement(self.final_value, statistics.fmean(runs), self.direction))

    def _night_null(self, live: list, kept: list[Kept], run_sd: float) -> list:
        """The units of `live` not dropped by the night's evidence: a unit is dropped
        (verdict `night`) when it sets settings and every one of them is null by the night's
        attempts (estimate.night_evidence), and no verdict was given to it yet."""
        left = []
        for u in live:
            members = [kept[i - 1] for i in u.members]
            found = []
            for k in members:
                if not k.settings or k.verdict:
                    break
                every = [night_evidence(self.attempts.get(n, []), run_sd, self.luck)
                         for n in sorted(k.settings)]
                if not all(e.null for e in every):
                    break
                found.append(min(every, key=lambda e: e.within))
            if len(found) != len(members):
                left.append(u)
                continue
            for k, e in zip(members, found):
                k.verdict, k.evidence, k.comparison, k.together = "night", e, None, []
                k.note = f"null by the night's attempts: {e.text()}"
                self.by_night += 1
        return left

    @staticmethod
    def _halves(group: list, inferable: bool = True) -> list[tuple[list, object]]:
        """A group in two halves, in the screen's order; when the group matters, the upper
        half is marked as inferable from the lower one (see _screen)."""
        mid = len(group) // 2
        return [(group[:mid], None), (group[mid:], _SIBLING if inferable else None)]

    def _group(self, base, states, found, all_members, group, kept, ref) -> Comparison:
        """The reference against itself without the group's units."""
        members = sorted(i for u in group for i in u.members)
        if len(group) == 1 and group[0].variant is not None:
            files = group[0].variant
        else:
            try:
                files = plan.without(states, found, sorted(all_members - set(members)))
            except ChangeFailed:
                files = plan.leave_out(states, members)
        names = [kept[i - 1].name for i in members]
        variant = self._made(base, files, f"without {', '.join(names)}",
                             f"without-{names[0].replace('/', '-')}-{len(names)}")
        return Comparison(f"without {'+'.join(names)}", "group", ref, variant)

    def _version(self, commit: str) -> Version:
        return Version(commit, self.ws.trees([commit])[0])

    def _made(self, base: str, files, what: str, ref: str) -> Version:
        """A version of the code finalize made, staged on the start, kept by a ref."""
        commit = self.ws.stage_on(base, self.rel, files, f"finalize {self.setup.tag}: {what}")
        self.ws.keep_ref(f"finalize/{ref}", commit)
        return self._version(commit)

    def _say_cost(self, kept, comps, run_s: float | None, night_runs: int) -> None:
        dropped = [k for k in kept if k.verdict in ("no-op", "superseded")]
        commits = len({k.sha for k in kept})
        split = len(kept) - commits
        high = self.max_runs
        workers = max(1, self.config.workers)
        when = "" if run_s is None or high is None else \
            f", about {_duration(high * run_s / workers)} at most with " \
            f"{plural(workers, 'worker')} (the night's runs took {run_s:.3g} s each)"
        cap = "no run cap" if high is None else f"at most {high} runs" + (
            f" ({self.share:g} of the night's {night_runs})" if self.planned is not None
            else " (--max-runs)")
        self.out(f"finalize: {plural(commits, 'kept change')}"
                 f"{f', split into {len(kept)} units ({split} more)' if split else ''}; "
                 f"{len(dropped)} dropped without a run "
                 f"({', '.join(f'{k.name} {k.verdict}' for k in dropped) or 'none'}); "
                 f"leaving out the rest in groups, split where a group matters: "
                 f"{cap}{when}")

    def _scheduler(self) -> Scheduler:
        """The night's backend and scheduler, on the task as the branch has it."""
        setup, config = self.setup, self.config
        task = load_task(self.ws.worktree / self.rel, origin=setup.repo_root / self.rel)
        task = with_budget(task, config.time_budget_s)
        guard = grading.Guard.at_commit(task, self.ws, self.rel, setup.dir / "pristine")
        backend = make_backend(config.backend, workspace=self.ws, task=task,
                               task_rel=self.rel, guard=guard, workers=config.workers,
                               devices=config.devices,
                               slot_root=setup.repo_root / ".autoresearch" / ".slots" / setup.tag,
                               limits=setup.limits, slurm=config.slurm)
        return Scheduler(backend)

    def _readd(self, kept, notes: list[str]) -> bool:
        """The branch is worse than the final code beyond noise: what it lacks was dropped
        as noise (two changes doing one job each look useless while the other is there).
        The dropped change that measured best goes back (ties: the earliest), else the
        one the night's evidence dropped on the fewest attempts; False when none is left."""
        dropped = [k for k in kept if k.verdict == "noise" and k.comparison is not None]
        by_night = [k for k in kept if k.verdict == "night" and k.evidence is not None]
        if dropped:
            back = max(dropped, key=lambda k: (k.comparison.est.mean or 0.0, -k.index))
        elif by_night:
            back = min(by_night, key=lambda k: (k.evidence.within, k.index))
        else:
            return False
        back.verdict = "matters"
        back.note = "re-added: the branch without it was worse than the final code"
        notes.append(f"the branch was worse than the final code beyond noise: "
                     f"{back.name} ({back.description}) re-added")
        self.out(f"finalize: the branch is worse than the final code beyond noise; "
                 f"re-adding {back.name} ({back.description}), the dropped change that "
                 f"measured best")
        return True

    def _branch(self, base, states, found, kept) -> tuple[str, list[str]]:
        """`autoresearch/<tag>-final`: from the start, one commit per change that matters."""
        keep = [k.index for k in kept if k.verdict in KEPT]
        notes: list[str] = []
        try:
            steps = plan.rebuild(states, found, keep)
        except ChangeFailed as exc:
            notes.append(f"the changes that matter did not apply one by one from the start "
                         f"({exc}); the branch holds them as one commit")
            dropped = [k.index for k in kept if k.verdict in ("noise", "harmful", "night")]
            steps = [plan.Step(keep[-1] if keep else 0,
                               plan.leave_out(states, dropped) if dropped else states[-1], [])]
        tip = base
        for step in steps:
            k = kept[step.index - 1] if step.index else None
            message = _message(k, self.metric) if k else "finalize: the kept changes"
            if step.brings:
                message += "".join(f"\nAutoresearch-Brings: {kept[i - 1].name} "
                                   f"(superseded; its lines are this change's context)"
                                   for i in step.brings)
            tip = self.ws.stage_on(tip, self.rel, step.files, message)
        branch = f"refs/heads/autoresearch/{self.setup.tag}-final"
        self.ws.git("update-ref", branch, tip)
        return tip, notes

    def _check(self, tip, final: Version, measured_runs, budget, conf) -> Comparison | None:
        """The branch against the final code (None: the same code, nothing to measure)."""
        tree = self.ws.trees([tip])[0]
        if tree == final.tree:
            return None
        check = Comparison("check", "check", Version(tip, tree), final)
        self.out("finalize: measuring the branch against the final code")
        measured_runs.measure([check], conf, self.max_pairs, budget)
        return check


_SIBLING = object()       # a half whose sibling, tested just before, may settle it


def _message(k: Kept, metric: str) -> str:
    c = k.comparison
    if c is None or c.est.mean is None:
        effect = "not measured (" + (k.note or "cannot be left out alone") + ")"
    else:
        alone = "left out alone" if not k.together else \
            f"left out with {len(k.together)} other unit{'s' if len(k.together) > 1 else ''}"
        effect = f"{c.est.text(metric)} ({alone}, {c.est.pairs} pairs)"
        if k.note:
            effect += f"; {k.note}"
    together = f"\nAutoresearch-Together-With: {', '.join(k.together)}" if k.together else ""
    part = "" if k.part is None or k.part.parts == 1 else \
        f"\nAutoresearch-Part: {k.part.part}/{k.part.parts} {k.part.label}"
    return (f"{k.description}\n\nAutoresearch-Effect: {effect}{together}\n"
            f"Autoresearch-Kept-Commit: {k.sha}{part}")


def _mean_run_s(records) -> float | None:
    """The night's mean wall time per run (its records' wall time over their runs)."""
    per = [r.wall_s / len(r.samples) for r in records if r.samples and r.wall_s]
    return statistics.fmean(per) if per else None


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"
