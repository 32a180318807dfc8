"""A gateway route is asked again after a retryable error (a gateway just started answers
that a Group reader is not ready), never after a final one, and at most ROUTE_TRIES times."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mwp.agent import gateway_link
from mwp.agent.gateway_link import ROUTE_TRIES, GatewayLink, route_retry_seconds
from mwp.contracts.errors import RemoteMwpError
from mwp.core.errors import ErrorCode, MwpError


class Link:
    """What ``GatewayLink._routed`` uses of its link."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()


def refusal(code: str, *, retryable: bool, retry_after_ms: int | None = None) -> RemoteMwpError:
    wire: dict[str, Any] = {"code": code, "message": "m", "retryable": retryable}
    if retry_after_ms is not None:
        wire["retryAfterMs"] = retry_after_ms
    return RemoteMwpError(wire)


def answers(*outcomes: object) -> tuple[list[int], Any]:
    calls: list[int] = []

    async def call() -> object:
        calls.append(len(calls))
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return calls, call


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_link, "ROUTE_RETRY_SECONDS", 0.0)


async def test_a_retryable_answer_is_asked_again_and_its_answer_taken() -> None:
    calls, call = answers(refusal("INTERNAL_ERROR", retryable=True), "served")
    assert await GatewayLink._routed(Link(), call) == "served"  # type: ignore[arg-type]
    assert len(calls) == 2


async def test_a_final_refusal_is_raised_at_once() -> None:
    calls, call = answers(refusal("AUTH_FORBIDDEN", retryable=False), "never")
    with pytest.raises(MwpError) as refused:
        await GatewayLink._routed(Link(), call)  # type: ignore[arg-type]
    assert refused.value.code is ErrorCode.AUTH_FORBIDDEN and len(calls) == 1


async def test_retryable_answers_are_asked_at_most_route_tries_times() -> None:
    outcomes = [refusal("INTERNAL_ERROR", retryable=True)] * (ROUTE_TRIES + 1)
    calls, call = answers(*outcomes)
    with pytest.raises(MwpError) as refused:
        await GatewayLink._routed(Link(), call)  # type: ignore[arg-type]
    assert refused.value.retryable and len(calls) == ROUTE_TRIES


def test_the_wait_follows_retry_after_within_bounds() -> None:
    assert route_retry_seconds(refusal("RATE_LIMITED", retryable=True, retry_after_ms=250)) == 0.25
    assert route_retry_seconds(refusal("RATE_LIMITED", retryable=True, retry_after_ms=10**9)) == (
        gateway_link.ROUTE_RETRY_MAX_SECONDS
    )
    assert route_retry_seconds(refusal("INTERNAL_ERROR", retryable=True)) == (
        gateway_link.ROUTE_RETRY_SECONDS
    )
