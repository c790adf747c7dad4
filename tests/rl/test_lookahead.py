"""bosun.rl.lookahead: the causal lookahead, the teacher the policy network imitates.

Its simulated futures count placements as worked out by hand, it leaves FGD for the node
that lets the drawn pods fit, its deviation rule is a paired t test (values by hand), and
what it records of each decision is what it saw and chose.
"""

from __future__ import annotations

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses
from bosun.plugins.registry import in_tree_registry
from bosun.rl.evaluate import Decision, HeuristicChooser
from bosun.rl.lookahead import Lookahead, best_gain, placed_after
from bosun.twin.experiments.fragmentation import policy_configuration


def _gpu_pod(name: str, gpus: int) -> Pod:
    return make_pod(name, cpu="1", memory="1Gi", extra={"nvidia.com/gpu": gpus})


def _two_nodes() -> Snapshot:
    """n0 with 2 free GPUs, n1 with 1; CPU and memory to spare."""
    return Snapshot(
        [
            make_node("n0", cpu="32", memory="64Gi", extra={"nvidia.com/gpu": 2}),
            make_node("n1", cpu="32", memory="64Gi", extra={"nvidia.com/gpu": 1}),
        ]
    )


@pytest.mark.parametrize(
    ("row", "future", "expected"),
    [
        # a 1-GPU pod on n0 leaves 1 + 1 GPUs on two nodes: no room for 2 GPUs
        (0, [2], 0),
        # on n1 it leaves n0 whole: the 2-GPU pod fits, then nothing
        (1, [2, 1], 1),
        (0, [1, 1, 1], 2),
        (1, [1, 1, 1], 2),
    ],
    ids=["n0-blocks-two-gpus", "n1-keeps-n0-whole", "n0-singles", "n1-singles"],
)
def test_placed_after_by_hand(row: int, future: list[int], expected: int) -> None:
    snap = _two_nodes()
    before = snap.gpu_used_milli.copy()
    pods = [_gpu_pod(f"f{j}", g) for j, g in enumerate(future)]
    config = policy_configuration("fgd", in_tree_registry(), TaskClasses.from_pods(pods))
    assert placed_after(snap, _gpu_pod("now", 1), row, pods, config, 0) == expected
    assert (snap.gpu_used_milli == before).all()  # the live snapshot is untouched
    assert snap.pods.size == 0


def test_lookahead_leaves_room_for_the_drawn_pods() -> None:
    """The past holds only 2-GPU pods: every drawn future places one 2-GPU pod if the
    1-GPU pod goes on n1, none if it goes on n0. FGD is told the workload is 1-GPU pods,
    for which both nodes are equally good: its seeded tie-break picks either. The gain of
    n1 over n0 is 1 in every future (t infinite), so the lookahead takes n1 whatever FGD
    picked; with an unreachable threshold it keeps FGD's choice."""
    pool = [_gpu_pod("past", 2)]
    pod = _gpu_pod("now", 1)
    classes = TaskClasses.from_pods([pod])

    def decision() -> Decision:
        rows = np.arange(2, dtype=np.intp)
        return Decision(pod, _two_nodes(), rows, None, None, None, classes)

    fgd_choices = set()
    for seed in range(10):
        fgd = HeuristicChooser("fgd", seed)(decision())
        fgd_choices.add(fgd)
        assert Lookahead(pool, seed, horizon=2, samples=4)(decision()) == 1
        strict = Lookahead(pool, seed, horizon=2, samples=4, t_min=float("inf"))
        assert strict(decision()) == fgd
    assert fgd_choices == {0, 1}  # the lookahead left FGD's n0 at least once


def test_no_samples_labels_the_base_choice() -> None:
    """``samples=0``: where the futures would take n1 (the test above), every decision
    keeps FGD's choice, recorded as a label with that one candidate and no values."""
    pool = [_gpu_pod("past", 2)]
    pod = _gpu_pod("now", 1)
    classes = TaskClasses.from_pods([pod])
    choices = set()
    for seed in range(10):
        d = Decision(pod, _two_nodes(), np.arange(2, dtype=np.intp), None, None, None, classes)
        fgd = HeuristicChooser("fgd", seed)(d)
        chooser = Lookahead(pool, seed, horizon=2, samples=0, record=True)
        assert chooser(d) == fgd
        (label,) = chooser.labels
        assert (label.base, label.pick, label.candidates.tolist()) == (fgd, fgd, [fgd])
        assert label.values.shape == (1, 0)
        assert chooser.deviations == 0
        choices.add(fgd)
    assert choices == {0, 1}  # FGD's tie-break took n0 too, which the futures would leave


def test_another_base_policy_is_kept_and_places_the_futures() -> None:
    """``base="leastallocated"``: LeastAllocated's choice as evaluated is the first
    candidate and the one kept under an unreachable threshold, and LeastAllocated places
    the futures: a drawn 2-GPU pod still fits only if the 1-GPU pod
    leaves n0 whole, so the lookahead leaves the base's n0 for n1. An unknown base is
    refused."""
    pool = [_gpu_pod("past", 2)]
    pod = _gpu_pod("now", 1)
    classes = TaskClasses.from_pods([pod])

    def decision() -> Decision:
        return Decision(pod, _two_nodes(), np.arange(2, dtype=np.intp), None, None, None, classes)

    chosen = set()
    for seed in range(10):
        la = HeuristicChooser("leastallocated", seed)(decision())
        # LeastAllocated scores free CPU, memory and GPUs (weight 1 each): equal CPU and
        # memory, and a GPU left free on n0 (1 of 2) against none on n1 (0 of 1): n0
        assert la == 0
        chosen.add(la)
        ahead = Lookahead(pool, seed, horizon=2, samples=4, base="leastallocated", record=True)
        assert ahead(decision()) == 1
        (label,) = ahead.labels
        assert label.base == label.candidates[0] == la and label.pick == 1
        # the futures were placed by LeastAllocated's profile, not FGD's
        assert ahead.config == policy_configuration("leastallocated", in_tree_registry(), classes)
        assert ahead.config != policy_configuration("fgd", in_tree_registry(), classes)
        strict = Lookahead(
            pool, seed, horizon=2, samples=4, t_min=float("inf"), base="leastallocated"
        )
        assert strict(decision()) == la
    assert 0 in chosen  # the lookahead left the base's choice
    with pytest.raises(ValueError, match="base: expected one of"):
        Lookahead(pool, 0, base="nope")


@pytest.mark.parametrize(
    ("gains", "t_min", "expected"),
    [
        # mean 0.5, sd sqrt(1/3) = 0.577, t = 0.5 / (0.577 / 2) = 1.73
        ([[0, 0, 0, 0], [1, 0, 1, 0]], 1.5, 1),
        ([[0, 0, 0, 0], [1, 0, 1, 0]], 2.0, None),
        # the same gain in every future: sd 0, t infinite
        ([[0, 0], [1, 1]], 1e9, 1),
        ([[0, 0, 0], [0, 0, 0]], 0.0, None),
        ([[0, 0, 0], [-1, -2, -1]], -10.0, None),
        # two pass, the larger mean wins; the last has the largest mean (3) but sd
        # sqrt((9 + 36 + 9) / 2) = 5.20, t = 3 / (5.20 / sqrt(3)) = 1.0: it fails
        ([[0, 0, 0], [1, 1, 1], [2, 2, 2], [6, -3, 6]], 1.5, 2),
    ],
    ids=[
        "t-1.73-passes-1.5",
        "t-1.73-fails-2",
        "constant-gain",
        "no-gain",
        "losses",
        "largest-mean",
    ],
)
def test_best_gain_by_hand(gains: list[list[float]], t_min: float, expected: int | None) -> None:
    assert best_gain(np.asarray(gains, dtype=float), t_min) == expected


def test_best_gain_needs_two_samples() -> None:
    with pytest.raises(ValueError, match="samples >= 2"):
        best_gain(np.asarray([[0.0], [1.0]]), 1.5)
    with pytest.raises(ValueError, match="samples 0 or >= 2"):
        Lookahead([_gpu_pod("p", 1)], 0, samples=1)
