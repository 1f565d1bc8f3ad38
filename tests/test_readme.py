"""README and CLI cannot drift: every `autoresearch` command README shows parses with the
real argument parser, every flag of the CLI synopsis exists, the files it names exist, and
the set-up activates the environment before any bare command runs."""
import re
import shlex
from pathlib import Path

import pytest

from loop.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
ENTRY_POINTS = {"autoresearch", ".venv/bin/autoresearch"}
BARE = ("autoresearch", "mlflow", "pytest", "python -m pytest", "python -m loop")


def blocks() -> list[tuple[str, list[str]]]:
    """Fenced blocks as (info string, lines), in README order."""
    return [(m.group(1), m.group(2).splitlines())
            for m in re.finditer(r"^```(\w*)\n(.*?)^```", README, re.S | re.M)]


def commands() -> list[str]:
    """Shell lines: every line of a bash block, and `$ `-prompted lines of a transcript."""
    found = []
    for info, lines in blocks():
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


CLI_LINES = [line for line in commands() if cli_args(line) is not None]


def test_readme_shows_cli_commands():
    assert len(CLI_LINES) >= 8          # the extraction itself works


@pytest.mark.parametrize("line", CLI_LINES)
def test_every_readme_command_parses(line):
    args = cli_args(line)
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit:
        pytest.fail(f"README command does not parse with the current CLI: {line}")
    for flag in ("config", "task"):       # the files it names are in the repository
        value = getattr(parsed, flag, None)
        if value:
            assert (ROOT / value).exists(), f"{line}: {value} does not exist"


def test_cli_synopsis_matches_the_parser():
    synopsis = next(lines for info, lines in blocks()
                    if info == "" and any(line.startswith("autoresearch run [") for line in lines))
    subs = subparsers()
    documented, current = set(), None
    for line in synopsis:
        words = line.split("#")[0].split()
        if words[:1] == ["autoresearch"]:
            current = words[1]
            assert current in subs, f"README documents a command the CLI lacks: {current}"
            documented.add(current)
            parser = subs[current]
            nested = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
            if nested:                   # `task mlebench ...`: the flags are the kind's
                parser = nested[0].choices[words[2]]
        if current and current in subs:
            known = parser._option_string_actions
            for flag in re.findall(r"(--[a-z][a-z-]*)", line.split("#")[0]):
                assert flag in known, f"README's `autoresearch {current}` names {flag}: unknown"
    assert set(subs) == documented, f"undocumented commands: {set(subs) - documented}"


def test_inline_commands_name_real_subcommands():
    subs = subparsers()
    for name in re.findall(r"`autoresearch ([a-z][a-z-]*)", README):
        assert name in subs, f"README mentions `autoresearch {name}`, which does not exist"


def test_setup_activates_the_environment_before_any_bare_command():
    bash = [lines for info, lines in blocks() if info == "bash"]
    setup = bash[0]
    assert re.match(r"^python3 -m venv \.venv && (\.|source) \.venv/bin/activate$", setup[0])
    order = [line for lines in bash for line in lines]
    activated = order.index(setup[0])
    for i, line in enumerate(order):
        if any(re.match(rf"^([A-Z_]+=\S+ )*{re.escape(b)}\b", line) for b in BARE):
            assert i > activated, f"`{line}` runs before the environment is activated"


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
