"""Protected harness for the tinylm task: data, batches and the bits-per-byte metric.

The research loop may edit train.py but never this file, so everything that defines
*what is being measured* lives here: the corpus, the train/val split, and evaluate_bpb.

The corpus is generated, not downloaded: a seeded probabilistic grammar writes short
English-like stories. It has structure at several scales, so better models score better:
  - characters: a fixed vocabulary of a few hundred words, spelled consistently;
  - words: subject-verb agreement, irregular plurals and past tenses, "one cow"/"two cows";
  - sentences: templates, punctuation, quoted dialogue that opens and closes;
  - paragraphs: each story keeps one topic, one hero and the hero's pronoun;
  - copying and counting: repeated words, weekday sequences, small sums in words.
Only rng.random() is called, so the bytes are the same on every Python version.
"""
import math
import os
import random
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

VERSION = "tinylm-v2"           # bump when the generator changes: it keys the cache
VOCAB_SIZE = 256                # byte-level
TRAIN_SEED = 1337               # train and val come from different seeds, so no val story is
VAL_SEED = 424242               # ever copied from train (only the grammar is shared)
TRAIN_BYTES = 1_500_000         # about 1.5 MB of training text
VAL_BYTES = 160_000             # about 160 KB of validation text
EVAL_BYTES = 65_536             # evaluate_bpb scores this many val bytes by default (~1 s on CPU)
EVAL_SEQ_LEN = 128              # the grader scores windows of this many bytes, whatever the
                                # model trained on (task.yaml's grader.input_shape agrees)
FRESH_BYTES = 32_768            # fresh text grader_check scores beside val
LEAK_MARGIN = 0.05              # bpb; val and fresh text differ by about 0.01 for an honest model
LEAK_SHARE = 0.03               # of fresh text's bpb: an untrained model (bpb near 5) differs
                                # from one text to another by up to ~0.09 (seen in CI at a 2 s box)
TIME_BUDGET = float(os.environ.get("AUTORESEARCH_TIME_BUDGET", "60"))  # training seconds
CPU_FLOPS = 1.4e11              # FLOP/s the work budget credits a CPU with (class Budget):
                                # the baseline: 360 steps, ~60 s on a quiet 2-core x86 machine
CPU_CAP = 3.0                   # a CPU run stops after CPU_CAP x TIME_BUDGET s all the same
CACHE_DIR = Path(os.environ.get("AUTORESEARCH_CACHE") or
                 Path.home() / ".cache" / "autoresearch" / "tinylm")

# ---------------------------------------------------------------------------------------
# Vocabulary. Each topic has its own places, things, adjectives and verbs; a story draws
# mostly from its topic, which gives paragraph-level structure a model can pick up.
HE = "Tom Sam Ben Jack Leo Max Oscar Hugo Felix Arthur Henry Owen Peter Simon Victor Walter".split()
SHE = "Anna Lucy Emma Rose Clara Ivy Mia Nora Ruth Sarah Alice Grace Helen Julia Laura Maya".split()
TOPICS = {  # places | things | adjectives | verbs
    "farm": ("barn field farm meadow orchard stable pond shed", "cow horse goat sheep pig hen "
             "duck tractor fence bucket apple carrot hay egg", "muddy green quiet old red busy "
             "wide dusty", "feed milk chase count brush carry plant dig"),
    "sea": ("harbor beach ship island dock lighthouse bay shore", "boat fish crab net sail "
            "wave gull shell rope anchor whale oyster map flag", "salty blue windy wet cold "
            "deep rough sandy", "catch pull mend watch throw tie row sail"),
    "city": ("street station market cafe tower bridge park museum", "bus car train ticket "
             "coffee clock lamp sign shop crowd map umbrella bicycle statue", "loud bright "
             "crowded tall grey modern busy noisy", "buy sell find ride visit paint wait park"),
    "forest": ("forest cave river hill valley camp lake swamp", "fox wolf bear deer owl tree "
               "stone leaf mushroom branch path fire tent rabbit", "dark wild green tall "
               "silent ancient thick mossy", "follow climb gather hear cross hide track chop"),
    "kitchen": ("kitchen garden pantry oven table cellar bakery stove", "bread cake soup egg "
                "pan knife spoon cup plate butter onion pie pot jar", "warm sweet fresh hot "
                "sticky golden sour salty", "bake cook cut wash stir taste mix pour"),
    "school": ("school library classroom hall yard office gym lab", "book pen desk lesson "
               "teacher student box letter bell chalk page story ruler poem", "long short "
               "strange simple clever hard quiet neat", "read write study open close draw "
               "learn copy"),
    "mountain": ("mountain peak slope hut glacier ridge pass summit", "rock goat eagle snow "
                 "rope boot axe cloud flag tent map stove", "steep icy high white cold windy "
                 "narrow rocky", "climb carry reach pack watch light dig mark"),
    "music": ("hall stage studio theater church club room square", "drum piano violin song "
              "note guitar flute bell singer band ticket chair", "loud soft slow sweet sad "
              "lively gentle bright", "play sing hear tune practice clap hum write"),
    "space": ("station moon planet rocket base crater orbit lab", "star comet robot engine "
              "helmet suit screen signal rover panel window satellite", "dark silver distant "
              "huge tiny bright strange silent", "launch repair scan build fix track land "
              "watch"),
    "workshop": ("workshop garage shed yard factory forge attic mill", "hammer nail saw "
                 "plank wheel chair table clock box drill bolt lamp", "rusty heavy sharp "
                 "broken new wooden shiny useful", "build fix sand paint measure cut drill "
                 "carry"),
}
TOPICS = {k: tuple(part.split() for part in v) for k, v in TOPICS.items()}
MOODS = "happy sad tired proud angry calm worried glad surprised curious".split()
PREPS = "near behind under beside inside above".split()
ADVERBS = "quickly slowly carefully quietly happily again together".split()
WHEN = "In the morning,|After lunch,|Later,|At night,|Suddenly,|On the next day,|Then".split("|")
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
NUMS = "zero one two three four five six seven eight nine ten eleven twelve".split()
PLURAL = {"sheep": "sheep", "fish": "fish", "knife": "knives", "leaf": "leaves",
          "wolf": "wolves", "deer": "deer", "bus": "buses", "branch": "branches",
          "box": "boxes", "story": "stories", "coffee": "coffee", "hay": "hay", "snow": "snow",
          "axe": "axes", "church": "churches"}
PAST = {"catch": "caught", "buy": "bought", "sell": "sold", "find": "found", "ride": "rode",
        "hear": "heard", "throw": "threw", "read": "read", "write": "wrote", "draw": "drew",
        "cut": "cut", "feed": "fed", "hide": "hid", "stir": "stirred", "tie": "tied",
        "carry": "carried", "study": "studied", "dig": "dug", "row": "rowed", "sing": "sang",
        "light": "lit", "plan": "planned", "chop": "chopped", "clap": "clapped", "hum": "hummed",
        "build": "built", "fix": "fixed", "copy": "copied", "learn": "learned", "pour": "poured", "scan": "scanned"}


def plural(noun):
    return PLURAL.get(noun) or noun + "s"


def third(verb):   # present tense for he/she/it: "chases", "catches", "carries"
    if verb.endswith(("s", "sh", "ch", "x")):
        return verb + "es"
    return verb[:-1] + "ies" if verb.endswith("y") and verb[-2] not in "aeiou" else verb + "s"


def past(verb):
    return PAST.get(verb) or (verb + "d" if verb.endswith("e") else verb + "ed")


def pick(rng, seq):
    return seq[int(rng.random() * len(seq))]


def story(rng):
    """One titled story: a hero, a friend and a topic kept for its whole length."""
    topic = TOPICS[pick(rng, sorted(TOPICS))]
    places, things, adjs, verbs = topic
    hero_is_he = rng.random() < 0.5
    hero = pick(rng, HE if hero_is_he else SHE)
    friend = pick(rng, [n for n in HE + SHE if n != hero])
    he, his = ("he", "his") if hero_is_he else ("she", "her")
    home = pick(rng, places)

    def noun_phrase(article="the"):
        adj = pick(rng, adjs) + " " if rng.random() < 0.4 else ""
        return f"{article} {adj}{pick(rng, things)}"

    def count_phrase(n, noun):
        return f"{NUMS[n]} {noun if n == 1 else plural(noun)}"

    def sentence():
        r = rng.random()
        if r < 0.18:   # present tense with agreement: "The cow feeds..." / "The cows feed..."
            noun, verb = pick(rng, things), pick(rng, verbs)
            subj, verb = (plural(noun), verb) if rng.random() < 0.5 else (noun, third(verb))
            return f"The {subj} {verb} {noun_phrase()} {pick(rng, PREPS)} the {pick(rng, places)}."
        if r < 0.34:   # narrative past, sometimes with a time and a manner
            when = pick(rng, WHEN) + " " if rng.random() < 0.4 else ""
            who = hero if rng.random() < 0.5 else (he if when else he.capitalize())
            how = " " + pick(rng, ADVERBS) if rng.random() < 0.3 else ""
            return (f"{when}{who} {past(pick(rng, verbs))} {noun_phrase()} "
                    f"{pick(rng, PREPS)} the {home}{how}.")
        if r < 0.44:
            return f"{hero} went to the {pick(rng, places)} with {friend}."
        if r < 0.54:   # counting: the sum in words must be right
            a, b = 1 + int(rng.random() * 6), 1 + int(rng.random() * 6)
            t1, t2 = pick(rng, things), pick(rng, things)
            return (f"{he.capitalize()} saw {count_phrase(a, t1)} and {count_phrase(b, t2)}, "
                    f"so there were {NUMS[a + b]} in all.")
        if r < 0.62:   # weekdays in order, starting anywhere
            start, n = int(rng.random() * 7), 2 + int(rng.random() * 3)
            days = [DAYS[(start + i) % 7] for i in range(n)]
            return f"{hero} worked on {', '.join(days[:-1])} and {days[-1]}."
        if r < 0.72:   # dialogue: the answer names the thing that was asked about
            thing, place = pick(rng, things), pick(rng, places)
            return (f"\"Where is the {thing}?\" asked {friend}. "
                    f"\"The {thing} is in the {place},\" said {hero}.")
        if r < 0.80:   # copying: a word said three times
            w = pick(rng, things + adjs)
            return f"{friend} said the word {w} three times: {w}, {w}, {w}."
        if r < 0.90:
            return f"{hero} was {pick(rng, MOODS)} because {noun_phrase()} was {pick(rng, adjs)}."
        return f"\"I will {pick(rng, verbs)} {noun_phrase()},\" said {hero} to {friend}."

    title = f"The {pick(rng, adjs).capitalize()} {pick(rng, things).capitalize()}"
    paras = [f"{hero} lived near the {home}. Every day {he} helped {his} friend {friend}."]
    for _ in range(1 + int(rng.random() * 3)):
        paras.append(" ".join(sentence() for _ in range(3 + int(rng.random() * 4))))
    paras[-1] += f" And that was the end of {his} day."
    return title + "\n\n" + "\n\n".join(paras) + "\n\n\n"


def generate(seed, n_bytes):
    rng, parts, size = random.Random(seed), [], 0
    while size < n_bytes:
        parts.append(story(rng))
        size += len(parts[-1])
    return "".join(parts).encode("ascii")


# ---------------------------------------------------------------------------------------
# Cache and splits. Writes go to a temp file and are renamed into place, so two runs that
# start at once both end up reading a complete file (the bytes are identical anyway).
_SPLITS = {}


def _path(split):
    return CACHE_DIR / f"{VERSION}-{split}.bin"


def load_split(split):
    """The whole split as a 1-D torch.uint8 tensor (generated and cached on first use)."""
    assert split in ("train", "val"), split
    if split not in _SPLITS:
        path = _path(split)
        if not path.is_file():
            seed, size = (TRAIN_SEED, TRAIN_BYTES) if split == "train" else (VAL_SEED, VAL_BYTES)
            data = generate(seed, size)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; the cache may be shared
            os.replace(tmp, path)
        _SPLITS[split] = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8).clone()
    return _SPLITS[split]


def get_batch(split, batch_size, seq_len, device, generator=None):
    """Random windows: x is (B, T) int64 bytes, y is x shifted left by one. Every training
    batch served is counted for the work budget (class Budget)."""
    data = load_split(split)
    if split == "train":
        _SERVED.append((batch_size, seq_len))
    starts = torch.randint(0, len(data) - seq_len - 1, (batch_size,), generator=generator)
    rows = torch.stack([data[s:s + seq_len + 1] for s in starts.tolist()]).long()
    x, y = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
    if str(device).startswith("cuda"):
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


_SERVED = []                    # (rows, seq_len) of the training batches not yet counted


class Budget:
    """How far a run is through its budget, 0 to 1 (train.py stops at 1).

    On a GPU it is TIME_BUDGET seconds of training: karpathy's time box, where a faster
    change earns more steps. On a CPU the wall clock measures the machine's load as much as
    the code (another process, a second slot, thermal limits: the same code made 92 to 432
    steps in 60 s here, and its val_bpb followed), so there the budget is work: the model's
    training FLOPs, TIME_BUDGET x CPU_FLOPS in all. They are counted here, in protected
    code, from the batches get_batch served and the model's own FLOPs per row (a forward
    pass counted once per sequence length; backward counted as twice the forward). The wall
    clock stays the cap: a run that has not done its work after CPU_CAP x TIME_BUDGET
    seconds of training (a machine a third as fast, or one shared with other jobs) stops
    there all the same, so no edit, honest or not, trains longer than that; its summary
    says so (`budget:`), and its step count (task.yaml's throughput_pattern) shows the
    judge.

    A change that makes the model bigger or its sequences longer gets fewer steps, as with a
    time budget; one that only makes each FLOP faster no longer gets more of them on a CPU.
    Set AUTORESEARCH_BUDGET=time to time-box a CPU run too (or =work on a GPU)."""

    def __init__(self, model, device):
        default = "time" if str(device).startswith("cuda") else "work"
        self.kind = os.environ.get("AUTORESEARCH_BUDGET") or default
        if self.kind not in ("time", "work"):
            raise SystemExit(f"AUTORESEARCH_BUDGET={self.kind!r}: use time or work")
        self.model, self.flops, self.total = model, 0.0, TIME_BUDGET * CPU_FLOPS
        self._row_flops = {}
        _SERVED.clear()

    def progress(self, training_time):
        if self.kind == "time":
            return training_time / TIME_BUDGET
        while _SERVED:
            rows, seq_len = _SERVED.pop()
            self.flops += rows * self.row_flops(seq_len)
        return max(self.flops / self.total, training_time / (CPU_CAP * TIME_BUDGET))

    def describe(self):
        if self.kind == "time":
            return f"{TIME_BUDGET:.0f}s of training"
        return f"{self.total:.2e} training FLOPs (or {CPU_CAP * TIME_BUDGET:.0f}s of training)"

    def summary(self):
        """The run's last word on its budget: `time`, `work`, or how far the work got when
        the clock stopped it."""
        if self.kind == "time" or self.flops >= self.total:
            return self.kind
        return f"work, stopped by the clock at {100 * self.flops / self.total:.0f}% of it"

    def row_flops(self, seq_len):
        """Training FLOPs of one sequence: 3 x its forward's (matmuls and attention)."""
        if seq_len not in self._row_flops:
            from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count
            attention = {}
            op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
            if op is not None:  # CPU attention kernel, which FlopCounterMode does not know
                attention[op] = lambda q, k, v, *a, **kw: sdpa_flop_count(q, k, v)
            device = next(self.model.parameters()).device
            idx = torch.zeros(1, seq_len, dtype=torch.long, device=device)
            was_training = self.model.training
            self.model.eval()   # no dropout: the count draws nothing from the RNG
            try:
                with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=attention) as count:
                    self.model(idx)
            finally:
                self.model.train(was_training)
            self._row_flops[seq_len] = 3 * count.get_total_flops()
        return self._row_flops[seq_len]


def fresh_text(n_bytes=FRESH_BYTES + 1):
    """Text from the same grammar that no run can have seen: a seed drawn at random now.
    The grader scores it beside val; a model that learnt the val split itself shows a gap."""
    seed = int.from_bytes(os.urandom(8), "little")
    return torch.frombuffer(bytearray(generate(seed, n_bytes)), dtype=torch.uint8).clone()


@torch.no_grad()
def evaluate_bpb(model, device, seq_len, max_bytes=EVAL_BYTES, batch_size=32, data=None):
    """Bits per byte on the first `max_bytes` predicted bytes of val (or of `data`): the
    same bytes for any seq_len (windows of seq_len, then one shorter tail window).
    `model(idx)` takes (B, T) int64 and returns (B, T, 256) logits; loss summed in float32."""
    data = load_split("val") if data is None else data
    n = min(max_bytes, len(data) - 1)
    x_all, y_all = data[:n].long(), data[1:n + 1].long()
    was_training = model.training
    model.eval()
    full = n // seq_len
    chunks = []
    for i in range(0, full, batch_size):
        j = min(i + batch_size, full)
        chunks.append((x_all[i * seq_len:j * seq_len].view(-1, seq_len),
                       y_all[i * seq_len:j * seq_len].view(-1, seq_len)))
    if n > full * seq_len:
        chunks.append((x_all[full * seq_len:].view(1, -1), y_all[full * seq_len:].view(1, -1)))
    total_nats = 0.0
    for x, y in chunks:
        logits = model(x.to(device))
        assert logits.shape == (*x.shape, VOCAB_SIZE), f"bad logits shape {tuple(logits.shape)}"
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB_SIZE), y.to(device).reshape(-1),
                               reduction="sum")
        total_nats += loss.item()
    model.train(was_training)
    return total_nats / (n * math.log(2))


def grader_check(model, val_bpb):
    """Run by the lm grader after val_bpb (loop/run/graders/lm.py): the val split is fixed and
    this file is readable, so train.py could train on val itself. A model that did scores
    far better on val than on fresh text from the same grammar (a seed drawn now, that no
    run can have seen): refused with the reason returned. None: passed."""
    fresh_bpb = evaluate_bpb(model, "cpu", EVAL_SEQ_LEN, max_bytes=FRESH_BYTES, data=fresh_text())
    print(f"fresh_text_bpb: {fresh_bpb:.6f}")
    if val_bpb < fresh_bpb - max(LEAK_MARGIN, LEAK_SHARE * fresh_bpb):
        return (f"leak check failed: val_bpb {val_bpb:.4f} is {fresh_bpb - val_bpb:.4f} below "
                f"fresh text from the same grammar (was the model trained on the val split?)")
    return None


if __name__ == "__main__":  # `python prepare.py` builds the cache and shows a sample
    for split in ("train", "val"):
        print(f"{split}: {len(load_split(split)):,} bytes at {_path(split)}")
    print(bytes(load_split("train")[:600].tolist()).decode())
