"""Parsing LLM replies into edits and applying them: each format, tolerance, refusals."""
from __future__ import annotations

import pytest

from loop.edits.edits import (EditError, apply_edits, apply_reply, parse_reply, settle_named,
                        try_edits)
from loop.setup.task import load_task

TRAIN = """\
import torch

LR = 3e-4
STEPS = 100


def train(model):
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    for step in range(STEPS):
        loss = model(step)
        loss.backward()
        opt.step()
    return loss
"""

PREPARE = "def load():\n    return [1, 2, 3]\n"


@pytest.fixture
def task(tmp_path):
    (tmp_path / "task.yaml").write_text(
        "name: tiny\neditable: [train.py, 'extra_*.py']\nprotected: [prepare.py]\n"
        "run: python train.py\nmetric: {name: val_loss, direction: minimize}\n")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "prepare.py").write_text(PREPARE)
    (tmp_path / "extra_a.py").write_text("X = 1\n")   # the glob must match a file to load
    return load_task(tmp_path)


FILES = {"train.py": TRAIN}


def sr(path, search, replace, fence="```python"):
    return f"{path}\n{fence}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n"


# -- each format -------------------------------------------------------------------------------

def test_search_replace_block_inside_prose_applies_and_yields_description(task):
    reply = ("Sure! Here is my idea.\n\nDescription: raise the learning rate to 1e-3\n\n"
             + sr("train.py", "LR = 3e-4\n", "LR = 1e-3\n") + "\nThis should converge faster.")
    description, changed = apply_reply(FILES, reply, task)
    assert description == "raise the learning rate to 1e-3"
    assert changed == {"train.py": TRAIN.replace("LR = 3e-4", "LR = 1e-3")}


def test_description_line_is_the_subject_even_below_a_hypothesis_line(task):
    reply = ("Hypothesis: a higher learning rate converges faster in 100 steps\n"
             "Description: raise LR to 1e-3\n\n" + sr("train.py", "LR = 3e-4\n", "LR = 1e-3\n"))
    description, _ = apply_reply(FILES, reply, task)
    assert description == "raise LR to 1e-3"


def test_unified_diff_with_wrong_line_numbers_applies_by_context(task):
    reply = ("Hypothesis: more steps help\n```diff\n--- a/train.py\n+++ b/train.py\n"
             "@@ -40,2 +40,2 @@\n LR = 3e-4\n-STEPS = 100\n+STEPS = 200\n```\n")
    description, changed = apply_reply(FILES, reply, task)
    assert description == "more steps help"
    assert changed["train.py"] == TRAIN.replace("STEPS = 100", "STEPS = 200")


def test_whole_file_under_its_path_replaces_the_file(task):
    new = TRAIN.replace("STEPS = 100", "STEPS = 50")
    reply = f"Fewer steps, faster.\n\ntrain.py\n```python\n{new}```\n"
    description, changed = apply_reply(FILES, reply, task)
    assert changed == {"train.py": new}
    assert description == "Fewer steps, faster."


def test_whole_file_named_in_the_fence_info_string(task):
    new = TRAIN.replace("LR = 3e-4", "LR = 1e-4")
    description, changed = apply_reply(FILES, f"```python train.py\n{new}```", task)
    assert changed == {"train.py": new}


def test_several_blocks_for_one_file_apply_in_order(task):
    reply = ("train.py\n```\n<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1e-3\n>>>>>>> REPLACE\n"
             "<<<<<<< SEARCH\nSTEPS = 100\n=======\nSTEPS = 300\n>>>>>>> REPLACE\n```\n")
    parsed = parse_reply(reply)
    assert [e.path for e in parsed.edits] == ["train.py", "train.py"]
    changed = apply_edits(FILES, parsed, task)
    assert "LR = 1e-3" in changed["train.py"] and "STEPS = 300" in changed["train.py"]


def test_an_illustrative_snippet_under_prose_is_not_an_edit():
    parsed = parse_reply("In train.py you could write:\n```python\nLR = 1e-3\n```\n")
    assert [e.path for e in parsed.edits] == [None]      # a candidate only, not a whole file
    assert settle_named(FILES, parsed.edits) == []
    with pytest.raises(EditError, match="no edit found"):
        apply_edits(FILES, parsed, None)


# -- tolerance ----------------------------------------------------------------------------------

def test_search_with_lost_indentation_is_matched_and_replace_reindented(task):
    reply = sr("train.py", "for step in range(STEPS):\n    loss = model(step)\n",
               "for step in range(STEPS):\n    loss = model(step) * 0.5\n")
    _, changed = apply_reply(FILES, reply, task)
    assert "        loss = model(step) * 0.5\n" in changed["train.py"]
    assert "    for step in range(STEPS):\n" in changed["train.py"]


def test_trailing_whitespace_and_blank_edge_lines_in_search_are_tolerated(task):
    reply = sr("train.py", "\nLR = 3e-4   \nSTEPS = 100\n\n", "\nLR = 2e-4\nSTEPS = 100\n\n")
    _, changed = apply_reply(FILES, reply, task)
    assert changed["train.py"] == TRAIN.replace("LR = 3e-4", "LR = 2e-4")


def test_crlf_reply_and_crlf_file_keep_the_file_line_endings(task):
    files = {"train.py": TRAIN.replace("\n", "\r\n")}
    reply = sr("train.py", "STEPS = 100\n", "STEPS = 7\n").replace("\n", "\r\n")
    _, changed = apply_reply(files, reply, task)
    assert changed["train.py"] == TRAIN.replace("STEPS = 100", "STEPS = 7").replace("\n", "\r\n")


def test_file_without_final_newline_keeps_it_that_way(task):
    files = {"train.py": "A = 1\nB = 2"}
    _, changed = apply_reply(files, sr("train.py", "B = 2\n", "B = 3\n"), task)
    assert changed["train.py"] == "A = 1\nB = 3"


def test_block_without_a_file_name_goes_to_the_one_file_it_matches(task):
    reply = "<<<<<<< SEARCH\nSTEPS = 100\n=======\nSTEPS = 150\n>>>>>>> REPLACE\n"
    _, changed = apply_reply({"train.py": TRAIN, "extra_a.py": "X = 1\n"}, reply, task)
    assert list(changed) == ["train.py"]


# -- refusals -----------------------------------------------------------------------------------

def test_ambiguous_search_is_rejected_even_though_it_matches():
    files = {"train.py": "x = 1\ny = 2\nx = 1\n"}
    with pytest.raises(EditError) as err:
        apply_reply(files, sr("train.py", "x = 1\n", "x = 5\n"), None)
    assert "matches 2 places (lines 1, 3)" in err.value.message


def test_exact_unique_match_wins_over_tolerant_duplicates(task):
    files = {"train.py": "def f():\n    x = 1\nx = 1\n"}
    _, changed = apply_reply(files, sr("train.py", "x = 1\n", "x = 9\n"), task)
    assert changed["train.py"] == "def f():\n    x = 1\nx = 9\n"


def test_search_that_matches_part_of_a_line_does_not_apply():
    files = {"train.py": "max = 1\n"}
    with pytest.raises(EditError, match="not found"):
        apply_reply(files, sr("train.py", "x = 1\n", "x = 2\n"), None)


@pytest.mark.parametrize("path, reason", [
    ("prepare.py", "protected file"),
    ("task.yaml", "protected file"),
    ("notes.txt", "not an editable file"),
    ("../outside.py", "outside the task folder"),
    ("/etc/passwd", "outside the task folder"),
])
def test_edits_to_files_outside_the_editable_set_are_rejected(task, path, reason):
    reply = f"{path}\n```\n<<<<<<< SEARCH\n=======\nprint('hi')\n>>>>>>> REPLACE\n```\n"
    with pytest.raises(EditError) as err:
        apply_reply({"train.py": TRAIN, "prepare.py": PREPARE}, reply, task)
    assert reason in err.value.message


def test_new_file_is_created_only_when_its_path_is_editable(task):
    reply = "extra_util.py\n```python\ndef helper():\n    return 1\n```\n"
    _, changed = apply_reply(FILES, reply, task)
    assert changed == {"extra_util.py": "def helper():\n    return 1\n"}


def test_binary_content_is_rejected(task):
    with pytest.raises(EditError, match="NUL"):
        apply_reply(FILES, sr("train.py", "LR = 3e-4\n", "LR = 1e-3\x00\n"), task)


def test_an_edit_that_changes_nothing_is_rejected(task):
    with pytest.raises(EditError, match="changes nothing"):
        apply_reply(FILES, sr("train.py", "LR = 3e-4\n", "LR = 3e-4\n"), task)


def test_a_no_op_block_beside_real_blocks_is_passed_over_and_noted(task):
    """Issue 37 item 8, as aider does: the real blocks apply, the no-op is noted; alone, or
    with a SEARCH the file does not hold, it is still refused."""
    reply = (sr("train.py", "LR = 3e-4\n", "LR = 1e-3\n")
             + sr("train.py", "STEPS = 100\n", "STEPS = 100\n")
             + sr("train.py", "        opt.step()\n",
                  "        opt.step()\n        opt.zero_grad()\n"))
    _, changed = apply_reply(FILES, reply, task)
    assert "LR = 1e-3\n" in changed["train.py"] and "opt.zero_grad()" in changed["train.py"]
    assert "STEPS = 100\n" in changed["train.py"]
    outcome = try_edits(FILES, parse_reply(reply).edits, task)
    assert outcome.failures == [] and len(outcome.noted) == 1, outcome
    assert "changes nothing" in outcome.noted[0] and outcome.applied == 2
    with pytest.raises(EditError, match="changes nothing"):        # alone
        apply_reply(FILES, sr("train.py", "STEPS = 100\n", "STEPS = 100\n"), task)
    absent = sr("train.py", "LR = 3e-4\n", "LR = 1e-3\n") + sr("train.py", "EPOCHS = 7\n",
                                                               "EPOCHS = 7\n")
    with pytest.raises(EditError, match="1 of 2 edit blocks could not be applied"):
        apply_reply(FILES, absent, task)


def test_truncated_block_is_an_error_not_a_partial_edit(task):
    reply = "train.py\n```\n<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1"
    with pytest.raises(EditError, match="not terminated"):
        apply_reply(FILES, reply, task)


def test_whole_file_fragment_with_elision_is_rejected(task):
    reply = "train.py\n```python\nLR = 1e-3\n# ... rest of the file unchanged\n```\n"
    with pytest.raises(EditError, match="elides code"):
        apply_reply(FILES, reply, task)


def test_failure_names_the_block_and_shows_the_closest_lines(task):
    reply = (sr("train.py", "LR = 3e-4\n", "LR = 1e-3\n")
             + sr("train.py", "    for step in range(NUM_STEPS):\n", "    for _ in range(9):\n"))
    with pytest.raises(EditError) as err:
        apply_reply(FILES, reply, task)
    message = err.value.message
    assert "1 of 2 edit blocks could not be applied" in message
    assert "block 2 (search/replace, train.py, first line: 'for step in range(NUM_STEPS):')" \
        in message
    assert "closest lines in train.py" in message
    assert "    for step in range(STEPS):" in message
    assert err.value.partial["train.py"].count("LR = 1e-3") == 1   # block 1 did apply


def test_try_edits_reports_failures_without_raising(task):
    outcome = try_edits(FILES, parse_reply(sr("train.py", "nope\n", "x\n")).edits, task)
    assert outcome.applied == 0 and len(outcome.failures) == 1 and outcome.changed == {}


# -- tolerant matching: each rule applies only at one place ------------------------------------

LR_AT = "import math\n\n\ndef lr_at(progress):\n    return 0.1 * progress\n"


def test_a_first_line_missing_its_leading_keyword_is_matched_and_the_keyword_kept():
    reply = sr("train.py", "lr_at(progress):\n    return 0.1 * progress\n",
               "lr_at(progress):\n    return 0.1 * math.cos(progress)\n")
    _, changed = apply_reply({"train.py": LR_AT}, reply, None)
    assert changed["train.py"] == LR_AT.replace("0.1 * progress", "0.1 * math.cos(progress)")


def test_a_missing_keyword_and_lost_indentation_together_are_matched():
    files = {"train.py": "class M:\n    def lr_at(self, p):\n        return p\n"}
    reply = sr("train.py", "lr_at(self, p):\n    return p\n",
               "def lr_at(self, p):\n    return 2 * p\n")
    _, changed = apply_reply(files, reply, None)
    assert changed["train.py"] == "class M:\n    def lr_at(self, p):\n        return 2 * p\n"


def test_an_ambiguous_missing_keyword_match_is_refused():
    files = {"train.py": "def f(x):\n    return x\n\n\nasync def f(x):\n    return x\n"}
    with pytest.raises(EditError, match="matches 2 places"):
        apply_reply(files, sr("train.py", "f(x):\n    return x\n", "f(x):\n    return -x\n"),
                    None)


SEQ = "SEQ_LEN = 128           # training context in bytes\nBATCH = 32  # sequences\n"


def test_a_line_quoted_without_its_trailing_comment_is_matched_and_the_comment_kept():
    # seen with Qwen2.5-Coder-1.5B on tinylm: `"search": "SEQ_LEN = 128"`, three times
    _, changed = apply_reply({"train.py": SEQ},
                             sr("train.py", "SEQ_LEN = 128\n", "SEQ_LEN = 256\n"),
                             None)
    assert changed["train.py"] == SEQ.replace("= 128 ", "= 256 ")
    two = sr("train.py", "SEQ_LEN = 128\nBATCH = 32\n", "SEQ_LEN = 64\nBATCH = 16\n")
    _, changed = apply_reply({"train.py": SEQ}, two, None)
    assert changed["train.py"] == ("SEQ_LEN = 64           # training context in bytes\n"
                                   "BATCH = 16  # sequences\n")


def test_a_line_without_its_comment_is_refused_where_it_fits_two_places_or_is_a_prefix():
    twice = {"train.py": "A = 1  # first\nA = 1  # again\n"}
    with pytest.raises(EditError, match="matches 2 places"):
        apply_reply(twice, sr("train.py", "A = 1\n", "A = 2\n"), None)
    with pytest.raises(EditError, match="not found"):      # code that only starts the same
        apply_reply({"train.py": SEQ}, sr("train.py", "SEQ_LEN = 12\n", "SEQ_LEN = 15\n"),
                    None)


def test_a_missing_part_that_is_no_whole_word_does_not_match():
    files = {"train.py": "self.lr = 0.1\nmax_lr = 1\n"}
    for search in ("lr = 0.1\n", "lr = 1\n"):
        with pytest.raises(EditError, match="not found"):
            apply_reply(files, sr("train.py", search, "lr = 0.2\n"), None)


def test_a_uniformly_shifted_search_that_fits_two_places_is_refused():
    files = {"train.py": "def a():\n    x = 1\n    y = 2\n\n\ndef b():\n        x = 1\n"
                         "        y = 2\n"}
    with pytest.raises(EditError, match="matches 2 places"):
        apply_reply(files, sr("train.py", "x = 1\ny = 2\n", "x = 3\ny = 2\n"), None)


# -- a no-op is named as such ------------------------------------------------------------------

def test_a_block_whose_replace_equals_its_search_is_named_a_no_op(task):
    with pytest.raises(EditError) as err:
        apply_reply(FILES, sr("train.py", "LR = 3e-4\n", "LR = 3e-4  \n"), task)
    assert "REPLACE text is the same as its SEARCH text" in err.value.message


def test_a_whole_file_listing_of_the_file_as_it_is_is_named_unchanged(task):
    with pytest.raises(EditError) as err:
        apply_reply(FILES, f"train.py\n```python\n{TRAIN}```\n", task)
    assert "the file as it is, unchanged" in err.value.message


def test_a_statement_quoted_wrong_is_shown_the_files_own_statement_of_that_kind():
    # Qwen2.5-Coder-1.5B on tinylm searched for 'while True:' three replies running, and
    # was shown 'with autocast:' (more characters in common) instead of the loop's header
    text = ("def train():\n    with autocast:\n        pass\n    step = 0\n"
            "    while training_time < BUDGET:\n        step += 1\n")
    with pytest.raises(EditError, match="(?s)closest lines.*while training_time < BUDGET:"):
        apply_reply({"train.py": text}, sr("train.py", "while True:\n", "while step < 9:\n"),
                    None)


def test_a_block_with_no_file_name_after_a_named_one_edits_that_file(task):
    # as aider reads it: the file is named once, prose, then the next block without a name
    # (its SEARCH text is in two files, so only the named file above can decide)
    reply = ("Raise the learning rate and train longer.\n\n"
             "train.py\n```python\n<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1e-3\n"
             ">>>>>>> REPLACE\n```\n\n"
             "Then run more steps so the higher rate has time to settle:\n\n"
             "```python\n<<<<<<< SEARCH\nSTEPS = 100\n=======\nSTEPS = 300\n"
             ">>>>>>> REPLACE\n```\n")
    assert [e.path for e in parse_reply(reply).edits] == ["train.py", "train.py"]
    _, changed = apply_reply({"train.py": TRAIN, "extra_a.py": "STEPS = 100\n"}, reply, task)
    assert list(changed) == ["train.py"]
    assert "LR = 1e-3" in changed["train.py"] and "STEPS = 300" in changed["train.py"]
