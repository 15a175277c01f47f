"""Settling, the third of the worker's three parts: finished leases on their way back.

``decisions`` turns how a handler ended into a settlement, without I/O; the settlement batch
(``batch_async``; its blocking twin ``batch_sync``) keeps the settlements until claiming's next
round trip carries them, and counts what became of each. It imports neither claiming nor
running.
"""
