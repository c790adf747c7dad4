"""bosun.federation: see docs/federation.md."""
