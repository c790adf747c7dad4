"""Usage series from a Prometheus server's HTTP API (range queries).

:meth:`PrometheusSource.query_range` sends a PromQL expression to ``/api/v1/query_range``
(POST, form-encoded, as the API allows) and turns each returned series into a
:class:`bosun.forecast.base.UsageSeries` on the query's step:

* the name is the metric name followed by its labels in Prometheus' own notation, sorted
  by label name: ``node_cpu{instance="n1",mode="idle"}`` (``{...}`` alone when the
  expression drops the name, ``{}`` for a label-less result);
* sample values are Prometheus' decimal strings; ``NaN`` and infinite samples are dropped,
  and the missing steps (also steps Prometheus left out because the series was stale or
  absent) go through the same gap policy as file series
  (:func:`bosun.forecast.series.regularize`, with the step fixed to the query's step);
* a range longer than Prometheus' limit of 11,000 points per series
  (``exceeded maximum resolution``) is fetched in consecutive chunks of at most
  ``max_points`` steps and joined.

Failures (reference: https://prometheus.io/docs/prometheus/latest/querying/api/, "Format
overview": an error reply has ``status: "error"``, ``errorType`` and ``error``; 400 for bad
parameters, 422 when the expression cannot be executed, 503 when the query timed out or
was aborted) raise :class:`bosun.forecast.sources.SourceUnavailable`:
:class:`PrometheusError` when the server answered with an error (``error_type`` and
``status_code`` set), plain :class:`~bosun.forecast.sources.SourceUnavailable` for a
refused connection, a timeout, or a reply that is not the API's JSON; and
:class:`~bosun.forecast.sources.SeriesRejectedError` for a series that breaks the gap policy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import requests

from bosun.errors import InputError, InputProblem
from bosun.forecast.base import UsageSeries
from bosun.forecast.series import SeriesOptions, regularize
from bosun.forecast.sources import SeriesRejectedError, SourceUnavailable

#: Prometheus refuses range queries of more points per series than this
#: (``exceeded maximum resolution of 11,000 points per timeseries``, promql/engine).
MAX_POINTS = 11_000
#: Seconds to wait for the connection and for the answer, by default.
DEFAULT_TIMEOUT_S = 10.0
_PATH = "/api/v1/query_range"


class PrometheusError(SourceUnavailable):
    """Prometheus answered a query with an error.

    Attributes:
        error_type: the reply's ``errorType`` (``bad_data``, ``execution``, ``timeout``,
            ``canceled``, ``internal``, ``unavailable``, ``not_found``), or ``""`` when the
            reply carried none.
        status_code: the HTTP status of the reply.
    """

    def __init__(self, message: str, *, error_type: str, status_code: int) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.status_code = status_code


def series_name(labels: Mapping[str, str]) -> str:
    """A series' name in Prometheus notation: ``name{a="x",b="y"}``, labels sorted, values
    escaped as in PromQL string literals (backslash, double quote, newline)."""
    metric = labels.get("__name__", "")
    pairs = []
    for key in sorted(k for k in labels if k != "__name__"):
        value = labels[key].replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        pairs.append(f'{key}="{value}"')
    return f"{metric}{{{','.join(pairs)}}}"


def _time_namer(times: np.ndarray[Any, np.dtype[np.float64]]) -> Callable[[int], str]:
    """Names sample ``i`` by its time, ISO 8601 in UTC (problems about gaps)."""
    return lambda i: pd.Timestamp(float(times[i]), unit="s", tz="UTC").isoformat()


class PrometheusSource:
    """A Prometheus server's range-query API.

    Args:
        url: the server's base URL, e.g. ``http://prometheus:9090`` (a path prefix such as
            ``http://host/prometheus`` is kept).
        timeout_s: seconds to wait for the connection and again for the reply (> 0); also
            sent as the query's ``timeout`` so the server gives up as well.
        headers: extra HTTP headers (e.g. ``Authorization``).
        session: a :class:`requests.Session` to reuse connections (default: a new one).
        max_points: the most steps asked for in one request (1..:data:`MAX_POINTS`).

    Raises:
        InputError: the URL is not ``http(s)://host[:port][/path]``, or a bad timeout or
            ``max_points``.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        headers: Mapping[str, str] | None = None,
        session: requests.Session | None = None,
        max_points: int = MAX_POINTS,
    ) -> None:
        problems = []
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problems.append(
                InputProblem("prometheus", "options", "url", f"not an http(s) URL: {url!r}")
            )
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            problems.append(
                InputProblem("prometheus", "options", "timeout_s", f"must be > 0, got {timeout_s}")
            )
        if not 1 <= max_points <= MAX_POINTS:
            problems.append(
                InputProblem(
                    "prometheus",
                    "options",
                    "max_points",
                    f"must be 1..{MAX_POINTS}, got {max_points}",
                )
            )
        if problems:
            raise InputError(problems)
        self.url = url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.headers = dict(headers or {})
        self.session = session or requests.Session()
        self.max_points = max_points

    def query_range_raw(self, query: str, start_s: float, end_s: float, step_s: float) -> Any:
        """One ``query_range`` call, unparsed: the reply's ``data.result`` list (each item
        ``{"metric": {label: value}, "values": [[t, "v"], ...]}``, Prometheus' HTTP API), for
        callers that need the labels or accept one-sample series
        (:class:`bosun.forecast.prometheus_provider.PrometheusNodeMetricsProvider`).

        Raises:
            PrometheusError: an error reply.
            SourceUnavailable: no connection, a timeout, or a reply that is not the API's.
        """
        endpoint = self.url + _PATH
        form = {
            "query": query,
            "start": repr(float(start_s)),
            "end": repr(float(end_s)),
            "step": repr(float(step_s)),
            "timeout": f"{self.timeout_s:g}s",
        }
        try:
            reply = self.session.post(
                endpoint, data=form, headers=self.headers, timeout=self.timeout_s
            )
        except requests.Timeout:
            raise SourceUnavailable(
                f"Prometheus at {self.url}: no answer within {self.timeout_s:g} s"
            ) from None
        except requests.ConnectionError as e:
            raise SourceUnavailable(f"Prometheus at {self.url} is unreachable: {e}") from None
        except requests.RequestException as e:
            raise SourceUnavailable(f"Prometheus at {self.url}: request failed: {e}") from None
        try:
            body = reply.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("status") not in ("success", "error"):
            snippet = reply.text[:200].strip()
            raise SourceUnavailable(
                f"Prometheus at {self.url}: HTTP {reply.status_code} from {endpoint} is not a "
                f"Prometheus API reply: {snippet!r}"
            )
        if body["status"] == "error" or reply.status_code >= 400:
            error_type = str(body.get("errorType", ""))
            error = str(body.get("error", "")) or reply.reason
            raise PrometheusError(
                f"Prometheus at {self.url} refused the query ({error_type or 'error'}, "
                f"HTTP {reply.status_code}): {error}",
                error_type=error_type,
                status_code=reply.status_code,
            )
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            kind = data.get("resultType") if isinstance(data, dict) else None
            raise SourceUnavailable(
                f"Prometheus at {self.url}: expected a matrix result from query_range, got {kind!r}"
            )
        result = data.get("result")
        if not isinstance(result, list):
            raise SourceUnavailable(f"Prometheus at {self.url}: the result is not a list")
        return result

    def query_range(
        self,
        query: str,
        start_s: float,
        end_s: float,
        step_s: float,
        options: SeriesOptions | None = None,
    ) -> list[UsageSeries]:
        """Evaluate ``query`` at ``start_s, start_s + step_s, ...`` up to ``end_s``.

        Args:
            query: a PromQL expression.
            start_s, end_s: the range, seconds since the Unix epoch (UTC), start <= end.
            step_s: the evaluation step in seconds (> 0); the series' ``step_s``.
            options: the gap policy, ``min_samples`` and ``unit``
                (:class:`bosun.forecast.series.SeriesOptions`; its ``step_s`` is replaced
                by ``step_s``, its column options are unused).

        Returns:
            One series per returned label set, in the server's order (an empty list when
            nothing matched); with ``long_gaps="split"`` possibly several per label set.

        Raises:
            InputError: a bad query, range or step (nothing is sent).
            PrometheusError: the server answered with an error.
            SourceUnavailable: unreachable, timed out, or an answer that is not the API's.
            SeriesRejectedError: a series breaks the gap policy (long gap, too short).
        """
        problems = []
        if not query.strip():
            problems.append(InputProblem("prometheus", "query_range", "query", "empty query"))
        if not (math.isfinite(step_s) and step_s > 0):
            problems.append(
                InputProblem("prometheus", "query_range", "step", f"must be > 0, got {step_s}")
            )
        if not (math.isfinite(start_s) and math.isfinite(end_s) and start_s <= end_s):
            problems.append(
                InputProblem(
                    "prometheus",
                    "query_range",
                    "start/end",
                    f"need finite start <= end, got {start_s} and {end_s}",
                )
            )
        if problems:
            raise InputError(problems)
        opts = dataclasses.replace(options or SeriesOptions(), step_s=float(step_s))
        order: list[str] = []
        samples: dict[str, list[Any]] = {}
        chunk_start = float(start_s)
        while chunk_start <= end_s:
            chunk_end = min(float(end_s), chunk_start + (self.max_points - 1) * step_s)
            for item in self.query_range_raw(query, chunk_start, chunk_end, step_s):
                if (
                    not isinstance(item, dict)
                    or not isinstance(item.get("values"), list)
                    or not isinstance(item.get("metric", {}), dict)
                ):
                    entry = repr(item)[:200]
                    raise SourceUnavailable(
                        f"Prometheus at {self.url}: a result entry is not a series: {entry}"
                    )
                labels = {str(k): str(v) for k, v in dict(item.get("metric") or {}).items()}
                name = series_name(labels)
                if name not in samples:
                    order.append(name)
                    samples[name] = []
                samples[name].extend(item["values"])
            chunk_start = chunk_end + step_s
        out: list[UsageSeries] = []
        rejected: list[InputProblem] = []
        for name in order:
            try:
                t = np.array([float(p[0]) for p in samples[name]], dtype=np.float64)
                v = np.array([float(p[1]) for p in samples[name]], dtype=np.float64)
            except (TypeError, ValueError, IndexError):
                raise SourceUnavailable(
                    f"Prometheus at {self.url}: series {name} has samples that are not "
                    "[time, value] pairs"
                ) from None
            keep = np.isfinite(v) & np.isfinite(t)
            t, v = t[keep], v[keep]
            t, first = np.unique(t, return_index=True)  # chunks never overlap; be safe
            v = v[first]
            found, more = regularize(
                name,
                t,
                v,
                opts,
                source=f"Prometheus at {self.url}",
                where=_time_namer(t),
                column="time",
            )
            out.extend(found)
            rejected.extend(more)
        if rejected:
            raise SeriesRejectedError(rejected)
        return out
