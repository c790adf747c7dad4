"""The scheduling framework: interfaces, columnar snapshot, runtime, queue, cache, config."""
