"""What is given before the loop starts: the run config, task.yaml, the search space, the
checks made before anything is created."""
