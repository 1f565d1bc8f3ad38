"""The flags file (task.yaml `flags`): the command-line settings of a script that reads them
from its command line (argparse, click, fire, `--key=value` overrides), kept in a committed,
editable YAML file of `name: value` lines, so a candidate that changes one is a commit whose
diff shows it, and mutate, tune and the LLM change it as they change a constant
(loop/script/settings.py reads its keys as settings).

Each run's training command is the task's `run` followed by one `--name=value` per entry (with
task.yaml `flags_style: hydra`, one Hydra override `name=value`: `training.lr=0.001`), in
the file's order, read from the candidate's own worktree: `true` is `--name` alone (a switch),
`false` and `null` leave the flag out, and the value `$AUTORESEARCH_SEED` is the run's own
seed (so a script that takes its seed as a flag gets a fresh one each run). Every other value
is passed as written (YAML 1.2: `yes`, `no`, `1:00`, `0777` are text, passed as such),
shell-quoted, so the file's diff is the run's argv. The file is read strictly
(loop/yaml_io.py): duplicate and merge keys, anchors, aliases, tags and over-long values
are refused in one line naming the key. Pure but for reading the one file."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

SEED_VALUE = "$AUTORESEARCH_SEED"
DASHES, HYDRA = "dashes", "hydra"        # task.yaml `flags_style`: --name=value, or name=value
STYLES = (DASHES, HYDRA)
NAME = re.compile(r"[A-Za-z_][\w.\-]*")
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
ARGV_CHARS_MAX = 100_000       # all the flags together; Linux takes about 2 MB of argv+env


class FlagsError(ValueError):
    """A flags file that cannot be turned into a command line (one line)."""


def read(text: str, where: str) -> list[tuple[str, object]]:
    """(name, value) of a flags file's entries, in order, read by the one YAML reader
    (loop/yaml_io.py, strictly: the settings search reads the same file with it). A
    value is True or False (`true`/`false` only), None (`null`, or nothing), or its text as
    written (`1:00`, `0777`, `no`, `1e-3`, a quoted string's content), so the file's diff is
    the run's argv. FlagsError (one line naming the key) for anything else: no flat mapping
    of flag names to scalars, a duplicate or merge key, an anchor, alias or tag, a value over
    VALUE_CHARS_MAX characters, or flags too long together for one command line."""
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    from loop.yaml_io import VALUE_CHARS_MAX, YamlError, compose
    try:
        root = compose(text, where, strict=True)
    except YamlError as exc:
        raise FlagsError(str(exc)) from None
    if root is None:
        return []
    if not isinstance(root, MappingNode):
        raise FlagsError(f"{where}: expected `name: value` lines (one flag each), got "
                         f"{'a list' if isinstance(root, SequenceNode) else 'one value'}")
    out: list[tuple[str, object]] = []
    length = 0
    for key, node in root.value:
        name = key.value if isinstance(key, ScalarNode) else "?"
        if not isinstance(key, ScalarNode) or not NAME.fullmatch(name):
            raise FlagsError(f"{where}: {name!r} is not a flag name (letters, digits, `_`, "
                             f"`-`, `.`; written without its leading dashes)")
        if not isinstance(node, ScalarNode):
            raise FlagsError(f"{where}: {name}: a flag takes one value, got a "
                             f"{'list' if isinstance(node, SequenceNode) else 'mapping'}")
        value: object = node.value
        if node.style is None and node.tag == BOOL:
            value = node.value in ("true", "True", "TRUE")
        elif node.style is None and node.tag == NULL:
            value = None
        elif "\0" in node.value:
            raise FlagsError(f"{where}: {name}: a NUL character cannot be in a command line")
        length += len(name) + len(node.value) + 4
        if length > ARGV_CHARS_MAX:
            raise FlagsError(f"{where}: {name}: the flags up to here make a command line over "
                             f"{ARGV_CHARS_MAX} characters (each value at most "
                             f"{VALUE_CHARS_MAX})")
        out.append((name, value))
    return out


def argv(entries: list[tuple[str, object]], style: str = DASHES) -> str:
    """The flags as they follow the run command: ` --lr=0.001 --batch-size=64`; in the
    `hydra` style, Hydra's overrides of its composed config: ` training.lr=0.001` (a switch
    is `name=true`, `false` passed as such, `null` left out). Each value as written."""
    words = []
    for name, value in entries:
        if style == HYDRA:
            if value is None:
                continue
            text = "true" if value is True else "false" if value is False else str(value)
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
            words.append(shlex.quote(f"--{name}={value}"))
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

