"""bosun.explain: see docs/explain.md."""
