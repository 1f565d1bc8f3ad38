"""The journal never silently drops history: a torn last line is repaired, other damage
stops the engine with exit 2, and a change behind the engine's back is undone."""
import json

import pytest

from conftest import run_cli
from loop.state.journal import Journal, JournalDamaged, replay


def _lines(*events):
    return "".join(json.dumps({"event": e, "time": 0, "iteration": i}) + "\n"
                   for i, e in enumerate(events))


def test_torn_last_line_is_cut_off_with_a_note(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(_lines("start", "begin") + '{"event": "end", "itera')
    j = Journal(path)
    assert [e["event"] for e in j.load()] == ["start", "begin"]
    assert "torn last line" in j.notes[0]
    assert path.read_text() == _lines("start", "begin")
    j.write("abandon", iteration=1)
    assert [e["event"] for e in Journal(path).load()] == ["start", "begin", "abandon"]


def test_a_whole_last_event_without_its_newline_is_kept(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(_lines("start") + json.dumps({"event": "begin", "iteration": 1}))
    j = Journal(path)
    assert [e["event"] for e in j.load()] == ["start", "begin"] and not j.notes
    assert path.read_text().endswith("}\n")


@pytest.mark.parametrize("bad", ["not json at all", '{"iteration": 3}', "[1, 2]", '{"event": '])
def test_damage_before_the_last_line_stops_with_the_line_number(tmp_path, bad):
    path = tmp_path / "journal.jsonl"
    text = _lines("start", "begin") + bad + "\n" + _lines("end")
    path.write_text(text)
    with pytest.raises(JournalDamaged, match="line 3 is not a journal event"):
        Journal(path).load()
    assert path.read_text() == text, "a damaged journal is left exactly as found"


def test_verify_restores_what_the_engine_wrote(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = Journal(path)
    j.load()
    j.write("start", tag="t")
    j.write("begin", iteration=0)
    good = path.read_bytes()
    assert j.verify() is None
    with open(path, "a") as f:
        f.write('{"event": "end", "iteration": 0, "status": "keep"}\n')
    assert "changed" in j.verify()
    assert path.read_bytes() == good
    path.unlink()
    assert "deleted" in j.verify() and path.read_bytes() == good


def test_start_tracking_replaces_the_parent_run(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    j.write("start", tag="t", parent_run_id=None)
    j.write("start_tracking", parent_run_id="abc")
    assert replay(j.events()).start["parent_run_id"] == "abc"


def test_a_damaged_journal_stops_run_and_status_with_exit_2(toy_repo, mlflow_uri):
    args = ("run", "--task", "task", "--tag", "t", "--iterations", "1", "--judge", "strict")
    first = run_cli(*args, cwd=toy_repo)
    assert first.returncode == 0, first.stderr
    path = toy_repo / ".autoresearch" / "t" / "journal.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + "garbage from a hand edit\n" + "".join(lines[2:]))
    again = run_cli(*args[:-4], "--iterations", "2", "--judge", "strict", cwd=toy_repo)
    assert again.returncode == 2
    assert "line 3 is not a journal event" in again.stderr
    assert "Traceback" not in again.stderr
    status = run_cli("status", "--tag", "t", cwd=toy_repo)
    assert status.returncode == 2 and "line 3" in status.stderr


def test_a_torn_last_line_resumes_with_a_note(toy_repo, mlflow_uri):
    args = ("run", "--task", "task", "--tag", "t", "--judge", "strict")
    first = run_cli(*args, "--iterations", "1", cwd=toy_repo)
    assert first.returncode == 0, first.stderr
    path = toy_repo / ".autoresearch" / "t" / "journal.jsonl"
    with open(path, "a") as f:
        f.write('{"event": "begin", "iterat')
    again = run_cli(*args, "--iterations", "2", cwd=toy_repo)
    assert again.returncode == 0, again.stderr
    assert "removed a torn last line" in again.stdout
    rows = (toy_repo / ".autoresearch" / "t" / "results.tsv").read_text().splitlines()
    assert [r.split("\t")[5] for r in rows[1:]] == ["0", "1", "2"]
