"""The wait before a runtime tries its gateway again: soon at first, growing, capped, and
back to the first once a connection came up."""

from __future__ import annotations

import pytest

from mwp.agent.reconnect import FIRST_SECONDS, GROWTH, MAX_SECONDS, Reconnect


def test_the_first_try_comes_soon_then_less_and_less_often_up_to_the_cap() -> None:
    reconnect = Reconnect()
    waits = [reconnect.next_wait() for _ in range(20)]
    expected = [FIRST_SECONDS, FIRST_SECONDS * GROWTH, FIRST_SECONDS * GROWTH**2]
    assert waits[:3] == pytest.approx(expected)
    assert sum(waits[:3]) < 0.5  # a gateway back within half a second is found by then
    assert waits[-1] == MAX_SECONDS
    assert waits == sorted(waits)


def test_a_connection_that_came_up_starts_the_schedule_again() -> None:
    reconnect = Reconnect()
    for _ in range(5):
        reconnect.next_wait()
    reconnect.connected()
    assert reconnect.next_wait() == FIRST_SECONDS
