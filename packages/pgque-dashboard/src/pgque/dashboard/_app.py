"""The dashboard's ASGI application: pages, live fragments, actions and the JSON API."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from pgque.core.bulk import MAX_BULK, BulkResult
from pgque.core.contract import (
    AsyncSupportsFairness,
    AsyncSupportsHistory,
    AsyncSupportsWorkers,
    AsyncTransport,
)
from pgque.core.errors import InvalidInput, PgqueError
from pgque.core.explain import age_text, explain, ready_ahead
from pgque.core.fairness import DEFAULT_KEY, DEFAULT_KEY_LABEL, key_label, policy_text
from pgque.core.history import MAX_HISTORY_PAGE
from pgque.core.models import (
    GROUP_STATES,
    HISTORY_OUTCOMES,
    GroupInfo,
    GroupStateName,
    HistoryRecord,
    KeyInfo,
    QueueStats,
    WorkerInfo,
)
from pgque.core.scheduling import Schedule, ScheduleEntry
from pgque.core.validation import MAX_GROUPS_PAGE
from pgque.dashboard._browse import (
    api_message,
    api_messages,
    group_messages,
    message_page,
    messages_page,
    search,
)
from pgque.dashboard._present import (
    age,
    chart,
    due,
    group_path,
    iso,
    page_query,
    pretty_json,
    when,
)
from pgque.dashboard._security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    DEFAULT_ALLOWED_HOSTS,
    HeadersMiddleware,
    SecurityMiddleware,
    allowed_host_names,
    csrf_token,
    csrf_valid,
    new_nonce,
)
from pgque.dashboard._source import SAMPLE_INTERVAL_S, QueueSource, UnknownQueue

__all__ = ["create_app", "Dashboard", "DEFAULT_ALLOWED_HOSTS", "DEFAULT_PAGE", "REFRESH_S"]

_HERE = Path(__file__).parent
#: Groups or dead letters on one page unless ``?limit=`` says otherwise.
DEFAULT_PAGE = 50
#: Seconds between two refreshes of a page's live counts.
REFRESH_S = 3

#: What an action's redirect may say it did: fixed texts, so no address can put words on a page.
_DONE = {
    "pause": "paused the group",
    "resume": "resumed the group",
    "unblock": "unblocked the group: its head is retried",
    "drop-head": "unblocked the group: its head went to the dead letters",
    "retry-now": (
        "ended the retry delay: the head is claimable now (its attempts and last error kept)"
    ),
    "no-retry": "nothing to do: the group was not waiting for a retry",
    "head-changed": (
        "refused: the group's head is no longer the message this page showed (someone acted "
        "meanwhile); nothing was changed: read the page again"
    ),
    "redrive": "redrove the dead letter in place (its original id, ahead of later messages)",
    "redrive-tail": "redrove the dead letter to the tail of its group",
    "delete": "deleted the dead letter",
    "cancel": "cancelled the scheduled message: it will not be delivered",
    "not-scheduled": "nothing to do: the message was not scheduled any more (due, or cancelled)",
    "noop": "nothing to do: the group or dead letter was not in that state any more",
}
#: The same, naming the message acted on (``&message=`` of the redirect, a whole number only).
_DONE_MESSAGE = {
    "unblock": "unblocked the group: its head, message #{message}, is retried",
    "drop-head": "unblocked the group: its head, message #{message}, went to the dead letters",
    "head-changed": (
        "refused: the group's head is no longer message #{message} (someone acted meanwhile); "
        "nothing was changed: read the page again"
    ),
    "cancel": "cancelled scheduled message #{message}: it will not be delivered",
    "not-scheduled": (
        "nothing to do: message #{message} was not scheduled any more (due, or cancelled)"
    ),
}


#: What a bulk action's redirect may say (``&matched=`` and ``&changed=``, whole numbers only).
_DONE_BULK = {
    "bulk-pause": "bulk pause: paused {changed} of {matched} matching groups",
    "bulk-resume": "bulk resume: resumed {changed} of {matched} matching groups",
    "bulk-retry-now": "bulk retry now: {changed} of {matched} matching groups are claimable now",
    "bulk-redrive": "bulk redrive: redrove {changed} of {matched} matching dead letters in place",
    "bulk-delete": "bulk delete: deleted {changed} of {matched} matching dead letters",
}


def _count(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() and len(value) < 20 else None


def _done(request: Request) -> str | None:
    """The sentence of what the action before this page did (``?done=``), or None."""
    done = request.query_params.get("done", "")
    message = request.query_params.get("message", "")
    if done in _DONE_BULK:
        matched = _count(request.query_params.get("matched", ""))
        changed = _count(request.query_params.get("changed", ""))
        if matched is not None and changed is not None:
            return _DONE_BULK[done].format(matched=matched, changed=changed)
        return None
    if done in _DONE_MESSAGE and message.isascii() and message.isdigit() and len(message) < 20:
        return _DONE_MESSAGE[done].format(message=int(message))
    return _DONE.get(done)


class GroupIdConvertor(Convertor[str]):
    """The rest of the path, newlines included: a group id may hold ``/``, CR and LF.

    Starlette's own ``path`` converter stops at a newline (its ``.`` does not match one).
    """

    regex = r"[\s\S]+"

    def convert(self, value: str) -> str:
        """Return the id as it is (the server has percent-decoded it)."""
        return value

    def to_string(self, value: str) -> str:
        """Return *value* for a path (callers percent-encode it: see ``group_path``)."""
        return value


register_url_convertor("pgque_group", GroupIdConvertor())


class Dashboard:
    """The state behind one dashboard app: its queues, options and templates."""

    def __init__(
        self,
        source: QueueSource,
        *,
        allow_actions: bool,
        secret: bytes,
        refresh: float,
        schedules: Sequence[tuple[str, Schedule]] = (),
    ) -> None:
        self.source = source
        #: The periodic schedules shown, each with the name it was given by.
        self.schedules = list(schedules)
        self.allow_actions = allow_actions
        self.secret = secret
        self.refresh = refresh
        self.templates = Environment(
            loader=FileSystemLoader(_HERE / "templates"),
            # Every template is HTML (the chart is inline SVG): escape everything, always.
            autoescape=select_autoescape(default=True, default_for_string=True),
            auto_reload=False,
        )
        self.templates.globals.update(
            group_path=group_path,
            page_query=page_query,
            when=when,
            due=due,
            iso=iso,
            age=age,
            age_text=age_text,
            key_label=key_label,
            policy_text=policy_text,
            pretty_json=pretty_json,
            states=GROUP_STATES,
            refresh=refresh,
            sample_interval=f"{source.sample_interval:g}",
        )

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        """Render template *name*; set the CSRF cookie when the request had none."""
        nonce = request.cookies.get(CSRF_COOKIE)
        fresh = nonce is None
        if nonce is None:
            nonce = new_nonce()
        html = self.templates.get_template(name).render(
            base=request.scope.get("root_path", "") or "",
            csrf=csrf_token(self.secret, nonce),
            csrf_field=CSRF_FIELD,
            allow_actions=self.allow_actions,
            refresh_error=self.source.refresh_error,
            now=time.time(),
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        if fresh:
            response.set_cookie(
                CSRF_COOKIE,
                nonce,
                path=(request.scope.get("root_path", "") or "/"),
                httponly=True,
                samesite="strict",
            )
        return response


def _dashboard(request: Request) -> Dashboard:
    dashboard: Dashboard = request.app.state.pgque_dashboard
    return dashboard


def _state(value: str | None) -> GroupStateName | None:
    if value in (None, ""):
        return None
    for state in GROUP_STATES:
        if value == state:
            return state
    raise InvalidInput(f"state must be one of {', '.join(GROUP_STATES)}, not {value!r}")


def _int(value: str | None, name: str, default: int | None, low: int, high: int) -> int | None:
    if value in (None, ""):
        return default
    assert value is not None
    try:
        number = int(value)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, not {value!r}") from None
    if not low <= number <= high:
        raise InvalidInput(f"{name} must be from {low} to {high}, not {number}")
    return number


async def _queue_rows(dashboard: Dashboard) -> list[dict[str, Any]]:
    """Every shown queue with its counts; one whose counts cannot be read (never yet) is a row
    with ``stats`` None and the ``error``, not a failed page. Raises PgqueError when the
    queues cannot be listed."""
    rows: list[dict[str, Any]] = []
    source = dashboard.source
    for name in await source.shown_queues():
        try:
            stats, read_at = await source.counts(name)
        except PgqueError as exc:
            rows.append({"name": name, "stats": None, "error": str(exc)})
            continue
        rows.append(
            {"name": name, "stats": stats, "read_at": read_at, "chart": chart(source.samples(name))}
        )
    return rows


async def queues_page(request: Request) -> Response:
    """The queues page: every queue with its counts and throughput chart."""
    dashboard = _dashboard(request)
    rows = await _queue_rows(dashboard)
    return dashboard.render(request, "queues.html", title="queues", rows=rows)


async def queues_fragment(request: Request) -> Response:
    """The queues table alone, polled by the queues page."""
    dashboard = _dashboard(request)
    rows = await _queue_rows(dashboard)
    return dashboard.render(request, "_queues_table.html", rows=rows)


def _queue(request: Request) -> str:
    return str(request.path_params["queue"])


async def _transport(request: Request) -> AsyncTransport:
    return await _dashboard(request).source.transport(_queue(request))


def _fair(transport: AsyncTransport) -> AsyncSupportsFairness | None:
    """*transport* as one with fairness keys, or None when its backend has none
    (``Capabilities.fairness``)."""
    if transport.capabilities.fairness and isinstance(transport, AsyncSupportsFairness):
        return transport
    return None


async def summary_fragment(request: Request) -> Response:
    """One queue's counts, polled by its groups and dead-letter pages."""
    dashboard = _dashboard(request)
    queue = _queue(request)
    stats, read_at = await dashboard.source.counts(queue)
    return dashboard.render(request, "_summary.html", queue=queue, stats=stats, read_at=read_at)


async def _groups_page_data(request: Request) -> dict[str, Any]:
    transport = await _transport(request)
    params = request.query_params
    state = _state(params.get("state"))
    limit = _int(params.get("limit"), "limit", DEFAULT_PAGE, 1, MAX_GROUPS_PAGE)
    assert limit is not None
    after = params.get("after") or None
    prefix = params.get("prefix") or ""
    sort = params.get("sort") or "id"
    if sort not in ("id", "age"):
        raise InvalidInput(f"sort must be id or age, not {sort!r}")
    items: list[GroupInfo] = []
    more = False
    if sort == "age" and not prefix:
        # The whole queue's oldest heads (an index on every backend): one page, no next.
        items = await transport.oldest_groups(limit=limit, state=state)
    elif prefix:
        # The ids starting with the prefix: a range of the index (groups(prefix=)).
        items = await transport.groups(state=state, limit=limit, after=after, prefix=prefix)
        more = len(items) == limit
    else:
        page = await transport.groups(state=state, limit=limit, after=after)
        items = page
        more = len(page) == limit
    next_after = items[-1].group_id if more and items else None
    if sort == "age" and prefix:
        # A prefix search pages by id: its page is sorted by head age, oldest first.
        items = sorted(
            items,
            key=lambda info: (info.head_enqueued_at is None, info.head_enqueued_at or 0.0),
        )
    return {
        "queue": transport.queue,
        "groups": items,
        "state": state,
        "limit": limit,
        "after": after,
        "prefix": prefix,
        "sort": sort,
        "next_after": next_after,
    }


async def groups_page(request: Request) -> Response:
    """A queue's groups: state filter, id-prefix search, keyset paging, sort by head age."""
    dashboard = _dashboard(request)
    data = await _groups_page_data(request)
    # The queue's counts come by the live fragment: they cost a count over every group, which
    # a page of 50 groups should not wait for.
    return dashboard.render(
        request, "groups.html", title=f"groups of {data['queue']}", done=_done(request), **data
    )


async def _group_view(request: Request, group_id: str) -> tuple[GroupInfo, str] | None:
    transport = await _transport(request)
    info = await transport.group(group_id)
    if info is None:
        return None
    ahead = None
    key: KeyInfo | None = None
    if info.state == "ready":
        # The estimate of how many groups come first uses the refresher's latest counts: a
        # fresh count over every group would cost more than the whole page.
        stats, _read_at = await _dashboard(request).source.counts(transport.queue)
        ahead = ready_ahead(stats)
        # A ready group may wait for its key (at its cap, out of tokens): the sentence says so.
        fair = _fair(transport)
        if fair is not None:
            key = await _key_that_may_hold(fair, info.fairness_key or DEFAULT_KEY)
    return info, explain(info, now=time.time(), ahead=ahead, key=key)


async def _key_that_may_hold(fair: AsyncSupportsFairness, key: str) -> KeyInfo | None:
    """*key* as ``key_info()`` shows it when its policy (its own, else the queue's default)
    has a cap or a rate; None when nothing can hold its groups back. ``key_info()`` counts
    the key's groups (every group of the queue for the default key: seconds at a million),
    which a key without a cap or a rate does not need: two policy reads instead."""
    policy = await fair.key_policy(key)
    if policy is None:
        policy = await fair.key_policy(None)
    if policy is None or (policy.max_in_flight is None and policy.rate is None):
        return None
    return await fair.key_info(key)


def _group_id(request: Request) -> str:
    if "group" in request.path_params:
        return str(request.path_params["group"])
    group_id = request.query_params.get("id")
    if not group_id:
        raise InvalidInput("no group id: pass ?id=GROUP")
    return group_id


async def group_page(request: Request) -> Response:
    """One group: head, attempts, lease, resume time, last error, why it is (not) moving."""
    dashboard = _dashboard(request)
    group_id = _group_id(request)
    queue = _queue(request)
    view = await _group_view(request, group_id)
    done = _done(request)
    if view is None:
        return dashboard.render(
            request,
            "missing.html",
            status=404,
            title="no such group",
            queue=queue,
            group_id=group_id,
            done=done,
        )
    info, why = view
    transport = await _transport(request)
    return dashboard.render(
        request,
        "group.html",
        title=f"group of {queue}",
        queue=queue,
        info=info,
        why=why,
        fair=_fair(transport) is not None,
        done=done,
        **await group_messages(transport, request.query_params, info.group_id),
    )


async def dead_letters_page(request: Request) -> Response:
    """A queue's dead letters: reason, error, traceback, redrive and delete."""
    dashboard = _dashboard(request)
    transport = await _transport(request)
    limit = _int(request.query_params.get("limit"), "limit", DEFAULT_PAGE, 1, 10_000)
    after = _int(request.query_params.get("after"), "after", None, 0, 2**63 - 1)
    assert limit is not None
    letters = await transport.dead_letters(limit, after=after)
    return dashboard.render(
        request,
        "dead_letters.html",
        title=f"dead letters of {transport.queue}",
        queue=transport.queue,
        letters=letters,
        limit=limit,
        next_after=letters[-1].id if len(letters) == limit else None,
        done=_done(request),
    )


def _wall_time(epoch: float, entry: ScheduleEntry) -> str:
    """*epoch* as a wall time of *entry*'s time zone (``2025-03-30 02:30``)."""
    return datetime.fromtimestamp(epoch, entry.zone).strftime("%Y-%m-%d %H:%M")


async def schedules_page(request: Request) -> Response:
    """The periodic schedules given to the dashboard: each entry's last tick published to this
    queue (``last_tick``) and its next tick (``ScheduleEntry.next_tick``)."""
    dashboard = _dashboard(request)
    transport = await _transport(request)
    now = time.time()
    supported = transport.capabilities.scheduling
    shown = []
    for name, schedule in dashboard.schedules:
        rows = []
        for entry in schedule:
            last = await transport.last_tick(entry.name) if supported else None
            upcoming = entry.next_tick(now)
            rows.append(
                {
                    "entry": entry,
                    "last": last,
                    "next": upcoming,
                    "next_wall": None if upcoming is None else _wall_time(upcoming, entry),
                }
            )
        shown.append({"name": name, "rows": rows})
    return dashboard.render(
        request,
        "schedules.html",
        title=f"schedules of {transport.queue}",
        queue=transport.queue,
        schedules=shown,
        supported=supported,
    )


#: Scheduled messages on one page at most (the transports' own limit).
MAX_SCHEDULED_PAGE = 1_000


async def _scheduled_data(request: Request) -> dict[str, Any]:
    """One page of the queue's scheduled messages: ``after=`` (an id), ``limit=``."""
    transport = await _transport(request)
    params = request.query_params
    limit = _int(params.get("limit"), "limit", DEFAULT_PAGE, 1, MAX_SCHEDULED_PAGE)
    after = _int(params.get("after"), "after", None, 0, 2**63 - 1)
    assert limit is not None
    supported = transport.capabilities.scheduling
    messages = await transport.scheduled(limit=limit, after=after) if supported else []
    return {
        "queue": transport.queue,
        "supported": supported,
        "messages": messages,
        "limit": limit,
        "after": after,
        "next_after": messages[-1].id if len(messages) == limit else None,
    }


async def scheduled_page(request: Request) -> Response:
    """A queue's scheduled messages not due yet: id, group, kind, due time; cancel."""
    dashboard = _dashboard(request)
    data = await _scheduled_data(request)
    return dashboard.render(
        request,
        "scheduled.html",
        title=f"scheduled messages of {data['queue']}",
        done=_done(request),
        **data,
    )


async def api_scheduled(request: Request) -> Response:
    """``GET /api/queues/{queue}/scheduled?after=&limit=``: one page of scheduled messages."""
    data = await _scheduled_data(request)
    return JSONResponse(
        {
            "queue": data["queue"],
            "scheduled": [m.model_dump(mode="json") for m in data["messages"]],
            "next_after": data["next_after"],
        }
    )


async def _keys_data(request: Request) -> dict[str, Any]:
    """One page of the queue's fairness keys: ``after=`` (a key; present and empty: after the
    default key ``""``), ``limit=``. Empty, with ``supported`` False, on a backend without
    fairness keys."""
    transport = await _transport(request)
    params = request.query_params
    limit = _int(params.get("limit"), "limit", DEFAULT_PAGE, 1, MAX_GROUPS_PAGE)
    assert limit is not None
    # The default key is "": a page that ends with it is followed by ?after= (empty), so an
    # empty after= is a key to start after, not an absent one.
    after = params.get("after")
    fair = _fair(transport)
    keys: list[KeyInfo] = [] if fair is None else await fair.keys(limit, after=after)
    return {
        "queue": transport.queue,
        "supported": fair is not None,
        "keys": keys,
        "limit": limit,
        "after": after,
        "next_after": keys[-1].key if len(keys) == limit else None,
    }


def _kept(transport: AsyncTransport) -> AsyncSupportsHistory | None:
    """*transport* as one with job history, or None when its backend has none
    (``Capabilities.history``)."""
    if transport.capabilities.history and isinstance(transport, AsyncSupportsHistory):
        return transport
    return None


#: The query parameters the history page filters by, as ``history()`` names them.
_HISTORY_FILTERS = {"group": "group", "kind": "kind", "outcome": "outcome"}


async def _history_data(request: Request) -> dict[str, Any]:
    """One page of the queue's job history, newest first: ``message=`` (a message's story),
    ``group=``, ``kind=``, ``outcome=``, ``after=`` (a record id), ``limit=``. Empty, with
    ``supported`` False, on a backend without history."""
    transport = await _transport(request)
    params = request.query_params
    limit = _int(params.get("limit"), "limit", DEFAULT_PAGE, 1, MAX_HISTORY_PAGE)
    assert limit is not None
    after = _int(params.get("after"), "after", None, 1, 2**63 - 1)
    message_id = _int(params.get("message"), "message", None, 1, 2**63 - 1)
    filters = {name: params[key] for key, name in _HISTORY_FILTERS.items() if params.get(key)}
    kept = _kept(transport)
    records: list[HistoryRecord] = []
    if kept is not None:
        records = await kept.history(
            message_id=message_id,
            limit=limit,
            after=after,
            **filters,  # type: ignore[arg-type]  # checked by history()
        )
    return {
        "queue": transport.queue,
        "supported": kept is not None,
        "records": records,
        "limit": limit,
        "after": after,
        "message": message_id,
        "filters": filters,
        "outcomes": HISTORY_OUTCOMES,
        "next_after": records[-1].id if len(records) == limit else None,
    }


async def history_page(request: Request) -> Response:
    """A queue's job history, newest first, filtered and paged; one message's story with
    ``?message=``. Read-only (the history is set with ``pgque history --set``)."""
    dashboard = _dashboard(request)
    data = await _history_data(request)
    title = f"history of {data['queue']}"
    if data["message"] is not None:
        title = f"message {data['message']} of {data['queue']}"
    return dashboard.render(request, "history.html", title=title, **data)


async def api_history(request: Request) -> Response:
    """``GET /api/queues/{queue}/history?message=&group=&kind=&outcome=&after=&limit=``."""
    data = await _history_data(request)
    return JSONResponse(
        {
            "queue": data["queue"],
            "supported": data["supported"],
            "records": [
                {**record.model_dump(mode="json"), "duration": record.duration}
                for record in data["records"]
            ],
            "next_after": data["next_after"],
        }
    )


async def _workers_data(request: Request) -> dict[str, Any]:
    """The queue's live workers (``alive=1``: only those alive). Empty, with ``supported``
    False, on a backend that does not keep them."""
    transport = await _transport(request)
    alive_only = request.query_params.get("alive") in ("1", "true")
    listed: list[WorkerInfo] = []
    supported = transport.capabilities.workers and isinstance(transport, AsyncSupportsWorkers)
    if supported:
        assert isinstance(transport, AsyncSupportsWorkers)
        listed = await transport.workers(include_gone=not alive_only)
    return {
        "queue": transport.queue,
        "supported": supported,
        "workers": listed,
        "alive_only": alive_only,
    }


async def workers_page(request: Request) -> Response:
    """A queue's live workers: identity, alive or gone, busy slots and what each holds, and
    the leases each still holds (a gone worker's groups wait for them to expire)."""
    dashboard = _dashboard(request)
    data = await _workers_data(request)
    return dashboard.render(request, "workers.html", title=f"workers of {data['queue']}", **data)


async def api_workers(request: Request) -> Response:
    """``GET /api/queues/{queue}/workers?alive=1``."""
    data = await _workers_data(request)
    return JSONResponse(
        {
            "queue": data["queue"],
            "supported": data["supported"],
            "workers": [info.model_dump(mode="json") for info in data["workers"]],
        }
    )


async def keys_page(request: Request) -> Response:
    """A queue's fairness keys: in flight (and cap), groups, backlog, oldest age, policy,
    tokens; read-only (policies are set with ``pgque key-policy``)."""
    dashboard = _dashboard(request)
    data = await _keys_data(request)
    return dashboard.render(request, "keys.html", title=f"fairness keys of {data['queue']}", **data)


async def api_keys(request: Request) -> Response:
    """``GET /api/queues/{queue}/keys?after=&limit=``: one page of fairness keys."""
    data = await _keys_data(request)
    return JSONResponse(
        {
            "queue": data["queue"],
            "supported": data["supported"],
            "keys": [info.model_dump(mode="json") for info in data["keys"]],
            "next_after": data["next_after"],
        }
    )


#: The actions on a group (the form's ``group``) and on a dead letter (its ``id``).
_GROUP_ACTIONS = ("pause", "resume", "retry-now", "unblock", "drop-head")
_LETTER_ACTIONS = ("redrive", "redrive-tail", "delete")
#: The actions on a scheduled message (its ``id``).
_SCHEDULED_ACTIONS = ("cancel",)
_ACTIONS = (*_GROUP_ACTIONS, *_LETTER_ACTIONS, *_SCHEDULED_ACTIONS)
#: The form field of the confirmation a destructive action needs: the exact id of what it
#: destroys (the page's confirmation dialog fills it in, static/dashboard.js).
CONFIRM_FIELD = "confirm"
#: The actions that destroy something, and what their confirmation must name.
_DESTRUCTIVE = {
    "drop-head": "the group id (its head goes to the dead letters)",
    "delete": "the dead letter's id (it is deleted for good)",
    "cancel": "the message id of the scheduled message (it is dropped for good)",
}


def _confirmed(form: Any, name: str, target: str) -> None:
    """Raise InvalidInput unless a destructive action *name*'s form confirms *target*."""
    if name in _DESTRUCTIVE and form.get(CONFIRM_FIELD) != target:
        raise InvalidInput(
            f"{name} destroys data: its form must carry {CONFIRM_FIELD}= {_DESTRUCTIVE[name]}, "
            "exactly; the page's confirmation fills it in (reload the page and retry)"
        )


async def action(request: Request) -> Response:
    """Run one operator action (a POST with the CSRF token); 403 unless actions are allowed."""
    dashboard = _dashboard(request)
    if not dashboard.allow_actions:
        raise HTTPException(403, "this dashboard is read-only (start it with --allow-actions)")
    name = str(request.path_params["action"])
    if name not in _ACTIONS:
        raise HTTPException(404, f"no action {name!r}")
    form = await request.form()
    token = form.get(CSRF_FIELD)
    if not csrf_valid(
        dashboard.secret,
        request.cookies.get(CSRF_COOKIE),
        token if isinstance(token, str) else None,
    ):
        raise HTTPException(403, "the CSRF token is missing or wrong: reload the page and retry")
    transport = await _transport(request)
    base = request.scope.get("root_path", "") or ""
    queue = transport.queue
    message: int | None = None
    if name in _GROUP_ACTIONS:
        group_id = form.get("group")
        if not isinstance(group_id, str) or not group_id:
            raise InvalidInput("no group id in the form")
        _confirmed(form, name, group_id)
        target = group_path(queue, group_id)
        done = await _group_action(transport, name, group_id, form)
        if name in ("unblock", "drop-head"):
            message = _form_int(form, "head")
    elif name in _SCHEDULED_ACTIONS:
        message = _form_int(form, "id")
        if message is None:
            raise InvalidInput("no message id in the form")
        _confirmed(form, name, str(message))
        target = f"/queues/{queue}/scheduled"
        done = "cancel" if await transport.cancel(message) else "not-scheduled"
    else:
        letter = _form_int(form, "id")
        if letter is None:
            raise InvalidInput("no dead-letter id in the form")
        _confirmed(form, name, str(letter))
        if name == "delete":
            changed = await transport.delete_dead_letters([letter]) > 0
        else:
            changed = await transport.redrive([letter], in_place=name == "redrive") > 0
        target = f"/queues/{queue}/dead-letters"
        done = name if changed else "noop"
    joiner = "&" if "?" in target else "?"
    said = f"done={done}" if message is None else f"done={done}&message={message}"
    return RedirectResponse(f"{base}{target}{joiner}{said}", status_code=303)


#: The bulk actions on groups (``pgque.core.bulk``) and on dead letters.
_BULK_GROUP_ACTIONS = ("pause", "resume", "retry-now")
_BULK_LETTER_ACTIONS = ("redrive", "delete")
#: How many of the chosen ids a bulk preview lists.
BULK_PREVIEW_IDS = 20


def _form_text(form: Any, field: str) -> str | None:
    """The text of *field* in *form*; None when absent or empty."""
    raw = form.get(field)
    return raw if isinstance(raw, str) and raw else None


def _bulk_fields(form: Any, on_groups: bool) -> dict[str, Any]:
    """The selection a bulk form carries: its ids (``group`` or ``id``, repeated) and filter."""
    prefix = form.get("prefix")
    fields: dict[str, Any] = {
        # A prefix field sent empty is the page's "every group / dead letter" (bounded).
        "prefix": prefix if isinstance(prefix, str) else None,
        "limit": _form_int(form, "limit") or MAX_BULK,
    }
    if on_groups:
        chosen = [g for g in form.getlist("group") if isinstance(g, str) and g]
        fields["group_ids"] = chosen or None
        fields["state"] = _state(_form_text(form, "state"))
        key = form.get("key")
        # The key field is "" when not used; "(no key)" is how a page names the default key.
        fields["key"] = None if not isinstance(key, str) or not key else key
        if fields["key"] == DEFAULT_KEY_LABEL:
            fields["key"] = DEFAULT_KEY
    else:
        ids = [_int(i, "id", None, 1, 2**63 - 1) for i in form.getlist("id") if isinstance(i, str)]
        fields["ids"] = [i for i in ids if i is not None] or None
        fields["kind"] = _form_text(form, "kind")
    return fields


async def bulk_action(request: Request) -> Response:
    """Preview or run one bulk action over a selection or a filter (a POST with the CSRF
    token; 403 unless actions are allowed).

    Without the confirmation field the action changes nothing: the page shows how many items
    match and which, and a form carrying the same selection with the confirmation. With it,
    the selection is read again and acted on, at most ``limit`` items (1,000 at most), and the
    redirect says how many matched and how many changed.
    """
    dashboard = _dashboard(request)
    if not dashboard.allow_actions:
        raise HTTPException(403, "this dashboard is read-only (start it with --allow-actions)")
    name = str(request.path_params["action"])
    on_groups = name in _BULK_GROUP_ACTIONS
    if not on_groups and name not in _BULK_LETTER_ACTIONS:
        raise HTTPException(404, f"no bulk action {name!r}")
    form = await request.form()
    token = form.get(CSRF_FIELD)
    if not csrf_valid(
        dashboard.secret,
        request.cookies.get(CSRF_COOKIE),
        token if isinstance(token, str) else None,
    ):
        raise HTTPException(403, "the CSRF token is missing or wrong: reload the page and retry")
    transport = await _transport(request)
    queue = transport.queue
    fields = _bulk_fields(form, on_groups)
    confirmed = form.get(CONFIRM_FIELD) == f"bulk-{name}"
    result: BulkResult[str] | BulkResult[int]
    if name == "pause":
        result = await transport.bulk_pause(**fields, dry_run=not confirmed)
    elif name == "resume":
        result = await transport.bulk_resume(**fields, dry_run=not confirmed)
    elif name == "retry-now":
        result = await transport.bulk_retry_now(**fields, dry_run=not confirmed)
    elif name == "redrive":
        result = await transport.bulk_redrive(**fields, dry_run=not confirmed)
    else:
        result = await transport.bulk_delete_dead_letters(**fields, dry_run=not confirmed)
    base = request.scope.get("root_path", "") or ""
    target = f"/queues/{queue}/groups" if on_groups else f"/queues/{queue}/dead-letters"
    if confirmed:
        said = f"done=bulk-{name}&matched={result.matched}&changed={result.changed}"
        return RedirectResponse(f"{base}{target}?{said}", status_code=303)
    shown = [str(item) for item in result.ids[:BULK_PREVIEW_IDS]]
    return dashboard.render(
        request,
        "bulk.html",
        title=f"bulk {name} on {queue}",
        queue=queue,
        act=name,
        on_groups=on_groups,
        result=result,
        shown=shown,
        fields=fields,
        back=target,
        confirm_field=CONFIRM_FIELD,
    )


def _form_int(form: Any, field: str) -> int | None:
    """The positive whole number of *field* in *form*, None when absent or empty; raises
    InvalidInput for anything else."""
    raw = form.get(field)
    return _int(raw if isinstance(raw, str) else None, field, None, 1, 2**63 - 1)


async def _group_action(transport: AsyncTransport, name: str, group_id: str, form: Any) -> str:
    """Run group action *name* on *group_id*; return what the page says (a key of _DONE).

    ``unblock`` and ``drop-head`` act only on the head the page showed (the form's ``head``):
    when the group is still blocked on another head they change nothing (``head-changed``).
    """
    if name == "pause":
        return name if await transport.pause(group_id) else "noop"
    if name == "resume":
        return name if await transport.resume(group_id) else "noop"
    if name == "retry-now":
        return name if await transport.retry_now(group_id) else "no-retry"
    head = _form_int(form, "head")
    if await transport.unblock(group_id, drop_head=name == "drop-head", head=head):
        return name
    if head is not None:
        info = await transport.group(group_id)
        if info is not None and info.state == "blocked" and info.head_message_id != head:
            return "head-changed"
    return "noop"


def _json_stats(queue: str, stats: QueueStats) -> dict[str, Any]:
    return {"queue": queue, **stats.model_dump(mode="json")}


async def api_queues(request: Request) -> Response:
    """``GET /api/queues``: every queue's latest counts, with ``read_at`` (epoch seconds), and
    ``unreadable``: the queues whose counts cannot be read, each with its ``error``."""
    queues, unreadable = [], []
    for row in await _queue_rows(_dashboard(request)):
        if row["stats"] is None:
            unreadable.append({"queue": row["name"], "error": row["error"]})
        else:
            queues.append({**_json_stats(row["name"], row["stats"]), "read_at": row["read_at"]})
    return JSONResponse({"queues": queues, "unreadable": unreadable})


async def api_groups(request: Request) -> Response:
    """``GET /api/queues/{queue}/groups?state=&after=&limit=&prefix=``: one page of groups."""
    data = await _groups_page_data(request)
    return JSONResponse(
        {
            "queue": data["queue"],
            "groups": [info.model_dump(mode="json") for info in data["groups"]],
            "next_after": data["next_after"],
        }
    )


async def api_group(request: Request) -> Response:
    """``GET /api/queues/{queue}/groups/{group}``: one group and the why-sentence."""
    group_id = _group_id(request)
    view = await _group_view(request, group_id)
    if view is None:
        return JSONResponse({"error": f"no group {group_id!r}"}, status_code=404)
    info, why = view
    return JSONResponse({"queue": _queue(request), **info.model_dump(mode="json"), "why": why})


async def api_dead_letters(request: Request) -> Response:
    """``GET /api/queues/{queue}/dead-letters?after=&limit=``: one page of dead letters."""
    transport = await _transport(request)
    limit = _int(request.query_params.get("limit"), "limit", DEFAULT_PAGE, 1, 10_000)
    after = _int(request.query_params.get("after"), "after", None, 0, 2**63 - 1)
    assert limit is not None
    letters = await transport.dead_letters(limit, after=after)
    return JSONResponse(
        {
            "queue": transport.queue,
            "dead_letters": [letter.model_dump(mode="json") for letter in letters],
            "next_after": letters[-1].id if len(letters) == limit else None,
        }
    )


def _wants_json(request: Request) -> bool:
    root = request.scope.get("root_path", "") or ""
    return request.url.path[len(root) :].startswith("/api/")


def _error(request: Request, status: int, message: str) -> Response:
    if _wants_json(request):
        return JSONResponse({"error": message}, status_code=status)
    dashboard = _dashboard(request)
    return dashboard.render(
        request, "error.html", status=status, title="error", status_code=status, message=message
    )


async def _on_unknown_queue(request: Request, exc: Exception) -> Response:
    return _error(request, 404, f"no queue {str(exc)!r} here")


async def _on_invalid(request: Request, exc: Exception) -> Response:
    return _error(request, 400, str(exc))


async def _on_pgque_error(request: Request, exc: Exception) -> Response:
    return _error(request, 503, f"the queue server failed: {exc}")


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(request, exc.status_code, str(exc.detail))


class _DashboardApp(Starlette):
    """Starlette with :class:`HeadersMiddleware` outside its whole stack: the security headers
    go on every answer, the 500s of its ServerErrorMiddleware included."""

    def build_middleware_stack(self) -> ASGIApp:
        """Return Starlette's stack inside the headers layer."""
        return HeadersMiddleware(super().build_middleware_stack())


def _named_schedules(
    schedules: Mapping[str, Schedule] | Sequence[Schedule],
) -> list[tuple[str, Schedule]]:
    """Return *schedules* as (name, schedule) pairs; raises TypeError for one that is not a
    Schedule."""
    if isinstance(schedules, Mapping):
        pairs = [(str(name), schedule) for name, schedule in schedules.items()]
    else:
        pairs = [(f"schedule {n}", schedule) for n, schedule in enumerate(schedules, 1)]
    for name, schedule in pairs:
        if not isinstance(schedule, Schedule):
            raise TypeError(f"{name} is a {type(schedule).__name__}, not a pgque Schedule")
    return pairs


def create_app(
    url: str | None = None,
    *,
    transports: Sequence[AsyncTransport] | None = None,
    allow_actions: bool = False,
    token: str | None = None,
    allowed_hosts: Iterable[str] = DEFAULT_ALLOWED_HOSTS,
    routes: Sequence[BaseRoute] = (),
    refresh: float = REFRESH_S,
    sample_interval: float = SAMPLE_INTERVAL_S,
    secret: bytes | None = None,
    schedules: Mapping[str, Schedule] | Sequence[Schedule] = (),
) -> Starlette:
    """Return the dashboard as an ASGI application (Starlette).

    Pass *url* (the dashboard opens one asyncio transport per queue of that server and closes
    them at the app's shutdown) or *transports* (asyncio transports, one per queue, that the
    caller opened and closes). *allow_actions* enables pause, resume, unblock, redrive and
    delete (else they answer 403 and have no buttons); *token* protects every route (bearer,
    basic auth or a ``?token=`` login). *allowed_hosts* are the host names the app answers
    to, with any port (DNS names or IP addresses; default :data:`DEFAULT_ALLOWED_HOSTS`, the
    loopback names ``127.0.0.1``, ``localhost`` and ``::1``): a request whose ``Host`` names
    another answers 400. Whatever the token, a write (a POST, PUT, PATCH or DELETE) or a
    WebSocket another site sent (``Origin``, ``Sec-Fetch-Site``) answers 403. *routes* are
    mounted beside the dashboard's own (a
    ``/metrics`` route, for instance) behind the same token. *refresh* is the seconds
    between live updates of the counts, *sample_interval* between the stats samples the
    throughput chart is drawn from; *secret* signs CSRF tokens (default: random per app).
    *schedules* are the periodic schedules (:class:`~pgque.core.scheduling.Schedule`) a
    queue's schedules page shows, each entry with its last and next tick: a mapping of a name
    to show (``pgque dashboard --schedule`` gives ``MODULE:SCHEDULE``) to a schedule, or
    schedules alone.

    Raises ValueError unless exactly one of *url* and *transports* is given or for an entry of
    *allowed_hosts* that is not a host name, and ConfigurationError for a URL no installed
    backend serves.
    """
    hosts = allowed_host_names(allowed_hosts)
    named = _named_schedules(schedules)
    source = QueueSource(url, transports, sample_interval=sample_interval)
    dashboard = Dashboard(
        source,
        allow_actions=allow_actions,
        secret=secret if secret is not None else secrets.token_bytes(32),
        refresh=refresh,
        schedules=named,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await source.aclose()

    q = "/queues/{queue}"
    app_routes: list[BaseRoute] = [
        Route("/", queues_page, name="queues"),
        Route("/fragments/queues", queues_fragment),
        Route(q + "/summary", summary_fragment),
        Route(q + "/groups", groups_page),
        Route(q + "/group", group_page),
        Route(q + "/groups/{group:pgque_group}", group_page),
        Route(q + "/dead-letters", dead_letters_page),
        Route(q + "/scheduled", scheduled_page),
        Route(q + "/schedules", schedules_page),
        Route(q + "/keys", keys_page),
        Route(q + "/history", history_page),
        Route(q + "/messages", messages_page),
        Route(q + "/messages/{id}", message_page),
        Route("/search", search),
        Route(q + "/workers", workers_page),
        Route(q + "/actions/{action}", action, methods=["POST"]),
        Route(q + "/bulk/{action}", bulk_action, methods=["POST"]),
        Route("/api/queues", api_queues),
        Route("/api" + q + "/groups", api_groups),
        Route("/api" + q + "/group", api_group),
        Route("/api" + q + "/groups/{group:pgque_group}", api_group),
        Route("/api" + q + "/dead-letters", api_dead_letters),
        Route("/api" + q + "/scheduled", api_scheduled),
        Route("/api" + q + "/keys", api_keys),
        Route("/api" + q + "/history", api_history),
        Route("/api" + q + "/messages", api_messages),
        Route("/api" + q + "/messages/{id}", api_message),
        Route("/api" + q + "/workers", api_workers),
        *routes,
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    app = _DashboardApp(
        routes=app_routes,
        middleware=[Middleware(SecurityMiddleware, token=token, allowed_hosts=hosts)],
        exception_handlers={
            UnknownQueue: _on_unknown_queue,
            InvalidInput: _on_invalid,
            PgqueError: _on_pgque_error,
            HTTPException: _on_http,
        },
        lifespan=lifespan,
    )
    app.state.pgque_dashboard = dashboard
    return app
