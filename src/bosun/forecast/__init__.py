"""Resource profiles and usage forecasting for load-aware scheduling."""
