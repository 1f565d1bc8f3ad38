"""The typed record (loop/record.py) reads the journals written before it had types: the
status comes back as its `Status`, and writing it again gives the same JSON line."""
import json

from loop.record import Record, record_dict
from loop.state.journal import Journal, replay
from loop.words import Status

# an `end` line as the journal held it before Record moved and was typed (status a plain
# string, usage and stats plain objects)
OLD_END = ('{"event": "end", "iteration": 3, "status": "discard", '
           '"description": "LR 3e-4 -> 6e-4", "metric": 1.25, "samples": [1.25, 1.27], '
           '"best_before": 1.2, "best_after": 1.2, "delta": -0.05, "reason": "worse", '
           '"commit": "abc123", "attempt_ref": "refs/autoresearch/t/3", "parent": "def456", '
           '"run_id": "r3", "memory_gb": null, "wall_s": 12.5, "lines_added": 1, '
           '"lines_removed": 1, "program_sha": "", "seed": 3, "stats": {"p": 0.4}, '
           '"pairs": [], "throughput": [], "curves": [], '
           '"usage": {"input_tokens": 10, "output_tokens": 2}, "time": 1717000000.0, '
           '"proposer": "mutate"}\n')


def test_an_end_line_written_before_the_move_loads_as_a_typed_record(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(OLD_END)
    rec, = replay(Journal(path).load()).records
    assert rec.status is Status.DISCARD and not rec.kept
    assert rec.samples == [1.25, 1.27] and rec.usage == {"input_tokens": 10, "output_tokens": 2}
    old = {k: v for k, v in json.loads(OLD_END).items() if k not in ("event", "time")}
    again = json.loads(json.dumps(record_dict(rec)))
    assert {k: v for k, v in again.items() if k != "time"} == old


def test_a_record_made_with_the_word_is_the_status():
    assert Record(0, "keep", "baseline").status is Status.KEEP
    assert Record(0, "keep", "baseline").kept
    # the engine's rows of runs in flight say "running": no Status, kept as the word
    assert Record(1, "running", "x").status == "running"
