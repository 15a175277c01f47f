"""A script's refusal (``refuse``, lua/lib/refusals.lua) reaches the caller as a typed error
with its own words, on every supported Redis: 7 passes the text through, 6.2 wraps it in its
error handler's prefix (and cannot carry ``redis.error_reply``'s table at all: the refusal used
to arrive as "attempt to concatenate local 'err' (a table value)")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from pgque.core import Event, InvalidInput, PgqueError, QueueMoving, SchemaMismatch
from pgque.redis import RedisTransport
from pgque.redis._arguments import script_flags
from pgque.redis._errors import script_refusal, wrap_error
from pgque.redis._keys import script_keys
from pgque.redis._scripts import load_scripts

#: What Redis 7.0 and 6.2 answer for ``error('pgque: key layout: the queue ...', 0)``.
_SEVEN = "pgque: key layout: the queue holds layout 1 script: 0123abcd, on @user_script:140."
_SIX = (
    "Error running script (call to f_0123abcd): @user_script:140: pgque: key layout: the queue "
    "holds layout 1"
)


@pytest.mark.parametrize("message", [_SEVEN, _SIX], ids=["redis-7", "redis-6.2"])
def test_a_refusal_is_read_alike_from_both_server_shapes(message: str) -> None:
    refusal = script_refusal(redis.ResponseError(message))
    assert isinstance(refusal, SchemaMismatch)
    assert str(refusal) == "the queue holds layout 1"


def test_an_error_that_is_no_refusal_stays_a_plain_pgque_error() -> None:
    exc = redis.ResponseError("ERR unknown command 'FOO'")
    assert script_refusal(exc) is None
    error = wrap_error(exc, "redis://host/0")
    assert type(error) is PgqueError
    assert "unknown command" in str(error)


def test_a_queue_whose_meta_key_vanished_is_refused_as_moving_on_this_server(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    # A transport that wrote to a queue expects its meta key: without it (a flush, a failover
    # that lost the write, a slot moved without its keys) every script refuses, changing nothing.
    transport = transport_factory()
    p = transport.key_prefix
    transport.publish("g", Event(kind="k"))
    raw_client.delete(p + "meta")
    before = {key: raw_client.dump(key) for key in raw_client.scan_iter(match=p + "*")}
    with pytest.raises(QueueMoving, match="has no meta key on this node") as info:
        transport.publish("g", Event(kind="k"))
    assert "script:" not in str(info.value)
    assert "@user_script" not in str(info.value)
    after = {key: raw_client.dump(key) for key in raw_client.scan_iter(match=p + "*")}
    assert after == before


def test_a_malformed_settlement_is_refused_as_invalid_input_on_this_server(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    # The transports check settlements before any I/O; the script checks again (another client
    # version, a hand-made call): its refusal must still be an InvalidInput.
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    script = load_scripts()["settle_claim"]
    keys = script_keys(transport.key_prefix)
    claim_args = ["", "30", "0", "1", "", "dead_letter", "", "nonce", ""]
    bad = ["explode", "g", "token", "1", "", "", ""]
    with pytest.raises(redis.ResponseError) as raw:
        raw_client.eval(script.text, 2, *keys, script_flags(True, False), *claim_args, *bad)
    error = wrap_error(raw.value, "redis://test")
    assert isinstance(error, InvalidInput)
    assert str(error) == "Redis at redis://test refused the call: bad settlement 1"
