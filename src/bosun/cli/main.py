"""The full ``bosun`` app: command groups live in their own modules.

The executable enters through :func:`bosun.cli.entry.run`, which skips this module for
``bosun serve`` (start-up time); tests and ``python -m bosun.cli.main`` use :data:`app`.
"""

from __future__ import annotations

from bosun.cli import batch, colocation, explain, federation, workload
from bosun.cli.entry import new_app
from bosun.cli.experiment import app as experiment_app
from bosun.cli.forecast import app as forecast_app
from bosun.cli.rl import app as rl_app
from bosun.cli.schedule import schedule
from bosun.cli.serve import serve
from bosun.cli.simulate import simulate
from bosun.cli.snapshot import snapshot

app = new_app()
app.command(name="schedule")(schedule)
app.command(name="simulate")(simulate)
app.command(name="snapshot")(snapshot)
app.command(name="serve")(serve)
app.add_typer(experiment_app, name="experiment")
app.add_typer(rl_app, name="rl")
app.add_typer(forecast_app, name="forecast")
# each capability's module adds its own commands (heavy imports stay inside the commands)
for _capability in (explain, batch, federation, colocation, workload):
    _capability.register(app)


if __name__ == "__main__":  # pragma: no cover
    app()
