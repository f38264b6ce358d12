"""Shared helpers of the homars tests: message patterns, echo servers,
silent ports. Every endpoint binds the loopback interface on a free port."""

import socket
import threading
from typing import Iterator, List

import pytest

import homars

#: Far above what a healthy run needs: a hang shows as a failed call.
CALL_TIMEOUT = 20.0


def pattern(tag: int, length: int) -> bytes:
    """``length`` bytes that depend on ``tag``, so a response carrying
    another RPC's bytes (or shifted bytes) is caught."""
    seed = (tag * 0x9E3779B97F4A7C15 + length) & 0xFFFFFFFFFFFFFFFF
    block = seed.to_bytes(8, "little") * 32  # 256 bytes
    rotated = bytes((b + i) & 0xFF for i, b in enumerate(block))
    reps = length // len(rotated) + 1
    return (rotated * reps)[:length]


class EchoServer:
    """``workers`` threads answer every request with its own bytes (or
    with ``transform(data)``) until the endpoint is closed."""

    def __init__(self, addr: str = "127.0.0.1:0", config=None, workers: int = 2, transform=None):
        self.ep = homars.Endpoint(addr, config)
        self.addr = self.ep.local_addr
        self.transform = transform or (lambda d: d)
        self.errors: List[BaseException] = []
        self.threads = [threading.Thread(target=self._serve, daemon=True) for _ in range(workers)]
        for t in self.threads:
            t.start()

    def _serve(self) -> None:
        while True:
            try:
                req = self.ep.recv_request()
            except homars.Shutdown:
                return
            except BaseException as e:  # pragma: no cover - reported by stop()
                self.errors.append(e)
                return
            try:
                self.ep.reply(req.id, self.transform(req.data))
            except homars.HomaError as e:  # pragma: no cover
                self.errors.append(e)

    def stop(self) -> None:
        self.ep.close()
        for t in self.threads:
            t.join(timeout=5)
            assert not t.is_alive(), "a server thread did not stop"
        assert not self.errors, self.errors


@pytest.fixture
def echo_server() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.stop()


@pytest.fixture
def client() -> Iterator[homars.Endpoint]:
    with homars.Endpoint("127.0.0.1:0") as ep:
        yield ep


@pytest.fixture
def silent_port() -> Iterator[str]:
    """A port where nothing answers: a UDP socket holds it and never reads."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    host, port = s.getsockname()
    yield f"{host}:{port}"
    s.close()


def ipv6_available() -> bool:
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


