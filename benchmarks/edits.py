"""Edit-format benchmark: how often realistic LLM replies are applied correctly, how often
bad ones are refused, and that none is ever applied wrongly; plus the LLM prompt's size
over a long night (it must stay bounded).

    python benchmarks/edits.py

Prints markdown tables. Exits 1 if any reply was applied wrongly or the prompt grows."""
from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from edit_corpus import CASES, REJECT  # noqa: E402
from edit_standin import PREPARE, PROGRAM, TRAIN  # noqa: E402

from loop.setup.config import ProposerConfig  # noqa: E402
from loop.edits.edits import EditError, apply_reply  # noqa: E402
from loop.proposers import prompts  # noqa: E402
from loop.proposers.base import Attempt, Context  # noqa: E402
from loop.setup.task import load_task  # noqa: E402

TASK_YAML = """\
name: tinylm
description: train a tiny byte-level GPT for a fixed time; lower val_loss is better
editable: [train.py]
protected: [prepare.py]
run: python train.py
metric: {name: val_loss, direction: minimize}
time_budget_s: 60
"""


def make_task(folder: Path, train: str):
    (folder / "task.yaml").write_text(TASK_YAML)
    (folder / "train.py").write_text(train)
    (folder / "prepare.py").write_text(PREPARE)
    return load_task(folder)


def run_corpus(task) -> tuple[list[tuple], dict]:
    rows, totals = [], {"apply": 0, "applied_ok": 0, "reject": 0, "rejected_ok": 0,
                        "wrong": 0, "missed": 0, "accepted_bad": 0}
    for case in CASES:
        files = {"train.py": TRAIN}
        try:
            _, changed = apply_reply(files, case.reply, task)
            outcome, detail = "applied", ""
        except EditError as err:
            changed, outcome = None, "rejected"
            detail = err.failures[0].split("\n")[0][:90] if err.failures else err.message[:90]
        if case.expect == REJECT:
            totals["reject"] += 1
            ok = changed is None
            totals["rejected_ok" if ok else "accepted_bad"] += 1
            verdict = "ok (refused)" if ok else "WRONG: applied a reply that must be refused"
        else:
            totals["apply"] += 1
            if changed is None:
                ok, verdict = False, "missed (refused a good reply)"
                totals["missed"] += 1
            elif changed == {"train.py": case.expected_train()}:
                ok, verdict = True, "ok (applied)"
                totals["applied_ok"] += 1
            else:
                ok, verdict = False, "WRONG: applied with a different result"
                totals["wrong"] += 1
        rows.append((case.name, case.defect, "reject" if case.expect == REJECT else "apply",
                     outcome, verdict, detail))
    totals["wrong"] += totals.pop("accepted_bad")
    return rows, totals


# which registry format a corpus case is written in (loop/edits/formats.py); diffs are
# accepted whatever the format, and the other cases (thinking, prose) test the parser alone
FORMAT_OF = {"sr": "search_replace", "small": "search_replace", "whole": "whole_file"}


def json_cases() -> list:
    """The search_replace cases as the json format gets them: the server's schema makes the
    markup right (an object, a file from the list), so what is left is the content: the
    SEARCH and REPLACE text, indentation, elisions, a placeholder, a no-op. A reply that
    has no complete block (cut off) cannot be valid JSON under a schema: left out."""
    import json
    from edit_corpus import Case
    from loop.edits.edits import parse_reply
    cases = []
    for case in CASES:
        if FORMAT_OF.get(case.name.split("-")[0]) != "search_replace":
            continue
        parsed = parse_reply(case.reply)
        if parsed.problems or not parsed.edits:
            continue
        reply = json.dumps({"description": parsed.description or "", "edits": [
            {"file": e.path or "train.py", "search": e.search, "replace": e.replace}
            for e in parsed.edits]})
        cases.append(Case("json-" + case.name, case.defect, reply, case.expect))
    return cases


def per_format(task) -> list[tuple]:
    """First-try apply rate of each format's replies, read by that format's reader."""
    from loop.edits.edits import apply_edits
    from loop.edits.formats import FORMATS, read_reply
    groups: dict[str, list] = {name: [] for name in FORMATS}
    for case in CASES:
        name = FORMAT_OF.get(case.name.split("-")[0])
        if name:
            groups[name].append(case)
    groups["json"] = json_cases()
    rows = []
    for name, cases in groups.items():
        good = bad = applied = refused = wrong = 0
        for case in cases:
            files = {"train.py": TRAIN}
            try:
                changed = apply_edits(files, read_reply(FORMATS.get(name), case.reply, [], files),
                                      task)
            except EditError:
                changed = None
            if case.expect == REJECT:
                bad += 1
                refused += changed is None
                wrong += changed is not None
            else:
                good += 1
                applied += changed == {"train.py": case.expected_train()}
                wrong += changed is not None and changed != {"train.py": case.expected_train()}
        rows.append((name, f"{applied}/{good} ({100 * applied / max(good, 1):.0f}%)",
                     f"{refused}/{bad}", wrong))
    return rows


def synthetic_history(n: int, rng: random.Random) -> list[Attempt]:
    ideas = ["lower the peak learning rate", "raise the learning rate", "cosine to zero",
             "longer warmup", "shorter warmup", "wider model (N_EMBD 192)", "deeper model",
             "batch size 64", "batch size 16", "beta2 0.99", "weight decay 0.05",
             "remove dropout", "QK-norm", "rotary embeddings", "SwiGLU MLP", "squared ReLU",
             "untie embeddings", "gradient clip 0.5", "init std 0.01", "muon optimizer"]
    history, best = [Attempt(0, "baseline", "keep", 2.40, None)], 2.40
    for i in range(1, n):
        idea = rng.choice(ideas) + rng.choice(["", "", " (v2)", " with a tweak"])
        status = rng.choices(["discard", "keep", "crash", "timeout", "bad_edit"],
                             [70, 10, 12, 4, 4])[0]
        metric = None if status in ("crash", "timeout", "bad_edit") else \
            round(best + rng.uniform(0.0, 0.05), 4)      # a discard is no better
        if status == "keep":
            metric = round(best - rng.uniform(0.001, 0.02), 4)
        delta = None if metric is None else round(best - metric, 4)
        best = min(best, metric) if status == "keep" else best
        tail = ("Traceback (most recent call last):\n  File \"train.py\", line 120, in forward\n"
                + "    x = block(x)\n" * 20 + "RuntimeError: shape mismatch\n") \
            if status == "crash" else ""
        history.append(Attempt(i, idea, status, metric, delta,
                               reason="exit code 1" if status == "crash" else "", log_tail=tail))
    return history


def prompt_sizes(task, train: str, program: str) -> list[tuple]:
    cfg = ProposerConfig(kind="llm", model="m")
    rows, rng = [], random.Random(0)
    full = synthetic_history(500, rng)
    for iteration in (1, 100, 500):
        ctx = Context(iteration, task, {"train.py": train}, program, full[:iteration],
                      2.40, seed=0)
        system = prompts.system_prompt(ctx)
        user = prompts.user_prompt(ctx, cfg.journal_chars)
        journal = prompts.render_journal(ctx.history, cfg.journal_chars)
        chars = len(system) + len(user)
        rows.append((iteration, len(ctx.history), len(journal), chars, chars // 4))
    return rows


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        task = make_task(Path(tmp), TRAIN)
        rows, t = run_corpus(task)
        formats = per_format(task)
        real = HERE.parent / "experiments" / "tinylm" / "train.py"
        train = real.read_text() if real.is_file() else TRAIN
        program_file = HERE.parent / "program.md"
        program = program_file.read_text() if program_file.is_file() else PROGRAM
        sizes = prompt_sizes(task, train, program)

    print(f"## Edit corpus ({len(rows)} replies)\n")
    print("| case | defect | expected | outcome | verdict | first error |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    print("\n## Summary\n")
    print("| measure | value |\n|---|---|")
    print(f"| good replies applied correctly | {t['applied_ok']}/{t['apply']} "
          f"({100 * t['applied_ok'] / t['apply']:.0f}%) |")
    print(f"| bad replies correctly rejected | {t['rejected_ok']}/{t['reject']} "
          f"({100 * t['rejected_ok'] / t['reject']:.0f}%) |")
    print(f"| good replies refused (a repair turn follows) | {t['missed']} |")
    print(f"| wrong applications (must be 0) | {t['wrong']} |")

    print("\n## First-try apply rate per edit format (loop/edits/formats.py)\n")
    print("Each format's replies read by that format's reader; json: the search_replace "
          "replies' blocks as the schema-constrained JSON object (markup defects cannot "
          "occur there).\n")
    print("| format | good replies applied | bad replies refused | wrong |")
    print("|---|---|---|---|")
    for row in formats:
        print("| " + " | ".join(str(c) for c in row) + " |")
    t["wrong"] += sum(row[3] for row in formats)

    print(f"\n## Prompt size (system + user), train.py: "
          f"{'experiments/tinylm/train.py' if real.is_file() else 'stand-in'}, "
          f"{len(train.splitlines())} lines; tokens ~ chars/4 (tiktoken not used)\n")
    print("| iteration | attempts in journal | journal chars | prompt chars | ~tokens |")
    print("|---|---|---|---|---|")
    for row in sizes:
        print("| " + " | ".join(str(c) for c in row) + " |")
    bounded = sizes[-1][3] <= sizes[0][3] + ProposerConfig().journal_chars + 500
    print(f"\nprompt bounded: {'yes' if bounded else 'NO'} "
          f"(iteration 500 vs 1: +{sizes[-1][3] - sizes[0][3]} chars)")
    return 0 if t["wrong"] == 0 and bounded else 1


if __name__ == "__main__":
    raise SystemExit(main())
