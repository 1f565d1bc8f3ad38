"""Protected grader: plays EPISODES episodes of env.py with agent.Agent and prints the
success rate, as AgentBench reports an agent's success rate per environment.

Episodes are drawn from $AUTORESEARCH_SEED, so repeated runs differ the way repeated
evaluations of a sampling agent do; the loop's `noise` judge repeats runs accordingly.
An agent that raises or loops fails the episode, it does not crash the grading.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import env  # noqa: E402  (protected, from this pristine copy)
import agent  # noqa: E402  (the attempt's agent)

EPISODES = 40


def play(seed):
    episode, policy = env.Episode(seed), agent.Agent()
    observation = episode.question
    while not episode.done:
        observation = episode.step(str(policy.act(observation)))
    return episode.success


def main():
    base = 1000 * int(os.environ.get("AUTORESEARCH_SEED", "0"))
    wins = 0
    for i in range(EPISODES):
        try:
            wins += play(base + i)
        except Exception as exc:   # a broken agent fails the episode
            print(f"episode {i}: agent raised {type(exc).__name__}: {exc}")
    print(f"episodes:     {EPISODES}")
    print(f"success_rate: {wins / EPISODES:.4f}")


if __name__ == "__main__":
    main()
