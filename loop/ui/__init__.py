"""Commands and views: the CLI, the live progress, status, report, doctor."""
