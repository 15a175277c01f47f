"""Running, the second of the worker's three parts: the handler on each lease.

``handlers`` says how the user's handler is called and where (threads, ``threads``; child
processes, ``processes``); the handler runner (``runner_async``; its blocking twin
``runner_sync``) runs it on a lease with its time limits, renews the lease meanwhile, and turns
how it ended into a finished lease for settling. It imports settling's decisions, never
claiming.
"""
