"""The candidate's life without git, MLflow or a scheduler: events in, steps out."""
from loop.setup.config import JudgeConfig
from loop.record import Record
from loop.judge.judge import KEEP, RERUN, Verdict, judge_baseline, max_runs
from loop.engine.lifecycle import Cancel, Candidate, Finish, Judge, Replay, Repropose, Run
from loop.words import FAILURES, RunKey, RunKind, Status

C, P = RunKey.candidate, RunKey.pair


def cand(parent="tip", baseline=False) -> Candidate:
    return Candidate(Record(iteration=3, status="", description="x", parent=parent,
                            commit="c3"), baseline)


def test_a_candidate_on_the_tip_runs_once_and_is_judged_when_its_run_is_in():
    c = cand()
    assert c.begin("tip") == Run((C(0),))
    assert c.ran(C(0), 1.5) == Judge()
    assert c.rec.samples == [1.5] and c.rec.pairs == []
    stats = {"gain": 0.1}
    assert c.judged(Verdict("discard", "worse", stats), "tip", free=4) == \
        Finish(Status.DISCARD, "worse")
    assert (c.rec.status, c.rec.reason, c.rec.stats) == ("discard", "worse", stats)
    assert type(c.rec.status) is str        # plain strings in the record (journal, MLflow)


def test_a_bad_edit_finishes_without_running():
    c = cand()
    assert c.begin("tip", problem="the edit changes nothing") == \
        Finish(Status.BAD_EDIT, "the edit changes nothing")
    assert c.rec.status == "bad_edit" and not c.runs_out


def test_a_proposal_whose_base_moved_is_replayed_before_its_first_run():
    c = cand(parent="old")
    assert c.begin("tip") == Replay(None)
    assert c.replayed("c3b", "tip", None) == Run((C(0),))
    assert (c.rec.commit, c.rec.parent) == ("c3b", "tip")
    # a change that does not apply there is proposed again on the tip, once
    c = cand(parent="oldbase1")
    c.begin("tipsha99")
    assert c.replayed(None, "tipsha99", None, "A is no longer a constant") == \
        Repropose(None, "A is no longer a constant")
    assert c.reproposed("c3c", "tipsha99", None, "A is no longer a constant", "y") == \
        Run((C(0),))
    assert (c.rec.commit, c.rec.parent, c.rec.description) == ("c3c", "tipsha99", "y")
    # the proposer cannot redo it: an edit that never ran is the proposer's bad edit, and
    # the reason reads as one sentence
    c = cand(parent="oldbase1")
    c.begin("tipsha99")
    c.replayed(None, "tipsha99", None, "block 1 was not found")
    assert c.reproposed(None, "tipsha99", None, "block 1 was not found",
                        problem="the edit changes nothing") == Finish(Status.BAD_EDIT, (
        "its base oldbase was replaced by a new best tipsha9 before it ran, and its change "
        "does not apply there (block 1 was not found); proposed again, no usable change: "
        "the edit changes nothing"))
    # a loop that is stopping does not ask
    c = cand(parent="oldbase1")
    c.begin("tipsha99")
    assert c.replayed(None, "tipsha99", None, "why", cannot_ask="the loop stopped") == \
        Finish(Status.DISCARD, "its base oldbase was replaced by a new best tipsha9 before it "
                               "ran, and its change does not apply there (why); the loop stopped")


def test_the_runs_a_verdict_asks_for_are_capped_by_free_slots_but_at_least_one():
    c = cand()
    c.begin("tip")
    c.ran(C(0), 1.0)
    assert c.judged(Verdict(RERUN, "maybe", runs=2), "tip", free=1) == Run((C(1),))
    assert c.ran(C(1), 1.1) == Judge()
    assert c.judged(Verdict(RERUN, "maybe", runs=3), "tip", free=0) == Run((C(2),))
    c.ran(C(2), 1.2)
    assert c.rec.samples == [1.0, 1.1, 1.2]


def test_paired_runs_put_the_best_right_before_each_candidate_run():
    c = cand()
    c.begin("tip")
    c.ran(C(0), 1.0)
    step = c.judged(Verdict(RERUN, "confirming", runs=2, paired=True), "tip", free=4)
    assert step == Run((P(0, beside=1), C(1), P(1, beside=2), C(2)))
    # the scheduler serves them in that order: the best's run just ahead of its partner
    assert sorted(step.keys, key=lambda k: k.priority(3)) == list(step.keys)
    assert c.ran(C(1), 0.9) is None and c.ran(P(1, beside=2), 1.05) is None
    assert c.ran(P(0, beside=1), None, "crash") is None   # a failed best run: no pair
    assert c.ran(C(2), 0.95) == Judge()
    assert c.rec.pairs == [[0.95, 1.05]] and c.rec.samples == [1.0, 0.9, 0.95]
    # with one free slot, one pair (two runs) at a time
    assert c.judged(Verdict(RERUN, "again", runs=2, paired=True), "tip", free=1) == \
        Run((P(2, beside=3), C(3)))


def test_a_failed_first_run_is_the_status_a_failed_confirmation_a_discard():
    c = cand()
    c.begin("tip")
    assert c.ran(C(0), None, "timeout", "killed at the time budget") == Cancel()
    assert c.forget(set()) == Finish(Status.TIMEOUT, "killed at the time budget")
    c = cand()
    c.begin("tip")
    c.ran(C(0), 1.0)
    stats = {"gain": 0.2}
    c.judged(Verdict(RERUN, "maybe", stats, runs=2), "tip", free=2)
    assert c.ran(C(2), None, "crash", "exit 1") == Cancel()
    assert c.forget(set()) is None                  # run 1 is still out
    assert c.ran(C(1), 1.1) == Finish(Status.DISCARD, "confirmation run: crash")
    assert c.rec.stats == stats and c.rec.samples == [1.0, 1.1]


def test_runs_dropped_before_they_started_are_not_waited_for():
    c = cand()
    c.begin("tip")
    c.ran(C(0), 1.0)
    c.judged(Verdict(RERUN, "confirming", runs=2, paired=True), "tip", free=4)
    assert c.ran(C(1), None, "crash", "boom") == Cancel()
    assert c.forget({C(2), P(1, beside=2)}) is None   # the best's run beside run 1 is out
    assert c.ran(P(0, beside=1), 1.0) == Finish(Status.DISCARD, "confirmation run: crash")


def test_a_keep_on_an_old_base_is_replayed_and_measured_again_from_scratch():
    c = cand()
    c.begin("tip")
    c.ran(C(0), 0.5)
    keep = Verdict(KEEP, "better beyond noise", {"gain": 1.0})
    assert c.judged(keep, "newtip1234", free=2) == Replay(keep)
    assert c.replayed("c3b", "newtip1234", keep) == Run((C(1),))    # run numbers go on
    assert c.rec.samples == [] and c.first_on_base == 1
    assert c.ran(C(1), 0.6) == Judge() and c.rec.samples == [0.6]
    assert c.judged(keep, "newtip1234", free=2) == \
        Finish(Status.KEEP, "replayed onto newtip1: better beyond noise")
    # a failed first run on the new base is that run's status, not a confirmation's
    c = cand()
    c.begin("tip")
    c.ran(C(0), 0.5)
    c.judged(keep, "newtip", free=2)
    c.replayed("c3b", "newtip", keep)
    c.ran(C(1), None, "crash", "exit 1")
    assert c.forget(set()) == Finish(Status.CRASH, "exit 1")
    # what differed on the tip is said in the reason
    c = cand()
    c.begin("tip")
    c.ran(C(0), 0.5)
    c.judged(keep, "newtip1234", free=2)
    c.replayed("c3b", "newtip1234", keep, notes="A was 2.0 there, not 4.0")
    c.ran(C(1), 0.4)
    assert c.judged(keep, "newtip1234", free=2) == Finish(
        Status.KEEP, "replayed onto newtip1 (A was 2.0 there, not 4.0): better beyond noise")
    # a change that does not apply: proposed again, measured again, and the reason says so
    c = cand(parent="base0000")
    c.begin("base0000")
    c.ran(C(0), 0.5)
    c.judged(keep, "newtip99", free=2)
    assert c.replayed(None, "newtip99", keep, "block 1 was not found") == \
        Repropose(keep, "block 1 was not found")
    assert c.reproposed("c3c", "newtip99", keep, "block 1 was not found", "x again") == \
        Run((C(1),))
    c.ran(C(1), 0.4)
    assert c.judged(keep, "newtip99", free=2) == Finish(Status.KEEP, (
        "proposed again on newtip9 ('x' did not apply there (block 1 was not found)): "
        "better beyond noise"))
    # ... and if even that fails (or the loop stops first), a discard that keeps the
    # verdict's reason and numbers, in plain words
    c = cand(parent="base0000")
    c.begin("base0000")
    c.ran(C(0), 0.5)
    c.judged(keep, "newtip99", free=2)
    c.replayed(None, "newtip99", keep, "block 1 was not found")
    assert c.reproposed(None, "newtip99", keep, "block 1 was not found",
                        problem="no reply") == Finish(Status.DISCARD, (
        "would be kept (better beyond noise), but its change does not apply to the best kept "
        "since its base base000 (block 1 was not found); proposed again, no usable change: "
        "no reply"))
    assert c.rec.stats == {"gain": 1.0}
    # made again on the tip, it is another candidate's change: never run twice
    c = cand(parent="base0000")
    c.begin("base0000")
    c.ran(C(0), 0.5)
    c.judged(keep, "newtip99", free=2)
    assert c.replayed(None, "newtip99", keep, repeats=7) == Finish(Status.DISCARD, (
        "would be kept (better beyond noise), but made again on the best now newtip9 it is "
        "iteration 7's change, measured there"))
    c = cand(parent="oldbase1")      # one that never ran asks for another change
    c.begin("tipsha99")
    assert c.replayed(None, "tipsha99", None, repeats=7) == Repropose(None, "", 7)
    assert c.reproposed("c3c", "tipsha99", None, "", "y", repeats=7) == Run((C(0),))
    c.ran(C(0), 0.4)
    assert c.judged(keep, "tipsha99", free=2) == Finish(Status.KEEP, (
        "proposed again on tipsha9 ('x' was iteration 7's change there): better beyond noise"))


def test_the_baseline_runs_until_the_judge_has_r_runs_and_is_kept_as_baseline():
    cfg = JudgeConfig(rule="noise", baseline_runs=3)
    c = cand(baseline=True)
    c.begin("tip")
    c.ran(C(0), 1.0)
    assert c.judged(judge_baseline(c.rec.samples, cfg), "tip", free=4) == Run((C(1), C(2)))
    c.ran(C(1), 1.1)
    assert c.ran(C(2), 0.9) == Judge()
    assert c.judged(judge_baseline(c.rec.samples, cfg), "tip", free=4) == \
        Finish(Status.KEEP, "baseline")
    assert c.rec.stats == {} and max_runs(cfg, baseline=True) == 3
    strict = JudgeConfig(rule="strict")
    assert judge_baseline([1.0], strict).action == KEEP and max_runs(strict, True) == 1


def test_run_keys_keep_the_on_disk_numbers_and_names_of_older_journals():
    assert [C(0).number, C(2).number, RunKey.best(1).number, P(0, 1).number] == [0, 2, 101, 150]
    assert C(0).log_name(7) == "iter-0007.log" and C(2).log_name(7) == "iter-0007-run2.log"
    assert RunKey.best(1).log_name(7) == "iter-0007-best1.log"
    assert P(2, 5).log_name(7) == "iter-0007-best52.log"
    assert RunKey.best(0).priority(9) < C(0).priority(1)   # the best's re-runs first
    assert RunKey.best(0).kind == "remeasure" and RunKind.PAIR == "pair"
    assert "crash" in FAILURES and "discard" not in FAILURES and f"{Status.KEEP}" == "keep"
