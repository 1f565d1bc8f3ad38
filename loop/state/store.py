"""Where an MLflow store is and how it is opened: its URI, its files on disk, a new SQLite
store made atomically, MLflow's console noise turned off. Writes no run: the Tracker
(loop/state/tracking.py) and finalize's tracking use these."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

from loop.pids import alive


def resolve_uri(uri: str | None) -> str:
    """The store's URI without importing MLflow: the given one, else $MLFLOW_TRACKING_URI,
    else MLflow's default (mlflow.db in the working directory), made absolute."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    path = sqlite_path(uri)
    if path is not None and not path.is_absolute():
        uri = f"sqlite:///{Path.cwd() / path}"
    elif "://" not in uri:               # a plain folder: MLflow's file store
        uri = str(Path(uri).resolve())
    return uri


def sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    rest = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(rest) if rest not in ("", ":memory:") else None


def store_paths(uri: str) -> list[Path]:
    """What a local store puts on disk: the database (and its journal) and the artifacts."""
    path = sqlite_path(uri)
    if path is None:
        return [Path(uri)] if "://" not in uri else []
    return [path, path.with_name(path.name + "-journal"), path.parent / ARTIFACTS_DIR]


ARTIFACTS_DIR = "mlartifacts"
HTTP_TIMEOUT_S = 20            # one request to a tracking server (MLflow's default: 120 s)


def quiet_mlflow() -> None:
    """MLflow, SQLAlchemy and Alembic log errors and table creation on the console, and
    MLflow prints `View run ... at: http://...` for each run a server ends; the tracker says
    in one line what matters to the loop instead. A user's own setting of these wins."""
    import logging
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")   # the tracker retries
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(HTTP_TIMEOUT_S))
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    import mlflow  # noqa: F401  (configures its loggers on import; ours apply after)
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False


def create_store(uri: str) -> None:
    """A new SQLite store is created beside its final path and moved into place only once
    MLflow has finished its (non-transactional) schema creation: a kill midway leaves a
    stray temp file, never a half-made store. Two nights starting at once on a new store
    each make one; the first in place is the store, the other's is dropped (a store in use
    is never replaced), and neither removes the other's temp file while it is being made."""
    path = sqlite_path(uri)
    if path is None or path.exists():
        return
    from mlflow.tracking import MlflowClient
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.creating-*"):
        owner = stale.name.rsplit(".creating-", 1)[1].split("-", 1)[0]
        if not (owner.isdigit() and alive(int(owner))):
            stale.unlink(missing_ok=True)       # left by a start that was killed
    tmp = path.with_name(f".{path.name}.creating-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    MlflowClient(f"sqlite:///{tmp}").search_experiments(max_results=1)
    try:
        os.link(tmp, path)                      # fails if another start placed one first
    except FileExistsError:
        pass
    except OSError:                             # no hard links on this filesystem
        if not path.exists():
            os.replace(tmp, path)
    tmp.unlink(missing_ok=True)



def artifact_location(uri: str) -> str | None:
    """Artifacts next to a local store, not in the working directory (MLflow's default)."""
    path = sqlite_path(uri)
    return (path.parent / ARTIFACTS_DIR).as_uri() if path is not None else None
