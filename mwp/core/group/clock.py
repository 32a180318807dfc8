"""Timestamp arithmetic on protocol timestamps; the only clock is the one the shell passes in."""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache

from mwp.core.wire.values import Instant, format_utc, instant_to_datetime, parse_timestamp


@lru_cache(maxsize=16384)
def instant(timestamp: str) -> Instant:
    """The exact instant a protocol timestamp names (memoized: the same texts recur)."""
    return parse_timestamp(timestamp).instant


def reached(now: str, deadline: str) -> bool:
    """Whether ``deadline`` has passed at ``now`` (a deadline is exclusive: at it, it is over)."""
    return instant(now) >= instant(deadline)


def plus_seconds(timestamp: str, seconds: int) -> str:
    """``timestamp`` moved forward, in the canonical UTC ``Z`` spelling."""
    return format_utc(instant_to_datetime(instant(timestamp)) + timedelta(seconds=seconds))


def later(first: str, second: str) -> str:
    return first if instant(first) >= instant(second) else second
