"""The pgque dashboard: an ASGI app (Starlette, Jinja2 templates, htmx) over your queues.

Needs the ``web`` extra (``pip install 'pgque-core[web]'``); importing this module without it
raises ImportError (``pgque dashboard`` says what to install instead). Serve it with
``pgque dashboard --url URL``, or mount :func:`create_app` in your own ASGI application.

Read-only unless ``allow_actions=True``; ``token=`` protects every route; only the host names
of ``allowed_hosts=`` (default: the loopback names) are served. docs/dashboard.md
describes the pages, the JSON API and the security model.
"""

from __future__ import annotations

from pgque.core.dashboard._app import (
    DEFAULT_ALLOWED_HOSTS,
    DEFAULT_PAGE,
    REFRESH_S,
    Dashboard,
    create_app,
)
from pgque.core.dashboard._security import CONTENT_SECURITY_POLICY
from pgque.core.dashboard._source import SAMPLE_INTERVAL_S
from pgque.core.install import install_hint

__all__ = [
    "create_app",
    "Dashboard",
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_ALLOWED_HOSTS",
    "DEFAULT_PAGE",
    "REFRESH_S",
    "SAMPLE_INTERVAL_S",
    "INSTALL_HINT",
    "TOKEN_ENV",
]

#: What to tell a user whose environment lacks the dashboard's dependencies.
INSTALL_HINT = install_hint("pgque-core[web]")

#: The environment variable ``pgque dashboard`` reads its ``--token`` from.
TOKEN_ENV = "PGQUE_DASHBOARD_TOKEN"
