"""Fixtures for live mode: a fake kube-apiserver on 127.0.0.1, stopped after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from bosun.live.binder import PostBinding, api_poster
from bosun.live.serve import LiveScheduler, ServeOptions

from .fakeapi import FakeApiServer
from .serving import OPTS, Running, bosun_threads, config, wait_until


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


@pytest.fixture
def serve(fake_api: FakeApiServer) -> Iterator[Callable[..., Running]]:
    """Start :class:`LiveScheduler` s in threads against :func:`fake_api`
    (``serve(options, post=wrap_poster, name=profile)``); all stopped afterwards, and no
    bosun thread may outlive them."""
    started: list[Running] = []
    apis: list[client.ApiClient] = []

    def start(
        options: ServeOptions = OPTS,
        post: Callable[[PostBinding], PostBinding] | None = None,
        name: str = "bosun",
    ) -> Running:
        api = client.ApiClient(client.Configuration(host=fake_api.url))
        apis.append(api)
        poster = api_poster(api)
        live = LiveScheduler(
            api, config(name), options, post_binding=post(poster) if post else poster
        )
        run = Running(live)
        started.append(run)
        return run

    yield start
    for run in started:
        run.stop()
    for api in apis:
        api.close()
    wait_until(lambda: not bosun_threads(), 5.0, "bosun threads to end")
