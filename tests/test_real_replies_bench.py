"""benchmarks/real_replies.py on a small checkout laid out like aider's (text written by us):
it pairs each reply with aider's verdict, counts outcomes, and fails on a wrong one."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import real_replies  # noqa: E402

RULE = "@" * 20
HISTORY = """
#### lower the learning rate

Sure.

train.py
```python
<<<<<<< SEARCH
LR = 3e-4
=======
LR = 1e-4
>>>>>>> REPLACE
```

#### and the steps

train.py
```python
<<<<<<< SEARCH
STEPS = 100
=======
STEPS = 2
"""
GOLD = f"""

@@@ #### lower the learning rate {RULE}
@@@ SEARCH: train.py {RULE}
LR = 3e-4
{RULE}
LR = 1e-4
@@@ REPLACE {RULE}


@@@ #### and the steps {RULE}
train.py
```python
<<<<<<< SEARCH
^^^ Expected `>>>>>>> REPLACE` or `=======`
"""


def checkout(tmp_path, gold=GOLD) -> Path:
    fixtures = tmp_path / "tests" / "fixtures"
    fixtures.mkdir(parents=True)
    (fixtures / "chat-history.md").write_text(HISTORY)
    (fixtures / "chat-history-search-replace-gold.txt").write_text(gold)
    return tmp_path


def test_counts_agreement_with_aiders_reading(tmp_path, capsys):
    assert real_replies.main([str(checkout(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "| applied correctly | 1 |" in out and "| refused | 1 |" in out
    assert "| wrong | 0 |" in out


def test_a_different_reading_is_counted_wrong_and_fails(tmp_path, capsys):
    path = checkout(tmp_path, GOLD.replace("LR = 1e-4\n@@@", "LR = 5e-4\n@@@"))
    assert real_replies.main([str(path)]) == 1
    assert "| wrong | 1 |" in capsys.readouterr().out


def test_missing_checkout_is_a_usage_error(tmp_path, capsys):
    assert real_replies.main([str(tmp_path / "nowhere")]) == 2
    assert "usage:" in capsys.readouterr().err
