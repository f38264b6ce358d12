"""The asyncio API of homars.

::

    import asyncio
    import homars.aio

    async def main():
        async with homars.aio.Endpoint("127.0.0.1:0") as client:
            response = await client.call("127.0.0.1:4000", b"ping", timeout=1.0)

    asyncio.run(main())

Design: each wait is a future of the Rust runtime's tokio ``AsyncEndpoint``,
run on a tokio runtime private to homars (one worker thread, started on
first use) and bridged to an ``asyncio.Future`` of the running loop by the
native module itself (not ``pyo3-async-runtimes``), so that a result that
arrives at the moment its task is cancelled is not lost: a request received
for a cancelled ``recv_request`` goes back to the queue for the next one
(whether the cancellation reached the Rust future, the asyncio future, or
only the task awaiting it).
Cancelling ``call`` aborts its RPC; cancelling ``recv_response`` leaves the
RPC in place. The event loop's thread never blocks.

Every method must be called from a coroutine running in an event loop (any
loop, any thread; one endpoint can serve several loops).
"""

from types import TracebackType
from typing import Any, Dict, Optional, Type

from . import _native
from ._native import Request, RpcId
from ._types import Address, Buffer, ConfigLike

__all__ = ["Endpoint", "Request", "RpcId"]


class Endpoint:
    """A Homa endpoint for asyncio code.

    ``Endpoint(addr, config=None)`` binds ``addr`` (``"IP:port"`` or
    ``(IP, port)``; port 0 picks one) with ``config`` as for
    :class:`homars.Endpoint`. Use it with ``async with`` or call
    :meth:`close`.
    """

    __slots__ = ("_ep",)

    def __init__(self, addr: Address, config: ConfigLike = None) -> None:
        self._ep = _native.AsyncEndpoint(addr, config)

    @property
    def local_addr(self) -> str:
        """The bound address, as ``"IP:port"``."""
        return self._ep.local_addr

    @property
    def config(self) -> Dict[str, Any]:
        """The configuration in force, as a dict."""
        return self._ep.config

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._ep.closed

    def blocking(self) -> _native.Endpoint:
        """A blocking :class:`homars.Endpoint` for the same endpoint (same
        socket, same RPCs), e.g. for a worker thread."""
        return self._ep.blocking()

    async def call(self, dest: Address, data: Buffer, timeout: Optional[float] = None) -> bytes:
        """Sends ``data`` to ``dest`` and returns the response.

        Waits ``timeout`` seconds at most (``None``: until the protocol gives
        up on the peer); on timeout (:class:`homars.HomaTimeout`) or
        cancellation the RPC is aborted.
        """
        return await self._ep.call(dest, data, timeout)

    async def send_request(self, dest: Address, data: Buffer) -> RpcId:
        """Starts an RPC and returns its id (completes at once); collect the
        response with :meth:`recv_response`."""
        return self._ep.send_request(dest, data)

    async def recv_response(self, id: RpcId, timeout: Optional[float] = None) -> bytes:
        """The response of RPC ``id``. A timeout (or cancellation) leaves the
        RPC in place: wait again, or :meth:`abort` it."""
        return await self._ep.recv_response(id, timeout)

    async def recv_request(self, timeout: Optional[float] = None) -> Request:
        """The next request, within ``timeout`` seconds (``None``: no limit).
        Answer it with :meth:`reply`."""
        fut = self._ep.recv_request(timeout)
        try:
            return await fut
        except BaseException:
            # Cancelled after the request was set on the future but before
            # this task ran again: asyncio throws CancelledError in here and
            # the request would be lost. It goes back to the queue instead.
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._ep._requeue_request(fut.result())
            raise

    async def reply(self, id: RpcId, data: Buffer) -> None:
        """Sends the response to request ``id`` (completes at once)."""
        self._ep.reply(id, data)

    def abort(self, id: RpcId) -> None:
        """Abandons an RPC (see :meth:`homars.Endpoint.abort`)."""
        self._ep.abort(id)

    def metrics(self) -> Dict[str, Any]:
        """The protocol's counters and gauges, as a dict."""
        return self._ep.metrics()

    def runtime_stats(self) -> Dict[str, Any]:
        """The runtime's own counters, as a dict."""
        return self._ep.runtime_stats()

    def close(self) -> None:
        """Closes the endpoint: pending futures raise
        :class:`homars.Shutdown`; the port is released. Idempotent."""
        self._ep.close()

    async def __aenter__(self) -> "Endpoint":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._ep)
