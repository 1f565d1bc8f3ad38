"""The source lines that set a module-level constant to a number: `LEARNING_RATE = 3e-3`,
`TOTAL_BATCH_SIZE = 2**19`. The edit format that sets constants (jsonreply.py) writes them,
the search space (loop/setup/search_space.py) and init read them: one spelling for all.
Patterns only; no I/O, no loop imports."""
from __future__ import annotations

import re

# An UPPER_CASE module-level constant assigned a plain number, e.g. `LEARNING_RATE = 3e-3  # ..`
CONSTANT = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)(?P<eq>\s*(?::\s*\w+\s*)?=\s*)"
                      r"(?P<value>[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))"
                      r"(?P<rest>\s*(?:#.*)?)$", re.M)
# `TOTAL_BATCH_SIZE = 2**19  # ...`: a constant written as a power of two
POWER = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)(?P<eq>\s*(?::\s*\w+\s*)?=\s*)"
                   r"(?P<value>2\s*\*\*\s*\d+)(?P<rest>\s*(?:#.*)?)$", re.M)
