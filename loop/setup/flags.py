"""The flags file (task.yaml `flags`): the command-line settings of a script that reads them
from its command line (argparse, click, fire, `--key=value` overrides), kept in a committed,
editable YAML file of `name: value` lines, so a candidate that changes one is a commit whose
diff shows it, and mutate, tune and the LLM change it as they change a constant
(loop/setup/settings.py reads its keys as settings).

Each run's training command is the task's `run` followed by one `--name=value` per entry (with
task.yaml `flags_style: hydra`, one Hydra override `name=value`: `training.lr=0.001`), in
the file's order, read from the candidate's own worktree: `true` is `--name` alone (a switch),
`false` and `null` leave the flag out, and the value `$AUTORESEARCH_SEED` is the run's own
seed (so a script that takes its seed as a flag gets a fresh one each run). Every other value
is passed as written, shell-quoted. Pure but for reading the one file."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

SEED_VALUE = "$AUTORESEARCH_SEED"
DASHES, HYDRA = "dashes", "hydra"        # task.yaml `flags_style`: --name=value, or name=value
STYLES = (DASHES, HYDRA)
NAME = re.compile(r"[A-Za-z_][\w.\-]*")


class FlagsError(ValueError):
    """A flags file that cannot be turned into a command line (one line)."""


def read(text: str, where: str) -> list[tuple[str, object]]:
    """(name, value) of a flags file's entries, in order; FlagsError when it is no flat
    mapping of flag names to scalars."""
    import yaml
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FlagsError(f"{where}: not valid YAML ({' '.join(str(exc).split())})") from None
    if data is None:
        return []
    if not isinstance(data, dict):
        raise FlagsError(f"{where}: expected `name: value` lines (one flag each), "
                         f"got {type(data).__name__}")
    out = []
    for name, value in data.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise FlagsError(f"{where}: {name!r} is not a flag name (letters, digits, `_`, "
                             f"`-`, `.`; written without its leading dashes)")
        if isinstance(value, (dict, list)):
            raise FlagsError(f"{where}: {name}: a flag takes one value, got "
                             f"{type(value).__name__}")
        out.append((name, value))
    return out


def argv(entries: list[tuple[str, object]], style: str = DASHES) -> str:
    """The flags as they follow the run command: ` --lr=0.001 --batch-size=64`; in the
    `hydra` style, Hydra's overrides of its composed config: ` training.lr=0.001` (a switch
    is `name=true`, `false` passed as such, `null` left out)."""
    words = []
    for name, value in entries:
        if style == HYDRA:
            if value is None:
                continue
            text = "true" if value is True else "false" if value is False else _text(value)
            words.append(f'{name}="$AUTORESEARCH_SEED"' if value == SEED_VALUE
                         else shlex.quote(f"{name}={text}"))
            continue
        if value is False or value is None:
            continue
        if value is True:
            words.append(f"--{name}")
        elif value == SEED_VALUE:
            words.append(f'--{name}="$AUTORESEARCH_SEED"')
        else:
            words.append(shlex.quote(f"--{name}={_text(value)}"))
    return "".join(" " + w for w in words)


def command(run: str, flags_file: str, folder: Path, style: str = DASHES) -> str:
    """`run` with the flags of `folder`'s flags file, in `style` (task.yaml `flags_style`);
    a file that cannot be read makes a command that says why and exits 2 (the run fails
    with that line in its log, the night goes on)."""
    path = folder / flags_file
    try:
        return run + argv(read(path.read_text(), flags_file), style)
    except (OSError, UnicodeDecodeError) as exc:
        why = f"{flags_file}: cannot read it ({exc.__class__.__name__})"
    except FlagsError as exc:
        why = str(exc)
    return f"echo {shlex.quote('autoresearch: the flags file ' + why)} >&2; exit 2"


def _text(value: object) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)
