"""asyncio endpoints used from several event loops at once."""

import asyncio
import threading

from conftest import CALL_TIMEOUT, EchoServer, pattern

import homars.aio


def test_endpoints_serve_several_loops():
    """One endpoint used from two threads, each with its own event loop."""
    server = EchoServer()
    client = homars.aio.Endpoint("127.0.0.1:0")
    results = []

    def run(tag):
        async def go():
            return await client.call(server.addr, pattern(tag, 5000), CALL_TIMEOUT)

        results.append(asyncio.run(go()) == pattern(tag, 5000))

    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [True, True]
    finally:
        client.close()
        server.stop()
