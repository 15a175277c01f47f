"""Claiming, the first of the worker's three parts: filling the slots with leases.

The claim batcher (``batcher_async``; its blocking twin ``batcher_sync``) gathers the claims
of the slots that wait, keeps a small buffer of leases ahead of them and releases a buffered
lease past its hold; each of its round trips (``round_trip_async``) also carries the
settlements that settling holds. What they decide (the buffer, each call's plan, what a
failed call becomes) is decided without I/O in ``planning``. It imports settling, never
running.
"""
