"""Reproducible experiments over bosun's scheduling core (see each module's docstring)."""

from __future__ import annotations

from bosun.twin.experiments.fragmentation import (
    POLICIES,
    FragmentationExperiment,
    FragmentationRun,
    Policy,
    run_fragmentation_experiment,
)

__all__ = [
    "POLICIES",
    "FragmentationExperiment",
    "FragmentationRun",
    "Policy",
    "run_fragmentation_experiment",
]
