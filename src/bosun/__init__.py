"""bosun: a Kubernetes-faithful, vectorized scheduler core and cluster digital twin."""

__version__ = "0.1.0"
