"""The Slurm backend: each run is a Slurm job (`--backend slurm`), submitted with submitit.

The head (where `autoresearch run` runs) keeps git, the journal, the judge and MLflow, as with
Ray. A job receives what a Ray task receives (the attempt commit's tree, the guard's digests,
the data outside git it needs that its node does not see: loop/run/backends/reach.py, decided
by one short probe job at start, shipped as one tar in the job folder) and runs the same
function (`run_remote` of loop/run/backends/remote.py: `run_in_folder`, so the same run spec,
sandbox, time box, reaping and protected grading) in a temporary folder on its node; its
result comes back through submitit's pickles in the tag's slot folder, which the nodes must
see (a shared file system, as submitit requires). Resources come from the config's `slurm:`
section (loop/setup/config.py's SlurmConfig); the job's time limit is the run's whole time
box: budget + grace + the grading limit + a margin for start-up.

Faults of the cluster are named, never counted as the candidate's own crash: a job cancelled
(`scancel`), past its time limit, out of memory, failed on a node, preempted, or pending past
`pending_limit_s` is a `crash` whose detail says so. A preempted job or one whose node failed
is submitted once more (the run never reported, so running it again is safe).

Every job of a tag carries one job name (`autoresearch-<tag>-<hash of its folder>`): closing
the backend (the loop's end, Ctrl-C) cancels the tag's jobs (once the jobs whose results
were read have left the queue, so that sacct says COMPLETED of them), and so does opening
it, which is how a resume after kill -9 of the engine ends the jobs the dead engine left in
the queue; the resumed engine then runs those runs again (the journal has no result for
them), so none is lost and none is counted twice."""
from __future__ import annotations

import hashlib
import math
import shutil
import subprocess
import time
from pathlib import Path

from loop.errors import UsageError
from loop.run.backends.base import failed
from loop.run.backends.devices import thread_env
from loop.run.backends.reach import needs_of, pack, plan, probe
from loop.run.backends.remote import RemoteBackend, land, run_remote
from loop.run.runner import RunResult
from loop.run.spec import RunJob
from loop.setup.config import SlurmConfig

RETRIES = 1          # a preempted job, or one whose node failed, is submitted once more
MARGIN_S = 120.0     # the job's time limit beyond the run's own: start-up, transfers
PROBE_MIN = 5        # the time limit of the start job that checks what a node sees
PROBE_ID = "probe"   # its id among the backend's jobs (never a run's)
POLL_S = 0.5         # how often a job's result file is looked for
STATE_EVERY = 4      # ... and its state asked of sacct every this many polls
ACTIVE = {"PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED",
          "UNKNOWN", "READY", "RESIZING", "SIGNALING", "STAGE_OUT"}
RETRIED = {"PREEMPTED", "NODE_FAIL", "BOOT_FAIL"}
REASONS = {
    "CANCELLED": "cancelled on the cluster (scancel)",
    "TIMEOUT": "past its Slurm time limit",
    "OUT_OF_MEMORY": "out of memory on its node (slurm.mem_gb)",
    "NODE_FAIL": "failed with its node",
    "BOOT_FAIL": "failed with its node (boot failure)",
    "PREEMPTED": "preempted",
    "DEADLINE": "past its deadline",
    "REVOKED": "revoked",
}


def job_name(slot_root: Path) -> str:
    """One name for all the jobs of one tag of one repository (slot_root is per tag)."""
    digest = hashlib.sha256(str(slot_root.resolve()).encode()).hexdigest()[:8]
    return f"autoresearch-{slot_root.name}-{digest}"


def cancel_by_name(name: str) -> None:
    """scancel every job of this user with `name`, queued or running."""
    subprocess.run(["scancel", "--name", name, "--user", _user()], capture_output=True,
                   timeout=30, check=False)


def queued_ids(name: str) -> set[str]:
    """The ids of this user's jobs with `name` that Slurm still holds (queued, running,
    completing)."""
    try:
        out = subprocess.run(["squeue", "-h", "--name", name, "--user", _user(), "-o", "%i"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return set(out.split())


def _user() -> str:
    import getpass
    return getpass.getuser()


def time_limit_min(task) -> int:
    seconds = task.time_budget_s + task.grace_s + MARGIN_S
    if task.grade_command:
        seconds += task.grade_timeout_s
    return max(1, math.ceil(seconds / 60))


def sbatch_parameters(options, task, name: str) -> dict:
    """submitit's SlurmExecutor parameters: what each config key becomes in the sbatch script
    (docs/parallel.md lists them)."""
    params: dict = {"job_name": name, "time": time_limit_min(task),
                    "signal_delay_s": 0, "additional_parameters": extra_lines(options.extra)}
    if options.partition:
        params["partition"] = options.partition
    if options.gpus_per_run:
        params["gpus_per_node"] = options.gpus_per_run
    if options.cpus_per_run:
        params["cpus_per_task"] = options.cpus_per_run
    if options.mem_gb:
        params["mem"] = f"{options.mem_gb:g}GB"
    if options.account:
        params["account"] = options.account
    if options.qos:
        params["qos"] = options.qos
    return params


def extra_lines(lines) -> dict:
    """`--constraint=a100`, `--exclusive` or `--reservation night`: sbatch options as
    submitit's `additional_parameters` (key without dashes, value or True)."""
    out: dict = {}
    for line in lines or ():
        text = str(line).strip().removeprefix("#SBATCH").strip().lstrip("-")
        key, _, value = text.replace("=", " ", 1).partition(" ")
        out[key.replace("-", "_")] = value.strip() or True
    return out


class SlurmBackend(RemoteBackend):
    kind = "slurm"

    def __init__(self, workspace, task, task_rel: str, guard, workers: int,
                 slot_root: Path, devices: tuple[str, ...] | None = None, limits=None,
                 slurm=None):
        try:
            import submitit
        except ImportError:
            raise UsageError("--backend slurm needs submitit: pip install "
                             "'autoresearch[slurm]' (or -e '.[slurm]' in this repo)") from None
        if not all(shutil.which(tool) for tool in ("sbatch", "sacct", "scancel", "squeue")):
            raise UsageError("--backend slurm needs Slurm's sbatch, sacct, scancel and "
                             "squeue on PATH")
        problem = _sacct_problem()
        if problem:      # without it submitit never learns a job ended without a result
            raise UsageError(f"--backend slurm needs Slurm accounting (slurmdbd): `sacct` "
                             f"fails here: {problem}")
        super().__init__(workspace, task, task_rel, guard, workers, limits)
        self.options = slurm or SlurmConfig()
        self.name = job_name(slot_root)
        self._landed: set[str] = set()  # Slurm ids of jobs whose result was read
        cancel_by_name(self.name)       # what an engine killed before this one left queued
        self.folder = slot_root / "slurm"
        self.executor = submitit.SlurmExecutor(folder=self.folder, max_num_timeout=0)
        self.executor.update_parameters(**sbatch_parameters(self.options, task, self.name))
        self.slot_env = thread_env(self.options.cpus_per_run or 1)
        needs = needs_of(task, guard)
        self.reach = plan(needs, [self._probe(needs)]) if needs else None
        self.data = self._ship(pack(self.reach)) if self.reach and self.reach.shipped else None

    def _probe(self, needs) -> dict:
        """`probe` in one short job on a node of the runs' kind (UsageError if it fails)."""
        import submitit
        executor = submitit.SlurmExecutor(folder=self.folder, max_num_timeout=0)
        executor.update_parameters(**{**sbatch_parameters(self.options, self.task, self.name),
                                      "time": PROBE_MIN})
        sjob = executor.submit(probe, needs)
        try:
            out, why, _ = self._wait(PROBE_ID, sjob)
        except BaseException:
            sjob.cancel(check=False)
            raise
        if out is None:
            raise UsageError(f"slurm job {sjob.job_id}, which checks what a node sees of the "
                             f"task's data, {why} (its log: {sjob.paths.stderr})")
        self._clean(sjob)
        return out

    def _ship(self, data: bytes) -> str:
        """The shipped data, once, in the job folder every node sees (submitit needs it)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"data-{hashlib.sha256(data).hexdigest()[:12]}.tar"
        if not path.exists():
            partial = path.with_suffix(".partial")
            partial.write_bytes(data)
            partial.replace(path)
        return str(path)

    def _run(self, job: RunJob, archive: bytes) -> RunResult:
        """Submitted (again, once, when preempted or its node failed) until it lands."""
        tries = []
        for _ in range(1 + RETRIES):
            with self._lock:
                if job.job_id in self._cancelled:
                    return failed(job, "cancelled")
                sjob = self.executor.submit(run_remote, archive, job, self.task,
                                            self.task_rel, self.guard, self.reach, self.data,
                                            self.slot_env, self.limits)
                self._jobs[job.job_id] = sjob
            out, why, state = self._wait(job.job_id, sjob)
            if out is not None and out.get("metric") is None:
                # a run killed by Slurm (scancel, time limit, preemption) still reports, as a
                # run killed by a signal: the job's state says whose fault it was
                why, state = self._whose_fault(job.job_id, sjob)
                if why:
                    land(job, out)            # its log, for the record
                    out = None
            if out is not None:
                return land(job, out)
            tries.append(f"slurm job {sjob.job_id} {why}")
            if state not in RETRIED:
                break
        return failed(job, "; then ".join(tries))

    def _whose_fault(self, job_id: str, sjob) -> tuple[str, str]:
        """Why Slurm ended a run that reported no metric ("" when Slurm did not), and the
        job's final state."""
        state = _final_state(sjob)
        if job_id in self._cancelled:
            return "cancelled", state
        return REASONS.get(state, ""), state

    def _wait(self, job_id: str, sjob) -> tuple[dict | None, str, str]:
        """The job's result, or why there is none and its last Slurm state."""
        sjob._results_timeout_s = 2     # submitit waits 15 s for a result that never comes
        submitted, polls, state = time.monotonic(), 0, "PENDING"
        limit = self.options.pending_limit_s
        while not sjob.paths.result_pickle.exists():
            polls += 1
            if polls % STATE_EVERY == 0:
                state = _state(sjob)
                if state not in ACTIVE:
                    break
                if state == "PENDING" and limit and time.monotonic() - submitted > limit:
                    reason = _pending_reason(sjob.job_id)
                    sjob.cancel(check=False)
                    return None, f"pending past slurm.pending_limit_s ({limit:g} s)" + \
                        (f": {reason}" if reason else ""), "PENDING"
            time.sleep(POLL_S)
        try:
            out = sjob.result()
        except Exception as exc:       # UncompletedJobError (no result) or FailedJobError
            state = _final_state(sjob)
            if job_id in self._cancelled:
                return None, "cancelled", state
            if state in REASONS:
                return None, REASONS[state], state
            last = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ""
            return None, f"failed ({state}){': ' + last if last else ''}", state
        self._clean(sjob)
        with self._lock:
            self._landed.add(str(sjob.job_id))
        return out, "", "COMPLETED"

    def _clean(self, sjob) -> None:
        """The job's pickles hold the commit's archive and its outputs: gone once landed."""
        for path in (sjob.paths.submitted_pickle, sjob.paths.result_pickle,
                     sjob.paths.submission_file):
            Path(path).unlink(missing_ok=True)

    def _kill(self, sjob) -> None:
        sjob.cancel(check=False)

    def close(self, wait_s: float = 15.0) -> None:
        super().close(wait_s)
        self._let_landed_jobs_end(wait_s)
        cancel_by_name(self.name)
        if self.data:
            Path(self.data).unlink(missing_ok=True)

    def _let_landed_jobs_end(self, wait_s: float) -> None:
        """A job whose result was read is still RUNNING or COMPLETING for a moment while its
        process exits: cancelled by name then, its accounting would say CANCELLED for a run
        that completed. Such jobs are given up to `wait_s` to leave the queue."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with self._lock:
                landed = set(self._landed)
            if not landed & queued_ids(self.name):
                return
            time.sleep(POLL_S)


def _sacct_problem() -> str:
    """Why `sacct` does not answer ("" when it does)."""
    try:
        done = subprocess.run(["sacct", "-n", "-X", "-S", "now", "-o", "JobID"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1][:200] if lines else f"exit status {done.returncode}"


def _pending_reason(job_id: str) -> str:
    """Why Slurm holds the job (squeue's reason: Resources, Priority, BeginTime, ...)."""
    try:
        out = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%r"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return "" if out in ("", "None", "(null)") else out


def _final_state(sjob, wait_s: float = 15.0) -> str:
    """The job's state once Slurm has finished it (a job whose process wrote its result is
    still RUNNING or COMPLETING for a moment)."""
    deadline = time.monotonic() + wait_s
    state = _state(sjob)
    while state in ACTIVE and time.monotonic() < deadline:
        time.sleep(POLL_S)
        state = _state(sjob)
    return state


def _state(sjob) -> str:
    """The job's Slurm state from sacct, its first word ("CANCELLED by 0" -> CANCELLED)."""
    try:
        state = sjob.get_info(mode="force").get("State") or "UNKNOWN"
    except Exception:
        return "UNKNOWN"
    return state.split()[0].rstrip("+")
