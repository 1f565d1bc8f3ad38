"""What the user is told before a night and after a run fails: `check-task` (a task folder
validated and its baseline run once, check_task.py), what the checkout leaves out that the
working folder has (uncommitted.py), and the HOME cache a sandboxed run could not reach
(home_cache.py). Above run/, which it drives; the engine asks it about a failed baseline."""
