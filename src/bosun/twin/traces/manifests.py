"""Traces from Kubernetes manifests: a timed manifest trace, and a cluster snapshot.

Both read Pods, workloads (Deployment, ReplicaSet, StatefulSet, Job: expanded into their
pods) and Nodes with :func:`bosun.api.manifest.load_manifests`, so every rule of the
manifest loader (validation, defaulting, priorities) applies. Nodes in the files are the
trace's nodes at time 0; pods with ``spec.nodeName`` set are already running
(:attr:`Trace.bound`).

A **manifest trace** (:func:`load_manifest_trace`) times its pending pods with annotations
(seconds: plain decimal numbers such as ``12``, ``1.5`` or ``1e3``, read as strictly as
the CSV loader's cells: no spaces, no ``_``, no ``inf``/``nan``; non-negative and at most
``1e10``):

* ``bosun.io/arrival-s``: arrival time; default 0;
* ``bosun.io/departure-s``: absolute deletion time (``>= arrival``), or
* ``bosun.io/duration-s``: run time after binding; at most one of the two.

On a workload, the annotations go on the pod template (``spec.template.metadata``), so
every replica carries them. Another ``bosun.io/`` annotation on a pending pod that looks
like a misspelt timing one (a name ending in ``-s`` or mentioning arrival, departure,
duration or time, or close to a known key) is a problem rather than silently ignored.
Bound pods run from time 0 to the end: timing annotations on
them are a problem (a :class:`Trace` has no departure for bound pods).

A **snapshot** (:func:`load_snapshot`) is a cluster as it is: its pending pods all arrive
at 0 and stay until bound or the end; timing annotations are ignored.

Both read **gangs**: scheduler-plugins ``PodGroup`` objects (``scheduling.x-k8s.io/v1alpha1``,
``spec.minMember``, ``spec.scheduleTimeoutSeconds``) go to :attr:`Trace.pod_groups`, and
their pods join them with the label ``scheduling.x-k8s.io/pod-group: <name>``.
:func:`bosun.batch.gang.check_gangs` checks them across objects: a pod naming a group
that is not in the files, or a group whose ``minMember`` exceeds the pods naming it, is
a problem (file, object, field).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from bosun.api.manifest import load_manifests
from bosun.api.types import ClusterObjects, Pod
from bosun.batch.gang import check_gangs
from bosun.errors import InputError, InputProblem
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.traces.generic import MAX_TIME_S

__all__ = [
    "ARRIVAL_ANNOTATION",
    "DEPARTURE_ANNOTATION",
    "DURATION_ANNOTATION",
    "load_manifest_trace",
    "load_snapshot",
]

ARRIVAL_ANNOTATION = "bosun.io/arrival-s"
DEPARTURE_ANNOTATION = "bosun.io/departure-s"
DURATION_ANNOTATION = "bosun.io/duration-s"
_TIMING = (ARRIVAL_ANNOTATION, DEPARTURE_ANNOTATION, DURATION_ANNOTATION)
_PREFIX = "bosun.io/"
_NON_FINITE = ("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan", "+nan", "-nan")
_TIME_WORDS = ("arrival", "arrive", "departure", "depart", "duration", "time", "second")


#: A plain decimal number, as the CSV loader reads one: optional sign, digits with an
#: optional fraction, optional exponent; no spaces, no ``_`` separators, no ``inf``/``nan``.
_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _seconds(
    annotations: Mapping[str, str], key: str, problem: list[tuple[str, str]]
) -> float | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str) or not _DECIMAL.fullmatch(raw):
        if isinstance(raw, str) and raw.lower() in _NON_FINITE:
            problem.append((key, f"must be a finite number >= 0, got {raw!r}"))
        else:
            problem.append((key, f"not a number: {raw!r} (a plain decimal number of seconds)"))
        return None
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        problem.append((key, f"must be a finite number >= 0, got {raw!r}"))
        return None
    if value > MAX_TIME_S:
        problem.append((key, f"too large: at most {MAX_TIME_S:.0f}, got {raw!r}"))
        return None
    return value


def _unknown_timing(annotations: Mapping[str, str]) -> list[tuple[str, str]]:
    """``bosun.io/`` annotation keys that look like a misspelt timing annotation: a time
    (``-s`` suffix, or arrival/departure/duration/time in the name) or close to a known
    key (:func:`difflib.get_close_matches`, ratio >= 0.8)."""
    out: list[tuple[str, str]] = []
    for key in annotations:
        if not key.startswith(_PREFIX) or key in _TIMING:
            continue
        name = key[len(_PREFIX) :].lower()
        close = difflib.get_close_matches(key, _TIMING, n=1, cutoff=0.8)
        timey = name.endswith("-s") or any(w in name for w in _TIME_WORDS)
        if close or timey:
            hint = f"; did you mean {close[0]}?" if close else ""
            out.append((key, f"unknown timing annotation (known: {', '.join(_TIMING)}){hint}"))
    return out


def _timed_arrival(pod: Pod, problems: list[tuple[str, str]]) -> PodArrival:
    ann = pod.annotations
    arrival = _seconds(ann, ARRIVAL_ANNOTATION, problems)
    departure = _seconds(ann, DEPARTURE_ANNOTATION, problems)
    duration = _seconds(ann, DURATION_ANNOTATION, problems)
    arrival = arrival or 0.0
    if departure is not None and duration is not None:
        problems.append(
            (DURATION_ANNOTATION, f"set together with {DEPARTURE_ANNOTATION}; give one")
        )
    elif departure is not None and departure < arrival:
        problems.append(
            (DEPARTURE_ANNOTATION, f"departure {departure:g} is before arrival {arrival:g}")
        )
    return PodArrival(pod, arrival, departure, duration)


def _source(paths: Sequence[Path]) -> str:
    return ", ".join(str(p) for p in paths)


def _trace(name: str, objs: ClusterObjects, source: str, timed_annotations: bool) -> Trace:
    problems: list[InputProblem] = []
    arrivals: list[PodArrival] = []
    bound: list[Pod] = []
    for pod in objs.pods:
        found: list[tuple[str, str]] = []
        if pod.node_name:
            if timed_annotations:
                found += [
                    (k, "timing annotations apply to pending pods only (this pod is bound)")
                    for k in _TIMING
                    if k in pod.annotations
                ]
            bound.append(pod)
        elif timed_annotations:
            arrivals.append(_timed_arrival(pod, found))
            found += _unknown_timing(pod.annotations)
        else:
            arrivals.append(PodArrival(pod, 0.0))
        problems += [
            InputProblem(source, f"Pod {pod.key}", f"metadata.annotations[{k}]", msg)
            for k, msg in found
        ]
    if not objs.nodes:
        problems.append(InputProblem(source, "file", "", "no Node objects"))
    try:
        check_gangs(objs, source)
    except InputError as e:
        problems += e.problems
    if problems:
        raise InputError(problems)
    arrivals.sort(key=lambda a: a.arrival_s)
    return Trace(
        name=name,
        nodes=list(objs.nodes),
        arrivals=arrivals,
        bound=bound,
        pod_groups=list(objs.pod_groups),
    )


def load_manifest_trace(paths: Sequence[str | Path]) -> Trace:
    """A trace from manifest files or directories (module docstring for the annotations).

    Args:
        paths: YAML/JSON files, or directories of them, read together (priorities and
            duplicates are resolved across all of them).

    Returns:
        Nodes from the files; pending pods as arrivals sorted by arrival time (ties in
        file order); bound pods in :attr:`Trace.bound`; PodGroups in
        :attr:`Trace.pod_groups`. Kinds that do not affect
        scheduling (``Service`` ...) are ignored, as by the manifest loader.

    Raises:
        InputError: every manifest problem, every bad timing annotation (named
            ``Pod ns/name``, ``metadata.annotations[bosun.io/arrival-s]``), every gang
            problem (:func:`bosun.batch.gang.check_gangs`), or no nodes.
    """
    ps = [Path(p) for p in paths]
    name = ps[0].name if len(ps) == 1 else f"{ps[0].name} (+{len(ps) - 1})"
    return _trace(name, load_manifests(ps), _source(ps), timed_annotations=True)


def load_snapshot(path: str | Path) -> Trace:
    """A cluster dump (plain manifests: Nodes, bound and pending Pods) as a trace.

    Bound pods go to :attr:`Trace.bound`; pending pods all arrive at 0, without departure
    (timing annotations are ignored).

    Raises:
        InputError: every manifest problem, or no nodes.
    """
    p = Path(path)
    return _trace(f"snapshot:{p.name}", load_manifests([p]), str(p), timed_annotations=False)
