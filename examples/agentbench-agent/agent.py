"""Editable: the agent under improvement. `Agent().act(observation)` returns the next action
(`ls DIR`, `cat FILE` or `answer TEXT`); the protected grader (evaluate.py) plays episodes of
env.py with it and reports the success rate.

Offline stand-in: a scripted policy whose budgets are plain numbers (mutate can tune them).
A real AgentBench agent calls a model in `act` (its key passed with `pass_env`) and the loop
improves its prompt and code the same way.
"""
import re

LS_DEPTH = 1            # directory levels to list before reading files
MAX_READS = 2           # files to read before answering


class Agent:
    def __init__(self):
        self.question, self.queue, self.read, self.found = None, [], 0, []

    def act(self, observation):
        if self.question is None:                     # the first observation is the question
            self.question = observation
            root = "/var/log" if "ERROR" in observation else "/etc"
            self.queue = [("ls", root, 0)]
            self.last = None
            return self._next()
        kind, path, depth = self.last
        if kind == "ls":
            for name in observation.splitlines():
                child = f"{path}/{name}"
                if "." in name:
                    self.queue.append(("cat", child, depth))
                elif depth + 1 <= LS_DEPTH:
                    self.queue.append(("ls", child, depth + 1))
        else:
            self.found.append(observation)
        return self._next()

    def _next(self):
        if self.queue and self.read < MAX_READS:
            self.last = self.queue.pop(0)
            self.read += self.last[0] == "cat"
            return f"{self.last[0]} {self.last[1]}"
        return f"answer {self._answer()}"

    def _answer(self):
        if "ERROR" in self.question:
            return str(sum("ERROR" in text for text in self.found))
        key = re.search(r"value of (\w+)", self.question)
        for text in self.found:
            m = key and re.search(rf"^{key.group(1)} = (\d+)$", text, re.M)
            if m:
                return m.group(1)
        return "unknown"


if __name__ == "__main__":   # the run step: play two practice episodes, show the transcript
    import env
    for seed in (1, 2):
        episode, agent = env.Episode(seed), Agent()
        observation = episode.question
        while not episode.done:
            action = agent.act(observation)
            observation = episode.step(action)
            print(f"[{seed}] {action} -> {observation.splitlines()[0] if observation else ''}")
        print(f"[{seed}] success: {episode.success}")
