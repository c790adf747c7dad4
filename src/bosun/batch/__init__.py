"""bosun.batch: see docs/batch.md."""
