"""Reply shapes seen from real models that our own corpus missed (issue 8): a second
'=======', '=======' as the end marker, a whole-file listing restarted half-way, the file
named in prose, thinking from reasoning models. Each case is written by us."""
from __future__ import annotations

import pytest

from loop.edits.edits import EditError, apply_reply, parse_reply, split_thinking

TRAIN = "".join(f"W{i} = {i}\n" for i in range(40)) + "LR = 3e-4\n\n\ndef train():\n    return LR\n"
FILES = {"train.py": TRAIN}
NEW = TRAIN.replace("LR = 3e-4", "LR = 1e-3")


def applies(reply, files=FILES):
    return apply_reply(files, reply)[1]


def refused(reply, files=FILES) -> str:
    with pytest.raises(EditError) as err:
        apply_reply(files, reply)
    return err.value.message


# -- a second divider ---------------------------------------------------------------------------

def test_second_divider_before_the_end_marker_is_never_written():
    reply = ("train.py\n```python\n<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1e-3\n"
             "=======\n>>>>>>> REPLACE\n```\n")
    changed = applies(reply)
    assert changed == {"train.py": NEW}
    assert "=======" not in changed["train.py"]


def test_divider_as_the_end_marker_with_prose_after_applies():
    reply = ("Description: faster LR\n\ntrain.py\n```python\n<<<<<<< SEARCH\nLR = 3e-4\n"
             "=======\nLR = 1e-3\n=======\n```\n\nThis converges faster on small models.\n")
    description, changed = apply_reply(FILES, reply)
    assert changed == {"train.py": NEW} and description == "faster LR"


def test_two_blocks_each_closed_by_a_divider_both_apply():
    reply = ("train.py\n<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1e-3\n=======\n\n"
             "and the first weight:\n\n<<<<<<< SEARCH\nW0 = 0\n=======\nW0 = 5\n=======\n")
    assert applies(reply)["train.py"] == NEW.replace("W0 = 0", "W0 = 5")


def test_text_between_a_second_divider_and_the_end_marker_is_refused():
    reply = ("train.py\n<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1e-3\n=======\nLR = 2e-3\n"
             ">>>>>>> REPLACE\n")
    assert "second '======='" in refused(reply)


def test_one_divider_and_no_end_marker_is_still_a_cut_off_block():
    assert "not terminated" in refused("train.py\n<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1e-3\n")


# -- a restarted whole-file listing ----------------------------------------------------------------

HALF = "".join(TRAIN.splitlines(keepends=True)[:30])
RESTART = "\nHmm, I made a mistake above. Let me write the whole file again.\n\ntrain.py\n"


def test_restarted_listing_cut_off_is_refused_not_written_with_prose():
    # the second listing's bare ``` used to close the first, writing the prose into the file
    reply = f"train.py\n```python\n{HALF}{RESTART}```\n{HALF}"
    message = refused(reply)
    assert "never closed" in message


def test_restarted_listing_with_a_complete_second_listing_takes_it():
    reply = f"train.py\n```python\n{HALF}{RESTART}```\n{NEW}```\n"
    assert applies(reply) == {"train.py": NEW}


def test_restart_opened_with_a_language_tag_takes_the_complete_listing():
    reply = f"train.py\n```python\n{HALF}{RESTART}```python\n{NEW}```\nDone.\n"
    assert applies(reply) == {"train.py": NEW}


def test_restart_never_completed_is_refused():
    reply = f"train.py\n```python\n{HALF}{RESTART}```python\n{HALF}"
    assert "never closed" in refused(reply)


def test_restart_with_no_second_label_is_refused():
    reply = f"train.py\n```python\n{HALF}\nOops, again:\n```python\n{NEW}```\n"
    assert "stops and starts again" in refused(reply)


# -- the file named in prose ---------------------------------------------------------------

def test_whole_file_under_a_prose_line_naming_it_applies():
    reply = f"Description: faster LR\n\nHere is the updated `train.py`:\n\n```python\n{NEW}```\n"
    assert applies(reply) == {"train.py": NEW}


def test_prose_naming_two_files_of_which_one_is_editable():
    reply = f"The new `train.py` (it still imports `prepare.py`):\n```python\n{NEW}```\n"
    assert applies(reply) == {"train.py": NEW}


@pytest.mark.parametrize("reply", [
    "In `train.py` you could write:\n```python\nLR = 1e-3\n```\n",             # a snippet
    f"Here is how `train.py` and `model.py` would look:\n```python\n{NEW}```\n".replace(
        "`model.py`", "`eval.py`"),                                           # two real files
    f"Here is a fresh script `new_train.py`:\n```python\n{NEW}```\n",          # not a file we have
])
def test_prose_fences_that_are_not_a_whole_known_file_are_not_edits(reply):
    files = {**FILES, "eval.py": "print(1)\n"}
    assert "no edit found" in refused(reply, files)


def test_prose_fence_loses_to_an_explicit_block_in_the_same_reply():
    # the model quotes the old file under prose, then edits it: quoting must not revert it
    reply = ("train.py\n<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1e-3\n>>>>>>> REPLACE\n\n"
             f"For reference, the original `train.py` was:\n```python\n{TRAIN}```\n")
    assert applies(reply) == {"train.py": NEW}


@pytest.mark.parametrize("above", ["Makefile", "**Makefile**", "Here is the new `Makefile`:"])
def test_root_file_without_extension_named_above_a_fence(above):
    files = {"Makefile": "all:\n\tpython train.py\n", **FILES}
    reply = f"{above}\n```make\nall:\n\tpython train.py --fast\n```\n"
    assert applies(reply, files) == {"Makefile": "all:\n\tpython train.py --fast\n"}


def test_a_bare_word_that_is_no_file_is_not_a_label():
    assert "no edit found" in refused("Output\n```\nloss 2.31\n```\n")


# -- classes found in peers' fixtures and transcripts (our own text) -------------------------

def test_listing_that_starts_over_after_a_bare_fence_is_refused():
    # a reply interrupted mid-listing, then the same listing from its first line again
    reply = f"train.py\n```python\n{HALF}W30 = 3\n```\n{HALF}"
    assert "stops and starts again" in refused(reply)


def test_markdown_file_with_its_own_fences_is_not_cut_at_the_first_one():
    notes = "# Notes\n\nRun it so:\n```\npython train.py\n```\nThat is all.\n"
    reply = "notes.md\n```\n# Notes\n\nRun it like this:\n```\npython train.py\n```\nDone.\n```\n"
    assert "contains ``` code fences" in refused(reply, {"notes.md": notes})


def test_markdown_file_listed_in_a_longer_fence_keeps_its_own_fences():
    notes = "# Notes\n```\nold\n```\n"
    new = "# Notes\n```\nnew\n```\n"
    assert applies(f"notes.md\n````markdown\n{new}````\n", {"notes.md": notes}) == {
        "notes.md": new}


def test_file_name_in_a_fence_of_its_own_above_the_block():
    # a model that wraps the file name in its own fence, then opens the block's fence
    reply = (" ```python\ntrain.py\n```\n```python\n<<<<<<< SEARCH\nLR = 3e-4\n=======\n"
             "LR = 1e-3\n>>>>>>> REPLACE\n```\n")
    assert applies(reply) == {"train.py": NEW}


def test_diff_hunks_without_line_numbers_for_two_files_in_one_fence():
    files = {"a.py": "x = 1\n", "b.py": "z = 3\nw = 4\n"}
    reply = ("```diff\n--- a.py\n+++ a.py\n@@ ... @@\n x = 1\n+y = 2\n--- b.py\n+++ b.py\n"
             "@@ ... @@\n z = 3\n-w = 4\n+w = 5\n```\n")
    assert applies(reply, files) == {"a.py": "x = 1\ny = 2\n", "b.py": "z = 3\nw = 5\n"}


# -- thinking ---------------------------------------------------------------------------------

@pytest.mark.parametrize("content, thinking, answer", [
    ("<think>\nplan\n</think>\n\nDescription: x", "plan", "Description: x"),
    ("<think>plan</think>Description: x", "plan", "Description: x"),
    ("  <thinking>\nplan\n</thinking>\nDescription: x", "plan", "Description: x"),
    ("plan, opened by the template\n</think>\n\nDescription: x",
     "plan, opened by the template", "Description: x"),
    ("<think>\nplan, then cut off", "plan, then cut off", ""),
    ("Description: x\n", "", "Description: x\n"),
])
def test_split_thinking_in_each_servers_shape(content, thinking, answer):
    assert split_thinking(content) == (thinking, answer)


def test_think_tags_inside_an_edit_are_code_not_thinking():
    # a tokenizer's special tokens in the code being edited
    files = {"tok.py": 'SPECIAL = ["<pad>"]\n'}
    reply = ('tok.py\n<<<<<<< SEARCH\nSPECIAL = ["<pad>"]\n=======\n'
             'SPECIAL = ["<pad>", "<think>", "</think>"]\n>>>>>>> REPLACE\n')
    assert applies(reply, files) == {"tok.py": 'SPECIAL = ["<pad>", "<think>", "</think>"]\n'}


def test_a_divider_that_may_underline_a_heading_is_refused_not_dropped():
    # "Results\n=======" at the end of REPLACE: a setext heading, or a doubled divider?
    files = {"notes.md": "Intro\n"}
    reply = ("notes.md\n<<<<<<< SEARCH\nIntro\n=======\nIntro\n\nResults\n=======\n"
             ">>>>>>> REPLACE\n")
    assert "may underline a heading" in refused(reply, files)


# -- descriptions are recorded without the prefixes models put before them ---------------------

@pytest.mark.parametrize("line", [
    "Description: Improve the schedule",
    "1. Description: Improve the schedule",
    "**Description:** Improve the schedule",
    "- **Description**: Improve the schedule",
    "> Description: \"Improve the schedule\"",
    "2) `Description: Improve the schedule`",
])
def test_description_prefixes_are_stripped(line):
    assert description_of(line) == "Improve the schedule"


@pytest.mark.parametrize("line", [
    # Qwen2.5-Coder 0.5B, a local night: the verdict the history showed for DEPTH 12, copied
    "set DEPTH to 16 [not better (gain -0.9439, p=0.999): stopped after one run]",
    "#3 discard 4.40253 (gain -1.443): set DEPTH to 16",
    "Description: #4 crash: set DEPTH to 16 [gain within noise (gain +0.01, p=0.3)]",
])
def test_what_a_model_copies_of_the_history_is_not_its_description(line):
    assert description_of(line) == "set DEPTH to 16"


def description_of(line: str) -> str | None:
    """The description recorded for a reply whose first line is `line`, above an edit."""
    reply = (f"{line}\n\ntrain.py\n```python\n"
             "<<<<<<< SEARCH\nA = 1\n=======\nA = 2\n>>>>>>> REPLACE\n```\n")
    return parse_reply(reply).description


def test_a_bracket_of_the_models_own_stays_in_its_description():
    assert parse_reply("Description: scale the init [Kaiming, fan_out]\n").description \
        == "scale the init [Kaiming, fan_out]"


def test_a_description_under_a_heading_or_a_list_marker_without_label_is_clean():
    assert parse_reply("### Description\n1. Improve the schedule\n").description \
        == "Improve the schedule"
    assert parse_reply("* 1.5x longer warm-up helps\n").description == "1.5x longer warm-up helps"
