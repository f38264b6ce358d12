"""The exceptions of homars: one class for each error of the Rust runtime.

Every exception raised by the runtime is a :class:`HomaError`. Several also
derive from the builtin exception a Python programmer would try to catch,
so ``except TimeoutError`` or ``except ValueError`` work as expected.

- ``HomaTimeout`` (``TimeoutError``): a wait ran out of time.
- ``PeerDead`` (``ConnectionError``): the peer stopped answering.
- ``DesignMismatch``: the peer runs the other design (Homa vs SIRD).
- ``MessageTooLarge`` (``ValueError``): a request or reply is too long.
- ``ResponseTooLarge``: the server's response is too long for this endpoint.
- ``NothingOutstanding``: ``recv_any_response`` with no RPC outstanding.
- ``Shutdown``: the endpoint is closed.
- ``InvalidArgument`` (``ValueError``), with the subclasses ``BadAddress``,
  ``UnknownRpc`` (which is also what an aborted RPC raises),
  ``NotAwaitingReply`` and ``ConfigError``.
- ``LimitReached``: a configured limit of the endpoint; try again later.
- ``PermissionDenied`` (``PermissionError``): raw IP mode without privilege.
- ``HomaOSError`` (``OSError``): an operating-system error.
- ``StreamError``: base of the failures of a stream (blocking
  :class:`homars.Stream` and asyncio :class:`homars.aio.AsyncStream`), with
  ``StreamReset`` (``ConnectionResetError``: the peer aborted the stream, or
  this end did), ``StreamRefused`` (``ConnectionRefusedError``: the peer
  refused it, e.g. streams disabled there), ``StreamOpenTimeout``
  (``TimeoutError``: the peer never answered the opening) and
  ``StreamFinished`` (``send`` after ``finish``, or on a closed stream). A
  stream whose peer died raises ``PeerDead``, as an RPC does.

Each class's docstring names the Rust ``homa::Error`` variant it stands for.
The runtime has no separate "aborted" error: waiting for an RPC that was
aborted (by ``abort`` or by a timed-out ``call``) raises ``UnknownRpc``.
``recv_any_response`` raises the failure of the RPC it collected with that
RPC's id as ``rpc_id``.
"""

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover
    from ._native import RpcId

__all__ = [
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


class HomaError(Exception):
    """Base of every error the Homa runtime reports.

    ``rpc_id`` is set when the error is the outcome of one RPC collected by
    ``recv_any_response`` (and on ``UnknownRpc`` / ``NotAwaitingReply``);
    otherwise it is ``None``.
    """

    rpc_id: "Optional[RpcId]" = None


class HomaTimeout(HomaError, TimeoutError):
    """(``Timeout``) The wait ended before the message arrived. For ``call`` the RPC has
    been aborted; for ``recv_response`` it is still there."""


class PeerDead(HomaError, ConnectionError):
    """(``PeerDead``) The peer stopped answering; the RPC will never complete."""


class DesignMismatch(HomaError):
    """(``DesignMismatch``) The peer runs the other transport design (Homa vs SIRD)."""


class MessageTooLarge(HomaError, ValueError):
    """(``MessageTooLong``) The message exceeds the configured maximum (``core.max_message_size``).

    ``length`` is the message's size in bytes and ``limit`` the maximum.
    """

    length: int = 0
    limit: int = 0


class ResponseTooLarge(HomaError):
    """(``ResponseTooLong``) The server's response exceeds this endpoint's maximum message size.

    ``length`` is the response's size in bytes and ``limit`` the maximum.
    """

    length: int = 0
    limit: int = 0


class NothingOutstanding(HomaError):
    """(``NothingOutstanding``) ``recv_any_response`` was called with no RPC outstanding."""


class Shutdown(HomaError):
    """(``Closed``) The endpoint is closed (``close()``, or the end of its ``with``
    block); every call on it raises this, including calls that were waiting
    when it closed."""


class InvalidArgument(HomaError, ValueError):
    """An argument the runtime cannot use (base of the more precise ones)."""


class BadAddress(InvalidArgument):
    """(``BadAddress``) The address cannot be used (or parsed: addresses are ``"IP:port"``
    strings or ``(IP, port)`` tuples; names are not resolved)."""


class UnknownRpc(InvalidArgument):
    """(``UnknownRpc``) No RPC with this id: it finished (its response was collected),
    failed, was aborted, or never existed. ``rpc_id`` names it."""


class NotAwaitingReply(InvalidArgument):
    """(``NotAwaitingReply``) ``reply`` for something that is not a request awaiting a reply
    (answered already, or a client RPC). ``rpc_id`` names it."""


class ConfigError(InvalidArgument):
    """(``Config``) The configuration is invalid; the message names the key."""


class LimitReached(HomaError):
    """(``Limit``) A configured limit of the endpoint (``limit``: ``"max_rpcs"``,
    ``"tx_buffer_limit"``, ``"max_peers"``) would be exceeded; try again
    later."""

    limit: str = ""


class PermissionDenied(HomaError, PermissionError):
    """(``PermissionDenied``) Raw IP mode (protocol 146) needs root or CAP_NET_RAW."""


class HomaOSError(HomaError, OSError):
    """(``Io``) An operating-system error; ``errno`` is set when the system gave one."""


class StreamError(HomaError):
    """Base of the failures of a stream (not raised itself). A stream whose
    peer stopped answering raises :class:`PeerDead` instead, as an RPC
    does."""


class StreamReset(StreamError, ConnectionResetError):
    """(``StreamReset``) The stream was aborted: by the peer (it closed its
    end unfinished, or no longer knows the stream), or by this end's
    ``close()`` while other calls were waiting on it."""


class StreamRefused(StreamError, ConnectionRefusedError):
    """(``StreamRefused``) The peer refused to open the stream (streams
    disabled there, ``core.stream_window = 0``, or one of its limits)."""


class StreamOpenTimeout(StreamError, TimeoutError):
    """(``StreamOpenTimeout``) The peer never answered the stream's opening:
    nothing listens there, it is dead, or it does not speak streams (Linux
    Homa)."""


class StreamFinished(StreamError):
    """(``StreamFinished``) ``send`` after ``finish``, or on a stream that has
    closed (or been closed with ``close()``)."""
