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

Streams: ``await ep.open_stream(dest)`` / ``await ep.accept_stream()`` give
an :class:`AsyncStream` (ordered messages both ways; ``send`` waits for room
in the window, ``recv`` returns ``None`` at the peer's end; ``async with``
closes it, ``async for`` reads it to the end)::

    async with await client.open_stream(addr) as s:
        await s.send(b"one")
        await s.finish()
        async for message in s:
            print(message)

A message received for a cancelled ``recv`` goes back to the stream, and a
stream accepted for a cancelled ``accept_stream`` back to the endpoint.

Every method must be called from a coroutine running in an event loop (any
loop, any thread; one endpoint can serve several loops).
"""

from types import TracebackType
from typing import Any, AsyncIterator, Dict, Optional, Type

from . import _native
from ._native import Request, RpcId
from ._types import Address, Buffer, ConfigLike

__all__ = ["AsyncStream", "Endpoint", "Request", "RpcId"]


class AsyncStream:
    """One end of a stream for asyncio: ordered, reliable messages each way.

    Returned by :meth:`Endpoint.open_stream` and :meth:`Endpoint.accept_stream`.
    One task may send while another receives. :meth:`close` (or leaving an
    ``async with`` block) aborts the stream unless :meth:`finish` was called
    (the peer then raises :class:`homars.StreamReset`); ``async for`` yields
    the received messages until the peer finishes. Failures raise
    :class:`homars.StreamError` subclasses or :class:`homars.PeerDead`.
    """

    __slots__ = ("_s",)

    def __init__(self, native: _native.AsyncStream) -> None:
        self._s = native

    @property
    def id(self) -> RpcId:
        """The stream's id (its RPC)."""
        return self._s.id

    @property
    def peer(self) -> str:
        """The peer, as ``"IP:port"``."""
        return self._s.peer

    @property
    def finished(self) -> bool:
        """True once :meth:`finish` succeeded (or after :meth:`close`)."""
        return self._s.finished

    async def send(self, data: Buffer, timeout: Optional[float] = None) -> None:
        """Sends ``data``, waiting while the window is full (the peer has not
        read enough): at most ``timeout`` seconds (:class:`homars.HomaTimeout`;
        ``0`` only tries, :class:`homars.LimitReached` when full). A send that
        times out or is cancelled did not send its message."""
        await self._s.send(data, timeout)

    async def recv(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next message, or ``None`` once the peer finished; at most
        ``timeout`` seconds (:class:`homars.HomaTimeout`). Messages that
        arrived before a failure come first, then the failure."""
        fut = self._s.recv(timeout)
        try:
            return await fut
        except BaseException:
            # Cancelled after the message was set on the future but before
            # this task ran again: the message goes back to the stream.
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._s._unrecv(fut.result())
            raise

    async def finish(self) -> None:
        """Ends our direction: the peer's ``recv`` returns ``None`` after
        every message sent before. Receiving goes on. Idempotent."""
        await self._s.finish()

    async def wait_closed(self, timeout: Optional[float] = None) -> None:
        """Waits until the stream has closed: both directions ended and ours
        acknowledged, so the peer has everything; at most ``timeout`` seconds
        (:class:`homars.HomaTimeout`). Await it before closing the endpoint
        right after :meth:`finish`, or the end may never reach the peer."""
        await self._s.wait_closed(timeout)

    async def close(self) -> None:
        """Lets the stream go: aborts it unless finished (calls still waiting
        on it raise :class:`homars.StreamReset`). Idempotent."""
        self._s.close()

    async def __aenter__(self) -> "AsyncStream":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        message = await self.recv()
        if message is None:
            raise StopAsyncIteration
        return message

    def __repr__(self) -> str:
        return repr(self._s)


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

    async def open_stream(self, dest: Address) -> AsyncStream:
        """Opens a stream to ``dest`` (completes at once: messages sent
        meanwhile wait for the peer to accept; a peer that refuses or never
        answers makes the stream's calls raise :class:`homars.StreamRefused`
        or :class:`homars.StreamOpenTimeout`)."""
        return AsyncStream(self._ep.open_stream(dest))

    async def accept_stream(self, timeout: Optional[float] = None) -> AsyncStream:
        """The next stream a peer opens, within ``timeout`` seconds
        (``None``: no limit)."""
        fut = self._ep.accept_stream(timeout)
        try:
            return AsyncStream(await fut)
        except BaseException:
            # As in recv_request: a stream accepted for a task cancelled
            # before it ran again goes back for the next accept_stream.
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._ep._unaccept(fut.result())
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
