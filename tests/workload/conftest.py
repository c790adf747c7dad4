"""Shared fixtures of the workload-generator tests: one thread, a small trace, a tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bosun.twin.trace import Trace
from bosun.twin.traces import synthetic_trace
from bosun.workload.model import FitSettings, WorkloadModel, fit_model
from bosun.workload.table import nodes_to_records, pod_table, split_table

# 2 cores shared by several people: CTGAN must not take both.
torch.set_num_threads(1)

#: Seconds-scale CTGAN settings: the tests check plumbing and invariants, not quality.
TINY = FitSettings(
    epochs=2,
    batch_size=60,
    pac=10,
    embedding_dim=16,
    generator_dim=(32,),
    discriminator_dim=(32,),
    seed=7,
)


@pytest.fixture(scope="session")
def small_trace() -> Trace:
    """An openb-shaped synthetic trace: 12 nodes (GPU and CPU), 240 pods, some with a GPU
    model requirement."""
    return synthetic_trace(seed=3, nodes=12, pods=240, hours=2.0, gpu_spec_fraction=0.3)


@pytest.fixture(scope="session")
def tiny_model(small_trace: Trace) -> WorkloadModel:
    """CTGAN fitted for 2 epochs on 70 % of :func:`small_trace`."""
    train, held = split_table(pod_table(small_trace), 0.3, 0)
    return fit_model(
        train,
        settings=TINY,
        nodes=nodes_to_records(small_trace.nodes),
        trace_name=small_trace.name,
        holdout=held,
    )


@pytest.fixture(scope="session")
def tiny_model_file(tiny_model: WorkloadModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`tiny_model` saved to a file."""
    return tiny_model.save(tmp_path_factory.mktemp("model") / "tiny.gan")
