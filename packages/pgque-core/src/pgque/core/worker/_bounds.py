"""The range an option's value must lie in (:class:`Bounds`): written once beside the options
it bounds, checked by them, and read by the command line for the flags that set them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Bounds"]


@dataclass(frozen=True)
class Bounds:
    """From *low* to *high* (``math.inf``: no upper bound), *low* itself excluded when
    *low_open* (a duration that must be more than zero)."""

    low: float
    high: float
    low_open: bool = False

    def holds(self, value: float) -> bool:
        """Return True if *value* lies in the range (never for NaN)."""
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high
