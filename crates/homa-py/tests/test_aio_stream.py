"""asyncio streams (homars.aio.AsyncStream): order both ways, the end,
async iteration and context management, backpressure (a send that waits
while the window is full and proceeds once the peer reads), both
termination orders, resets, cancellation that loses nothing, and many
streams at once on one event loop."""

import asyncio

import pytest
import pytest_asyncio
from conftest import CALL_TIMEOUT, pattern

import homars
import homars.aio

pytestmark = pytest.mark.asyncio

T = CALL_TIMEOUT


def msg(tag: int, i: int) -> bytes:
    """Message ``i`` of a run: mostly small, every 7th several packets."""
    return pattern(tag * 1_000_000 + i, 20_000 + i % 3_000 if i % 7 == 0 else i % 300)


async def echo(server: homars.aio.Endpoint) -> int:
    """Accepts one stream, echoes it to its end, finishes; returns the
    count."""
    n = 0
    async with await server.accept_stream(timeout=T) as s:
        async for m in s:
            await s.send(m, timeout=T)
            n += 1
        await s.finish()
    return n


@pytest_asyncio.fixture
async def pair():
    async with homars.aio.Endpoint("127.0.0.1:0") as server, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        yield server, client


async def test_echo_in_order_then_end(pair):
    server, client = pair
    task = asyncio.create_task(echo(server))
    n = 300
    async with await client.open_stream(server.local_addr) as s:
        assert isinstance(s, homars.aio.AsyncStream)
        assert s.peer == server.local_addr and s.id.is_client

        async def send_all():
            for i in range(n):
                await s.send(msg(1, i), timeout=T)
            await s.finish()

        async def recv_all():
            return [m async for m in s]

        _, got = await asyncio.wait_for(asyncio.gather(send_all(), recv_all()), T)
        assert got == [msg(1, i) for i in range(n)]
        assert s.finished
    assert await asyncio.wait_for(task, T) == n
    assert client.metrics()["streams_failed"] == 0


async def test_send_waits_for_the_window_and_proceeds_after_the_peer_reads(pair):
    server, client = pair
    s = await client.open_stream(server.local_addr)
    sent = 0
    while sent < 1000:
        try:
            await s.send(msg(2, sent), timeout=0.3)
        except homars.HomaTimeout:
            break
        sent += 1
    assert 0 < sent < 1000, "no backpressure"
    with pytest.raises(homars.LimitReached):
        await s.send(msg(2, sent), timeout=0)
    # A send now waits; the peer reads everything; it completes.
    pending = asyncio.create_task(s.send(msg(2, sent)))
    await asyncio.sleep(0.2)
    assert not pending.done(), "the send did not wait"
    r = await server.accept_stream(timeout=T)
    for i in range(sent + 1):
        assert await r.recv(timeout=T) == msg(2, i)
    await asyncio.wait_for(pending, T)
    await s.finish()
    assert await r.recv(timeout=T) is None
    await r.finish()
    assert await s.recv(timeout=T) is None


@pytest.mark.parametrize("client_first", [True, False])
async def test_clean_termination_both_orders(pair, client_first):
    server, client = pair
    s = await client.open_stream(server.local_addr)
    await s.send(b"hello")
    r = await server.accept_stream(timeout=T)
    assert await r.recv(timeout=T) == b"hello"
    first, second = (s, r) if client_first else (r, s)
    await first.send(b"last from the first")
    await first.finish()
    with pytest.raises(homars.StreamFinished):
        await first.send(b"too late")
    assert await second.recv(timeout=T) == b"last from the first"
    assert await second.recv(timeout=T) is None
    await second.send(b"reply after the end")
    await second.finish()
    assert await first.recv(timeout=T) == b"reply after the end"
    assert await first.recv(timeout=T) is None
    await s.close()
    await r.close()
    for _ in range(500):
        if client.metrics()["streams_closed"] == 1 and server.metrics()["streams_closed"] == 1:
            break
        await asyncio.sleep(0.01)
    assert client.metrics()["streams_closed"] == 1 == server.metrics()["streams_closed"]
    assert client.metrics()["streams_failed"] == 0 == server.metrics()["streams_failed"]


async def test_close_unfinished_resets_the_peer_and_local_waiters(pair):
    server, client = pair
    s = await client.open_stream(server.local_addr)
    await s.send(b"x")
    r = await server.accept_stream(timeout=T)
    assert await r.recv(timeout=T) == b"x"
    peer_waits = asyncio.create_task(r.recv(timeout=T))
    local_waits = asyncio.create_task(s.recv(timeout=T))
    await asyncio.sleep(0.05)
    await s.close()
    with pytest.raises(homars.StreamReset):
        await local_waits
    with pytest.raises(homars.StreamReset) as info:
        await peer_waits
    assert isinstance(info.value, ConnectionResetError)
    with pytest.raises(homars.StreamFinished):
        await s.send(b"after close")


async def test_cancelled_recv_and_accept_lose_nothing(pair):
    server, client = pair
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(server.accept_stream(), 0.05)
    s = await client.open_stream(server.local_addr)
    await s.send(b"first")
    r = await server.accept_stream(timeout=T)
    assert await r.recv(timeout=T) == b"first"
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(r.recv(), 0.05)
    await s.send(b"second")
    assert await r.recv(timeout=T) == b"second"
    # A recv cancelled in the same moment its message arrives: the message
    # is either returned or given back, never lost.
    for i in range(20):
        t = asyncio.create_task(r.recv())
        await s.send(msg(3, i))
        await asyncio.sleep(0)
        t.cancel()
        try:
            got = await t
            assert got == msg(3, i)
        except asyncio.CancelledError:
            assert await r.recv(timeout=T) == msg(3, i)


async def test_many_streams_at_once_on_one_loop(pair):
    server, client = pair
    streams, msgs = 30, 20

    async def serve_all():
        return await asyncio.gather(*(echo(server) for _ in range(streams)))

    async def one(tag):
        async with await client.open_stream(server.local_addr) as s:

            async def send_all():
                for i in range(msgs):
                    await s.send(msg(tag, i), timeout=T)
                await s.finish()

            _, got = await asyncio.gather(send_all(), _collect(s))
            assert got == [msg(tag, i) for i in range(msgs)]

    server_task = asyncio.create_task(serve_all())
    await asyncio.wait_for(asyncio.gather(*(one(100 + t) for t in range(streams))), T)
    assert sorted(await asyncio.wait_for(server_task, T)) == [msgs] * streams


async def _collect(s: homars.aio.AsyncStream):
    return [m async for m in s]


async def test_closing_the_endpoint_fails_pending_stream_calls(pair):
    server, client = pair
    s = await client.open_stream(server.local_addr)
    await s.send(b"x")
    r = await server.accept_stream(timeout=T)
    assert await r.recv(timeout=T) == b"x"
    pending = asyncio.create_task(r.recv())
    accepting = asyncio.create_task(server.accept_stream())
    await asyncio.sleep(0.05)
    server.close()
    with pytest.raises(homars.Shutdown):
        await asyncio.wait_for(pending, T)
    with pytest.raises(homars.Shutdown):
        await asyncio.wait_for(accepting, T)


async def test_wait_closed_then_close_the_endpoint():
    """After finish, wait_closed: the peer gets the end even when the
    endpoint closes right after."""
    for i in range(10):
        server = homars.aio.Endpoint("127.0.0.1:0")
        async with homars.aio.Endpoint("127.0.0.1:0") as client:

            async def serve() -> None:
                s = await server.accept_stream(timeout=T)
                async for m in s:
                    await s.send(m, timeout=T)
                await s.finish()
                await s.wait_closed(timeout=T)
                server.close()

            task = asyncio.ensure_future(serve())
            s = await client.open_stream(server.local_addr)
            await s.send(msg(9, i), timeout=T)
            await s.finish()
            assert await s.recv(timeout=T) == msg(9, i)
            assert await s.recv(timeout=T) is None
            await s.wait_closed(timeout=T)
            await task
