"""The pgque dashboard: an ASGI app (Starlette, Jinja2 templates, htmx) over your queues.

The distribution pgque-dashboard (``pip install pgque-dashboard``) also holds pgque's
Prometheus metrics, :mod:`pgque.dashboard.metrics`. Serve the dashboard with
``pgque dashboard --url URL``, or mount :func:`create_app` in your own ASGI application.

Read-only unless ``allow_actions=True``; ``token=`` protects every route; only the host names
of ``allowed_hosts=`` (default: the loopback names) are served. docs/dashboard.md
describes the pages, the JSON API and the security model.
"""

from __future__ import annotations

from pgque.core.hints import install_hint
from pgque.dashboard._app import (
    DEFAULT_ALLOWED_HOSTS,
    DEFAULT_PAGE,
    REFRESH_S,
    Dashboard,
    create_app,
)
from pgque.dashboard._security import CONTENT_SECURITY_POLICY
from pgque.dashboard._source import SAMPLE_INTERVAL_S

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

#: How to install the dashboard (what ``pgque dashboard`` says while it is missing).
INSTALL_HINT = install_hint("pgque-dashboard")

#: The environment variable ``pgque dashboard`` reads its ``--token`` from.
TOKEN_ENV = "PGQUE_DASHBOARD_TOKEN"
