"""Route partition keys exactly as PostgreSQL does: ``hashtextextended(key, seed)`` in Python.

PostgreSQL hashes ``text`` (under a deterministic collation) with Bob Jenkins' lookup3 mix over
the key's UTF-8 bytes, read as little-endian 32-bit words, and returns the 64-bit result as a
signed ``bigint``. Doing the same here lets the in-memory and Redis backends put a key in the
same slot as Postgres, bit for bit: ``slot = (h % n + n) % n`` with SQL's truncating ``%``.
"""

from __future__ import annotations

__all__ = ["hashtextextended", "slot_for"]

_M32 = 0xFFFFFFFF


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    a = (a - c) & _M32
    a ^= _rot(c, 4)
    c = (c + b) & _M32
    b = (b - a) & _M32
    b ^= _rot(a, 6)
    a = (a + c) & _M32
    c = (c - b) & _M32
    c ^= _rot(b, 8)
    b = (b + a) & _M32
    a = (a - c) & _M32
    a ^= _rot(c, 16)
    c = (c + b) & _M32
    b = (b - a) & _M32
    b ^= _rot(a, 19)
    a = (a + c) & _M32
    c = (c - b) & _M32
    c ^= _rot(b, 4)
    b = (b + a) & _M32
    return a, b, c


def _final(a: int, b: int, c: int) -> tuple[int, int, int]:
    c ^= b
    c = (c - _rot(b, 14)) & _M32
    a ^= c
    a = (a - _rot(c, 11)) & _M32
    b ^= a
    b = (b - _rot(a, 25)) & _M32
    c ^= b
    c = (c - _rot(b, 16)) & _M32
    a ^= c
    a = (a - _rot(c, 4)) & _M32
    b ^= a
    b = (b - _rot(a, 14)) & _M32
    c ^= b
    c = (c - _rot(b, 24)) & _M32
    return a, b, c


def _word(data: bytes, start: int) -> int:
    return int.from_bytes(data[start : start + 4], "little")


def hashtextextended(key: str, seed: int = 0) -> int:
    """Return PostgreSQL's ``hashtextextended(key, seed)`` as a signed 64-bit int.

    Raises UnicodeEncodeError for strings that are not valid Unicode (lone surrogates), which
    Postgres could not store either.
    """
    data = key.encode("utf-8")
    length = len(data)
    a = b = c = (0x9E3779B9 + length + 3923095) & _M32
    seed &= 0xFFFFFFFFFFFFFFFF
    if seed:
        a = (a + (seed >> 32)) & _M32
        b = (b + (seed & _M32)) & _M32
        a, b, c = _mix(a, b, c)
    pos = 0
    while length - pos >= 12:
        a = (a + _word(data, pos)) & _M32
        b = (b + _word(data, pos + 4)) & _M32
        c = (c + _word(data, pos + 8)) & _M32
        a, b, c = _mix(a, b, c)
        pos += 12
    tail = data[pos:] + bytes(12 - (length - pos))
    a = (a + _word(tail, 0)) & _M32
    b = (b + _word(tail, 4)) & _M32
    # The last word's lowest byte is left free (lookup3's layout): its bytes land one higher.
    c = (c + ((_word(tail, 8) << 8) & _M32)) & _M32
    a, b, c = _final(a, b, c)
    value = (b << 32) | c
    return value - (1 << 64) if value >= 1 << 63 else value


def slot_for(key: str, slots: int) -> int:
    """Return ``(hashtextextended(key, 0) % slots + slots) % slots`` with SQL's signed ``%``."""
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise ValueError(f"slots must be a positive int, not {slots!r}")
    h = hashtextextended(key, 0)
    # SQL's % truncates toward zero (like C); Python's floors, so compute C's remainder.
    rem = abs(h) % slots
    if h < 0:
        rem = -rem
    return (rem + slots) % slots
