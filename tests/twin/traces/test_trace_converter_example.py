"""examples/convert_pai_v2020.py: a trace in another layout mapped onto the generic schema."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from bosun.api.types import GPU
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.twin import data
from bosun.twin.traces import load_generic

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "convert_pai_v2020.py"


@pytest.fixture(scope="module")
def conv() -> ModuleType:
    spec = importlib.util.spec_from_file_location("convert_pai_v2020", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# rows in the PAI layout (no header): the README's example task, a 2-instance task with a
# half GPU each, a 1.5-GPU task, and a task without a memory request (dropped)
TASKS = """\
4f057009a5d481acec67b088,tensorflow,1.0,Terminated,1739162.0,1739200.0,600.0,29.296875,50.0,MISC
aa0000000000000000000001,worker,2.0,Terminated,1739100.0,1739300.0,400.0,8.0,100.0,V100
aa0000000000000000000002,PyTorch_Worker,1.0,Running,1739500.0,,1200.0,16.0,150.0,T4
aa0000000000000000000003,ps,1.0,Failed,1739000.0,1739001.0,100.0,0.0,0.0,CPU
"""
MACHINES = """\
7399a758eb02bae1a3621236,CPU,96,512,0
8399a758eb02bae1a3621236,P100,64,512,2
"""


def test_convert_by_hand(tmp_path: Path, conv: ModuleType) -> None:
    (tmp_path / "tasks.csv").write_text(TASKS)
    (tmp_path / "machines.csv").write_text(MACHINES)
    tasks = pd.read_csv(tmp_path / "tasks.csv", header=None, names=conv.TASK_COLUMNS)
    machines = pd.read_csv(tmp_path / "machines.csv", header=None, names=conv.MACHINE_COLUMNS)
    conv.convert_tasks(tasks).to_csv(tmp_path / "pai.csv", index=False)
    conv.convert_machines(machines).to_csv(tmp_path / "pai.nodes.csv", index=False)
    trace = load_generic(tmp_path / "pai.csv")
    by_name = {a.pod.name: a for a in trace.arrivals}
    assert len(by_name) == 4  # 1 + 2 + 1; the memory-less task is dropped
    # origin = the earliest start of the kept rows, 1,739,100
    w0, w1 = (
        by_name["aa0000000000000000000001-worker-0"],
        by_name["aa0000000000000000000001-worker-1"],
    )
    assert (w0.arrival_s, w0.departure_s) == (0.0, 200.0)
    assert w0.pod.requests["cpu"] == 4000  # 400 % of a core
    assert w0.pod.requests["memory"] == 8 * 1024 * (1 << 20)  # 8 GB read as 8 GiB
    assert (w0.pod.gpu_count, w0.pod.gpu_milli) == (1, 1000)  # 100 % = one whole GPU
    assert w1.pod.labels["bosun.io/workload"] == "aa0000000000000000000001-worker"
    tf = by_name["4f057009a5d481acec67b088-tensorflow-0"]
    assert (tf.arrival_s, tf.departure_s) == (62.0, 100.0)
    assert (tf.pod.gpu_count, tf.pod.gpu_milli) == (1, 500)  # 50 % of one GPU
    assert tf.pod.requests["memory"] == 30_000 * (1 << 20)  # 29.296875 GiB = 30,000 MiB
    pt = by_name["aa0000000000000000000002-pytorch-worker-0"]
    assert pt.departure_s is None  # still running
    assert (pt.pod.gpu_count, pt.pod.gpu_milli) == (2, 750)  # 150 % = 2 GPUs x 750
    cpu_node, gpu_node = trace.nodes
    assert cpu_node.allocatable["cpu"] == 96_000 and GPU not in cpu_node.allocatable
    assert gpu_node.allocatable[GPU] == 2 and gpu_node.labels[GPU_MODEL_LABEL] == "P100"


@pytest.mark.data
def test_real_machine_spec(tmp_path: Path, conv: ModuleType) -> None:
    # the README's machine groups: P100 798, T4 497, MISC 280, V100M32 135, CPU 83, V100 104
    path = data.require("alibaba-gpu-v2020/pai_machine_spec.csv")
    machines = pd.read_csv(path, header=None, names=conv.MACHINE_COLUMNS)
    conv.convert_machines(machines).to_csv(tmp_path / "pai.nodes.csv", index=False)
    (tmp_path / "pai.csv").write_text("name,arrival_s,cpu_milli,memory_mib\np,0,1,1\n")
    trace = load_generic(tmp_path / "pai.csv")
    assert len(trace.nodes) == 1897
    models = Counter(n.labels.get(GPU_MODEL_LABEL, "CPU") for n in trace.nodes)
    assert models == {"P100": 798, "T4": 497, "MISC": 280, "V100M32": 135, "CPU": 83, "V100": 104}
    assert sum(n.allocatable.get(GPU, 0) for n in trace.nodes) == (
        798 * 2 + 497 * 2 + 280 * 8 + 135 * 8 + 59 * 8 + 45 * 8
    )
