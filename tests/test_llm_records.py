"""Records that speak: the proposal's own time in results.tsv, the console line and MLflow;
a crash's reason names the exception of the run's last traceback."""
from __future__ import annotations

import csv

from openai_server import Reply
from llm_task import llm_config

from loop.engine.engine import Engine
from loop.run.runner import exception_error

CRASHING = """Description: use numpy for the score

train.py
```python
<<<<<<< SEARCH
X = 3.0
=======
X = float(np.float64(1.0))
>>>>>>> REPLACE
```
"""


def _rows(repo, tag="llm"):
    with open(repo / ".autoresearch" / tag / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_proposal_time_and_the_crashing_exception_are_recorded(toy_repo, mlflow_uri,
                                                               openai_server):
    openai_server.script(Reply(CRASHING, delay_s=1.2))       # a slow model
    lines: list[str] = []
    stop = Engine(llm_config(toy_repo, openai_server, iterations=1), out=lines.append).run()
    assert stop.exit_code == 0, stop.message
    header = open(toy_repo / ".autoresearch" / "llm" / "results.tsv").readline().split("\t")
    assert header[:5] == ["commit", "score", "memory_gb", "status", "description"]
    # extra columns go at the end
    assert [h.strip() for h in header[-2:]] == ["proposal_s", "proposer"]
    baseline, crash = _rows(toy_repo)
    assert baseline["proposal_s"] in ("", "0.0")               # nothing was proposed
    assert float(crash["proposal_s"]) >= 1.2
    assert crash["status"] == "crash"
    assert crash["reason"].startswith("NameError: name 'np' is not defined")
    assert "exit code 1" in crash["reason"]
    shown = [line for line in lines if "use numpy" in line and "proposal" in line]
    assert shown, lines                                        # the console line says it too

    from mlflow.tracking import MlflowClient
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("autoresearch/toy").experiment_id],
                              "tags.iteration = '1'")
    assert runs and runs[0].data.metrics["proposal_s"] >= 1.2


def test_the_last_traceback_names_the_crash():
    log = ("step 1 loss 2.3\nTraceback (most recent call last):\n  File \"a.py\", line 1\n"
           "KeyError: 'lr'\n\nDuring handling of the above exception, another exception "
           "occurred:\n\nTraceback (most recent call last):\n  File \"train.py\", line 9, in "
           "<module>\n    x = np.zeros(3)\nNameError: name 'np' is not defined\n")
    assert exception_error(log, "exit code 1") == \
        "NameError: name 'np' is not defined (exit code 1)"
    assert exception_error("Segmentation fault\n", "killed by SIGSEGV") == "killed by SIGSEGV"
    dotted = "Traceback (most recent call last):\n  File \"t.py\"\ntorch.OutOfMemoryError: CUDA\n"
    assert exception_error(dotted, "exit code 1").startswith("torch.OutOfMemoryError: CUDA")
