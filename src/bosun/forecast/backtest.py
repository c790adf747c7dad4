"""Rolling-origin backtest of a usage predictor (API spec first, then the code).

Method: time-series cross-validation with a rolling (expanding) forecast origin, as in
Hyndman & Athanasopoulos, *Forecasting: Principles and Practice* (3rd ed., 2021), §5.10
"Time series cross-validation". At each origin ``i`` the model has seen exactly the first
``i`` samples ``values[:i]`` and forecasts the next ``H = horizon_steps(horizon_s, step_s)``
samples ``values[i:i+H]``; nothing after the origin is ever shown to it before it predicts.

Call::

    result = backtest(series, "ewma", horizon_s=600.0)          # a registry name
    result = backtest(series, lambda: EWMA(alpha=0.3), 600.0)   # or a factory
    result.summary.accuracy, result.summary.overprovision_ratio

``backtest(series, model, horizon_s, *, level=0.95, levels=None, initial=None, stride=1,
max_origins=None, refit_every=None, window=None, params=None) -> BacktestResult``

- ``series``: a :class:`~bosun.forecast.base.UsageSeries` (regular step, finite values).
- ``model``: a registry name (``bosun.forecast.registry``; ``params`` are passed to
  ``create``) or a zero-argument factory returning a fresh
  :class:`~bosun.forecast.base.Predictor`.
- ``horizon_s``: forecast horizon in seconds (10 minutes = ``600.0``).
- ``level``: the pre-allocation quantile level (0.95 = P95 of the horizon peak).
- ``levels``: the quantile levels scored by the pinball loss; default
  :data:`DEFAULT_LEVELS`; ``level`` is always added.
- ``initial``: the first origin (number of samples seen before the first forecast);
  default ``max(min_samples, ceil(T / 4))``. Must be ``>= min_samples`` and leave at least
  one full horizon after it.
- ``stride``: samples between consecutive origins (1 = every sample).
- ``max_origins``: if more origins than this remain, keep this many spread evenly over the
  range (first and last kept, deterministic), to bound the cost of slow models.
- ``refit_every``: refit the model from scratch every this many origins; in between it
  receives the new samples through ``update``. ``None`` fits once at the first origin.
- ``window``: fit on at most the last ``window`` samples before the origin (``None`` = all).

Errors (:class:`~bosun.forecast.base.ForecastError`): bad horizon/level, ``initial`` below
the model's ``min_samples`` or leaving no full horizon, ``stride``/``max_origins``/
``refit_every``/``window`` not positive, an unknown model name (the registry's message).

Result (plain data; the CLI table and plot are built on it):

:class:`BacktestResult` — per-origin numpy arrays, N origins, H steps, L levels:

- ``origin_s`` (N,): timestamp (s, epoch) of the last sample seen at each origin;
- ``origin_index`` (N,): the origin ``i`` (samples seen);
- ``actual`` (N, H): the observed values ``values[i:i+H]``;
- ``mean`` (N, H): the forecast mean;
- ``quantiles`` (L, N, H): per-step quantile forecasts, one slab per ``levels[k]``;
- ``actual_peak`` (N,): ``max`` of ``actual`` over the horizon;
- ``predicted_peak`` (N,): the predicted peak quantile at ``level`` (``Forecast.peak``);
- ``peak_quantiles`` (L, N): predicted peak quantiles at each of ``levels``;
- ``abs_error`` (N,): mean over the horizon of ``|mean − actual|`` per origin;
- ``smape`` (N,): sMAPE per origin (below);
- ``covered`` (N,) bool: ``predicted_peak >= actual_peak``;
- ``summary``: a frozen :class:`BacktestSummary`.

:class:`BacktestSummary` — one row of the table:

- ``mae``: mean of ``|mean − actual|`` over all origins and steps (unit of the series);
- ``smape``: percent, mean over origins of ``200/H · Σ_h |F_h − A_h| / (|F_h| + |A_h|)``
  with ``F`` the forecast mean and ``A`` the actual (a term with ``|F|+|A| = 0`` counts 0),
  the symmetric MAPE of Makridakis (1993), range 0..200;
- ``pinball``: the quantile (pinball) loss of Koenker & Bassett (1978),
  ``ρ_τ(u) = max(τ·u, (τ−1)·u)`` with ``u = A − Q_τ``, averaged over origins, steps and
  ``levels`` (per-step quantiles; unit of the series);
- ``peak_pinball``: the same loss for the peak quantiles against the actual peak, averaged
  over origins and ``levels``;
- ``accuracy``: pre-allocation accuracy, the share (0..1) of origins whose predicted peak at
  ``level`` is ``>=`` the actual peak over the horizon;
- ``overprovision_ratio``: ``mean(predicted_peak / actual_peak)`` over the origins whose
  actual peak is > 0 (a zero or negative actual peak makes the ratio undefined, so those
  origins are left out and counted in ``n_ratio_excluded``; if every origin is left out the
  ratio is ``nan``);
- ``fit_time_s``: total seconds spent in ``fit`` (all refits), ``update_time_s`` and
  ``predict_time_s``: totals for ``update`` and ``predict``; ``n_fits``;
- identification: ``model``, ``series``, ``unit``, ``horizon_s``, ``horizon_steps``,
  ``step_s``, ``level``, ``levels``, ``n_origins``.

``BacktestSummary.as_row()`` returns the row as a ``dict`` (str -> str | int | float) for
tables and CSV.
"""
