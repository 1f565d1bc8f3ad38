"""Fuzzed: the boundary with untrusted input (loop/untrusted.py) and the reply readers behind
it. Whatever text comes in, the cleaning function gives a record-safe line, the number
parser a finite float or a ValueError (fast: nothing is evaluated), the path check one
spelling or a ValueError, and a reply reader a proposal or its own error, nothing else."""
import json
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import make_repo
from loop.edits.edits import EditError, apply_reply, parse_reply
from loop.edits.jsonreply import parse_json_reply
from loop.setup.task import load_task
from loop.untrusted import (FORBIDDEN_PARTS, bounded_power, canonical_path, clean, one_line,
                            parse_number)

# every code point, surrogates and controls included (hypothesis leaves out surrogates unless
# told): what a JSON reply's `\ud800` or a run's raw bytes can hold
ANY_CHAR = st.characters(exclude_categories=())
ANY_TEXT = st.text(ANY_CHAR, max_size=300)
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def is_control(ch: str) -> bool:
    return ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f or 0xd800 <= ord(ch) <= 0xdfff \
        or ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


@FUZZ
@given(ANY_TEXT, st.integers(1, 400))
def test_one_line_is_one_printable_line_of_bounded_size(text, limit):
    line = one_line(text, limit)
    assert not any(is_control(ch) for ch in line)
    assert "\n" not in line and "\t" not in line and "\u2028" not in line
    line.encode("utf-8")                      # strict: git, files and MLflow take it
    assert len(line) <= limit + len("… [ more characters]") + len(str(len(text) * 6))


@FUZZ
@given(ANY_TEXT)
def test_clean_keeps_line_breaks_only_and_is_stable(text):
    out = clean(text)
    assert not any(is_control(ch) and ch not in "\n\t" for ch in out)
    out.encode("utf-8")
    assert clean(out) == out                  # cleaning twice changes nothing


def test_clean_escapes_visibly_and_drops_nul():
    assert clean("a\x00b\x1b[2Jc\u202ed\ud800") == "ab\\x1b[2Jc\\u202ed\\ud800"
    assert one_line("x\r\n\ty  z") == "x y z"
    assert one_line("x" * 50, 10) == "x" * 10 + "… [40 more characters]"


@FUZZ
@given(ANY_TEXT)
def test_number_parser_returns_a_finite_float_or_a_one_line_value_error(text):
    started = time.process_time()
    try:
        value = parse_number(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc)
    else:
        assert isinstance(value, float) and math.isfinite(value)
    assert time.process_time() - started < 1.0     # never evaluated: no power is computed big


@FUZZ
@given(st.integers(-10**6, 10**6), st.integers(-10**12, 10**12))
def test_a_power_is_computed_only_when_it_fits_a_float(base, exp):
    text = f"{base}**{exp}"
    try:
        value = parse_number(text)
    except ValueError as exc:
        assert "float" in str(exc) or "zero" in str(exc)
        return
    expected = -(abs(base) ** exp) if base < 0 else base ** exp   # -2**2 is -(2**2)
    assert value == pytest.approx(float(expected), rel=1e-12, abs=1e-300)


@FUZZ
@given(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["", "_", "e"]))
def test_a_literal_reads_as_python_reads_it(value, how):
    text = repr(value)
    if how == "_" and text.isdigit():
        text = text[0] + "_" + text[1:] if len(text) > 1 else text
    assert parse_number(text) == float(text.replace("_", ""))


@FUZZ
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
       st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
def test_bounded_power_is_finite_or_refused(base, exp):
    try:
        value = bounded_power(base, exp)
    except ValueError:
        return
    assert math.isfinite(value) and not isinstance(value, complex)


def test_the_numbers_the_issue_names():
    with pytest.raises(ValueError, match="beyond the range of a float"):
        parse_number("2**4000000000")
    with pytest.raises(ValueError, match="beyond the range of a float"):
        parse_number("2**2000")
    with pytest.raises(ValueError, match="beyond the range of a float"):
        parse_number("1e999")
    assert parse_number("2**19") == 524288.0 and parse_number("1_000") == 1000.0
    assert parse_number("3e-4") == 0.0003


@FUZZ
@given(st.lists(st.one_of(ANY_TEXT, st.sampled_from([".", "..", "", ".git", "__pycache__",
                                                     "train.py", "a", ".GIT", ".git."])),
                max_size=6), st.sampled_from(["/", "\\", "//"]))
def test_a_path_has_one_spelling_or_is_refused(parts, sep):
    raw = sep.join(parts)
    try:
        path = canonical_path(raw)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    segments = path.split("/")
    assert all(s not in ("", ".", "..") for s in segments)
    assert not any(s.rstrip(". ").casefold() in FORBIDDEN_PARTS for s in segments)
    assert not any(is_control(ch) for ch in path) and "\\" not in path
    assert canonical_path(path) == path


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    repo = make_repo(tmp_path_factory.mktemp("t") / "repo", {
        "task.yaml": "name: t\neditable: [train.py, \"**/*.py\"]\nprotected: [prepare.py]\n"
                     "run: python train.py\nmetric: {name: score}\n",
        "train.py": "X = 1\n", "prepare.py": "P = 1\n", "lib/u.py": "U = 1\n"})
    return load_task(repo / "task" / "task.yaml")


@FUZZ
@given(st.lists(st.sampled_from([".", "", "./"]), max_size=5),
       st.sampled_from(["prepare.py", "Prepare.py", "PREPARE.PY", "task.yaml"]))
def test_a_protected_file_is_protected_under_every_spelling(task, lead, name):
    reason = task.check_edit_path("/".join([*lead, name]).lstrip("/") or name)
    assert reason and ("protected" in reason or "absolute" in reason), reason


def test_paths_no_edit_may_write(task):
    for path in (".git/x.py", "__pycache__/x.py", ".autoresearch/x.py", "a/../prepare.py",
                 "/etc/x.py", "a\\b.py", "lib/.git./x.py"):
        assert task.check_edit_path(path), path
    assert task.check_edit_path("././lib//u.py") is None


FILES = {"train.py": "X = 3.0\nY = 2\nprint(X)\n", "lib/u.py": "U = 1\n"}
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(ANY_TEXT, inner, max_size=3), max_leaves=12)
REPLY_OBJECT = st.fixed_dictionaries({}, optional={
    "description": st.one_of(ANY_TEXT, JSON_VALUES),
    "set": st.one_of(JSON_VALUES, st.lists(st.fixed_dictionaries({
        "name": st.sampled_from(["X", "Y", "Z", ""]),
        "value": st.one_of(ANY_TEXT, st.sampled_from(["2**4000000000", "1e999", "4", "2**19"]),
                           JSON_VALUES)}), max_size=3)),
    "edits": st.one_of(JSON_VALUES, st.lists(st.fixed_dictionaries({
        "file": st.one_of(st.sampled_from(["train.py", "././prepare.py", ".git/x.py",
                                           "../x.py", "lib/u.py"]), ANY_TEXT),
        "search": st.one_of(st.sampled_from(["X = 3.0\n", "", "nothing"]), ANY_TEXT),
        "replace": ANY_TEXT}), max_size=3))})
REPLY_TEXT = st.one_of(ANY_TEXT, REPLY_OBJECT.map(json.dumps),
                       st.builds(lambda p, s, r: f"{p}\n```\n<<<<<<< SEARCH\n{s}=======\n{r}"
                                                 f">>>>>>> REPLACE\n```\n",
                                 st.sampled_from(["train.py", "././prepare.py", ".git/x",
                                                  ""]), ANY_TEXT, ANY_TEXT))


@FUZZ
@given(REPLY_TEXT)
def test_a_reply_is_parsed_or_refused_in_its_own_error_never_raised_otherwise(task, text):
    parse_reply(text)
    parsed = parse_json_reply(text, FILES)
    assert parsed.description is None or not any(is_control(c) for c in parsed.description)
    try:
        _, changed = apply_reply(FILES, text, task)
    except EditError:
        return
    assert set(changed) <= {"train.py", "lib/u.py"}      # never a protected or new path


def test_a_huge_power_in_a_kept_diff_is_code_to_the_tuner_not_a_crash():
    from loop.proposers.epochs import _constants
    values, code = _constants(("X=2**4000000000", "Y=2**2000", "Z=3"))
    assert values == {"Z": 3.0} and code == ["X=2**4000000000", "Y=2**2000"]


def test_a_requires_expression_never_computes_a_huge_power():
    from loop.untrusted import evaluate
    with pytest.raises(ValueError, match="beyond the range of a float"):
        evaluate("D ** 4000000000 > 1", {"D": 2})
    assert evaluate("D % 2**3 == 0", {"D": 16}) is True
