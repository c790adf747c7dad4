"""bosun.colocation: see docs/colocation.md."""
