"""One experiment run, time-boxed and confined: the runner, the sandbox and the reaper, output
capture, declared endpoints, protected grading, where runs execute (backends)."""
