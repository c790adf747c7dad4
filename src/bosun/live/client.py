"""A connection to a cluster's API server, and the errors of talking to one.

:func:`connect` builds an official-client ``ApiClient`` from a kubeconfig file (optionally
one of its contexts) or, without one, from the in-cluster service account.
:func:`call` makes one API request and turns what can go wrong into a
:class:`ClusterError` that says which server, verb and resource.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from bosun.errors import BosunError

__all__ = ["REQUEST_TIMEOUT_S", "ClusterError", "call", "connect"]

#: (connect, read) timeouts of one request, in seconds.
REQUEST_TIMEOUT_S = (10.0, 60.0)

T = TypeVar("T")

# The config loaders have no annotations in some client versions: call them as Any.
_LOAD_KUBECONFIG: Any = config.load_kube_config
_LOAD_INCLUSTER: Any = config.load_incluster_config


class _RetriesToDebug(logging.Filter):
    """Logs urllib3's "Retrying (...) after connection broken" warnings at DEBUG.

    urllib3 retries a failed connection 3 times by default and warns at each retry; with
    logging configured (``bosun serve`` does) that printed 3 warning lines before the one
    clear :class:`ClusterError`. The retries still happen and still show with ``-v``.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and str(record.msg).startswith("Retrying ("):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_RETRY_FILTER = _RetriesToDebug()


def _quiet_retries() -> None:
    """Install :class:`_RetriesToDebug` on urllib3's connection-pool logger (once)."""
    logger = logging.getLogger("urllib3.connectionpool")
    if _RETRY_FILTER not in logger.filters:
        logger.addFilter(_RETRY_FILTER)


class ClusterError(BosunError):
    """The cluster cannot be used: bad kubeconfig, unreachable server, refused request.

    Attributes:
        status: the HTTP status the API server answered, if it answered.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def connect(kubeconfig: Path | None = None, context: str | None = None) -> Any:
    """An ``ApiClient`` for the cluster of ``kubeconfig`` (its ``context``, else its
    current context), or for the cluster bosun runs in when ``kubeconfig`` is ``None``.

    No request is made: an unreachable server shows at the first :func:`call`.

    Raises:
        ClusterError: the kubeconfig cannot be read, is not valid YAML or not a kubeconfig
            (the message names the file), has no context ``context`` (the message lists
            the contexts it has), its context names a cluster it does not have or one
            without a ``server`` (file, context and cluster named), or, without a
            kubeconfig, bosun is not in a cluster.
    """
    _quiet_retries()
    cfg = client.Configuration()
    if kubeconfig is None:
        if context is not None:
            raise ClusterError("--context needs --kubeconfig")
        try:
            _LOAD_INCLUSTER(client_configuration=cfg)
        except ConfigException as e:
            raise ClusterError(
                f"no kubeconfig given and not running in a cluster ({e}); pass --kubeconfig"
            ) from None
        return client.ApiClient(cfg)
    _check_kubeconfig(kubeconfig, context)
    try:
        _LOAD_KUBECONFIG(
            config_file=str(kubeconfig),
            context=context,
            client_configuration=cfg,
            persist_config=False,
        )
    except (ConfigException, ValueError, TypeError, KeyError, AttributeError) as e:
        raise ClusterError(f"kubeconfig {kubeconfig} is not valid: {e}") from None
    return client.ApiClient(cfg)


def _check_kubeconfig(path: Path, context: str | None) -> None:
    """Read ``path`` first, so that its problems are reported with its name."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ClusterError(f"cannot read kubeconfig {path}: {reason}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ClusterError(f"kubeconfig {path} is not valid YAML: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("contexts"), list):
        raise ClusterError(f"kubeconfig {path} is not a kubeconfig: it has no `contexts` list")
    names = [c.get("name") for c in doc["contexts"] if isinstance(c, dict)]
    wanted = context if context is not None else doc.get("current-context")
    if not wanted:
        raise ClusterError(f"kubeconfig {path} has no current-context; pass --context")
    if wanted not in names:
        have = ", ".join(str(n) for n in names) or "none"
        raise ClusterError(f"kubeconfig {path} has no context {wanted!r} (contexts: {have})")
    _check_cluster(path, doc, wanted)


def _check_cluster(path: Path, doc: dict[str, Any], context: str) -> None:
    """The context's cluster must be in ``clusters`` and have a ``server`` URL (the client
    would otherwise try to reach the empty URL: "cannot reach the API server at : No host
    specified")."""
    entry = next(c for c in doc["contexts"] if isinstance(c, dict) and c.get("name") == context)
    body = entry.get("context")
    cluster = body.get("cluster") if isinstance(body, dict) else None
    if not cluster:
        raise ClusterError(f"kubeconfig {path}: context {context!r} names no cluster")
    clusters = doc.get("clusters")
    found = [
        c
        for c in (clusters if isinstance(clusters, list) else [])
        if isinstance(c, dict) and c.get("name") == cluster
    ]
    if not found:
        raise ClusterError(
            f"kubeconfig {path}: context {context!r} names cluster {cluster!r}, "
            "which is not in its `clusters` list"
        )
    settings = found[0].get("cluster")
    server = settings.get("server") if isinstance(settings, dict) else None
    if not isinstance(server, str) or not server.strip():
        raise ClusterError(
            f"kubeconfig {path}: cluster {cluster!r} (of context {context!r}) has no `server` URL"
        )


def call(api_client: Any, verb: str, resource: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """``fn(**kwargs)``: one request to the API server, with :data:`REQUEST_TIMEOUT_S`.

    ``verb`` and ``resource`` (``list``, ``pods``) name the request in errors.

    Raises:
        ClusterError: the server cannot be reached (the message names its URL), refuses
            the credentials (401) or the request (403), or answers another error status.
    """
    host = api_client.configuration.host
    kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT_S)
    try:
        return fn(**kwargs)
    except ApiException as e:
        raise _api_error(host, verb, resource, e) from None
    except urllib3.exceptions.HTTPError as e:
        reason = getattr(e, "reason", None) or e
        raise ClusterError(f"cannot reach the API server at {host}: {reason}") from None


def _api_error(host: str, verb: str, resource: str, e: ApiException) -> ClusterError:
    message = _status_message(e)
    if e.status == 401:
        return ClusterError(
            f"the API server at {host} did not accept the credentials "
            f"(401 Unauthorized) to {verb} {resource}",
            e.status,
        )
    if e.status == 403:
        return ClusterError(
            f"not allowed to {verb} {resource} (403 Forbidden): {message}", e.status
        )
    return ClusterError(
        f"cannot {verb} {resource} at {host}: {e.status} {e.reason}"
        + (f": {message}" if message else ""),
        e.status,
    )


def _status_message(e: ApiException) -> str:
    """The ``message`` of the ``Status`` the server answered, if it is one."""
    try:
        body = json.loads(e.body or "")
    except (TypeError, ValueError):
        return ""
    return str(body.get("message", "")) if isinstance(body, dict) else ""
