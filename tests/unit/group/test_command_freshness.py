"""A newly presented Command must be fresh (spec 6): its issuedAt within the Organization's
window of the Authority's clock (300 s old, 30 s ahead by default). A byte-equal retry of an
accepted Command still gets its receipt however late it comes; once its receipt has left the
bounded receipt window it could be applied twice, so the window closes before that point."""

from __future__ import annotations

import json

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import GroupAuthority
from mwp.core.group.clock import plus_seconds
from tests.unit.group.harness import T0, W1, W2, Harness, mission_harness

TEXT = {"content": [{"type": "text", "text": "Status."}]}


@pytest.mark.parametrize("seconds", [-300, 30])
def test_a_command_at_the_edge_of_the_window_is_accepted(seconds: int) -> None:
    h = mission_harness()
    outcome = h.send(h.command(W1, "message.post", TEXT, issuedAt=plus_seconds(h.now, seconds)))
    assert outcome.events[0]["kind"] == "message.posted"


@pytest.mark.parametrize("seconds", [-301, 31])
def test_a_stale_or_future_command_is_refused_and_changes_nothing(seconds: int) -> None:
    h = mission_harness()
    error = h.refuse(
        h.command(W1, "message.post", TEXT, issuedAt=plus_seconds(h.now, seconds)),
        ErrorCode.AUTH_INVALID_SIGNATURE,
    )
    # The wire does not say which check failed; the protected diagnostic does.
    assert error.diagnostic is not None and error.diagnostic.stage == "freshness"


def test_a_retry_of_an_accepted_command_gets_its_receipt_however_late() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    original = h.send(command)
    h.advance(3600)
    assert h.send(command).receipt == original.receipt


def test_a_command_issued_before_the_receipt_horizon_is_refused_as_not_fresh() -> None:
    # Receipts for four Commands: the retry of an evicted one cannot be recognized, so every
    # Command issued before the evicted one was accepted (plus the 30 s skew) is refused.
    h = Harness(GroupAuthority(receipt_window=4))
    h.create_mission()
    h.admit(W1)
    h.admit(W2)
    first = h.command(W1, "message.post", TEXT)
    h.send(first)
    h.advance(31)
    for _ in range(4):
        h.submit(W2, "message.post", TEXT)  # evicts the first receipt
    assert h.authority.snapshot()["state"]["receipts"]["horizonTime"] == T0

    error = h.refuse(first, ErrorCode.AUTH_INVALID_SIGNATURE)  # never applied twice
    assert error.diagnostic is not None and error.diagnostic.reason == "issued-before-horizon"
    late = h.command(W1, "message.post", TEXT, issuedAt=plus_seconds(T0, 30))
    h.refuse(late, ErrorCode.AUTH_INVALID_SIGNATURE)  # within the plain window, but too early
    # The horizon survives continue-as-new.
    h.authority = GroupAuthority.restore(json.loads(json.dumps(h.authority.snapshot())))
    h.refuse(first, ErrorCode.AUTH_INVALID_SIGNATURE)
    # A Command issued after it (and the skew) is new and fresh.
    fresh = h.send(h.command(W1, "message.post", TEXT, issuedAt=plus_seconds(T0, 31)))
    assert fresh.events[0]["kind"] == "message.posted"
