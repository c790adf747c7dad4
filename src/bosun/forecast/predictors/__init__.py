"""The forecasting models, one module per family, all behind the
:class:`~bosun.forecast.base.Predictor` contract.

- :class:`SeasonalNaive`, :class:`EWMA` (:mod:`.naive`, :mod:`.ewma`): baselines, also
  vectorized :class:`~bosun.forecast.base.BatchPredictor`.
- :class:`AutoETS`, :class:`MSTL` (:mod:`.statistical`): statsforecast models.
- :class:`ProphetPredictor` (:mod:`.prophet_model`): Meta's Prophet.
- :class:`LSTMPredictor` (:mod:`.lstm`): a small PyTorch LSTM.

Heavy libraries (statsforecast, prophet, torch) are imported only when their predictor is
constructed. Every predictor's quantiles come from the same localized split-conformal
calibration (:mod:`._calibration`); ``predict`` adapts the level of the peak quantiles
online (adaptive conformal inference, ``adaptive=True`` by default); the stateless
``predict_batch`` of the baselines takes per-row working levels, which
:class:`bosun.forecast.provider.HistoryForecaster` adapts across refreshes.
"""

from __future__ import annotations

from bosun.forecast.predictors.ewma import EWMA
from bosun.forecast.predictors.naive import SeasonalNaive

__all__ = ["EWMA", "SeasonalNaive"]
