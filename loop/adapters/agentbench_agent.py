"""Editable: the agent under improvement, copied into the task folder by
`autoresearch task agentbench` as agent.py. The protected grade.py plays AgentBench's
OS-interaction episodes with it: `Agent().act(description, history)` returns
{"bash": command} (run in the episode's container; its exit code and output come back in
`history`) or {"answer": text}. Its model: AGENT_BASE_URL, AGENT_API_KEY, AGENT_MODEL."""
import os
import re
import sys

TEMPERATURE = 0.0
HISTORY_TURNS = 8

SYSTEM = """You are an assistant operating a Linux (Ubuntu) shell to answer a question or
do a task. Each turn, reply with exactly one of:
Act: bash
```bash
<one command>
```
or
Act: answer(<the exact answer, e.g. a single number>)"""


class Agent:
    def __init__(self):
        import openai
        self.model = os.environ.get("AGENT_MODEL") or "agent"
        self.client = openai.OpenAI(base_url=os.environ.get("AGENT_BASE_URL") or None,
                                    api_key=os.environ.get("AGENT_API_KEY") or "none")

    def act(self, description, history):
        messages: list = [{"role": "system", "content": SYSTEM},
                          {"role": "user", "content": description}]
        for turn in history[-HISTORY_TURNS:]:
            messages.append({"role": "assistant",
                             "content": f"Act: bash\n```bash\n{turn['bash']}\n```"})
            messages.append({"role": "user", "content": f"exit {turn['exit']}\n{turn['output']}"})
        reply = self.client.chat.completions.create(model=self.model, messages=messages,
                                                    temperature=TEMPERATURE)
        text = reply.choices[0].message.content or ""
        answer = re.search(r"Act:\s*answer\((.*)\)", text, re.S)
        if answer:
            return {"answer": answer.group(1).strip()}
        block = re.search(r"```(?:bash)?\n(.*?)```", text, re.S)
        return {"bash": block.group(1).strip()} if block else {"answer": text.strip()}


if __name__ == "__main__":          # the run step: a smoke test that the agent loads
    Agent()
    print("agent: ok")
    sys.exit(0)
