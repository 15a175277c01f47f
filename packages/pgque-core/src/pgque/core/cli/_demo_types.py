"""The records the demo's workers hand back, shared by the workers and the checks (no worker
import here, so that the command line starts fast)."""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "Flag",
    "SharedInt",
    "WorkerSpec",
    "HandledRecord",
    "SettledRecord",
    "WorkerResult",
    "write_result",
    "read_result",
]


class Flag(Protocol):
    """A stop signal: a threading or multiprocessing Event."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    def set(self) -> None: ...


class SharedInt(Protocol):
    """A counter shared between processes: a multiprocessing Value."""

    value: int

    def get_lock(self) -> Any: ...


@dataclass(frozen=True)
class WorkerSpec:
    """What one demo worker needs to run: where, how, and where to write its records."""

    label: str
    url: str
    options: dict[str, Any]
    concurrency: int
    visibility: float
    work_s: float
    result_path: str


#: (group, seq, message_id, attempt, priority, claimed_s, enter_ns, exit_ns, enter_wall_ns,
#:  created_s, worker)
HandledRecord = tuple[str, int, int, int, int, float, int, int, int, float, str]
#: (group, message_id, outcome, settled_wall_ns)
SettledRecord = tuple[str, int, str, int]


@dataclass
class WorkerResult:
    """What a demo worker hands back to the demo: its records, report and any fatal error."""

    label: str
    handled: list[HandledRecord]
    settled: list[SettledRecord]
    report: dict[str, float]
    error: str | None = None


def write_result(path: str, result: WorkerResult) -> None:
    """Write *result* to *path* atomically (a reader never sees half a file)."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def read_result(path: Path, label: str) -> WorkerResult:
    """Load a worker's result; a missing file becomes a result carrying an error."""
    try:
        with path.open("rb") as fh:
            loaded = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        return WorkerResult(label, [], [], {}, f"no result ({type(exc).__name__})")
    if not isinstance(loaded, WorkerResult):
        return WorkerResult(label, [], [], {}, "unreadable result")
    return loaded
