"""A task's interpreter, resolved once, the same way for init's probe, check-task, the runs
and the graders.

The steps run in a worktree and in a pristine copy of a commit, which hold committed files
only, and in the sandbox, without network. So the interpreter at the head of a command is
resolved when the task is loaded, to a file that exists now:
- `uv run python ...` (also `uv run python3`, `uv run -m mod`, `uv run train.py`,
  `uv run torchrun ...`): the uv project's environment, `.venv` beside the nearest
  pyproject.toml (or $UV_PROJECT_ENVIRONMENT), used as it is. `uv run` itself would sync,
  building a new environment in every worktree from the network; no environment yet is one
  line asking for `uv sync`;
- a relative path into an environment (`.venv/bin/python`): the user's checkout's (an
  ignored folder, which worktrees lack);
- an absolute path (a conda env's python, `~/...`): as written, `~` expanded;
- plain `python` / `python3`: the engine's interpreter (first on a run's PATH).
Then `roots` names what the sandbox shows of it, read-only, wherever it lives (under HOME,
/tmp): the environment folder and the installs its python links to; `activation` the
variables a run gets (VIRTUAL_ENV of that environment, never the engine's)."""
from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

from loop.errors import TaskError

PYTHONS = ("python", "python3")
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=\S*")
# `uv run` options that take a value (the next word), and those that would build or pick
# another environment than the project's: not possible offline, in the sandbox
UV_VALUE_OPTIONS = {"--extra", "--group", "--only-group", "--no-group", "--package",
                    "--env-file", "--index", "--default-index", "--index-url",
                    "--extra-index-url", "--find-links", "-f", "--config-file", "--cache-dir",
                    "--color", "--directory", "--project"}
UV_REFUSED = ("--with", "--with-editable", "--with-requirements", "--isolated", "--script",
              "--python", "-p", "--no-project", "--gui-script")


def resolve_command(command: str, origin: Path, folder: Path | None = None,
                    where: str = "", key: str = "run") -> str:
    """`command` with the interpreter at its head resolved (see the module's docstring).
    `origin`: the user's task folder (where an ignored `.venv` is); `folder`: the copy the
    task was loaded from (a worktree), default `origin`. One-line TaskError when the
    interpreter it names is not there."""
    origin, folder = Path(origin), Path(folder or origin)
    tokens = list(re.finditer(r"\S+", command))
    i = 0
    while i < len(tokens) and ASSIGNMENT.fullmatch(tokens[i].group()):
        i += 1                                  # `CUDA_VISIBLE_DEVICES=0 uv run ...`
    if i == len(tokens) or any(q in tokens[i].group() for q in "'\"\\"):
        return command                          # nothing to resolve, or quoted: as written
    head = command[:tokens[i].start()]
    said = f"{where}: {key}" if where else key
    if tokens[i].group() == "uv" and i + 1 < len(tokens) and tokens[i + 1].group() == "run":
        words, end = _uv_run(tokens[i + 2:], origin, said, command.strip())
        return head + " ".join(shlex.quote(w) for w in words) + command[end:]
    program = tokens[i].group()
    path = _local(program, origin, folder, said)
    if path is None:
        return command
    return head + shlex.quote(str(path)) + command[tokens[i].end():]


def _uv_run(tokens, origin: Path, said: str, command: str) -> tuple[list[str], int]:
    """`uv run [options] WHAT ...` -> (the words it stands for, where the rest begins)."""
    start = origin
    j = 0
    while j < len(tokens) and tokens[j].group().startswith("-"):
        option = tokens[j].group()
        name = option.split("=", 1)[0]
        if name in UV_REFUSED or name.startswith("--with"):
            if "=" not in option and name not in ("--isolated", "--script", "--no-project",
                                                  "--gui-script") and j + 1 < len(tokens):
                option += " " + tokens[j + 1].group()
            raise TaskError(f"{said}: `uv run {option}` builds or picks another environment "
                            f"than the project's, which a run cannot do (no network in the "
                            f"sandbox); use the project's environment (`uv run python ...` "
                            f"after `uv sync`) or name an interpreter's path")
        if name in ("-m", "--module"):
            break
        value = option.split("=", 1)[1] if "=" in option else None
        if name in UV_VALUE_OPTIONS and value is None:
            j += 1
            value = tokens[j].group() if j < len(tokens) else ""
        if name in ("--directory", "--project") and value:
            start = Path(os.path.expanduser(value))
            start = start if start.is_absolute() else origin / start
        j += 1
    if j == len(tokens):
        raise TaskError(f"{said}: `{command}` names no program to run")
    project, venv = uv_environment(start)
    what = tokens[j].group()
    exe = venv / "bin" / "python"
    if not exe.exists():
        raise TaskError(f"{said}: '{command}' needs the project's environment: run `uv sync` "
                        f"in {project} first ({exe} not found; runs use it as it is, offline)")
    if what in PYTHONS:
        return [str(exe.absolute())], tokens[j].end()
    if what in ("-m", "--module") or what.endswith(".py"):
        return [str(exe.absolute()), what if what != "--module" else "-m"], tokens[j].end()
    tool = venv / "bin" / what
    if not tool.exists():
        raise TaskError(f"{said}: `uv run {what}`: {what} is not installed in the project's "
                        f"environment {venv} (add it to pyproject.toml, then `uv sync` in "
                        f"{project})")
    return [str(tool.absolute())], tokens[j].end()


def uv_environment(start: Path) -> tuple[Path, Path]:
    """(project, environment) as `uv run` would find them from `start`: the nearest folder
    with a pyproject.toml whose environment exists (a workspace's is at its root), its
    `.venv` or $UV_PROJECT_ENVIRONMENT (relative to the project)."""
    start = Path(start).absolute()
    projects = [d for d in (start, *start.parents) if (d / "pyproject.toml").is_file()]
    projects = projects or [start]
    override = os.environ.get("UV_PROJECT_ENVIRONMENT")

    def venv_of(project: Path) -> Path:
        venv = Path(os.path.expanduser(override)) if override else Path(".venv")
        return venv if venv.is_absolute() else project / venv
    for project in projects:
        if (venv_of(project) / "bin" / "python").exists():
            return project, venv_of(project)
    return projects[0], venv_of(projects[0])


def _local(program: str, origin: Path, folder: Path, said: str) -> Path | None:
    """The absolute interpreter a path names, or None to leave the word as written."""
    if program.startswith("~"):
        return Path(os.path.expanduser(program))
    if "/" not in program or Path(program).is_absolute():
        return None                             # `python`, a program on PATH, an absolute path
    mine = Path(os.path.normpath((origin / program).absolute()))   # `../env/bin/python`
    if mine.exists() and (environment(mine) or not (folder / program).exists()):
        return mine          # an environment's program, or a file the worktree does not have
    if not mine.exists() and not (folder / program).exists() and _looks_like_python(program):
        raise TaskError(f"{said}: {program} not found in {origin} (create the environment "
                        f"first: `uv sync`, or `python -m venv .venv`)")
    return None


def _looks_like_python(program: str) -> bool:
    return Path(program).parent.name == "bin" and Path(program).name.startswith("python")


def argv(python: str, origin: Path, where: str = "init") -> list[str]:
    """The interpreter words a run of `python` gets, as an argv prefix for a subprocess of
    the engine (init's probe): resolved as above, plain `python` being the engine's."""
    words = shlex.split(resolve_command(python, origin, origin, where, "python"))
    if words and words[0] in PYTHONS:
        words[0] = sys.executable
    return words


# -- what a resolved interpreter needs, and what it sets --------------------------------------
def of_command(command: str) -> Path | None:
    """The absolute interpreter (or program) at a resolved command's head, or None (plain
    `python`, a program on PATH, a relative script)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    words = [w for w in words if not ASSIGNMENT.fullmatch(w)][:1]
    return Path(words[0]) if words and words[0].startswith("/") and Path(words[0]).exists() \
        else None


def environment(exe: Path) -> Path | None:
    """The venv or conda environment holding `exe` (`<env>/bin/<exe>`), or None."""
    if exe.parent.name != "bin":
        return None
    env = exe.parent.parent
    return env if (env / "pyvenv.cfg").is_file() or (env / "conda-meta").is_dir() else None


def roots(exe: Path | None) -> list[str]:
    """What must be visible for `exe` to run: its environment folder, the install each of
    its symlinks leads to (a uv-managed or pyenv Python under HOME), the base a venv names
    in pyvenv.cfg, and the user's site-packages when the venv reads the system's. Never
    HOME itself or a folder above it."""
    if exe is None:
        return []
    env = environment(exe)
    found = [env or _install(exe), *(_install(hop) for hop in _hops(exe))]
    config = _pyvenv(env) if env else {}
    if config.get("home"):
        base = Path(config["home"]) / "python3"
        found += [_install(base), *(_install(hop) for hop in _hops(base))]
    version = re.match(r"(\d+\.\d+)", config.get("version_info") or config.get("version", ""))
    if config.get("include-system-site-packages", "").lower() == "true" and version:
        found.append(Path(os.path.expanduser(
            f"~/.local/lib/python{version.group(1)}/site-packages")))
    out: list[str] = []
    for root in found:
        if root.exists() and not _too_wide(root) and str(root) not in out:
            out.append(str(root))
    return out


def _install(program: Path) -> Path:
    """The folder an installed program belongs to: `<prefix>` for `<prefix>/bin/<name>`
    (its lib/ and site-packages), else its own folder; never one that would show HOME."""
    prefix = program.parent.parent if program.parent.name == "bin" else program.parent
    return program.parent if _too_wide(prefix) else prefix


def _too_wide(folder: Path) -> bool:
    """Whether showing `folder` would show all of HOME (it is HOME, a folder above, or /)."""
    home = os.path.realpath(os.path.expanduser("~"))
    real = os.path.realpath(folder)
    return real == home or real == "/" or home.startswith(real.rstrip("/") + "/")


def activation(exe: Path | None) -> dict[str, str]:
    """The variables a run of `exe` gets, as an activated environment would set them:
    VIRTUAL_ENV (a venv) or CONDA_PREFIX (a conda env), and its bin folder first on PATH
    (`PATH_PREFIX`); nothing for an interpreter outside an environment."""
    env = environment(exe) if exe is not None else None
    if env is None:
        return {}
    name = "VIRTUAL_ENV" if (env / "pyvenv.cfg").is_file() else "CONDA_PREFIX"
    return {name: str(env), "PATH_PREFIX": str(env / "bin")}


def _hops(path: Path) -> list[Path]:
    """Every file a chain of symlinks passes through, from `path` to its real file."""
    hops: list[Path] = []
    seen: set[str] = set()
    while path.is_symlink() and str(path) not in seen and len(hops) < 40:
        seen.add(str(path))
        path = Path(os.path.normpath(path.parent / os.readlink(path)))
        hops.append(path)
    real = Path(os.path.realpath(path))
    return hops + ([real] if real not in hops and real.exists() else [])


def _pyvenv(env: Path) -> dict[str, str]:
    """A venv's pyvenv.cfg as key -> value."""
    try:
        lines = (env / "pyvenv.cfg").read_text(errors="replace").splitlines()
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in lines)
            if k.strip()}
