"""bosun.workload: see docs/workload.md."""
