"""One experiment run, defined once and run time-boxed and confined: spec, runner, processes,
sandbox, output capture, endpoints, protected grading, check-task, backends."""
