"""The API requests live mode sends, without the official client's generated API classes.

The official Python client (``kubernetes`` 37) builds its API classes (``CoreV1Api`` and
the others) on pydantic models; the first use of ``CoreV1Api``, ``PolicyV1Api``,
``StorageV1Api`` and ``AuthorizationV1Api`` imports and builds hundreds of model classes:
about 2 s of CPU on the development machine (docs/live.md, "Measured"), more than the rest
of ``bosun serve``'s start-up together. Live mode reads every answer as raw JSON anyway
(``_preload_content=False``), so it needs none of them.

:class:`RawApi` sends the same requests through the same ``ApiClient`` (its connection
pool, TLS settings, authentication and default headers): each method has the name and
keyword arguments of the generated method it replaces (``list_node(limit=...,
_continue=..., watch=...)``, ``create_namespaced_pod_binding(name, namespace, body)``, ...)
and answers as that method does with ``_preload_content=False``: the raw, unread urllib3
response for a 2xx status, else :class:`kubernetes.client.exceptions.ApiException`
(``status``, ``reason``, ``body``) as the generated client raises it, so
:func:`bosun.live.client.call` turns it into the same :class:`ClusterError`.

Not here: the leader elector's Lease requests (:mod:`bosun.live.leader`, which works on
``V1Lease`` models; only with ``--leader-elect``) and ``bosun snapshot``'s lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

__all__ = ["ENDPOINTS", "RawApi"]

Obj = dict[str, Any]

#: keyword argument -> query parameter (the generated client's names)
_QUERY = {
    "limit": "limit",
    "_continue": "continue",
    "field_selector": "fieldSelector",
    "label_selector": "labelSelector",
    "resource_version": "resourceVersion",
    "watch": "watch",
    "timeout_seconds": "timeoutSeconds",
    "allow_watch_bookmarks": "allowWatchBookmarks",
}


@dataclass(frozen=True, slots=True)
class _Endpoint:
    method: str
    path: str  # with {namespace} and {name}


#: generated method name -> HTTP method and path (kube's REST API paths)
ENDPOINTS: dict[str, _Endpoint] = {
    "list_node": _Endpoint("GET", "/api/v1/nodes"),
    "list_pod_for_all_namespaces": _Endpoint("GET", "/api/v1/pods"),
    "list_persistent_volume": _Endpoint("GET", "/api/v1/persistentvolumes"),
    "list_persistent_volume_claim_for_all_namespaces": _Endpoint(
        "GET", "/api/v1/persistentvolumeclaims"
    ),
    "list_pod_disruption_budget_for_all_namespaces": _Endpoint(
        "GET", "/apis/policy/v1/poddisruptionbudgets"
    ),
    "list_storage_class": _Endpoint("GET", "/apis/storage.k8s.io/v1/storageclasses"),
    "list_csi_node": _Endpoint("GET", "/apis/storage.k8s.io/v1/csinodes"),
    "list_namespaced_lease": _Endpoint(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    ),
    "read_namespaced_lease": _Endpoint(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
    ),
    "create_namespaced_pod_binding": _Endpoint(
        "POST", "/api/v1/namespaces/{namespace}/pods/{name}/binding"
    ),
    "create_namespaced_event": _Endpoint("POST", "/api/v1/namespaces/{namespace}/events"),
    "patch_namespaced_event": _Endpoint("PATCH", "/api/v1/namespaces/{namespace}/events/{name}"),
    "patch_namespaced_pod_status": _Endpoint(
        "PATCH", "/api/v1/namespaces/{namespace}/pods/{name}/status"
    ),
    "delete_namespaced_pod": _Endpoint("DELETE", "/api/v1/namespaces/{namespace}/pods/{name}"),
    "patch_persistent_volume": _Endpoint("PATCH", "/api/v1/persistentvolumes/{name}"),
    "patch_namespaced_persistent_volume_claim": _Endpoint(
        "PATCH", "/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"
    ),
    "create_self_subject_access_review": _Endpoint(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    ),
}


class RawApi:
    """The requests of :data:`ENDPOINTS` through ``api_client`` (module docstring).

    ``RawApi(api).list_node(limit=500)`` is ``CoreV1Api(api).list_node(limit=500,
    _preload_content=False)``: the same URL, query, headers and authentication.

    Raises (from each method):
        TypeError: a keyword argument it does not know (a mistake in bosun, never the
            server's), or a path parameter missing.
        ApiException: the server answered a status outside 2xx.
        urllib3.exceptions.HTTPError: the server could not be reached.
    """

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def __getattr__(self, name: str) -> Any:
        endpoint = ENDPOINTS.get(name)
        if endpoint is None:
            raise AttributeError(f"RawApi has no request {name!r}")

        def send(**kwargs: Any) -> Any:
            return self.request(endpoint, name, kwargs)

        send.__name__ = name
        return send

    def request(self, endpoint: _Endpoint, name: str, kwargs: Obj) -> Any:
        """Send one request of ``endpoint`` with the generated method's ``kwargs``."""
        kwargs = dict(kwargs)
        kwargs.pop("_preload_content", None)  # always raw
        timeout = kwargs.pop("_request_timeout", None)
        content_type = kwargs.pop("_content_type", None)
        body = kwargs.pop("body", None)
        path_params: Obj = {k: kwargs.pop(k) for k in ("name", "namespace") if k in kwargs}
        query: list[tuple[str, Any]] = []
        for key, value in kwargs.items():
            param = _QUERY.get(key)
            if param is None:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
            if value is not None:
                query.append((param, value))
        for param in ("name", "namespace"):
            if "{" + param + "}" in endpoint.path and not path_params.get(param):
                raise TypeError(f"{name}() missing the path parameter {param!r}")
        headers: Obj = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        api = self.api_client
        method, url, header_params, body_out, post_params = api.param_serialize(
            method=endpoint.method,
            resource_path=endpoint.path,
            path_params=path_params,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = api.call_api(
            method, url, header_params, body_out, post_params, _request_timeout=timeout
        )
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response
