"""The LLM proposer's prompts: the system rules, the user message, the research journal.

Kept beside the coder (aider's habit) so the wording can be read and tuned in one place.
The user message is ordered stable-first so a server's prompt cache (llama.cpp's and
vLLM's prefix cache, providers' cached input) reuses everything up to the end of the code
listing: the program, the task, the code, and only then what changes every iteration (the
iteration number, the best so far, the noise, the journal, a redo). A local server on a
few cores otherwise reads the whole code again each iteration."""
from __future__ import annotations

from collections import Counter

from loop.edits.formats import SEARCH_REPLACE, EditFormat
from loop.proposers.base import Attempt, Context
from loop.proposers.tried import normal_description, tried_lines

SYSTEM = """\
You are an automated ML research engineer running a keep-or-revert experiment loop.
Each turn you propose ONE focused change to the code, as a testable hypothesis. The change is
applied, the experiment is run within a fixed time budget, and it is kept only if the metric
improves; otherwise it is reverted.

Rules:
- Edit only these files: {editable}. Never edit: {protected} (the harness and the grader).
- Do not change how the metric is computed or reported, or the time budget.
- Simplicity criterion: all else equal, simpler is better. A small gain that adds ugly
  complexity is not worth it; deleting code for an equal result is a win.
- Read the research journal: do not repeat an idea that was already tried and failed unless
  you change it in a way you can name. Build on what was kept.
- Keep the code runnable: a crash wastes an experiment.

{reply_format}"""

USER = """\
# Research program (program.md)

{program}

# Task: {name}

{description}
Metric: {metric} ({direction}: {better} is better).
Each experiment runs for about {budget:g} s.

# Current best code (the editable files, as kept so far)

{files}

# Where the research stands

This is iteration {iteration}. Best {metric} so far: {best}.{noise}

# Research journal

{journal}

{redo}# Your turn

Propose one change that you expect to improve {metric}, following the reply format."""

REDO = """\
# Make this change again

Your change "{description}" was proposed on an older version of the code{verdict}, but
another change was kept since, and it no longer applies to the current code ({why}).
Make the same change on the current best code above (its diff on the older code is below),
keeping what was kept since. Reply in the usual format.

```diff
{patch}
```

"""

LENGTH_REPAIR = ("Your reply was cut off: it reached the output token limit before the edit "
                 "was complete. {shorter}")

THINKING_REPAIR = ("Your reply was cut off while you were still thinking: the output token limit "
                   "was reached before any answer. Think briefly this time, then reply with the "
                   "`Description:` line and small SEARCH/REPLACE blocks.")

EDIT_REPAIR = """{error}

{fix} {partial}"""

REPEAT = ("This change repeats iteration {n}'s change (\"{what}\", {status}): it was "
          "already tried, so it is not run again. Propose a different idea: another change, "
          "not the same one reworded.")

PARTIAL_APPLIED = ("The other {n} block(s) were applied; do not send them again: send only "
                   "the corrected versions of the blocks that failed, against the current code.")
NONE_APPLIED = "Nothing was applied: send all the blocks again, corrected."

LOG_TAIL_CHARS = 800        # per failure log shown in the journal
LINE_CHARS = 220            # one journal line at most
RECENT_IN_FULL = 8          # the latest attempts, always listed one by one


def system_prompt(context: Context, fmt: EditFormat = SEARCH_REPLACE) -> str:
    """The rules, and the reply format `fmt` asks for (loop/edits/formats.py): its example
    is made of real lines of the editable files."""
    task = context.task
    editable = ", ".join(sorted(context.files)) or ", ".join(task.editable)
    protected = ", ".join(task.protected) or "(none besides task.yaml)"
    return SYSTEM.format(editable=editable, protected=protected,
                         reply_format=fmt.instructions(context.files))


def user_prompt(context: Context, journal_chars: int) -> str:
    task, metric = context.task, context.task.metric
    return USER.format(
        program=context.program.strip() or "(no program.md: use your judgement)",
        name=task.name, description=task.description.strip(),
        metric=metric.name, direction=metric.direction,
        better="lower" if metric.direction == "minimize" else "higher",
        best=_num(context.best_metric), budget=task.time_budget_s, noise=_noise(context),
        iteration=context.iteration, files=render_files(context.files),
        journal=render_journal(context.history, journal_chars), redo=_redo(context))


def _redo(context: Context) -> str:
    r = context.redo
    if r is None:
        return ""
    return REDO.format(description=r.description, why=r.why, patch=r.patch.strip()[:6000],
                       verdict=f" and measured better than the best there ({r.verdict})"
                       if r.verdict else "")


def _noise(context: Context) -> str:
    """The measured run-to-run noise, so the model aims for effects that can be shown."""
    if not context.noise_sd:
        return ""
    return (f"\nRun-to-run noise (different seeds, same code): sd {_num(context.noise_sd)}. "
            f"A change is kept only when its effect is clearly larger than that.")


def render_files(files: dict[str, str]) -> str:
    blocks = []
    for path in sorted(files):
        fence = "````" if "```" in files[path] else "```"
        lang = "python" if path.endswith(".py") else ""
        blocks.append(f"{path}\n{fence}{lang}\n{files[path].rstrip()}\n{fence}")
    return "\n\n".join(blocks) or "(no editable files)"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def _line(a: Attempt) -> str:
    metric = "" if a.metric is None else f" {_num(a.metric)}"
    delta = "" if a.delta is None else f" (gain {a.delta:+.4g})"
    reason = f" [{a.reason}]" if a.reason and a.status != "keep" else ""
    text = " ".join(f"#{a.iteration} {a.status}{metric}{delta}: {a.description}{reason}".split())
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 1] + "…"


def render_journal(history: list[Attempt], max_chars: int) -> str:
    """Every attempt, compacted to at most `max_chars` characters.

    Priority when space runs out: the summary, the latest attempts, the last failure logs,
    every kept change (newest first), then older failed ideas deduplicated with counts
    (newest first). A 500-iteration night thus costs the same prompt as a 50-iteration one."""
    if not history:
        return "No attempts yet besides the baseline: this is the first proposal."
    slack = 0
    for _ in range(4):   # headings and "omitted" notes vary: shrink the lines until it fits
        journal = _render_journal(history, max_chars - slack)
        if len(journal) <= max_chars:
            return journal
        slack += len(journal) - max_chars
    return journal[:max_chars - 1] + "…"


def _render_journal(history: list[Attempt], max_chars: int) -> str:
    counts = Counter(a.status for a in history)
    summary = (f"{len(history)} attempts so far: "
               + ", ".join(f"{n} {s}" for s, n in counts.most_common())
               + ". gain > 0 means better than the best at that time.")
    flying = [a for a in history if a.status == "running"]
    history = [a for a in history if a.status != "running"]
    recent = history[-RECENT_IN_FULL:]
    older = history[:-RECENT_IN_FULL]
    budget = _Budget(max_chars - len(summary) - 320)  # 320: headings and "omitted" notes
    flying_lines = budget.take([_line(a) for a in flying])
    recent_lines = budget.take([_line(a) for a in reversed(recent)])[::-1]
    tails = budget.take([f"#{a.iteration} {a.status}: ...{a.log_tail[-LOG_TAIL_CHARS:].strip()}"
                         for a in reversed(history) if a.log_tail.strip()
                         and a.status != "keep"][:2])
    kept = [a for a in older if a.status == "keep"]
    kept_lines = budget.take([_line(a) for a in reversed(kept)])[::-1]
    tried = _dedupe_failed(a for a in reversed(older) if a.status != "keep")
    failed_lines = budget.take(tried)
    repeats = budget.take(tried_lines(history))   # shown first, but the other parts come first
    parts = [summary]
    if repeats:   # a weak model proposes one idea again and again: say so in one line each
        parts.append("Ideas already tried more than once (propose something else):\n"
                     + "\n".join(repeats))
    if kept:
        omitted = len(kept) - len(kept_lines)
        parts.append("Kept changes before the latest attempts (oldest first):\n"
                     + "\n".join(kept_lines) + (f"\n({omitted} older kept changes omitted)"
                                                if omitted else ""))
    if tried:
        omitted = len(tried) - len(failed_lines)
        parts.append("Earlier ideas that were NOT kept (newest first; xN = tried N times):\n"
                     + "\n".join(failed_lines)
                     + (f"\n({omitted} older failed ideas omitted)" if omitted else ""))
    if recent_lines:
        parts.append("Latest attempts:\n" + "\n".join(recent_lines))
    if flying_lines:   # several slots: these are measured while you think
        parts.append("Being measured right now (do not propose these again):\n"
                     + "\n".join(flying_lines))
    if tails:
        parts.append("Log tails of the latest failures:\n" + "\n\n".join(tails))
    return "\n\n".join(parts)


def _dedupe_failed(attempts) -> list[str]:
    """One line per distinct description, with how often and how it ended."""
    groups: dict[str, list[Attempt]] = {}
    for a in attempts:
        groups.setdefault(normal_description(a.description), []).append(a)
    lines = []
    for same in groups.values():
        first = same[0]
        if len(same) == 1:
            lines.append(_line(first))
            continue
        statuses = Counter(a.status for a in same)
        ends = ", ".join(f"{n} {s}" for s, n in statuses.most_common())
        text = " ".join(f"x{len(same)} ({ends}; last #{first.iteration}): {first.description}"
                        .split())
        lines.append(text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 1] + "…")
    return lines


class _Budget:
    """Characters left for journal lines; `take` keeps lines in order while they fit."""

    def __init__(self, chars: int):
        self.left = max(0, chars)

    def take(self, lines: list[str]) -> list[str]:
        taken = []
        for line in lines:
            if len(line) + 1 > self.left:
                break
            taken.append(line)
            self.left -= len(line) + 1
        return taken
