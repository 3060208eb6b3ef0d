"""Network conditions for the Redis tests: a port nothing listens on, an outage that ends."""

from __future__ import annotations

import socket
import threading

from promptweave.contrib.redis_store import connect

__all__ = ["Outage", "closed_port"]


class Outage:
    """A TCP relay to the test server that can be cut and restored, as a network outage would."""

    def __init__(self, url: str) -> None:
        options = connect(url).get_connection_kwargs()
        self.upstream = (options.get("host", "localhost"), options.get("port", 6379))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}/{options.get('db', 0)}"
        self.cut_off = False
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _address = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.cut_off:
                    client.close()
                    continue
                server = socket.create_connection(self.upstream)
                self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        for end in (source, target):
            end.close()

    def cut(self) -> None:
        with self.lock:
            self.cut_off = True
            for end in self.sockets:
                end.close()
            self.sockets.clear()

    def restore(self) -> None:
        with self.lock:
            self.cut_off = False

    def close(self) -> None:
        self.cut()
        self.listener.close()


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
