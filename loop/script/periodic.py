"""What `init` reads of a script to choose its time box (loop/setup/time_box.py): whether it
prints its metric inside its training loop (then `on_timeout: last` can score a run killed at
the box). Reads the parsed tree only; runs nothing."""
from __future__ import annotations

import ast

from loop.script.source import Script


def prints_in_loop(src: Script, printed) -> bool:
    """Whether a print of the metric (`printed(node)` is true for it) runs inside a `for` or
    `while` body: directly, or in a function the script calls inside one (an `evaluate()`
    called every N steps). So the script prints its metric periodically, not once at the
    end."""
    parents, tree = src.parents, src.tree

    def enclosing(node) -> tuple[bool, str]:
        """(inside a loop, else the name of the function it is in, or "")."""
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
                return True, ""
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return False, node.name
        return False, ""

    looped_calls = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name) and enclosing(node)[0]}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and printed(node):
            inside, function = enclosing(node)
            if inside or function in looped_calls:
                return True
    return False
