"""The YAML text of the files an adapter writes (task.yaml and its side files), readable.

Formatting only: no file is written here, nothing about any benchmark is known."""


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
