"""`autoresearch init`'s inference: reading a user's repo (nothing is run) and guessing the
task.yaml and autoresearch.yaml it needs (onboard.py is the entry point; shapes/ the repo
shapes it recognises). Reached only from the CLI. What a task *is* at run time, and how
task.yaml loads, lives below in loop/setup/, and what a script says (read without running
it) in loop/script/; nothing there imports this package."""
