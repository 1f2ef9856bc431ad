"""The lab's stand-in for the Kubernetes serve Service in a blue/green update: a local TCP proxy whose
target the update switches.

KubeRay's NewCluster upgrade moves the serve Service's selector to the new RayCluster once its Serve
applications are RUNNING: connections opened after that reach the new cluster, connections already
open stay on the old pods (kube-proxy keeps them) until they end. This proxy does the same, per
connection: each accepted connection is bound, for its whole life, to the target current when it was
accepted. On one host the two "clusters" are two Serve applications behind one Serve HTTP proxy, so
a target is a route prefix, which the proxy puts in front of the request's path.

One request per connection: the proxy asks the upstream for `Connection: close`. Otherwise a client's
keep-alive pool would go on sending new requests down a connection bound to the old target, and after
its deletion get Serve's 404 for a route that is gone; on Kubernetes those connections break when the
old pods go, and what a client does then is its own retry policy, which the lab does not model.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass


@dataclass
class ProxiedConnection:
    target: str  # the route prefix it was bound to
    opened_at: float  # time.perf_counter, the lab's clock
    closed_at: float | None = None


def rewrite_head(head: bytes, target: str) -> bytes:
    """An HTTP/1.1 request head with `target` put in front of its path and `Connection: close` asked."""
    request_line, *headers = head.decode("latin-1").split("\r\n")
    method, path, version = request_line.split(" ", 2)
    kept = [h for h in headers if h and not h.lower().startswith("connection:")]
    return "\r\n".join([f"{method} {target}{path} {version}", *kept, "Connection: close", "", ""]).encode("latin-1")


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the other side went away: the connection ends


class SwitchingProxy:
    """The proxy on 127.0.0.1 (a free port), in a thread with its own event loop, in front of
    `upstream_port` (Serve's HTTP proxy); `switch(target)` moves new connections to another route."""

    def __init__(self, upstream_port: int, target: str) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.connections: list[ProxiedConnection] = []
        self._target = target
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), name="switching-proxy",
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def target(self) -> str:
        with self._lock:
            return self._target

    def start(self) -> SwitchingProxy:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the switching proxy did not start listening within 10 s")
        return self

    def switch(self, target: str) -> float:
        """New connections go to `target` from now; returns when (the lab's clock)."""
        with self._lock:
            self._target = target
            return time.perf_counter()

    def open_connections(self, target: str) -> int:
        with self._lock:
            return sum(1 for c in self.connections if c.target == target and c.closed_at is None)

    def opened(self, target: str) -> int:
        with self._lock:
            return sum(1 for c in self.connections if c.target == target)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:
            connection = ProxiedConnection(self._target, time.perf_counter())
            self.connections.append(connection)
        upstream_writer = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            upstream_writer.write(rewrite_head(head, connection.target))
            to_upstream = asyncio.create_task(_pipe(reader, upstream_writer))  # the request's body
            await _pipe(upstream_reader, writer)  # the response, until Serve closes it
            to_upstream.cancel()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # a client that sent no request, or an upstream that refused: the client sees it closed
        finally:
            for side in (writer, upstream_writer):
                if side is not None:
                    side.close()
            with self._lock:
                connection.closed_at = time.perf_counter()
