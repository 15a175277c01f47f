"""The reply-dropping proxy forwards traffic, and an armed connection loses the next reply."""

from __future__ import annotations

import random
import socket
import threading

from pgque_chaos.proxy import ReplyDropper


def _echo_server() -> tuple[socket.socket, int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def _echo(conn: socket.socket) -> None:
    with conn:
        try:
            while data := conn.recv(1024):
                conn.sendall(data)
        except OSError:
            pass


def test_an_armed_connection_loses_the_reply_after_the_request_went_through() -> None:
    listener, port = _echo_server()
    proxy = ReplyDropper(port)
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
            client.sendall(b"ping")
            assert client.recv(1024) == b"ping"
            assert proxy.arm(random.Random(0))
            client.sendall(b"lost")
            assert client.recv(1024) == b""  # closed instead of answered
        assert proxy.dropped == 1
        assert not proxy.arm(random.Random(0))  # no open connection left to arm
    finally:
        proxy.close()
        listener.close()
