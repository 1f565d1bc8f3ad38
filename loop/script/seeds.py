"""Which of a script's settings are seeds, and how a script fixes its own: a seed is fixed
on purpose and never a dimension to search; a script that fixes it and never reads
AUTORESEARCH_SEED measures one draw of its luck, however often it is run."""
from __future__ import annotations

import ast
import re

from loop.script.source import Script

# a setting named as a seed (a data split's too: `random_state`)
SEED_NAME = re.compile(r"(^|_)(seed|random_state|rng|random_seed)(_|$)|seed$", re.I)
# calls that fix a seed: torch.manual_seed(1337), np.random.seed(42), set_seed(0)
SEED_CALLS = {"manual_seed", "manual_seed_all", "seed", "set_seed", "seed_everything",
              "default_rng", "RandomState", "PRNGKey"}


def fixed_seeds(src: Script) -> list[str]:
    """The calls by which a script that never reads AUTORESEARCH_SEED fixes its own seed
    (`torch.manual_seed(1337)`, `train_test_split(..., random_state=42)`), as written."""
    if src.mentions("AUTORESEARCH_SEED"):
        return []
    out = []
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        fixes = (func in SEED_CALLS and node.args) or any(
            k.arg and SEED_NAME.search(k.arg) and isinstance(k.value, (ast.Constant, ast.Name,
                                                                       ast.BinOp))
            for k in node.keywords)
        if fixes:
            text = ast.unparse(node)
            out.append(text if len(text) <= 60 else text[:57] + "...")
    return list(dict.fromkeys(out))
