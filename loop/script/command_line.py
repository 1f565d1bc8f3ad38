"""The settings a script reads from its command line, read with `ast` (nothing is run):
argparse's `add_argument("--lr", type=float, default=3e-4)` (and `set_defaults`), click's
`@click.option("--lr", default=3e-4)`, the keyword defaults of the function `fire.Fire`
is given, those of a typer command (`--batch-size`), and the attributes a config-building
function sets on the config the script then overrides from its command line (minGPT's
`C.trainer.learning_rate = 5e-4` in `get_config()`, then `config.merge_from_args(sys.argv[1:])`:
`--trainer.learning_rate=5e-4`). Used by `autoresearch init` to write the flags file
(loop/setup/flags.py)."""
from __future__ import annotations

import ast
from dataclasses import dataclass

from loop.script.source import Script
from loop.script.settings import first_of_each


@dataclass(frozen=True)
class Flag:
    name: str                   # as the command line spells it, without dashes: lr, batch-size
    dest: str                   # the variable it fills (batch_size)
    default: object             # a number, a bool, a string, or None
    type: str = ""              # int | float | bool | str | "" (not said)
    choices: tuple = ()
    how: str = "argparse"       # argparse | click | fire | typer | config (a config tree)
    constant: str = ""          # the module-level constant its default names (`default=LR`)

    @property
    def numeric(self) -> bool:
        return isinstance(self.default, (int, float)) and not isinstance(self.default, bool) \
            and self.type not in ("bool", "str")


def flags(src: Script) -> list[Flag]:
    """Every flag the script declares, in source order, each name once."""
    consts = src.literals()
    return first_of_each([*_argparse(src, consts), *_fire(src, consts), *_typer(src, consts),
                          *_config_tree(src, consts)])


def _value(node: ast.expr | None, consts: dict) -> object:
    if node is None:
        return None
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        try:
            value = _arith(node, consts)
        except (ValueError, ZeroDivisionError, OverflowError, TypeError):
            return None
    return value if isinstance(value, (int, float, str, bool)) else None


def _arith(node: ast.expr, consts: dict) -> float | int:
    """`2**10`, `3e-4 * 2`, `-1`: small arithmetic over literals and module constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name) and isinstance(consts.get(node.id), (int, float)):
        return consts[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_arith(node.operand, consts)
    if isinstance(node, ast.BinOp):
        a, b = _arith(node.left, consts), _arith(node.right, consts)
        if isinstance(node.op, ast.Pow) and abs(b) <= 64 and abs(a) <= 2 ** 16:
            return a ** b
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.Div: lambda: a / b, ast.FloorDiv: lambda: a // b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
    raise ValueError("not arithmetic")


def _type(node: ast.expr | None) -> str:
    name = node.id if isinstance(node, ast.Name) else node.attr \
        if isinstance(node, ast.Attribute) else ""
    return {"int": "int", "float": "float", "str": "str", "bool": "bool", "INT": "int",
            "FLOAT": "float", "STRING": "str", "BOOL": "bool"}.get(name, "")


def _argparse(src: Script, consts: dict) -> list[Flag]:
    """add_argument / click.option calls with a `--long` option string."""
    out: list[Flag] = []
    defaults: dict[str, object] = {}
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if node.func.attr == "set_defaults":
            defaults.update({k: _value(v, consts) for k, v in kw.items()})
            continue
        if node.func.attr not in ("add_argument", "option"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant)
                 and isinstance(a.value, str)]
        long = [n for n in names if n.startswith("--")]
        if not long:
            continue
        how = "click" if node.func.attr == "option" else "argparse"
        name = long[0][2:]
        dest = _value(kw.get("dest"), consts)
        dest = dest if isinstance(dest, str) else name.replace("-", "_")
        action = _value(kw.get("action"), consts)
        default = _value(kw.get("default"), consts)
        kind = _type(kw.get("type"))
        if action in ("store_true", "store_false") or kw.get("is_flag") is not None:
            kind, default = "bool", (action == "store_false") if default is None else default
        choices = kw.get("choices")
        values = tuple(v for v in (_value(e, consts) for e in getattr(choices, "elts", []))
                       if isinstance(v, (int, float)) and not isinstance(v, bool))
        if kind in ("int", "float") and isinstance(default, str):
            try:
                default = int(default) if kind == "int" else float(default)
            except ValueError:
                default = None
        named = kw.get("default")
        constant = named.id if isinstance(named, ast.Name) else ""
        out.append(Flag(name, dest, default, kind, values, how, constant))
    return [Flag(f.name, f.dest, defaults.get(f.dest, f.default), f.type, f.choices, f.how,
                 f.constant) if f.dest in defaults else f for f in out]


def _fire(src: Script, consts: dict) -> list[Flag]:
    """`fire.Fire(main)`: main's keyword defaults are its flags (`--lr=0.1`)."""
    called = set()
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call) and (getattr(node.func, "attr", "") == "Fire" or
                                           getattr(node.func, "id", "") == "Fire"):
            called |= {a.id for a in node.args if isinstance(a, ast.Name)}
    out: list[Flag] = []
    for node in src.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in called:
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for arg, default in pairs:
                kind = _type(arg.annotation)
                constant = default.id if isinstance(default, ast.Name) else ""
                out.append(Flag(arg.arg, arg.arg, _value(default, consts), kind, (), "fire",
                                constant))
    return out


def typer_commands(src: Script) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(the name it is called by, the function) for each command of a `typer.Typer()` app
    (`@app.command()`, named as typer names it: `train_cli` is `train-cli`) and the
    function `typer.run(main)` is given (name "")."""
    apps = {t.id for node in ast.walk(src.tree) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) in (
                "typer.Typer", "Typer") for t in node.targets if isinstance(t, ast.Name)}
    run = {a.id for node in ast.walk(src.tree) if isinstance(node, ast.Call)
           and ast.unparse(node.func) in ("typer.run",) for a in node.args[:1]
           if isinstance(a, ast.Name)}
    out = []
    for node in src.tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name in run:
            out.append(("", node))
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) \
                    and d.func.attr == "command" and isinstance(d.func.value, ast.Name) \
                    and d.func.value.id in apps:
                named = [a.value for a in d.args[:1] if isinstance(a, ast.Constant)
                         and isinstance(a.value, str)]
                out.append((named[0] if named else node.name.replace("_", "-"), node))
    return out


def typer_command(src: Script) -> tuple[str, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The command a run calls: the only one, else the first named like training."""
    commands = typer_commands(src)
    if len(commands) <= 1:
        return commands[0] if commands else None
    return next((c for c in commands if "train" in c[1].name.lower()), None)


def _typer(src: Script, consts: dict) -> list[Flag]:
    """A typer command's keyword defaults are its options, spelled with dashes
    (`batch_size: int = 4` is `--batch-size`)."""
    command = typer_command(src)
    if command is None:
        return []
    args = command[1].args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return [Flag(arg.arg.replace("_", "-"), arg.arg, _value(default, consts),
                 _type(arg.annotation), (), "typer",
                 default.id if isinstance(default, ast.Name) else "")
            for arg, default in pairs]


ARGV_READERS = {"parse_args", "parse_known_args", "Fire", "run", "main"}


def _argv(node: ast.AST) -> bool:
    """`sys.argv` or a slice of it."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr == "argv" \
        and isinstance(node.value, ast.Name) and node.value.id == "sys"


def _config_tree(src: Script, consts: dict) -> list[Flag]:
    """`config = get_config()` then `config.merge_from_args(sys.argv[1:])` (a method of the
    config given the command line, not a parser's): the numbers get_config sets on the
    config it returns, by their attribute path (`C.trainer.learning_rate = 5e-4` is
    `--trainer.learning_rate=5e-4`), are its flags."""
    builders = {f.name: f for f in src.tree.body if isinstance(f, ast.FunctionDef)}
    made: dict[str, str] = {}                  # config variable -> the function it comes from
    merged: set[str] = set()
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id in builders:
            made.update({t.id: node.value.func.id for t in node.targets
                         if isinstance(t, ast.Name)})
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) \
                and node.func.attr not in ARGV_READERS and any(_argv(a) for a in node.args):
            merged.add(node.func.value.id)
    out: list[Flag] = []
    for var in merged:
        builder = builders.get(made.get(var, ""))
        if builder is None:
            continue
        returned = {r.value.id for r in ast.walk(builder) if isinstance(r, ast.Return)
                    and isinstance(r.value, ast.Name)}
        for node in builder.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Attribute)):
                continue
            parts: list[str] = []
            target: ast.expr = node.targets[0]
            while isinstance(target, ast.Attribute):
                parts.append(target.attr)
                target = target.value
            if not (isinstance(target, ast.Name) and target.id in returned):
                continue
            value = _value(node.value, consts)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                path = ".".join(reversed(parts))
                out.append(Flag(path, path, value, "", (), "config"))
    return out
