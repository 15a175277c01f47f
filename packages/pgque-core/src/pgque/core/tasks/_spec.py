"""What a task is: its arguments' model, its group and key, its wire format and how it runs.

Pure: no I/O. :class:`TaskSpec` is built from a plain function when ``@app.task`` decorates
it; the apps (:mod:`._app_async` and its generated twin) publish what :meth:`TaskSpec.message`
returns and hand :meth:`TaskSpec.handler` to a :class:`~pgque.core.Router`.

The wire format is an ordinary :class:`~pgque.core.Event`: ``kind`` is the task's kind and
``data`` the arguments as JSON (pydantic's JSON mode), so tasks and raw handlers share queues.
"""

from __future__ import annotations

import inspect
import math
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

from pgque.core.errors import InvalidInput
from pgque.core.models import Event, Lease, describe_validation_error, random_ids
from pgque.core.worker import Reject, Retry, RetryPolicy, StopWorker
from pgque.core.worker._running.handlers import is_async_callable

__all__ = ["RESERVED", "GroupRule", "KeyRule", "TaskSpec", "build_spec", "delay_of"]

#: How a task names its group: a template over its arguments (``"order-{order_id}"``) or a
#: callable taking them as keyword arguments.
GroupRule = str | Callable[..., str]
#: How a task names its fairness key: the same, or None for the default key.
KeyRule = str | Callable[..., str] | None

#: Parameters a task function may declare that are not its arguments: the worker passes them
#: (``connection``: the transaction the lease is settled in, settle_in).
_PASSED = ("lease", "event", "connection")
#: Keyword arguments of ``defer`` that are its options, so no task parameter may take them.
RESERVED = ("delay", "at", "priority", "dedup_key", "dedup_ttl")


@dataclass(frozen=True)
class TaskSpec:
    """One task: its function, kind, arguments model and options (see ``App.task``)."""

    function: Callable[..., Any]
    kind: str
    model: type[BaseModel]
    arguments: tuple[str, ...]
    passed: tuple[str, ...]
    group: GroupRule
    fairness_key: KeyRule
    priority: int
    retry: RetryPolicy | None
    max_attempts: int | None
    is_async: bool

    # -- the producer's side ---------------------------------------------------------------

    def check(self, values: Mapping[str, Any]) -> BaseModel:
        """Validate *values* against the function's signature; raise InvalidInput naming the
        task and every wrong argument."""
        try:
            return self.model.model_validate(dict(values))
        except ValidationError as exc:
            raise InvalidInput(
                f"task {self.kind}: invalid arguments: {describe_validation_error(exc)}"
            ) from exc

    def message(self, values: Mapping[str, Any]) -> tuple[str, Event, str | None]:
        """Return the group, the event and the fairness key of one call with *values*."""
        checked = self.check(values)
        return self._built(checked, checked.model_dump(mode="json"))

    def messages(self, calls: list[Mapping[str, Any]]) -> list[tuple[str, Event, str | None]]:
        """:meth:`message` of every call in *calls*, checked and dumped in one pass (a
        ``defer_many``); raise InvalidInput naming the first wrong call by its index."""
        if len(calls) < 2:
            return [self.message(values) for values in calls]
        batch = _batch_adapter(self.model)
        try:
            checked = batch.validate_python([dict(values) for values in calls])
        except ValidationError as exc:
            first = exc.errors()[0]["loc"][0]
            index = first if isinstance(first, int) else 0
            try:
                self.check(calls[index])
            except InvalidInput as one:
                raise InvalidInput(f"{one} (call {index} of {len(calls)})") from exc
            raise InvalidInput(  # pragma: no cover - the list and one call disagree
                f"task {self.kind}: invalid arguments: {describe_validation_error(exc)}"
            ) from exc
        dumped = batch.dump_python(checked, mode="json")
        # One read of the system's randomness for every id, one clock reading for the batch.
        ids, now = random_ids(len(calls)), datetime.now(timezone.utc)
        return [
            self._built(c, d, {"id": i, "created_at": now})
            for c, d, i in zip(checked, dumped, ids, strict=True)
        ]

    def _built(
        self, checked: BaseModel, data: Any, stamp: Mapping[str, Any] | None = None
    ) -> tuple[str, Event, str | None]:
        native = vars(checked)  # the model's fields, converted: exactly the arguments
        group = _apply(self.group, native, "group", self.kind)
        rule = self.fairness_key
        key = None if rule is None else _apply(rule, native, "fairness_key", self.kind)
        return group, Event(kind=self.kind, data=data, **(stamp or {})), key

    # -- the worker's side -------------------------------------------------------------------

    def call_arguments(self, event: Event, lease: Lease) -> dict[str, Any]:
        """The keyword arguments to call the function with for *event*: its data validated
        (and converted) by the model, plus ``lease`` / ``event`` when the function takes them.
        Raises Reject when the data does not fit (a message no retry can fix)."""
        data = event.data if isinstance(event.data, dict) else None
        try:
            checked = self.model.model_validate(data)
        except ValidationError as exc:
            raise Reject(
                f"task {self.kind}: the message's arguments do not fit the function: "
                f"{describe_validation_error(exc)}"
            ) from exc
        values = {name: getattr(checked, name) for name in self.arguments}
        passed = {"lease": lease, "event": event}
        return {**values, **{name: passed[name] for name in self.passed if name in passed}}

    def failed(self, error: Exception, lease: Lease) -> Exception:
        """What the worker is told when the function raised *error* on *lease*: the task's
        own ``max_attempts`` reached dead-letters it (Reject); its own ``retry`` gives the
        delay (Retry); else *error* itself (the worker's policy applies)."""
        if isinstance(error, Retry | Reject | StopWorker):
            return error
        if self.max_attempts is not None and lease.attempt >= self.max_attempts:
            return Reject(
                f"task {self.kind} failed on attempt {lease.attempt} of its max_attempts "
                f"{self.max_attempts}: {type(error).__name__}: {error}"
            )
        if self.retry is not None:
            return Retry(self.retry.delay(lease.attempt))
        return error

    @property
    def in_transaction(self) -> bool:
        """Whether the function takes ``connection``: it runs in the transaction its lease is
        settled in (``settle_in``; docs/transactions.md)."""
        return "connection" in self.passed

    def handler(self, settle: Callable[[Lease], Any] | None = None) -> Callable[..., Any]:
        """A ``(event, lease)`` handler running the function (async when the function is).

        A function taking ``connection`` runs inside ``settle(lease)`` (the app's
        ``settle_in``), given its connection: its writes and the ack commit together.
        """
        function = self.function
        if self.in_transaction and settle is None:
            raise InvalidInput(f"task {self.kind}: a connection parameter needs settle_in")
        if self.is_async:

            async def run_async(event: Event, lease: Lease) -> None:
                arguments = self.call_arguments(event, lease)
                try:
                    if settle is None or not self.in_transaction:
                        await function(**arguments)
                        return
                    async with settle(lease) as tx:
                        await function(**arguments, connection=tx.connection)
                except Exception as exc:
                    raise _chained(self.failed(exc, lease), exc) from exc

            return run_async

        def run(event: Event, lease: Lease) -> None:
            arguments = self.call_arguments(event, lease)
            try:
                if settle is None or not self.in_transaction:
                    function(**arguments)
                    return
                with settle(lease) as tx:
                    function(**arguments, connection=tx.connection)
            except Exception as exc:
                raise _chained(self.failed(exc, lease), exc) from exc

        return run


@lru_cache(maxsize=256)
def _batch_adapter(model: type[BaseModel]) -> TypeAdapter[list[BaseModel]]:
    """The adapter checking and dumping a list of *model* at once (cached per task model)."""
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def _chained(raised: Exception, cause: Exception) -> Exception:
    return raised if raised is not cause else cause


def _apply(rule: GroupRule, values: Mapping[str, Any], what: str, kind: str) -> str:
    """The group (or key) of one call: the template formatted, or the callable called."""
    try:
        result = rule.format_map(values) if isinstance(rule, str) else rule(**values)
    except Exception as exc:
        raise InvalidInput(
            f"task {kind}: its {what} rule failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(result, str):
        raise InvalidInput(
            f"task {kind}: its {what} rule must give a str, not {type(result).__name__}"
        )
    return result


def _template_fields(template: str) -> set[str]:
    names: set[str] = set()
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None:
            names.add(field.split(".", 1)[0].split("[", 1)[0])
    return names


def build_spec(
    function: Callable[..., Any],
    *,
    kind: str | None,
    group: GroupRule,
    fairness_key: KeyRule,
    priority: int,
    retry: RetryPolicy | None,
    max_attempts: int | None,
) -> TaskSpec:
    """Build a task from *function*; raise InvalidInput for what cannot work.

    Every parameter must be passable by keyword (no ``*args``, no positional-only, no
    ``**kwargs``); its annotation is its type (none: any JSON value) and its default stays
    the default. ``lease`` and ``event`` are passed by the worker, not by ``defer``. A
    template's fields must be argument names.
    """
    if not callable(function):
        raise InvalidInput(f"a task must be a function, not {type(function).__name__}")
    name = kind if kind is not None else _default_kind(function)
    if not isinstance(name, str) or not name or len(name) > 256:
        raise InvalidInput(
            f"a task's kind must be a non-empty str of at most 256 characters, not {name!r}"
        )
    try:
        signature = inspect.signature(function)
        hints = _hints(function)
    except (TypeError, ValueError, NameError) as exc:
        raise InvalidInput(f"task {name}: cannot read its signature: {exc}") from exc
    fields: dict[str, Any] = {}
    passed: list[str] = []
    for param in signature.parameters.values():
        if param.name in _PASSED:
            passed.append(param.name)
            continue
        if param.name in RESERVED:
            raise InvalidInput(
                f"task {name}: parameter {param.name!r} is an option of defer "
                f"({', '.join(RESERVED)}): rename it"
            )
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise InvalidInput(
                f"task {name}: parameter {param.name!r} must be passable by keyword "
                "(no *args, **kwargs or positional-only parameters)"
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    try:
        model = create_model(
            f"{function.__name__}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
    except Exception as exc:  # a type pydantic cannot validate or serialise
        raise InvalidInput(f"task {name}: its parameters cannot be checked: {exc}") from exc
    for what, rule in (("group", group), ("fairness_key", fairness_key)):
        if rule is None and what == "fairness_key":
            continue
        if isinstance(rule, str):
            unknown = _template_fields(rule) - set(fields)
            if unknown:
                raise InvalidInput(
                    f"task {name}: its {what} template names {sorted(unknown)}, which are not "
                    f"among its arguments {sorted(fields)}"
                )
        elif not callable(rule):
            raise InvalidInput(f"task {name}: {what} must be a str template or a callable")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidInput(f"task {name}: priority must be an int, not {priority!r}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise InvalidInput(f"task {name}: retry must be a RetryPolicy, not {retry!r}")
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
    ):
        raise InvalidInput(f"task {name}: max_attempts must be an int >= 1, not {max_attempts!r}")
    return TaskSpec(
        function=function,
        kind=name,
        model=model,
        arguments=tuple(fields),
        passed=tuple(passed),
        group=group,
        fairness_key=fairness_key,
        priority=priority,
        retry=retry,
        max_attempts=max_attempts,
        is_async=is_async_callable(function),
    )


def _default_kind(function: Callable[..., Any]) -> str:
    module = getattr(function, "__module__", None) or ""
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", "task")
    return f"{module}.{name}" if module and module != "__main__" else str(name)


def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    import typing

    return typing.get_type_hints(function)


def delay_of(delay: float, at: datetime | float | None, now: float) -> float:
    """The publish delay of a task deferred with *delay* seconds or to run *at* (epoch seconds
    or a timezone-aware datetime; a time past runs at once). Raises InvalidInput for both, or
    for a naive datetime."""
    if at is None:
        return delay
    if delay:
        raise InvalidInput("give delay or at, not both")
    if isinstance(at, datetime):
        if at.tzinfo is None or at.utcoffset() is None:
            raise InvalidInput("at must be a timezone-aware datetime (or epoch seconds)")
        when = at.timestamp()
    elif isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        raise InvalidInput(f"at must be epoch seconds or a timezone-aware datetime, not {at!r}")
    else:
        when = float(at)
    return max(when - now, 0.0)
