"""Fixtures for live mode: a fake kube-apiserver on 127.0.0.1, stopped after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from .fakeapi import FakeApiServer


@pytest.fixture
def fake_api() -> Iterator[FakeApiServer]:
    """A started :class:`FakeApiServer` (``.url``; seed and inspect through its methods),
    with the bootstrap namespaces and system PriorityClasses; stopped afterwards."""
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def api_client(fake_api: FakeApiServer) -> Iterator[client.ApiClient]:
    """An official-client ``ApiClient`` pointed at :func:`fake_api`."""
    cfg = client.Configuration(host=fake_api.url)
    with client.ApiClient(cfg) as api:
        yield api
