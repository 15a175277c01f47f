"""Options that arrive as URL query text (``?max_attempts=5&setup=false``), turned into values.

``connect(url)`` hands a backend its URL's query options as strings, merged with keyword
arguments that are already typed. Every backend turns the text the same way with
:func:`option_value`; a backend that also bounds an option checks the range itself (or with
:func:`bounded_int` / :func:`bounded_float`). The settings read ``PGQUE_MAX_ATTEMPTS=none`` as
a URL's ``?max_attempts=none`` is read (:func:`means_none`).

A backend that reads its URL itself takes its own options out of the query with
:func:`own_options` and resolves the options every transport has, keywords over the URL's text,
with :func:`transport_options`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Collection, Mapping
from typing import Final, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from pgque.core.errors import ConfigurationError
from pgque.core.transport_options import OnExhausted, TransportOptions
from pgque.core.urls import mask_url
from pgque.core.validation import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_EVENT_BYTES,
    MAX_EVENT_BYTES_LIMIT,
)

__all__ = [
    "OptionKind",
    "option_value",
    "means_none",
    "bounded_int",
    "bounded_float",
    "NotGiven",
    "NOT_GIVEN",
    "own_options",
    "transport_options",
]

#: What an option's text means: an integer, a number, a boolean, or an integer where the words
#: ``none`` and the empty text mean ``None`` (``max_attempts=none``: unlimited).
OptionKind = Literal["int", "float", "bool", "int_or_none"]

#: The texts that mean None where an option allows it (any case, spaces around ignored).
_NONE_TEXTS = frozenset({"", "none"})

_BOOLEANS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}
_NOUNS = {
    "int": "an integer",
    "int_or_none": "an integer",
    "float": "a number",
    "bool": "a boolean (true/false, yes/no, on/off, 1/0)",
}


def means_none(text: str) -> bool:
    """Return True if *text* means None: ``none`` (any case) or nothing. Raises nothing."""
    return text.strip().lower() in _NONE_TEXTS


def option_value(name: str, value: object, kind: OptionKind) -> object:
    """Return option *name*'s *value* as *kind* when it is text; any other value unchanged.

    Values that are not text came as keyword arguments; the transport's own checks judge
    them. Raises ConfigurationError when the text does not read as *kind*.
    """
    if not isinstance(value, str):
        return value
    try:
        if kind == "bool":
            return _BOOLEANS[value.strip().lower()]
        if kind == "int_or_none" and means_none(value):
            return None
        if kind == "float":
            return float(value)
        return int(value)
    except (KeyError, ValueError) as exc:
        raise ConfigurationError(f"option {name} must be {_NOUNS[kind]}, not {value!r}") from exc


def bounded_int(name: str, value: object, low: int, high: int) -> int:
    """Return option *name* as an int from *low* to *high* (text is read first).

    Raises ConfigurationError for text that is not an integer, or a value out of range or of
    another type (a bool is not an integer here).
    """
    value = option_value(name, value, "int")
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(f"option {name} must be an integer from {low} to {high}")
    return value


def bounded_float(name: str, value: object, low: float, high: float) -> float:
    """Return option *name* as a finite float from *low* to *high* (text is read first).

    Raises ConfigurationError for text that is not a number, or a value out of range, not
    finite or of another type.
    """
    value = option_value(name, value, "float")
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ConfigurationError(f"option {name} must be a number from {low} to {high}")
    return float(value)


class NotGiven(enum.Enum):
    """The type of :data:`NOT_GIVEN`."""

    NOT_GIVEN = "not given"


#: The default of a ``max_attempts=`` keyword that the URL may give: take the URL's
#: ``max_attempts``, else :data:`~pgque.core.validation.DEFAULT_MAX_ATTEMPTS` (``None`` means
#: unlimited).
NOT_GIVEN: Final = NotGiven.NOT_GIVEN


def own_options(url: str, names: Collection[str]) -> tuple[str, dict[str, str]]:
    """Return *url* without the query options in *names*, and those options.

    The URL keeps the rest of its query, its fragment and an empty host (``unix:///path``:
    not ``urlunsplit``, which drops the ``//``). Raises ConfigurationError for an option of
    *names* given twice.
    """
    parts = urlsplit(url)
    own: dict[str, str] = {}
    kept: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in names:
            if key in own:
                raise ConfigurationError(f"option {key!r} is given twice in {mask_url(url)}")
            own[key] = value
        else:
            kept.append((key, value))
    stripped = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if kept:
        stripped += f"?{urlencode(kept)}"
    if parts.fragment:
        stripped += f"#{parts.fragment}"
    return stripped, own


def transport_options(
    own: Mapping[str, str],
    *,
    queue: str | None,
    max_attempts: int | NotGiven | None,
    on_exhausted: OnExhausted | None,
    clock: Callable[[], float] | None,
    max_event_bytes: int | None,
) -> TransportOptions:
    """Return the options every transport has: each keyword, else the URL's text in *own*
    (:func:`own_options`), else its default.

    ``max_attempts`` left :data:`NOT_GIVEN` is the URL's (``none`` or empty: unlimited), else
    :data:`~pgque.core.validation.DEFAULT_MAX_ATTEMPTS`; ``None`` is unlimited. Raises
    ConfigurationError for URL text that is not a valid value, InvalidInput for a bad
    keyword, queue name or on_exhausted.
    """
    chosen_max: object = max_attempts
    if max_attempts is NOT_GIVEN:  # the URL's, where "none" or nothing is unlimited
        chosen_max = option_value(
            "max_attempts", own.get("max_attempts", DEFAULT_MAX_ATTEMPTS), "int_or_none"
        )
        if chosen_max is not None:
            chosen_max = bounded_int("max_attempts", chosen_max, 1, 2**31 - 1)
    return TransportOptions(
        queue=queue if queue is not None else own.get("queue", "default"),
        max_attempts=chosen_max,  # type: ignore[arg-type]  # TransportOptions checks it
        on_exhausted=on_exhausted or own.get("on_exhausted", "dead_letter"),  # type: ignore[arg-type]
        clock=clock,
        max_event_bytes=(
            max_event_bytes  # a keyword is checked by TransportOptions
            if max_event_bytes is not None
            else bounded_int(
                "max_event_bytes",
                own.get("max_event_bytes", DEFAULT_MAX_EVENT_BYTES),
                1,
                MAX_EVENT_BYTES_LIMIT,
            )
        ),
    )
