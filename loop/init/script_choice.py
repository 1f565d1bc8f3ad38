"""Which script `autoresearch init` reads, and what of the repo a run of it executes. The
script: `--script FILE`, else train.py, main.py or run.py when one reports numbers, else the
only one that does; at a folder where no script reports numbers, the folders its README
points at (`examples/`: a link, a path, `python examples/mnist/main.py`) are looked in, and
init says where it looked. What a run executes: the script, the local modules it imports,
and of each module what importing and calling it runs (never its `if __name__ ==
"__main__":`). Read with `ast`; nothing is run."""
from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from loop.init.plan import Guess, InitError, Plan
from loop.init.shapes.base import Candidate
from loop.script.source import Script

SCRIPT_NAMES = ("train.py", "main.py", "run.py")
SCRIPT_FLAG = "--script FILE"
READMES = ("README.md", "README.rst", "README.txt", "README")
# a folder looked in when the README points nowhere
EXAMPLE_FOLDERS = ("examples", "example")
# not a training script: packaging, tests, docs builds
NOT_SCRIPTS = re.compile(r"^(setup|conftest|conf|__init__|__main__|test_.*|.*_test)\.py$")
MAX_FILES = 400
MAX_DEPTH = 3


@dataclass
class Choice:
    """The script chosen: its folder (the task folder), its file there, and how."""
    folder: Path
    script: str
    guess: Guess
    looked: str = ""             # where init looked beyond the folder, in words ("": nowhere)


# -- the script ----------------------------------------------------------------------------------
def parse(root: Path, rel: str) -> Script:
    try:
        return Script(rel, (root / rel).read_text(errors="replace"))
    except SyntaxError as exc:
        raise InitError(f"init: {rel} does not parse: {exc.msg} (line {exc.lineno})") from None


def module_path(root: Path, mod: str) -> str | None:
    """The file of the repo a module name resolves to: `prepare.py`, or a package's
    `MEGABYTE_pytorch/__init__.py`; None for a module from elsewhere."""
    base = mod.replace(".", "/")
    return next((rel for rel in (f"{base}.py", f"{base}/__init__.py")
                 if (root / rel).is_file()), None)


def module_name(rel: str) -> str:
    """`pkg/sub.py` -> `pkg.sub`, `pkg/__init__.py` -> `pkg`."""
    return rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def imports(src: Script) -> list[tuple[str, list[str]]]:
    """(module, the names taken from it) for each import of a file, a relative one resolved
    against the file's own package (`from .megabyte import MEGABYTE` in
    `MEGABYTE_pytorch/__init__.py` is `MEGABYTE_pytorch.megabyte`); `import a.b` takes
    nothing by name."""
    package = module_name(src.path).split(".")
    if not src.path.endswith("/__init__.py"):
        package = package[:-1]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod:
                out.append((mod, [a.name for a in node.names]))
    return out


def local_modules(root: Path, src: Script) -> dict[str, Script]:
    """{module: its code} for every module of the repo the script imports (a module file,
    a package's `__init__.py`, a submodule it names: `from pkg import sub`), and those they
    import in turn, relative imports too."""
    out: dict[str, Script] = {}
    todo = [src]
    while todo:
        for mod, names in sorted(imports(todo.pop())):
            for name in [mod, *(f"{mod}.{n}" for n in names if n != "*")]:
                rel = module_path(root, name)
                if name in out or rel is None or rel == src.path:
                    continue
                out[name] = parse(root, rel)
                todo.append(out[name])
            for k in range(1, mod.count(".") + 1):     # `import a.b` runs a/__init__.py too
                parent = mod.rsplit(".", k)[0]
                rel = module_path(root, parent)
                if parent not in out and rel is not None and rel.endswith("__init__.py"):
                    out[parent] = parse(root, rel)
                    todo.append(out[parent])
    return out


def executed(modules: dict[str, Script], src: Script) -> dict[str, Script]:
    """Each module as a run of `src` executes it (`as_imported`)."""
    importers = [src, *modules.values()]
    return {mod: as_imported(code, importers) for mod, code in modules.items()}


def _main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`, which importing the module never runs."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
        "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)


def as_imported(module: Script, importers: list[Script]) -> Script:
    """What of `module` a run executes when the script and its modules (`importers`) import
    it: its module level without its `if __name__ == "__main__":` blocks, and of its
    functions and classes those an importer names (`from prepare import load`,
    `prepare.load`) or that code kept here names, in turn. A parser built in a function
    only its own __main__ calls is the module's own command line, not the run's; a line
    only its __main__ prints is not the run's output."""
    def names(node: ast.AST) -> set[str]:
        return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
                if isinstance(n, (ast.Name, ast.Attribute))}

    body = [n for n in module.tree.body if not _main_guard(n)]
    defs = {n.name: n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.ClassDef))}
    mod = module_name(module.path)
    wanted = {name for src in importers if src is not module for name in _names_taken(src, mod)}
    wanted |= {name for n in body if n not in defs.values() for name in names(n)}
    kept: set[str] = set()
    todo = list(defs) if "*" in wanted else [name for name in wanted if name in defs]
    while todo:
        name = todo.pop()
        if name not in kept:
            kept.add(name)
            todo += [n for n in names(defs[name]) if n in defs and n not in kept]
    body = [n for n in body if n not in defs.values() or getattr(n, "name", "") in kept]
    return Script(module.path, ast.unparse(ast.Module(body=body, type_ignores=[])))


def _names_taken(script: Script, mod: str) -> set[str]:
    """The names `script` takes from module `mod`: `from mod import a` (`*`: all of them;
    relative imports resolved) and `mod.a` after `import mod [as m]`."""
    out: set[str] = set()
    for name, names in imports(script):
        if name == mod:
            out |= set(names)
    aliases = set()
    for node in ast.walk(script.tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == mod}
    out |= {n.attr for n in ast.walk(script.tree) if isinstance(n, ast.Attribute)
            and ast.unparse(n.value) in aliases}
    return out


def _reports(root: Path, path: Path) -> bool:
    """Does running this file print a number: itself, what it runs of a local module, or
    Lightning's progress bar for a LightningModule of the repo it trains?"""
    from loop.init.shapes.base import Scan
    from loop.init.shapes.script import lightning_bar
    try:
        src = Script(path.name, path.read_text(errors="replace"))
        ran = executed(local_modules(root, src), src)
        return bool(src.reported()) or any(m.reported() for m in ran.values()) \
            or bool(lightning_bar(Scan(root, src, ran)))
    except (SyntaxError, InitError, ValueError, RecursionError):
        return False


def _entries(root: Path) -> tuple[list[str], dict[str, str]]:
    """The .py files of a folder no other file there imports, and {imported file: its
    importer}."""
    files = sorted(root.glob("*.py"))
    importers: dict[str, str] = {}
    for path in files:
        try:
            for mod in Script(path.name, path.read_text(errors="replace")).imported_modules():
                importers.setdefault(f"{mod.replace('.', '/')}.py", path.name)
        except (SyntaxError, ValueError, RecursionError):
            continue
    return [p.name for p in files if p.name not in importers], importers


def pick_script(root: Path, script: str | None, metric_pattern: str | None = None) -> Choice:
    """The script the user runs: never a module another script imports (that one stays
    protected); train.py, main.py or run.py first (one that reports numbers, or any with
    --metric-pattern, which reads a line of a form the scan does not know), else the only
    one that reports numbers; where none does, the one script that does in the folders the
    README points at (its folder becomes the task folder)."""
    entries, importers = _entries(root)
    if script:
        if len(script.split()) > 1:
            raise InitError(f"init: --script {script!r}: one file; pass the script's arguments "
                            f"with --args (e.g. --script {script.split()[0]} --args "
                            f"{shlex.quote(' '.join(script.split()[1:]))})")
        if not (root / script).is_file():
            raise InitError(f"init: --script {script}: no such file in {root}")
        if script in importers:
            raise InitError(f"init: --script {script}: {importers[script]} imports it, and a "
                            f"module the script you run imports stays protected; pass "
                            f"--script {importers[script]}")
        return Choice(root, script, Guess("--script", True, SCRIPT_FLAG))
    printing = [name for name in entries if _reports(root, root / name)]
    for name in SCRIPT_NAMES:
        if name in printing:
            return Choice(root, name, Guess(f"a {name} that reports numbers", True, SCRIPT_FLAG))
        if metric_pattern and name in entries:
            return Choice(root, name, Guess(f"a {name}, its output read with --metric-pattern",
                                            True, SCRIPT_FLAG))
    if len(printing) == 1:
        return Choice(root, printing[0], Guess("the only script that reports numbers", False,
                                               SCRIPT_FLAG))
    if printing:
        raise InitError(f"init: several scripts print values ({', '.join(printing)}): pass "
                        f"--script FILE")
    return _in_pointed_folders(root)


# -- the folders a README points at --------------------------------------------------------------
# a markdown link's target, an rst link's, or a path-like word (`examples/`, `./run.py`)
LINK = re.compile(r"\]\(\s*<?([^)\s>#?]+)|`[^`<]*<([^>\s]+)>`_|(?:^|[\s(`'\"=])((?:\./)?[\w.-]+"
                  r"(?:/[\w.-]+)*/?)(?=$|[\s)`'\",:;])", re.M)


def pointed_folders(root: Path) -> tuple[list[Path], str]:
    """The folders inside `root` its README points at (a link or a path to a folder, or to a
    .py file: its folder), in the README's order, and where they came from in words; else
    the example folders `root` has."""
    readme = next((root / n for n in READMES if (root / n).is_file()), None)
    found: list[Path] = []
    if readme is not None:
        for m in LINK.finditer(readme.read_text(errors="replace")):
            word = next(g for g in m.groups() if g)
            # the repo's own page on GitHub: `https://github.com/o/r/tree/master/examples`
            own = re.match(r"https?://github\.com/[^/]+/[^/]+/(?:tree|blob)/[^/]+/(.+)", word)
            word = own[1] if own else word
            bare = m[3] is not None and not own     # a word of prose, not a link
            if "://" in word or word.startswith(("/", "..", "#")) or \
                    (bare and "/" not in word and not word.endswith(".py")):
                continue
            path = (root / word.removeprefix("./")).resolve()
            if root.resolve() not in path.parents or any(
                    p.startswith(".") for p in path.relative_to(root.resolve()).parts):
                continue
            folder = path.parent if path.is_file() and path.suffix == ".py" else path
            if folder.is_dir() and folder != root.resolve() and folder not in found:
                found.append(folder)
    if found:
        return found, f"the folders {readme.name if readme else 'the README'} points at"
    found = [root / n for n in EXAMPLE_FOLDERS if (root / n).is_dir()]
    return found, ("its example folder (no README path points at a folder)" if found else
                   "none (its README points at no folder, and it has no examples/)")


def _in_pointed_folders(root: Path) -> Choice:
    folders, how = pointed_folders(root)
    shown = ", ".join(f"{f.relative_to(root.resolve()).as_posix()}/" for f in folders[:6]) + (
        f" (+{len(folders) - 6} more)" if len(folders) > 6 else "")
    looked = f"{shown} ({how})" if folders else how
    found: list[Path] = []
    seen = 0
    for folder in folders:
        for sub in sorted({folder, *(p.parent for p in folder.rglob("*.py")
                                     if len(p.relative_to(folder).parts) <= MAX_DEPTH)}):
            if any(part.startswith((".", "_")) or part in ("tests", "test", "docs")
                   for part in sub.relative_to(folder).parts):
                continue
            entries, _ = _entries(sub)
            for name in entries:
                seen += 1
                if seen > MAX_FILES:
                    break
                if not NOT_SCRIPTS.match(name) and sub / name not in found \
                        and _reports(sub, sub / name):
                    found.append(sub / name)
    base = root.resolve()
    rels = [p.relative_to(base).as_posix() for p in found]
    if len(found) == 1:
        return Choice(found[0].parent, found[0].name,
                      Guess(f"no script at {root.name}/ reports numbers; looked in {looked}: "
                            f"the only one that does", False,
                            "autoresearch init FOLDER --script FILE"),
                      looked=looked)
    if found:
        first = found[0]
        raise InitError(f"init: no script at {root.name}/ reports numbers; looked in {looked}: "
                        f"{len(found)} do ({', '.join(rels[:5])}"
                        f"{', ...' if len(rels) > 5 else ''}): pick one, e.g. `autoresearch "
                        f"init {first.parent.relative_to(base).as_posix()} --script "
                        f"{first.name}`")
    raise InitError(f"init: no metric found: no Python script in {root} (or a module it "
                    f"imports) prints a number after a name (e.g. print(f\"val_loss: "
                    f"{{loss:.4f}}\")); looked in {looked} too; pass --script FILE --metric "
                    f"NAME --metric-pattern REGEX for a line of another form")


# -- a package of the repo: the model ------------------------------------------------------------
# a file whose name says it holds the data, the evaluation or the metric: it decides what is
# measured, so it stays protected inside an editable package
MEASURES = re.compile(r"(^|_)(data|dataset|datasets|dataloader|loader|datamodule|datamodules|"
                      r"eval|evaluate|evaluation|"
                      r"evaluator|metric|metrics|score|scoring|prepare|benchmark|bench|"
                      r"prompt|prompter|prompts|template|templates|tokenizer|tokenization|"
                      r"collate|collator|preprocess|preprocessing)(_|$)", re.I)
# a package named for helpers is no model: it stays protected (alpaca-lora's utils/prompter.py)
HELPERS = re.compile(r"^(utils?|helpers?|common|tools|misc|lib|scripts)$", re.I)
EVAL_NAME = re.compile(r"^(evaluate|eval_|compute_metric|metric|score|get_metric)", re.I)


def _names_inside(rel: str) -> list[str]:
    """The names a package's file is known by below the package: its folders and its stem
    (`src/datamodules/cifar10.py`: datamodules, cifar10)."""
    stem = Path(rel).stem
    return [*Path(rel).parts[1:-1], *([stem] if stem != "__init__" else [])]


def model_packages(plan: Plan, src: Script, modules: dict[str, Script],
                   chosen: Candidate) -> None:
    """A package of the repo the script imports (a folder with `__init__.py`, lucidrains'
    `MEGABYTE_pytorch/`: `from MEGABYTE_pytorch import MEGABYTE`) is the model the script
    builds: its files the run executes move from protected to editable, so the model itself
    can be changed. A file of it that has a hand in the measurement stays protected: one
    that prints the metric, the lm grader's evaluation, the budget constant, an evaluation
    function the script takes from it, or a name that says data / eval / metric. Plain
    modules beside the script (`prepare.py`) stay protected: the harness. Said in a note."""
    by_package: dict[str, list[str]] = {}
    for code in modules.values():
        top = code.path.split("/")[0]
        if "/" in code.path and (plan.root / top / "__init__.py").is_file() \
                and not HELPERS.match(top):
            by_package.setdefault(top, []).append(code.path)
    if not by_package:
        return
    graded = plan.grader.get("eval_function", "").rpartition(".")[0] if plan.grader else ""
    taken = {mod: names for mod, names in imports(src)}
    for package, files in sorted(by_package.items()):
        editable: list[tuple[str, str]] = []
        kept: list[tuple[str, str]] = []
        for rel in sorted(files):
            mod = module_name(rel)
            why = ("it prints " + plan.metric if chosen.file == rel else
                   "it holds the evaluation the grader runs" if graded == mod else
                   "it holds the budget" if plan.budget_constant.startswith(f"{rel}:") else
                   "the script takes its evaluation from it" if any(
                       EVAL_NAME.match(n) for n in taken.get(mod, [])) else
                   "its name says data, evaluation or metric" if any(
                       MEASURES.search(name) for name in _names_inside(rel)) else
                   "it is in a helpers folder" if any(
                       HELPERS.match(name) for name in Path(rel).parts[1:-1]) else "")
            (kept if why else editable).append((rel, why))
        if not editable:
            continue
        for rel, _ in editable:
            plan.protected.remove(rel)
            plan.editable.append(rel)
        plan.notes.append(
            f"{package}/ is a package of the repo that {plan.script} builds its model from: "
            f"editable, so a search can change the model ({', '.join(r for r, _ in editable)})"
            + ("; protected, as each has a hand in the measurement: "
               + "; ".join(f"{r} ({why})" for r, why in kept) if kept else "")
            + "; move a file between `editable` and `protected` in task.yaml to decide "
              "otherwise")
