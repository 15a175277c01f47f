"""Leases held or settled by a caller's transaction (``settle_in``; docs/transactions.md).

Pure: no I/O. A backend that settles a lease in the caller's transaction keeps one
:class:`HeldLeases`: while the transaction is open its lease needs no renewal (the
transaction holds the group), and once it committed the lease is settled, so the worker's own
settlement of it afterwards is answered True without a round trip (the message was settled
once, in the caller's transaction) instead of failing as a lost lease.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from pgque.core.validation import CheckedSettlement

__all__ = ["HeldLeases", "MAX_SETTLED"]

#: How many committed settlements are remembered for the worker's later settlement of them;
#: the oldest is forgotten first (its later ack then reports the lease lost, as it is).
MAX_SETTLED = 10_000


class HeldLeases:
    """The tokens of leases in an open caller's transaction, and of those it settled."""

    def __init__(self, limit: int = MAX_SETTLED) -> None:
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self._settled: OrderedDict[str, None] = OrderedDict()
        self._limit = limit

    def open(self, token: str) -> None:
        """A transaction holds the lease *token* now."""
        with self._lock:
            self._open.add(token)

    def is_open(self, token: str) -> bool:
        """Whether a transaction holds the lease *token* (its renewal needs no round trip)."""
        return token in self._open

    def close(self, token: str, *, committed: bool) -> None:
        """The transaction holding *token* ended: *committed* (the lease is settled) or not."""
        with self._lock:
            self._open.discard(token)
            if committed:
                self._settled[token] = None
                while len(self._settled) > self._limit:
                    self._settled.popitem(last=False)

    def answer(
        self, settlements: Sequence[CheckedSettlement]
    ) -> tuple[list[CheckedSettlement], list[int]]:
        """Split *settlements*: those still to apply, and the indexes of those whose lease a
        committed transaction settled already (each answered True once, then forgotten)."""
        if not self._settled:
            return list(settlements), []
        rest: list[CheckedSettlement] = []
        done: list[int] = []
        with self._lock:
            for index, item in enumerate(settlements):
                if item.lease.token in self._settled:
                    del self._settled[item.lease.token]
                    done.append(index)
                else:
                    rest.append(item)
        return rest, done

    @staticmethod
    def merge(applied: list[bool], done: list[int], total: int) -> list[bool]:
        """The results of all *total* settlements: True at the indexes in *done*, the
        *applied* results in order elsewhere."""
        out: list[bool] = []
        answers = iter(applied)
        skipped = set(done)
        for index in range(total):
            out.append(True if index in skipped else next(answers))
        return out
