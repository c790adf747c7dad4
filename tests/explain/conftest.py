"""Shared fixtures of the explain tests: no network, and small clusters as YAML."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every explain test runs with outbound connections refused (the issue's "no network"
    target: nothing may be fetched at run time, the wordllama model included)."""

    def refuse(self: socket.socket, *args: Any, **kwargs: Any) -> None:
        raise OSError("network disabled in the explain tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield
