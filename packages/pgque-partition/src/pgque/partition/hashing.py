"""Route partition keys exactly as PostgreSQL does: ``hashtextextended(key, seed)`` in Python
(lookup3 over the key's UTF-8 bytes read as little-endian 32-bit words, a signed 64-bit result),
so the memory and Redis backends put a key in the same slot as PostgreSQL, bit for bit."""

from __future__ import annotations

__all__ = ["hashtextextended", "slot_for"]

_M32 = 0xFFFFFFFF
#: lookup3's mix(): six steps ``x -= y; x ^= rot(y, k); y += z`` as (x, y, z, k); a, b, c = 0, 1, 2.
_MIX = ((0, 2, 1, 4), (1, 0, 2, 6), (2, 1, 0, 8), (0, 2, 1, 16), (1, 0, 2, 19), (2, 1, 0, 4))
#: lookup3's final(): seven steps ``x ^= y; x -= rot(y, k)``, as (x, y, k).
_FINAL = ((2, 1, 14), (0, 2, 11), (1, 0, 25), (2, 1, 16), (0, 2, 4), (1, 0, 14), (2, 1, 24))


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def _mix(v: list[int]) -> None:
    for x, y, z, k in _MIX:
        v[x] = ((v[x] - v[y]) & _M32) ^ _rot(v[y], k)
        v[y] = (v[y] + v[z]) & _M32


def _add(v: list[int], data: bytes) -> None:  # 12 bytes as three little-endian words
    for i in range(3):
        v[i] = (v[i] + int.from_bytes(data[4 * i : 4 * i + 4], "little")) & _M32


def hashtextextended(key: str, seed: int = 0) -> int:
    """Return PostgreSQL's ``hashtextextended(key, seed)`` as a signed 64-bit int.

    Raises UnicodeEncodeError for strings that are not valid Unicode (lone surrogates), which
    Postgres could not store either.
    """
    data = key.encode("utf-8")
    v = [(0x9E3779B9 + len(data) + 3923095) & _M32] * 3
    seed &= 0xFFFFFFFFFFFFFFFF
    if seed:
        v[0] = (v[0] + (seed >> 32)) & _M32
        v[1] = (v[1] + (seed & _M32)) & _M32
        _mix(v)
    whole = len(data) - len(data) % 12
    for start in range(0, whole, 12):
        _add(v, data[start : start + 12])
        _mix(v)
    # The last word's lowest byte is left free (lookup3's layout): its bytes land one higher.
    tail = data[whole:]
    _add(v, tail[:8].ljust(8, b"\0") + b"\0" + tail[8:].ljust(3, b"\0"))
    for x, y, k in _FINAL:
        v[x] = ((v[x] ^ v[y]) - _rot(v[y], k)) & _M32
    value = (v[1] << 32) | v[2]
    return value - (1 << 64) if value >= 1 << 63 else value


def slot_for(key: str, slots: int) -> int:
    """Return ``(hashtextextended(key, 0) % slots + slots) % slots`` with SQL's signed ``%``."""
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise ValueError(f"slots must be a positive int, not {slots!r}")
    # SQL's ``(h % N + N) % N`` is the residue from 0 to N - 1: Python's % (flooring) at once.
    return hashtextextended(key, 0) % slots
