"""In-tree plugins, one module per plugin (kube-scheduler names)."""
