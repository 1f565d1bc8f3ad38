"""Protected graders the engine runs by path, in the task's own interpreter (they import only
the standard library and torch). `lm`: language models handed over as torch.export programs
(handover.py in the training run, lm.py in the grader); see docs/tasks.md. Their paths and
kinds are named in loop/setup/graders.py, where a task is loaded."""
