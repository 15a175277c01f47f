"""A TCP proxy that can lose a reply: the server ran the command, the client never hears back.

That is the nastiest moment for a connection to die: a claim was granted (a lease nobody
holds), or an ack committed that its worker believes failed. A cut from the server side rarely
lands exactly there; this proxy makes it land there on demand.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading

__all__ = ["ReplyDropper"]


class _Pair:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.armed = False
        self.closed = False

    def close(self) -> None:
        self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class ReplyDropper:
    """Forward 127.0.0.1:``port`` to *target_port*; :meth:`arm` drops one upcoming reply."""

    def __init__(self, target_port: int) -> None:
        self._target = ("127.0.0.1", target_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        #: replies dropped so far (each closed its connection)
        self.dropped = 0
        threading.Thread(target=self._accept, name="chaos-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs = [p for p in self._pairs if not p.closed] + [pair]
            for up in (True, False):
                threading.Thread(target=self._pump, args=(pair, up), daemon=True).start()

    def _pump(self, pair: _Pair, up: bool) -> None:
        source, target = (pair.client, pair.upstream) if up else (pair.upstream, pair.client)
        try:
            while data := source.recv(65536):
                if not up and pair.armed:
                    # the server has answered: the command ran. The client never learns it.
                    with self._lock:
                        self.dropped += 1
                    break
                target.sendall(data)
        except OSError:
            pass
        pair.close()

    def arm(self, rng: random.Random) -> bool:
        """Make one random open connection lose its next reply; False if none is open."""
        with self._lock:
            pairs = [p for p in self._pairs if not p.closed and not p.armed]
            if not pairs:
                return False
            rng.choice(pairs).armed = True
            return True

    def close(self) -> None:
        """Stop accepting and close every connection."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for pair in self._pairs:
                pair.close()
