"""Shared fixtures of the explain tests: no network."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every explain test runs with outbound connections refused (the issue's "no network"
    target: nothing may be fetched at run time, the wordllama model included). Only the
    loopback interface is allowed, for the fake kube-apiserver of the live test."""
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex

    def _check(address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if host not in _LOOPBACK:
            raise OSError(f"network disabled in the explain tests (connect to {address!r})")

    def guarded(self: socket.socket, address: Any) -> None:
        _check(address)
        connect(self, address)

    def guarded_ex(self: socket.socket, address: Any) -> int:
        _check(address)
        return connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_ex)
    yield
