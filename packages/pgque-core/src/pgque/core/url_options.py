"""Options that arrive as URL query text (``?max_attempts=5&setup=false``), turned into values.

``connect(url)`` hands a backend its URL's query options as strings, merged with keyword
arguments that are already typed. Every backend turns the text the same way with
:func:`option_value`; a backend that also bounds an option checks the range itself (or with
:func:`bounded_int` / :func:`bounded_float`). The settings read ``PGQUE_MAX_ATTEMPTS=none`` as
a URL's ``?max_attempts=none`` is read (:func:`means_none`).
"""

from __future__ import annotations

import math
from typing import Literal

from pgque.core.errors import ConfigurationError

__all__ = ["OptionKind", "option_value", "means_none", "bounded_int", "bounded_float"]

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
