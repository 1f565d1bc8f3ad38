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


def sr_reply(header: str, blocks: list[tuple[str, str]]) -> str:
    return f"\n{header}\n\n" + "".join(
        f"train.py\n```python\n<<<<<<< SEARCH\n{s}=======\n{r}>>>>>>> REPLACE\n```\n\n"
        for s, r in blocks)


def sr_gold(header: str, blocks: list[tuple[str, str]]) -> str:
    return f"\n\n@@@ {header} {RULE}\n" + "".join(
        f"@@@ SEARCH: train.py {RULE}\n{s}{RULE}\n{r}@@@ REPLACE {RULE}\n" for s, r in blocks)


def test_a_no_op_block_is_applied_beside_real_ones_and_refused_alone(tmp_path, capsys):
    """Issue 37 item 8 in the benchmark: replies holding a block that changes nothing are
    applied too; beside a real block it is passed over, alone it is refused at apply."""
    beside = [("LR = 3e-4\n", "LR = 1e-4\n"), ("STEPS = 100\n", "STEPS = 100\n")]
    alone = [("STEPS = 100\n", "STEPS = 100\n")]
    root = tmp_path / "aider"
    fixtures = root / "tests" / "fixtures"
    fixtures.mkdir(parents=True)
    (fixtures / "chat-history.md").write_text(
        sr_reply("#### lower it", beside) + sr_reply("#### keep it", alone))
    (fixtures / "chat-history-search-replace-gold.txt").write_text(
        sr_gold("#### lower it", beside) + sr_gold("#### keep it", alone))
    assert real_replies.main([str(root)]) == 0
    out = capsys.readouterr().out
    assert "| applied correctly | 1 |" in out and "| refused at apply | 1 |" in out, out
    assert "'keep it': block 1 " in out and "changes nothing" in out, out
