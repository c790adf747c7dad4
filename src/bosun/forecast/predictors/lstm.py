"""A small LSTM forecaster in PyTorch (CPU), direct multi-step.

Network: the last ``window`` samples, standardized with the training mean and standard
deviation, go through a one-layer LSTM (Hochreiter & Schmidhuber, "Long short-term memory",
*Neural Computation* 9(8), 1997) of ``hidden`` units; a linear layer maps the last hidden
state to the next ``H_train`` standardized values at once (the direct multi-output
strategy, Ben Taieb et al., "A review and comparison of strategies for multi-step ahead
time series forecasting", *Expert Syst. Appl.* 39(8), 2012). Trained with Adam on the mean
squared error over all windows of the training series, for ``epochs`` passes in
mini-batches. A horizon longer than ``H_train`` is reached recursively (the predicted block
is fed back as input).

Determinism: ``seed`` seeds the weights and the batch order (``torch.Generator``); the
number of intra-op threads is set to ``num_threads`` for the duration of ``fit`` and of
each forward pass and restored afterwards. ``update`` appends samples without retraining.
Quantiles: localized split-conformal over the network's own past paths
(:mod:`bosun.forecast.predictors._calibration`); inside the training window these are
in-sample.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from bosun.forecast.base import FloatArray, ForecastError, horizon_steps
from bosun.forecast.predictors._base import PointPredictor
from bosun.forecast.predictors._calibration import (
    DEFAULT_ADAPTIVE,
    DEFAULT_CALIBRATION_S,
    DEFAULT_NEIGHBOURS,
    MIN_CALIBRATION,
    IntArray,
)


@contextmanager
def _threads(n: int) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class LSTMPredictor(PointPredictor):
    """One-layer LSTM, direct multi-step output.

    Args:
        window: input length in samples (default 48: four hours at 5 minutes).
        hidden: LSTM units.
        horizon_s: horizon the output layer is trained for (default 600 s); the number of
            outputs is ``horizon_steps(horizon_s, step)``.
        epochs: passes over the training windows.
        batch_size: windows per Adam step.
        learning_rate: Adam step size.
        max_windows: train on at most this many of the most recent windows.
        seed: seeds weights and batch order.
        num_threads: torch intra-op threads while training and predicting.
        calibration_s, neighbours, adaptive, gamma: see
            :class:`~bosun.forecast.predictors._base.PointPredictor`.

    ``min_samples`` is ``window + H_train + 2 * MIN_CALIBRATION``.
    """

    name = "lstm"

    def __init__(
        self,
        window: int = 48,
        hidden: int = 32,
        horizon_s: float = 600.0,
        epochs: int = 20,
        batch_size: int = 128,
        learning_rate: float = 0.005,
        max_windows: int = 8000,
        seed: int = 0,
        num_threads: int = 1,
        *,
        calibration_s: float = DEFAULT_CALIBRATION_S,
        neighbours: int = DEFAULT_NEIGHBOURS,
        adaptive: bool = DEFAULT_ADAPTIVE,
        gamma: float | None = None,
    ) -> None:
        super().__init__(
            calibration_s=calibration_s, neighbours=neighbours, adaptive=adaptive, gamma=gamma
        )
        for label, value in (
            ("window", window),
            ("hidden", hidden),
            ("epochs", epochs),
            ("batch_size", batch_size),
            ("max_windows", max_windows),
            ("num_threads", num_threads),
        ):
            if value < 1:
                raise ForecastError(f"lstm: {label} must be >= 1, got {value}")
        if not horizon_s > 0 or not learning_rate > 0:
            raise ForecastError("lstm: horizon_s and learning_rate must be positive")
        self.window = int(window)
        self.hidden = int(hidden)
        self.horizon_s = float(horizon_s)
        self.epochs = int(epochs)
        self.batch_size = int(batch_size)
        self.learning_rate = float(learning_rate)
        self.max_windows = int(max_windows)
        self.seed = int(seed)
        self.num_threads = int(num_threads)
        self._h_train = 1
        self.min_samples = self.window + 1 + 2 * MIN_CALIBRATION
        self._net: Any = None
        self._mu = 0.0
        self._sd = 1.0

    def _configure(self, step_s: float) -> None:
        self._h_train = horizon_steps(self.horizon_s, step_s)
        self.min_samples = self.window + self._h_train + 2 * MIN_CALIBRATION

    @property
    def _min_context(self) -> int:
        return self.window

    def _build(self) -> Any:
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, hidden: int, out: int) -> None:
                super().__init__()
                self.lstm = nn.LSTM(1, hidden, batch_first=True)
                self.head = nn.Linear(hidden, out)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                seq, _ = self.lstm(x.unsqueeze(-1))
                out: torch.Tensor = self.head(seq[:, -1, :])
                return out

        return Net(self.hidden, self._h_train)

    def _fit_model(self, values: FloatArray) -> None:
        import torch

        self._mu = float(values.mean())
        self._sd = float(values.std()) or 1.0
        z = (values - self._mu) / self._sd
        span = self.window + self._h_train
        starts = np.arange(0, z.shape[0] - span + 1)[-self.max_windows :]
        idx = starts[:, None] + np.arange(span)[None, :]
        data = torch.as_tensor(z[idx], dtype=torch.float32)
        x, y = data[:, : self.window], data[:, self.window :]
        with _threads(self.num_threads):
            torch.manual_seed(self.seed)
            gen = torch.Generator().manual_seed(self.seed)
            net = self._build()
            opt = torch.optim.Adam(net.parameters(), lr=self.learning_rate)
            loss_fn = torch.nn.MSELoss()
            for _ in range(self.epochs):
                order = torch.randperm(x.shape[0], generator=gen)
                for b in range(0, x.shape[0], self.batch_size):
                    sel = order[b : b + self.batch_size]
                    opt.zero_grad()
                    loss = loss_fn(net(x[sel]), y[sel])
                    loss.backward()
                    opt.step()
        net.eval()
        self._net = net

    def _paths(self, origins: IntArray, h: int) -> FloatArray:
        import torch

        z = (self._values - self._mu) / self._sd
        ctx = z[origins[:, None] - self.window + np.arange(self.window)[None, :]]
        blocks: list[FloatArray] = []
        done = 0
        with _threads(self.num_threads), torch.no_grad():
            while done < h:
                out = self._net(torch.as_tensor(ctx, dtype=torch.float32)).numpy()
                out = out.astype(np.float64)
                blocks.append(out)
                done += out.shape[1]
                ctx = np.concatenate([ctx, out], axis=1)[:, -self.window :]
        return np.concatenate(blocks, axis=1)[:, :h] * self._sd + self._mu
