"""bosun.workload: a learned (CTGAN) workload generator for the twin (docs/workload.md).

* :mod:`bosun.workload.table`: the pod table learned from a trace (:data:`SCHEMA`) and the
  generic-schema trace written back (:func:`write_trace`).
* :mod:`bosun.workload.model`: fit, save, load (format version and schema checked), sample
  valid pods.
* :mod:`bosun.workload.score`: sdmetrics quality report and KS per numeric column.
* :mod:`bosun.workload.compare`: FGD fragmentation curves of a real and a generated trace.
* :mod:`bosun.workload.spec`: ``--trace gan:MODEL,pods=N[,seed=S]``.

torch and ctgan are imported only when a model is fitted, saved or loaded.
"""

from bosun.workload.table import SCHEMA, pod_table, split_table, write_trace

__all__ = ["SCHEMA", "pod_table", "split_table", "write_trace"]
