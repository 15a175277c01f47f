"""Browse and search on the dashboard (pgque.core.browse): a group's messages behind its head and
its scheduled ones, one message by id, a search by message id, kind or group prefix, and the
JSON routes ``/api/queues/{queue}/messages`` and ``/api/queues/{queue}/messages/{id}``.

Every page is read-only. On a backend without ``Capabilities.browse`` the pages say so and the
JSON says ``"supported": false``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from pgque.core.browse import MAX_MESSAGES_PAGE, MessageInfo, MessagePage
from pgque.core.contract import AsyncSupportsBrowse, AsyncTransport
from pgque.core.errors import InvalidInput
from pgque.core.models import ScheduledMessage

__all__ = [
    "api_message",
    "api_messages",
    "browsing",
    "group_messages",
    "message_json",
    "message_page",
    "messages_page",
    "search",
]

#: A page of messages when the request names no limit.
DEFAULT_MESSAGES_PAGE = 50
#: The search kinds of the overview's search box.
SEARCH_BY = ("message", "kind", "prefix")


def browsing(transport: AsyncTransport) -> AsyncSupportsBrowse | None:
    """*transport* as one that browses, or None when its backend does not
    (``Capabilities.browse``)."""
    if transport.capabilities.browse and isinstance(transport, AsyncSupportsBrowse):
        return transport
    return None


def message_json(info: MessageInfo) -> dict[str, Any]:
    """*info* as the JSON routes give it (every field of MessageInfo; times epoch seconds)."""
    out: dict[str, Any] = info.model_dump(mode="json")
    return out


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


async def _transport(request: Request) -> AsyncTransport:
    dashboard = request.app.state.pgque_dashboard
    transport: AsyncTransport = await dashboard.source.transport(str(request.path_params["queue"]))
    return transport


async def _messages_data(
    transport: AsyncTransport, params: Any, group_id: str | None = None
) -> dict[str, Any]:
    """A page of ``messages()`` from the query: ``group=`` (unless *group_id*), ``kind=``,
    ``after=`` (a page's next_after), ``limit=``; the group's scheduled messages too."""
    limit = _int(params.get("limit"), "limit", DEFAULT_MESSAGES_PAGE, 1, MAX_MESSAGES_PAGE)
    assert limit is not None
    after = _int(params.get("after"), "after", None, -(2**63), 2**63 - 1)
    group = group_id if group_id is not None else (params.get("group") or None)
    kind = params.get("kind") or None
    browse = browsing(transport)
    page = MessagePage(items=[])
    scheduled: list[ScheduledMessage] = []
    if browse is not None:
        page = await browse.messages(group_id=group, kind=kind, limit=limit, after=after)
        if group is not None and after is None:
            scheduled = await browse.scheduled(group_id=group, limit=limit)
    return {
        "queue": transport.queue,
        "supported": browse is not None,
        "messages": page.items,
        "next_after": page.next_after,
        "scheduled_messages": scheduled,
        "group": group,
        "kind": kind,
        "limit": limit,
        "after": after,
    }


async def group_messages(transport: AsyncTransport, params: Any, group_id: str) -> dict[str, Any]:
    """What the group page shows below the group: its messages behind the head (paged by
    ``after=``) and its scheduled ones."""
    data = await _messages_data(transport, params, group_id)
    return {
        "browse_supported": data["supported"],
        "messages": data["messages"],
        "messages_next_after": data["next_after"],
        "messages_after": data["after"],
        "messages_limit": data["limit"] if params.get("limit") else None,
        "scheduled_messages": data["scheduled_messages"],
    }


async def messages_page(request: Request) -> Response:
    """A queue's messages: by group (head first), by kind (a bounded scan), paged."""
    dashboard = request.app.state.pgque_dashboard
    data = await _messages_data(await _transport(request), request.query_params)
    title = f"messages of {data['queue']}"
    return dashboard.render(request, "messages.html", title=title, **data)  # type: ignore[no-any-return]


async def message_page(request: Request) -> Response:
    """One message: its group, kind, place, attempts, size and the start of its data."""
    dashboard = request.app.state.pgque_dashboard
    transport = await _transport(request)
    message_id = _int(str(request.path_params["id"]), "message id", None, 1, 2**63 - 1)
    assert message_id is not None
    browse = browsing(transport)
    info = None if browse is None else await browse.message(message_id)
    return dashboard.render(  # type: ignore[no-any-return]
        request,
        "message.html",
        status=200 if info is not None else 404,
        title=f"message {message_id} of {transport.queue}",
        queue=transport.queue,
        supported=browse is not None,
        message_id=message_id,
        info=info,
    )


async def api_messages(request: Request) -> Response:
    """``GET /api/queues/{queue}/messages?group=&kind=&after=&limit=``."""
    data = await _messages_data(await _transport(request), request.query_params)
    return JSONResponse(
        {
            "queue": data["queue"],
            "supported": data["supported"],
            "messages": [message_json(info) for info in data["messages"]],
            "next_after": data["next_after"],
            "scheduled": [m.model_dump(mode="json") for m in data["scheduled_messages"]],
        }
    )


async def api_message(request: Request) -> Response:
    """``GET /api/queues/{queue}/messages/{id}``: the message, or 404 once it is settled or
    unknown."""
    transport = await _transport(request)
    message_id = _int(str(request.path_params["id"]), "message id", None, 1, 2**63 - 1)
    assert message_id is not None
    browse = browsing(transport)
    info = None if browse is None else await browse.message(message_id)
    if info is None:
        return JSONResponse(
            {
                "queue": transport.queue,
                "supported": browse is not None,
                "error": f"no message {message_id}: settled or unknown",
            },
            status_code=404,
        )
    return JSONResponse(
        {"queue": transport.queue, "supported": True, "message": message_json(info)}
    )


async def search(request: Request) -> Response:
    """The overview's search box: ``?queue=&by=message|kind|prefix&q=`` leads to the message,
    the messages of that kind, or the groups whose id starts with the text."""
    params = request.query_params
    queue = params.get("queue") or ""
    by = params.get("by") or "message"
    text = (params.get("q") or "").strip()
    if by not in SEARCH_BY:
        raise InvalidInput(f"by must be one of {', '.join(SEARCH_BY)}, not {by!r}")
    if not queue:
        raise InvalidInput("pick a queue to search")
    dashboard = request.app.state.pgque_dashboard
    await dashboard.source.transport(queue)  # an unknown queue is refused here
    base = request.scope.get("root_path", "") + "/queues/" + quote(queue, safe="")
    if by == "message":
        message_id = _int(text, "message id", None, 1, 2**63 - 1)
        if message_id is None:
            raise InvalidInput("a message id is a whole number")
        return RedirectResponse(f"{base}/messages/{message_id}", status_code=303)
    if not text:
        raise InvalidInput(f"nothing to search: type a {by}")
    if by == "kind":
        return RedirectResponse(f"{base}/messages?{urlencode({'kind': text})}", status_code=303)
    return RedirectResponse(f"{base}/groups?{urlencode({'prefix': text})}", status_code=303)
