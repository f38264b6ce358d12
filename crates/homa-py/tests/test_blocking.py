"""The blocking API: echoes of every size, concurrency, timeouts, aborts,
closing, GIL release and Ctrl-C (the cases of crates/homa/tests/echo.rs,
concurrency.rs and errors.rs, through Python)."""

import os
import signal
import threading
import time

import pytest
from conftest import CALL_TIMEOUT, EchoServer, ipv6_available, pattern

import homars

# Around the packet boundaries of the default configuration (1500-byte MTU:
# 1416 payload bytes over UDP/IPv4), the unscheduled limit, and the largest
# message the defaults allow (exactly 1 MB).
SIZES = [0, 1, 100, 1415, 1416, 1417, 10_000, 60_000, 100_000, 500_000, 1_000_000]


@pytest.mark.parametrize("size", SIZES)
def test_echo_sizes(echo_server, client, size):
    msg = pattern(size, size)
    assert client.call(echo_server.addr, msg, timeout=CALL_TIMEOUT) == msg


def test_echo_one_mebibyte_with_the_loopback_preset():
    server = EchoServer(config=homars.loopback_config())
    try:
        with homars.Endpoint("127.0.0.1:0", homars.loopback_config()) as c:
            for size in (1 << 20, 4 << 20):
                msg = pattern(7, size)
                assert c.call(server.addr, msg, CALL_TIMEOUT) == msg
    finally:
        server.stop()


@pytest.mark.skipif(not ipv6_available(), reason="no IPv6 loopback")
def test_echo_ipv6():
    server = EchoServer("[::1]:0")
    try:
        with homars.Endpoint("[::1]:0") as c:
            for size in (0, 5000, 200_000):
                msg = pattern(size, size)
                assert c.call(server.addr, msg, CALL_TIMEOUT) == msg
    finally:
        server.stop()


def test_messages_of_every_buffer_type(echo_server, client):
    msg = pattern(1, 3000)
    for data in (msg, bytearray(msg), memoryview(msg), memoryview(bytearray(msg))):
        got = client.call(echo_server.addr, data, CALL_TIMEOUT)
        assert type(got) is bytes and got == msg
    with pytest.raises(TypeError, match="bytes, bytearray or memoryview"):
        client.call(echo_server.addr, "text", CALL_TIMEOUT)
    with pytest.raises(TypeError):
        client.call(echo_server.addr, 5, CALL_TIMEOUT)


def test_addresses_as_tuples(echo_server, client):
    host, port = echo_server.addr.rsplit(":", 1)
    assert client.call((host, int(port)), b"tuple", CALL_TIMEOUT) == b"tuple"
    with homars.Endpoint(("127.0.0.1", 0)) as ep:
        assert ep.local_addr.startswith("127.0.0.1:")
        assert not ep.local_addr.endswith(":0")


def test_requests_carry_id_peer_and_data(client):
    with homars.Endpoint("127.0.0.1:0") as server:
        cid = client.send_request(server.local_addr, b"question")
        assert isinstance(cid, homars.RpcId) and cid.is_client
        assert cid.peer == server.local_addr
        req = server.recv_request(CALL_TIMEOUT)
        assert isinstance(req, homars.Request)
        assert req.data == b"question"
        assert req.peer == client.local_addr == req.id.peer
        assert not req.id.is_client
        assert "8 bytes" in repr(req)
        server.reply(req.id, b"answer")
        assert client.recv_response(cid, CALL_TIMEOUT) == b"answer"


def test_rpc_ids_are_values():
    a = homars.RpcId(42, "127.0.0.1:4000")
    b = homars.RpcId(42, ("127.0.0.1", 4000))
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != homars.RpcId(44, "127.0.0.1:4000")
    assert a.id == 42 and a.peer == "127.0.0.1:4000" and a.is_client
    assert repr(a) == "RpcId(id=42, peer='127.0.0.1:4000')"


def test_concurrent_calls_from_threads(echo_server, client):
    """Threads share one client endpoint; each checks its own responses."""
    errors = []

    def worker(tag):
        try:
            for i in range(20):
                msg = pattern(tag * 100 + i, 100 + 997 * i)
                got = client.call(echo_server.addr, msg, CALL_TIMEOUT)
                assert got == msg, f"thread {tag} call {i}: wrong response"
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert client.metrics()["active_client_rpcs"] == 0


def test_many_outstanding_collected_with_recv_any_response(echo_server, client):
    sent = {}
    for i in range(64):
        msg = pattern(i, 50 + 3001 * i)
        sent[client.send_request(echo_server.addr, msg)] = msg
    got = {}
    while len(got) < len(sent):
        rid, resp = client.recv_any_response(CALL_TIMEOUT)
        assert rid not in got
        got[rid] = resp
    assert got == sent
    with pytest.raises(homars.NothingOutstanding):
        client.recv_any_response(0.01)


def test_timeout_versus_peer_dead(client, silent_port):
    start = time.monotonic()
    with pytest.raises(homars.HomaTimeout) as info:
        client.call(silent_port, b"hello?", timeout=0.005)
    took = time.monotonic() - start
    assert took >= 0.005, took
    assert isinstance(info.value, TimeoutError)
    m = client.metrics()
    assert (m["rpcs_aborted"], m["active_client_rpcs"]) == (1, 0), "a timed-out call is aborted"

    start = time.monotonic()
    with pytest.raises(homars.PeerDead) as info:
        client.call(silent_port, b"hello?", timeout=5.0)
    assert isinstance(info.value, ConnectionError)
    assert client.metrics()["active_client_rpcs"] == 0


def test_receive_timeouts_and_unknown_rpcs(client):
    with homars.Endpoint("127.0.0.1:0") as server:
        start = time.monotonic()
        with pytest.raises(homars.HomaTimeout):
            server.recv_request(timeout=0.02)
        assert time.monotonic() - start >= 0.02
        with pytest.raises(homars.HomaTimeout):
            server.recv_request(timeout=0)

        # recv_response's timeout leaves the RPC in place (unlike call's).
        rid = client.send_request(server.local_addr, pattern(1, 100))
        req = server.recv_request(CALL_TIMEOUT)
        with pytest.raises(homars.HomaTimeout):
            client.recv_response(rid, timeout=0.01)
        server.reply(req.id, b"late")
        assert client.recv_response(rid, CALL_TIMEOUT) == b"late"
        # Collected once; then it is unknown, and the exception names it.
        with pytest.raises(homars.UnknownRpc) as info:
            client.recv_response(rid, timeout=0.01)
        assert info.value.rpc_id == rid
        assert isinstance(info.value, ValueError)

        bogus = homars.RpcId(12_345_678, server.local_addr)
        with pytest.raises(homars.UnknownRpc, match="12345678"):
            client.recv_response(bogus)
        with pytest.raises(homars.UnknownRpc):
            client.abort(bogus)
        with pytest.raises(homars.UnknownRpc):
            server.reply(bogus, b"")


def test_abort(client):
    with homars.Endpoint("127.0.0.1:0") as server:
        rid = client.send_request(server.local_addr, pattern(2, 100))
        client.abort(rid)
        with pytest.raises(homars.UnknownRpc):
            client.recv_response(rid)
        assert client.metrics()["rpcs_aborted"] == 1

        # Aborting releases a thread waiting for that response.
        rid = client.send_request(server.local_addr, pattern(3, 100))
        outcome = []

        def wait():
            try:
                client.recv_response(rid, CALL_TIMEOUT)
                outcome.append("response")
            except homars.HomaError as e:
                outcome.append(e)

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.1)
        client.abort(rid)
        t.join(5)
        assert not t.is_alive()
        assert isinstance(outcome[0], homars.UnknownRpc), outcome

        # A server may drop a request without answering it.
        req = server.recv_request(CALL_TIMEOUT)
        server.abort(req.id)
        with pytest.raises(homars.UnknownRpc):
            server.reply(req.id, b"too late")


def test_reply_twice(client):
    with homars.Endpoint("127.0.0.1:0") as server:
        rid = client.send_request(server.local_addr, b"x")
        req = server.recv_request(CALL_TIMEOUT)
        server.reply(req.id, b"once")
        with pytest.raises((homars.NotAwaitingReply, homars.UnknownRpc)) as info:
            server.reply(req.id, b"twice")
        assert info.value.rpc_id == req.id
        assert client.recv_response(rid, CALL_TIMEOUT) == b"once"


def test_message_too_large(echo_server, client):
    limit = client.config["core"]["max_message_size"]
    assert limit == 1_000_000
    with pytest.raises(homars.MessageTooLarge) as info:
        client.send_request(echo_server.addr, bytes(limit + 1))
    e = info.value
    assert (e.length, e.limit) == (limit + 1, limit)
    assert str(limit + 1) in str(e) and str(limit) in str(e)
    assert isinstance(e, ValueError)
    with pytest.raises(homars.MessageTooLarge):
        client.call(echo_server.addr, bytes(limit + 1), CALL_TIMEOUT)
    assert client.metrics()["requests_started"] == 0, "nothing was started"

    # A reply that is too long is refused too, and the request can still
    # be answered.
    with homars.Endpoint("127.0.0.1:0") as server:
        rid = client.send_request(server.local_addr, b"q")
        req = server.recv_request(CALL_TIMEOUT)
        with pytest.raises(homars.MessageTooLarge):
            server.reply(req.id, bytes(limit + 1))
        server.reply(req.id, b"ok")
        assert client.recv_response(rid, CALL_TIMEOUT) == b"ok"


def test_response_too_large(client):
    """A server allowing bigger messages answers with more than the client
    takes: the call fails at once, naming both sizes."""
    big = EchoServer(config=homars.loopback_config(), transform=lambda d: bytes(2_000_000))
    try:
        start = time.monotonic()
        with pytest.raises(homars.ResponseTooLarge) as info:
            client.call(big.addr, b"q", CALL_TIMEOUT)
        assert (info.value.length, info.value.limit) == (2_000_000, 1_000_000)
        assert "2000000" in str(info.value)
    finally:
        big.stop()


def test_bad_addresses(client):
    for text in ("nonsense", "127.0.0.1", "127.0.0.1:99999", "localhost:80", ""):
        with pytest.raises(homars.BadAddress):
            client.send_request(text, b"x")
    with pytest.raises(homars.BadAddress, match="names are not resolved"):
        client.send_request(("localhost", 80), b"x")
    with pytest.raises(homars.BadAddress):
        client.send_request(("127.0.0.1", 70000), b"x")
    with pytest.raises(TypeError):
        client.send_request(4000, b"x")
    # Refused by the runtime, with the reason.
    for dest, why in (
        ("[::1]:4000", "other IP version"),
        ("127.0.0.1:0", "port 0"),
        ("0.0.0.0:4000", "unspecified"),
    ):
        with pytest.raises(homars.BadAddress, match=why):
            client.send_request(dest, b"x")
        with pytest.raises(homars.BadAddress):
            client.call(dest, b"", CALL_TIMEOUT)
        assert isinstance(pytest.raises(ValueError, client.call, dest, b"").value, homars.BadAddress)
    with pytest.raises(homars.BadAddress, match="multicast"):
        homars.Endpoint("224.0.0.1:5000")
    with pytest.raises(homars.BadAddress, match="not an address of this host"):
        homars.Endpoint("192.0.2.1:5000")
    with pytest.raises(homars.BadAddress, match="in use"):
        homars.Endpoint(client.local_addr)


def test_invalid_timeouts(client):
    for bad in (-1, float("nan"), float("-inf")):
        with pytest.raises(homars.InvalidArgument, match="timeout"):
            client.recv_request(timeout=bad)
        with pytest.raises(ValueError):
            client.call("127.0.0.1:4000", b"", timeout=bad)


def test_close(silent_port):
    ep = homars.Endpoint("127.0.0.1:0")
    addr = ep.local_addr
    pending = ep.send_request(silent_port, b"x")
    assert not ep.closed
    ep.close()
    ep.close()  # twice is harmless
    assert ep.closed and "closed" in repr(ep)
    for call in (
        lambda: ep.call(silent_port, b"", CALL_TIMEOUT),
        lambda: ep.send_request(silent_port, b""),
        lambda: ep.recv_request(),
        lambda: ep.recv_request(0),
        lambda: ep.recv_response(pending),
        lambda: ep.recv_any_response(0),
        lambda: ep.reply(homars.RpcId(3, silent_port), b""),
        lambda: ep.abort(pending),
        ep.metrics,
    ):
        with pytest.raises(homars.Shutdown, match="closed"):
            call()
    assert ep.local_addr == addr
    # The port is free again.
    with homars.Endpoint(addr) as again:
        assert again.local_addr == addr


def test_context_manager_closes():
    with homars.Endpoint("127.0.0.1:0") as ep:
        addr = ep.local_addr
    assert ep.closed
    homars.Endpoint(addr).close()


def test_close_releases_blocked_threads():
    ep = homars.Endpoint("127.0.0.1:0")
    outcomes = []

    def block():
        try:
            ep.recv_request()
            outcomes.append("request")
        except homars.Shutdown:
            outcomes.append((time.monotonic()))

    threads = [threading.Thread(target=block) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    assert all(t.is_alive() for t in threads)
    closed_at = time.monotonic()
    ep.close()
    for t in threads:
        t.join(5)
    assert len(outcomes) == 3 and all(isinstance(o, float) for o in outcomes), outcomes


def test_waits_release_the_gil(client):
    """While one thread waits in the runtime, Python code runs in another."""
    finished = []
    t = threading.Thread(
        target=lambda: finished.append(pytest.raises(homars.HomaTimeout, client.recv_request, 1.0))
    )
    start = time.monotonic()
    t.start()
    time.sleep(0.05)
    n = 0
    while time.monotonic() - start < 0.3:
        n += 1
    ran_at = time.monotonic()
    t.join()
    done_at = time.monotonic()
    assert finished and n > 1000
    assert done_at - ran_at > 0.5, "the main thread was held up by the waiting one"


def _interrupt_main_after(delay):
    def fire():
        time.sleep(delay)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=fire)
    t.start()
    return t


def test_ctrl_c_interrupts_blocked_calls(client, silent_port):
    t = _interrupt_main_after(0.2)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        client.recv_request()
    t.join()

    # An interrupted call aborts its RPC. (A peer that takes the request and
    # never answers keeps the RPC alive until then.)
    with homars.Endpoint("127.0.0.1:0") as holder:
        t = _interrupt_main_after(0.2)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            client.call(holder.local_addr, b"x")
        t.join()
        m = client.metrics()
        assert (m["rpcs_aborted"], m["active_client_rpcs"]) == (1, 0)


def test_metrics_and_stats(echo_server, client):
    client.call(echo_server.addr, pattern(1, 50_000), CALL_TIMEOUT)
    m = client.metrics()
    assert m["requests_started"] == 1 and m["responses_delivered"] == 1
    assert m["sent"]["packets"]["DATA"] >= 36
    assert m["received"]["bytes"]["DATA"] > 50_000
    s = client.runtime_stats()
    assert s["packets_sent"] >= 36 and s["packets_received"] > 0


def test_repr_and_version():
    assert homars.__version__.count(".") == 2
    with homars.Endpoint("127.0.0.1:0") as ep:
        assert repr(ep) == f"<homars.Endpoint {ep.local_addr}>"
