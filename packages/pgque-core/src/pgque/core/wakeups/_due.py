"""When an idle wait ends early for the queue's scheduled messages: :class:`DueWait` (pure, shared
by the blocking and asyncio drivers)."""

from __future__ import annotations

__all__ = ["DueWait"]


class DueWait:
    """Cap ``wait_for_messages`` by the queue's scheduled messages (one per driver).

    A wait never runs past the next due time: a message falling due is news nobody announces.
    *floor* is the shortest such wait (seconds), so a due time that has just passed does not
    make a busy loop. A store where due messages can stay unjoined for a while (PostgreSQL:
    a transaction holds their group's lock, so claims skip them) reports them as
    ``due_now``; successive waits then end after *floor*, twice that, ... up to *backoff_max*
    seconds, and back to *floor* once none is waiting (the backoff is plain state: waits of
    one driver at once may read it out of turn, which only changes how soon one ends).
    """

    def __init__(self, floor: float, backoff_max: float | None = None) -> None:
        self.floor = floor
        self.backoff_max = floor if backoff_max is None else backoff_max
        self._backoff = floor

    def cap(self, timeout: float, due_in: float | None, due_now: bool = False) -> float | None:
        """Return how long a wait of *timeout* seconds may last, or None: the whole *timeout*.

        *due_in* is the seconds until the next scheduled message falls due (None: none is
        scheduled); *due_now* says that messages already due have not joined their groups.
        """
        caps: list[float] = []
        if due_in is not None:
            caps.append(max(due_in, self.floor))
        if due_now:
            caps.append(self._backoff)
            self._backoff = min(2 * self._backoff, self.backoff_max)
        else:
            self._backoff = self.floor
        cap = min(caps, default=timeout)
        return cap if cap < timeout else None
