"""Errors the CLI turns into a one-line message and exit code 2 (bad input)."""


class UsageError(Exception):
    """Bad input from the user: a config, a task folder, a flag. The message is one line."""


class ConfigError(UsageError):
    pass


class TaskError(UsageError):
    pass
