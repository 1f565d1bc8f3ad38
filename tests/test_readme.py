"""README, docs/ and the CLI cannot drift: every `autoresearch` command README and docs/*.md
show parses with the real argument parser, every flag of the CLI synopsis exists, the files
they name exist, the set-up activates the environment before any bare command runs, README
stays short and maps every docs/ file, and a `column -t` transcript of results.tsv has the
file's columns on every row."""
import re
import shlex
from pathlib import Path

import pytest

from loop.ui.cli import build_parser
from loop.state.results import results_text

ROOT = Path(__file__).resolve().parent.parent
README_PATH = ROOT / "README.md"
README = README_PATH.read_text()
DOC_PATHS = sorted((ROOT / "docs").glob("*.md"))
DOCS = {"README.md": README} | {f"docs/{p.name}": p.read_text() for p in DOC_PATHS}
ENTRY_POINTS = {"autoresearch", ".venv/bin/autoresearch"}
BARE = ("autoresearch", "mlflow", "pytest", "python -m pytest", "python -m loop")
README_MAX_BYTES = 15_000
# Commands README may name before the CLI has them, with why. A test below fails once the
# CLI has one, so the entry cannot outlive its reason.
PENDING: dict[str, str] = {}   # subcommands docs may name before the CLI has them


def joined(lines: list[str]) -> list[str]:
    """Lines with shell continuations (a trailing backslash) joined into one."""
    out: list[str] = []
    for line in lines:
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1] + " " + line.strip()
        else:
            out.append(line)
    return out


def blocks(text: str = README) -> list[tuple[str, list[str]]]:
    """Fenced blocks as (info string, lines), in document order."""
    return [(m.group(1), joined(m.group(2).splitlines()))
            for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def indented_commands(text: str) -> list[str]:
    """`autoresearch ...` lines of indented (4-space) code blocks outside fences: docs/ shows
    commands that way too."""
    outside = re.sub(r"^```\w*\n.*?^```", "", text, flags=re.S | re.M)
    lines = joined(outside.splitlines())
    return [m.group(1).strip() for line in lines
            if (m := re.match(r"^ {4}(autoresearch .*)$", line))]


def commands(text: str = README) -> list[str]:
    """Shell lines: every line of a bash block, and `$ `-prompted lines of a transcript."""
    found = []
    for info, lines in blocks(text):
        for line in lines:
            if info == "bash" and line.strip() and not line.lstrip().startswith("#"):
                found.append(line.strip())
            elif info == "" and line.startswith("$ "):
                found.append(line[2:].strip())
    return found


def cli_args(line: str) -> list[str] | None:
    """The arguments of an `autoresearch` call on this line (after VAR=value), else None."""
    for part in re.split(r"&&|\|", line):
        tokens = shlex.split(part, comments=True)
        while tokens and re.match(r"^[A-Z_]+=", tokens[0]):
            tokens.pop(0)
        if tokens and tokens[0] in ENTRY_POINTS:
            return tokens[1:]
        if tokens[:3] == ["python", "-m", "loop"]:
            return tokens[3:]
    return None


def subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


CLI_LINES = [(name, line) for name, text in DOCS.items()
             for line in commands(text) + indented_commands(text) if cli_args(line) is not None]


def test_readme_shows_cli_commands():
    assert sum(name == "README.md" for name, _ in CLI_LINES) >= 5   # the extraction works
    assert sum(name != "README.md" for name, _ in CLI_LINES) >= 8   # in docs/ too


def out_dir(line: str) -> str | None:
    """The folder a command writes (`task ... --out DIR`), if it parses and has one."""
    try:
        return getattr(build_parser().parse_args(cli_args(line)), "out", None)
    except SystemExit:
        return None


@pytest.mark.parametrize("name,line", CLI_LINES, ids=[f"{n}: {l[:60]}" for n, l in CLI_LINES])
def test_every_command_parses(name, line):
    args = cli_args(line)
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit:
        pytest.fail(f"{name}: command does not parse with the current CLI: {line}")
    made = {out_dir(other) for n, other in CLI_LINES if n == name}   # a shown `--out` makes it
    for flag in ("config", "task"):       # the files it names are in the repository
        value = getattr(parsed, flag, None)
        if value and value not in made:
            assert (ROOT / value).exists(), f"{name}: {line}: {value} does not exist"


def test_cli_synopsis_matches_the_parser():
    synopsis = next(lines for text in DOCS.values() for info, lines in blocks(text)
                    if info == "" and any(line.startswith("autoresearch run [") for line in lines))
    subs = subparsers()
    documented, current = set(), None
    for line in synopsis:
        words = line.split("#")[0].split()
        if words[:1] == ["autoresearch"]:
            current = words[1]
            assert current in subs, f"the synopsis documents a command the CLI lacks: {current}"
            documented.add(current)
            parser = subs[current]
            nested = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
            if nested:                   # `task mlebench ...`: the flags are the kind's
                parser = nested[0].choices[words[2]]
        if current and current in subs:
            known = parser._option_string_actions
            for flag in re.findall(r"(--[a-z][a-z-]*)", line.split("#")[0]):
                assert flag in known, \
                    f"the synopsis's `autoresearch {current}` names {flag}: unknown"
    assert set(subs) == documented, f"undocumented commands: {set(subs) - documented}"


@pytest.mark.parametrize("name", list(DOCS))
def test_inline_commands_name_real_subcommands(name):
    subs = subparsers()
    for sub in re.findall(r"`autoresearch ([a-z][a-z-]*)", DOCS[name]):
        assert sub in subs or sub in PENDING, \
            f"{name} mentions `autoresearch {sub}`, which does not exist"


def test_pending_commands_are_still_pending():
    landed = set(PENDING) & set(subparsers())
    assert not landed, f"the CLI has {landed} now: remove it from PENDING in this test"


def test_setup_activates_the_environment_before_any_bare_command():
    bash = [lines for info, lines in blocks() if info == "bash"]
    setup = bash[0]
    assert re.match(r"^python3 -m venv \.venv && (\.|source) \.venv/bin/activate$", setup[0])
    order = [line for lines in bash for line in lines]
    activated = order.index(setup[0])
    for i, line in enumerate(order):
        if any(re.match(rf"^([A-Z_]+=\S+ )*{re.escape(b)}\b", line) for b in BARE):
            assert i > activated, f"`{line}` runs before the environment is activated"


def test_readme_is_short():
    size = len(README_PATH.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail to docs/"


def docs_map() -> list[str]:
    """docs/ files README's map (its `## Docs` section) links to, in its order."""
    section = re.search(r"^## Docs\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert section, "README has no `## Docs` section mapping docs/"
    return re.findall(r"\]\((docs/[\w.-]+\.md)\)", section.group(1))


def test_docs_map_names_every_docs_file_and_only_existing_ones():
    mapped = docs_map()
    missing = [rel for rel in mapped if not (ROOT / rel).is_file()]
    assert not missing, f"README's map names files that do not exist: {missing}"
    unmapped = sorted(f"docs/{p.name}" for p in DOC_PATHS if f"docs/{p.name}" not in mapped)
    assert not unmapped, f"docs/ files README's map leaves out: {unmapped}"
    assert len(mapped) == len(set(mapped)), "README's map names a file twice"


COLUMN = re.compile(r"column -t -s\$'\\t'")


def column_transcripts(text: str) -> list[tuple[str, list[str]]]:
    """(command, output lines) of each `$ ... column -t -s$'\\t'` in a transcript block."""
    found = []
    for info, lines in blocks(text):
        for i, line in enumerate(lines):
            if info == "" and line.startswith("$ ") and COLUMN.search(line):
                out = []
                for row in lines[i + 1:]:
                    if row.startswith("$ "):
                        break
                    out.append(row)
                found.append((line[2:], out))
    return found


def expected_header(command: str, metric: str) -> list[str]:
    """results.tsv's header as the engine writes it, cut as the command cuts it."""
    header = results_text(metric, []).rstrip("\n").split("\t")
    cut = re.search(r"cut -f(\d+)-(\d+)", command)
    return header[int(cut.group(1)) - 1:int(cut.group(2))] if cut else header


def column_problems(command: str, rows: list[str]) -> list[str]:
    """Why these lines are not `column -t` output of results.tsv's columns (empty: they are).
    The header fixes where each column starts; every row must break at those places only."""
    if not rows:
        return ["no output"]
    head = rows[0]
    names = re.split(r" {2,}", head.strip())
    metric = names[1] if len(names) > 1 else "?"
    expected = expected_header(command, metric)
    problems = []
    if names != expected:
        problems.append(f"header {names} is not results.tsv's {expected}")
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", head)]
    for n, row in enumerate(rows, 1):
        if "\t" in row:
            problems.append(f"row {n} holds a tab: the separator was not a tab")
            continue
        cells = [row[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
        broken = [s for s in starts[1:] if len(row) > s and row[s - 1] != " "]
        merged = [c for c in cells if "  " in c]   # two cells in one slot (results.tsv's
        if broken or merged or not cells[0] or len(cells) != len(expected):   # cells: 1 space)
            problems.append(f"row {n} has not the header's {len(expected)} columns: {row!r}")
    return problems


TRANSCRIPTS = [(name, cmd, rows) for name, text in DOCS.items()
               for cmd, rows in column_transcripts(text)]


def test_a_column_transcript_is_shown():
    assert TRANSCRIPTS, "no `column -t -s$'\\t'` transcript of results.tsv in README or docs/"


@pytest.mark.parametrize("name,command,rows", TRANSCRIPTS,
                         ids=[f"{n}: {c[:40]}" for n, c, _ in TRANSCRIPTS])
def test_column_transcripts_have_results_tsv_columns_on_every_row(name, command, rows):
    assert not column_problems(command, rows), f"{name}: {column_problems(command, rows)}"


def test_the_column_check_refuses_a_garbled_transcript():
    """What `column -t -s$'\\t'` prints under dash (where $'\\t' is not a tab, so `t` splits):
    README once showed this, and the check above must not pass it."""
    cmd = "cut -f1-9 .autoresearch/demo/results.tsv | column -t -s$'\\t'"
    garbled = [
        "commi        \tval_bpb\tmemory_gb\ts  a   us\tdescrip  ion\ti  era  ion\tgain\truns\tspread",  # noqa: E501 (a table as printed)
        "819d6af\t1.540694\t0.5\tkeep\tbaseline (unmodified code)\t0\t\t3\t0.047507",
        "9fff2b0\t1.394988\t0.5\tdiscard\tSe       WARMUP_FRAC  o 0.3 (was 0.05) in  rain.py\t1",
    ]
    assert column_problems(cmd, garbled)
    shifted = [  # a row with a cell missing: its columns no longer line up
        "commit   val_bpb   memory_gb  status   description                 iteration  gain  runs  spread",  # noqa: E501 (a table as printed)
        "819d6af  1.540694  0.5        keep     baseline (unmodified code)  0          3     0.047507",  # noqa: E501 (a table as printed)
        "9fff2b0  1.394988  0.5        discard  Set WARMUP_FRAC to 0.3 (was 0.05) in train.py  1  0.1  2  0.01",  # noqa: E501 (a table as printed)
    ]
    assert column_problems(cmd, shifted)


def test_no_tracked_file_names_a_path_of_the_machine_it_was_written_on():
    """Docs, configs and code name paths relative to the project or through variables: a
    path like /work/..., /root/... or /home/<someone>/... is true on one machine only."""
    import subprocess
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    machine = re.compile(r"(?<![\w.])/(?:work|root|Users)/\w|(?<![\w.])/home/(?!user\b)\w")
    found = []
    for rel in files:
        path = ROOT / rel
        if rel.startswith("tests/") and rel.endswith(".py") or not path.is_file():
            continue   # tests build such paths on purpose (hidden-secret probes, fixtures)
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{rel}:{n}" for n, line in enumerate(text.splitlines(), 1)
                  if machine.search(line)]
    assert not found, found
