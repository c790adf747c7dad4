"""A tiny trace where the node choice matters, for the RL tests on the real twin.

Two GPU nodes (8 cores, 4 GPUs) and two CPU-only nodes (8 cores); pods alternate CPU-only
and one-GPU, 2 cores each, one every 20 s, each running 300 s: about 15 pods run at once,
which fits (8 GPU pods on the GPU nodes by CPU, 8 CPU pods on the CPU nodes) only when
CPU-only pods stay off the GPU nodes. A CPU pod on a GPU node takes CPU a GPU pod needs:
GPU pods wait, the GPU allocation (ResourceUtil) drops and deadlines are missed.
"""

from __future__ import annotations

from bosun.api.build import make_node, make_pod
from bosun.twin.trace import PodArrival, Trace


def tiny_trace(pods: int = 200, gap_s: float = 20.0, duration_s: float = 300.0) -> Trace:
    """See the module docstring."""
    nodes = [
        make_node("gpu-a", cpu="8", memory="64Gi", extra={"nvidia.com/gpu": 4}),
        make_node("gpu-b", cpu="8", memory="64Gi", extra={"nvidia.com/gpu": 4}),
        make_node("cpu-a", cpu="8", memory="64Gi"),
        make_node("cpu-b", cpu="8", memory="64Gi"),
    ]
    arrivals = []
    for i in range(pods):
        extra = {"nvidia.com/gpu": 1} if i % 2 else None
        pod = make_pod(f"p{i:03d}", cpu="2", memory="4Gi", extra=extra)
        arrivals.append(PodArrival(pod, arrival_s=i * gap_s, duration_s=duration_s))
    return Trace("tiny", nodes, arrivals)
