"""A proposal's change as data, made again on a newer best (issue 16: a would-be keep was
lost to a line-based merge when the constant on the line above had been kept meanwhile):
mutate's settings, an LLM's blocks, hunks of a diff; the LLM proposer records the blocks
that applied and is told, when asked again, what change to make."""
from __future__ import annotations

import pytest
from openai_server import Reply

from loop.edits.edits import Edit, try_edits
from loop.edits.hunks import hunks
from loop.proposers.base import Redo
from loop.proposers.change import Change, ChangeFailed, Setting, redo
from loop.proposers.mutate import MutateProposer
from loop.proposers.prompts import user_prompt
from loop.setup.search_space import parse_space
from llm_task import TRAIN, context, proposer, tiny_task

BASE = "import os\nDEPTH = 6\nWIDTH = 4\nLR = 3e-4\n\n\ndef run():\n    return DEPTH * WIDTH\n"
TIP = BASE.replace("DEPTH = 6", "DEPTH = 4").replace("WIDTH = 4", "WIDTH = 8")


@pytest.fixture
def task(tmp_path):
    return tiny_task(tmp_path, TRAIN)


def test_a_setting_is_made_on_the_new_text_whatever_the_value_there():
    change = Change(settings=(Setting("t.py", "DEPTH", "6", "3"),))
    made = redo(change, {"t.py": TIP})
    assert made.files == {"t.py": TIP.replace("DEPTH = 4", "DEPTH = 3")}
    assert made.notes == ["DEPTH was 4 there, not 6"]
    # a value the new text already has is said, the others still set
    both = Change(settings=(Setting("t.py", "WIDTH", "4", "8"), Setting("t.py", "LR", "3e-4",
                                                                           "1e-3")))
    made = redo(both, {"t.py": TIP})
    assert made.files["t.py"] == TIP.replace("LR = 3e-4", "LR = 1e-3")
    assert made.notes == ["WIDTH is 8 there already"]


def test_a_setting_that_cannot_be_made_says_why_in_a_clause():
    with pytest.raises(ChangeFailed, match="WIDTH is no longer a constant in t.py"):
        redo(Change(settings=(Setting("t.py", "WIDTH", "4", "2"),)),
             {"t.py": TIP.replace("WIDTH = 8", "WIDTH = DEPTH * 2")})
    with pytest.raises(ChangeFailed, match="has that value there already"):
        redo(Change(settings=(Setting("t.py", "WIDTH", "4", "8"),)), {"t.py": TIP})
    space = parse_space({"DEPTH": {"range": [1, 8], "integer": True,
                                   "requires": "DEPTH <= WIDTH"}}, "task.yaml")
    with pytest.raises(ChangeFailed, match="no valid point"):
        redo(Change(settings=(Setting("t.py", "WIDTH", "4", "2"),)), {"t.py": TIP},
             space=space)


def test_mutate_records_its_settings(task):  # noqa: F811 (fixture)
    proposal = MutateProposer(seed=1).propose(context(task))
    change = proposal.change
    assert change and change.settings and not change.edits
    assert all(s.path == "train.py" for s in change.settings)
    # made on the same files, the change is the proposal itself
    assert redo(change, {"train.py": TRAIN}).files == proposal.files


def test_blocks_next_to_a_kept_line_still_apply_where_a_3_way_merge_refuses():
    block = Edit("t.py", "replace", "WIDTH = 4", "WIDTH = 2")
    assert redo(Change(edits=(block,)), {"t.py": TIP.replace("WIDTH = 8", "WIDTH = 4")}).files \
        == {"t.py": TIP.replace("WIDTH = 8", "WIDTH = 2")}
    # a block whose lines were changed by the keep does not apply: a clause says why
    with pytest.raises(ChangeFailed, match="t.py no longer has the line `WIDTH = 4`"):
        redo(Change(edits=(block,)), {"t.py": TIP})


def test_hunks_carry_no_context_unless_they_need_it():
    new = BASE.replace("WIDTH = 4", "WIDTH = 2").replace("    return DEPTH * WIDTH",
                                                         "    return DEPTH * WIDTH + 1")
    edits = hunks({"t.py": BASE}, {"t.py": new})
    assert [(e.search, e.replace) for e in edits] == [
        ("WIDTH = 4", "WIDTH = 2"), ("    return DEPTH * WIDTH", "    return DEPTH * WIDTH + 1")]
    # made on the tip, where the line above changed: the keep stays
    moved = BASE.replace("DEPTH = 6", "DEPTH = 3")
    assert try_edits({"t.py": moved}, edits).changed["t.py"] == \
        new.replace("DEPTH = 6", "DEPTH = 3")
    # a line that is not unique takes as much context as it needs
    twice = "x = 1\ny = 0\nx = 1\nz = 0\n"
    edits = hunks({"t.py": twice}, {"t.py": twice.replace("x = 1\nz", "x = 2\nz")})
    assert [(e.search, e.replace) for e in edits] == [("y = 0\nx = 1\nz = 0",
                                                       "y = 0\nx = 2\nz = 0")]
    assert hunks({}, {"new.py": "A = 1\n"})[0].search == ""   # a new file is created


BLOCKS = ("Description: smaller width\n\ntrain.py\n```python\n<<<<<<< SEARCH\nSTEPS = 100\n"
          "=======\nSTEPS = 50\n>>>>>>> REPLACE\n```\n")
WHOLE = ("Description: more steps\n\ntrain.py\n```python\n"
         + TRAIN.replace("STEPS = 100", "STEPS = 200") + "```\n")


def test_the_llm_proposer_records_the_blocks_that_applied(openai_server, task):  # noqa: F811
    openai_server.script(Reply(BLOCKS))
    change = proposer(openai_server).propose(context(task)).change
    assert change and [(e.path, e.search, e.replace) for e in change.edits] == [
        ("train.py", "STEPS = 100", "STEPS = 50")]
    # a whole-file reply is recorded as the hunks of its diff (the whole text would undo a
    # change kept meanwhile)
    openai_server.script(Reply(WHOLE))
    change = proposer(openai_server).propose(context(task)).change
    kept = TRAIN.replace("LR = 3e-4", "LR = 1e-3")
    assert redo(change, {"train.py": kept}).files == \
        {"train.py": kept.replace("STEPS = 100", "STEPS = 200")}


def test_asked_again_the_llm_is_told_what_change_to_make(openai_server, task):  # noqa: F811
    why = "train.py no longer has the line `STEPS = 100`"
    ctx = context(task)
    ctx.redo = Redo("fewer steps", "-STEPS = 100\n+STEPS = 50\n", why, "better by 0.12")
    prompt = user_prompt(ctx, 4000)
    assert "# Make this change again" in prompt and why in prompt
    assert '"fewer steps"' in prompt and "+STEPS = 50" in prompt and "better by 0.12" in prompt
    assert "# Make this change again" not in user_prompt(context(task), 4000)


def test_in_flight_attempts_are_listed_apart_in_the_journal():
    from loop.proposers.base import Attempt
    from loop.proposers.prompts import render_journal
    text = render_journal([Attempt(1, "Set A to 2", "discard", 3.0, -1.0),
                           Attempt(2, "Set CHUNK to 6 (was 4)", "running", None, None)], 4000)
    flying = text.split("Being measured right now (do not propose these again):\n")[1]
    assert flying.startswith("#2 running: Set CHUNK to 6 (was 4)")
    assert "Set CHUNK" not in text.split("Being measured")[0]
