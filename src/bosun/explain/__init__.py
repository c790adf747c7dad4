"""bosun.explain: ``bosun why`` (root cause and checked fixes, :mod:`bosun.explain.rca`),
natural-language policies (:mod:`bosun.explain.policy`) and log rule mining
(:mod:`bosun.explain.logs`); see docs/why.md."""
