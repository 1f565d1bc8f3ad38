"""The YAML text of the files an adapter writes (task.yaml and its side files), readable.

Formatting only: no file is written here, nothing about any benchmark is known."""


def dump_task_yaml(data: dict) -> str:
    """task.yaml text for `data`, multi-line strings as readable `|` blocks, every value read
    back the same (the one YAML writer, loop/yaml_io.py)."""
    from loop.yaml_io import dump
    return dump(data)
