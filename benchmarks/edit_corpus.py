"""Realistic LLM replies for the edit benchmark, each with its expected outcome.

Every case is written against benchmarks/edit_standin.py (train.py editable, prepare.py
protected). `expect` is the list of (old, new) substitutions the reply means to make
(each `old` occurs exactly once in the stand-in), a full expected text, or REJECT."""
from __future__ import annotations

from dataclasses import dataclass

from edit_standin import TRAIN

REJECT = "reject"


@dataclass
class Case:
    name: str
    defect: str
    reply: str
    expect: object      # REJECT | list[(old, new)] | str (the whole new train.py)

    def expected_train(self) -> str:
        if isinstance(self.expect, str):
            return self.expect
        text = TRAIN
        for old, new in self.expect:
            assert text.count(old) == 1, f"{self.name}: corpus error, {old!r} not unique"
            text = text.replace(old, new)
        return text


def sr(search: str, replace: str, path: str = "train.py", fence: str = "```python") -> str:
    open_fence, close_fence = (f"{fence}\n", "```\n") if fence else ("", "")
    label = f"{path}\n" if path else ""
    return (f"{label}{open_fence}<<<<<<< SEARCH\n{search}=======\n{replace}"
            f">>>>>>> REPLACE\n{close_fence}")


def line_of(needle: str, nth: int = 1) -> int:
    hits = [i + 1 for i, l in enumerate(TRAIN.splitlines()) if needle in l]
    return hits[nth - 1]


LR_OLD, LR_NEW = "LEARNING_RATE = 3e-3\n", "LEARNING_RATE = 2e-3\n"
WD_OLD, WD_NEW = "WEIGHT_DECAY = 0.1\n", "WEIGHT_DECAY = 0.05\n"
GELU_OLD = "        x = F.gelu(self.fc(x))\n"
GELU_NEW = "        x = F.relu(self.fc(x)).square()\n"
ATTN = ("        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
        "        y = y.transpose(1, 2).contiguous().view(B, T, C)\n")
ATTN_NEW = ("        q, k = F.rms_norm(q, (q.size(-1),)), F.rms_norm(k, (k.size(-1),))\n" + ATTN)
WHOLE_NEW = TRAIN.replace(LR_OLD, LR_NEW).replace("BETA2 = 0.95\n", "BETA2 = 0.99\n")
PROSE = "I looked at the journal: the schedule has not been tuned yet.\n\n"
DESC = "Description: lower the peak learning rate to 2e-3 for stability\n\n"


LR_AT_SEARCH = ("def lr_at(progress):\n    \"\"\"Linear warmup, then cosine decay to 10% of the "
                "peak, by fraction of the budget.\"\"\"\n    if progress < WARMUP_FRAC:\n")
WARM_OLD, WARM_NEW = "    if progress < WARMUP_FRAC:\n", "    if progress < 2 * WARMUP_FRAC:\n"
LR_AT_REPLACE = LR_AT_SEARCH.replace(WARM_OLD, WARM_NEW)


def _dedent(text: str, n: int) -> str:
    return "".join(l[n:] if l.strip() else l for l in text.splitlines(keepends=True))


CASES = [
    # -- SEARCH/REPLACE ------------------------------------------------------------------------
    Case("sr-clean", "none", DESC + sr(LR_OLD, LR_NEW), [(LR_OLD, LR_NEW)]),
    Case("sr-prose-around", "prose before and after",
         PROSE + DESC + sr(LR_OLD, LR_NEW) + "\nThis should reduce loss spikes early on.\n",
         [(LR_OLD, LR_NEW)]),
    Case("sr-no-fence", "no markdown fence", DESC + sr(LR_OLD, LR_NEW, fence=""),
         [(LR_OLD, LR_NEW)]),
    Case("sr-wrong-fence-language", "fence says javascript",
         DESC + sr(LR_OLD, LR_NEW, fence="```javascript"), [(LR_OLD, LR_NEW)]),
    Case("sr-path-in-info", "path in the fence info string",
         DESC + sr(LR_OLD, LR_NEW, path="", fence="```python train.py"), [(LR_OLD, LR_NEW)]),
    Case("sr-bold-path", "path as **bold** markdown",
         DESC + "**train.py**\n" + sr(LR_OLD, LR_NEW, path=""), [(LR_OLD, LR_NEW)]),
    Case("sr-heading-path", "path as a markdown heading",
         DESC + "### `train.py`\n" + sr(LR_OLD, LR_NEW, path=""), [(LR_OLD, LR_NEW)]),
    Case("sr-path-inside-fence", "path on the first line inside the fence",
         DESC + "```python\ntrain.py\n" + sr(LR_OLD, LR_NEW, path="", fence="").rstrip()
         + "\n```\n", [(LR_OLD, LR_NEW)]),
    Case("sr-task-prefixed-path", "path includes the task folder",
         DESC + sr(LR_OLD, LR_NEW, path="experiments/tinylm/train.py"), [(LR_OLD, LR_NEW)]),
    Case("sr-no-path", "no file named (one editable file)",
         DESC + sr(LR_OLD, LR_NEW, path=""), [(LR_OLD, LR_NEW)]),
    Case("sr-indent-lost", "SEARCH/REPLACE dedented by 8 spaces",
         "Description: squared ReLU MLP\n\n" + sr(_dedent(GELU_OLD, 8), _dedent(GELU_NEW, 8)),
         [(GELU_OLD, GELU_NEW)]),
    Case("sr-indent-extra", "SEARCH/REPLACE indented 4 spaces too deep",
         "Description: squared ReLU MLP\n\n"
         + sr("    " + GELU_OLD, "    " + GELU_NEW), [(GELU_OLD, GELU_NEW)]),
    Case("sr-multiline-indent-drift", "a 2-line block dedented, QK-norm added",
         "Description: QK-norm before attention\n\n" + sr(_dedent(ATTN, 4), _dedent(ATTN_NEW, 4)),
         [(ATTN, ATTN_NEW)]),
    Case("sr-trailing-whitespace", "trailing spaces in SEARCH",
         DESC + sr("LEARNING_RATE = 3e-3   \n", LR_NEW), [(LR_OLD, LR_NEW)]),
    Case("sr-blank-edges", "blank lines around SEARCH and REPLACE",
         DESC + sr("\n" + LR_OLD + "\n", "\n" + LR_NEW + "\n"), [(LR_OLD, LR_NEW)]),
    Case("sr-crlf", "CRLF line endings in the reply",
         (DESC + sr(LR_OLD, LR_NEW)).replace("\n", "\r\n"), [(LR_OLD, LR_NEW)]),
    Case("sr-no-final-newline", "reply ends without a newline or closing fence",
         DESC + sr(LR_OLD, LR_NEW, fence="").rstrip("\n"), [(LR_OLD, LR_NEW)]),
    Case("sr-two-blocks", "two blocks in one fence",
         "Description: lower LR and weight decay\n\ntrain.py\n```python\n"
         + sr(LR_OLD, LR_NEW, path="", fence="") + sr(WD_OLD, WD_NEW, path="", fence="")
         + "```\n", [(LR_OLD, LR_NEW), (WD_OLD, WD_NEW)]),
    Case("sr-path-in-prose", "file named only in a prose line",
         DESC + "Here is the change to `train.py`:\n" + sr(LR_OLD, LR_NEW, path=""),
         [(LR_OLD, LR_NEW)]),
    Case("sr-four-backticks", "```` fence",
         DESC + sr(LR_OLD, LR_NEW, fence="````python").replace("```\n", "````\n"),
         [(LR_OLD, LR_NEW)]),
    Case("sr-blank-lines-with-spaces", "blank lines inside SEARCH carry indentation",
         "Description: rename the optimizer helper\n\n"
         + sr("        return self.head(self.ln_f(x))\n    \n    \n"
              "def configure_optimizer(model):\n",
              "        return self.head(self.ln_f(x))\n\n\ndef make_optimizer(model):\n"),
         [("        return self.head(self.ln_f(x))\n\n\ndef configure_optimizer(model):\n",
           "        return self.head(self.ln_f(x))\n\n\ndef make_optimizer(model):\n")]),
    Case("sr-line-numbers-copied", "SEARCH lines prefixed with line numbers",
         DESC + sr("19: LEARNING_RATE = 3e-3\n", "19: LEARNING_RATE = 2e-3\n"), REJECT),
    Case("sr-one-good-one-protected", "a good block plus one on prepare.py",
         DESC + sr(LR_OLD, LR_NEW) + "\nprepare.py\n```python\n<<<<<<< SEARCH\n"
         "    data = torch.randint(0, 256, (100_000,))\n=======\n"
         "    data = torch.randint(0, 256, (400_000,))\n>>>>>>> REPLACE\n```\n", REJECT),
    Case("sr-elided-context", "SEARCH elides lines with '...'",
         "Description: QK-norm\n\n" + sr("    def forward(self, x):\n        ...\n" + ATTN,
                                         "    def forward(self, x):\n        ...\n" + ATTN_NEW),
         REJECT),
    Case("sr-ambiguous-anchor", "SEARCH matches three places",
         "Description: more dropout\n\n" + sr("        self.drop = nn.Dropout(cfg.dropout)\n",
                                               "        self.drop = nn.Dropout(0.1)\n"), REJECT),
    Case("sr-hallucinated-search", "SEARCH quotes a line that is not there",
         DESC + sr("LEARNING_RATE = 6e-4\n", LR_NEW), REJECT),
    Case("sr-protected-file", "edits the protected prepare.py",
         "Description: more data\n\n" + sr("    data = torch.randint(0, 256, (100_000,))\n",
                                           "    data = torch.randint(0, 256, (400_000,))\n",
                                           path="prepare.py"), REJECT),
    Case("sr-new-file-not-editable", "creates a file outside the editable set",
         "Description: add a helper\n\n" + sr("", "def helper():\n    return 1\n",
                                             path="utils.py"), REJECT),
    Case("sr-outside-path", "writes outside the task folder",
         "Description: tweak\n\n" + sr("", "x = 1\n", path="../../etc/profile.py"), REJECT),
    Case("sr-truncated", "reply cut off inside a block",
         DESC + "train.py\n```python\n<<<<<<< SEARCH\nLEARNING_RATE = 3e-3\n=======\nLEARN",
         REJECT),
    Case("sr-noop", "REPLACE equals SEARCH",
         "Description: keep it\n\n" + sr(LR_OLD, LR_OLD), REJECT),
    # -- unified diffs -------------------------------------------------------------------------
    Case("diff-clean", "none",
         DESC + f"```diff\n--- a/train.py\n+++ b/train.py\n@@ -{line_of('WEIGHT_DECAY =') - 1},3 "
         f"+{line_of('WEIGHT_DECAY =') - 1},3 @@\n BATCH_SIZE = 32\n-LEARNING_RATE = 3e-3\n"
         "+LEARNING_RATE = 2e-3\n WEIGHT_DECAY = 0.1\n```\n", [(LR_OLD, LR_NEW)]),
    Case("diff-wrong-line-numbers", "hunk header points 40 lines off",
         DESC + "```diff\n--- a/train.py\n+++ b/train.py\n@@ -60,3 +60,3 @@\n BATCH_SIZE = 32\n"
         "-LEARNING_RATE = 3e-3\n+LEARNING_RATE = 2e-3\n WEIGHT_DECAY = 0.1\n```\n",
         [(LR_OLD, LR_NEW)]),
    Case("diff-no-line-numbers", "bare @@ header",
         DESC + "```diff\n--- train.py\n+++ train.py\n@@ ... @@\n BATCH_SIZE = 32\n"
         "-LEARNING_RATE = 3e-3\n+LEARNING_RATE = 2e-3\n```\n", [(LR_OLD, LR_NEW)]),
    Case("diff-unfenced-git", "git diff header, no fence",
         DESC + "diff --git a/train.py b/train.py\nindex 1a2b3c4..5d6e7f8 100644\n"
         "--- a/train.py\n+++ b/train.py\n@@ -19,1 +19,1 @@\n-LEARNING_RATE = 3e-3\n"
         "+LEARNING_RATE = 2e-3\n", [(LR_OLD, LR_NEW)]),
    Case("diff-blank-context-unprefixed", "blank context lines lost their leading space",
         "Description: no weight tying\n\n```diff\n--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n"
         "         self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)\n"
         "-        self.head.weight = self.wte.weight\n         self.apply(self._init_weights)\n"
         "\n     def _init_weights(self, module):\n```\n",
         [("        self.head.weight = self.wte.weight\n", "")]),
    Case("diff-two-hunks", "two hunks, second line number stale",
         "Description: lower LR and squared ReLU\n\n```diff\n--- a/train.py\n+++ b/train.py\n"
         "@@ -19,1 +19,1 @@\n-LEARNING_RATE = 3e-3\n+LEARNING_RATE = 2e-3\n@@ -70,2 +70,2 @@\n"
         "     def forward(self, x):\n-        x = F.gelu(self.fc(x))\n"
         "+        x = F.relu(self.fc(x)).square()\n```\n",
         [(LR_OLD, LR_NEW), (GELU_OLD, GELU_NEW)]),
    Case("diff-ambiguous-right-line", "context fits 3 places; the header picks one",
         "Description: dropout in the MLP only\n\n```diff\n--- a/train.py\n+++ b/train.py\n"
         f"@@ -{line_of('nn.Dropout', 2)},1 +{line_of('nn.Dropout', 2)},1 @@\n"
         "-        self.drop = nn.Dropout(cfg.dropout)\n"
         "+        self.drop = nn.Dropout(0.1)\n```\n",
         [("    def __init__(self, cfg):\n        super().__init__()\n        self.fc"
           " = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)\n        self.proj = nn.Linear("
           "4 * cfg.n_embd, cfg.n_embd, bias=False)\n        self.drop = nn.Dropout(cfg.dropout)\n",
           "    def __init__(self, cfg):\n        super().__init__()\n        self.fc"
           " = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)\n        self.proj = nn.Linear("
           "4 * cfg.n_embd, cfg.n_embd, bias=False)\n        self.drop = nn.Dropout(0.1)\n")]),
    Case("diff-ambiguous-wrong-line", "context fits 3 places; the header fits none",
         "Description: more dropout\n\n```diff\n--- a/train.py\n+++ b/train.py\n@@ -12,1 +12,1 @@\n"
         "-        self.drop = nn.Dropout(cfg.dropout)\n"
         "+        self.drop = nn.Dropout(0.1)\n```\n",
         REJECT),
    Case("diff-hallucinated-context", "context lines that are not in the file",
         DESC + "```diff\n--- a/train.py\n+++ b/train.py\n@@ -19,3 +19,3 @@\n BATCH_SIZE = 64\n"
         "-LEARNING_RATE = 3e-3\n+LEARNING_RATE = 2e-3\n```\n", REJECT),
    Case("diff-protected-file", "diff of the protected prepare.py",
         "Description: more data\n\n```diff\n--- a/prepare.py\n+++ b/prepare.py\n@@ -5,1 +5,1 @@\n"
         "-    data = torch.randint(0, 256, (100_000,))\n"
         "+    data = torch.randint(0, 256, (400_000,))\n```\n", REJECT),
    Case("diff-deletes-file", "diff deletes train.py",
         "Description: start over\n\n```diff\n--- a/train.py\n+++ /dev/null\n@@ -1,1 +0,0 @@\n"
         "-\"\"\"Train a small GPT-style byte-level language model for a fixed time budget.\"\"\"\n"
         "```\n", REJECT),
    Case("diff-without-hunk-header", "a diff fence with no @@ line",
         "Description: lower LR\n\ntrain.py\n```diff\n-LEARNING_RATE = 3e-3\n"
         "+LEARNING_RATE = 2e-3\n```\n", REJECT),
    # -- whole files ---------------------------------------------------------------------------
    Case("whole-clean", "none", "Description: lower LR, higher beta2\n\ntrain.py\n```python\n"
         + WHOLE_NEW + "```\n", WHOLE_NEW),
    Case("whole-path-in-info", "path in the fence info string",
         "Description: lower LR, higher beta2\n\n```python train.py\n" + WHOLE_NEW + "```\n",
         WHOLE_NEW),
    Case("whole-file-label", "label 'File: train.py' in bold",
         "Description: lower LR, higher beta2\n\n**File: train.py**\n```py\n" + WHOLE_NEW + "```\n",
         WHOLE_NEW),
    Case("whole-text-fence", "fence language 'text'",
         "Description: lower LR, higher beta2\n\ntrain.py\n```text\n" + WHOLE_NEW + "```\n",
         WHOLE_NEW),
    Case("whole-crlf", "CRLF line endings in the reply",
         ("Description: lower LR, higher beta2\n\ntrain.py\n```python\n" + WHOLE_NEW
          + "```\n").replace("\n", "\r\n"), WHOLE_NEW),
    Case("whole-elided", "'# ... rest of the file unchanged'",
         "Description: lower LR\n\ntrain.py\n```python\n" + TRAIN[:TRAIN.index("LEARNING_RATE")]
         + "LEARNING_RATE = 2e-3\n# ... rest of the file unchanged ...\n```\n", REJECT),
    Case("whole-fragment", "a 3-line fragment labelled as the whole file",
         "Description: lower LR\n\ntrain.py\n```python\nBATCH_SIZE = 32\nLEARNING_RATE = 2e-3\n"
         "WEIGHT_DECAY = 0.1\n```\n", REJECT),
    Case("whole-truncated", "reply cut off inside the file (no closing fence)",
         "Description: lower LR\n\ntrain.py\n```python\n" + WHOLE_NEW[:2000], REJECT),
    Case("prose-snippet-only", "code shown under prose, no edit block",
         "You could lower the learning rate in train.py:\n```python\nLEARNING_RATE = 2e-3\n```\n",
         REJECT),
    Case("no-edit-at-all", "prose only", "I think the current setup is already optimal.", REJECT),
    # -- shapes seen from real models (issue 8), written by us ---------------------------------
    Case("sr-second-divider", "'=======' again before '>>>>>>> REPLACE'",
         DESC + sr(LR_OLD, LR_NEW + "=======\n"), [(LR_OLD, LR_NEW)]),
    Case("sr-divider-closes", "'=======' as the end marker, prose after",
         DESC + "train.py\n```python\n<<<<<<< SEARCH\n" + LR_OLD + "=======\n" + LR_NEW
         + "=======\n```\nThis should be more stable.\n", [(LR_OLD, LR_NEW)]),
    Case("sr-divider-ambiguous", "text between a second '=======' and the end marker",
         DESC + sr(LR_OLD, LR_NEW + "=======\nLEARNING_RATE = 1e-3\n"), REJECT),
    Case("think-draft", "a draft edit inside <think>, the answer after it",
         "<think>\nMaybe lower weight decay?\n" + sr(WD_OLD, WD_NEW) + "No: the LR.\n</think>\n"
         + DESC + sr(LR_OLD, LR_NEW), [(LR_OLD, LR_NEW)]),
    Case("think-close-only", "template opened <think>; only </think> in the reply",
         "Maybe lower weight decay?\n" + sr(WD_OLD, WD_NEW) + "</think>\n\n" + DESC
         + sr(LR_OLD, LR_NEW), [(LR_OLD, LR_NEW)]),
    Case("think-only", "only thinking, never closed", "<think>\n" + sr(LR_OLD, LR_NEW), REJECT),
    Case("whole-named-in-prose", "'Here is the updated `train.py`:' then a bare fence",
         "Description: lower LR, higher beta2\n\nHere is the updated `train.py`:\n\n```python\n"
         + WHOLE_NEW + "```\n", WHOLE_NEW),
    Case("whole-restarted-cut", "listing stops, prose and the name, starts again, cut off",
         "Description: lower LR\n\ntrain.py\n```python\n" + WHOLE_NEW[:len(WHOLE_NEW) // 2]
         + "\nLet me write it again from the start.\n\ntrain.py\n```\n"
         + WHOLE_NEW[:len(WHOLE_NEW) // 3], REJECT),
    Case("whole-restarted-complete", "listing restarted, second listing complete",
         "Description: lower LR, higher beta2\n\ntrain.py\n```python\n"
         + WHOLE_NEW[:len(WHOLE_NEW) // 2] + "\nSorry, again in full:\n\ntrain.py\n```python\n"
         + WHOLE_NEW + "```\n", WHOLE_NEW),
    # -- what a 1.5B model wrote on tinylm (issue 23), in our own words ------------------------
    Case("small-def-dropped", "SEARCH's first line lost its leading 'def '",
         DESC + sr(LR_AT_SEARCH.replace("def lr_at", "lr_at"),
                   LR_AT_REPLACE.replace("def lr_at", "lr_at")), [(WARM_OLD, WARM_NEW)]),
    Case("small-def-dropped-noop", "'def ' dropped and REPLACE equals SEARCH",
         DESC + sr(LR_AT_SEARCH.replace("def lr_at", "lr_at"),
                   LR_AT_SEARCH.replace("def lr_at", "lr_at")), REJECT),
    Case("small-placeholder-copied", "the prompt's placeholder copied into SEARCH",
         DESC + sr("exact lines copied from the current file\n", LR_NEW), REJECT),
    Case("small-numbered-description", "'1. Description:' after the prompt's numbered list",
         "1. " + DESC + "2. " + sr(LR_OLD, LR_NEW), [(LR_OLD, LR_NEW)]),
    Case("small-unnamed-whole-file", "the whole file in a fence that names no file",
         "Description: lower LR, higher beta2\n\n```python\n" + WHOLE_NEW + "```\n", WHOLE_NEW),
    Case("small-echoed-error", "the engine's error text sent back, closest lines and all",
         "the edit could not be applied:\n\n- block 1: the SEARCH text was not found in "
         "train.py. The closest lines in train.py are:\n```\n" + LR_OLD + WD_OLD + "```\n"
         "Copy the lines exactly as they are in the current file (whitespace included)\n",
         REJECT),
    Case("whole-starts-over", "listing cut, then a bare fence and the listing from the top",
         "Description: lower LR\n\ntrain.py\n```python\n" + WHOLE_NEW[:len(WHOLE_NEW) // 2]
         + "\n```\n" + WHOLE_NEW[:len(WHOLE_NEW) // 3], REJECT),
]
