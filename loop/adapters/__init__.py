"""Adapters: make a task folder (task.yaml + its files) from another benchmark's task, so
the loop runs it through the generic task interface. Nothing here runs inside the loop
except the protected graders they write."""


def dump_task_yaml(data: dict) -> str:
    """task.yaml text for `data`, multi-line strings as readable `|` blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper, value):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)
    Dumper.add_representer(str, text)
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True)
