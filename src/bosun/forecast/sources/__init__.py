"""Where usage series come from besides files: a Prometheus server (:mod:`.prometheus`).

A source that cannot deliver raises :class:`SourceUnavailable` (a
:class:`bosun.errors.BosunError`), so that a caller which must keep working, such as a
load-aware scheduler plugin, can catch it and carry on without forecasts.
"""

from __future__ import annotations

from bosun.errors import BosunError, InputError


class SourceUnavailable(BosunError):  # noqa: N818 - the name the scheduler plugin catches
    """A usage source could not deliver series: unreachable, timed out, refused the
    query, or answered something that is not a usable reply."""


class SeriesRejectedError(InputError, SourceUnavailable):
    """The source answered, but a series breaks the gap policy (a long gap, too short).

    It is both an :class:`bosun.errors.InputError` (its ``problems`` name the server, the
    series and the times) and a :class:`SourceUnavailable`, so one ``except
    SourceUnavailable`` covers every way a source can fail.
    """
