"""Type stubs of the native module (Rust, PyO3)."""

import asyncio
from types import TracebackType
from typing import Any, Dict, Literal, Optional, Tuple, Type

from ._types import Address, Buffer, ConfigLike

__version__: str

def default_config() -> Dict[str, Any]:
    """The runtime's default configuration, as a dict."""

def loopback_config() -> Dict[str, Any]:
    """The configuration for the loopback interface (64 KB packets, messages
    up to 16 MB), as a dict."""

class RpcId:
    """Names one RPC: the protocol's id and the peer at the other end."""

    def __init__(self, id: int, peer: Address) -> None: ...
    @property
    def id(self) -> int:
        """The protocol's id of the RPC."""
    @property
    def peer(self) -> str:
        """The other end, as ``"IP:port"``."""
    @property
    def is_client(self) -> bool:
        """True for an RPC this endpoint started."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class Request:
    """A request received by a server."""

    @property
    def id(self) -> RpcId:
        """The RPC, for ``reply`` (or ``abort``)."""
    @property
    def peer(self) -> str:
        """The client's address, as ``"IP:port"``."""
    @property
    def data(self) -> bytes:
        """The request message."""

class Stream:
    """One end of a stream: ordered, reliable messages each way."""

    def send(self, data: Buffer, timeout: Optional[float] = None) -> None: ...
    def recv(self, timeout: Optional[float] = None) -> Optional[bytes]: ...
    def finish(self) -> None: ...
    def wait_closed(self, timeout: Optional[float] = None) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Stream": ...
    def __exit__(self, *args: Any) -> bool: ...

class AsyncStream:
    """One end of a stream for asyncio; use ``homars.aio.AsyncStream``."""

    @property
    def id(self) -> RpcId: ...
    @property
    def peer(self) -> str: ...
    @property
    def finished(self) -> bool: ...
    def send(self, data: Buffer, timeout: Optional[float] = None) -> "asyncio.Future[None]": ...
    def recv(self, timeout: Optional[float] = None) -> "asyncio.Future[Optional[bytes]]": ...
    def _unrecv(self, data: Optional[bytes]) -> None: ...
    def finish(self) -> "asyncio.Future[None]": ...
    def wait_closed(self, timeout: Optional[float] = None) -> "asyncio.Future[None]": ...
    def close(self) -> None: ...

class Endpoint:
    """A Homa endpoint with blocking calls (see the package docs)."""

    def open_stream(self, dest: Address) -> Stream: ...
    def accept_stream(self, timeout: Optional[float] = None) -> Stream: ...

    def __init__(self, addr: Address, config: ConfigLike = None) -> None: ...
    @property
    def local_addr(self) -> str:
        """The bound address, as ``"IP:port"``."""
    @property
    def config(self) -> Dict[str, Any]:
        """The configuration in force, as a dict."""
    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
    def call(self, dest: Address, data: Buffer, timeout: Optional[float] = None) -> bytes:
        """Sends ``data`` to ``dest`` and waits for the response."""
    def send_request(self, dest: Address, data: Buffer) -> RpcId:
        """Starts an RPC and returns its id at once."""
    def recv_response(self, id: RpcId, timeout: Optional[float] = None) -> bytes:
        """Waits for the response of ``id``."""
    def recv_any_response(self, timeout: Optional[float] = None) -> Tuple[RpcId, bytes]:
        """Waits for whichever outstanding RPC finishes first."""
    def recv_request(self, timeout: Optional[float] = None) -> Request:
        """Waits for the next request."""
    def reply(self, id: RpcId, data: Buffer) -> None:
        """Sends the response to a request."""
    def abort(self, id: RpcId) -> None:
        """Abandons an RPC."""
    def metrics(self) -> Dict[str, Any]:
        """The protocol's counters and gauges."""
    def runtime_stats(self) -> Dict[str, Any]:
        """The runtime's own counters."""
    def close(self) -> None:
        """Closes the endpoint (idempotent)."""
    def __enter__(self) -> "Endpoint": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]: ...

class AsyncEndpoint:
    """The asyncio view of an endpoint; use ``homars.aio.Endpoint``."""

    def __init__(self, addr: Address, config: ConfigLike = None) -> None: ...
    @property
    def local_addr(self) -> str: ...
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def closed(self) -> bool: ...
    def blocking(self) -> Endpoint: ...
    def call(
        self, dest: Address, data: Buffer, timeout: Optional[float] = None
    ) -> "asyncio.Future[bytes]": ...
    def recv_response(
        self, id: RpcId, timeout: Optional[float] = None
    ) -> "asyncio.Future[bytes]": ...
    def recv_request(self, timeout: Optional[float] = None) -> "asyncio.Future[Request]": ...
    def _requeue_request(self, request: Request) -> None: ...
    def open_stream(self, dest: Address) -> AsyncStream: ...
    def accept_stream(self, timeout: Optional[float] = None) -> "asyncio.Future[AsyncStream]": ...
    def _unaccept(self, stream: AsyncStream) -> None: ...
    def send_request(self, dest: Address, data: Buffer) -> RpcId: ...
    def reply(self, id: RpcId, data: Buffer) -> None: ...
    def abort(self, id: RpcId) -> None: ...
    def metrics(self) -> Dict[str, Any]: ...
    def runtime_stats(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...
