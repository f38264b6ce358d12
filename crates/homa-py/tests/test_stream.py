"""Streams through Python: ordered messages both ways, the end (None),
backpressure with timeout=0, and a reset when the peer closes unfinished."""

import threading

import pytest

import homars

T = 20.0


def test_stream_echo_in_order_then_end():
    with homars.Endpoint("127.0.0.1:0") as server, homars.Endpoint("127.0.0.1:0") as client:

        def echo():
            with server.accept_stream(timeout=T) as s:
                while (m := s.recv(timeout=T)) is not None:
                    s.send(m)
                s.finish()

        t = threading.Thread(target=echo)
        t.start()
        s = client.open_stream(server.local_addr)
        msgs = [bytes([i % 256]) * (i * 37 % 3000) for i in range(200)]
        got = []
        r = threading.Thread(target=lambda: got.extend(iter(lambda: s.recv(timeout=T), None)))
        r.start()
        for m in msgs:
            s.send(m)
        s.finish()
        r.join()
        t.join()
        assert got == msgs
        s.close()


def test_full_window_then_reset():
    with homars.Endpoint("127.0.0.1:0") as server, homars.Endpoint("127.0.0.1:0") as client:
        s = client.open_stream(server.local_addr)
        sent = 0
        while sent < 1000:
            try:
                s.send(b"x", timeout=0.3)
            except homars.HomaTimeout:
                break
            sent += 1
        assert sent < 1000, "no backpressure"
        with pytest.raises(homars.LimitReached):
            s.send(b"x", timeout=0)
        a = server.accept_stream(timeout=T)
        s.close()
        with pytest.raises(homars.HomaError, match="reset"):
            while a.recv(timeout=T) is not None:
                pass


def test_wait_closed_then_close_the_endpoint():
    """After finish, wait_closed: the peer has the last message and the end
    even when the endpoint closes at once (several rounds: without it the
    end was lost now and then)."""
    for round_ in range(10):
        server = homars.Endpoint("127.0.0.1:0")
        with homars.Endpoint("127.0.0.1:0") as client:

            def echo():
                with server.accept_stream(timeout=T) as s:
                    while (m := s.recv(timeout=T)) is not None:
                        s.send(m)
                    s.finish()
                    s.wait_closed(timeout=T)
                server.close()

            t = threading.Thread(target=echo)
            t.start()
            s = client.open_stream(server.local_addr)
            s.send(b"x" * round_)
            s.finish()
            assert s.recv(timeout=T) == b"x" * round_
            assert s.recv(timeout=T) is None
            s.wait_closed(timeout=T)
            t.join()
            s.close()
