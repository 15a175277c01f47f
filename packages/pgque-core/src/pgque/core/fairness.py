"""Fair shares between fairness keys: the checks and the arithmetic every backend shares.

A group belongs to one *fairness key* (a tenant, a customer), fixed by the publish that gives
it its first message, like its priority; groups published without one share the *default key*
(:data:`DEFAULT_KEY`, shown as ``(no key)``). A claim shares the workers between **keys**
first, then between a key's groups round-robin, so a key's share does not grow with its number
of groups (docs/fairness.md).

**Weighted fair share** is start-time fair queueing over keys. The queue keeps a virtual
clock; each key keeps the *finish tag* of its last claim. A key that wants a claim starts at
``start = max(finish, clock)`` (:func:`start_tag`); the claim goes to the key with the lowest
start (ties: the lower finish tag, i.e. the key that has waited longest, then the key's name in
UTF-8 byte order; :func:`claim_rank`), the clock moves to that start and the key's finish
becomes ``start + 1 / weight`` (:func:`finish_tag`). The rank orders like an index on
``(finish, key)`` read from the clock on, so a store can walk one. While keys stay
backlogged each gets claims in proportion to its weight; a key that was idle starts at the
clock, so idling earns no burst.

**Caps** count live leases: ``max_in_flight`` groups of the key leased and unexpired at any
instant. An expired lease frees its slot by itself, so a crashed worker cannot wedge a key.

**Rates** are a token bucket on the store's clock: ``rate`` claims per ``per`` seconds, at most
``burst`` at once (:func:`refill`, :func:`next_token_at`). A key without a whole token is
skipped by claim, not claimed and given back.

The memory model applies these functions directly; the PostgreSQL functions and the Redis
scripts compute the same formulas (the conformance suite holds them to it).
"""

from __future__ import annotations

import math

from pgque.core.errors import InvalidInput
from pgque.core.models import KeyPolicy
from pgque.core.validation import MAX_GROUPS_PAGE, check_text_id

__all__ = [
    "DEFAULT_KEY",
    "DEFAULT_KEY_LABEL",
    "MAX_FAIRNESS_KEY_BYTES",
    "MAX_WEIGHT",
    "MAX_IN_FLIGHT",
    "MAX_RATE",
    "MAX_PER_S",
    "check_fairness_key",
    "check_policy_key",
    "key_policy",
    "check_keys_page",
    "effective_burst",
    "start_tag",
    "finish_tag",
    "claim_rank",
    "refill",
    "next_token_at",
    "key_label",
    "policy_text",
]

#: The key of groups published without ``fairness_key``. Not a valid key to publish with
#: (keys are not empty), so it never collides with a user's key.
DEFAULT_KEY = ""
#: How listings and sentences name :data:`DEFAULT_KEY`.
DEFAULT_KEY_LABEL = "(no key)"
#: The longest fairness key, in UTF-8 bytes.
MAX_FAIRNESS_KEY_BYTES = 200
#: The heaviest weight (the lightest is anything above 0, down to ``1 / MAX_WEIGHT``).
MAX_WEIGHT = 1_000_000.0
#: The largest ``max_in_flight`` and ``burst``.
MAX_IN_FLIGHT = 1_000_000
#: The highest ``rate`` (claims per ``per``).
MAX_RATE = 1_000_000.0
#: The longest ``per`` window: one day.
MAX_PER_S = 86_400.0


def check_fairness_key(key: object) -> str | None:
    """Return a publish's *key* (``None``: the default key) if it is a str of 1 to 200 UTF-8
    bytes without NUL and not blank; raise InvalidInput otherwise (before any I/O)."""
    if key is None:
        return None
    checked = check_text_id(key, "fairness_key", MAX_FAIRNESS_KEY_BYTES)
    if not checked.strip():
        raise InvalidInput(f"fairness_key must not be blank (white space alone), not {checked!r}")
    return checked


def check_policy_key(key: object) -> str | None:
    """Return the key of a policy call: a fairness key, :data:`DEFAULT_KEY` (``""``, the
    groups published without one), or ``None`` for the default policy of keys that have none."""
    if key is None or key == DEFAULT_KEY:
        return key
    return check_fairness_key(key)


def check_keys_page(limit: object, after: object) -> tuple[int, str | None]:
    """Check the arguments of ``keys()``: a limit from 1 to 1,000 and a key (``""`` too) or
    None to start after."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUPS_PAGE:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_GROUPS_PAGE}, not {limit!r}")
    if after is None:
        return limit, None
    return limit, check_text_id(after, "after", MAX_FAIRNESS_KEY_BYTES, empty_ok=True)


def _number(value: object, name: str, low: float, high: float, *, above: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number) or number > high or number < low or (above and number <= low):
        bound = f"above {low:g}" if above else f"from {low:g}"
        raise InvalidInput(f"{name} must be {bound} to {high:g}, not {value!r}")
    return number


def _count(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an int or None, not {value!r}")
    if not 1 <= value <= MAX_IN_FLIGHT:
        raise InvalidInput(f"{name} must be from 1 to {MAX_IN_FLIGHT}, not {value}")
    return value


def key_policy(
    *,
    weight: object = 1.0,
    max_in_flight: object = None,
    rate: object = None,
    per: object = 1.0,
    burst: object = None,
) -> KeyPolicy:
    """Return a checked :class:`~pgque.core.KeyPolicy`; raise InvalidInput for a bad value.

    *weight* is above 0 and at most 1,000,000; *max_in_flight* (``None``: no cap) and *burst*
    are ints from 1; *rate* (``None``: no limit) is above 0, claims per *per* seconds (above 0,
    at most a day); *burst* needs a *rate* and defaults to ``max(1, ceil(rate))``.
    """
    checked_rate = None if rate is None else _number(rate, "rate", 0.0, MAX_RATE, above=True)
    checked_burst = _count(burst, "burst")
    if checked_burst is not None and checked_rate is None:
        raise InvalidInput("burst needs a rate: give rate= (claims per per= seconds)")
    return KeyPolicy(
        weight=_number(weight, "weight", 0.0, MAX_WEIGHT, above=True),
        max_in_flight=_count(max_in_flight, "max_in_flight"),
        rate=checked_rate,
        per=_number(per, "per", 0.0, MAX_PER_S, above=True),
        burst=checked_burst,
    )


def effective_burst(policy: KeyPolicy) -> float:
    """The bucket's size: ``burst``, else ``max(1, ceil(rate))``; infinite without a rate."""
    if policy.rate is None:
        return math.inf
    return float(policy.burst if policy.burst is not None else max(1, math.ceil(policy.rate)))


def start_tag(finish: float, clock: float) -> float:
    """Where a key wanting a claim starts: its last finish tag, or the queue's virtual clock
    when that is later (a key back from idling gets no credit for it)."""
    return max(finish, clock)


def finish_tag(start: float, weight: float) -> float:
    """The key's finish tag after a claim that started at *start*."""
    return start + 1.0 / weight


def claim_rank(finish: float, clock: float, key: str) -> tuple[float, float, bytes]:
    """The order in which keys get the next claim: lowest first."""
    return (start_tag(finish, clock), finish, key.encode("utf-8"))


def refill(policy: KeyPolicy, tokens: float | None, at: float | None, now: float) -> float:
    """The key's tokens at *now*, given *tokens* at time *at* (``None``: a full bucket).

    Tokens accrue at ``rate / per`` a second up to :func:`effective_burst`; a clock that went
    back adds nothing.
    """
    size = effective_burst(policy)
    if tokens is None or at is None or policy.rate is None:
        return size
    return min(size, tokens + max(0.0, now - at) * policy.rate / policy.per)


def next_token_at(policy: KeyPolicy, tokens: float, now: float) -> float | None:
    """When the key next holds a whole token, given *tokens* at *now*; ``None`` if it does."""
    if policy.rate is None or tokens >= 1.0:
        return None
    return now + (1.0 - tokens) * policy.per / policy.rate


def key_label(key: str) -> str:
    """How a listing names *key*: the key itself, or ``(no key)`` for the default key."""
    return DEFAULT_KEY_LABEL if key == DEFAULT_KEY else key


def policy_text(policy: KeyPolicy) -> str:
    """*policy* in one short phrase, as ``pgque keys`` and the dashboard show it:
    ``weight 3, cap 5, 10/60s burst 10``."""
    parts = [f"weight {policy.weight:g}"]
    if policy.max_in_flight is not None:
        parts.append(f"cap {policy.max_in_flight}")
    if policy.rate is not None:
        burst = "" if policy.burst is None else f" burst {policy.burst}"
        parts.append(f"{policy.rate:g}/{policy.per:g}s{burst}")
    return ", ".join(parts)
