"""Typed stream errors, each provoked over loopback, through the blocking
Stream and the asyncio AsyncStream: refused (a peer with streams off),
open timeout (a port where nothing answers, and a closed port), reset (the
peer closes unfinished), finished (send after finish), peer dead (the
peer's endpoint closes under an open stream)."""

import socket

import pytest
from conftest import CALL_TIMEOUT

import homars
import homars.aio

T = CALL_TIMEOUT
NO_STREAMS = {"core": {"stream_window": 0}}


def closed_port() -> str:
    """A loopback port nothing is bound to (bound, then released)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    host, port = s.getsockname()
    s.close()
    return f"{host}:{port}"


def test_hierarchy():
    for cls in (
        homars.StreamReset,
        homars.StreamRefused,
        homars.StreamOpenTimeout,
        homars.StreamFinished,
    ):
        assert issubclass(cls, homars.StreamError)
        assert issubclass(cls, homars.HomaError)
        assert cls is getattr(homars.errors, cls.__name__)
        assert cls.__name__ in homars.__all__
    assert issubclass(homars.StreamReset, ConnectionResetError)
    assert issubclass(homars.StreamRefused, ConnectionRefusedError)
    assert issubclass(homars.StreamOpenTimeout, TimeoutError)
    assert not issubclass(homars.StreamOpenTimeout, homars.HomaTimeout)


# ---- blocking ----


def test_refused_by_a_peer_without_streams():
    with homars.Endpoint("127.0.0.1:0", NO_STREAMS) as server, homars.Endpoint(
        "127.0.0.1:0"
    ) as client:
        s = client.open_stream(server.local_addr)
        try:
            s.send(b"x")
        except homars.StreamRefused:
            pass
        with pytest.raises(homars.StreamRefused) as info:
            s.recv(timeout=T)
        assert isinstance(info.value, ConnectionRefusedError)
        with pytest.raises(homars.StreamRefused):
            s.send(b"y")
        s.close()


@pytest.mark.parametrize("where", ["silent", "closed"])
def test_open_timeout_where_nothing_answers(silent_port, where):
    addr = silent_port if where == "silent" else closed_port()
    with homars.Endpoint("127.0.0.1:0") as client:
        with client.open_stream(addr) as s:
            s.send(b"anyone?")
            with pytest.raises(homars.StreamOpenTimeout) as info:
                s.recv(timeout=T)
            assert isinstance(info.value, TimeoutError)


def test_reset_when_the_peer_closes_unfinished():
    with homars.Endpoint("127.0.0.1:0") as server, homars.Endpoint("127.0.0.1:0") as client:
        s = client.open_stream(server.local_addr)
        s.send(b"x")
        with server.accept_stream(timeout=T) as r:
            assert r.recv(timeout=T) == b"x"
            s.close()
            with pytest.raises(homars.StreamReset):
                r.recv(timeout=T)
            with pytest.raises(homars.StreamReset):
                r.send(b"y")


def test_finished_after_finish():
    with homars.Endpoint("127.0.0.1:0") as server, homars.Endpoint("127.0.0.1:0") as client:
        with client.open_stream(server.local_addr) as s:
            s.finish()
            with pytest.raises(homars.StreamFinished):
                s.send(b"x")


def test_peer_dead_when_the_peer_goes_away():
    with homars.Endpoint("127.0.0.1:0") as client:
        server = homars.Endpoint("127.0.0.1:0")
        s = client.open_stream(server.local_addr)
        s.send(b"x")
        r = server.accept_stream(timeout=T)
        assert r.recv(timeout=T) == b"x"
        server.close()  # its socket closes: nothing answers any more
        try:
            s.send(b"are you there?")
        except homars.PeerDead:
            pass
        with pytest.raises(homars.PeerDead):
            s.recv(timeout=T)
        s.close()


# ---- asyncio ----


@pytest.mark.asyncio
async def test_async_refused_by_a_peer_without_streams():
    async with homars.aio.Endpoint("127.0.0.1:0", NO_STREAMS) as server, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        async with await client.open_stream(server.local_addr) as s:
            try:
                await s.send(b"x")
            except homars.StreamRefused:
                pass
            with pytest.raises(homars.StreamRefused):
                await s.recv(timeout=T)


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["silent", "closed"])
async def test_async_open_timeout_where_nothing_answers(silent_port, where):
    addr = silent_port if where == "silent" else closed_port()
    async with homars.aio.Endpoint("127.0.0.1:0") as client:
        async with await client.open_stream(addr) as s:
            await s.send(b"anyone?")
            with pytest.raises(homars.StreamOpenTimeout):
                await s.recv(timeout=T)


@pytest.mark.asyncio
async def test_async_reset_when_the_peer_closes_unfinished():
    async with homars.aio.Endpoint("127.0.0.1:0") as server, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        s = await client.open_stream(server.local_addr)
        await s.send(b"x")
        r = await server.accept_stream(timeout=T)
        assert await r.recv(timeout=T) == b"x"
        await s.close()
        with pytest.raises(homars.StreamReset):
            await r.recv(timeout=T)
        with pytest.raises(homars.StreamReset):
            await r.send(b"y")
        await r.close()


@pytest.mark.asyncio
async def test_async_finished_after_finish_and_after_close():
    async with homars.aio.Endpoint("127.0.0.1:0") as server, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        s = await client.open_stream(server.local_addr)
        await s.finish()
        with pytest.raises(homars.StreamFinished):
            await s.send(b"x")
        await s.close()
        with pytest.raises(homars.StreamFinished):
            await s.recv()


@pytest.mark.asyncio
async def test_async_peer_dead_when_the_peer_goes_away():
    async with homars.aio.Endpoint("127.0.0.1:0") as client:
        server = homars.aio.Endpoint("127.0.0.1:0")
        s = await client.open_stream(server.local_addr)
        await s.send(b"x")
        r = await server.accept_stream(timeout=T)
        assert await r.recv(timeout=T) == b"x"
        server.close()
        try:
            await s.send(b"are you there?")
        except homars.PeerDead:
            pass
        with pytest.raises(homars.PeerDead):
            await s.recv(timeout=T)
        await s.close()


@pytest.mark.asyncio
async def test_async_send_times_out_as_homa_timeout():
    async with homars.aio.Endpoint("127.0.0.1:0") as server, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        s = await client.open_stream(server.local_addr)
        with pytest.raises(homars.HomaTimeout) as info:
            for _ in range(1000):
                await s.send(b"z", timeout=0.2)
        assert not isinstance(info.value, homars.StreamError)
        await s.close()
