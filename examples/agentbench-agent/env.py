"""Protected: a tiny operating-system environment in AgentBench's style. Each episode is a
small file tree and a question; the agent acts with `ls DIR`, `cat FILE` or
`answer TEXT`, sees each action's output, and succeeds if it answers right within
MAX_TURNS. Episodes are generated from a seed.
"""
import random

MAX_TURNS = 8
WORDS = "alpha beta gamma delta omega sigma kappa theta".split()


def make_episode(seed):
    rng = random.Random(seed)
    files = {}
    n_logs = rng.randint(2, 5)
    errors = 0
    for i in range(n_logs):
        has_error = rng.random() < 0.5
        errors += has_error
        lines = [f"{rng.choice(WORDS)} ok" for _ in range(3)] + (["ERROR disk full"] if has_error else [])
        rng.shuffle(lines)
        files[f"/var/log/app{i}.log"] = "\n".join(lines)
    key = rng.choice(WORDS)
    value = rng.randint(10, 99)
    conf = [f"{w} = {rng.randint(10, 99)}" for w in WORDS if w != key] + [f"{key} = {value}"]
    rng.shuffle(conf)
    files["/etc/app/settings.conf"] = "\n".join(conf)
    files["/home/user/notes.txt"] = "nothing to see here"
    if rng.random() < 0.5:
        question, answer = "How many files in /var/log contain the word ERROR?", str(errors)
    else:
        question, answer = f"What is the value of {key} in the app's settings under /etc?", str(value)
    return files, question, answer


class Episode:
    def __init__(self, seed):
        self.files, self.question, self.answer = make_episode(seed)
        self.turns, self.done, self.success = 0, False, False

    def step(self, action):
        """Apply one action; return its output (what the agent observes next)."""
        self.turns += 1
        verb, _, arg = action.strip().partition(" ")
        arg = arg.strip().rstrip("/")
        if verb == "answer":
            self.done, self.success = True, arg == self.answer
            return "submitted"
        if self.turns >= MAX_TURNS:
            self.done = True
            return "out of turns"
        if verb == "ls":
            names = sorted({p[len(arg) + 1:].split("/")[0] for p in self.files
                            if p.startswith(arg + "/")})
            return "\n".join(names) if names else f"ls: {arg}: no such directory"
        if verb == "cat":
            return self.files.get(arg, f"cat: {arg}: no such file")
        return f"unknown action: {verb}"
