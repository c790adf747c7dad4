"""Live mode: bosun against a Kubernetes API server (a local fake one in tests)."""
