"""Handlers for workers with ``isolation="process"``: module-level, so a child process imports
them by name. Each leaves a mark the test reads in the folder the event names
(``event.data["dir"]``): ``start-<n>-<pid>`` when it starts, ``end-<n>-<pid>`` when it ends
(``n``: ``event.data["n"]``)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from pgque.core import Event

__all__ = [
    "mark",
    "marks",
    "pid_alive",
    "hang",
    "hang_async",
    "exit_abruptly",
    "fail",
    "ok",
    "hang_or_ok",
    "exit_or_ok",
]


def _data(event: Event) -> dict[str, Any]:
    data = event.data
    if not isinstance(data, dict):
        raise TypeError(f"these handlers take an object of data, not {data!r}")
    return data


def mark(event: Event, what: str) -> None:
    """Leave ``<what>-<n>-<pid>`` in the event's folder."""
    data = _data(event)
    folder = Path(str(data["dir"]))
    (folder / f"{what}-{data['n']}-{os.getpid()}").touch()


def marks(folder: Path, what: str) -> list[tuple[int, int]]:
    """Return the ``(n, pid)`` of each *what* mark in *folder*, in order of n then pid."""
    found = []
    for path in folder.glob(f"{what}-*-*"):
        _, n, pid = path.name.split("-")
        found.append((int(n), int(pid)))
    return sorted(found)


def pid_alive(pid: int) -> bool:
    """Return True while process *pid* exists (and is not a zombie of ours)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def hang(event: Event) -> None:
    """Start, then never return."""
    mark(event, "start")
    while True:
        time.sleep(60)


async def hang_async(event: Event) -> None:
    """Start, then never return (an ``async def`` one)."""
    mark(event, "start")
    await asyncio.Event().wait()  # set by no one


def exit_abruptly(event: Event) -> None:
    """Start, then end the process without returning (as a crash would)."""
    mark(event, "start")
    os._exit(3)


class Refused(Exception):
    """A handler's failure that cannot be rebuilt from its args (it takes two)."""

    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what} (code {code})")


def fail(event: Event) -> None:
    """Start, then raise ValueError, or Refused with ``event.data["refused"]``."""
    mark(event, "start")
    if _data(event).get("refused"):
        raise Refused("refused", 7)
    raise ValueError(f"bad input {_data(event)['n']}")


def ok(event: Event) -> None:
    """Start, sleep ``event.data.get("sleep", 0)`` seconds, end."""
    mark(event, "start")
    time.sleep(float(_data(event).get("sleep", 0)))
    mark(event, "end")


def hang_or_ok(event: Event) -> None:
    """:func:`hang` on the first message (``n == 0``), :func:`ok` on the others."""
    (hang if _data(event)["n"] == 0 else ok)(event)


def exit_or_ok(event: Event) -> None:
    """:func:`exit_abruptly` on the first message (``n == 0``), :func:`ok` on the others."""
    (exit_abruptly if _data(event)["n"] == 0 else ok)(event)
