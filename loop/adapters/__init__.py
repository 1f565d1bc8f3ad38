"""Adapters: make a task folder (task.yaml + its files) from another benchmark's task, so
the loop runs it through the generic task interface. Nothing here runs inside the loop
except the protected graders they write.

ADAPTERS names each one (`autoresearch task <name>`) and its `from_args`, which reads the
command's parsed arguments and calls that module's `make_task`; the modules are imported
only when their command runs, and none of them imports this table."""
from loop.registry import Registry

ADAPTERS = Registry("adapter", {
    "mlebench": "loop.adapters.mlebench:from_args",
    "mlagentbench": "loop.adapters.mlagentbench:from_args",
    "mlrbench": "loop.adapters.mlrbench:from_args",
    "mlbench": "loop.adapters.mlbench:from_args",
    "agentbench": "loop.adapters.agentbench:from_args",
})
