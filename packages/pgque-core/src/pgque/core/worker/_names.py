"""The names a worker gives itself (``host:pid``, in logs and thread names) and its claims
(``host:pid:slot``, the ``holder`` an operator sees on a leased group); a scheduler names
itself the same way."""

from __future__ import annotations

import importlib.metadata
import os
import socket

from pgque.core.validation import MAX_HOLDER_CHARS

__all__ = ["default_name", "holder_label", "holder_prefix", "installed_version"]


def default_name() -> str:
    """Return ``host:pid``, the default worker name used in logs and thread names."""
    return f"{socket.gethostname()}:{os.getpid()}"


def holder_label(slot: int | str) -> str:
    """Return ``host:pid:slot``, the ``holder`` of every claim a worker slot makes.

    *slot* is the slot's index, 0 to ``concurrency - 1`` (a thread of :class:`Worker`, a task
    of :class:`AsyncWorker`), or ``queued`` for a lease claimed ahead into the worker's buffer
    (``prefetch``), not yet taken by a slot. It is what ``GroupInfo.lease_holder`` shows an
    operator: the machine, the process and the slot holding a group. A host name too long
    for the 200 characters of a holder is cut. Raises nothing.
    """
    tail = f":{os.getpid()}:{slot}"
    host = socket.gethostname() or "localhost"
    return host[: MAX_HOLDER_CHARS - len(tail)] + tail


def holder_prefix() -> str:
    """Return ``host:pid``, the part of every :func:`holder_label` of this process before its
    slot: what finds a worker's leases among the groups' holders (``WorkerInfo.holder``).
    Raises nothing."""
    return holder_label("").removesuffix(":")


def installed_version() -> str:
    """Return the version of pgque-core installed (what a worker's heartbeats report), or
    ``unknown`` when it runs from a source tree without its distribution's metadata."""
    try:
        return importlib.metadata.version("pgque-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
