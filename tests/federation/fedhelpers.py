"""Helpers the federation tests share (not tests themselves)."""

from __future__ import annotations

from bosun.federation.agent import AgentConfig, free_port_pair
from bosun.federation.sync import SyncConfig


def agent_config(name: str, join: list[str]) -> AgentConfig:
    """A fast agent on 127.0.0.1 (a free port pair): sync, summaries and SWIM every 0.2 s."""
    return AgentConfig(
        cluster=name,
        port=free_port_pair(),
        join=join,
        sync=SyncConfig(interval_s=0.2),
        summary_interval_s=0.2,
        probe_interval_s=0.2,
        probe_timeout_s=0.1,
        suspicion_mult=4,
    )
