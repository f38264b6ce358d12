"""The asyncio API: echoes, concurrency, timeouts, cancellation (nothing
lost, nothing left behind), aborts and closing."""

import asyncio
import itertools
import time

import pytest
import pytest_asyncio
from conftest import CALL_TIMEOUT, EchoServer, pattern

import homars
import homars.aio

pytestmark = pytest.mark.asyncio

SIZES = [0, 1, 1416, 1417, 100_000, 1_000_000]


async def serve(ep: homars.aio.Endpoint, transform=lambda d: d) -> int:
    """Answers requests until the endpoint closes; returns how many."""
    n = 0
    while True:
        try:
            req = await ep.recv_request()
        except homars.Shutdown:
            return n
        await ep.reply(req.id, transform(req.data))
        n += 1


@pytest_asyncio.fixture
async def pair():
    """An asyncio server (serving in a task) and an asyncio client."""
    server = homars.aio.Endpoint("127.0.0.1:0")
    client = homars.aio.Endpoint("127.0.0.1:0")
    task = asyncio.create_task(serve(server))
    yield server, client
    client.close()
    server.close()
    await asyncio.wait_for(task, 5)


@pytest.mark.parametrize("size", SIZES)
async def test_echo_sizes(pair, size):
    server, client = pair
    msg = pattern(size, size)
    assert await client.call(server.local_addr, msg, timeout=CALL_TIMEOUT) == msg


async def test_concurrent_calls(pair):
    server, client = pair
    msgs = [pattern(i, 10 + 4099 * i) for i in range(100)]
    got = await asyncio.gather(*(client.call(server.local_addr, m, CALL_TIMEOUT) for m in msgs))
    assert got == msgs
    assert client.metrics()["active_client_rpcs"] == 0


async def test_send_request_and_recv_response(pair):
    server, client = pair
    ids = [await client.send_request(server.local_addr, pattern(i, 1000 * i)) for i in range(10)]
    for i, rid in reversed(list(enumerate(ids))):
        assert await client.recv_response(rid, CALL_TIMEOUT) == pattern(i, 1000 * i)


async def test_async_client_blocking_server():
    server = EchoServer()
    try:
        async with homars.aio.Endpoint("127.0.0.1:0") as client:
            assert await client.call(server.addr, b"mixed", CALL_TIMEOUT) == b"mixed"
    finally:
        server.stop()


async def test_blocking_view_shares_the_endpoint(pair):
    server, client = pair
    view = client.blocking()
    assert view.local_addr == client.local_addr
    # A blocking call from a worker thread, on the same endpoint.
    got = await asyncio.get_running_loop().run_in_executor(
        None, view.call, server.local_addr, b"thread", CALL_TIMEOUT
    )
    assert got == b"thread"
    assert client.metrics()["requests_started"] == 1
    client.close()
    assert view.closed


async def test_call_timeout_aborts(silent_port):
    async with homars.aio.Endpoint("127.0.0.1:0") as client:
        start = time.monotonic()
        with pytest.raises(homars.HomaTimeout):
            await client.call(silent_port, b"x", timeout=0.01)
        assert time.monotonic() - start >= 0.01
        m = client.metrics()
        assert (m["rpcs_aborted"], m["active_client_rpcs"]) == (1, 0)
        with pytest.raises(homars.PeerDead):
            await client.call(silent_port, b"x", timeout=5)


async def test_cancelled_call_aborts(silent_port):
    async with homars.aio.Endpoint("127.0.0.1:0") as client:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.call(silent_port, b"x"), 0.02)
        # The abort happens on the runtime's thread: give it a moment.
        for _ in range(100):
            if client.metrics()["active_client_rpcs"] == 0:
                break
            await asyncio.sleep(0.01)
        m = client.metrics()
        assert (m["rpcs_aborted"], m["active_client_rpcs"]) == (1, 0)


async def test_recv_timeouts_and_unknown_rpcs():
    async with homars.aio.Endpoint("127.0.0.1:0") as server, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        start = time.monotonic()
        with pytest.raises(homars.HomaTimeout):
            await server.recv_request(timeout=0.02)
        assert time.monotonic() - start >= 0.02

        rid = await client.send_request(server.local_addr, b"q")
        req = await server.recv_request(CALL_TIMEOUT)
        with pytest.raises(homars.HomaTimeout):
            await client.recv_response(rid, timeout=0.01)
        # Cancelling a recv_response leaves the RPC in place too.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.recv_response(rid), 0.01)
        await server.reply(req.id, b"late")
        assert await client.recv_response(rid, CALL_TIMEOUT) == b"late"
        with pytest.raises(homars.UnknownRpc):
            await client.recv_response(rid)


async def test_abort_wakes_a_waiting_recv_response():
    async with homars.aio.Endpoint("127.0.0.1:0") as holder, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        rid = await client.send_request(holder.local_addr, b"x")
        waiting = asyncio.ensure_future(client.recv_response(rid))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        client.abort(rid)
        with pytest.raises(homars.UnknownRpc) as info:
            await asyncio.wait_for(waiting, 5)
        assert info.value.rpc_id == rid


async def test_cancelled_recv_request_loses_no_request():
    """A server whose recv_request is cancelled over and over (here by
    short wait_for timeouts) still answers every request: a request handed
    over just as its waiter was cancelled goes back to the queue."""
    async with homars.aio.Endpoint("127.0.0.1:0") as server, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        n = 1000
        stop = asyncio.Event()

        async def impatient_server():
            answered = 0
            patience = itertools.cycle([0, 0.0001, 0.0002, 0.0005, 0.001])
            while not stop.is_set():
                try:
                    req = await asyncio.wait_for(server.recv_request(), next(patience))
                except asyncio.TimeoutError:
                    continue
                await server.reply(req.id, req.data)
                answered += 1
            return answered

        task = asyncio.create_task(impatient_server())
        loop = asyncio.get_running_loop()

        def calls():
            view = client.blocking()
            for i in range(n):
                assert view.call(server.local_addr, pattern(i, 20), 5.0) == pattern(i, 20)

        await loop.run_in_executor(None, calls)
        stop.set()
        assert await task == n


async def test_cancelled_recv_request_gives_the_request_to_the_next():
    async with homars.aio.Endpoint("127.0.0.1:0") as server, homars.aio.Endpoint(
        "127.0.0.1:0"
    ) as client:
        first = asyncio.ensure_future(server.recv_request())
        await asyncio.sleep(0.01)
        first.cancel()
        rid = await client.send_request(server.local_addr, b"for whoever waits")
        req = await server.recv_request(CALL_TIMEOUT)
        assert req.data == b"for whoever waits"
        await server.reply(req.id, b"ok")
        assert await client.recv_response(rid, CALL_TIMEOUT) == b"ok"


async def test_close_releases_waiting_tasks():
    server = homars.aio.Endpoint("127.0.0.1:0")
    async with homars.aio.Endpoint("127.0.0.1:0") as holder:
        waiting = [asyncio.ensure_future(server.recv_request()) for _ in range(3)]
        waiting.append(asyncio.ensure_future(server.call(holder.local_addr, b"x")))
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in waiting)
        server.close()
        for w in waiting:
            with pytest.raises(homars.Shutdown):
                await asyncio.wait_for(w, 2)
    assert server.closed
    with pytest.raises(homars.Shutdown):
        await server.recv_request()
    with pytest.raises(homars.Shutdown):
        await server.call(holder.local_addr, b"")


async def test_errors_are_the_same_as_blocking(pair):
    server, client = pair
    with pytest.raises(homars.MessageTooLarge):
        await client.call(server.local_addr, bytes(1_000_001))
    with pytest.raises(homars.BadAddress, match="other IP version"):
        await client.call("[::1]:4000", b"")
    with pytest.raises(homars.InvalidArgument):
        await client.recv_request(timeout=-1)
    with pytest.raises(homars.ConfigError):
        homars.aio.Endpoint("127.0.0.1:0", "nonsense = 1")


async def test_loop_does_not_block():
    """The event loop keeps running while calls wait in the runtime."""
    async with homars.aio.Endpoint("127.0.0.1:0") as ep:
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        t = asyncio.create_task(tick())
        with pytest.raises(homars.HomaTimeout):
            await ep.recv_request(timeout=0.2)
        t.cancel()
        assert ticks > 20
