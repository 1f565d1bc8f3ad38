"""A backend that runs nothing, for the engine's fast tests (tests/test_night.py): a job's
metric is `score(files, job)` of its commit's task files, answered on a thread at once, or
when the test releases its iteration. Everything else the engine does is real: git, the
journal, the judge, results.tsv and MLflow. It implements loop/run/backends/base.py's
interface, nothing more."""
from __future__ import annotations

import threading
from collections.abc import Callable

from loop.run.runner import RunResult
from loop.words import Status


class TableBackend:
    def __init__(self, score: Callable[[dict, object], float | None], held=(), **kw):
        self.score, self.workspace, self.task_rel = score, kw["workspace"], kw["task_rel"]
        self.slots = kw["workers"]
        self.running: dict[str, object] = {}
        self.lock = threading.Lock()
        self.gates = {n: threading.Event() for n in held}  # iterations answered on release
        self.submitted: list = []                        # every job, in the order given

    @classmethod
    def scoring(cls, score, held=()):
        """The factory the Engine takes (`backend=`): the engine gives the keywords."""
        return lambda **kw: cls(score, held, **kw)

    def free(self) -> int:
        with self.lock:
            return self.slots - len(self.running)

    def submit(self, job, done) -> None:
        files = self.workspace.read_at(job.commit, self.task_rel, ["train.py"])
        with self.lock:
            self.running[job.job_id] = job
            self.submitted.append(job)
        threading.Thread(target=self._answer, args=(job, files, done), daemon=True).start()

    def _answer(self, job, files, done) -> None:
        gate = self.gates.get(job.iteration)
        if gate is not None:
            gate.wait(60)
        value = self.score(files, job)
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        job.log_path.write_text(f"score: {value}\n")
        status = Status.OK if value is not None else Status.CRASH
        with self.lock:
            self.running.pop(job.job_id, None)
        done(job, RunResult(status, value, 0 if value is not None else 1, 0.01, None,
                            job.log_path, "" if value is not None else "exit 1"))

    def release(self, n: int) -> None:
        self.gates[n].set()

    def cancel(self, job_id: str) -> None:
        pass        # its answer comes anyway, as with a real kill

    def close(self, wait_s: float = 15.0) -> None:
        for gate in self.gates.values():
            gate.set()
