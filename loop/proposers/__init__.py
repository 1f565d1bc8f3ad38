"""Who proposes a change: `Proposer.propose(context) -> Proposal` (base.py), the kinds behind
one registry (registry.py: llm, mutate, tune, hybrid), the LLM's transport, prompts and cost,
and the offline searches over a task's settings. Proposers touch no git and run nothing."""
