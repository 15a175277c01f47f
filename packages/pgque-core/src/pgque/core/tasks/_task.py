"""A task as its caller sees it: call it, or defer it to a worker (``defer`` / ``defer_async``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

from pgque.core.errors import ConfigurationError
from pgque.core.partition_base import check_dedup
from pgque.core.tasks._spec import TaskSpec

__all__ = ["Task"]


class _Deferrer(Protocol):
    """What a task needs of its app (``App`` or ``AsyncApp``)."""

    is_async: bool

    def _defer(
        self,
        spec: TaskSpec,
        values: list[Mapping[str, Any]],
        delay: float,
        at: datetime | float | None,
        priority: int | None,
        dedup: tuple[str, float] | None = None,
    ) -> Any: ...


class Task:
    """A function registered with ``@app.task``: calling it runs the function here;
    :meth:`defer` (an ``App``'s task) or :meth:`defer_async` (an ``AsyncApp``'s) sends it to
    a worker instead. See docs/tasks.md."""

    def __init__(self, spec: TaskSpec, app: _Deferrer) -> None:
        self.spec = spec
        self._app = app
        self.__wrapped__ = spec.function
        self.__doc__ = spec.function.__doc__
        self.__name__ = getattr(spec.function, "__name__", spec.kind)

    @property
    def kind(self) -> str:
        """The task's kind: the ``event.kind`` of its messages."""
        return self.spec.kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function here, now (a plain call: nothing is published)."""
        return self.spec.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Task(kind={self.kind!r})"

    def _needs(self, is_async: bool, instead: str) -> None:
        if self._app.is_async != is_async:
            app = "AsyncApp" if self._app.is_async else "App"
            raise ConfigurationError(f"task {self.kind} belongs to an {app}: use {instead}")

    def defer(
        self,
        *,
        delay: float = 0.0,
        at: datetime | float | None = None,
        priority: int | None = None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
        **arguments: Any,
    ) -> int:
        """Check *arguments* against the function's signature, then publish the task to its
        group (blocking ``App``); return the message id.

        *delay* (seconds) or *at* (epoch seconds or an aware datetime, by this machine's
        clock) schedules it; *priority* overrides the task's. *dedup_key*: a repeat of the
        key within *dedup_ttl* seconds (default 300) of its first defer publishes nothing and
        returns the first one's id (the transport's dedup window, docs/partition.md; not with
        *delay*, *at* or a fairness key). Raises InvalidInput for a wrong argument before
        anything is sent, ConfigurationError on an ``AsyncApp``'s task or for a dedup key on a
        transport without a dedup window.
        """
        self._needs(False, f"await {self.__name__}.defer_async(...)")
        dedup = check_dedup(dedup_key, dedup_ttl)
        ids: list[int] = self._app._defer(self.spec, [arguments], delay, at, priority, dedup)
        return ids[0]

    def defer_many(
        self,
        calls: Iterable[Mapping[str, Any]],
        *,
        delay: float = 0.0,
        priority: int | None = None,
    ) -> list[int]:
        """Defer one task per mapping of arguments in *calls*, checked first, in one
        ``publish_many`` per fairness key (one call for a task without keys); return the ids
        in order."""
        self._needs(False, f"await {self.__name__}.defer_many_async(...)")
        ids: list[int] = self._app._defer(self.spec, list(calls), delay, None, priority)
        return ids

    async def defer_async(
        self,
        *,
        delay: float = 0.0,
        at: datetime | float | None = None,
        priority: int | None = None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
        **arguments: Any,
    ) -> int:
        """:meth:`defer` for an ``AsyncApp``'s task."""
        self._needs(True, f"{self.__name__}.defer(...)")
        dedup = check_dedup(dedup_key, dedup_ttl)
        pending: Awaitable[list[int]] = self._app._defer(
            self.spec, [arguments], delay, at, priority, dedup
        )
        return (await pending)[0]

    async def defer_many_async(
        self,
        calls: Iterable[Mapping[str, Any]],
        *,
        delay: float = 0.0,
        priority: int | None = None,
    ) -> list[int]:
        """:meth:`defer_many` for an ``AsyncApp``'s task."""
        self._needs(True, f"{self.__name__}.defer_many(...)")
        pending: Awaitable[list[int]] = self._app._defer(
            self.spec, list(calls), delay, None, priority
        )
        return await pending


#: The decorator ``app.task(...)`` returns.
TaskDecorator = Callable[[Callable[..., Any]], Task]
