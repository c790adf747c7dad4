"""``bosun.live.client``: kubeconfig problems named before any request, and urllib3's
retry warnings kept out of the way of the one clear error."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from bosun.live.client import ClusterError, call, connect


def kubeconfig(tmp_path: Path, cluster: dict[str, Any], context: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "prod", "cluster": cluster}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": context}],
        "current-context": "ctx",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    ("cluster", "context", "message"),
    [
        ({"insecure-skip-tls-verify": True}, {"cluster": "prod", "user": "me"},
         "cluster 'prod' (of context 'ctx') has no `server` URL"),
        ({"server": ""}, {"cluster": "prod", "user": "me"},
         "cluster 'prod' (of context 'ctx') has no `server` URL"),
        ({"server": "https://h:6443"}, {"cluster": "staging", "user": "me"},
         "context 'ctx' names cluster 'staging', which is not in its `clusters` list"),
        ({"server": "https://h:6443"}, {"user": "me"}, "context 'ctx' names no cluster"),
    ],
    ids=["no-server", "empty-server", "unknown-cluster", "no-cluster"],
)
def test_a_context_without_a_server_names_file_and_cluster(
    tmp_path: Path, cluster: dict[str, Any], context: dict[str, Any], message: str
) -> None:
    path = kubeconfig(tmp_path, cluster, context)
    with pytest.raises(ClusterError) as info:
        connect(path)
    assert str(info.value) == f"kubeconfig {path}: {message}"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("level", "retries_logged"),
    [(logging.INFO, 0), (logging.DEBUG, 3)],  # urllib3's default Retry: 3 retries
    ids=["info", "debug"],
)
def test_retries_are_debug_lines_not_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, level: int, retries_logged: int
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    api = connect(kubeconfig(tmp_path, {"server": url}, {"cluster": "prod", "user": "me"}))
    caplog.set_level(level)
    with api, pytest.raises(ClusterError, match=f"cannot reach the API server at {url}"):
        call(api, "list", "nodes", client.CoreV1Api(api).list_node)
    urllib3 = [r for r in caplog.records if r.name.startswith("urllib3")]
    assert [r for r in urllib3 if r.levelno >= logging.WARNING] == []
    retries = [r for r in urllib3 if r.getMessage().startswith("Retrying (")]
    assert len(retries) == retries_logged
    assert all(r.levelname == "DEBUG" for r in retries)
