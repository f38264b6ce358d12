"""homars: the Homa datacenter transport for Python.

A thin layer over the Rust runtime ``homa`` (homa-rs): receiver-driven RPCs
over UDP (or raw IP, wire-compatible with Linux Homa). Every protocol
decision is made in Rust; this package converts values, releases the GIL
while a call waits, and maps the runtime's errors to exceptions.

Blocking API::

    import homars

    with homars.Endpoint("127.0.0.1:0") as client:
        response = client.call("127.0.0.1:4000", b"ping", timeout=1.0)

Streams (ordered messages both ways over one RPC): ``Endpoint.open_stream``
/ ``accept_stream`` give a :class:`Stream`; :mod:`homars.aio` has
``AsyncStream``. Their failures raise :class:`StreamError` subclasses.

asyncio API: :mod:`homars.aio`. Exceptions: :mod:`homars.errors` (all
re-exported here).
"""

from ._native import (
    Endpoint,
    Request,
    RpcId,
    Stream,
    __version__,
    default_config,
    loopback_config,
)
from .errors import (
    BadAddress,
    ConfigError,
    DesignMismatch,
    HomaError,
    HomaOSError,
    HomaTimeout,
    InvalidArgument,
    LimitReached,
    MessageTooLarge,
    NotAwaitingReply,
    NothingOutstanding,
    PeerDead,
    PermissionDenied,
    ResponseTooLarge,
    Shutdown,
    StreamError,
    StreamFinished,
    StreamOpenTimeout,
    StreamRefused,
    StreamReset,
    UnknownRpc,
)

__all__ = [
    "Endpoint",
    "Request",
    "RpcId",
    "Stream",
    "__version__",
    "default_config",
    "loopback_config",
    "HomaError",
    "HomaTimeout",
    "PeerDead",
    "DesignMismatch",
    "MessageTooLarge",
    "ResponseTooLarge",
    "NothingOutstanding",
    "Shutdown",
    "InvalidArgument",
    "BadAddress",
    "UnknownRpc",
    "NotAwaitingReply",
    "ConfigError",
    "LimitReached",
    "PermissionDenied",
    "HomaOSError",
    "StreamError",
    "StreamReset",
    "StreamRefused",
    "StreamOpenTimeout",
    "StreamFinished",
]
