"""Whole-second time for the Scheduler: the shell passes ``now`` in; nothing here reads a clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache

from mwp.core.wire.values import format_utc, parse_timestamp

_EPOCH = datetime(1, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=65536)
def seconds(timestamp: str) -> int:
    """Whole seconds since 0001-01-01T00:00:00Z (fractions are below scheduling precision)."""
    return parse_timestamp(timestamp).instant.seconds


def timestamp(value: int) -> str:
    """The canonical UTC ``Z`` spelling of :func:`seconds`' scale."""
    return format_utc(_EPOCH + timedelta(seconds=value))
