"""Running, the second of the worker's three parts: the handler on each lease.

``handlers`` says how the user's handler is called and where (threads, ``threads``; child
processes, ``processes``); the handler runner (``runner_async``; its blocking twin
``runner_sync``) runs it on a lease with its time limits, renews the lease meanwhile, and turns
how it ended into a finished lease for settling. What it decides is decided without I/O in
``held`` (the leases' times) and ``ending`` (whether a lease starts, when a handler is
stopped and how, what its end leads to). It imports settling's decisions, never claiming.
"""
