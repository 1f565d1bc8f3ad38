"""The record sink: rows in iteration order at once, MLflow's writes only when flushed."""
import csv

from loop.state.journal import Journal
from loop.record import Record
from loop.engine.records import RecordSink
from loop.words import BASELINE


class Tracker:
    def __init__(self):
        self.calls = []

    def finish_iteration(self, rec, metric, params, tags, artifacts, kept):
        self.calls.append((rec.iteration, kept, tags.get("status")))


def test_rows_are_written_in_order_and_mlflow_waits_for_flush(tmp_path):
    tracker = Tracker()
    sink = RecordSink(tmp_path, "loss", Journal(tmp_path / "journal.jsonl"), tracker,
                      "autoresearch/t", {"proposer": "mutate"}, log_prompts=False)
    sink.add(Record(0, "keep", BASELINE, metric=1.0, samples=[1.0]))
    sink.add(Record(2, "keep", "b", metric=0.8, samples=[0.8]))    # waits for iteration 1
    assert sink.rows_written == 1 and [r.iteration for r in sink.rows()] == [0]
    sink.add(Record(1, "discard", "a", metric=1.1, samples=[1.1]))
    with open(tmp_path / "results.tsv") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["status"] for r in rows] == ["keep", "discard", "keep"]
    assert tracker.calls == []                      # nothing on the path to the next run
    sink.flush()
    # in the order they finished, with the kept count as it was when each finished
    assert tracker.calls == [(0, 0, "baseline"), (2, 1, None), (1, 1, None)]
    sink.flush()
    assert len(tracker.calls) == 3
